#!/usr/bin/env bash
# Fetch MySQL 9.7 (mysql-server-core from Debian sid) and the libraries its mysqld links against,
# unpacked into a cache folder outside the repo. Idempotent: a complete cache is reused as is.
# The machine's own libc is too old for it, so mysqld is started through the unpacked loader.
set -euo pipefail

CACHE="${LWW_MYSQL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysql-lww-sink/mysql-9.7}"
ROOT="$CACHE/root"
if [[ -x "$ROOT/usr/sbin/mysqld" && -f "$CACHE/.complete" ]]; then
  echo "$ROOT"
  exit 0
fi

# The machine's Debian mirror, read from its apt sources (never a hard-coded host).
MIRROR="$(grep -rhoE '^URIs:\s*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)"
if [[ -z "$MIRROR" ]]; then
  MIRROR="$(grep -hoE '^deb\s+(\[[^]]*\]\s+)?\S+' /etc/apt/sources.list 2>/dev/null | awk '{print $NF}' | grep -v security | head -1 || true)"
fi
if [[ -z "$MIRROR" ]]; then
  echo "install-mysql97: cannot find a Debian mirror in /etc/apt/sources.list{,.d}" >&2
  exit 1
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/debs" "$WORK/archives/partial"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$KEYRING] $MIRROR sid main" > "$WORK/sources.list"
APT_OPTS=(-o "Dir::Etc::SourceList=$WORK/sources.list" -o "Dir::Etc::SourceParts=-"
  -o "Dir::State::Lists=$WORK/lists" -o "Dir::Cache::Archives=$WORK/archives"
  -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
apt-get -qq "${APT_OPTS[@]}" update >&2

PKGS=(mysql-server-core libc6 libstdc++6 libgcc-s1 libicu78 libssl3t64 libzstd1
  libprotobuf-lite32t64 zlib1g liblz4-1 libaio1t64 libnuma1 libgoogle-perftools4t64
  libunwind8 libtcmalloc-minimal4t64)
(cd "$WORK/debs" && apt-get -qq "${APT_OPTS[@]}" download "${PKGS[@]}" >&2)

rm -rf "$ROOT"
mkdir -p "$ROOT"
for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$ROOT"; done
"$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$ROOT/usr/lib/x86_64-linux-gnu" \
  "$ROOT/usr/sbin/mysqld" --version >&2
touch "$CACHE/.complete"
echo "$ROOT"
