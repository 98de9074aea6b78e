// Network faults on one direction and on n2, and a slow link, on real servers: a drop on the
// n1→n2 direction's sink stalls that direction alone while n2→n1 keeps committing; a slow link on
// n2→n1's sink delays its commits without stopping them; a reset of n2 breaks the replicator's
// connections to n2 (both directions' ends there); the run converges with nothing lost.
import { expect, it } from 'vitest';
import { harnessAudit } from '../../src/harness/audit-step.ts';
import { parseFault } from '../../src/harness/faults.ts';
import { runHarness } from '../../src/harness/harness.ts';
import { describeEachEngine } from '../helpers/engines.ts';

interface Sample {
  atMs: number;
  directions: Array<{ name: string; checkpoint?: string; lagMs?: number }>;
}

describeEachEngine('one-direction, n2 and slow-link network faults', 2, (ctx) => {
  it('a cut of one direction stalls only it, a slow link only slows, a cut of n2 breaks its connections; all converge', async () => {
    const samples: Sample[] = [];
    // One apply worker: the assertions count a direction's checkpoint advances, and with several
    // workers that checkpoint is the lowest worker row, which a slow link can hold for seconds.
    const saved = process.env.LWW_APPLY_WORKERS;
    process.env.LWW_APPLY_WORKERS = '1';
    const r = await runHarness({
      engine: ctx.engine,
      servers: ctx.servers,
      workload: { kind: 'hot_keys', schema: 'hl', tables: 1, rowsPerTable: 40, threads: 3, durationMs: 10_500, seed: 7, hotKeys: 10 },
      faults: ['net:n1>n2.sink@1s/3s:drop', 'net:n2>n1.sink@4500ms/4s:slow=100ms', 'net:n2@9s/1s:reset'].map(parseFault),
      audit: harnessAudit,
      onReplicatorStatus: (s) => {
        samples.push({ atMs: Date.now(), directions: (s as Sample).directions });
      },
    }).finally(() => {
      if (saved === undefined) delete process.env.LWW_APPLY_WORKERS;
      else process.env.LWW_APPLY_WORKERS = saved;
    });
    const effects = r.faults.map((f) => [f.kind, f.node, f.mode, f.tookEffect]);
    expect(effects).toEqual([
      ['net', 'n1>n2.sink', 'drop', true],
      ['net', 'n2>n1.sink', 'slow', true],
      ['net', 'n2', 'reset', true],
    ]);
    // n1>n2.sink: the sink's apply and admin connections; n2: its node proxy, n1>n2.sink and n2>n1.capture.
    expect(r.faults[0]!.connections).toBeGreaterThanOrEqual(1);
    expect(r.faults[2]!.connections).toBeGreaterThanOrEqual(2);

    const at = (name: string, from: number, to: number) =>
      samples.filter((s) => s.atMs >= r.startedAt + from && s.atMs <= r.startedAt + to).map((s) => s.directions.find((d) => d.name === name)!);
    const [cut, slow] = r.faults;
    const stalled = at('n1→n2', cut!.atMs + 500, cut!.atMs + cut!.downtimeMs - 300);
    const flowing = at('n2→n1', cut!.atMs + 500, cut!.atMs + cut!.downtimeMs - 300);
    expect(stalled.length).toBeGreaterThanOrEqual(2);
    expect(new Set(stalled.map((d) => d.checkpoint)).size).toBe(1);
    expect(new Set(flowing.map((d) => d.checkpoint)).size).toBeGreaterThan(1);

    const slowed = at('n2→n1', slow!.atMs + 300, slow!.atMs + slow!.downtimeMs + 500);
    expect(new Set(slowed.map((d) => d.checkpoint)).size).toBeGreaterThan(1);
    // Three round trips per batch (checkpoint, upsert, COMMIT), each 2 × 100 ms late (a 150 ms link once let no batch finish in the 4 s window at load 5).
    expect(Math.max(...slowed.map((d) => d.lagMs ?? 0))).toBeGreaterThanOrEqual(450);

    expect(r.converged).toBe(true);
    expect(r.expectationMismatches).toEqual([]);
    expect(r.audit!.findings).toBe(0);
    expect(r.replicatorStarts).toBe(1);
  });
});

