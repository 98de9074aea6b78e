// Issue #11, sink side: key equality decided by the server (temporal, decimal, collated keys), a
// case-only key change, unique swaps inside one transaction, validation before a batch is poisoned,
// a rejected transaction stopping the sink, abort() during retries.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { createSink, type Sink, type SourceTransactionInput } from '../../src/index.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { freshDatabase, rowsOf } from '../helpers/db.ts';

type Change = SourceTransactionInput['changes'][number];

describeEachEngine('LWW sink, exact keys', 1, (ctx) => {
  let url: string;
  let conn: Connection;
  const sinks: Sink[] = [];
  const sinkFor = (opts: Partial<Parameters<typeof createSink>[0]> = {}) => {
    const s = createSink({ target: url, failpoints: '', ...opts });
    sinks.push(s);
    return s;
  };
  const conflicts = async (db: string) => {
    const [r] = await conn.query<RowDataPacket[]>('SELECT reason FROM lww_meta.conflicts WHERE schema_name = ?', [db]);
    return r.length;
  };

  beforeAll(async () => {
    url = ctx.servers[0]!.url;
    conn = await connect(url);
  });
  afterAll(async () => {
    for (const s of sinks) await s.abort();
    await conn?.end();
  });

  it('a late older insert stays deleted whatever the spelling of a DATETIME(6) or DECIMAL key', async () => {
    await freshDatabase(conn, 'ex1', [
      'CREATE TABLE {{db}}.t (at DATETIME(6) NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL, UNIQUE KEY uv (v))',
      'CREATE TABLE {{db}}.d (k DECIMAL(10,2) NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL, UNIQUE KEY uv (v))',
    ]);
    const sink = sinkFor();
    const t = (op: 'insert' | 'delete', at: string, version: bigint): Change =>
      op === 'insert' ? { schema: 'ex1', table: 't', op, after: { at, v: 1 }, version } : { schema: 'ex1', table: 't', op, before: { at }, version };
    const d = (op: 'insert' | 'delete', k: number | string, version: bigint): Change =>
      op === 'insert' ? { schema: 'ex1', table: 'd', op, after: { k, v: 1 }, version } : { schema: 'ex1', table: 'd', op, before: { k }, version };
    await sink.write({ sourceId: 'x', position: '1', changes: [t('insert', '2024-01-01 10:00:00', 10n), d('insert', 1.5, 10n)] });
    await sink.flush();
    // Capture and copy spell the fraction; a number 1.5 is stored as 1.50.
    await sink.write({ sourceId: 'x', position: '2', changes: [t('delete', '2024-01-01 10:00:00.000000', 30n), d('delete', '1.50', 30n)] });
    await sink.flush();
    await sink.write({ sourceId: 'x', position: '3', changes: [t('insert', '2024-01-01 10:00:00', 20n), d('insert', 1.5, 20n)] });
    await sink.flush();
    // Within one batch too.
    await sink.write({ sourceId: 'x', position: '4', changes: [t('delete', '2024-01-02 00:00:00', 50n), t('insert', '2024-01-02 00:00:00.000000', 40n)] });
    await sink.flush();
    expect(await rowsOf(conn, 'ex1', 't', ['at'])).toEqual([]);
    expect(await rowsOf(conn, 'ex1', 'd', ['k'])).toEqual([]);
    expect(sink.stats().tables['ex1.t']).toMatchObject({ skippedByTombstone: 2, uniqueClashes: 0 });
    expect(sink.stats().tables['ex1.d']).toMatchObject({ skippedByTombstone: 1, uniqueClashes: 0 });
    expect(await conflicts('ex1')).toBe(0);
  });

  it('a case-only key change keeps the row, and concurrent spellings of one key converge on the newest', async () => {
    await freshDatabase(conn, 'ex2', ['CREATE TABLE {{db}}.t (k VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const sink = sinkFor();
    await sink.write({ sourceId: 'c', position: '1', changes: [{ schema: 'ex2', table: 't', op: 'insert', after: { k: 'A', v: 1 }, version: 10n }] });
    await sink.flush();
    await sink.write({ sourceId: 'c', position: '2', changes: [{ schema: 'ex2', table: 't', op: 'update', before: { k: 'A', v: 1 }, after: { k: 'a', v: 2 }, version: 20n }] });
    await sink.flush();
    expect((await rowsOf(conn, 'ex2', 't', ['k'])).map((r) => `${r.k}:${r.v}@${r._lww_ts}`)).toEqual(['a:2@20']);
    // Two nodes inserted 'B' and 'b'; whatever the arrival order, the newer spelling wins.
    for (const order of [
      [30n, 31n],
      [31n, 30n],
    ]) {
      await conn.query("DELETE FROM ex2.t WHERE k = 'b'");
      for (const v of order) {
        await sink.write({ sourceId: 'c', position: `b${v}`, changes: [{ schema: 'ex2', table: 't', op: 'insert', after: { k: v === 31n ? 'b' : 'B', v: Number(v) }, version: v }] });
        await sink.flush();
      }
      const [row] = await conn.query<RowDataPacket[]>("SELECT k, _lww_ts FROM ex2.t WHERE k = 'b'");
      expect(`${row[0]!.k}@${row[0]!._lww_ts}`).toBe('b@31');
    }
  });

  it('a transaction that swaps unique values applies in source order; only a real clash is a conflict', async () => {
    await freshDatabase(conn, 'ex3', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, u INT NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, UNIQUE KEY uu (u))']);
    const sink = sinkFor();
    const up = (id: number, u: number, version: bigint, op: 'insert' | 'update' = 'update'): Change => ({ schema: 'ex3', table: 't', op, after: { id, u }, version });
    await sink.write({ sourceId: 's', position: '1', changes: [up(1, 10, 1n, 'insert'), up(2, 20, 1n, 'insert'), up(3, 30, 1n, 'insert')] });
    await sink.flush();
    // Source: id1 u=-1; id2 u=10; id1 u=20 — one transaction. And a new row 4 taking 30 from row 3, which moves to 40.
    await sink.write({ sourceId: 's', position: '2', changes: [up(1, -1, 2n), up(2, 10, 3n), up(1, 20, 4n), up(4, 30, 5n, 'insert'), up(3, 40, 4n)] });
    await sink.flush();
    expect((await rowsOf(conn, 'ex3', 't', ['id'])).map((r) => `${r.id}:${r.u}@${r._lww_ts}`)).toEqual(['1:20@4', '2:10@3', '3:40@4', '4:30@5']);
    expect(sink.stats().tables['ex3.t']!.uniqueClashes).toBe(0);
    expect(await conflicts('ex3')).toBe(0);
    // A value another row still holds at the end is a conflict: logged and counted, the other row kept.
    await sink.write({ sourceId: 's', position: '3', changes: [up(5, 20, 6n, 'insert')] });
    await sink.flush();
    expect(sink.stats().tables['ex3.t']!.uniqueClashes).toBe(1);
    expect(await conflicts('ex3')).toBe(1);
    expect((await rowsOf(conn, 'ex3', 't', ['id'])).map((r) => r.id)).toEqual([1, 2, 3, 4]);
  });
});
