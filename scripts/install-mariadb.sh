#!/usr/bin/env bash
# Install MariaDB's server binaries (mariadbd, mariadb-install-db) from the machine's Debian/Ubuntu
# packages when they are missing. Idempotent and quiet. Only the -core packages are installed: they
# carry no system service, so nothing gets started or enabled and port 3306 stays untouched.
set -euo pipefail

PATH="$PATH:/usr/sbin:/sbin"
if command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null; then
  exit 0
fi

PKGS=(mariadb-server-core mariadb-client-core)
if ! command -v apt-get >/dev/null; then
  echo "install-mariadb: apt-get is not available; install MariaDB 10.11 (${PKGS[*]} or your system's equivalent) by hand" >&2
  exit 1
fi
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "install-mariadb: run as root (or with passwordless sudo) to apt-get install ${PKGS[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
install() { "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null; }
# Update the package lists only when they are missing or too old to install from.
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null || ! install 2>/dev/null; then
  "${SUDO[@]}" apt-get update -qq >/dev/null
  if ! install; then
    echo "install-mariadb: apt-get install ${PKGS[*]} failed" >&2
    exit 1
  fi
fi
command -v mariadbd >/dev/null
