// Server binaries on this machine and the initialized data directory each instance copies.
//
// MariaDB comes from the machine's packages (scripts/install-mariadb.sh installs them when missing);
// MySQL 9.7 is unpacked into a cache by scripts/install-mysql97.sh and run through its own loader,
// because it needs a newer libc than the machine has. Initializing a data dir takes seconds, so it
// is done once per engine version into the cache and copied per instance.
import { execFile, spawn } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, openSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { DataDirInitError, ProviderUnavailableError } from './errors.ts';
import { ROOT_ACCOUNT_SQL } from './flags.ts';
import type { Engine } from './types.ts';

const execFileAsync = promisify(execFile);

/** How to run one engine's server: `command ...prefixArgs ...serverArgs`. */
export interface EngineBinaries {
  engine: Engine;
  command: string;
  prefixArgs: string[];
  /** MySQL's error-message folder inside the unpacked tree. */
  messagesDir?: string;
  /** e.g. "9.7.4-2" or "10.11.19-MariaDB-0+deb12u1". */
  version: string;
  /** MariaDB's data-dir initializer. */
  installDb?: string;
}

export function cacheDir(): string {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'mysql-lww-sink');
}

const SCRIPTS = fileURLToPath(new URL('../../scripts/', import.meta.url));
const MARIADB_PACKAGES = 'mariadb-server-core mariadb-client-core';

/** Finds an executable on PATH or in the given folders. */
export function findExecutable(name: string, extraDirs: string[] = []): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), ...extraDirs].filter(Boolean);
  for (const dir of dirs) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

function findMariadb(): { server: string; installDb: string } | undefined {
  const server = findExecutable('mariadbd', ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin']);
  const installDb = findExecutable('mariadb-install-db', ['/usr/bin', '/usr/local/bin', '/usr/local/scripts']);
  return server && installDb ? { server, installDb } : undefined;
}

function mysqlCacheRoot(): string {
  return process.env.LWW_MYSQL_CACHE ? join(process.env.LWW_MYSQL_CACHE, 'root') : join(cacheDir(), 'mysql-9.7', 'root');
}

/** True when the engine's binaries are here or can be installed (used to pick a provider). */
export function canRunLocally(engine: Engine): boolean {
  if (process.platform !== 'linux') return false;
  const present = engine === 'mariadb' ? findMariadb() !== undefined : existsSync(join(mysqlCacheRoot(), 'usr/sbin/mysqld'));
  return present || (findExecutable('apt-get', ['/usr/bin']) !== undefined && findExecutable('dpkg', ['/usr/bin']) !== undefined);
}

export function installHint(engine: Engine): string {
  return engine === 'mariadb'
    ? `install MariaDB 10.11 (Debian/Ubuntu: apt-get install ${MARIADB_PACKAGES}), or run the tests with Docker`
    : 'run scripts/install-mysql97.sh (needs apt-get and dpkg on a Debian-based machine), or run the tests with Docker';
}

const binaries = new Map<Engine, Promise<EngineBinaries>>();

/** The engine's binaries, installed first when missing. Memoized per process. */
export function ensureBinaries(engine: Engine): Promise<EngineBinaries> {
  let pending = binaries.get(engine);
  if (!pending) {
    pending = engine === 'mariadb' ? mariadbBinaries() : mysqlBinaries();
    pending.catch(() => binaries.delete(engine));
    binaries.set(engine, pending);
  }
  return pending;
}

async function runScript(engine: Engine, script: string): Promise<string> {
  try {
    const { stdout } = await execFileAsync('bash', [join(SCRIPTS, script)], { maxBuffer: 16 << 20 });
    return stdout;
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    const detail = (err.stderr || err.message).trim().split('\n').slice(-10).join('\n');
    throw new ProviderUnavailableError(`cannot install ${engine} with scripts/${script}: ${installHint(engine)}\n${detail}`);
  }
}

async function mariadbBinaries(): Promise<EngineBinaries> {
  let found = findMariadb();
  if (!found) {
    await runScript('mariadb', 'install-mariadb.sh');
    found = findMariadb();
    if (!found) throw new ProviderUnavailableError(`mariadbd is still missing after install: ${installHint('mariadb')}`);
  }
  const version = await serverVersion(found.server, []);
  return { engine: 'mariadb', command: found.server, prefixArgs: [], version, installDb: found.installDb };
}

async function mysqlBinaries(): Promise<EngineBinaries> {
  const root = (await runScript('mysql', 'install-mysql97.sh')).trim().split('\n').pop() ?? '';
  const libDir = readdirSync(join(root, 'usr/lib'))
    .filter((d) => d.endsWith('-linux-gnu'))
    .map((d) => join(root, 'usr/lib', d))
    .find((d) => readdirSync(d).some((f) => f.startsWith('ld-linux')));
  const loader = libDir && readdirSync(libDir).find((f) => f.startsWith('ld-linux'));
  if (!libDir || !loader) throw new ProviderUnavailableError(`no dynamic loader under ${root}/usr/lib: ${installHint('mysql')}`);
  const prefixArgs = ['--library-path', libDir, join(root, 'usr/sbin/mysqld')];
  const command = join(libDir, loader);
  const version = await serverVersion(command, prefixArgs);
  return { engine: 'mysql', command, prefixArgs, version, messagesDir: join(root, 'usr/share/mysql') };
}

async function serverVersion(command: string, prefixArgs: string[]): Promise<string> {
  const { stdout } = await execFileAsync(command, [...prefixArgs, '--version']);
  const match = /\bVer\s+(\S+)/.exec(stdout);
  if (!match?.[1]) throw new ProviderUnavailableError(`cannot read the server version from: ${stdout.trim()}`);
  return match[1];
}

/** Runs a command with its output appended to a log file; resolves with the exit code. */
export function runToLog(command: string, args: string[], logPath: string): Promise<number> {
  const fd = openSync(logPath, 'a');
  return new Promise<number>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', fd, fd] });
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  }).finally(() => closeSync(fd));
}

