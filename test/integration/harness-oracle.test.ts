// The writers' oracle is honest about commits whose reply never came: each writer transaction carries
// a marker row, and an unknown outcome is decided by reading it once the node answers again — a
// COMMIT whose reply was dropped is counted committed (its writes are in the expected state), a COMMIT
// that never reached the server is not; one that cannot be decided in time is reported unresolved and
// fails the run. Cut precisely by a proxy that knows a COMMIT when it sees one.
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import type { RowDataPacket } from 'mysql2/promise';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { compareWithExpected } from '../../src/harness/expected.ts';
import { parseFault } from '../../src/harness/faults.ts';
import { failureReasons, runHarness } from '../../src/harness/harness.ts';
import { genericMismatches, startGenericOracle } from '../../src/harness/session-gen.ts';
import { type AckedWrite, expectedState, HARNESS_SCHEMA, prepareWorkloadTables, runWriters, type WorkloadOptions } from '../../src/harness/workload.ts';
import { install } from '../../src/install/install.ts';
import { dropDatabaseSql } from '../../src/sql/workload.ts';
import { describeEachEngine } from '../helpers/engines.ts';

type CutMode = 'reply-dropped' | 'never-sent';

/**
 * A proxy that cuts the connection at the `nth` COMMIT it sees: after forwarding it and when its reply
 * arrives (the reply never reaches the client), or before forwarding it (the server never gets it).
 * New connections are then refused for `downMs` (the node unreachable), then pass again.
 */
class CommitCutter {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  commits = 0;
  cutDone = false;
  private downUntil = 0;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly nth: number,
    private readonly mode: CutMode,
    private readonly downMs = 0,
  ) {}

  async start(): Promise<string> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    const addr = this.server.address();
    return `mysql://root@127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/`;
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (Date.now() < this.downUntil) {
      client.destroy();
      return;
    }
    const up = tcpConnect(this.port, this.host);
    up.on('error', () => undefined);
    this.sockets.add(client).add(up);
    let dropReply = false;
    const cut = () => {
      client.destroy();
      up.destroy();
      this.cutDone = true;
      this.downUntil = Date.now() + this.downMs;
    };
    client.on('data', (chunk) => {
      // COM_QUERY (0x03) "COMMIT": 3-byte length, sequence 0, the command byte, (query attributes on MySQL,) the text.
      if (chunk.length < 64 && chunk[4] === 0x03 && chunk.subarray(5).toString('latin1').endsWith('COMMIT') && ++this.commits === this.nth) {
        if (this.mode === 'never-sent') return cut();
        dropReply = true;
      }
      up.write(chunk);
    });
    up.on('data', (chunk) => (dropReply ? cut() : client.write(chunk)));
    client.on('close', () => up.destroy());
    up.on('close', () => client.destroy());
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

const SCHEMA = 'oracle_t';
const BASE: WorkloadOptions = { kind: 'oltp_update_non_index', schema: SCHEMA, tables: 1, rowsPerTable: 1000, threads: 1, seed: 11, transactionsPerThread: 4, resolveTimeoutMs: 10_000 };
const GENERATED: WorkloadOptions = { ...BASE, kind: 'hot_keys', hotKeys: 6, rowsPerTable: 6, explicitTx: true };

