// Operating the tool as documented: credentials from a config file and the environment (never argv),
// a hostile password (`/`, `@`, `:`, `%`) that is never printed, `install --dry-run` that writes
// nothing, the ops endpoint (/metrics names, /healthz, /status), and replicate, check and sync run
// under exactly the grants README lists.
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CLI_NODE_ARGS } from '../../src/harness/replicator-process.ts';
import { type OpsServer, serveOps } from '../../src/replicator/metrics.ts';
import type { Replicator } from '../../src/replicator/replicator.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { eventually, setupNodes, startReplicator } from '../helpers/replication.ts';

const DB = 'ops';
const PASSWORD = 's/e@c:r%et';
const DDL = [
  'CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL)',
  'CREATE TABLE {{db}}.fresh (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)',
];
// Exactly the grants README lists (section "Privileges").
const GRANTS: Record<string, string[]> = {
  lww_repl: [
    'GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {u}',
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ${DB}.* TO {u}`,
    'GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON lww_meta.* TO {u}',
  ],
  lww_check: [`GRANT SELECT ON ${DB}.* TO {u}`, 'GRANT SELECT ON lww_meta.* TO {u}'],
  lww_sync: [`GRANT SELECT, INSERT, UPDATE, DELETE ON ${DB}.* TO {u}`, 'GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON lww_meta.* TO {u}'],
};

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI_NODE_ARGS, ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

const rows = async (c: Connection, sql: string, params: unknown[] = []) => (await c.query<RowDataPacket[]>(sql, params))[0];
const leaks = (text: string) => [PASSWORD, encodeURIComponent(PASSWORD)].filter((p) => text.includes(p));

describeEachEngine('operating lww-sink', 2, (ctx) => {
  let conns: Connection[] = [];
  let dir = '';
  const endpoints = () => ctx.servers.map((s) => ({ host: s.host, port: s.port }));
  const rawUrl = (user: string, i: number) => `mysql://${user}:${PASSWORD}@${ctx.servers[i]!.host}:${ctx.servers[i]!.port}/`;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lww-operate-'));
    conns = await setupNodes(
      ctx.servers.map((s) => s.url),
      DB,
      DDL,
      ['t'],
    );
    for (const c of conns) {
      for (const [user, grants] of Object.entries(GRANTS)) {
        await c.query("CREATE USER ?@'%' IDENTIFIED BY ?", [user, PASSWORD]);
        for (const g of grants) await c.query(g.replace('{u}', `'${user}'@'%'`));
      }
    }
  });
  afterAll(async () => {
    await Promise.all(conns.map((c) => c.end()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('install --dry-run prints the exact DDL and triggers and changes nothing', async () => {
    const config = join(dir, 'install.json');
    await writeFile(config, JSON.stringify({ nodes: [{ host: endpoints()[0]!.host, port: endpoints()[0]!.port, user: 'root', nodeId: 1 }] }));
    const registered = (await rows(conns[0]!, 'SELECT COUNT(*) AS n FROM lww_meta.tables'))[0]!.n;
    const r = await cli(['install', '--config', config, '--node-id', '1', '--tables', `${DB}.fresh`, '--dry-run']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`ALTER TABLE \`${DB}\`.\`fresh\` ADD COLUMN \`_lww_ts\` BIGINT UNSIGNED NOT NULL DEFAULT 0 INVISIBLE;;`);
    expect(r.stdout).toMatch(/CREATE TRIGGER[^\n]*`lww_bi__fresh`/);
    // The apply secret rendered into the triggers is not printed.
    const [[secret]] = await conns[0]!.query<RowDataPacket[]>('SELECT secret FROM lww_meta.apply_secret');
    expect(r.stdout).not.toContain(String(secret!.secret));
    expect(r.stdout).toContain("_binary'(the apply secret, not shown)'");
    expect(r.stdout).toMatch(/CREATE TABLE IF NOT EXISTS `lww_meta`\.`tomb__ops__fresh`/);
    const columns = await rows(conns[0]!, 'SELECT COLUMN_NAME AS c FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [DB, 'fresh']);
    expect(columns.map((c) => c.c)).toEqual(['id', 'v']);
    expect(await rows(conns[0]!, 'SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?', [DB, 'fresh'])).toEqual([]);
    expect((await rows(conns[0]!, 'SELECT COUNT(*) AS n FROM lww_meta.tables'))[0]!.n).toBe(registered);
  });

  it('replicates under the documented grants, with /metrics, /healthz and /status that never show the password', async () => {
    let replicator: Replicator | undefined;
    let ops: OpsServer | undefined;
    try {
      ops = await serveOps({ host: '127.0.0.1', port: 0 });
      const base = `http://127.0.0.1:${ops.address.port}`;
      expect((await fetch(`${base}/healthz`)).status).toBe(503); // not attached yet: starting
      replicator = await startReplicator([rawUrl('lww_repl', 0), rawUrl('lww_repl', 1)]);
      ops.attach(replicator);
      await conns[0]!.query(`INSERT INTO ${DB}.t VALUES (1, 'from a')`);
      await eventually('row 1 on b', () => rows(conns[1]!, `SELECT name FROM ${DB}.t WHERE id = 1`), (r) => r.length === 1);
      const health = await fetch(`${base}/healthz`);
      expect(health.status).toBe(200);
      const status = (await (await fetch(`${base}/status`)).json()) as { directions: { name: string; state: string }[]; nodes: { url: string }[] };
      expect(status.directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
      expect(status.nodes.map((n) => n.url)).toEqual(ctx.servers.map((s) => `mysql://lww_repl:***@${s.host}:${s.port}/`));
      const metrics = await eventually(
        'applied rows in /metrics',
        async () => (await fetch(`${base}/metrics`)).text(),
        (text) => /^lww_applied_rows_total\{direction="[^"]+"\} [1-9]/m.test(text),
      );
      for (const name of ['lww_skipped_stale_total', 'lww_replication_lag_seconds_bucket', 'lww_direction_up', 'process_cpu_user_seconds_total', 'nodejs_heap_size_used_bytes']) {
        expect(metrics).toContain(name);
      }
      expect(metrics).not.toMatch(/^# TYPE lww_\w+ counter$(?<!_total counter)/m);
      expect(leaks(JSON.stringify(status) + metrics)).toEqual([]);
    } finally {
      await replicator?.stop();
      await ops?.close();
    }
  });

  it('checks under the documented grants with the nodes from LWW_NODES (no password in argv)', async () => {
    const r = await cli(['check', '--tables', `${DB}.t`], { LWW_NODES: `${rawUrl('lww_check', 0)},${rawUrl('lww_check', 1)}` });
    expect(leaks(r.stdout + r.stderr)).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('identical');
  });

  it('syncs under the documented grants with the nodes from a config file (password from an environment variable)', async () => {
    await conns[1]!.query(`INSERT INTO ${DB}.t VALUES (2, 'only on b')`); // not replicated: nothing runs now
    const config = join(dir, 'sync.json');
    await writeFile(config, JSON.stringify({ nodes: endpoints().map((e) => ({ ...e, user: 'lww_sync', passwordEnv: 'LWW_TEST_PASSWORD' })), tables: [`${DB}.t`] }));
    const r = await cli(['sync', '--config', config, '--quiet'], { LWW_TEST_PASSWORD: PASSWORD });
    expect(leaks(r.stdout + r.stderr)).toEqual([]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(await rows(conns[0]!, `SELECT name FROM ${DB}.t WHERE id = 2`)).toEqual([{ name: 'only on b' }]);
  });

  it('names the missing privilege and exits 4 when an account lacks one (never a hint to relax server settings)', async () => {
    const r = await cli(['sync', '--tables', `${DB}.t`, '--quiet'], { LWW_NODES: `${rawUrl('lww_check', 0)},${rawUrl('lww_check', 1)}` });
    expect(leaks(r.stdout + r.stderr)).toEqual([]);
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/INSERT|UPDATE|CREATE|DELETE/);
    expect(r.stderr).toContain('privilege');
    expect(r.stderr).not.toContain('log_bin_trust_function_creators');
  });
});
