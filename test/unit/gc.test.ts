import { describe, expect, it } from 'vitest';
import { expiredProgressRows } from '../../src/gc/collector.ts';
import { computeHorizons, type NodeObservation, streamSourceNodeId, versionBound } from '../../src/gc/horizon.ts';
import { makeVersion } from '../../src/model/version.ts';
import {
  collectableTombstonesSql,
  deleteConflictsSql,
  deleteProgressRowsSql,
  deleteTombstonesSql,
  expiredConflictsSql,
  recordCollectedSql,
} from '../../src/sql/gc.ts';

const S = 1_000_000n; // one second in µs
const node = (name: string, nodeId: number, nowUs: bigint, checkpoints: Array<[number, bigint | undefined]>): NodeObservation => ({
  name,
  nodeId,
  reachable: true,
  nowUs,
  checkpoints: checkpoints.map(([sourceNodeId, sourceTimeUs]) => (sourceTimeUs === undefined ? { sourceNodeId } : { sourceNodeId, sourceTimeUs })),
});

describe('the GC horizon', () => {
  it('is the slowest direction of the whole mesh minus the margin, for every node', () => {
    const r = computeHorizons([node('n1', 1, 1000n * S, [[2, 990n * S]]), node('n2', 2, 1000n * S, [[1, 950n * S]])], 60n * S);
    expect(r.paused).toEqual([]);
    expect(r.nodes.map((n) => n.horizonTimeUs)).toEqual([890n * S, 890n * S]);
    expect(r.nodes[0]!.horizon).toBe(makeVersion(890n * S, 0));
    expect(r.nodes[0]!.heldBy).toBe('n1→n2');
    expect(r.directions.map((d) => [d.name, d.lagMs])).toEqual([
      ['n2→n1', 10_000],
      ['n1→n2', 50_000],
    ]);
  });
  it("never passes a node's own clock minus the margin (its future local writes)", () => {
    const r = computeHorizons([node('n1', 1, 900n * S, [[2, 990n * S]]), node('n2', 2, 1000n * S, [[1, 995n * S]])], 10n * S);
    expect(r.nodes[0]!.horizonTimeUs).toBe(890n * S);
    expect(r.nodes[0]!.heldBy).toBe("n1's own clock");
    expect(r.nodes[1]!.horizonTimeUs).toBe(980n * S);
  });
  it('a tombstone goes only when its physical time is below the horizon', () => {
    const h = versionBound(890n * S);
    expect(makeVersion(890n * S - 1n, 1023) < h).toBe(true);
    expect(makeVersion(890n * S, 0) < h).toBe(false);
  });
  it('pauses when a node cannot be reached', () => {
    const r = computeHorizons([node('n1', 1, 1000n * S, [[2, 990n * S]]), { name: 'n2', reachable: false, error: 'ECONNREFUSED' }], 60n * S);
    expect(r.nodes.every((n) => n.horizon === null)).toBe(true);
    expect(r.paused.join('\n')).toMatch(/n2 cannot be reached \(ECONNREFUSED\)/);
  });
  it('pauses when a checkpoint names a node that was not given', () => {
    const r = computeHorizons([node('n1', 1, 1000n * S, [[2, 990n * S], [3, 990n * S]]), node('n2', 2, 1000n * S, [[1, 990n * S]])], 60n * S);
    expect(r.nodes.every((n) => n.horizon === null)).toBe(true);
    expect(r.paused.join('\n')).toMatch(/node id 3, which was not given/);
    expect(r.directions.map((d) => d.name)).toContain('node-3→n2');
  });
  it('pauses when a direction never started or recorded no source time', () => {
    const noCheckpoint = computeHorizons([node('n1', 1, 1000n * S, []), node('n2', 2, 1000n * S, [[1, 990n * S]])], 60n * S);
    expect(noCheckpoint.paused).toEqual([expect.stringMatching(/n2→n1: n1 has no checkpoint for node id 2/)]);
    const noTime = computeHorizons([node('n1', 1, 1000n * S, [[2, undefined]]), node('n2', 2, 1000n * S, [[1, 990n * S]])], 60n * S);
    expect(noTime.paused).toEqual([expect.stringMatching(/n2→n1: the checkpoint records no source time/)]);
    expect(noTime.nodes.map((n) => n.horizon)).toEqual([null, null]);
  });
  it('holds where a checkpoint that does not move left it', () => {
    const stuck = (now: bigint) => computeHorizons([node('n1', 1, now, [[2, 500n * S]]), node('n2', 2, now, [[1, now - S]])], 2n * S);
    expect(stuck(1000n * S).nodes[1]!.horizonTimeUs).toBe(498n * S);
    expect(stuck(5000n * S).nodes[1]!.horizonTimeUs).toBe(498n * S);
    expect(stuck(5000n * S).directions.find((d) => d.name === 'n2→n1')!.lagMs).toBe(4_500_000);
  });
  it('reads replication streams, not copy or sync progress, from checkpoint ids', () => {
    expect(streamSourceNodeId('node-12')).toBe(12);
    expect(streamSourceNodeId('node-12#rows:db.t')).toBeUndefined();
    expect(streamSourceNodeId('sync:node-1#rows:db.t')).toBeUndefined();
  });
});