describeEachEngine('the writers decide an unknown commit outcome by its marker', 1, (ctx) => {
  let cutter: CommitCutter | undefined;
  const url = () => ctx.servers[0]!.url;

  beforeEach(async () => {
    const c = await connect(url());
    for (const db of [SCHEMA, HARNESS_SCHEMA, 'lww_meta']) await c.query(dropDatabaseSql(db));
    await c.end();
  });
  afterEach(async () => {
    await cutter?.stop();
    cutter = undefined;
  });

  async function prepared(opts: WorkloadOptions): Promise<void> {
    await prepareWorkloadTables(url(), opts);
    await install({ url: url(), nodeId: 1, tables: [`${SCHEMA}.sbtest1`] });
  }

  async function markers(): Promise<number> {
    const c = await connect(url());
    try {
      const [rows] = await c.query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${HARNESS_SCHEMA}.writer_markers`);
      return Number(rows[0]!.n);
    } finally {
      await c.end();
    }
  }

  /** The server's rows against the state these acknowledged writes imply (empty: they match). */
  async function mismatches(opts: WorkloadOptions, acked: AckedWrite[], start?: Awaited<ReturnType<typeof startGenericOracle>>): Promise<unknown[]> {
    const c = await connect(url());
    try {
      if (start) return await genericMismatches([c], ['n1'], SCHEMA, '_lww_ts', start, acked);
      return await compareWithExpected(c, 'n1', SCHEMA, ['sbtest1'], '_lww_ts', expectedState(opts, acked));
    } finally {
      await c.end();
    }
  }

  for (const [label, opts] of [
    ['single-statement writer', BASE],
    ['explicit multi-statement transactions', GENERATED],
  ] as const) {
    it(`${label}: a COMMIT whose reply is dropped is resolved committed and its writes are expected`, async () => {
      await prepared(opts);
      const start = opts.explicitTx ? await startGenericOracle(url(), SCHEMA, ['sbtest1'], '_lww_ts', 'lww_meta') : undefined;
      // The last COMMIT's reply is dropped, and the node is unreachable for 1 s afterwards: the writer keeps looking.
      cutter = new CommitCutter(ctx.servers[0]!.host, ctx.servers[0]!.port, opts.transactionsPerThread!, 'reply-dropped', 1000);
      const stats = await runWriters({ name: 'n1', url: await cutter.start() }, opts);
      expect(cutter.cutDone).toBe(true);
      expect(stats.transactions).toBe(opts.transactionsPerThread! - 1);
      expect(stats.outcomes).toMatchObject({ committed: 1, notCommitted: 0, unresolved: [] });
      const decided = stats.outcomes.decided[0]!;
      expect(decided).toMatchObject({ node: 'n1', committed: true });
      expect(decided.error).toMatch(/PROTOCOL_CONNECTION_LOST|ECONNRESET/);
      expect(decided.writes).toBeGreaterThan(0);
      expect(await markers()).toBe(opts.transactionsPerThread);
      expect(await mismatches(opts, stats.acked, start)).toEqual([]);
      // Had the writer dropped the outcome (its writes come last), the expected state would be wrong.
      expect((await mismatches(opts, stats.acked.slice(0, stats.acked.length - decided.writes), start)).length).toBeGreaterThan(0);
    });

    it(`${label}: a COMMIT that never reached the server is resolved not committed and its writes are not expected`, async () => {
      await prepared(opts);
      const start = opts.explicitTx ? await startGenericOracle(url(), SCHEMA, ['sbtest1'], '_lww_ts', 'lww_meta') : undefined;
      cutter = new CommitCutter(ctx.servers[0]!.host, ctx.servers[0]!.port, opts.transactionsPerThread!, 'never-sent');
      const stats = await runWriters({ name: 'n1', url: await cutter.start() }, opts);
      expect(cutter.cutDone).toBe(true);
      expect(stats.outcomes).toMatchObject({ committed: 0, notCommitted: 1, unresolved: [] });
      expect(stats.outcomes.decided[0]!.committed).toBe(false);
      expect(await markers()).toBe(opts.transactionsPerThread! - 1);
      const ackedBefore = stats.acked.length;
      expect(await mismatches(opts, stats.acked, start)).toEqual([]);
      expect(stats.acked.length).toBe(ackedBefore);
    });
  }

  it('an outcome the node stays unreachable for is reported unresolved, never dropped', async () => {
    await prepared(BASE);
    cutter = new CommitCutter(ctx.servers[0]!.host, ctx.servers[0]!.port, 2, 'reply-dropped', 60_000);
    const t0 = Date.now();
    const stats = await runWriters({ name: 'n1', url: await cutter.start() }, { ...BASE, transactionsPerThread: 2, resolveTimeoutMs: 1000 });
    expect(Date.now() - t0).toBeLessThan(8000);
    expect(stats.outcomes.committed + stats.outcomes.notCommitted).toBe(0);
    expect(stats.outcomes.unresolved).toHaveLength(1);
    expect(stats.outcomes.unresolved[0]).toMatchObject({ node: 'n1', writes: 1 });
    expect(stats.outcomes.unresolved[0]!.lastCheck).not.toBe('not checked yet');
    // It did commit: a writer that dropped it would have passed a sink that lost it.
    expect(await markers()).toBe(2);
  });
});

describeEachEngine('a net fault on the writers', 2, (ctx) => {
  it('cuts the writers\' connections (not the replicator\'s); every unknown outcome is decided and the run converges as expected', async () => {
    const r = await runHarness({
      engine: ctx.engine,
      servers: ctx.servers,
      workload: { kind: 'hot_keys', schema: 'oracle_h', tables: 1, rowsPerTable: 20, threads: 3, seed: 5, hotKeys: 8, durationMs: 4000 },
      faults: [parseFault('net:n1:writers@1s/1s:reset'), parseFault('net:n2:writers@2s/500ms:drop')],
    });
    expect(r.faults.map((f) => [f.kind, f.node, f.target, f.mode, f.tookEffect])).toEqual([
      ['net', 'n1', 'writers', 'reset', true],
      ['net', 'n2', 'writers', 'drop', true],
    ]);
    // Three writer connections per node were cut; the replicator's stayed up.
    expect(r.faults.map((f) => f.connections)).toEqual([3, 3]);
    expect(r.directions.map((d) => d.restarts)).toEqual([0, 0]);
    expect(r.unknownOutcomes.unresolved).toEqual([]);
    expect(r.unknownOutcomes.decided).toHaveLength(r.unknownOutcomes.committed + r.unknownOutcomes.notCommitted);
    expect(failureReasons(r)).toEqual([]);
    expect(r.converged).toBe(true);
    expect(r.expectationMismatches).toEqual([]);
  });
});
