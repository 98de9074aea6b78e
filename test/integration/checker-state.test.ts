import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { checkState, type StateFinding, type StateReport } from '../../src/checker/index.ts';
import { run as runCheck } from '../../src/cli/commands/check.ts';
import { connect } from '../../src/db/connection.ts';
import { ensureMetaSchema, ensureTombstoneTable } from '../../src/install/provision.ts';
import { tombstoneTableName } from '../../src/model/names.ts';
import { quoteTable } from '../../src/sql/quote.ts';
import { loadTableMeta } from '../../src/writer/table-metadata.ts';
import { freshDatabase } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';

/** The same table on both nodes, except for the DECIMAL scale (equal values must still compare equal). */
const tableDdl = (scale: 1 | 2) =>
  `CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, v VARCHAR(40) NULL, amount DECIMAL(10,${scale}) NULL, doc JSON NULL, _lww_ts BIGINT UNSIGNED NOT NULL)`;

/** Rows 1..n, identical on every node: generated on the server from a cross join of digits. */
const fillSql = (db: string, table: string, n: number, extra = '') =>
  `INSERT INTO ${quoteTable(db, table)} WITH d AS (SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4` +
  ' UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9),' +
  ' n AS (SELECT 1 + a.x + 10 * b.x + 100 * c.x + 1000 * e.x + 10000 * f.x + 100000 * g.x AS id FROM d a, d b, d c, d e, d f, d g)' +
  ` SELECT id, ${extra} FROM n WHERE id <= ${n}`;

const STANDARD_FILL = "CONCAT('value-', id), id / 2, JSON_OBJECT('n', id, 'tag', 'x'), 1024 * id + 1";

function keyOf(f: StateFinding): string {
  return Object.values(f.key).join('/');
}

function summary(report: StateReport): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of report.tables) for (const f of t.findings) out[`${t.table}:${keyOf(f)}`] = `${f.class}>${f.winner === null ? '-' : f.winner}`;
  return out;
}

