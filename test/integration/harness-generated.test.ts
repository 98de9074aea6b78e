import { expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { harnessAudit } from '../../src/harness/audit-step.ts';
import { parseFault } from '../../src/harness/faults.ts';
import { runHarness } from '../../src/harness/harness.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, setupNodes, startReplicator } from '../helpers/replication.ts';

/**
 * Three generated-schema seeds per engine (issue #15), with a network cut and a replicator kill:
 * 3 (secondary UNIQUE keys: clashes, swaps and claims), 4 (composite temporal and case-insensitive
 * keys), 6 (UNIQUE keys with foreign keys). Seeds 3 and 6 once left a row removed by a UNIQUE clash
 * on one node only (a row version that decided the clash where it landed was skipped as stale or
 * tombstoned on the other node, or removed there by the sink, and forgotten); every such row version
 * is a claim now (README, "What the generated schemas still find"; unique-claims.test.ts).
 */
const GENERATED_SEEDS = [3, 4, 6];

// Found by the generated schemas (harness --schema-gen 1): under a case-insensitive key, a delete of
// 'Beta' raised the existing tombstone of 'BETA' without changing its spelling, capture could not
// match the delete with its tombstone, and the direction stopped (MissingTombstoneError).
describeEachEngine('generated-schema findings', 2, (ctx) => {
  it('a delete whose key is spelled otherwise than its existing tombstone replicates with its version', async () => {
    const urls = ctx.servers.map((s) => s.url);
    const ddl = ['CREATE TABLE gsf.t (k1 INT NOT NULL, k2 CHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, n INT NOT NULL, PRIMARY KEY (k1, k2))'];
    const conns = await setupNodes(urls, 'gsf', ddl, ['t']);
    const rep = await startReplicator(urls);
    const a = await connect(urls[0]!);
    try {
      await a.query("INSERT INTO gsf.t (k1, k2, n) VALUES (1, 'BETA', 1)");
      await a.query("DELETE FROM gsf.t WHERE k1 = 1 AND k2 = 'BETA'");
      await a.query("INSERT INTO gsf.t (k1, k2, n) VALUES (1, 'Beta', 2)");
      await a.query("DELETE FROM gsf.t WHERE k1 = 1 AND k2 = 'beta'");
      await a.query("INSERT INTO gsf.t (k1, k2, n) VALUES (2, 'x', 3)");
      await converged(conns, 'gsf', 't');
      const status = await rep.status();
      expect(status.directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
      const [rows] = await conns[1]!.query('SELECT k1, k2 FROM gsf.t ORDER BY k1');
      expect(rows).toEqual([{ k1: 2, k2: 'x' }]);
    } finally {
      await rep.stop();
      await a.end();
      for (const c of conns) await c.end();
    }
  });
});

// Generated schemas and sessions, 18 s each, with faults: every shape the seed draws either converges
// with a clean audit or the run fails naming it. Seeds that still find a known gap are named in the
// README (harness section) instead of being run here.
describeEachEngine('generated schemas converge', 2, (ctx) => {
  for (const seed of GENERATED_SEEDS) {
    it(`--schema-gen ${seed}: converges with no audit finding and every commit outcome decided`, async () => {
      const r = await runHarness({
        engine: ctx.engine,
        servers: ctx.servers,
        workload: { kind: 'hot_keys', schema: 'gen', tables: 2, rowsPerTable: 200, threads: 4, durationMs: 18_000, seed, hotKeys: 16, schemaGen: seed },
        faults: [parseFault('net:n1@6s/2s'), parseFault('kill@13s/1s')],
        audit: harnessAudit,
      });
      const why = JSON.stringify({ state: r.state.totals, audit: r.audit?.counts, directions: r.directions }, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
      expect(r.transactions).toBeGreaterThan(200);
      expect(r.state.identical, why).toBe(true);
      expect(r.converged, why).toBe(true);
      expect(r.unknownOutcomes.unresolved).toEqual([]);
      expect(r.audit!.findings, why).toBe(0);
      // The shapes the seed drew ran: generated tables, sessions and statements were counted.
      expect(Object.keys(r.shapes ?? {}).some((k) => k.startsWith('key:'))).toBe(true);
      expect(Object.keys(r.shapes ?? {}).some((k) => k.startsWith('op:'))).toBe(true);
      // Every write's author was timed; with no clock skew (one machine's clock) versions follow real time, so none lost to an earlier write.
      expect(r.skewCost.authored).toBeGreaterThan(100);
      expect(r.skewCost.lostToEarlier, JSON.stringify(r.skewCost)).toBe(0);
      // 18 s of writes (the faults at 6 s and 13 s), then convergence and the audit: under a minute alone, longer beside other files.
    }, 300_000);
  }
});
