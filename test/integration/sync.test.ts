// `lww-sink sync`: the one-shot LWW merge repairs what the state check reports, and its dry run
// predicts exactly what the sync then changes.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterEach, expect, it } from 'vitest';
import { checkState } from '../../src/checker/index.ts';
import { Replicator } from '../../src/replicator/replicator.ts';
import { type SyncReport, syncNodes } from '../../src/sync/repair.ts';
import { spawnCli } from '../helpers/cli-process.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { setupNodes } from '../helpers/replication.ts';
import { enterApplySessionSql } from '../../src/sql/install.ts';

const DB = 'repair';
const DDL = [
  'CREATE TABLE {{db}}.items (id INT NOT NULL PRIMARY KEY, v VARCHAR(40) NOT NULL, n INT NOT NULL DEFAULT 0, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0)',
  'CREATE TABLE {{db}}.pairs (a INT NOT NULL, b VARCHAR(8) NOT NULL, note VARCHAR(20) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, PRIMARY KEY (a, b))',
];
const BASE_US = 1_700_000_000_000_000n;

/** 1..max as a derived table of cross-joined digits. */
function numbers(max: number): string {
  const digits = `(SELECT 0 AS d ${[1, 2, 3, 4, 5, 6, 7, 8, 9].map((d) => `UNION ALL SELECT ${d}`).join(' ')})`;
  const places = Math.max(1, Math.ceil(Math.log10(max + 1)));
  const terms = Array.from({ length: places }, (_, i) => `${10 ** i} * p${i}.d`);
  return `(SELECT 1 + ${terms.join(' + ')} AS n FROM ${Array.from({ length: places }, (_, i) => `${digits} p${i}`).join(', ')}) s WHERE n <= ${max}`;
}

/** The same rows with the same versions on every node (as if replicated), written past the triggers; two pairs rows per `a`. */
async function identicalBase(conns: Connection[], rows: number): Promise<void> {
  for (const c of conns) {
    await c.query(enterApplySessionSql('lww_meta'));
    await c.query(`INSERT INTO ${DB}.items (id, v, n, _lww_ts) SELECT n, CONCAT('base-', n), n, ((CAST(? AS UNSIGNED) + n) << 10) | 1 FROM ${numbers(rows)}`, [BASE_US.toString()]);
    await c.query(
      `INSERT INTO ${DB}.pairs (a, b, note, _lww_ts) SELECT FLOOR((n + 1) / 2), IF(n % 2 = 0, 'x', 'y'), CONCAT('p', n), ((CAST(? AS UNSIGNED) + n) << 10) | 1 FROM ${numbers(Math.min(rows, 200))}`,
      [BASE_US.toString()],
    );
    await c.query('SET @lww_apply = NULL');
  }
}

async function dump(conn: Connection): Promise<string> {
  const parts: unknown[] = [];
  for (const sql of [
    `SELECT * FROM ${DB}.items ORDER BY id`,
    `SELECT * FROM ${DB}.pairs ORDER BY a, b`,
    `SELECT * FROM lww_meta.tomb__${DB}__items ORDER BY id`,
    'SELECT source_id, position, owner_epoch FROM lww_meta.checkpoints ORDER BY source_id',
  ]) {
    parts.push((await conn.query<RowDataPacket[]>(sql))[0]);
  }
  return JSON.stringify(parts);
}

/** Per direction and table: the dry run's changes against what the sink did. */
function predicted(dry: SyncReport, done: SyncReport): Array<{ at: string; want: number[]; got: number[] }> {
  return dry.directions.flatMap((d, i) =>
    d.tables.map((t, j) => {
      const applied = done.directions[i]!.tables[j]!.applied!;
      const p = t.planned;
      return {
        at: `${d.name} ${t.table}`,
        want: [p.insert, p.update, p.delete, p.delete + p.tombstone, 0],
        got: [applied.inserted, applied.updated, applied.deleted, applied.tombstoned, applied.skippedStale + applied.skippedByTombstone],
      };
    }),
  );
}

