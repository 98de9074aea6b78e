import { expect, it } from 'vitest';
import { harnessAudit } from '../../src/harness/audit-step.ts';
import { parseFault } from '../../src/harness/faults.ts';
import { runHarness } from '../../src/harness/harness.ts';
import { describeEachEngine } from '../helpers/engines.ts';

// Short version of the 2-minute acceptance run (scripts/harness-seeds.ts runs the long one):
// 2 × 8 writers on hot keys with inserts, updates and deletes, and every fault kind (n2's writers cut
// too: commits in flight there, and at n2's restart, are decided by their markers).
const FAULTS = ['skew:n1@1s=-5s', 'kill@3s/1s', 'net:n1@5s/2s', 'net:n2:writers@6s/1s:reset', 'restart:n2@8s/2s'].map(parseFault);

describeEachEngine('harness with every fault kind', 2, (ctx) => {
  // Two seeds: the test command's time goes to the generated schemas (harness-generated.test.ts).
  for (const seed of [11, 12]) {
    // Odd seeds apply with 8 parallel workers per direction, even ones with one (the replicator process reads LWW_APPLY_WORKERS).
    const workers = seed % 2 === 1 ? 8 : 1;
    it(`seed ${seed}, ${workers} apply worker(s): converges to the writers' expected state with no finding but lww_skipped`, async () => {
      const saved = process.env.LWW_APPLY_WORKERS;
      process.env.LWW_APPLY_WORKERS = String(workers);
      const r = await runHarness({
        engine: ctx.engine,
        servers: ctx.servers,
        workload: { kind: 'hot_keys', schema: 'hk', tables: 2, rowsPerTable: 40, threads: 8, durationMs: 11_000, seed, hotKeys: 12 },
        faults: FAULTS,
        audit: harnessAudit,
      }).finally(() => {
        if (saved === undefined) delete process.env.LWW_APPLY_WORKERS;
        else process.env.LWW_APPLY_WORKERS = saved;
      });
      expect(r.faultsInjected).toBe(5);
      expect(r.replicatorKills).toBe(1);
      // 8 writers for 11 s: about 1,000 transactions on a quiet machine, a few hundred beside other test files.
      expect(r.transactions).toBeGreaterThan(100);
      expect(r.state.identical).toBe(true);
      expect(r.converged).toBe(true);
      expect(r.expectationMismatches).toEqual([]);
      expect(r.unknownOutcomes.unresolved).toEqual([]);
      expect(r.audit!.findings).toBe(0);
      expect(r.audit!.counts.lww_skipped).toBeGreaterThan(0);
    });
  }

  // One sysbench shape per engine (the test command's time): writes with deletes on MySQL, updates of a non-indexed column on MariaDB.
  {
    const kind = ctx.engine === 'mysql' ? 'oltp_write_only' : 'oltp_update_non_index';
    it(`${kind} on 3 tables with a replicator kill converges to the expected state`, async () => {
      const r = await runHarness({
        engine: ctx.engine,
        servers: ctx.servers,
        workload: { kind, schema: 'sb', tables: 3, rowsPerTable: 300, threads: 4, durationMs: 6_000, transactionsPerThread: 400, seed: 5, keySkew: 2 },
        faults: [parseFault('kill@2s/1s')],
        audit: harnessAudit,
      });
      expect(r.transactions).toBeGreaterThan(100);
      expect(r.converged).toBe(true);
      expect(r.expectationMismatches).toEqual([]);
      expect(r.unknownOutcomes.unresolved).toEqual([]);
      expect(r.audit!.findings).toBe(0);
    });
  }
});