describe('retention of progress rows', () => {
  it('removes idle sync rows and copy rows of streams that no longer exist, keeps a live direction’s copy rows', () => {
    const rows = [{ sourceId: 'node-1', position: 'f:4', idleSeconds: 1 }, { sourceId: 'node-1#rows:db.t', position: 'done', idleSeconds: 1e6 }];
    expect(expiredProgressRows(rows, ['node-1#rows:db.t', 'node-9#rows:db.t', 'sync:node-1#tombstones:db.t', 'node-1'])).toEqual(['node-9#rows:db.t', 'sync:node-1#tombstones:db.t']);
  });
});

describe('GC statements', () => {
  const key = [{ name: 'id', dataType: 'bigint', columnType: 'bigint' }];
  it('read the next tombstones below the horizon in key order, without locks', () => {
    expect(collectableTombstonesSql('m', 'tomb', key, '_lww_ts', 1024n, 1000)).toEqual({
      sql: 'SELECT `id`, `_lww_ts` FROM `m`.`tomb` WHERE `_lww_ts` < ? ORDER BY `m`.`tomb`.`id` LIMIT 1000',
      values: ['1024'],
    });
    expect(collectableTombstonesSql('m', 'tomb', ['a', 'b'], 'v', 7n, 5, [1, 'x'])).toEqual({
      sql: 'SELECT `a`, `b`, `v` FROM `m`.`tomb` WHERE `a` >= ? AND (`a` > ? OR (`a` = ? AND `b` > ?)) AND `v` < ? ORDER BY `m`.`tomb`.`a`, `m`.`tomb`.`b` LIMIT 5',
      values: [1, 1, 1, 'x', '7'],
    });
  });
  it('delete exactly the keys read, and only while still below the horizon', () => {
    expect(deleteTombstonesSql('m', 'tomb', ['a', 'b'], 'v', 9n, [[1, 'x'], [2, 'y']])).toEqual({
      sql: 'DELETE FROM `m`.`tomb` WHERE (`a`, `b`) IN ((?, ?), (?, ?)) AND `v` < ?',
      values: [1, 'x', 2, 'y', '9'],
    });
    expect(() => deleteTombstonesSql('m', 'tomb', key, 'v', 9n, [])).toThrow(/at least one key/);
  });
  it('raise the collected horizon of a table, never lower it', () => {
    expect(recordCollectedSql('m', 'db', 't', 5n, 3)).toEqual({
      sql:
        'INSERT INTO `m`.`gc_state` (`schema_name`, `table_name`, `collected_below`, `collected_rows`) VALUES (?, ?, ?, ?)' +
        ' ON DUPLICATE KEY UPDATE `collected_below` = GREATEST(`collected_below`, CAST(? AS DECIMAL(20,0))), `collected_rows` = `collected_rows` + ?, `updated_at` = CURRENT_TIMESTAMP(6)',
      values: ['db', 't', '5', 3, '5', 3],
    });
  });
  it('expire conflict-log and progress rows by the server clock', () => {
    expect(expiredConflictsSql('m', 604800, 1000)).toEqual({
      sql: 'SELECT `id` FROM `m`.`conflicts` WHERE `created_at` < CURRENT_TIMESTAMP(6) - INTERVAL ? SECOND ORDER BY `id` LIMIT 1000',
      values: [604800],
    });
    expect(deleteConflictsSql('m', ['4', '5'], 60).sql).toBe('DELETE FROM `m`.`conflicts` WHERE `id` IN (?, ?) AND `created_at` < CURRENT_TIMESTAMP(6) - INTERVAL ? SECOND');
    expect(deleteProgressRowsSql('m', ['sync:x#rows:db.t'], 60)).toEqual({
      sql: 'DELETE FROM `m`.`checkpoints` WHERE `source_id` IN (?) AND `updated_at` < CURRENT_TIMESTAMP(6) - INTERVAL ? SECOND',
      values: ['sync:x#rows:db.t', 60],
    });
  });
});

