// The local provider against real MySQL 9.7 and MariaDB 10.11 servers.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Engine,
  LocalServer,
  PortInUseError,
  ServerStartError,
  instancesRoot,
  isProcessRunning,
  startServers,
} from '../../src/servers/index.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { CLI_NODE_ARGS } from '../../src/harness/replicator-process.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

async function query(server: LocalServer, sql: string): Promise<mysql.RowDataPacket[]> {
  const conn = await mysql.createConnection({ uri: server.url });
  try {
    const [rows] = await conn.query<mysql.RowDataPacket[]>(sql);
    return rows;
  } finally {
    await conn.end();
  }
}

async function startLocal(engine: Engine, count: number): Promise<LocalServer[]> {
  const servers = await startServers({ engine, count, provider: 'local' });
  return servers.map((s) => {
    if (!(s instanceof LocalServer)) throw new Error('expected a local server');
    return s;
  });
}

async function myInstanceDirs(): Promise<string[]> {
  const names = await readdir(instancesRoot()).catch(() => [] as string[]);
  return names.filter((n) => n.includes(`-${process.pid}-`));
}

describe('two servers of each engine started at once', () => {
  const servers: LocalServer[] = [];

  beforeAll(async () => {
    const [mysqls, mariadbs] = await Promise.all([startLocal('mysql', 2), startLocal('mariadb', 2)]);
    servers.push(...mysqls, ...mariadbs);
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.destroy()));
  });

  it('each answers as its engine with ROW binlog, FULL row images and its own server_id', async () => {
    expect(servers.map((s) => s.engine)).toEqual(['mysql', 'mysql', 'mariadb', 'mariadb']);
    const seenIds = new Set<number>();
    for (const server of servers) {
      const [row] = await query(
        server,
        'SELECT VERSION() AS version, @@log_bin AS logBin, @@binlog_format AS format, ' +
          '@@binlog_row_image AS image, @@server_id AS serverId, CURRENT_USER() AS account',
      );
      if (server.engine === 'mysql') expect(row?.version).toMatch(/^9\.7\./);
      else expect(row?.version).toContain('MariaDB');
      expect(row).toMatchObject({ logBin: 1, format: 'ROW', image: 'FULL', serverId: server.serverId });
      seenIds.add(Number(row?.serverId));
      expect(server.host).toBe('127.0.0.1');
      expect(server.url).toBe(`mysql://root:@127.0.0.1:${server.port}/`);
    }
    expect(seenIds.size).toBe(servers.length);
    const [mysqlGtid] = await query(servers[0]!, 'SELECT @@gtid_mode AS mode');
    expect(mysqlGtid?.mode).toBe('ON');
  });

  it('root can grant privileges over TCP', async () => {
    for (const server of servers) {
      const grants = await query(server, 'SHOW GRANTS');
      expect(Object.values(grants[0] ?? {}).join(' ')).toMatch(/WITH GRANT OPTION/);
    }
  });

  it('a halted or crashed server comes back on the same port with its data', async () => {
    const mysqlServer = servers[0]!;
    const mariadbServer = servers[2]!;
    await Promise.all(
      [mysqlServer, mariadbServer].map(async (server) => {
        await query(server, 'CREATE DATABASE kept');
        await query(server, 'CREATE TABLE kept.t (id INT PRIMARY KEY)');
        const port = server.port;
        for (const [id, abrupt] of [
          [1, false],
          [2, true],
        ] as const) {
          await query(server, `INSERT INTO kept.t VALUES (${id})`);
          await server.halt({ abrupt });
          expect(server.pid).toBeUndefined();
          await expect(query(server, 'SELECT 1')).rejects.toThrow();
          await server.start();
          expect(server.port).toBe(port);
        }
        expect(await query(server, 'SELECT id FROM kept.t ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
      }),
    );
  });

  it('destroy stops every process and removes every data dir', async () => {
    const pids = servers.map((s) => s.pid);
    expect(pids.every((p) => p !== undefined && isProcessRunning(p))).toBe(true);
    await Promise.all(servers.map((s) => s.destroy()));
    await Promise.all(servers.map((s) => s.destroy())); // idempotent
    for (const [i, server] of servers.entries()) {
      expect(isProcessRunning(pids[i]!)).toBe(false);
      expect(existsSync(server.dir)).toBe(false);
    }
  });
});

