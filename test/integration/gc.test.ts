// Tombstone GC gated on every peer's progress (issue #14), on both engines, one server pair each.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkState } from '../../src/checker/state-check.ts';
import { HorizonCrossedError } from '../../src/errors.ts';
import { collectGarbage, type GcReport } from '../../src/gc/collector.ts';
import type { Replicator } from '../../src/replicator/replicator.ts';
import { syncNodes } from '../../src/sync/repair.ts';
import { spawnCli } from '../helpers/cli-process.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, eventually, setupNodes, startReplicator } from '../helpers/replication.ts';

const DDL = ['CREATE TABLE {{db}}.items (id INT NOT NULL PRIMARY KEY, v VARCHAR(40) NOT NULL)'];
const MARGIN_MS = 2000;
const TOMB = 'lww_meta.tomb__app__items';

describeEachEngine('tombstone GC gated on every peer', 2, (ctx) => {
  let urls: string[];
  let a: Connection;
  let b: Connection;
  let replicator: Replicator | null = null;
  const start = (gc: false | { intervalMs: number; marginMs: number } = false) =>
    startReplicator(urls, { keepaliveCheckpointMs: 200, capture: { heartbeatMs: 300 }, gc }).then((r) => {
      replicator = r;
      return r;
    });
  const stop = async () => {
    await replicator?.stop();
    replicator = null;
  };
  const gc = (dryRun = false) => collectGarbage({ nodes: urls, marginMs: MARGIN_MS, dryRun });
  const count = async (c: Connection, sql: string) => Number((await c.query<RowDataPacket[]>(sql))[0]![0]!.n);
  const tombstones = (c: Connection) => count(c, `SELECT COUNT(*) AS n FROM ${TOMB}`);
  const ids = async (c: Connection) => (await c.query<RowDataPacket[]>('SELECT id FROM app.items ORDER BY id'))[0].map((r) => Number(r.id)).join(',');
  /** Writes on one node only, keeping the versions given (as a replicator's session does) and out of the binlog. */
  const sideWrite = async (c: Connection, sql: string, values: unknown[]) => {
    await c.query('SET @lww_apply = (SELECT secret FROM lww_meta.apply_secret WHERE singleton = 1), sql_log_bin = 0');
    try {
      await c.query(sql, values);
    } finally {
      await c.query('SET @lww_apply = NULL, sql_log_bin = 1');
    }
  };

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    [a, b] = (await setupNodes(urls, 'app', DDL, ['items'])) as [Connection, Connection];
  });
  afterAll(async () => {
    await stop();
    await a?.end();
    await b?.end();
  });

  it('gc --dry-run reports the horizon per node and direction and writes nothing; a pass then removes what every peer applied', async () => {
    await start();
    await a.query("INSERT INTO app.items (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e'), (6, 'f')");
    await eventually('the rows on n2', () => ids(b), (v) => v === '1,2,3,4,5,6');
    await b.query('DELETE FROM app.items WHERE id IN (1, 2, 3)');
    await converged([a, b], 'app', 'items');
    await eventually('tombstones on both', () => Promise.all([tombstones(a), tombstones(b)]), ([x, y]) => x === 3 && y === 3);
    const dry = await eventually('the horizon to pass the deletes', () => gc(true), (r) => r.nodes.every((n) => n.collected === 3), 20_000);
    const before = await Promise.all([a, b].map(async (c) => [await tombstones(c), await count(c, 'SELECT COUNT(*) AS n FROM lww_meta.gc_state')]));
    const cli = spawnCli(['gc', '--node', urls[0]!, '--node', urls[1]!, '--dry-run', '--gc-margin', '2s', '--json']);
    expect(await cli.exited).toBe(0);
    const report = JSON.parse(cli.output().slice(cli.output().indexOf('{'))) as GcReport & { nodes: Array<{ horizon: string | null }> };
    expect(report.dryRun).toBe(true);
    expect(report.paused).toEqual([]);
    expect(report.directions.map((d) => d.name).sort()).toEqual(['n1→n2', 'n2→n1']);
    for (const n of report.nodes) {
      expect(BigInt(n.horizon!)).toBeGreaterThan(0n);
      expect(n.tombstones).toBe(3);
      expect(n.collected).toBe(3);
    }
    expect(dry.nodes[0]!.heldBy).toMatch(/→|own clock/);
    const after = await Promise.all([a, b].map(async (c) => [await tombstones(c), await count(c, 'SELECT COUNT(*) AS n FROM lww_meta.gc_state')]));
    expect(after).toEqual(before);
    expect(after).toEqual([
      [3, 0],
      [3, 0],
    ]);
    const real = await gc();
    expect(real.nodes.map((n) => n.collected)).toEqual([3, 3]);
    expect([await tombstones(a), await tombstones(b)]).toEqual([0, 0]);
    // Collected on both: the nodes still compare identical.
    expect((await checkState({ nodes: urls })).identical).toBe(true);
  });

  it('a peer whose replicator is stopped longer than the margin holds GC back; after restart all converges with no row back', async () => {
    await stop();
    const stoppedAt = Date.now();
    await b.query("UPDATE app.items SET v = 'b-edit' WHERE id = 4");
    await new Promise((r) => setTimeout(r, 5));
    await a.query('DELETE FROM app.items WHERE id IN (4, 5)');
    await new Promise((r) => setTimeout(r, MARGIN_MS + 1000));
    const held = await gc();
    const held2 = await gc();
    expect(held.nodes.map((n) => n.collected)).toEqual([0, 0]);
    expect(await tombstones(a)).toBe(2);
    // The horizon stays where the stopped streams left it (before the stop, less the margin), pass after pass.
    for (const n of held.nodes) expect(Date.parse(n.horizonTime!)).toBeLessThan(stoppedAt - MARGIN_MS + 1000);
    expect(held2.nodes.map((n) => n.horizonTime)).toEqual(held.nodes.map((n) => n.horizonTime));
    expect(held.directions.every((d) => (d.lagMs ?? 0) >= MARGIN_MS)).toBe(true);
    // GC inside replicate: it runs, and once the streams caught up it removes the tombstones.
    const r = await start({ intervalMs: 300, marginMs: MARGIN_MS });
    await converged([a, b], 'app', 'items');
    expect(await ids(a)).toBe('6');
    await eventually('replicate to collect', async () => (await r.status()).gc, (s) => (s?.collected ?? 0) >= 4, 20_000);
    const status = (await r.status()).gc!;
    expect(status.last!.paused).toEqual([]);
    expect([await tombstones(a), await tombstones(b)]).toEqual([0, 0]);
    expect([await ids(a), await ids(b)]).toEqual(['6', '6']);
    await stop();
  });

  it('a late older insert after its tombstone was collected is refused or still correct on every path', async () => {
    const [[g]] = await a.query<RowDataPacket[]>("SELECT collected_below AS g FROM lww_meta.gc_state WHERE schema_name = 'app'");
    const old = (((BigInt(String(g!.g)) >> 10n) - 2n) << 10n) | 2n; // a node-2 version below what n1 collected
    // Stream, within the rules: a write on n2 stamped by a slow session clock (older than the horizon) is a new
    // write after the delete on both nodes alike, so both keep it.
    await start();
    await b.query('SET TIMESTAMP = UNIX_TIMESTAMP(NOW(6)) - 3600');
    await b.query("INSERT INTO app.items (id, v) VALUES (4, 'slow-clock')");
    await b.query('SET TIMESTAMP = DEFAULT');
    await converged([a, b], 'app', 'items');
    expect(await ids(a)).toBe('4,6');
    await b.query('DELETE FROM app.items WHERE id = 4');
    await converged([a, b], 'app', 'items');
    await stop();

    // n2 holds a row n1 deleted and collected long ago (its data is older than n1's horizon).
    await sideWrite(b, 'INSERT INTO app.items (id, v, _lww_ts) VALUES (1, ?, ?)', ['resurrect-me', old.toString()]);
    // sync: refused, in a dry run too, and nothing written.
    await expect(syncNodes({ nodes: urls })).rejects.toThrow(HorizonCrossedError);
    await expect(syncNodes({ nodes: urls, dryRun: true })).rejects.toThrow(/re-seed node B/);
    expect(await ids(a)).toBe('6');

    // Initial copy: n1 forgets n2's stream (as for a node removed and rejoining), so n2→n1 starts afresh and copies.
    await a.query("DELETE FROM lww_meta.checkpoints WHERE source_id LIKE 'node-2%'");
    const { Replicator } = await import('../../src/replicator/replicator.ts');
    const rejoin = new Replicator({ nodes: urls, restartDelayMs: 200, capture: { heartbeatMs: 300 }, gc: false });
    await rejoin.start();
    await expect(rejoin.wait()).rejects.toThrow(/refusing to merge app\.items from node n2 into node n1: key \[1\].*re-seed node n2/);
    await rejoin.stop();
    expect(await ids(a)).toBe('6');

    // Stream from an old checkpoint: n1's checkpoint for n2 predates what n1 collected (n2 was away longer than the horizon).
    await sideWrite(b, 'DELETE FROM app.items WHERE id = 1', []);
    await a.query("UPDATE lww_meta.checkpoints SET source_time_us = source_time_us - 3600000000 WHERE source_id = 'node-2'");
    const away = new Replicator({ nodes: urls, restartDelayMs: 200, capture: { heartbeatMs: 300 }, gc: false });
    await away.start();
    await expect(away.wait()).rejects.toThrow(/n1 garbage-collected tombstones of app\.items .* node n2 \(node-2\) was away longer than the GC horizon/);
    const failed = (await away.status()).directions.find((d) => d.name === 'n2→n1')!;
    expect(failed.state).toBe('failed');
    await away.stop();
    await a.query("UPDATE lww_meta.checkpoints SET source_time_us = source_time_us + 3600000000 WHERE source_id = 'node-2'");
    expect([await ids(a), await ids(b)]).toEqual(['6', '6']);
  });

  it('the state check forgives a tombstone collected on one node below its horizon, not one above it', async () => {
    const [[g]] = await a.query<RowDataPacket[]>("SELECT collected_below AS g FROM lww_meta.gc_state WHERE schema_name = 'app'");
    const below = BigInt(String(g!.g)) - 1024n;
    await sideWrite(b, `INSERT INTO ${TOMB} (id, _lww_ts) VALUES (100, ?)`, [below.toString()]);
    const ok = await checkState({ nodes: urls });
    expect(ok.identical).toBe(true);
    expect(ok.tables[0]!.notes.join(' ')).toMatch(/1 tombstone\(s\) held on one node were already garbage-collected/);
    await sideWrite(b, `INSERT INTO ${TOMB} (id, _lww_ts) VALUES (101, ?)`, [(BigInt(String(g!.g)) + 1024n).toString()]);
    const bad = await checkState({ nodes: urls });
    expect(bad.identical).toBe(false);
    expect(bad.tables[0]!.findings.map((f) => f.key.id)).toEqual(['101']);
    await sideWrite(b, `DELETE FROM ${TOMB} WHERE id IN (100, 101)`, []);
  });
});