describeEachEngine('sync (one-shot LWW repair)', 2, (ctx) => {
  let conns: Connection[] = [];
  afterEach(async () => {
    for (const c of conns) await c.end().catch(() => undefined);
    conns = [];
  });

  it('repairs what check reports (missing row, older version, tombstone vs row, other values at another version); the dry run predicts it', async () => {
    const urls = ctx.servers.map((s) => s.url);
    conns = await setupNodes(urls, DB, DDL, ['items', 'pairs']);
    const [a, b] = conns as [Connection, Connection];
    await identicalBase(conns, 100);
    // Local writes made while nodes were not replicating, stamped by the triggers.
    await a.query(`INSERT INTO ${DB}.items (id, v) VALUES (5001, 'only-on-a')`); // missing on B
    await b.query(`INSERT INTO ${DB}.items (id, v) VALUES (5002, 'only-on-b')`); // missing on A
    await a.query(`UPDATE ${DB}.items SET v = 'newer-on-a' WHERE id = 10`); // B holds an older version
    await b.query(`DELETE FROM ${DB}.items WHERE id = 20`); // B's tombstone is newer than A's row
    await a.query(`DELETE FROM ${DB}.items WHERE id = 21`); // A's tombstone, then a newer row on B
    await b.query(`UPDATE ${DB}.items SET v = 'reborn-on-b' WHERE id = 21`);
    await a.query(`UPDATE ${DB}.items SET v = 'left' WHERE id = 40`); // other values, B's version newer
    await b.query(`UPDATE ${DB}.items SET v = 'right' WHERE id = 40`);
    await a.query(`INSERT INTO ${DB}.pairs (a, b, note) VALUES (7, 'z', 'only-on-a')`);
    await b.query(`UPDATE ${DB}.pairs SET note = 'newer-on-b' WHERE a = 8 AND b = 'x'`);

    const cli = async (args: string[]) => {
      const p = spawnCli(args);
      const code = await p.exited;
      return { code, out: p.output() };
    };
    const nodes = ['--node', urls[0]!, '--node', urls[1]!];
    const before = await cli(['check', ...nodes, '--json']);
    expect(before.code).toBe(1);
    const found = JSON.parse(before.out.slice(before.out.indexOf('{'))) as { tables: Array<{ table: string; counts: Record<string, number> }> };
    const items = found.tables.find((t) => t.table === `${DB}.items`)!.counts;
    expect(items).toMatchObject({ missing_row: 1, extra_row: 1, tombstone_vs_row: 2, version_mismatch: 2 });

    const snapshot = [await dump(a), await dump(b)];
    const dryRun = await cli(['sync', ...nodes, '--dry-run', '--json', '--quiet', '--chunk-rows', '7']);
    expect(dryRun.code).toBe(0);
    expect([await dump(a), await dump(b)]).toEqual(snapshot); // a dry run writes nothing
    const dry = JSON.parse(dryRun.out) as SyncReport;
    expect(dry.dryRun).toBe(true);
    const planned = (dir: string, table: string) => dry.directions.find((d) => d.name === dir)!.tables.find((t) => t.table === `${DB}.${table}`)!.planned;
    expect(planned('A→B', 'items')).toMatchObject({ insert: 1, update: 1, delete: 0, tombstone: 1 });
    expect(planned('B→A', 'items')).toMatchObject({ insert: 2, update: 1, delete: 1, tombstone: 0 });
    expect(planned('A→B', 'pairs')).toMatchObject({ insert: 1, update: 0, delete: 0, tombstone: 0 });
    expect(planned('B→A', 'pairs')).toMatchObject({ insert: 0, update: 1, delete: 0, tombstone: 0 });

    const human = await cli(['sync', ...nodes, '--chunk-rows', '7']);
    expect(human.code).toBe(0);
    expect(human.out).toMatch(/A→B repair\.items rows: \d+\/\d+ \(100%\) \d+ rows\/s done/); // progress on stderr
    expect(human.out).toMatch(/done in [\d.]+ s: inserted 4, updated 3, deleted 1, tombstones written 2/);
    const after = await cli(['check', ...nodes]);
    expect(after.code).toBe(0);
    const [[reborn]] = await a.query<RowDataPacket[]>(`SELECT v FROM ${DB}.items WHERE id = 21`);
    expect(reborn!.v).toBe('reborn-on-b');
    const [gone] = await a.query<RowDataPacket[]>(`SELECT v FROM ${DB}.items WHERE id = 20`);
    expect(gone).toEqual([]);
    const [ids] = await a.query<RowDataPacket[]>('SELECT source_id FROM lww_meta.checkpoints ORDER BY source_id');
    expect(ids.map((r) => r.source_id)).toEqual(['sync:node-2#rows:repair.items', 'sync:node-2#rows:repair.pairs', 'sync:node-2#tombstones:repair.items', 'sync:node-2#tombstones:repair.pairs']);

    const again = await cli(['sync', ...nodes, '--json', '--quiet']);
    const second = JSON.parse(again.out) as SyncReport;
    expect(second.totals.applied).toMatchObject({ inserted: 0, updated: 0, deleted: 0, tombstoned: 0 }); // nothing left to repair
  });

  it('on thousands of scattered differences the dry run counts exactly what sync writes, and sync leaves the replicator checkpoints alone', async () => {
    const urls = ctx.servers.map((s) => s.url);
    conns = await setupNodes(urls, DB, DDL, ['items', 'pairs']);
    const [a, b] = conns as [Connection, Connection];
    await identicalBase(conns, 20_000);
    // A replicator ran once (its checkpoints and copy streams exist), then stopped.
    const replicator = new Replicator({ nodes: urls, capture: { heartbeatMs: 1000 } });
    await replicator.start();
    await replicator.whenStreaming(60_000);
    await replicator.stop();
    const checkpoints = async (c: Connection) =>
      JSON.stringify((await c.query<RowDataPacket[]>("SELECT source_id, position, owner_epoch, applied_batches FROM lww_meta.checkpoints WHERE source_id NOT LIKE 'sync:%' ORDER BY source_id"))[0]);
    const replicatorCheckpoints = [await checkpoints(a), await checkpoints(b)];
    expect(replicatorCheckpoints[0]).toMatch(/node-2/);

    // Divergences written past the triggers, with explicit versions (node bits kept per node).
    const tomb = `lww_meta.tomb__${DB}__items`;
    for (const c of conns) await c.query(enterApplySessionSql('lww_meta'));
    await b.query(`DELETE FROM ${DB}.items WHERE id % 97 = 0`); // rows missing on B, no tombstone
    await a.query(`DELETE FROM ${DB}.items WHERE id % 101 = 0`); // rows missing on A
    await a.query(`UPDATE ${DB}.items SET v = CONCAT(v, '-a'), _lww_ts = (((_lww_ts >> 10) + 1) << 10) | 1 WHERE id % 89 = 0`);
    await b.query(`UPDATE ${DB}.items SET v = CONCAT(v, '-b'), n = n + 1, _lww_ts = (((_lww_ts >> 10) + 2) << 10) | 2 WHERE id % 83 = 0`);
    await a.query(`INSERT INTO ${tomb} (id, _lww_ts) SELECT id, (((_lww_ts >> 10) + 3) << 10) | 1 FROM ${DB}.items WHERE id % 79 = 0`);
    await a.query(`DELETE FROM ${DB}.items WHERE id % 79 = 0`); // deleted on A, newer than B's row
    await b.query(`INSERT INTO ${tomb} (id, _lww_ts) SELECT id, (((_lww_ts >> 10) - 1) << 10) | 2 FROM ${DB}.items WHERE id % 73 = 0`); // older tombstones under rows
    await b.query(`INSERT INTO ${tomb} (id, _lww_ts) SELECT id, (((_lww_ts >> 10) + 5) << 10) | 2 FROM ${DB}.items WHERE id % 71 = 0 AND id % 73 <> 0`);
    await b.query(`DELETE FROM ${DB}.items WHERE id % 71 = 0 AND id % 73 <> 0`);
    await a.query(`UPDATE ${DB}.pairs SET note = 'a', _lww_ts = (((_lww_ts >> 10) + 1) << 10) | 1 WHERE a % 3 = 0`);
    for (const c of conns) await c.query('SET @lww_apply = NULL');
    const differing = await checkState({ nodes: urls, tables: [`${DB}.items`, `${DB}.pairs`] });
    expect(differing.identical).toBe(false);

    const snapshot = [await dump(a), await dump(b)];
    const dry = await syncNodes({ nodes: urls, dryRun: true, chunkRows: 500 });
    expect([await dump(a), await dump(b)]).toEqual(snapshot);
    const done = await syncNodes({ nodes: urls, chunkRows: 500 });
    const mismatches = predicted(dry, done).filter((p) => JSON.stringify(p.want) !== JSON.stringify(p.got));
    expect(mismatches).toEqual([]);
    expect(done.totals.applied!.inserted + done.totals.applied!.updated + done.totals.applied!.deleted).toBeGreaterThan(500);
    const repaired = await checkState({ nodes: urls, tables: [`${DB}.items`, `${DB}.pairs`] });
    expect(repaired.identical).toBe(true);
    expect([await checkpoints(a), await checkpoints(b)]).toEqual(replicatorCheckpoints);
    // Spot checks of the LWW winners.
    // A's newer tombstones removed B's rows (A had no tombstone where its row was already gone: % 101).
    const [[a79]] = await b.query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${DB}.items WHERE id % 79 = 0 AND id % 101 <> 0`);
    expect(Number(a79!.n)).toBe(0);
    // B's older tombstones under its rows: the rows survive (unless another, newer tombstone won).
    const [[b73]] = await a.query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${DB}.items WHERE id % 73 = 0 AND id % 79 <> 0 AND id % 71 <> 0`);
    const survivors = Array.from({ length: 20_000 }, (_, i) => i + 1).filter((id) => id % 73 === 0 && id % 79 !== 0 && id % 71 !== 0).length;
    expect(Number(b73!.n)).toBe(survivors);
    console.log(`[${ctx.engine}] sync of ${done.totals.rowsRead} rows and ${done.totals.tombstonesRead} tombstones in ${done.seconds.toFixed(1)} s: ${JSON.stringify(done.totals.applied)}`);
  });

  it('refuses bad flags with exit code 2', async () => {
    const one = spawnCli(['sync', '--node', ctx.servers[0]!.url]);
    expect(await one.exited).toBe(2);
    const chunk = spawnCli(['sync', '--node', ctx.servers[0]!.url, '--node', ctx.servers[1]!.url, '--chunk-rows', '0']);
    expect(await chunk.exited).toBe(2);
    expect(chunk.output()).toMatch(/--chunk-rows must be an integer/);
  });
});
