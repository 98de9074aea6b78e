// One test per numbered item of issue #16: differences made behind replication that the state check
// used to answer "identical" (exit 0) for. Each is now reported with its key, class and LWW winner.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { checkState, type StateFinding, type StateReport } from '../../src/checker/index.ts';
import { run as runCheck } from '../../src/cli/commands/check.ts';
import { connect } from '../../src/db/connection.ts';
import { ensureMetaSchema, ensureTombstoneTable } from '../../src/install/provision.ts';
import { tombstoneTableName } from '../../src/model/names.ts';
import { quoteTable } from '../../src/sql/quote.ts';
import { syncNodes } from '../../src/sync/repair.ts';
import { loadTableMeta } from '../../src/writer/table-metadata.ts';
import { freshDatabase } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const V = 1_700_000_000_000_000n << 10n;
/** A FLOAT as the check shows it: the shortest text of its exact double. */
const ft = (x: number) => String(Math.fround(x));

function findings(report: StateReport): Record<string, string> {
  const out: Record<string, string> = {};
  const key = (f: StateFinding) => Object.values(f.key).join('/');
  for (const t of report.tables) for (const f of t.findings) out[`${t.table}:${key(f)}`] = `${f.class}>${f.winner === null ? '-' : f.winner}`;
  return out;
}

