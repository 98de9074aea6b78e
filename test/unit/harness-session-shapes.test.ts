import { describe, expect, it } from 'vitest';
import { parseLargeTxRows, parseWorkloadFlags } from '../../src/cli/workload-flags.ts';
import { failureReasons, type HarnessResult, isExpectedStop } from '../../src/harness/harness.ts';
import { generateSchema } from '../../src/harness/schema-gen.ts';
import { withAddedDefaults } from '../../src/harness/session-gen.ts';
import { DDL_COLUMN, freshKey, freshKeyValue, LARGE_TX_ROWS_DEFAULT, oracleWithDdlColumn, planSessions } from '../../src/harness/session-shapes.ts';

const NODES = ['n1', 'n2'];

describe('generated session shapes (issue #15)', () => {
  it('the plan is the seed’s: the same seed gives the same plan, other seeds other ones', () => {
    const plan = (seed: number) => JSON.stringify(planSessions(seed, generateSchema(4).tables, NODES, 4, 30_000, { largeTransactions: 1, ddl: true, refusedSetting: true }));
    expect(plan(11)).toBe(plan(11));
    expect(new Set([1, 2, 3, 4, 5, 6].map(plan)).size).toBeGreaterThan(4);
  });

  it('a large transaction appears: one per run by default of 10k–50k rows, up to 200k when asked, inside the run', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const tables = generateSchema(seed).tables;
      const [large, ...more] = planSessions(seed, tables, NODES, 4, 30_000, { largeTransactions: 1 }).large;
      expect(more).toEqual([]);
      expect(large!.rows).toBeGreaterThanOrEqual(LARGE_TX_ROWS_DEFAULT[0]);
      expect(large!.rows).toBeLessThanOrEqual(LARGE_TX_ROWS_DEFAULT[1]);
      expect(NODES).toContain(large!.node);
      expect(large!.thread).toBeLessThan(4);
      expect(large!.atMs).toBeLessThan(30_000);
      expect(tables.map((t) => t.name)).toContain(large!.table);
      // Values of megabytes whenever the schema has a column that holds them.
      const lob = tables.some((t) => t.columns.some((c) => c.kind === 'json' || /^MEDIUM/.test(c.type)));
      expect(large!.largeValues !== undefined).toBe(lob);
      for (const b of large!.largeValues?.bytes ?? []) expect(b).toBeGreaterThanOrEqual(1 << 20);
    }
    expect(planSessions(1, generateSchema(1).tables, NODES, 4, 30_000, { largeTransactions: 1, largeTxRows: [200_000, 200_000] }).large[0]!.rows).toBe(200_000);
    expect(planSessions(1, generateSchema(1).tables, NODES, 4, 30_000, {}).large).toEqual([]);
  });

  it('the CLI gives generated schemas one large transaction by default and bounds its rows at 200k', () => {
    const flags = (extra: Record<string, unknown>) =>
      parseWorkloadFlags({ engine: 'mysql', workload: 'hot_keys', rows: '200', threads: '4', duration: '30s', seed: '1', 'hot-keys': '16', 'key-skew': '1', isolation: 'repeatable-read', ...extra }).workload;
    expect(flags({ 'schema-gen': '4' }).largeTransactions).toBe(1);
    expect(flags({ 'schema-gen': '4', 'large-tx': '0' }).largeTransactions).toBeUndefined();
    expect(flags({}).largeTransactions).toBeUndefined();
    expect(flags({ 'schema-gen': '4', ddl: true, 'refused-settings': true, 'large-tx-rows': '200000' })).toMatchObject({ ddl: true, refusedSetting: true, largeTxRows: [200_000, 200_000] });
    expect(parseLargeTxRows('10000-50000')).toEqual([10_000, 50_000]);
    expect(() => parseLargeTxRows('300000')).toThrow(/at most|≤ 200000/);
    expect(() => parseLargeTxRows('50-10')).toThrow();
    expect(() => flags({ ddl: true })).toThrow(/generated sessions/);
  });

  it('fresh keys of the large transaction are distinct, outside the generated pools, for 200k rows', () => {
    for (let seed = 1; seed <= 12; seed++) {
      for (const t of generateSchema(seed).tables) {
        const text = (k: unknown[]) => k.map((v) => (Buffer.isBuffer(v) ? v.toString('hex') : String(v).toLowerCase())).join('|');
        const pool = new Set(t.keyPool.map(text));
        const seen = new Set<string>();
        for (let i = 0; i < 200_000; i += i < 1000 ? 1 : 97) {
          const k = text(freshKey(t, i));
          expect(pool.has(k)).toBe(false);
          seen.add(k);
        }
        expect(seen.size).toBe(1000 + Math.ceil((200_000 - 1000) / 97));
      }
    }
    expect(freshKeyValue({ name: 'k', kind: 'timestamp', type: 'TIMESTAMP', nullable: false }, 199_999)).toMatch(/^2035-01-04 /);
  });

  it('DDL plan: ADD COLUMN on every node, then a reorder of a column no key, UNIQUE, FK or generated column depends on', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const tables = generateSchema(seed).tables;
      const ddl = planSessions(seed, tables, NODES, 4, 30_000, { ddl: true }).ddl!;
      const t = tables.find((x) => x.name === ddl.table)!;
      expect(ddl.column).toBe(DDL_COLUMN);
      expect([...ddl.nodes].sort()).toEqual(NODES);
      expect(ddl.moveAtMs).toBeGreaterThan(ddl.addAtMs + ddl.gapMs);
      expect(ddl.moveAtMs).toBeLessThan(30_000);
      expect(t.primaryKey).not.toContain(ddl.move.column);
      expect(['u', 'p', 'g']).not.toContain(ddl.move.column);
      if (t.columns.some((c) => c.generated)) expect(ddl.move.column).not.toBe('n');
      expect(ddl.move.definition.startsWith(`\`${ddl.move.column}\` `)).toBe(true);
      if (ddl.move.after !== null) expect(t.columns.map((c) => c.name)).toContain(ddl.move.after);
    }
  });

  it('a text read before the column was added reads as its default; one read after keeps what it read', () => {
    const oracle = new Map([['g1', { name: 'g1', key: [], columns: [{ name: 'a', dataType: 'int', columnType: 'int', json: false, collation: null }], tombstoneTable: 't', setNullColumns: [] }]]);
    const plan = planSessions(1, generateSchema(1).tables, NODES, 4, 30_000, { ddl: true }).ddl!;
    const after = oracleWithDdlColumn(oracle, { ...plan, table: 'g1' });
    const t = after.get('g1')!;
    expect(t.columns.map((c) => c.name)).toEqual(['a', DDL_COLUMN]);
    expect(withAddedDefaults(t, '5', 1)).toBe(`5#${plan.defaultValue}`);
    expect(withAddedDefaults(t, '5', undefined)).toBe(`5#${plan.defaultValue}`);
    expect(withAddedDefaults(t, '5#7', 2)).toBe('5#7');
    expect(withAddedDefaults(t, null, 1)).toBeNull();
    expect(withAddedDefaults(oracle.get('g1'), '5', 1)).toBe('5');
  });

  it('the refused setting: only the loud stop naming the direction, cause, setting and table passes', () => {
    const plan = planSessions(3, generateSchema(4).tables, NODES, 4, 10_000, { refusedSetting: true }).refusal!;
    expect(plan.setting).toBe('binlog_format=STATEMENT');
    const cause = `capture stopped on gs.${plan.table} at binlog.000001:4 (event ending at binlog.000001:9): a UPDATE was logged as a statement, not as row events (the writing session had binlog_format=STATEMENT or MIXED)`;
    const stopWith = (code: number, lines: string[]) => ({ code, signal: null, lastError: 'sink stopped: sink is closed', logTail: lines });
    const peer = NODES.find((n) => n !== plan.node)!;
    expect(isExpectedStop(plan, 'gs', stopWith(4, [cause, `replication ${plan.node}→${peer} stopped (capture refused): ${cause}`]))).toBe(true);
    expect(isExpectedStop(plan, 'gs', stopWith(4, [`replication ${peer}→${plan.node} stopped (capture refused): ${cause}`]))).toBe(false);
    expect(isExpectedStop(plan, 'gs', stopWith(4, [`replication ${plan.node}→${peer} stopped (ownership lost): another replicator`]))).toBe(false);
    expect(isExpectedStop(plan, 'gs', stopWith(1, [`replication ${plan.node}→${peer} stopped (capture refused): ${cause}`]))).toBe(false);

    const result = (expectedStop: HarnessResult['expectedStop'], converged = false) =>
      ({ converged, divergedKeys: 3, expectationMismatches: [], unknownOutcomes: { committed: 0, notCommitted: 0, unresolved: [], decided: [] }, expectedStop }) as unknown as HarnessResult;
    const base = { setting: plan.setting, node: plan.node, table: plan.table };
    expect(failureReasons(result({ ...base, wroteAtMs: 1, stopped: true, exitCode: 4, cause, asExpected: true }))).toEqual([]);
    expect(failureReasons(result({ ...base, wroteAtMs: 1, stopped: false, asExpected: false }, true))[0]).toMatch(/did not stop .*converged anyway/);
    expect(failureReasons(result({ ...base, wroteAtMs: 1, stopped: true, exitCode: 4, cause: 'ownership lost', asExpected: false }))[0]).toMatch(/another reason .*ownership lost/);
    expect(failureReasons(result({ ...base, stopped: false, error: 'the run ended before it', asExpected: false }))[0]).toMatch(/did not write/);
  });
});
