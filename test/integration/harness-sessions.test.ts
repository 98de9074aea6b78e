// Generated sessions' extra shapes (issue #15), each proved by a short run on both engines: a large
// transaction converges with the writers' expected state; a session writing with
// binlog_format=STATEMENT ends in the replicator's loud stop, which the harness reports as the
// expected outcome; a run with DDL on every node in turn while the writers run (ADD COLUMN with a
// default, then a reorder) converges: a row written before its node's ALTER that reaches a node that
// has the column gets the column's default there (README, "Generated sessions").
import type { RowDataPacket } from 'mysql2/promise';
import { expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { failureReasons, type HarnessResult, runHarness } from '../../src/harness/harness.ts';
import type { WorkloadOptions } from '../../src/harness/workload.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const SCHEMA = 'gs';
// Seed 4's schema (converges with faults in harness-generated) has a MEDIUMTEXT column for the large values.
const workload = (extra: Partial<WorkloadOptions>): WorkloadOptions & { durationMs: number } => ({
  kind: 'hot_keys',
  schema: SCHEMA,
  tables: 2,
  rowsPerTable: 200,
  threads: 4,
  durationMs: 8_000,
  seed: 1,
  hotKeys: 16,
  schemaGen: 4,
  ...extra,
});
const why = (r: HarnessResult) =>
  JSON.stringify({ reasons: failureReasons(r), state: r.state.totals, mismatches: r.expectationMismatches.slice(0, 3), directions: r.directions }, (_k, v) => (typeof v === 'bigint' ? String(v) : v));

describeEachEngine('generated sessions: large transactions, DDL, a refused setting', 2, (ctx) => {
  it('a 10,000-row transaction with values of megabytes converges with the writers expected state', async () => {
    const r = await runHarness({ engine: ctx.engine, servers: ctx.servers, workload: workload({ largeTransactions: 1, largeTxRows: [10_000, 10_000], durationMs: 6_000 }) });
    expect(r.plan!.large).toHaveLength(1);
    const plan = r.plan!.large[0]!;
    expect(failureReasons(r), why(r)).toEqual([]);
    expect(r.converged, why(r)).toBe(true);
    expect(r.expectationMismatches).toEqual([]);
    expect(r.shapes).toMatchObject({ 'tx:large': 1, 'tx:large-rows': 10_000, 'tx:large-deletes': 1_000, 'value:large': 3 });
    // Both nodes hold its 9,000 rows that stayed, and the large values whole.
    for (const s of ctx.servers) {
      const c = await connect(s.url);
      try {
        const [[n]] = await c.query<RowDataPacket[]>(`SELECT COUNT(*) AS n, MAX(LENGTH(\`${plan.largeValues!.column}\`)) AS big FROM ${SCHEMA}.${plan.table}`);
        expect(Number(n!.n)).toBeGreaterThanOrEqual(9_000);
        expect(Number(n!.big)).toBe(Math.max(...plan.largeValues!.bytes));
      } finally {
        await c.end();
      }
    }
  });

  it('DDL on every node in turn while the writers run (ADD COLUMN, then a reorder) converges with the writers expected state', async () => {
    const r = await runHarness({ engine: ctx.engine, servers: ctx.servers, workload: workload({ ddl: true, largeTransactions: 0 }) });
    expect(failureReasons(r), why(r)).toEqual([]);
    expect(r.converged, why(r)).toBe(true);
    expect(r.expectationMismatches).toEqual([]);
    expect(r.shapes).toMatchObject({ 'ddl:add-column': 2, 'ddl:reorder-column': 2 });
  });

  it('a session writing with binlog_format=STATEMENT: the loud stop naming the cause is the expected outcome', async () => {
    const r = await runHarness({ engine: ctx.engine, servers: ctx.servers, workload: workload({ refusedSetting: true }) });
    const stop = r.expectedStop!;
    expect(stop.wroteAtMs, JSON.stringify(stop)).toBeDefined();
    expect(stop, why(r)).toMatchObject({ setting: 'binlog_format=STATEMENT', stopped: true, exitCode: 4, asExpected: true });
    expect(stop.cause).toMatch(new RegExp(`${SCHEMA}\\.${stop.table}.*binlog_format=STATEMENT`, 's'));
    expect(failureReasons(r)).toEqual([]);
    expect(r.shapes).toMatchObject({ 'session:refused-setting:binlog_format=STATEMENT': 1 });
  });
});
