// `sync` and the initial copy carry every column type over exactly: after either, each column of
// each row on the target is byte for byte what the source holds, compared on the servers as HEX of
// the exact stored value (never through JS numbers or mysql2's parsing). Keys that differ only past
// a FLOAT's sixth digit, at a DECIMAL(65,30)'s last digit or near 2^64 are paged exactly.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkState } from '../../src/checker/index.ts';
import { enterApplySessionSql } from '../../src/sql/install.ts';
import { quoteIdent, quoteTable } from '../../src/sql/quote.ts';
import { copyTables } from '../../src/sync/initial-copy.ts';
import { syncNodes } from '../../src/sync/repair.ts';
import { createSink } from '../../src/writer/sink.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { setupNodes } from '../helpers/replication.ts';

const DB = 'exact_copy';
const TYPES =
  'f FLOAT NULL, d DOUBLE NULL, dec65 DECIMAL(65,30) NULL, dec0 DECIMAL(10,0) NULL, bt BIT(64) NULL, b1 BIT(1) NULL, js JSON NULL,' +
  ' g GEOMETRY NULL, pt POINT NULL, bl LONGBLOB NULL, tx LONGTEXT NULL, dt DATETIME(6) NULL, ts TIMESTAMP(6) NULL, tm TIME(6) NULL,' +
  " dt3 DATETIME(3) NULL, da DATE NULL, y YEAR NULL, ch CHAR(5) NULL, vc VARCHAR(50) NULL, bn BINARY(4) NULL, vb VARBINARY(20) NULL, en ENUM('a','b') NULL," +
  " st SET('x','y','z') NULL, i8 TINYINT NULL, u64 BIGINT UNSIGNED NULL, i64 BIGINT NULL";
const DDL = [
  `CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, ${TYPES}, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0)`,
  'CREATE TABLE {{db}}.k (f FLOAT NOT NULL, d DECIMAL(65,30) NOT NULL, u BIGINT UNSIGNED NOT NULL, v VARCHAR(10) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, PRIMARY KEY (f, d, u))',
];
const COLUMNS = ['id', ...TYPES.split(/,\s*(?![^()]*\))/).map((c) => c.trim().split(' ')[0]!), '_lww_ts'];
const NUMERIC = new Set(['id', 'd', 'dec65', 'dec0', 'i8', 'u64', 'i64', '_lww_ts', 'y']);
const TEMPORAL = new Set(['dt', 'ts', 'tm', 'dt3', 'da']);
/** 9 MiB: HEX of it would pass MariaDB's 16 MiB max_allowed_packet. */
const LARGE = 9 << 20;

const TYPED_JSON =
  "JSON_OBJECT('d', CAST('2024-01-01' AS DATE), 't', CAST('12:00:00.5' AS TIME(1)), 'dt', CAST('2024-01-01 10:00:00.5' AS DATETIME(6))," +
  " 'n', CAST(1.50 AS DECIMAL(4,2)), 'u', CAST(7 AS UNSIGNED), 'a', JSON_ARRAY(CAST(-0.001 AS DECIMAL(10,3)), 'x'), 'k q', JSON_OBJECT('z', CAST(18446744073709551615 AS UNSIGNED)))";
/** JSON_TYPE of each scalar of TYPED_JSON, read on the server (MySQL): the text alone does not carry them. */
const TYPED_JSON_TYPES = ['$.d', '$.t', '$.dt', '$.n', '$.u', '$.a[0]', '$.a[1]', '$."k q".z'].map((p) => `JSON_TYPE(JSON_EXTRACT(js, '${p}'))`).join(', ');

/** Each column as HEX of its exact stored value, computed on the server. */
function exactHex(column: string): string {
  const q = quoteIdent(column);
  if (column === 'f') return `HEX(CAST(CAST(${q} AS DOUBLE) AS CHAR))`;
  if (NUMERIC.has(column) || TEMPORAL.has(column)) return `HEX(CAST(${q} AS CHAR))`;
  if (column === 'js') return `HEX(CONVERT(${q} USING utf8mb4))`;
  return `HEX(${q})`;
}