describeEachEngine('issue 16: differences the state check used to call identical', 2, (ctx) => {
  let urls: string[];
  let conns: Connection[];
  const mysql = () => ctx.engine === 'mysql';

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    conns = await Promise.all(urls.map((u) => connect(u)));
    for (const c of conns) await ensureMetaSchema(c, 'lww_meta');
  });
  afterAll(async () => {
    await Promise.all((conns ?? []).map((c) => c.end()));
  });

  /** A fresh database with the given tables (and their tombstone tables) on both nodes. */
  async function tables(db: string, ddl: Record<string, string>): Promise<void> {
    await Promise.all(
      conns.map(async (c) => {
        await freshDatabase(c, db, Object.values(ddl));
        for (const t of Object.keys(ddl)) {
          await c.query(`DROP TABLE IF EXISTS ${quoteTable('lww_meta', tombstoneTableName(db, t))}`);
          await ensureTombstoneTable(c, 'lww_meta', await loadTableMeta(c, db, t, '_lww_ts'));
        }
      }),
    );
  }

  const check = (db: string, names: string[], chunkSize = 100) => checkState({ nodes: urls, tables: names.map((t) => `${db}.${t}`), chunkSize });

  it('1. FLOAT: values apart past the sixth digit differ, sync copies them exactly, and FLOAT keys no longer cancel in the XOR', async () => {
    const db = 'i16_float';
    await tables(db, {
      p: 'CREATE TABLE {{db}}.p (id INT PRIMARY KEY, lat FLOAT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)',
      k: 'CREATE TABLE {{db}}.k (f FLOAT PRIMARY KEY, v VARCHAR(4) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)',
    });
    const [a, b] = conns as [Connection, Connection];
    await a.query(`INSERT INTO ${db}.p VALUES (1, 1.0000001, ?), (2, 37.774929, ?)`, [V, V]);
    await b.query(`INSERT INTO ${db}.p VALUES (1, 1.0000002, ?)`, [V]);
    // Four keys that all read as 1 through 6 digits: two rows on each node, whose digests cancelled in pairs.
    await a.query(`INSERT INTO ${db}.k VALUES (1.0000001, 'x', ?), (1.0000002, 'x', ?)`, [V, V]);
    await b.query(`INSERT INTO ${db}.k VALUES (1.0000004, 'x', ?), (1.0000005, 'x', ?)`, [V, V]);
    const report = await check(db, ['p', 'k']);
    expect(findings(report)).toEqual({
      [`${db}.p:1`]: 'value_mismatch>-',
      [`${db}.p:2`]: 'missing_row>0',
      [`${db}.k:${ft(1.0000001)}`]: 'missing_row>0',
      [`${db}.k:${ft(1.0000002)}`]: 'missing_row>0',
      [`${db}.k:${ft(1.0000004)}`]: 'extra_row>1',
      [`${db}.k:${ft(1.0000005)}`]: 'extra_row>1',
    });
    const f = report.tables[0]!.findings[0]!;
    expect(f.states.map((s) => (s.kind === 'row' ? s.values.lat : s.kind))).toEqual([ft(1.0000001), ft(1.0000002)]);

    // sync carries 37.774929 over as itself, not as 37.7749.
    await syncNodes({ nodes: urls, tables: [`${db}.p`] });
    const [rows] = await b.query<RowDataPacket[]>(`SELECT CAST(CAST(lat AS DOUBLE) AS CHAR) AS lat FROM ${db}.p WHERE id = 2`);
    expect(rows[0]!.lat).toBe('37.77492904663086');
    expect(findings(await check(db, ['p']))).toEqual({ [`${db}.p:1`]: 'value_mismatch>-' });
  });

  it('2. a row shown under an equal or newer tombstone is reported with the LWW verdict, whether or not the other node agrees', async () => {
    const db = 'i16_tomb';
    await tables(db, { t: 'CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v VARCHAR(10) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)' });
    const [a, b] = conns as [Connection, Connection];
    const tomb = quoteTable('lww_meta', tombstoneTableName(db, 't'));
    for (const c of conns) await c.query(`INSERT INTO ${db}.t VALUES (1, 'same', 100), (4, 'same', 100), (5, 'fine', 100)`);
    // Key 1: deleted at 107 on A; B still shows the row under the same tombstone.
    await a.query(`DELETE FROM ${db}.t WHERE id = 1`);
    for (const c of conns) await c.query(`INSERT INTO ${tomb} VALUES (1, 107)`);
    // Key 2: a tombstone of the row's own version on B (a tie goes to the tombstone).
    await a.query(`INSERT INTO ${tomb} VALUES (2, 50)`);
    await b.query(`INSERT INTO ${db}.t VALUES (2, 'tie', 50)`);
    await b.query(`INSERT INTO ${tomb} VALUES (2, 50)`);
    // Key 4: both nodes show the row under a newer tombstone: identical, and wrong on both.
    for (const c of conns) await c.query(`INSERT INTO ${tomb} VALUES (4, 200)`);
    // Key 5: a stale tombstone below the row: normal, not a finding.
    for (const c of conns) await c.query(`INSERT INTO ${tomb} VALUES (5, 10)`);
    const report = await check(db, ['t']);
    expect(findings(report)).toEqual({
      [`${db}.t:1`]: 'row_under_tombstone>0',
      [`${db}.t:2`]: 'row_under_tombstone>0',
      [`${db}.t:4`]: 'row_under_tombstone>-',
    });
    const one = report.tables[0]!.findings[0]!;
    expect(one.states).toEqual([
      { kind: 'tombstone', version: 107n },
      { kind: 'row', version: 100n, values: { v: 'same' }, tombstone: 107n },
    ]);
  });

  it('3. large values: a BLOB past max_allowed_packet once in HEX, and a row whose whole text is past it, are compared', async () => {
    const db = 'i16_large';
    await tables(db, { t: 'CREATE TABLE {{db}}.t (id INT PRIMARY KEY, b LONGBLOB NULL, t1 LONGTEXT NULL, t2 LONGTEXT NULL, n INT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)' });
    const [a, b] = conns as [Connection, Connection];
    const [packet] = await a.query<RowDataPacket[]>('SELECT @@max_allowed_packet AS p');
    // Half the packet plus 1 MiB: storable, but twice that (HEX, or two of them in one row) is not.
    const size = Math.floor(Number(packet[0]!.p) / 2) + (1 << 20);
    for (const c of conns) {
      await c.query(`INSERT INTO ${db}.t VALUES (1, REPEAT(X'AB', ?), NULL, NULL, 1, ?), (2, NULL, REPEAT('x', ?), REPEAT('y', ?), 1, ?)`, [size, V, size, size, V]);
    }
    await b.query(`UPDATE ${db}.t SET b = INSERT(b, 1000, 1, X'AC') WHERE id = 1`);
    await b.query(`UPDATE ${db}.t SET n = 2 WHERE id = 2`);
    const report = await check(db, ['t']);
    expect(findings(report)).toEqual({ [`${db}.t:1`]: 'value_mismatch>-', [`${db}.t:2`]: 'value_mismatch>-' });
    const [f1, f2] = report.tables[0]!.findings;
    const [s1a, s1b] = f1!.states;
    expect(s1a.kind === 'row' && s1b.kind === 'row' && [s1a.values.b, s1b.values.b].map((x) => x?.replace(/^sha256:[0-9a-f]{64} /, 'sha256 '))).toEqual([
      `sha256 (${size} bytes)`,
      `sha256 (${size} bytes)`,
    ]);
    const [s2a, s2b] = f2!.states;
    expect(s2a.kind === 'row' && s2b.kind === 'row' && [s2a.values.n, s2b.values.n]).toEqual(['1', '2']);
  }, 120_000);

  it('4. JSON numbers: 1.0 vs 1, 1e2 vs 100, [1] vs [1.0] are different text to the application', async () => {
    const db = 'i16_json';
    await tables(db, { t: 'CREATE TABLE {{db}}.t (id INT PRIMARY KEY, j JSON NULL, _lww_ts BIGINT UNSIGNED NOT NULL)' });
    const [a, b] = conns as [Connection, Connection];
    await a.query(`INSERT INTO ${db}.t VALUES (1, '{"a": 1.0}', ?), (2, '{"a": 1e2}', ?), (3, '[1]', ?), (4, '{"a": 2}', ?)`, [V, V, V, V]);
    await b.query(`INSERT INTO ${db}.t VALUES (1, '{"a": 1}', ?), (2, '{"a": 100}', ?), (3, '[1.0]', ?), (4, '{"a": 2}', ?)`, [V, V, V, V]);
    const report = await check(db, ['t']);
    expect(findings(report)).toEqual({ [`${db}.t:1`]: 'value_mismatch>-', [`${db}.t:2`]: 'value_mismatch>-', [`${db}.t:3`]: 'value_mismatch>-' });
    const shown = report.tables[0]!.findings.map((f) => f.states.map((s) => (s.kind === 'row' ? s.values.j : null)));
    expect(shown).toEqual(
      mysql()
        ? [
            ['{"a": 1.0}', '{"a": 1}'],
            ['{"a": 100.0}', '{"a": 100}'],
            ['[1]', '[1.0]'],
          ]
        : [
            ['{"a": 1.0}', '{"a": 1}'],
            ['{"a": 1e2}', '{"a": 100}'],
            ['[1]', '[1.0]'],
          ],
    );
  });

  it('5. a table registered on B but not on A is checked, and the registry difference fails the check', async () => {
    const db = 'i16_reg';
    await tables(db, {
      t: 'CREATE TABLE {{db}}.t (id INT PRIMARY KEY, _lww_ts BIGINT UNSIGNED NOT NULL)',
      u: 'CREATE TABLE {{db}}.u (id INT PRIMARY KEY, v INT NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)',
    });
    const [a, b] = conns as [Connection, Connection];
    const row = (t: string) => [db, t, tombstoneTableName(db, t), '_lww_ts'];
    for (const c of conns) await c.query('DELETE FROM lww_meta.tables');
    await a.query('INSERT INTO lww_meta.tables (schema_name, table_name, tombstone_table, version_column) VALUES (?, ?, ?, ?)', row('t'));
    await b.query('INSERT INTO lww_meta.tables (schema_name, table_name, tombstone_table, version_column) VALUES (?, ?, ?, ?), (?, ?, ?, ?)', [...row('t'), ...row('u')]);
    await a.query(`INSERT INTO ${db}.u VALUES (1, 1, 5)`);
    await b.query(`INSERT INTO ${db}.u VALUES (1, 2, 5)`);
    try {
      const report = await checkState({ nodes: urls });
      expect(report.tables.map((t) => t.table)).toEqual([`${db}.t`, `${db}.u`]);
      expect(report.tables[1]!.schemaDifferences).toEqual(['registry: registered in lww_meta.tables on node B but not on node A']);
      expect(findings(report)).toEqual({ [`${db}.u:1`]: 'value_mismatch>-' });
      expect(report.identical).toBe(false);
    } finally {
      for (const c of conns) await c.query('DELETE FROM lww_meta.tables');
    }
  });

  it('6. DOUBLE -0 vs 0 (MySQL; MariaDB stores -0 as 0) and a GEOMETRY SRID', async () => {
    const db = 'i16_zero_srid';
    await tables(db, { t: 'CREATE TABLE {{db}}.t (id INT PRIMARY KEY, d DOUBLE NULL, g GEOMETRY NULL, _lww_ts BIGINT UNSIGNED NOT NULL)' });
    const [a, b] = conns as [Connection, Connection];
    await a.query(`INSERT INTO ${db}.t VALUES (1, -0e0, NULL, ?), (2, 1, ST_GeomFromText('POINT(1 2)', 0), ?)`, [V, V]);
    await b.query(`INSERT INTO ${db}.t VALUES (1, 0e0, NULL, ?), (2, 1, ST_GeomFromText('POINT(1 2)', 3857), ?)`, [V, V]);
    const report = await check(db, ['t']);
    expect(findings(report)).toEqual({ ...(mysql() ? { [`${db}.t:1`]: 'value_mismatch>-' } : {}), [`${db}.t:2`]: 'value_mismatch>-' });
    const values = report.tables[0]!.findings.map((f) => f.states.map((s) => (s.kind === 'row' ? [s.values.d, s.values.g] : null)));
    expect(values.at(-1)).toEqual([
      ['1', 'SRID 0 0x0101000000000000000000F03F0000000000000040'],
      ['1', 'SRID 3857 0x0101000000000000000000F03F0000000000000040'],
    ]);
    if (mysql()) expect(values[0]).toEqual([['-0', null], ['0', null]]);
  });

  it('7. a chunk whose checksums differ while its rows compare equal is unexplained_chunk, exit 1, never "identical"', async () => {
    const db = 'i16_unexplained';
    // The same text in a DECIMAL on A and a VARCHAR on B: the checksum terms differ, the read values do not.
    await freshDatabase(conns[0]!, db, ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, m DECIMAL(10,2) NULL, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    await freshDatabase(conns[1]!, db, ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, m VARCHAR(10) NULL, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    for (const c of conns) await c.query(`INSERT INTO ${db}.t VALUES (1, '1.5', 5), (2, '2.25', 5), (3, NULL, 5)`);
    const report = await check(db, ['t'], 2);
    expect(findings(report)).toEqual({ [`${db}.t:(start, 2]`]: 'unexplained_chunk>-' });
    expect(report.tables[0]!.findings[0]!.states.map((s) => s.kind === 'chunk' && s.rows)).toEqual([2, 2]);
    expect(report.identical).toBe(false);

    const out: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void out.push(args.join(' ')));
    try {
      expect(await runCheck([...urls.flatMap((u) => ['--node', u]), '--tables', `${db}.t`, '--chunk-size', '2'])).toBe(1);
    } finally {
      log.mockRestore();
    }
    expect(out.join('\n')).toMatch(/id="\(start, 2\]" +2 row\(s\), checksum \S+ +B: 2 row\(s\), checksum \S+ +unexplained_chunk +unknown/);
  });
});