describeEachEngine('state check', 2, (ctx) => {
  let urls: string[];
  let conns: Connection[];

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    conns = await Promise.all(urls.map((u) => connect(u)));
    for (const c of conns) await ensureMetaSchema(c, 'lww_meta');
  });
  afterAll(async () => {
    await Promise.all((conns ?? []).map((c) => c.end()));
  });

  /** Fresh database with table t on both nodes (DECIMAL(10,2) on A, DECIMAL(10,1) on B) and tombstone tables. */
  async function twoNodes(db: string, ddl: (node: number) => string[] = (i) => [tableDdl(i === 0 ? 2 : 1)]): Promise<void> {
    await Promise.all(
      conns.map(async (c, i) => {
        await freshDatabase(c, db, ddl(i));
        await c.query(`DROP TABLE IF EXISTS ${quoteTable('lww_meta', tombstoneTableName(db, 't'))}`);
        await ensureTombstoneTable(c, 'lww_meta', await loadTableMeta(c, db, 't', '_lww_ts'));
      }),
    );
  }

  async function onBoth(sql: string, values: unknown[] = []): Promise<void> {
    await Promise.all(conns.map((c) => c.query(sql, values)));
  }

  it('finds each constructed divergence with its key, class and LWW winner, and nothing else', async () => {
    const db = 'chk_div';
    await twoNodes(db);
    const [a, b] = conns as [Connection, Connection];
    const t = quoteTable(db, 't');
    const tomb = quoteTable('lww_meta', tombstoneTableName(db, 't'));
    await onBoth(fillSql(db, 't', 6000, STANDARD_FILL));
    // Keys below and above the first node's whole range exist only on B: the open-ended chunks cover them.
    await b.query(`INSERT INTO ${t} VALUES (-5, 'only on B, low', NULL, NULL, 7), (100000, 'only on B, high', NULL, NULL, 8)`);
    await b.query(`DELETE FROM ${t} WHERE id = 2`); // missing_row, A wins
    await a.query(`DELETE FROM ${t} WHERE id = 777`); // extra_row, B wins
    await b.query(`UPDATE ${t} SET v = 'changed' WHERE id = 1000`); // value_mismatch, same version: no winner
    await a.query(`UPDATE ${t} SET v = 'older', _lww_ts = 5 WHERE id = 1500`); // version_mismatch, B wins
    await b.query(`DELETE FROM ${t} WHERE id = 2000`);
    await b.query(`INSERT INTO ${tomb} VALUES (2000, 99999999)`); // tombstone_vs_row, B wins
    await a.query(`UPDATE ${t} SET v = NULL WHERE id = 2500`);
    await b.query(`UPDATE ${t} SET v = '' WHERE id = 2500`); // NULL vs '': value_mismatch
    await onBoth(`UPDATE ${t} SET amount = 1.5 WHERE id = 2600`); // 1.50 on A, 1.5 on B: equal
    // Same JSON, other key order and spacing: MySQL stores one document, MariaDB keeps two texts (a finding there).
    await a.query(`UPDATE ${t} SET doc = '{"tag": "x", "n": 2700}' WHERE id = 2700`);
    await b.query(`UPDATE ${t} SET doc = '{"n":2700,"tag":"x"}' WHERE id = 2700`);
    await a.query(`DELETE FROM ${t} WHERE id = 2800`);
    await b.query(`DELETE FROM ${t} WHERE id = 2800`);
    await a.query(`INSERT INTO ${tomb} VALUES (2800, 50)`);
    await b.query(`INSERT INTO ${tomb} VALUES (2800, 60)`); // tombstone_mismatch, B wins
    // A stale tombstone below the row's version changes nothing: not a finding.
    await a.query(`INSERT INTO ${tomb} VALUES (2900, 3)`);

    const report = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 500 });
    expect(report.identical).toBe(false);
    const mariadb = ctx.engine === 'mariadb';
    expect(summary(report)).toEqual({
      'chk_div.t:-5': 'extra_row>1',
      'chk_div.t:2': 'missing_row>0',
      'chk_div.t:777': 'extra_row>1',
      'chk_div.t:1000': 'value_mismatch>-',
      'chk_div.t:1500': 'version_mismatch>1',
      'chk_div.t:2000': 'tombstone_vs_row>1',
      'chk_div.t:2500': 'value_mismatch>-',
      ...(mariadb ? { 'chk_div.t:2700': 'value_mismatch>-' } : {}),
      'chk_div.t:2800': 'tombstone_mismatch>1',
      'chk_div.t:100000': 'extra_row>1',
    });
    const byKey = new Map(report.tables[0]!.findings.map((f) => [keyOf(f), f]));
    expect(byKey.get('2500')!.states.map((s) => (s.kind === 'row' ? s.values.v : s.kind))).toEqual([null, '']);
    expect(byKey.get('1500')!.states.map((s) => (s.kind === 'absent' ? 0n : s.version))).toEqual([5n, 1024n * 1500n + 1n]);
    expect(byKey.get('2000')!.states).toEqual([
      { kind: 'row', version: 1024n * 2000n + 1n, values: { v: 'value-2000', amount: '1000', doc: '{"n": 2000, "tag": "x"}' } },
      { kind: 'tombstone', version: 99999999n },
    ]);
    const table = report.tables[0]!;
    expect(table.counts).toEqual({
      missing_row: 1,
      extra_row: 3,
      value_mismatch: mariadb ? 3 : 2,
      version_mismatch: 1,
      tombstone_vs_row: 1,
      tombstone_mismatch: 1,
      row_under_tombstone: 0,
      unexplained_chunk: 0,
    });
    // The declared types differ (a schema difference), the data is compared by value.
    expect(table.schemaDifferences).toEqual(['column amount: type decimal(10,2) on node A, decimal(10,1) on node B (data compared by value)']);
    // 5998 keys on A in chunks of 500: eleven boundaries, twelve chunks, the first and last open-ended;
    // six hold a divergence (seven on MariaDB, key 2700) and only their rows (about 500 per node each) were read.
    const differing = mariadb ? 7 : 6;
    expect([table.chunks, table.chunksDiffering, table.tombstoneChunks, table.tombstoneChunksDiffering]).toEqual([12, differing, 1, 1]);
    expect(table.rowsFetched).toBeLessThan(differing * 2 * 500 + 50);

    // Every node is compared with the first: a third node equal to A adds nothing.
    const three = await checkState({ nodes: [urls[0]!, urls[1]!, urls[0]!], tables: [`${db}.t`], chunkSize: 500 });
    expect(summary(three)).toEqual(summary(report));
    expect(three.tables[0]!.findings.every((f) => f.nodes[0] === 0 && f.nodes[1] === 1)).toBe(true);
  });

  it('equal data stored differently compares equal without reading a row (DECIMAL scale, JSON key order on MySQL, NULLs); the declared types are a schema difference', async () => {
    const db = 'chk_eq';
    await twoNodes(db);
    const t = quoteTable(db, 't');
    await onBoth(fillSql(db, 't', 2000, "IF(id % 7 = 0, NULL, CONCAT('v', id)), IF(id % 5 = 0, NULL, id / 10), NULL, id"));
    const [a, b] = conns as [Connection, Connection];
    await a.query(`UPDATE ${t} SET doc = '{"b": [1, 2.5, {"z": null, "y": "é"}], "a": 1}' WHERE id <= 100`);
    await b.query(`UPDATE ${t} SET doc = '{"a":1,"b":[1,2.5,{"y":"é","z":null}]}' WHERE id <= 100`);
    const report = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 300 });
    if (ctx.engine === 'mariadb') {
      // MariaDB stores JSON as the text written: the application reads two different texts.
      expect(report.tables[0]!.counts.value_mismatch).toBe(100);
      expect(report.tables[0]!.findings.every((f) => f.class === 'value_mismatch' && Number(f.key.id) <= 100)).toBe(true);
      return;
    }
    expect(summary(report)).toEqual({});
    expect(report.tables[0]!.schemaDifferences).toEqual(['column amount: type decimal(10,2) on node A, decimal(10,1) on node B (data compared by value)']);
    expect(report.identical).toBe(false);
    expect(report.totals.rowsFetched).toBe(0);
    expect(report.tables[0]!.chunksDiffering).toBe(0);
  });

  it('a definition that differs where it decides what a write stores is a schema difference: collation, character set, NULL, DEFAULT, INVISIBLE, UNIQUE keys, ENUM order', async () => {
    const db = 'chk_ddl';
    const ddl = (node: number) => [
      `CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, c VARCHAR(10) COLLATE ${node === 0 ? 'utf8mb4_bin' : 'utf8mb4_general_ci'} NULL,` +
        ` l VARCHAR(10) CHARACTER SET ${node === 0 ? 'latin1' : 'utf8mb4'} NULL, n INT ${node === 0 ? 'NOT NULL' : 'NULL'} DEFAULT ${node === 0 ? 1 : 2},` +
        ` h INT NULL ${node === 0 ? 'INVISIBLE' : ''}, e ENUM(${node === 0 ? "'x','y'" : "'y','x'"}) NULL, u INT NULL, w VARCHAR(20) NULL, _lww_ts BIGINT UNSIGNED NOT NULL${node === 0 ? ', UNIQUE KEY uk (u)' : ''},` +
        ` UNIQUE KEY uw (w${node === 0 ? '(10)' : ''}))`,
    ];
    await twoNodes(db, ddl);
    await onBoth(`INSERT INTO ${quoteTable(db, 't')} (id, c, l, n, h, e, u, _lww_ts) VALUES (1, 'a', 'b', 1, 2, 'x', 3, 1)`);
    const report = await checkState({ nodes: urls, tables: [`${db}.t`] });
    const diffs = report.tables[0]!.schemaDifferences.join('\n');
    expect(diffs).toMatch(/column c: collation utf8mb4_bin on node A, utf8mb4_general_ci on node B/);
    expect(diffs).toMatch(/column l: character set latin1 on node A, utf8mb4 on node B/);
    expect(diffs).toMatch(/column n: nullable NOT NULL on node A, NULL on node B/);
    expect(diffs).toMatch(/column n: default "1" on node A, "2" on node B/);
    expect(diffs).toMatch(/column e: type enum\('x','y'\) on node A, enum\('y','x'\) on node B/);
    expect(diffs).toMatch(/UNIQUE key \(u\) on node A only, not on node B/);
    expect(diffs).toMatch(/UNIQUE key \(w\(10\)\) on node A only, not on node B/);
    expect(diffs).toMatch(/UNIQUE key \(w\) on node B only, not on node A/);
    expect(diffs).toMatch(/column h: extra invisible on node A, none on node B/);
    expect(summary(report)).toEqual({});
    expect(report.identical).toBe(false);
  });

  it('MySQL JSON that prints alike but holds other scalar types (DECIMAL vs DOUBLE, DATE vs string, unsigned vs signed) is a value mismatch, named with the types', async () => {
    const db = 'chk_jtypes';
    await twoNodes(db);
    const t = quoteTable(db, 't');
    await onBoth(fillSql(db, 't', 500, "CONCAT('v', id), NULL, JSON_OBJECT('n', id), id"));
    const [a, b] = conns as [Connection, Connection];
    // Node A holds typed scalars, node B the same text parsed back (what a text copy writes).
    if (ctx.engine === 'mysql') {
      await a.query(`UPDATE ${t} SET doc = CAST(CAST(1.0 AS DECIMAL(2,1)) AS JSON) WHERE id = 10`);
      await b.query(`UPDATE ${t} SET doc = CAST('1.0' AS JSON) WHERE id = 10`);
    }
    await a.query(`UPDATE ${t} SET doc = JSON_OBJECT('d', CAST('2024-01-01' AS DATE), 'u', JSON_ARRAY(CAST(7 AS UNSIGNED))) WHERE id = 20`);
    await b.query(`UPDATE ${t} SET doc = JSON_OBJECT('d', '2024-01-01', 'u', JSON_ARRAY(7)) WHERE id = 20`);
    // Equal types stay equal.
    await onBoth(`UPDATE ${t} SET doc = JSON_OBJECT('t', CAST('10:00:00' AS TIME)) WHERE id = 30`);
    const report = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 100 });
    if (ctx.engine === 'mariadb') {
      // MariaDB's JSON is text: the functions wrote the same text on both.
      expect(summary(report)).toEqual({});
      return;
    }
    expect(summary(report)).toEqual({ [`${db}.t:10`]: 'value_mismatch>-', [`${db}.t:20`]: 'value_mismatch>-' });
    const shown = JSON.stringify(report.tables[0]!.findings.map((f) => f.states), (_, v) => (typeof v === 'bigint' ? String(v) : v));
    expect(shown).toContain('$ DECIMAL');
    expect(shown).toContain('$.\\"d\\" DATE, $.\\"u\\"[0] UNSIGNED INTEGER');
  });

  it("the ENUM error value (index 0, stored by a non-strict session) is not the member '' it reads like", async () => {
    const db = 'chk_enum0';
    await twoNodes(db, () => ["CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, c ENUM('', 'a') NULL, _lww_ts BIGINT UNSIGNED NOT NULL)"]);
    const t = quoteTable(db, 't');
    await onBoth(`INSERT INTO ${t} VALUES (1, '', 1), (2, 'a', 1), (3, NULL, 1)`);
    const [a] = conns as [Connection];
    await a.query("SET SESSION sql_mode = ''");
    try {
      await a.query(`UPDATE ${t} SET c = 'not a member' WHERE id = 1`);
    } finally {
      await a.query('SET SESSION sql_mode = DEFAULT');
    }
    const report = await checkState({ nodes: urls, tables: [`${db}.t`] });
    expect(summary(report)).toEqual({ [`${db}.t:1`]: 'value_mismatch>-' });
    const [finding] = report.tables[0]!.findings;
    expect(finding!.states.map((s) => (s.kind === 'row' ? s.values.c : s.kind))).toEqual(['(ENUM error value, index 0)', '']);
  });

  it('a key spelled otherwise by its tombstone than by its row, or by the nodes\' tombstones, is one key (case-insensitive key)', async () => {
    const db = 'chk_ci';
    const ddl = 'CREATE TABLE {{db}}.t (k1 INT NOT NULL, k2 CHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, v INT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, PRIMARY KEY (k1, k2))';
    await twoNodes(db, () => [ddl]);
    const [a, b] = conns as [Connection, Connection];
    const t = quoteTable(db, 't');
    const tomb = quoteTable('lww_meta', tombstoneTableName(db, 't'));
    // The same row on both nodes above different stale tombstones, one spelled 'alpha' (seen in a
    // harness run: a row removed by a UNIQUE clash on one node only, then written again above it).
    await onBoth(`INSERT INTO ${t} VALUES (-1, 'ALPHA', 1, 10240), (2, 'alpha', 2, 20480)`);
    await a.query(`INSERT INTO ${tomb} VALUES (-1, 'alpha', 5000), (2, 'ALPHA', 6000)`);
    await b.query(`INSERT INTO ${tomb} VALUES (-1, 'ALPHA', 3000), (2, 'alpha', 7000)`);
    // No row; the same tombstone version, spelled otherwise.
    await a.query(`INSERT INTO ${tomb} VALUES (3, 'Beta', 8000)`);
    await b.query(`INSERT INTO ${tomb} VALUES (3, 'BETA', 8000)`);
    const same = await checkState({ nodes: urls, tables: [`${db}.t`] });
    expect(summary(same)).toEqual({});
    expect(same.identical).toBe(true);

    // A real difference under two spellings is one finding of the key, with both tombstones.
    await a.query(`INSERT INTO ${tomb} VALUES (4, 'gamma', 9000)`);
    await b.query(`INSERT INTO ${tomb} VALUES (4, 'GAMMA', 9100)`);
    const differs = await checkState({ nodes: urls, tables: [`${db}.t`] });
    expect(summary(differs)).toEqual({ 'chk_ci.t:4/gamma': 'tombstone_mismatch>1' });
    expect(differs.tables[0]!.findings[0]!.states).toEqual([
      { kind: 'tombstone', version: 9000n },
      { kind: 'tombstone', version: 9100n },
    ]);
  });

  it("one key spelled otherwise by the nodes' rows ('a' and 'A' under _ci, 'b' and 'b ' under PAD SPACE) is one finding of that key, not a row missing on each side", async () => {
    const db = 'chk_spell';
    const ddl = 'CREATE TABLE {{db}}.t (k VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, v INT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)';
    await twoNodes(db, () => [ddl]);
    const [a, b] = conns as [Connection, Connection];
    const t = quoteTable(db, 't');
    await onBoth(`INSERT INTO ${t} VALUES ('same', 1, 10)`);
    await a.query(`INSERT INTO ${t} VALUES ('a', 1, 10), ('b', 2, 10)`);
    await b.query(`INSERT INTO ${t} VALUES ('A', 1, 10), ('b ', 2, 20)`);
    const report = await checkState({ nodes: urls, tables: [`${db}.t`] });
    expect(summary(report)).toEqual({ [`${db}.t:a`]: 'value_mismatch>-', [`${db}.t:b`]: 'version_mismatch>1' });
    const spellings = report.tables[0]!.findings.map((f) => f.states.map((s) => (s.kind === 'row' ? s.values['(key as stored)'] : s.kind)));
    expect(spellings).toEqual([
      ['["a"]', '["A"]'],
      ['["b"]', '["b "]'],
    ]);
  });

  it('equal data in a VARCHAR on one node and a TEXT on the other (VARBINARY and BLOB alike) compares equal: a schema difference, no finding', async () => {
    const db = 'chk_lob';
    await twoNodes(db, (node) => [
      `CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, s ${node === 0 ? 'VARCHAR(100)' : 'TEXT'} NULL, b ${node === 0 ? 'VARBINARY(100)' : 'BLOB'} NULL, _lww_ts BIGINT UNSIGNED NOT NULL)`,
    ]);
    await onBoth(fillSql(db, 't', 300, "CONCAT('text ', id), UNHEX(HEX(id)), id"));
    const [a] = conns as [Connection];
    await a.query(`UPDATE ${quoteTable(db, 't')} SET s = 'other' WHERE id = 7`);
    const report = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 100 });
    expect(summary(report)).toEqual({ [`${db}.t:7`]: 'value_mismatch>-' });
    expect(report.tables[0]!.counts.unexplained_chunk).toBe(0);
    expect(report.tables[0]!.schemaDifferences).toEqual([
      'column s: type varchar(100) on node A, text on node B (data compared by value)',
      'column b: type varbinary(100) on node A, blob on node B (data compared by value)',
    ]);
  });

  it('Shift-JIS values that read as one text (0x5C and 0x815F both read as a backslash) are told apart by their bytes, short and long', async () => {
    const db = 'chk_sjis';
    await twoNodes(db, () => ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, p VARCHAR(20) CHARACTER SET sjis NULL, x TEXT CHARACTER SET sjis NULL, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const [a, b] = conns as [Connection, Connection];
    const t = quoteTable(db, 't');
    await onBoth(`INSERT INTO ${t} VALUES (1, 'same', 'same', 1), (2, NULL, NULL, 1), (3, NULL, NULL, 1)`);
    await a.query(`UPDATE ${t} SET p = X'433A5C74656D70' WHERE id = 2`);
    await b.query(`UPDATE ${t} SET p = X'433A815F74656D70' WHERE id = 2`);
    await a.query(`UPDATE ${t} SET x = X'5C' WHERE id = 3`);
    await b.query(`UPDATE ${t} SET x = X'815F' WHERE id = 3`);
    const [[read]] = await a.query<RowDataPacket[]>(`SELECT CONVERT(p USING utf8mb4) = (SELECT CONVERT(X'433A815F74656D70' USING sjis)) AS alike FROM ${t} WHERE id = 2`);
    expect(Number(read!.alike)).toBe(1);
    const report = await checkState({ nodes: urls, tables: [`${db}.t`] });
    expect(summary(report)).toEqual({ [`${db}.t:2`]: 'value_mismatch>-', [`${db}.t:3`]: 'value_mismatch>-' });
  });

  it('every column type compares equal when the data is equal, and a change in any one column is found', async () => {
    const db = 'chk_types';
    const ddl =
      'CREATE TABLE {{db}}.t (id BIGINT UNSIGNED NOT NULL, k VARCHAR(20) NOT NULL, i64 BIGINT NULL, dec65 DECIMAL(65,30) NULL, f FLOAT NULL, d DOUBLE NULL,' +
      ' dt DATE NULL, dtm DATETIME(6) NULL, ts TIMESTAMP(6) NULL, tm TIME(6) NULL, y YEAR NULL, ch CHAR(10) NULL, tx TEXT NULL, bn BINARY(4) NULL,' +
      " vb VARBINARY(300) NULL, js JSON NULL, en ENUM('s','m','l') NULL, st SET('a','b','c') NULL, bt BIT(64) NULL, _lww_ts BIGINT UNSIGNED NOT NULL," +
      ' PRIMARY KEY (id, k))';
    await twoNodes(db, () => [ddl]);
    const t = quoteTable(db, 't');
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await onBoth(
      `INSERT INTO ${t} VALUES (18446744073709551615, 'é#1:x', -9223372036854775808, '12345678901234567890123456789012345.123456789012345678901234567891', 3.4e38,` +
        " 0.1, '1000-01-01', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', '-838:59:59.000000', 2155, 'ab', 'emoji 😀', X'00FF7F80', ?," +
        ` '{"b": [1, 2.5], "a": null}', 'l', 'a,c', b'1111111111111111111111111111111111111111111111111111111111111111', 1),` +
        " (1, '', 0, '-0.000000000000000000000000000001', -1.17549e-38, 1e308, '2024-02-29', '1970-01-01 00:00:01.000001', '1970-01-01 00:00:01', '00:00:00.000001'," +
        " 1901, '', '', X'00000000', X'', '[]', 's', '', b'0', 2)," +
        " (2, 'n', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 3)",
      [bytes],
    );
    const same = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 2 });
    expect(same.identical).toBe(true);
    expect(same.totals.rowsFetched).toBe(0);

    await conns[1]!.query(`UPDATE ${t} SET vb = X'00', bt = b'1' WHERE id = 1`);
    await conns[1]!.query(`UPDATE ${t} SET ts = '2038-01-19 03:14:07.999998' WHERE id = 18446744073709551615`);
    const changed = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 2 });
    expect(summary(changed)).toEqual({ 'chk_types.t:1/': 'value_mismatch>-', 'chk_types.t:18446744073709551615/é#1:x': 'value_mismatch>-' });
    const f = changed.tables[0]!.findings.find((x) => x.key.id === '1')!;
    const [sa, sb] = f.states;
    expect(sa.kind === 'row' && sb.kind === 'row' && [sa.values.vb, sb.values.vb, sa.values.bt, sb.values.bt]).toEqual(['0x', '0x00', '0', '1']);
  });

  it('a block of keys only on the other node is split by that node and counted in full; findings are capped', async () => {
    const db = 'chk_block';
    await twoNodes(db);
    await onBoth(fillSql(db, 't', 1000, STANDARD_FILL));
    await conns[1]!.query(fillSql(db, 't', 6000, STANDARD_FILL).replace('WHERE id <= 6000', 'WHERE id > 1000 AND id <= 6000'));
    const report = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 400, maxFindings: 50 });
    const table = report.tables[0]!;
    expect(table.counts.extra_row).toBe(5000);
    expect(report.totals.findings).toBe(5000);
    expect(table.findings).toHaveLength(50);
    expect(table.findingsTruncated).toBe(true);
    // Rows are read chunk by chunk of the larger node, never the whole block at once.
    expect(table.rowsFetched).toBeLessThan(5000 + 3 * 400);
  });

  it('an ENUM or SET primary key (index order unlike name order) is walked in chunks by its number: every divergence found, equal rows equal', async () => {
    const db = 'chk_enumkey';
    // Members listed against their alphabetical order: the index sorts 'm9' before 'm0'.
    const members = Array.from({ length: 40 }, (_, i) => `m${String(39 - i).padStart(2, '0')}`);
    const list = members.map((m) => `'${m}'`).join(',');
    await twoNodes(db, () => [
      `CREATE TABLE {{db}}.t (k ENUM(${list}) NOT NULL, s SET('z','y','x') NOT NULL, n INT NOT NULL, v VARCHAR(20) NULL, _lww_ts BIGINT UNSIGNED NOT NULL, PRIMARY KEY (k, s, n))`,
    ]);
    const rows: unknown[][] = [];
    for (const m of members) for (const set of ['', 'z', 'y', 'z,y', 'x', 'z,y,x']) for (const n of [1, 2]) rows.push([m, set, n, `${m}-${set}-${n}`, 1024]);
    await onBoth(`INSERT INTO ${quoteTable(db, 't')} (k, s, n, v, _lww_ts) VALUES ?`.replace('?', rows.map(() => '(?, ?, ?, ?, ?)').join(', ')), rows.flat());
    const equal = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 7 });
    expect(equal.totals.findings).toBe(0);
    expect(equal.tables[0]!.chunks).toBeGreaterThan(60);
    await conns[1]!.query(`UPDATE ${quoteTable(db, 't')} SET v = 'changed', _lww_ts = 2048 WHERE k = 'm05' AND s = 'y' AND n = 2`);
    await conns[1]!.query(`DELETE FROM ${quoteTable(db, 't')} WHERE k = 'm31' AND s = 'z,y,x' AND n = 1`);
    await conns[0]!.query(`DELETE FROM ${quoteTable(db, 't')} WHERE k = 'm00' AND s = '' AND n = 2`);
    const report = await checkState({ nodes: urls, tables: [`${db}.t`], chunkSize: 7 });
    expect(summary(report)).toEqual({
      'chk_enumkey.t:m05/y/2': 'version_mismatch>1',
      'chk_enumkey.t:m31/z,y,x/1': 'missing_row>0',
      'chk_enumkey.t:m00//2': 'extra_row>1',
    });
  });

  it('checks the registered tables by default and reports a table missing on a node', async () => {
    const db = 'chk_reg';
    await twoNodes(db);
    await onBoth(fillSql(db, 't', 100, STANDARD_FILL));
    await conns[0]!.query(`CREATE TABLE ${quoteTable(db, 'only_a')} (id INT PRIMARY KEY, _lww_ts BIGINT UNSIGNED NOT NULL)`);
    await conns[0]!.query('DELETE FROM lww_meta.tables');
    await conns[0]!.query(
      'INSERT INTO lww_meta.tables (schema_name, table_name, tombstone_table, version_column) VALUES (?, ?, ?, ?), (?, ?, ?, ?)',
      [db, 't', tombstoneTableName(db, 't'), '_lww_ts', db, 'only_a', tombstoneTableName(db, 'only_a'), '_lww_ts'],
    );
    const report = await checkState({ nodes: urls });
    expect(report.tables.map((t) => t.table)).toEqual([`${db}.only_a`, `${db}.t`]);
    expect(report.tables[0]!.schemaDifferences).toEqual(['registry: registered in lww_meta.tables on node A but not on node B', 'table does not exist on node B']);
    expect(report.tables[1]!.findings).toEqual([]);
    expect(report.identical).toBe(false);
    await conns[0]!.query('DELETE FROM lww_meta.tables');
  });

  it('an identical 200,000-row table is reported identical without fetching a row', async () => {
    const db = 'chk_big';
    await twoNodes(db, () => [tableDdl(2)]);
    await onBoth(fillSql(db, 't', 200_000, STANDARD_FILL));
    const started = Date.now();
    const report = await checkState({ nodes: urls, tables: [`${db}.t`] });
    const seconds = (Date.now() - started) / 1000;
    console.log(`[${ctx.engine}] 200,000 identical rows checked in ${seconds.toFixed(2)} s, ${report.totals.chunks} chunks`);
    expect(report.identical).toBe(true);
    expect(report.totals.rowsFetched).toBe(0);
    expect(report.tables[0]!.chunks).toBe(21);
  });

  it('the check command exits 0 when identical, 1 on differences, 2 on bad flags, 3 when a node cannot be reached', async () => {
    const db = 'chk_cli';
    await twoNodes(db, () => [tableDdl(2)]);
    await onBoth(fillSql(db, 't', 50, STANDARD_FILL));
    const out: string[] = [];
    const err: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void out.push(args.join(' ')));
    const error = vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void err.push(args.join(' ')));
    try {
      const nodes = urls.flatMap((u) => ['--node', u]);
      expect(await runCheck([...nodes, '--tables', `${db}.t`])).toBe(0);
      expect(out.join('\n')).toMatch(/identical: 1 table/);

      await conns[1]!.query(`UPDATE ${quoteTable(db, 't')} SET v = 'drift' WHERE id = 7`);
      out.length = 0;
      expect(await runCheck([...nodes, '--tables', `${db}.t`, '--chunk-rows', '10'])).toBe(1);
      expect(out.join('\n')).toMatch(/id=7 +row @7169 v="value-7" +B: row @7169 v="drift" +value_mismatch +none/);
      out.length = 0;
      expect(await runCheck([...nodes, '--tables', `${db}.t`, '--json'])).toBe(1);
      const json = JSON.parse(out.join('\n'));
      expect(json.tables[0].findings[0]).toMatchObject({ key: { id: '7' }, class: 'value_mismatch', states: [{ version: '7169' }, { version: '7169' }] });

      expect(await runCheck(['--node', urls[0]!])).toBe(2);
      expect(await runCheck([...nodes, '--chunk-rows', 'lots'])).toBe(2);
      expect(await runCheck([...nodes, '--bogus'])).toBe(2);
      expect(await runCheck([...nodes, '--tables', 'no_dot'])).toBe(2);
      err.length = 0;
      expect(await runCheck(['--node', urls[0]!, '--node', 'mysql://root:secret@127.0.0.1:1/'])).toBe(3); // connection
      expect(err.join('\n')).toMatch(/node B \(mysql:\/\/root:\*\*\*@127\.0\.0\.1:1\/\): cannot connect: .*ECONNREFUSED/);
      expect(err.join('\n')).not.toContain('secret');
    } finally {
      log.mockRestore();
      error.mockRestore();
    }
  });
});
