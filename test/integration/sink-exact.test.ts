// Issue #11, sink side: key equality decided by the server (temporal, decimal, collated keys), a
// case-only key change, unique swaps inside one transaction, validation before a batch is poisoned,
// a rejected transaction stopping the sink, abort() during retries.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { createSink, InvalidChangeError, type Sink, type SourceTransactionInput } from '../../src/index.ts';
import { storedAtDecimals } from '../../src/writer/values.ts';
import { freshDatabase, rowsOf } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';

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

  it('a FLOAT key given as a JS number finds its stored row and tombstone (0.1 bound as a double matched neither: the delete left the row)', async () => {
    await freshDatabase(conn, 'exfl', ['CREATE TABLE {{db}}.t (f FLOAT NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const sink = sinkFor();
    const ins = (f: number | string, v: number, version: bigint): Change => ({ schema: 'exfl', table: 't', op: 'insert', after: { f, v }, version });
    const del = (f: number | string, version: bigint): Change => ({ schema: 'exfl', table: 't', op: 'delete', before: { f }, version });
    await sink.write({ sourceId: 'x', position: '1', changes: [ins(0.1, 1, 10n), ins('2.2', 1, 10n)] });
    await sink.flush();
    await sink.write({ sourceId: 'x', position: '2', changes: [del(0.1, 30n), del(2.2, 30n)] });
    await sink.flush();
    expect(await rowsOf(conn, 'exfl', 't', ['f'])).toEqual([]);
    // An older insert of the key arriving late stays out: the tombstone is found.
    await sink.write({ sourceId: 'x', position: '3', changes: [ins(0.1, 2, 20n)] });
    await sink.flush();
    expect(await rowsOf(conn, 'exfl', 't', ['f'])).toEqual([]);
    expect(sink.stats().tables['exfl.t']).toMatchObject({ deleted: 2, skippedByTombstone: 1 });
  });

  it('a DOUBLE(5,2) key given as 6.69 finds its stored row (6.6899999999999995) and tombstone: the delete takes the row, a late older insert stays out', async () => {
    await freshDatabase(conn, 'exdd', ['CREATE TABLE {{db}}.t (k DOUBLE(5,2) NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const sink = sinkFor();
    const ins = (k: number | string, v: number, version: bigint): Change => ({ schema: 'exdd', table: 't', op: 'insert', after: { k, v }, version });
    const del = (k: number | string, version: bigint): Change => ({ schema: 'exdd', table: 't', op: 'delete', before: { k }, version });
    await sink.write({ sourceId: 'x', position: '1', changes: [ins(6.69, 1, 10n), ins('1.14', 1, 10n)] });
    await sink.flush();
    const [stored] = await conn.query<RowDataPacket[]>('SELECT k * 1e0 AS raw FROM exdd.t ORDER BY k');
    expect(stored.map((r) => Number(r.raw))).toEqual([storedAtDecimals(1.14, 2), 6.6899999999999995]);
    await sink.write({ sourceId: 'x', position: '2', changes: [del(6.69, 30n), del('1.14', 30n)] });
    await sink.flush();
    expect(await rowsOf(conn, 'exdd', 't', ['k'])).toEqual([]);
    await sink.write({ sourceId: 'x', position: '3', changes: [ins(6.69, 2, 20n)] });
    await sink.flush();
    expect(await rowsOf(conn, 'exdd', 't', ['k'])).toEqual([]);
    expect(sink.stats().tables['exdd.t']).toMatchObject({ deleted: 2, skippedByTombstone: 1 });
  });

  it("ENUM and SET members holding a backslash, a quote or a newline are known by their text (COLUMN_TYPE escapes them; 'a\\b' was refused, the number 1 written as 'a\\\\b')", async () => {
    await freshDatabase(conn, 'exen', ["CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, e ENUM('a\\\\b', 'it''s', 'x\\ny') NULL, s SET('p\\\\q', 'r''s') NULL, _lww_ts BIGINT UNSIGNED NOT NULL)"]);
    const sink = sinkFor();
    const row = (id: number, e: unknown, s: unknown): Change => ({ schema: 'exen', table: 't', op: 'insert', after: { id, e, s }, version: BigInt(id) + 10n });
    await sink.write({ sourceId: 'x', position: '1', changes: [row(1, 'a\\b', 'p\\q'), row(2, 1, 3), row(3, "it's", "r's"), row(4, 'x\ny', 'p\\q,r\'s')] });
    await sink.flush();
    const [rows] = await conn.query<RowDataPacket[]>('SELECT id, e + 0 AS ei, s + 0 AS si FROM exen.t ORDER BY id');
    expect(rows.map((r) => `${r.id}:${r.ei}:${r.si}`)).toEqual(['1:1:1', '2:1:3', '3:2:2', '4:3:3']);
  });

  it('in a transaction of thousands of rows, the keys a newer tombstone holds back stay deleted wherever they fall among the statements', async () => {
    // 2,500 keys take three tombstone reads (1,024 keys each at most) and several upserts; the held
    // keys sit in the first, second and last read, and in the padded tail of a read (70 keys: > 64).
    await freshDatabase(conn, 'ex9', [
      'CREATE TABLE {{db}}.n (id BIGINT NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)',
      'CREATE TABLE {{db}}.s (k VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)',
    ]);
    const sink = sinkFor();
    const held = [7, 1030, 2049, 2499];
    const del = (table: 'n' | 's', i: number): Change =>
      table === 'n' ? { schema: 'ex9', table, op: 'delete', before: { id: i }, version: 900n } : { schema: 'ex9', table, op: 'delete', before: { k: `key-${i}` }, version: 900n };
    await sink.write({ sourceId: 'x', position: '1', changes: [...held.map((i) => del('n', i)), ...held.map((i) => del('s', i)), del('n', 65), del('s', 65)] });
    await sink.flush();
    const rows = (table: 'n' | 's', n: number): Change[] =>
      Array.from({ length: n }, (_, i) =>
        table === 'n' ? { schema: 'ex9', table, op: 'insert', after: { id: i, v: i }, version: 500n } : { schema: 'ex9', table, op: 'insert', after: { k: `KEY-${i}`, v: i }, version: 500n },
      );
    await sink.write({ sourceId: 'x', position: '2', changes: [...rows('n', 2500), ...rows('s', 2500)] });
    await sink.flush();
    // A second transaction of 70 keys: the tombstone read pads its key list to 80.
    await sink.write({ sourceId: 'x', position: '3', changes: [...rows('n', 70).map((c) => ({ ...c, version: 600n })), ...rows('s', 70).map((c) => ({ ...c, version: 600n }))] });
    await sink.flush();
    const absent = (have: number[]) => Array.from({ length: 2500 }, (_, i) => i).filter((i) => !have.includes(i));
    const ids = (await rowsOf(conn, 'ex9', 'n', ['id'])).map((r) => Number(r.id));
    expect(absent(ids)).toEqual([7, 65, 1030, 2049, 2499]);
    const ks = (await rowsOf(conn, 'ex9', 's', ['k'])).map((r) => Number(String(r.k).slice(4)));
    expect(absent(ks)).toEqual([7, 65, 1030, 2049, 2499]);
    // 5 held keys in the first transaction, 2 in the second (7 and 65 are below 70).
    expect(sink.stats().tables['ex9.n']).toMatchObject({ skippedByTombstone: 7, inserted: 2495 });
    expect(sink.stats().tables['ex9.s']).toMatchObject({ skippedByTombstone: 7, inserted: 2495 });
  });

  it('the tombstone read of wide keys is split to fit max_allowed_packet, and a held key among them stays deleted', async () => {
    // 1,024 keys of 2,000 bytes are about 2 MB in one read; the target takes 1 MB packets.
    await freshDatabase(conn, 'ex10', ['CREATE TABLE {{db}}.w (k VARBINARY(2048) NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const [[before]] = await conn.query<RowDataPacket[]>('SELECT @@GLOBAL.max_allowed_packet AS p');
    await conn.query('SET GLOBAL max_allowed_packet = ?', [1 << 20]);
    try {
      const sink = sinkFor();
      const key = (i: number) => Buffer.concat([Buffer.from(String(i).padStart(5, '0')), Buffer.alloc(1995, 0x61 + (i % 26))]);
      await sink.write({ sourceId: 'x', position: '1', changes: [{ schema: 'ex10', table: 'w', op: 'delete', before: { k: key(700) }, version: 900n }] });
      await sink.flush();
      const rows: Change[] = Array.from({ length: 1024 }, (_, i) => ({ schema: 'ex10', table: 'w', op: 'insert', after: { k: key(i), v: i }, version: 500n }));
      await sink.write({ sourceId: 'x', position: '2', changes: rows });
      await sink.flush();
      const [stored] = await conn.query<RowDataPacket[]>('SELECT COUNT(*) AS n, SUM(v) AS s FROM ex10.w');
      expect(Number(stored[0]!.n)).toBe(1023);
      expect(Number(stored[0]!.s)).toBe((1023 * 1024) / 2 - 700);
      expect(sink.stats().tables['ex10.w']).toMatchObject({ skippedByTombstone: 1, inserted: 1023 });
    } finally {
      await conn.query('SET GLOBAL max_allowed_packet = ?', [Number(before!.p)]);
    }
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

  it('a late older insert stays deleted when a key of the same statement differs from it only in letter case under a binary collation', async () => {
    await freshDatabase(conn, 'excase', ['CREATE TABLE {{db}}.t (k VARCHAR(10) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const sink = sinkFor();
    const insert = (k: string, version: bigint): Change => ({ schema: 'excase', table: 't', op: 'insert', after: { k, v: Number(version) }, version });
    await sink.write({ sourceId: 'k', position: '1', changes: [insert('ALPHA', 10n)] });
    await sink.flush();
    await sink.write({ sourceId: 'k', position: '2', changes: [{ schema: 'excase', table: 't', op: 'delete', before: { k: 'ALPHA' }, version: 30n }] });
    await sink.flush();
    // A peer's older insert of 'ALPHA' arrives late beside one of 'alpha' (another key under utf8mb4_bin):
    // both are inserted by one statement, and the tombstone must still take 'ALPHA' out again.
    await sink.write({ sourceId: 'k', position: '3', changes: [insert('alpha', 20n), insert('ALPHA', 20n)] });
    await sink.flush();
    expect((await rowsOf(conn, 'excase', 't', ['k'])).map((r) => `${r.k}@${r._lww_ts}`)).toEqual(['alpha@20']);
    const [tomb] = await conn.query<RowDataPacket[]>('SELECT k, CAST(_lww_ts AS CHAR) AS v FROM lww_meta.tomb__excase__t');
    expect(tomb.map((r) => `${r.k}@${r.v}`)).toEqual(['ALPHA@30']);
    expect(sink.stats().tables['excase.t']).toMatchObject({ inserted: 2, skippedByTombstone: 1 });
  });

  it('parent and child rows in one batch pass the foreign key whatever the table names; a late child row whose parent is gone is held back by its tombstone, or dropped with one when newer', async () => {
    await freshDatabase(conn, 'exfk', [
      'CREATE TABLE {{db}}.p (id INT PRIMARY KEY, _lww_ts BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB',
      'CREATE TABLE {{db}}.c (id INT PRIMARY KEY, pid INT NOT NULL, v INT, _lww_ts BIGINT UNSIGNED NOT NULL, FOREIGN KEY (pid) REFERENCES {{db}}.p (id) ON DELETE CASCADE) ENGINE=InnoDB',
    ]);
    const sink = sinkFor();
    const c = (op: Change['op'], id: number, version: bigint, v = 0): Change =>
      op === 'delete' ? { schema: 'exfk', table: 'c', op, before: { id, pid: 1 }, version } : { schema: 'exfk', table: 'c', op, after: { id, pid: 1, v }, version };
    await sink.write({ sourceId: 's', position: '1', changes: [{ schema: 'exfk', table: 'p', op: 'insert', after: { id: 1 }, version: 10n }, c('insert', 10, 10n), c('insert', 11, 10n)] });
    await sink.flush();
    // The parent's delete and its cascaded child deletes (with tombstones), as capture sends them.
    await sink.write({ sourceId: 's', position: '2', changes: [c('delete', 10, 20n), c('delete', 11, 20n), { schema: 'exfk', table: 'p', op: 'delete', before: { id: 1 }, version: 20n }] });
    await sink.flush();
    // A peer's older child updates arrive late: inserting them would name the deleted parent.
    await sink.write({ sourceId: 's', position: '3', changes: [c('update', 10, 15n, 7), c('update', 11, 16n, 8)] });
    await sink.flush();
    expect(await rowsOf(conn, 'exfk', 'c', ['id'])).toEqual([]);
    expect(sink.stats().tables['exfk.c']!.skippedByTombstone).toBe(2);
    // A newer child row whose ON DELETE CASCADE parent was deleted goes as the cascade took it on
    // the parent's node: not written, its key tombstoned at its own version, counted.
    await sink.write({ sourceId: 's', position: '4', changes: [c('update', 10, 30n, 9)] });
    await sink.flush();
    expect(await rowsOf(conn, 'exfk', 'c', ['id'])).toEqual([]);
    const [tombs] = await conn.query<RowDataPacket[]>('SELECT id, CAST(_lww_ts AS CHAR) AS v FROM lww_meta.tomb__exfk__c ORDER BY id');
    expect(tombs.map((r) => `${r.id}@${r.v}`)).toEqual(['10@30', '11@20']);
    expect(sink.stats().tables['exfk.c']!.foreignKeyCascades).toBe(1);
    // A child row naming a parent this node never had (no tombstone) is a real foreign-key error: it stops the sink loudly.
    await sink.write({ sourceId: 's', position: '5', changes: [{ schema: 'exfk', table: 'c', op: 'insert', after: { id: 12, pid: 2, v: 0 }, version: 40n }] });
    await expect(sink.flush()).rejects.toThrow(/foreign key|a child row/i);
  });

  it('a transaction that swaps unique values applies in source order; only a real clash is a conflict, resolved by last-write-wins across the key', async () => {
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
    // A value an older row still holds at the end is a conflict, resolved by last-write-wins across
    // the UNIQUE key: the older holder is removed at its own version, logged and counted.
    await sink.write({ sourceId: 's', position: '3', changes: [up(5, 20, 6n, 'insert')] });
    await sink.flush();
    expect(sink.stats().tables['ex3.t']!.uniqueClashes).toBe(1);
    expect(await conflicts('ex3')).toBe(1);
    expect((await rowsOf(conn, 'ex3', 't', ['id'])).map((r) => `${r.id}:${r.u}@${r._lww_ts}`)).toEqual(['2:10@3', '3:40@4', '4:30@5', '5:20@6']);
    const [tombs] = await conn.query<RowDataPacket[]>('SELECT id, CAST(_lww_ts AS CHAR) AS v FROM lww_meta.tomb__ex3__t');
    expect(tombs.map((r) => `${r.id}@${r.v}`)).toEqual(['1@4']);
    // An older row meeting a newer holder loses the same way: its key ends deleted at its version.
    await sink.write({ sourceId: 's', position: '4', changes: [up(6, 20, 5n, 'insert')] });
    await sink.flush();
    expect((await rowsOf(conn, 'ex3', 't', ['id'])).map((r) => r.id)).toEqual([2, 3, 4, 5]);
    const [tombs2] = await conn.query<RowDataPacket[]>('SELECT id, CAST(_lww_ts AS CHAR) AS v FROM lww_meta.tomb__ex3__t ORDER BY id');
    expect(tombs2.map((r) => `${r.id}@${r.v}`)).toEqual(['1@4', '6@5']);
  });

  it('values the server would refuse are refused by write(), named, before they can poison a batch', async () => {
    await freshDatabase(conn, 'ex4', [
      'CREATE TABLE {{db}}.t (id TINYINT UNSIGNED PRIMARY KEY, f FLOAT NULL, s VARCHAR(3) NULL, j JSON NULL, d DECIMAL(5,2) NULL, dt DATETIME(6) NULL, e ENUM(\'a\',\'b\') NULL, _lww_ts BIGINT UNSIGNED NOT NULL)',
    ]);
    const now = BigInt(Date.now()) * 1000n << 10n;
    const cases: Array<[Record<string, unknown>, RegExp, bigint?]> = [
      [{ id: 300 }, /after\.id: 300 is out of range/],
      [{ id: 1, f: Number.NaN }, /after\.f: NaN cannot be stored/],
      [{ id: 1, f: Number.POSITIVE_INFINITY }, /after\.f: Infinity/],
      [{ id: 1, f: 1e39 }, /after\.f: .*out of range for FLOAT/],
      [{ id: 1, s: 'four' }, /after\.s: 4 characters do not fit varchar\(3\)/],
      [{ id: 1, j: '{not json' }, /after\.j: is not valid JSON/],
      [{ id: 1, j: { n: Number.NaN } }, /after\.j: NaN is not a JSON number/],
      [{ id: 1, d: 12345 }, /after\.d: 12345 is out of range for decimal\(5,2\)/],
      [{ id: 1, dt: '2024-02-30 10:00:00' }, /after\.dt: .*not a valid date/],
      [{ id: 1, e: 'c' }, /after\.e: "c" is not one of/],
      [{ id: 1 }, /version .* ahead of this sink's clock, more than limits\.maxFutureMs/, (BigInt(Date.UTC(2100, 0, 1)) * 1000n) << 10n],
      [{ id: 1 }, /ahead of this sink's clock/, (1n << 64n) - 1n],
    ];
    for (const [after, message, version] of cases) {
      const sink = sinkFor();
      const row = { id: 1, f: null, s: null, j: null, d: null, dt: null, e: null, ...after };
      const err = await sink.write({ sourceId: 'v', position: '1', changes: [{ schema: 'ex4', table: 't', op: 'insert', after: row, version: version ?? now }] }).catch((e: unknown) => e);
      expect(err, String(message)).toBeInstanceOf(InvalidChangeError);
      expect((err as Error).message).toMatch(message);
      expect((err as Error).message).toContain('change #0 (ex4.t, insert)');
    }
    expect(await rowsOf(conn, 'ex4', 't', ['id'])).toEqual([]);
  });

  it('a refused transaction stops the sink: a later position never commits past it, even when nobody awaits', async () => {
    await freshDatabase(conn, 'ex5', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const sink = sinkFor({ batch: { maxDelayMs: 1000 } });
    const ins = (id: number): Change => ({ schema: 'ex5', table: 't', op: 'insert', after: { id }, version: BigInt(id) });
    const first = sink.write({ sourceId: 'stop', position: '1', changes: [ins(1)] });
    const bad = sink.write({ sourceId: 'stop', position: '2', changes: [{ schema: 'ex5', table: 't', op: 'insert', after: { id: 2, nope: 1 }, version: 2n }] });
    const later = sink.write({ sourceId: 'stop', position: '3', changes: [ins(3)] });
    await expect(bad).rejects.toThrow(/column nope does not exist/);
    await expect(later).rejects.toThrow(/column nope does not exist/);
    await first.catch(() => undefined);
    await expect(sink.flush()).rejects.toThrow(/column nope does not exist/);
    expect((await rowsOf(conn, 'ex5', 't', ['id'])).map((r) => r.id)).not.toContain(3);
    expect(['1', undefined]).toContain((await sinkFor().checkpoint('stop'))?.position);
  });

  it('abort() during a retrying batch cancels it: nothing commits afterwards', async () => {
    await freshDatabase(conn, 'ex6', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    await conn.query('INSERT INTO ex6.t VALUES (1, 0, 1)');
    const blocker = await connect(url);
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT * FROM ex6.t WHERE id = 1 FOR UPDATE');
      const sink = sinkFor({ timeouts: { lockWaitSeconds: 1 }, retry: { baseMs: 300, maxMs: 300 } });
      await sink.write({ sourceId: 'ab', position: '1', changes: [{ schema: 'ex6', table: 't', op: 'update', after: { id: 1, v: 9 }, version: 5n }] });
      const flushed = sink.flush().catch((e: unknown) => e);
      while (sink.stats().retries < 1) await new Promise((r) => setTimeout(r, 50));
      await sink.abort();
      await blocker.query('COMMIT');
      expect(await flushed).toBeInstanceOf(Error);
      // Give a wrongly surviving retry loop the time to reconnect and commit.
      await new Promise((r) => setTimeout(r, 1500));
      expect((await rowsOf(conn, 'ex6', 't', ['id'])).map((r) => r.v)).toEqual([0]);
      expect(await sinkFor().checkpoint('ab')).toBeUndefined();
    } finally {
      await blocker.end();
    }
  });
});
