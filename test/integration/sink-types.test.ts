import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { createSink, type Row } from '../../src/index.ts';
import { TypedJson } from '../../src/model/json.ts';
import { typedJsonExpr } from '../../src/sql/dml.ts';
import { quoteIdent, quoteTable } from '../../src/sql/quote.ts';
import { freshDatabase } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const ALL_BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

const COLUMNS = [
  ['id', 'INT NOT NULL PRIMARY KEY'],
  ['u64', 'BIGINT UNSIGNED NULL'],
  ['i64', 'BIGINT NULL'],
  ['i8', 'TINYINT NULL'],
  ['dec', 'DECIMAL(65,30) NULL'],
  ['f', 'FLOAT NULL'],
  ['d', 'DOUBLE NULL'],
  ['dt', 'DATE NULL'],
  ['dtm', 'DATETIME(6) NULL'],
  ['ts', 'TIMESTAMP(6) NULL'],
  ['tm', 'TIME(6) NULL'],
  ['y', 'YEAR NULL'],
  ['ch', 'CHAR(10) CHARACTER SET utf8mb4 NULL'],
  ['vc', 'VARCHAR(100) CHARACTER SET utf8mb4 NULL'],
  ['tx', 'TEXT CHARACTER SET utf8mb4 NULL'],
  ['bn', 'BINARY(4) NULL'],
  ['vb', 'VARBINARY(300) NULL'],
  ['bl', 'BLOB NULL'],
  ['js', 'JSON NULL'],
  ['en', "ENUM('small','medium','large') NULL"],
  ['st', "SET('a','b','c') NULL"],
  ['bt', 'BIT(64) NULL'],
] as const;

const LITERAL_ROWS = [
  `(1, 18446744073709551615, -9223372036854775808, -128, '12345678901234567890123456789012345.123456789012345678901234567891',
    3.4e38, 1.7976931348623157e308, '1000-01-01', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', '-838:59:59.000000', 2155,
    'ab', 'emoji 😀 ünïcødé', 'text 🧪', X'00FF7F80', ?, ?, '{"b": [1, 2.5, "x"], "a": {"z": null}}', 'large', 'a,c', b'1111111111111111111111111111111111111111111111111111111111111111', 1)`,
  `(2, 0, 9223372036854775807, 127, '-0.000000000000000000000000000001', -1.17549e-38, 0.1, '2024-02-29', '1970-01-01 00:00:01.000001', '1970-01-01 00:00:01.000000', '00:00:00.000001', 1901,
    '', '', '', X'00000000', X'', X'', '[]', 'small', '', b'0', 1)`,
  `(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1)`,
];

