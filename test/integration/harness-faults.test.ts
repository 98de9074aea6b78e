// Each harness fault does what it says, on real servers: a blackhole hangs a connection silently
// (the server keeps the session and its locks) until healed; a reset is ECONNRESET and a drop a
// closed connection; an abrupt restart is a SIGKILL and a crash recovery that keeps every
// acknowledged write; an unexpected replicator exit fails the run with its code and last error.
import { readFile } from 'node:fs/promises';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { parseFault } from '../../src/harness/faults.ts';
import { runHarness } from '../../src/harness/harness.ts';
import { ReplicatorExitError } from '../../src/harness/replicator-process.ts';
import { TcpProxy } from '../../src/harness/tcp-proxy.ts';
import type { LocalServer } from '../../src/servers/local.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const WORKLOAD = { kind: 'hot_keys', schema: 'hf', tables: 1, rowsPerTable: 20, threads: 2, seed: 3, hotKeys: 8 } as const;

/** What a promise did within `ms`: its value, its error's code, or 'pending'. */
async function within(p: Promise<unknown>, ms: number): Promise<string> {
  return Promise.race([
    p.then(
      () => 'answered',
      (e: { code?: string }) => `error ${e.code ?? String(e)}`,
    ),
    new Promise<string>((r) => setTimeout(() => r('pending'), ms)),
  ]);
}