describe('failures', () => {
  it('a server left behind by a SIGKILLed process is stopped and removed by the next start', async () => {
    const entry = pathToFileURL(join(REPO, 'src/servers/index.ts')).href;
    const script = `
      const { startServers } = await import(${JSON.stringify(entry)});
      const [s] = await startServers({ engine: 'mariadb', count: 1, provider: 'local' });
      console.log(JSON.stringify({ dir: s.dir, pid: s.pid }));
      setInterval(() => {}, 1 << 30);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const left = JSON.parse(await firstLine(child)) as { dir: string; pid: number };
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    expect(isProcessRunning(left.pid)).toBe(true);

    const [next] = await startLocal('mariadb', 1);
    try {
      expect(isProcessRunning(left.pid)).toBe(false);
      expect(existsSync(left.dir)).toBe(false);
    } finally {
      await next?.destroy();
    }
  });

  it('a server that cannot start reports the tail of its log and leaves nothing behind', async () => {
    const before = await myInstanceDirs();
    for (const engine of ['mysql', 'mariadb'] as const) {
      const failure = startServers({ engine, provider: 'local', extraArgs: ['--no-such-option-for-lww-test'] });
      await expect(failure).rejects.toThrow(ServerStartError);
      await expect(failure).rejects.toThrow(/unknown (option|variable).*no-such-option-for-lww-test/i);
    }
    expect(await myInstanceDirs()).toEqual(before);
  });

  it('asking for a port that is taken fails with an error naming the port', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      const failure = startServers({ engine: 'mariadb', provider: 'local', ports: [port] });
      await expect(failure).rejects.toThrow(PortInUseError);
      await expect(failure).rejects.toThrow(`port ${port}`);
    } finally {
      blocker.close();
    }
  });
});

describeEachEngine('the per-engine test helper', 1, (ctx) => {
  it('gives the block running servers of its engine', async () => {
    expect(ctx.servers).toHaveLength(1);
    expect(ctx.servers[0]?.engine).toBe(ctx.engine);
    const conn = await mysql.createConnection({ uri: ctx.servers[0]!.url });
    try {
      const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT VERSION() AS v');
      expect(String(rows[0]?.v).includes('MariaDB')).toBe(ctx.engine === 'mariadb');
    } finally {
      await conn.end();
    }
  });
});

describe('lww-sink servers', () => {
  let stateDir = '';
  beforeAll(async () => {
    stateDir = await mkdtemp(join(tmpdir(), 'lww-servers-cli-'));
  });
  afterAll(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  it('`up --json` prints endpoints that answer, and `down` stops them', async () => {
    const env = { ...process.env, LWW_SERVERS_STATE_FILE: join(stateDir, 'state.json'), LWW_PROVIDER: 'local' };
    const up = spawn(process.execPath, [...CLI_NODE_ARGS, 'servers', 'up', '--engine', 'mariadb', '--count', '1', '--json'], {
      cwd: REPO,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => up.once('exit', resolve));
    let out = '';
    up.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    await new Promise<void>((resolve, reject) => {
      up.stderr?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('server(s) up')) resolve();
      });
      up.once('exit', (code) => reject(new Error(`servers up exited early with ${code}`)));
    });
    const [endpoint] = JSON.parse(out) as { url: string; engine: string }[];
    expect(endpoint?.engine).toBe('mariadb');
    const conn = await mysql.createConnection({ uri: endpoint!.url });
    await conn.end();

    await promisify(execFile)(process.execPath, [...CLI_NODE_ARGS, 'servers', 'down'], { cwd: REPO, env });
    expect(await exited).toBe(0);
    await expect(mysql.createConnection({ uri: endpoint!.url })).rejects.toThrow();
    expect(existsSync(join(stateDir, 'state.json'))).toBe(false);
  });
});

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const newline = buffered.indexOf('\n');
      if (newline >= 0) resolve(buffered.slice(0, newline));
    });
    child.once('exit', (code) => reject(new Error(`child exited with ${code} before printing`)));
  });
}
