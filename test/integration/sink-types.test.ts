import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { createSink, InvalidChangeError, type Row } from '../../src/index.ts';
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

  it('every value the sink accepts is stored by the server as the test expects, and every value the server would refuse or silently change is refused by the sink before anything is written', async () => {
    // With applyWorkers > 1, a value the server refuses leaves the other workers' parts committed:
    // the sink's own checks must refuse it first. Each accepted value is one transaction; each
    // refused one stops a sink of its own.
    await freshDatabase(conn, 'vals', [
      `CREATE TABLE {{db}}.t (id INT PRIMARY KEY, tm TIME NULL, tm6 TIME(6) NULL, dtm DATETIME NULL, dtm2 DATETIME(2) NULL, ts TIMESTAMP NULL, y YEAR NULL,
        st SET('a','b','c') NULL, stb SET('a','b','c') COLLATE utf8mb4_bin NULL, en ENUM('x','Y') NULL, enb ENUM('x','Y') COLLATE utf8mb4_bin NULL,
        d32 DECIMAL(3,2) NULL, d32u DECIMAL(3,2) UNSIGNED NULL, dbl DOUBLE NULL, vc VARCHAR(10) NULL, c3 CHAR(3) NULL, vc3 VARCHAR(3) NULL, vb VARBINARY(10) NULL,
        js JSON NULL, l1 VARCHAR(10) CHARACTER SET latin1 NULL, asc7 VARCHAR(10) CHARACTER SET ascii NULL, u3 VARCHAR(10) CHARACTER SET utf8mb3 NULL,
        end ENUM('a','b','2','1') NULL, f74 FLOAT(7,4) NULL, b3 BIT(3) NULL, _lww_ts BIGINT UNSIGNED NOT NULL)`,
    ]);
    const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
    const accepted: Array<[string, unknown, string]> = [
      ['tm', '838:59:59', '838:59:59'], ['tm', '-838:59:59.000', '-838:59:59'], ['tm', '24:00:00', '24:00:00'], ['tm6', '-00:00:00.000001', '-00:00:00.000001'],
      ['dtm', new Date(Date.UTC(2024, 0, 2, 3, 4, 5)), '2024-01-02 03:04:05'], ['dtm2', '2024-01-01 00:00:00.120000', '2024-01-01 00:00:00.12'],
      ['ts', '2038-01-19T03:14:07', '2038-01-19 03:14:07'],
      ['y', 0, '0000'], ['y', '0000', '0000'], ['y', 1901, '1901'], ['y', '2155', '2155'],
      ['st', 'b,a', 'a,b'], ['st', 'A', 'a'], ['st', '3', 'a,b'], ['st', 'a ', 'a'], ['st', '', ''], ['st', ['c', 'a'], 'a,c'], ['stb', 'a,b', 'a,b'],
      ['en', 'y', 'Y'], ['en', 'x ', 'x'], ['en', 2, 'Y'], ['enb', 'Y', 'Y'],
      ['d32', '9.990', '9.99'], ['d32', '-9.99', '-9.99'], ['d32', '0.999e1', '9.99'], ['d32u', '-0.000', '0.00'], ['d32', '+.5', '0.50'],
      ['end', 1, 'a'], ['end', 4, '1'], ['end', '1', '1'], ['end', '2', '2'], ['st', 5, 'a,c'], ['f74', 999.9999, '999.9999'], ['f74', -0.5, '-0.5000'],
      ['dbl', ' 1.5 ', '1.5'], ['dbl', '1e308', '1e308'],
      ['c3', 'abc  ', 'abc'], ['c3', 'ab ', 'ab'], ['vc', '😀 ok', '😀 ok'],
      ['js', '["\\ud83d\\ude00"]', ctx.engine === 'mysql' ? '["😀"]' : '["\\ud83d\\ude00"]'], ['js', nested(ctx.engine === 'mysql' ? 100 : 31), ctx.engine === 'mysql' ? nested(100).replaceAll('][', '], [') : nested(31)],
      ...(ctx.engine === 'mariadb' ? [['js', '[1e400]', '[1e400]'] as [string, unknown, string]] : []),
      ['l1', 'café €™', 'café €™'], ['asc7', 'plain', 'plain'], ['u3', 'ünï', 'ünï'],
    ];
    const refused: Array<[string, unknown, RegExp]> = [
      ['tm', '12:61:00', /not a valid TIME/], ['tm', '839:00:00', /outside the TIME range/], ['tm6', '838:59:59.5', /outside the TIME range/], ['tm', '10:00:00.6', /fractional-second/], ['tm', '1 10:00:00', /not a TIME/],
      ['dtm', '2024-01-01 00:00:00.9', /fractional-second/], ['dtm', '9999-12-31 23:59:59.9', /fractional-second/], ['dtm', new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)), /fractional-second/],
      ['dtm2', '2024-01-01 00:00:00.125', /fractional-second/],
      ['y', 5, /not a YEAR/], ['y', '0', /not a YEAR/], ['y', '05', /not a YEAR/], ['y', 1900, /not a YEAR/], ['y', 2156, /not a YEAR/], ['y', '1999.5', /not a YEAR/],
      ['st', 'a,d', /not a member/], ['st', '8', /not a member/], ['st', ' a', /not a member/], ['st', 'a,', /not a member/], ['st', ',a', /not a member/], ['stb', 'A', /letter case/],
      ['en', '0', /not one of/], ['en', ' x', /not one of/], ['enb', 'y', /letter case/], ['enb', 'X', /letter case/],
      ['d32', '9.995', /more than 2 fraction digits/], ['d32', '9.994', /more than 2 fraction digits/], ['d32', '1.005', /more than 2 fraction digits/], ['d32', '10.00', /out of range/], ['d32u', '-0.01', /negative/],
      ['end', 0, /member position/], ['end', 5, /member position/], ['st', 8, /not a set of members/], ['f74', 1000.5, /out of range/], ['f74', 1.23456, /more than 4 decimals/], ['b3', Buffer.from([8]), /significant bits/],
      ...(ctx.engine === 'mysql' ? [['js', '[18446744073709551616]', /beyond 64 bits/] as [string, unknown, RegExp], ['js', { n: 1n << 64n }, /beyond 64 bits/] as [string, unknown, RegExp]] : []),
      ['dbl', '0x10', /floating-point/], ['dbl', '0b1', /floating-point/], ['dbl', '1_0', /floating-point/],
      ['vc', 'a\ud800b', /surrogate/], ['vc', '\udc00', /surrogate/], ['vb', 'a\ud800', /surrogate/], ['js', '"a\\ud800"', /surrogate/], ['js', ['\ud800'], /surrogate/],
      ['js', nested(ctx.engine === 'mysql' ? 101 : 32), ctx.engine === 'mysql' ? /deeper than 100/ : /deeper than 31/],
      ...(ctx.engine === 'mysql' ? [['js', '[1e400]', /range of a double/] as [string, unknown, RegExp]] : []),
      ['c3', 'abc\t', /4 characters/], ['vc3', 'abc  ', /5 characters/],
      ['l1', 'ł', /U\+0142 does not exist in the latin1/], ['l1', '\u0080', /U\+0080/], ['asc7', 'é', /U\+00E9/], ['u3', '😀', /U\+1F600/],
    ];
    const columns = ['tm', 'tm6', 'dtm', 'dtm2', 'ts', 'y', 'st', 'stb', 'en', 'enb', 'd32', 'd32u', 'dbl', 'vc', 'c3', 'vc3', 'vb', 'js', 'l1', 'asc7', 'u3', 'end', 'f74', 'b3'];
    const nulls = Object.fromEntries(columns.map((c) => [c, null]));
    const change = (id: number, column: string, value: unknown) => ({ schema: 'vals', table: 't', op: 'insert' as const, after: { ...nulls, id, [column]: value }, version: 10n });
    const sink = createSink({ target: ctx.servers[0]!.url, failpoints: '' });
    for (const [i, [column, value]] of accepted.entries()) await sink.write({ sourceId: 'vals', position: String(i), changes: [change(i, column, value)] });
    await sink.flush();
    await sink.close();
    const [rows] = await conn.query<RowDataPacket[]>('SELECT * FROM vals.t ORDER BY id');
    const stored = await Promise.all(
      accepted.map(async ([column], i) => {
        const [r] = await conn.query<RowDataPacket[]>(`SELECT CAST(${quoteIdent(column)} AS CHAR) AS v FROM vals.t WHERE id = ?`, [i]);
        return `${column}=${r[0]?.v}`;
      }),
    );
    expect(stored).toEqual(accepted.map(([column, , want]) => `${column}=${want}`));
    expect(rows.length).toBe(accepted.length);
    for (const [i, [column, value, message]] of refused.entries()) {
      const one = createSink({ target: ctx.servers[0]!.url, failpoints: '' });
      const outcome = await one.write({ sourceId: 'refused', position: String(i), changes: [change(1000 + i, column, value)] }).then(() => one.flush()).then(
        () => 'stored',
        (e: Error) => e,
      );
      await one.close().catch(() => {});
      expect(outcome, `${column} ${String(value)}`).toBeInstanceOf(InvalidChangeError);
      expect((outcome as Error).message, `${column} ${String(value)}`).toMatch(new RegExp(`after\\.${column}: .*${message.source}`));
    }
    const [after] = await conn.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM vals.t');
    expect(Number(after[0]!.n)).toBe(accepted.length);
    if (ctx.engine === 'mariadb') {
      // MariaDB's YEAR(2): a row read gives 24 for 2024, which must be written back as is.
      await conn.query('CREATE TABLE vals.y2 (id INT PRIMARY KEY, y YEAR(2) NULL, _lww_ts BIGINT UNSIGNED NOT NULL)');
      const y2 = createSink({ target: ctx.servers[0]!.url, failpoints: '' });
      await y2.write({ sourceId: 'y2', position: '1', changes: [24, 1999, 0].map((y, id) => ({ schema: 'vals', table: 'y2', op: 'insert' as const, after: { id, y }, version: 10n })) });
      await y2.flush();
      await y2.close();
      const [years] = await conn.query<RowDataPacket[]>('SELECT CAST(y AS CHAR) AS y FROM vals.y2 ORDER BY id');
      expect(years.map((r) => r.y)).toEqual(['24', '99', '00']);
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
