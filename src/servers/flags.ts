// The server flags every provider uses, as pure functions so they are tested by exact text.
import { join } from 'node:path';
import type { Engine } from './types.ts';

/** Settings the sink relies on (ROW binlog with full images, GTIDs) plus test-speed settings. */
export function serverFlags(engine: Engine, serverId: number): string[] {
  const common = [
    `--server-id=${serverId}`,
    '--log-bin=binlog',
    '--binlog-row-image=FULL',
    '--binlog-row-metadata=FULL',
    '--skip-name-resolve',
    '--innodb-buffer-pool-size=256M',
    '--performance-schema=OFF',
    '--innodb-flush-log-at-trx-commit=2',
    '--sync-binlog=0',
    '--max-connections=500',
    '--character-set-server=utf8mb4',
  ];
  if (engine === 'mysql') {
    // ROW is MySQL's default and binlog_format is deprecated there; MariaDB has GTIDs always.
    return [...common, '--gtid-mode=ON', '--enforce-gtid-consistency=ON', '--mysqlx=OFF'];
  }
  return [...common, '--binlog-format=ROW', '--collation-server=utf8mb4_general_ci'];
}

/** Paths of one local instance: everything lives under its own folder. */
export interface InstancePaths {
  dir: string;
  dataDir: string;
  socket: string;
  pidFile: string;
  errorLog: string;
  /** The server's stdout/stderr (flag errors land here before the error log is open). */
  consoleLog: string;
  filesDir: string;
  /** Temporary tables and sort files: the instance's own, so servers never share /tmp files. */
  tmpDir: string;
}

export function instancePaths(dir: string): InstancePaths {
  return {
    dir,
    dataDir: join(dir, 'data'),
    socket: join(dir, 'mysqld.sock'),
    pidFile: join(dir, 'mysqld.pid'),
    errorLog: join(dir, 'error.log'),
    consoleLog: join(dir, 'console.log'),
    filesDir: join(dir, 'files'),
    tmpDir: join(dir, 'tmp'),
  };
}

export interface LocalFlagInput {
  engine: Engine;
  serverId: number;
  port: number;
  paths: InstancePaths;
  /** MySQL's error-message folder (it is not where the unpacked binary would look). */
  messagesDir?: string;
  /** mysqld refuses to run as root without it. */
  runAsRoot: boolean;
  extraArgs?: string[];
}

/** Full argument list for a local mysqld/mariadbd (--no-defaults must come first). */
export function localServerArgs(input: LocalFlagInput): string[] {
  const { paths } = input;
  return [
    '--no-defaults',
    `--datadir=${paths.dataDir}`,
    `--port=${input.port}`,
    '--bind-address=127.0.0.1',
    `--socket=${paths.socket}`,
    `--pid-file=${paths.pidFile}`,
    `--log-error=${paths.errorLog}`,
    `--secure-file-priv=${paths.filesDir}`,
    `--tmpdir=${paths.tmpDir}`,
    ...(input.messagesDir ? [`--lc-messages-dir=${input.messagesDir}`] : []),
    ...(input.runAsRoot ? ['--user=root'] : []),
    ...serverFlags(input.engine, input.serverId),
    ...(input.extraArgs ?? []),
  ];
}

/** The root account every provider gives: all privileges, reachable over TCP from anywhere. */
export const ROOT_ACCOUNT_SQL = [
  "CREATE USER IF NOT EXISTS 'root'@'%'",
  "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION",
];