describe('the state check and collected tombstones', () => {
  it('forgives a tombstone the other node collected below its horizon, and nothing else', async () => {
    const { isCollectedTombstone } = await import('../../src/checker/compare-values.ts');
    const tomb = (version: bigint) => ({ kind: 'tombstone' as const, version });
    const absent = { kind: 'absent' as const };
    const row = { kind: 'row' as const, version: 5n, values: {} };
    expect(isCollectedTombstone(tomb(5n), absent, 0n, 6n)).toBe(true);
    expect(isCollectedTombstone(absent, tomb(5n), 6n, 0n)).toBe(true);
    expect(isCollectedTombstone(tomb(6n), absent, 0n, 6n)).toBe(false);
    expect(isCollectedTombstone(tomb(5n), absent, 6n, 0n)).toBe(false);
    expect(isCollectedTombstone(tomb(5n), row, 9n, 9n)).toBe(false);
    expect(isCollectedTombstone(tomb(5n), tomb(4n), 9n, 9n)).toBe(false);
  });
});

describe('GC in the ops endpoint', () => {
  it('shows the horizon, tombstones and removals in /metrics and the last pass in /status', async () => {
    const { serveOps } = await import('../../src/replicator/metrics.ts');
    const ops = await serveOps({ host: '127.0.0.1', port: 0 });
    const node = (name: string, collected: number) => ({
      name,
      url: `mysql://u:***@${name}/`,
      reachable: true,
      horizon: 1024n,
      horizonTime: '2026-12-01T10:00:00.000Z',
      heldBy: 'n2→n1',
      tables: [],
      tombstones: 7,
      collected,
      conflictsRemoved: 1,
      progressRowsRemoved: 0,
    });
    const gc = {
      intervalMs: 60_000,
      marginMs: 600_000,
      runs: 2,
      collected: 5,
      conflictsRemoved: 2,
      progressRowsRemoved: 0,
      byNode: { n1: { collected: 3, conflictsRemoved: 1 }, n2: { collected: 2, conflictsRemoved: 1 } },
      last: { dryRun: false, marginMs: 600_000, retentionMs: 1, paused: [], directions: [], nodes: [node('n1', 3), node('n2', 2)], seconds: 0.1 },
    };
    const fake = { directions: [], status: async () => ({ nodes: [], directions: [], gc }) };
    ops.attach(fake as never);
    try {
      const base = `http://127.0.0.1:${ops.address.port}`;
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/^lww_gc_horizon_seconds\{node="n1"\} 1796119200$/m);
      expect(metrics).toMatch(/^lww_gc_tombstones\{node="n2"\} 7$/m);
      expect(metrics).toMatch(/^lww_gc_tombstones_collected_total\{node="n1"\} 3$/m);
      expect(metrics).toMatch(/^lww_gc_runs_total 2$/m);
      expect(metrics).toMatch(/^lww_gc_paused 0$/m);
      // A second scrape of the same pass adds nothing.
      expect(await (await fetch(`${base}/metrics`)).text()).toMatch(/^lww_gc_tombstones_collected_total\{node="n1"\} 3$/m);
      const status = (await (await fetch(`${base}/status`)).json()) as { gc: { collected: number; last: { nodes: Array<{ horizon: string }> } } };
      expect(status.gc.collected).toBe(5);
      expect(status.gc.last.nodes[0]!.horizon).toBe('1024');
    } finally {
      await ops.close();
    }
  });
});