// MySQL logs InnoDB's crash recovery as notes, shown only at verbosity 3 (MariaDB ignores the loose option).
describeEachEngine('harness faults do what they say', { count: 2, extraArgs: ['--loose-log-error-verbosity=3'] }, (ctx) => {
  it('a blackhole hangs a connection with no FIN and no RST: a query neither answers nor fails, the server keeps the session and its locks, and all resumes on heal', async () => {
    const server = ctx.servers[0]!;
    const direct = await connect(server.url);
    await direct.query('CREATE DATABASE IF NOT EXISTS hf_net');
    await direct.query('CREATE TABLE IF NOT EXISTS hf_net.t (id INT PRIMARY KEY, n INT NOT NULL)');
    await direct.query('REPLACE INTO hf_net.t VALUES (1, 0)');
    const proxy = new TcpProxy(server.host, server.port);
    await proxy.start();
    let via: Connection | undefined;
    try {
      via = await connect(proxy.rewrite(server.url));
      const events: string[] = [];
      via.on('error', (e: { code?: string }) => events.push(`error ${e.code}`));
      via.on('end', () => events.push('end'));
      const [[{ id }]] = (await via.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
      await via.query('BEGIN');
      await via.query('SELECT n FROM hf_net.t WHERE id = 1 FOR UPDATE');

      expect(proxy.cut('blackhole')).toBe(1);
      const pending = via.query('SELECT 42 AS answer');
      expect(await within(pending, 1500)).toBe('pending');
      // The server learned nothing: the session is there and still holds the row lock.
      const [alive] = await direct.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?', [id]);
      expect(Number(alive[0]!.n)).toBe(1);
      await direct.query('SET SESSION innodb_lock_wait_timeout = 1');
      await expect(direct.query('UPDATE hf_net.t SET n = n + 1 WHERE id = 1')).rejects.toMatchObject({ code: 'ER_LOCK_WAIT_TIMEOUT' });
      expect(await within(pending, 100)).toBe('pending');
      expect(events).toEqual([]);

      proxy.restore();
      const [answer] = (await pending) as unknown as [Array<{ answer: number }>];
      expect(Number(answer[0]!.answer)).toBe(42);
      await via.query('COMMIT');
      await direct.query('UPDATE hf_net.t SET n = n + 1 WHERE id = 1');
      expect(events).toEqual([]);
    } finally {
      await via?.end().catch(() => undefined);
      await proxy.stop();
      await direct.end();
    }
  });

  it('a reset gives the client ECONNRESET; a drop closes its connection (FIN)', async () => {
    const server = ctx.servers[0]!;
    const proxy = new TcpProxy(server.host, server.port);
    await proxy.start();
    try {
      for (const [mode, code] of [
        ['reset', 'ECONNRESET'],
        ['drop', 'PROTOCOL_CONNECTION_LOST'],
      ] as const) {
        const via = await connect(proxy.rewrite(server.url));
        via.on('error', () => undefined);
        const running = via.query('SELECT SLEEP(5)');
        await new Promise((r) => setTimeout(r, 300));
        expect(proxy.cut(mode)).toBe(1);
        expect(await within(running, 2000)).toBe(`error ${code}`);
        // New connections are refused the same way while cut.
        await expect(connect(proxy.rewrite(server.url), { connectTimeoutMs: 2000 })).rejects.toMatchObject({ code: mode === 'reset' ? 'ECONNRESET' : expect.any(String) });
        proxy.restore();
        via.destroy();
      }
      const healed = await connect(proxy.rewrite(server.url));
      await healed.query('SELECT 1');
      await healed.end();
    } finally {
      await proxy.stop();
    }
  });

  it('an abrupt restart SIGKILLs the server, which runs crash recovery and keeps every acknowledged write; the report records it as it happened', async () => {
    const n2 = ctx.servers[1]! as LocalServer;
    const logBefore = (await readFile(n2.paths.errorLog, 'utf8')).length;
    const r = await runHarness({
      engine: ctx.engine,
      servers: ctx.servers,
      workload: { ...WORKLOAD, durationMs: 6000 },
      faults: [parseFault('restart:n2@1500ms/1s:abrupt'), parseFault('net:n1@2s/1s:reset')],
    });
    const log = (await readFile(n2.paths.errorLog, 'utf8')).slice(logBefore);
    expect(r.faults.map((f) => [f.kind, f.node, f.mode, f.tookEffect])).toEqual([
      ['restart', 'n2', 'abrupt', true],
      ['net', 'n1', 'reset', true],
    ]);
    const restart = r.faults[0]!;
    expect(restart.stopMs!).toBeLessThan(1000);
    expect(restart.downtimeMs).toBeGreaterThanOrEqual(1000);
    expect(r.faults[1]!.connections).toBeGreaterThan(0);
    expect(r.faultsInjected).toBe(2);
    // Crash recovery, not a clean start: the engine says it was not shut down normally.
    expect(log).toMatch(/Starting crash recovery/);
    expect(log).not.toMatch(/Shutdown complete/i);
    // Every write a writer saw committed on n2 before the kill is there (and replicated) afterwards.
    expect(r.converged).toBe(true);
    expect(r.expectationMismatches).toEqual([]);
    expect(r.unknownOutcomes.unresolved).toEqual([]);
    // The replicator rode it out: sinks retried and capture reconnected inside each direction.
    expect(r.directions.map((d) => d.name)).toEqual(['n1→n2', 'n2→n1']);
    expect(r.replicatorStarts).toBe(1);
  });

  it('an unexpected replicator exit fails the run with its exit code and last error, at start and mid-run', async () => {
    const atStart = await runHarness({ engine: ctx.engine, servers: ctx.servers, workload: { ...WORKLOAD, durationMs: 3000 }, failpoints: 'noSuchFailpoint=return(true)' }).catch((e: unknown) => e);
    expect(atStart).toBeInstanceOf(ReplicatorExitError);
    expect((atStart as ReplicatorExitError).exit.code).toBe(2);
    expect((atStart as ReplicatorExitError).exit.lastError).toMatch(/unknown failpoint "noSuchFailpoint"/);

    // Mid-run: the kill fault's restart finds n2 down, and with --start-timeout 0 the replicator gives up.
    // n2 stays down 15 s, so even a slow restart of the replicator (a loaded machine) still finds it down.
    const t0 = Date.now();
    const midRun = await runHarness({
      engine: ctx.engine,
      servers: ctx.servers,
      workload: { ...WORKLOAD, durationMs: 30_000 },
      faults: [parseFault('restart:n2@1s/15s:abrupt'), parseFault('kill@2s/1s')],
      replicatorArgs: ['--start-timeout', '0'],
    }).catch((e: unknown) => e);
    expect(midRun).toBeInstanceOf(ReplicatorExitError);
    const e = midRun as ReplicatorExitError;
    expect(e.exit.code).toBe(3);
    expect(e.exit.lastError).toBeTruthy();
    expect(e.message).toContain('code 3');
    // Mid-run, not at the end of the 30 s workload (the restart after the kill gives up at once; slower beside other files).
    expect(e.atMs!).toBeLessThan(25_000);
    expect(Date.now() - t0).toBeLessThan(45_000);
    // The run healed what it broke: n2 is back.
    const c = await connect(ctx.servers[1]!.url);
    await c.query('SELECT 1');
    await c.end();
  });
});
