// Commit-point kills and a second replicator instance, on real servers, in one run per engine:
// each kill lands where it is named (the target's checkpoint, written in the same transaction as the
// batch's rows, shows whether the batch committed; the process's own acknowledgement never came),
// the twin fences the old instance out through the owner epoch, and the run converges with nothing
// lost and no audit finding.
import { expect, it } from 'vitest';
import { harnessAudit } from '../../src/harness/audit-step.ts';
import { parseFault } from '../../src/harness/faults.ts';
import { type HarnessResult, runHarness } from '../../src/harness/harness.ts';
import { describeEachEngine } from '../helpers/engines.ts';

// They take turns (each waits until the replicator streams again, seconds on a busy machine), and the
// harness writes a row on each node once a failpoint is armed, so they land after the writers stopped too.
const FAULTS = ['kill:after-statements@1s/300ms', 'kill:commit-in-flight@3s/300ms', 'kill:after-commit@5s/300ms', 'twin@7s/8s'].map(parseFault);

describeEachEngine('commit-point kills and a twin replicator', 2, (ctx) => {
  let run: Promise<HarnessResult> | undefined;
  const result = () =>
    (run ??= runHarness({
      engine: ctx.engine,
      servers: ctx.servers,
      workload: { kind: 'hot_keys', schema: 'hc', tables: 1, rowsPerTable: 40, threads: 3, durationMs: 10_000, seed: 9, hotKeys: 10 },
      faults: FAULTS,
      audit: harnessAudit,
    }));
  const kill = async (point: string) => {
    const effect = (await result()).faults.find((f) => f.point === point)!;
    expect(effect.tookEffect).toBe(true);
    const d = effect.detail as { failpoint: string; rows: number; positions: Record<string, string>; acked: Record<string, string>; stored: Record<string, string>; committed: boolean };
    expect(d.rows).toBeGreaterThan(0);
    // The process had not acknowledged this batch: its last confirmed position for the source is another.
    for (const [source, position] of Object.entries(d.positions)) expect(d.acked[source]).not.toBe(position);
    return d;
  };

  it('after the data statements: the batch never committed (the target keeps the previous checkpoint, so none of its rows)', async () => {
    const d = await kill('after-statements');
    expect(d.failpoint).toBe('sinkKillAfterStatements');
    expect(d.committed).toBe(false);
    for (const [source, position] of Object.entries(d.positions)) expect(d.stored[source]).not.toBe(position);
  });

  it('with COMMIT in flight: the server committed the batch whose reply the replicator never read', async () => {
    const d = await kill('commit-in-flight');
    expect(d.failpoint).toBe('sinkKillCommitInFlight');
    expect(d.committed).toBe(true);
  });

  it('after COMMIT, before the checkpoint callback: the target holds the batch, the replicator never acknowledged it', async () => {
    const d = await kill('after-commit');
    expect(d.failpoint).toBe('sinkKillAfterCommit');
    expect(d.committed).toBe(true);
    expect(d.stored).toEqual(d.positions);
  });

  it('two instances alive at once: the old one stops on its own (owner epoch lost), the new one carries on; nothing lost, no finding', async () => {
    const r = await result();
    const twin = r.faults.find((f) => f.kind === 'twin')!;
    expect(twin.tookEffect).toBe(true);
    const d = twin.detail as { twinStreamed: boolean; oldStopped: boolean; oldExit: { lastError: string } };
    expect(d.twinStreamed).toBe(true);
    expect(d.oldStopped).toBe(true);
    expect(d.oldExit.lastError).toMatch(/lost ownership/);
    // Three kills and a twin: four lives, three of them ended by a failpoint.
    expect(r.replicatorKills).toBe(3);
    expect(r.replicatorStarts).toBe(5);
    expect(r.converged).toBe(true);
    expect(r.expectationMismatches).toEqual([]);
    // Duplicate delivery (replays after every kill, two instances at once) is neither redundant nor a violation.
    expect(r.audit!.counts).toMatchObject({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 });
    expect(r.audit!.findings).toBe(0);
  });
});
