// Tombstone GC gated on every peer's progress (issue #14), on both engines, one server pair each.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkState } from '../../src/checker/state-check.ts';
import { HorizonCrossedError } from '../../src/errors.ts';
import { collectGarbage, type GcReport } from '../../src/gc/collector.ts';
import { install } from '../../src/install/install.ts';
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

  it('a peer whose replicator is stopped longer than the margin holds GC back while GC keeps running; after restart all converges with no row back', async () => {
    await stop();
    // GC inside replicate, every 300 ms, with every direction streaming: the horizon follows the clock.
    const r = await start({ intervalMs: 300, marginMs: MARGIN_MS });
    const gcStatus = async () => (await r.status()).gc!;
    await eventually('a GC pass with every direction known', gcStatus, (s) => s.last !== undefined && s.last.paused.length === 0 && s.last.nodes.every((n) => n.horizon !== null));
    // n2's replicator stops (the directions into n2); n1's keeps streaming n2→n1, and GC keeps running.
    await Promise.all(r.directions.filter((d) => d.name.endsWith('→n2')).map((d) => d.stop()));
    const stoppedAt = Date.now();
    await b.query("UPDATE app.items SET v = 'b-edit' WHERE id = 4");
    await new Promise((res) => setTimeout(res, 5));
    await a.query('DELETE FROM app.items WHERE id IN (4, 5)');
    // A delete of n2 that reaches n1: applied on both nodes, yet n1 could still send n2 older changes of its key.
    await b.query("INSERT INTO app.items (id, v) VALUES (7, 'g')");
    await b.query('DELETE FROM app.items WHERE id = 7');
    await eventually('n2→n1 to apply the delete of 7', () => tombstones(a), (n) => n === 3);
    expect(await tombstones(b)).toBe(1);
    // Long enough for every one of these tombstones to be below a horizon that followed the clock.
    await new Promise((res) => setTimeout(res, MARGIN_MS + 1500));
    const runs = (await gcStatus()).runs;
    const held = await eventually('more GC passes while n2 is stopped', gcStatus, (s) => s.runs >= runs + 3);
    expect(held.lastError).toBeUndefined();
    expect(held.collected).toBe(0);
    expect([await tombstones(a), await tombstones(b)]).toEqual([3, 1]);
    // Not a pause for lack of data: the horizon is computed, held by the stopped direction where it stopped.
    expect(held.last!.paused).toEqual([]);
    for (const n of held.last!.nodes) {
      expect(n.heldBy).toBe('n1→n2');
      expect(Date.parse(n.horizonTime!)).toBeLessThan(stoppedAt - MARGIN_MS + 1000);
    }
    const lag = held.last!.directions.find((d) => d.name === 'n1→n2')!.lagMs!;
    expect(lag).toBeGreaterThanOrEqual(MARGIN_MS);
    expect(held.last!.directions.find((d) => d.name === 'n2→n1')!.lagMs!).toBeLessThan(lag);
    // The horizon does not move while the direction is stopped, pass after pass; an operator's pass agrees.
    // (The status is one live object: keep numbers, not it.)
    const horizonTimes = held.last!.nodes.map((n) => n.horizonTime);
    const runsAtHold = held.runs;
    const later = await eventually('another pass', gcStatus, (s) => s.runs >= runsAtHold + 2);
    expect(later.last!.nodes.map((n) => n.horizonTime)).toEqual(horizonTimes);
    const manual = await gc();
    expect(manual.nodes.map((n) => n.collected)).toEqual([0, 0]);
    expect(manual.nodes.every((n) => n.heldBy === 'n1→n2')).toBe(true);
    // Restart: the streams catch up, the same tombstones go, and no deleted row comes back.
    await stop();
    const r2 = await start({ intervalMs: 300, marginMs: MARGIN_MS });
    await converged([a, b], 'app', 'items');
    expect(await ids(a)).toBe('6');
    await eventually('replicate to collect every tombstone', async () => `${await tombstones(a)},${await tombstones(b)}`, (t) => t === '0,0', 20_000);
    const after = (await r2.status()).gc!;
    expect(after.last!.paused).toEqual([]);
    expect(after.collected).toBeGreaterThanOrEqual(5);
    expect([await ids(a), await ids(b)]).toEqual(['6', '6']);
    await stop();
    expect((await checkState({ nodes: urls })).identical).toBe(true);
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
  it('keeps conflict-log and idle progress rows 7 days by default; the retention option shortens it; a dry run removes nothing', async () => {
    for (const days of [8, 6, 0]) {
      await a.query(
        "INSERT INTO lww_meta.conflicts (source_id, schema_name, table_name, reason, version, row_json, created_at) VALUES ('node-2', 'app', 'items', ?, 1024, '{}', NOW(6) - INTERVAL ? DAY)",
        [`${days} days old`, days],
      );
    }
    const progress: Array<[string, number]> = [
      ['sync:node-2#rows:app.items', 8],
      ['node-9#rows:app.items', 8],
      ['node-2#rows:app.items', 8],
      ['sync:node-2#tombstones:app.items', 1],
    ];
    await a.query('DELETE FROM lww_meta.checkpoints WHERE source_id IN (?, ?, ?, ?)', progress.map(([id]) => id));
    for (const [id, days] of progress) {
      await a.query("INSERT INTO lww_meta.checkpoints (source_id, position, updated_at) VALUES (?, 'done', NOW(6) - INTERVAL ? DAY)", [id, days]);
    }
    const reasons = async () => (await a.query<RowDataPacket[]>("SELECT reason FROM lww_meta.conflicts WHERE reason LIKE '% days old' ORDER BY id"))[0].map((r) => String(r.reason));
    const rows = async () =>
      (await a.query<RowDataPacket[]>('SELECT source_id FROM lww_meta.checkpoints WHERE source_id IN (?, ?, ?, ?) ORDER BY source_id', progress.map(([id]) => id)))[0].map((r) => String(r.source_id));
    const allProgress = progress.map(([id]) => id).sort();

    const dry = await gc(true);
    expect(dry.retentionMs).toBe(7 * 24 * 3600_000);
    expect([dry.nodes[0]!.conflictsRemoved, dry.nodes[0]!.progressRowsRemoved]).toEqual([1, 2]);
    expect([await reasons(), await rows()]).toEqual([['8 days old', '6 days old', '0 days old'], allProgress]);

    const byDefault = await gc();
    expect([byDefault.nodes[0]!.conflictsRemoved, byDefault.nodes[0]!.progressRowsRemoved]).toEqual([1, 2]);
    expect(await reasons()).toEqual(['6 days old', '0 days old']);
    // A live direction's copy progress stays (its next start would copy again); sync runs and gone streams' rows go.
    expect(await rows()).toEqual(['node-2#rows:app.items', 'sync:node-2#tombstones:app.items']);

    const shorter = await collectGarbage({ nodes: urls, marginMs: MARGIN_MS, retentionMs: 2 * 24 * 3600_000 });
    expect([shorter.nodes[0]!.conflictsRemoved, shorter.nodes[0]!.progressRowsRemoved]).toEqual([1, 0]);
    expect(await reasons()).toEqual(['0 days old']);
    const cli = spawnCli(['gc', '--node', urls[0]!, '--node', urls[1]!, '--gc-retention', '12h', '--json']);
    expect(await cli.exited).toBe(0);
    expect(await reasons()).toEqual(['0 days old']);
    expect(await rows()).toEqual(['node-2#rows:app.items']);
    await a.query("DELETE FROM lww_meta.conflicts WHERE reason LIKE '% days old'");
    await a.query("DELETE FROM lww_meta.checkpoints WHERE source_id = 'node-2#rows:app.items'");
  });

  it('collects the claims of UNIQUE values given up once they are below the horizon', async () => {
    await stop();
    for (const [i, c] of [a, b].entries()) {
      await c.query('CREATE TABLE app.uniq (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL, UNIQUE KEY uv (v))');
      await install({ url: urls[i]!, nodeId: i + 1, tables: ['app.uniq'] });
    }
    await start();
    await a.query("INSERT INTO app.uniq (id, v) VALUES (1, 'x')");
    await a.query("UPDATE app.uniq SET v = 'y' WHERE id = 1");
    await converged([a, b], 'app', 'uniq');
    const claims = (c: Connection) => count(c, 'SELECT COUNT(*) AS n FROM lww_meta.claim__app__uniq__uv');
    // n1's trigger recorded the value given up; n2's sink recorded it from the update's before image.
    await eventually('the claim on both', () => Promise.all([claims(a), claims(b)]), ([x, y]) => x === 1 && y === 1);
    let removed = 0;
    await eventually(
      'the claims collected',
      async () => {
        removed += (await gc()).nodes.reduce((n, node) => n + node.claimsRemoved, 0);
        return Promise.all([claims(a), claims(b)]);
      },
      ([x, y]) => x === 0 && y === 0,
      20_000,
    );
    expect(removed).toBe(2);
    expect((await checkState({ nodes: urls })).identical).toBe(true);
  });

  it('a replicated update of a row the target deleted and collected, stamped below its horizon, stops the direction naming the key; an insert that old lands', async () => {
    await stop();
    const [[g]] = await a.query<RowDataPacket[]>("SELECT collected_below AS g FROM lww_meta.gc_state WHERE schema_name = 'app' AND table_name = 'items'");
    const physical = BigInt(String(g!.g)) >> 10n;
    const old = ((physical - 3n) << 10n) | 2n; // a node-2 version below what n1 collected
    const tombOf1 = (c: Connection) => count(c, `SELECT COUNT(*) AS n FROM ${TOMB} WHERE id = 1`);
    expect([await ids(a), await tombOf1(a)]).toEqual(['6', 0]);
    // n2 still holds row 1 at its old version, as a node that lagged longer than the margin would while n1
    // deleted the row and collected the tombstone; n2 then updates it stamped just above that version (as a
    // foreign-key follow-up is, or a session whose clock is behind).
    await sideWrite(b, 'INSERT INTO app.items (id, v, _lww_ts) VALUES (1, ?, ?)', ['lagging', old.toString()]);
    const r = await start();
    await b.query('SET TIMESTAMP = ?', [Number(physical - 1_000_000n) / 1e6]);
    await b.query("UPDATE app.items SET v = 'late' WHERE id = 1");
    await b.query('SET TIMESTAMP = DEFAULT');
    const [[v]] = await b.query<RowDataPacket[]>('SELECT _lww_ts AS v FROM app.items WHERE id = 1');
    expect(BigInt(String(v!.v))).toBeLessThan(BigInt(String(g!.g)));
    const failed = await eventually('n2→n1 to fail', async () => (await r.status()).directions.find((d) => d.name === 'n2→n1')!, (d) => d.state === 'failed');
    expect(failed.lastError).toMatch(/refusing to apply app\.items key \(id=1\) at version \d+ from node-2: the source updated a row this target does not hold.*give this node the delete back: a row in lww_meta.tomb__app__items .*re-seed this node/);
    // Refused, not retried in a loop, and nothing written: n1 still has no row 1.
    expect(failed.lastErrorKind).toBe('permanent');
    expect(await ids(a)).toBe('6');
    await stop();
    // A tombstone below the update's version (an old delete from a third node, written after the collection) decides nothing.
    await sideWrite(a, `INSERT INTO ${TOMB} (id, _lww_ts) VALUES (1, ?)`, [String(BigInt(String(v!.v)) - 1024n)]);
    const { Replicator } = await import('../../src/replicator/replicator.ts');
    const again = new Replicator({ nodes: urls, restartDelayMs: 200, capture: { heartbeatMs: 300 }, gc: false });
    await again.start();
    await expect(again.wait()).rejects.toThrow(/refusing to apply app\.items key \(id=1\)/);
    await again.stop();
    expect(await ids(a)).toBe('6');
    // The remedy the error names: n1 gets the delete back as a tombstone above the update; the stream then goes on.
    await sideWrite(a, `UPDATE ${TOMB} SET _lww_ts = ? WHERE id = 1`, [String(BigInt(String(v!.v)) + 1024n)]);
    await sideWrite(b, 'DELETE FROM app.items WHERE id = 1', []);
    await sideWrite(b, `INSERT INTO ${TOMB} (id, _lww_ts) VALUES (1, ?)`, [String(BigInt(String(v!.v)) + 1024n)]);
    // An insert that old of a key neither node holds is the source's new row: it lands on both. An update
    // that old of a row the target still holds (row 6, written before the collected deletes) is decided by that row.
    await start();
    await b.query('SET TIMESTAMP = ?', [Number(physical - 1_000_000n) / 1e6]);
    await b.query("INSERT INTO app.items (id, v) VALUES (8, 'old-clock')");
    await b.query("UPDATE app.items SET v = 'old-clock' WHERE id = 6");
    await b.query('SET TIMESTAMP = DEFAULT');
    await converged([a, b], 'app', 'items');
    expect([await ids(a), await ids(b)]).toEqual(['6,8', '6,8']);
    const [[six]] = await a.query<RowDataPacket[]>('SELECT v, _lww_ts AS ts FROM app.items WHERE id = 6');
    expect(six!.v).toBe('old-clock');
    expect(BigInt(String(six!.ts))).toBeLessThan(BigInt(String(g!.g)));
    const status = await (replicator as Replicator | null)!.status();
    expect(status.directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
    await stop();
  });
});
