import { describe, expect, it } from 'vitest';
import { instancePaths, localServerArgs, serverFlags } from '../../src/servers/flags.ts';

describe('server flags', () => {
  it('MySQL gets ROW binlog with full images, GTIDs on and no X plugin', () => {
    expect(serverFlags('mysql', 42)).toEqual([
      '--server-id=42',
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
      '--gtid-mode=ON',
      '--enforce-gtid-consistency=ON',
      '--mysqlx=OFF',
    ]);
  });

  it('MariaDB is told ROW format and a utf8mb4 collation it knows', () => {
    const flags = serverFlags('mariadb', 7);
    expect(flags).toContain('--binlog-format=ROW');
    expect(flags).toContain('--collation-server=utf8mb4_general_ci');
    expect(flags.some((f) => f.startsWith('--gtid-mode'))).toBe(false);
  });

  it('a local server keeps everything in its folder, listens on loopback only, and extra flags come last', () => {
    const args = localServerArgs({
      engine: 'mysql',
      serverId: 9,
      port: 23456,
      paths: instancePaths('/tmp/i/x'),
      messagesDir: '/opt/mysql/share',
      runAsRoot: true,
      extraArgs: ['--binlog-row-image=MINIMAL'],
    });
    expect(args[0]).toBe('--no-defaults');
    expect(args).toEqual(
      expect.arrayContaining([
        '--datadir=/tmp/i/x/data',
        '--port=23456',
        '--bind-address=127.0.0.1',
        '--socket=/tmp/i/x/mysqld.sock',
        '--pid-file=/tmp/i/x/mysqld.pid',
        '--log-error=/tmp/i/x/error.log',
        '--secure-file-priv=/tmp/i/x/files',
        '--tmpdir=/tmp/i/x/tmp',
        '--lc-messages-dir=/opt/mysql/share',
        '--user=root',
      ]),
    );
    expect(args.at(-1)).toBe('--binlog-row-image=MINIMAL');
  });

  it('no --user flag when not running as root', () => {
    const args = localServerArgs({ engine: 'mariadb', serverId: 1, port: 1, paths: instancePaths('/d'), runAsRoot: false });
    expect(args.some((a) => a.startsWith('--user'))).toBe(false);
    expect(args.some((a) => a.startsWith('--lc-messages-dir'))).toBe(false);
  });
});