async function dump(conn: Connection, engine: string): Promise<string[]> {
  const types = engine === 'mysql' ? `, CONCAT_WS(',', ${TYPED_JSON_TYPES})` : '';
  const [rows] = await conn.query<RowDataPacket[]>(`SELECT ${COLUMNS.map(exactHex).join(', ')}${types} FROM ${quoteTable(DB, 't')} ORDER BY id`);
  const [keys] = await conn.query<RowDataPacket[]>(`SELECT ${['f', 'd', 'u', 'v', '_lww_ts'].map(exactHex).join(', ')} FROM ${quoteTable(DB, 'k')} ORDER BY f, d, u`);
  return [...rows, ...keys].map((r) => JSON.stringify(Object.values(r)));
}

describeEachEngine('exact copy of every column type', 2, (ctx) => {
  let conns: Connection[] = [];
  let urls: string[];
  let source: string[];

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    conns = await setupNodes(urls, DB, DDL, ['t', 'k']);
    const a = conns[0]!;
    await a.query(enterApplySessionSql('lww_meta'));
    const v = (n: number) => `${(1_700_000_000_000_000n + BigInt(n)) << 10n | 1n}`;
    await a.query(
      `INSERT INTO ${quoteTable(DB, 't')} (${COLUMNS.map(quoteIdent).join(', ')}) VALUES` +
        // The FLOAT that mysql2 reads as 37.7749; DOUBLE -0 (MariaDB stores 0); extreme DECIMAL, BIT and integers; JSON number spellings.
        ` (1, 37.774929, -0e0, '-12345678901234567890123456789012345.123456789012345678901234567891', 9999999999, b'1000000000000000000000000000000000000000000000000000000000000001', b'1',` +
        ` '{"a": 1.0, "b": 1e2, "c": [1, 1.0, -0.0, 0.1], "big": 18446744073709551615, "s": "\\\\u00e9"}', ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))', 3857),` +
        ` ST_GeomFromText('POINT(1.0000000000000002 -0.1)', 4326), X'00FF00', 'emoji 😀\\t', '2024-02-29 23:59:59.999999', '2038-01-19 03:14:07.000001',` +
        ` '-838:59:58.999999', '2024-01-01 00:00:00.100', '1000-01-01', 2155, 'é', 'trailing ', X'01000000', X'0000', 'b', 'x,z', -128, 18446744073709551615,` +
        ` -9223372036854775808, ${v(1)}),` +
        // Values apart only past FLOAT's sixth digit / at the last DECIMAL digit; the smallest DOUBLE; a 9 MiB BLOB.
        ` (2, 1.0000001, 5e-324, '0.000000000000000000000000000001', 0, b'0', b'0', '[1]', ST_GeomFromText('POINT(1 2)', 0), NULL, REPEAT(X'AB', ${LARGE}),` +
        ` NULL, '1970-01-01 00:00:00.000000', '1970-01-01 00:00:01.000000', '00:00:00.000001', '2024-01-01 00:00:00.000', '2024-02-29', 1901, '', '', X'00000000',` +
        ` X'', 'a', '', 0, 0, 0, ${v(2)}),` +
        // FLOAT -0 (MariaDB stores 0), the largest DOUBLE and FLOAT, a 9 MiB TEXT of 2-byte characters.
        ` (3, -0e0, 1.7976931348623157e308, '1.5', 1, NULL, NULL, '{"a":1}', NULL, NULL, NULL, REPEAT('é', ${LARGE / 2}), NULL, NULL, NULL, NULL, NULL, NULL,` +
        ` NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, ${v(3)}),` +
        ` (4, 3.4028234663852886e38, 0.30000000000000004, NULL, NULL, NULL, NULL, 'null', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,` +
        ` NULL, NULL, NULL, NULL, NULL, NULL, ${v(4)}),` +
        // MySQL JSON scalars whose type the text loses (MariaDB stores the text).
        ` (5, 1.17549435e-38, -2.2250738585072014e-308, NULL, NULL, NULL, NULL, ${TYPED_JSON}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,` +
        ` NULL, NULL, NULL, NULL, NULL, NULL, NULL, ${v(5)})`,
    );
    await a.query(
      `INSERT INTO ${quoteTable(DB, 'k')} (f, d, u, v, _lww_ts) VALUES (1.0000001, 0, 1, 'a', ${v(6)}), (1.0000002, 0, 1, 'b', ${v(7)}), (1.0000003, 0, 1, 'c', ${v(8)}),` +
        ` (1.0000003, '0.000000000000000000000000000001', 1, 'd', ${v(9)}), (1.0000003, '0.000000000000000000000000000002', 1, 'e', ${v(10)}),` +
        ` (1.0000003, '0.000000000000000000000000000002', 18446744073709551614, 'f', ${v(11)}), (1.0000003, '0.000000000000000000000000000002', 18446744073709551615, 'g', ${v(12)}),` +
        ` (-0e0, 0, 0, 'h', ${v(13)}), (37.774929, 0, 0, 'i', ${v(14)})`,
    );
    await a.query('SET @lww_apply = NULL');
    source = await dump(a, ctx.engine);
  }, 120_000);
  afterAll(async () => {
    for (const c of conns) await c.end().catch(() => undefined);
  });

  async function emptyB(): Promise<void> {
    const b = conns[1]!;
    await b.query(enterApplySessionSql('lww_meta'));
    for (const t of ['t', 'k']) await b.query(`DELETE FROM ${quoteTable(DB, t)}`);
    await b.query('SET @lww_apply = NULL');
    expect((await dump(b, ctx.engine)).length).toBe(0);
  }

  it('the fixture holds what was written: FLOAT beyond six digits, DOUBLE -0 on MySQL, SRID, 9 MiB values', async () => {
    const [rows] = await conns[0]!.query<RowDataPacket[]>(
      `SELECT CAST(CAST(f AS DOUBLE) AS CHAR) AS f, CAST(d AS CHAR) AS d, ST_SRID(g) AS srid, LENGTH(bl) AS bl, LENGTH(tx) AS tx FROM ${quoteTable(DB, 't')} ORDER BY id`,
    );
    expect(rows.map((r) => r.f)).toEqual(['37.77492904663086', '1.0000001192092896', ctx.engine === 'mysql' ? '-0' : '0', '3.4028234663852886e38', '1.1754943508222875e-38']);
    expect(rows[0]!.d).toBe(ctx.engine === 'mysql' ? '-0' : '0');
    expect([Number(rows[0]!.srid), Number(rows[1]!.srid), Number(rows[1]!.bl), Number(rows[2]!.tx)]).toEqual([3857, 0, LARGE, LARGE]);
    expect(source).toHaveLength(5 + 9);
    if (ctx.engine === 'mysql') expect(JSON.parse(source[4]!).at(-1)).toBe('DATE,TIME,DATETIME,DECIMAL,UNSIGNED INTEGER,DECIMAL,STRING,UNSIGNED INTEGER');
  });

  it('sync copies every row to an empty node byte for byte, and the check then finds them identical', async () => {
    await emptyB();
    const before = await checkState({ nodes: urls, tables: [`${DB}.t`, `${DB}.k`], chunkSize: 2 });
    expect(before.tables.map((t) => t.counts.missing_row)).toEqual([5, 9]);
    await syncNodes({ nodes: urls, tables: [`${DB}.t`, `${DB}.k`], chunkRows: 2 });
    expect(await dump(conns[1]!, ctx.engine)).toEqual(source);
    expect(await dump(conns[0]!, ctx.engine)).toEqual(source);
    const after = await checkState({ nodes: urls, tables: [`${DB}.t`, `${DB}.k`], chunkSize: 2 });
    expect(after.identical).toBe(true);
  }, 120_000);

  it('the initial copy copies every row to an empty node byte for byte', async () => {
    await emptyB();
    const sink = createSink({ target: urls[1]!, owner: 'exact-copy test', batch: { maxDelayMs: 5 } });
    try {
      const report = await copyTables({
        sourceUrl: urls[0]!,
        tables: [`${DB}.t`, `${DB}.k`],
        sink,
        sourceId: `exact-copy-${Date.now()}`,
        metaSchema: 'lww_meta',
        versionColumn: '_lww_ts',
        chunkRows: 2,
      });
      expect(report.tables.map((t) => [t.table, t.rows])).toEqual([
        [`${DB}.t`, 5],
        [`${DB}.k`, 9],
      ]);
      await sink.close();
    } finally {
      await sink.abort();
    }
    expect(await dump(conns[1]!, ctx.engine)).toEqual(source);
  }, 120_000);
});