describeEachEngine('sink type fidelity', 1, (ctx) => {
  let conn: Connection;
  beforeAll(async () => {
    conn = await connect(ctx.servers[0]!.url);
  });
  afterAll(async () => {
    await conn?.end();
  });

  it('every column type round-trips exactly through the sink, under identifiers with backticks, quotes, spaces and unicode', async () => {
    const schema = "src `db' x";
    const target = 'tgt db ✓';
    const table = 'ta`b"le ñ';
    const ddl = (db: string) =>
      `CREATE TABLE ${quoteTable(db, table)} (${[...COLUMNS.map(([n, t]) => `${quoteIdent(n === 'vc' ? 'v c`ol' : n)} ${t}`), '`_lww_ts` BIGINT UNSIGNED NOT NULL'].join(', ')})`;
    for (const db of [schema, target]) {
      await conn.query(`DROP DATABASE IF EXISTS ${quoteIdent(db)}`);
      await conn.query(`CREATE DATABASE ${quoteIdent(db)} CHARACTER SET utf8mb4`);
      await conn.query(ddl(db));
    }
    for (const values of LITERAL_ROWS) {
      const binds = values.includes('?') ? [ALL_BYTES, ALL_BYTES] : [];
      await conn.query(`INSERT INTO ${quoteTable(schema, table)} VALUES ${values}`, binds);
    }
    const [source] = await conn.query<RowDataPacket[]>(`SELECT * FROM ${quoteTable(schema, table)} ORDER BY id`);
    const sink = createSink({ target: ctx.servers[0]!.url, failpoints: '' });
    await sink.write({
      sourceId: 'types',
      position: '1',
      changes: source.map((r) => {
        const after: Row = { ...r };
        delete after._lww_ts;
        return { schema: target, table, op: 'insert' as const, after, version: BigInt(r._lww_ts) };
      }),
    });
    await sink.flush();
    await sink.close();
    const [copied] = await conn.query<RowDataPacket[]>(`SELECT * FROM ${quoteTable(target, table)} ORDER BY id`);
    expect(copied.map((r) => ({ ...r, _lww_ts: undefined }))).toEqual(source.map((r) => ({ ...r, _lww_ts: undefined })));
    // Spot checks that the comparison above compares exact representations.
    expect(copied[0]!.u64).toBe('18446744073709551615');
    expect(copied[0]!.vb).toEqual(ALL_BYTES);
    expect(copied[0]!.dec).toBe('12345678901234567890123456789012345.123456789012345678901234567891');
    expect(copied[0]!['v c`ol']).toBe('emoji 😀 ünïcødé');
    expect(copied[0]!.ts).toBe('2038-01-19 03:14:07.999999');
    expect(copied[0]!.bt).toEqual(Buffer.alloc(8, 0xff));
    // Checksums computed by the server agree too (nothing differs beyond what the client shows).
    const sum = async (db: string) => {
      const [r] = await conn.query<RowDataPacket[]>(`CHECKSUM TABLE ${quoteTable(db, table)}`);
      return r[0]!.Checksum;
    };
    expect(await sum(target)).toBe(await sum(schema));
  });

  it('TIME keys that read like dates stay apart: each insert, update and delete (and its tombstone) hits its own key; a JSON TIME scalar keeps its value', async () => {
    // MySQL 9.7 read a string bound to a prepared CAST(? AS TIME) as a date ('10:05:20' → 00:00:00).
    await freshDatabase(conn, 'tkeys', ['CREATE TABLE {{db}}.shift (day INT NOT NULL, starts TIME(3) NOT NULL, who VARCHAR(20) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, PRIMARY KEY (day, starts))']);
    const starts = ['08:30:00.000', '10:05:20.000', '12:00:00.001', '100:00:00.000', '01:02:03.000', '-00:00:01.250'];
    const row = (i: number, who: string) => ({ day: 1, starts: starts[i]!, who });
    const sink = createSink({ target: ctx.servers[0]!.url, failpoints: '', batch: { maxRows: 1 } });
    await sink.write({ sourceId: 'tk', position: '1', changes: starts.map((_, i) => ({ schema: 'tkeys', table: 'shift', op: 'insert' as const, after: row(i, `w${i}`), version: 10n })) });
    await sink.write({ sourceId: 'tk', position: '2', changes: [{ schema: 'tkeys', table: 'shift', op: 'update' as const, before: row(1, 'w1'), after: row(1, 'bob'), version: 20n }] });
    await sink.write({ sourceId: 'tk', position: '3', changes: [{ schema: 'tkeys', table: 'shift', op: 'delete' as const, before: row(2, 'w2'), version: 30n }] });
    // A replay of the deleted key's older insert stays out (its tombstone is found by the key).
    await sink.write({ sourceId: 'tk', position: '4', changes: [{ schema: 'tkeys', table: 'shift', op: 'insert' as const, after: row(2, 'late'), version: 25n }] });
    await sink.flush();
    await sink.close();
    const [rows] = await conn.query<RowDataPacket[]>("SELECT CAST(starts AS CHAR) AS t, who FROM tkeys.shift ORDER BY shift.starts");
    expect(rows.map((r) => `${r.t}=${r.who}`)).toEqual(['-00:00:01.250=w5', '01:02:03.000=w4', '08:30:00.000=w0', '10:05:20.000=bob', '100:00:00.000=w3']);
    const [tombs] = await conn.query<RowDataPacket[]>('SELECT CAST(starts AS CHAR) AS starts, _lww_ts FROM lww_meta.tomb__tkeys__shift');
    expect(tombs.map((r) => `${r.starts}@${r._lww_ts}`)).toEqual(['12:00:00.001@30']);
    if (ctx.engine === 'mysql') {
      const doc = typedJsonExpr(new TypedJson('{"closes": "23:00:00", "opens": "10:05:20"}', [
        { path: '$."closes"', type: 'time', value: '23:00:00.000000' },
        { path: '$."opens"', type: 'time', value: '10:05:20.000000' },
      ]));
      const [j] = await conn.execute<RowDataPacket[]>(`SELECT CAST(${doc.sql} AS CHAR) AS j, JSON_TYPE(JSON_EXTRACT(${doc.sql}, '$.opens')) AS t`, [...doc.values, ...doc.values]);
      expect(j[0]!.j).toBe('{"opens": "10:05:20.000000", "closes": "23:00:00.000000"}');
      expect(j[0]!.t).toBe('TIME');
    }
  });

  it('columns with an expression default (CURRENT_TIMESTAMP, MySQL DEFAULT_GENERATED) are written like any other: the source’s value, not the target’s default', async () => {
    await freshDatabase(conn, 'dflt', ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, created DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), touched TIMESTAMP(6) NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const sink = createSink({ target: ctx.servers[0]!.url, failpoints: '' });
    await sink.write({ sourceId: 'dflt', position: '1', changes: [{ schema: 'dflt', table: 't', op: 'insert', after: { id: 1, created: '2001-01-01 00:00:00.000000', touched: '2001-01-01 00:00:01.000000' }, version: 10n }] });
    await sink.write({ sourceId: 'dflt', position: '2', changes: [{ schema: 'dflt', table: 't', op: 'update', before: { id: 1 }, after: { id: 1, created: '2002-02-02 00:00:00.000000', touched: '2002-02-02 00:00:01.000000' }, version: 20n }] });
    await sink.flush();
    await sink.close();
    const [rows] = await conn.query<RowDataPacket[]>('SELECT id, CAST(created AS CHAR) AS c, CAST(touched AS CHAR) AS t, CAST(_lww_ts AS CHAR) AS v FROM dflt.t');
    expect(rows.map((r) => `${r.id}|${r.c}|${r.t}|${r.v}`)).toEqual(['1|2002-02-02 00:00:00.000000|2002-02-02 00:00:01.000000|20']);
  });
});