/** The last `count` lines of the given logs (missing files are skipped). */
export async function tailOfLogs(paths: string[], count = 20): Promise<string> {
  const lines: string[] = [];
  for (const path of paths) {
    const text = await readFile(path, 'utf8').catch(() => '');
    lines.push(...text.split('\n').filter((l) => l.trim() !== ''));
  }
  return lines.slice(-count).join('\n');
}

/** Bumped when the template's contents change (e.g. new accounts). */
const TEMPLATE_REVISION = 1;
const templates = new Map<Engine, Promise<string>>();

/** A data dir initialized once per engine version (root with empty password, root@'%'). */
export function ensureTemplate(bin: EngineBinaries): Promise<string> {
  let pending = templates.get(bin.engine);
  if (!pending) {
    pending = buildTemplate(bin);
    pending.catch(() => templates.delete(bin.engine));
    templates.set(bin.engine, pending);
  }
  return pending;
}

async function buildTemplate(bin: EngineBinaries): Promise<string> {
  const root = join(cacheDir(), 'templates');
  const final = join(root, `${bin.engine}-${bin.version.replace(/[^\w.+-]/g, '_')}-r${TEMPLATE_REVISION}`);
  // Complete or absent: templates appear by an atomic rename.
  if (existsSync(final)) return final;
  await mkdir(root, { recursive: true });
  const work = await mkdtemp(join(root, `.build-${bin.engine}-`));
  const dataDir = join(work, 'data');
  const logPath = join(work, 'init.log');
  const sqlPath = join(work, 'init.sql');
  try {
    const runAsRoot = process.getuid?.() === 0 ? ['--user=root'] : [];
    let code: number;
    if (bin.engine === 'mysql') {
      await writeFile(sqlPath, ROOT_ACCOUNT_SQL.map((s) => `${s};\n`).join(''));
      code = await runToLog(
        bin.command,
        [
          ...bin.prefixArgs,
          '--no-defaults',
          '--initialize-insecure',
          `--datadir=${dataDir}`,
          `--log-error=${logPath}`,
          `--init-file=${sqlPath}`,
          ...(bin.messagesDir ? [`--lc-messages-dir=${bin.messagesDir}`] : []),
          ...runAsRoot,
        ],
        logPath,
      );
      // Each copy must generate its own server_uuid.
      await rm(join(dataDir, 'auto.cnf'), { force: true });
    } else {
      // Bootstrap runs without grant tables loaded; FLUSH PRIVILEGES loads them for the GRANT.
      await writeFile(sqlPath, ['FLUSH PRIVILEGES', ...ROOT_ACCOUNT_SQL].map((s) => `${s};\n`).join(''));
      code = await runToLog(
        bin.installDb ?? 'mariadb-install-db',
        [
          '--no-defaults',
          `--datadir=${dataDir}`,
          '--auth-root-authentication-method=normal',
          '--skip-test-db',
          '--skip-name-resolve',
          `--extra-file=${sqlPath}`,
          ...runAsRoot,
        ],
        logPath,
      );
    }
    if (code !== 0 || !existsSync(join(dataDir, 'mysql'))) {
      const kept = join(root, `failed-init-${bin.engine}.log`);
      await rename(logPath, kept).catch(() => undefined);
      throw new DataDirInitError(bin.engine, kept, await tailOfLogs([kept]));
    }
    try {
      await rename(dataDir, final);
    } catch (e) {
      // Another process finished the same template first: use theirs.
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw e;
    }
    return final;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
