import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { InstallRefusedError, NodeIdConflictError, UnsupportedTableError } from '../../src/errors.ts';
import { checkAutoIncrementCollisions } from '../../src/install/auto-increment.ts';
import { createSink } from '../../src/index.ts';
import { formatPlan, type PlannedStatement, recordingConnection } from '../../src/install/dry-run.ts';
import { install, uninstall } from '../../src/install/install.ts';
import { tombstoneTableName } from '../../src/model/names.ts';
import { makeVersion, nextVersion, nodeIdOf, physicalMicrosOf } from '../../src/model/version.ts';
import { enterApplySessionSql } from '../../src/sql/install.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const execFileAsync = promisify(execFile);
const NODE = 5;
const WEIRD = 'we`ird tâble';
const T = '`app`.`we``ird tâble`';
const TOMB = `\`lww_meta\`.\`${tombstoneTableName('app', WEIRD).replaceAll('`', '``')}\``;

async function rows(conn: Connection, sql: string, params: unknown[] = []): Promise<RowDataPacket[]> {
  const [r] = await conn.query<RowDataPacket[]>(sql, params);
  return r;
}

async function versionOf(conn: Connection, region: string, id: number): Promise<bigint | undefined> {
  const r = await rows(conn, `SELECT _lww_ts AS v FROM ${T} WHERE region = ? AND id = ?`, [region, id]);
  return r.length === 0 ? undefined : BigInt(r[0]!.v);
}

async function tombstoneOf(conn: Connection, region: string, id: number): Promise<bigint | undefined> {
  const r = await rows(conn, `SELECT _lww_ts AS v FROM ${TOMB} WHERE region = ? AND id = ?`, [region, id]);
  return r.length === 0 ? undefined : BigInt(r[0]!.v);
}

async function showCreateTable(conn: Connection, table: string): Promise<string> {
  return String((await rows(conn, `SHOW CREATE TABLE ${table}`))[0]!['Create Table']);
}

/** Everything install could touch, to compare before and after a second run. */
async function snapshot(conn: Connection): Promise<unknown> {
  const triggers = await rows(
    conn,
    "SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, CREATED FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'app' ORDER BY TRIGGER_NAME",
  );
  return {
    tables: [await showCreateTable(conn, T), await showCreateTable(conn, '`app`.`versioned`'), await showCreateTable(conn, TOMB)],
    triggers,
    rows: await rows(conn, `SELECT * FROM ${T} ORDER BY region, id`),
    versioned: await rows(conn, 'SELECT * FROM `app`.`versioned` ORDER BY id'),
    tombstones: await rows(conn, `SELECT * FROM ${TOMB} ORDER BY region, id`),
    registry: await rows(conn, 'SELECT * FROM `lww_meta`.`tables` ORDER BY schema_name, table_name'),
    node: await rows(conn, 'SELECT node_id FROM `lww_meta`.`node`'),
  };
}

/** Asserts a version is this node's and its physical part is within a second of the wall clock. */
function expectFreshLocalVersion(v: bigint | undefined, before: number, after: number): void {
  expect(v).toBeDefined();
  expect(nodeIdOf(v!)).toBe(NODE);
  const micros = physicalMicrosOf(v!);
  expect(micros).toBeGreaterThanOrEqual(BigInt(before - 1000) * 1000n);
  expect(micros).toBeLessThanOrEqual(BigInt(after + 1000) * 1000n);
}

describeEachEngine('install and uninstall', 1, (ctx) => {
  let url = '';
  let conn: Connection;
  let originalWeird = '';
  let originalVersioned = '';

  beforeAll(async () => {
    url = ctx.servers[0]!.url;
    conn = await connect(url);
    await conn.query('CREATE DATABASE app CHARACTER SET utf8mb4');
    await conn.query(
      `CREATE TABLE ${T} (region VARCHAR(8) NOT NULL, id INT NOT NULL, name VARCHAR(32) NULL, qty INT NOT NULL DEFAULT 0, PRIMARY KEY (region, id)) ENGINE=InnoDB`,
    );
    await conn.query(`INSERT INTO ${T} (region, id, name) VALUES ('eu', 1, 'old-1'), ('eu', 2, 'old-2'), ('us', 1, 'old-3')`);
    await conn.query(
      'CREATE TABLE `app`.`versioned` (id INT NOT NULL PRIMARY KEY, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0, note TEXT) ENGINE=InnoDB',
    );
    await conn.query("INSERT INTO `app`.`versioned` (id, note) VALUES (1, 'a')");
    await conn.query('CREATE TABLE `app`.`nopk` (a INT, b INT) ENGINE=InnoDB');
    await conn.query('CREATE DATABASE cli_db');
    await conn.query('CREATE TABLE cli_db.t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB');
    originalWeird = await showCreateTable(conn, T);
    originalVersioned = await showCreateTable(conn, '`app`.`versioned`');
  });

  afterAll(async () => {
    await conn?.end();
  });

  it('refuses a table without a primary key, naming it, before changing anything', async () => {
    const attempt = install({ url, nodeId: NODE, tables: [`\`app\`.\`${WEIRD.replaceAll('`', '``')}\``, 'app.nopk'] });
    await expect(attempt).rejects.toThrow(UnsupportedTableError);
    await expect(attempt).rejects.toThrow(/app\.nopk cannot be replicated: it has no primary key/);
    const several = install({ url, nodeId: NODE, tables: ['app.nopk', 'app.missing', 'app.versioned'] });
    await expect(several).rejects.toThrow(InstallRefusedError);
    await expect(several).rejects.toThrow(/app\.nopk cannot be replicated[\s\S]*table app\.missing does not exist/);
    expect(await rows(conn, "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'lww_meta'")).toHaveLength(0);
    expect(await showCreateTable(conn, T)).toBe(originalWeird);
  });

  it('refuses a BIT or generated primary-key column, naming it (the sink could not match such keys), and so does the sink', async () => {
    await conn.query('DROP TABLE IF EXISTS app.bitpk, app.genpk');
    await conn.query('CREATE TABLE app.bitpk (k BIT(12) NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB');
    await expect(install({ url, nodeId: NODE, tables: ['app.bitpk'] })).rejects.toThrow(/app\.bitpk cannot be replicated: its primary-key column k is BIT/);
    // MariaDB refuses a primary key on a generated column itself.
    if (ctx.engine === 'mysql') {
      await conn.query('CREATE TABLE app.genpk (a INT NOT NULL, k INT AS (a * 2) STORED NOT NULL, v INT, PRIMARY KEY (k)) ENGINE=InnoDB');
      await expect(install({ url, nodeId: NODE, tables: ['app.genpk'] })).rejects.toThrow(/app\.genpk cannot be replicated: its primary-key column k is a generated column/);
      await conn.query('DROP TABLE app.genpk');
    }
    // A table given the version column by hand still cannot be fed to the sink.
    await conn.query('ALTER TABLE app.bitpk ADD COLUMN _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0');
    const sink = createSink({ target: url, failpoints: '' });
    try {
      await expect(sink.write({ sourceId: 'bit', position: '1', changes: [{ schema: 'app', table: 'bitpk', op: 'insert', after: { k: Buffer.from([0, 1]), v: 1 }, version: 5n }] })).rejects.toThrow(
        /its primary-key column k is BIT/,
      );
    } finally {
      await sink.abort();
    }
    expect(await rows(conn, 'SELECT * FROM app.bitpk')).toHaveLength(0);
    await conn.query('DROP TABLE app.bitpk');
  });

  it('refuses a column in a charset whose text capture cannot carry byte for byte (big5, tis620, ujis, sjis), naming it, before changing anything; takes gbk, euckr, cp1251, latin2, utf16', async () => {
    for (const cs of ['big5', 'tis620', 'ujis', 'sjis']) {
      await conn.query('DROP TABLE IF EXISTS app.legacy');
      await conn.query(`CREATE TABLE app.legacy (id INT PRIMARY KEY, note VARCHAR(20) CHARACTER SET utf8mb4, v VARCHAR(20) CHARACTER SET ${cs}) ENGINE=InnoDB`);
      const created = await showCreateTable(conn, 'app.legacy');
      await expect(install({ url, nodeId: NODE, tables: ['app.legacy'] })).rejects.toThrow(new RegExp(`app\\.legacy cannot be replicated: its column v is in character set ${cs}, whose text capture cannot carry byte for byte[\\s\\S]*utf8mb4`));
      expect(await showCreateTable(conn, 'app.legacy')).toBe(created);
    }
    await conn.query('DROP TABLE app.legacy');
    await conn.query(
      'CREATE TABLE app.legacy (id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET gbk, b TEXT CHARACTER SET euckr, c CHAR(3) CHARACTER SET cp1251, d VARCHAR(9) CHARACTER SET latin2, e VARCHAR(9) CHARACTER SET utf16) ENGINE=InnoDB',
    );
    await install({ url, nodeId: NODE, tables: ['app.legacy'] });
    expect(await showCreateTable(conn, 'app.legacy')).toMatch(/_lww_ts/);
    await uninstall({ url, tables: ['app.legacy'] });
    await conn.query('DROP TABLE app.legacy');
  });

  it('refuses a system-versioned table (MariaDB), named or in a --schema run (which left it out without a word), and one with an application-time period, naming why, before changing anything; MySQL has neither', async () => {
    if (ctx.engine === 'mysql') {
      await expect(conn.query('CREATE TABLE app.hist (id INT PRIMARY KEY) WITH SYSTEM VERSIONING')).rejects.toThrow(/syntax/);
      await expect(conn.query('CREATE TABLE app.per (id INT PRIMARY KEY, s DATE, e DATE, PERIOD FOR p (s, e))')).rejects.toThrow(/syntax/);
      return;
    }
    await conn.query('DROP DATABASE IF EXISTS temporal');
    await conn.query('CREATE DATABASE temporal');
    await conn.query('CREATE TABLE temporal.a_plain (id INT PRIMARY KEY, v INT) ENGINE=InnoDB');
    await conn.query('CREATE TABLE temporal.hist (id INT PRIMARY KEY, v INT) ENGINE=InnoDB WITH SYSTEM VERSIONING');
    const state = async () => ({
      tables: [await showCreateTable(conn, 'temporal.a_plain'), await showCreateTable(conn, 'temporal.hist')],
      triggers: await rows(conn, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'temporal'"),
      registry: (await rows(conn, "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'lww_meta' AND TABLE_NAME = 'tables'")).length
        ? await rows(conn, "SELECT * FROM lww_meta.tables WHERE schema_name = 'temporal'")
        : [],
      meta: await rows(conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'lww_meta' ORDER BY TABLE_NAME"),
    });
    const before = await state();
    const versioned = /table temporal\.hist cannot be replicated: it is system-versioned \(WITH SYSTEM VERSIONING\)[\s\S]*history row[\s\S]*DROP SYSTEM VERSIONING/;
    await expect(install({ url, nodeId: NODE, tables: ['temporal.hist'] })).rejects.toThrow(versioned);
    await expect(install({ url, nodeId: NODE, schema: 'temporal' })).rejects.toThrow(versioned);
    expect(await state()).toEqual(before);
    // What an ALTER … ADD SYSTEM VERSIONING while replicate runs meets: the sink refuses the table too (before it looks for the version column).
    const sink = createSink({ target: url, failpoints: '' });
    try {
      await expect(sink.write({ sourceId: 'hist', position: '1', changes: [{ schema: 'temporal', table: 'hist', op: 'insert', after: { id: 1, v: 1 }, version: 5n }] })).rejects.toThrow(
        /temporal\.hist cannot be replicated: it is system-versioned/,
      );
    } finally {
      await sink.abort();
    }

    // DELETE … FOR PORTION OF inserts a part keeping the key before the delete trigger writes the tombstone.
    const period = /table temporal\.per cannot be replicated: it has an application-time period \(PERIOD FOR p\): DELETE or UPDATE … FOR PORTION OF[\s\S]*DROP PERIOD FOR p/;
    for (const key of ['PRIMARY KEY (id, s)', 'PRIMARY KEY (id, p WITHOUT OVERLAPS)']) {
      await conn.query('DROP TABLE IF EXISTS temporal.per');
      await conn.query(`CREATE TABLE temporal.per (id INT, v INT, s DATE NOT NULL, e DATE NOT NULL, PERIOD FOR p (s, e), ${key}) ENGINE=InnoDB`);
      const created = await showCreateTable(conn, 'temporal.per');
      await expect(install({ url, nodeId: NODE, tables: ['temporal.per'] })).rejects.toThrow(period);
      expect(await showCreateTable(conn, 'temporal.per')).toBe(created);
    }
    // Both at once: both named, nothing installed (the plain table neither).
    const both = install({ url, nodeId: NODE, schema: 'temporal' });
    await expect(both).rejects.toThrow(InstallRefusedError);
    await expect(both).rejects.toThrow(/temporal\.hist cannot be replicated: it is system-versioned[\s\S]*temporal\.per cannot be replicated: it has an application-time period/);
    expect((await state()).registry).toEqual([]);
    expect(await rows(conn, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'temporal'")).toEqual([]);

    // Without the versioning and the period, the schema installs.
    await conn.query('ALTER TABLE temporal.hist DROP SYSTEM VERSIONING');
    await conn.query('ALTER TABLE temporal.per DROP PRIMARY KEY, ADD PRIMARY KEY (id, s), DROP PERIOD FOR p');
    const result = await install({ url, nodeId: NODE, schema: 'temporal' });
    expect(result.tables.map((t) => t.table).sort()).toEqual(['a_plain', 'hist', 'per']);
    await uninstall({ url, schema: 'temporal' });
    await conn.query('DROP DATABASE temporal');
  });

  it('refuses a table whose foreign key changes it when a parent that is not installed changes (no trigger would see it), naming both, wherever the parent lives; installs it once the parent is', async () => {
    for (const db of ['fkapp', 'fkauth']) {
      await conn.query(`DROP DATABASE IF EXISTS ${db}`);
      await conn.query(`CREATE DATABASE ${db}`);
    }
    // The parent lives in another schema; a table of the parent's name in the child's schema is a decoy.
    await conn.query('CREATE TABLE fkauth.p (id INT PRIMARY KEY) ENGINE=InnoDB');
    await conn.query('CREATE TABLE fkapp.p (id INT PRIMARY KEY) ENGINE=InnoDB');
    await conn.query('CREATE TABLE fkapp.c (id INT PRIMARY KEY, pid INT, CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES fkauth.p (id) ON DELETE CASCADE) ENGINE=InnoDB');
    await expect(install({ url, nodeId: NODE, tables: ['fkapp.p', 'fkapp.c'] })).rejects.toThrow(
      /fkapp\.c cannot be replicated: its foreign key fk_p \(ON DELETE CASCADE, ON UPDATE (RESTRICT|NO ACTION)\) changes its rows when fkauth\.p changes, and fkauth\.p is not installed/,
    );
    expect(await rows(conn, "SELECT 1 FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'fkapp'")).toHaveLength(0);
    await install({ url, nodeId: NODE, tables: ['fkauth.p'] });
    const child = await install({ url, nodeId: NODE, tables: ['fkapp.c'] });
    expect(child.tables.map((t) => t.table)).toEqual(['c']);
    await uninstall({ url, tables: ['fkapp.c', 'fkauth.p'] });
    await conn.query('DROP DATABASE fkapp');
    await conn.query('DROP DATABASE fkauth');
  });

  it("refuses a table with an application trigger that would run again for replicated rows, naming it; one that skips the sink's sessions is taken and skipped by the sink", async () => {
    await conn.query('DROP DATABASE IF EXISTS trgapp');
    await conn.query('CREATE DATABASE trgapp');
    await conn.query('CREATE TABLE trgapp.t (id INT PRIMARY KEY, v INT, touched DATETIME(6) NULL) ENGINE=InnoDB');
    await conn.query('CREATE TRIGGER trgapp.touch BEFORE UPDATE ON trgapp.t FOR EACH ROW SET NEW.touched = NOW(6)');
    await expect(install({ url, nodeId: NODE, tables: ['trgapp.t'] })).rejects.toThrow(
      /trgapp\.t cannot be replicated: its trigger\(s\) touch \(BEFORE UPDATE\) would run again on every node[\s\S]*IF @lww_apply IS NULL THEN/,
    );
    expect(await rows(conn, "SELECT 1 FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'trgapp'")).toHaveLength(1);
    await conn.query('DROP TRIGGER trgapp.touch');
    await conn.query('CREATE TRIGGER trgapp.touch BEFORE UPDATE ON trgapp.t FOR EACH ROW BEGIN IF @lww_apply IS NULL THEN SET NEW.touched = NOW(6); END IF; END');
    await install({ url, nodeId: NODE, tables: ['trgapp.t'] });
    await conn.query('INSERT INTO trgapp.t (id, v) VALUES (1, 1)');
    await conn.query('UPDATE trgapp.t SET v = 2 WHERE id = 1');
    expect((await rows(conn, 'SELECT touched FROM trgapp.t'))[0]!.touched).not.toBeNull();
    const sink = createSink({ target: url, failpoints: '' });
    try {
      await sink.write({ sourceId: 'trg', position: '1', changes: [{ schema: 'trgapp', table: 't', op: 'update', before: { id: 1 }, after: { id: 1, v: 3, touched: '2001-01-01 00:00:00.000000' }, version: makeVersion(BigInt(Date.now() + 60_000) * 1000n, NODE + 1) }] });
      await sink.flush();
    } finally {
      await sink.close();
    }
    expect(await rows(conn, 'SELECT v, CAST(touched AS CHAR) AS touched FROM trgapp.t')).toEqual([{ v: 3, touched: '2001-01-01 00:00:00.000000' }]);
    await uninstall({ url, tables: ['trgapp.t'] });
    await conn.query('DROP DATABASE trgapp');
  });

  it('a dry run on a node never installed (no metadata schema, no secret yet) plans the triggers and changes nothing', async () => {
    const planned: PlannedStatement[] = [];
    await install({ connection: recordingConnection(conn, planned), nodeId: NODE, metaSchema: 'lww_dry', tables: ['app.versioned'] });
    const text = formatPlan(conn, planned);
    expect(text).toMatch(/CREATE TABLE IF NOT EXISTS `lww_dry`\.`apply_secret`/);
    expect(text).toMatch(/CREATE TRIGGER[^\n]*`lww_bi__versioned`/);
    expect(text).toContain("_binary'(the apply secret, not shown)'");
    expect(await rows(conn, "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'lww_dry'")).toHaveLength(0);
  });

  it('adds the version column and backfills existing rows with a version of this node', async () => {
    const before = Date.now();
    const result = await install({ url, nodeId: NODE, tables: [{ schema: 'app', table: WEIRD }, 'app.versioned'] });
    const after = Date.now();
    expect(result.recordedNodeId).toBe(true);
    expect(result.tables.map((t) => [t.table, t.changes.addedVersionColumn, t.changes.backfilledRows, t.changes.triggers.length])).toEqual([
      [WEIRD, true, 3, 5],
      ['versioned', false, 1, 5],
    ]);
    expect(await showCreateTable(conn, T)).toMatch(/`_lww_ts` bigint(\(20\))? unsigned NOT NULL (INVISIBLE DEFAULT 0|DEFAULT '0' \/\*!80023 INVISIBLE \*\/)/);
    for (const [region, id] of [['eu', 1], ['eu', 2], ['us', 1]] as const) {
      expectFreshLocalVersion(await versionOf(conn, region, id), before, after);
    }
    const registry = await rows(conn, 'SELECT table_name, added_version_column FROM lww_meta.`tables` ORDER BY table_name');
    expect(registry.map((r) => [r.table_name, Number(r.added_version_column)])).toEqual([
      ['versioned', 0],
      [WEIRD, 1],
    ]);
    expect(Number((await rows(conn, 'SELECT node_id FROM lww_meta.node'))[0]!.node_id)).toBe(NODE);
  });

  it('stamps a local insert with this node id and the current time', async () => {
    const before = Date.now();
    await conn.query(`INSERT INTO ${T} (region, id, name) VALUES ('eu', 10, 'new')`);
    expectFreshLocalVersion(await versionOf(conn, 'eu', 10), before, Date.now());
  });

  it('a sink session is told by the secret install rendered into the triggers, and by the secret table once it was replaced; a re-install renders the new one', async () => {
    await conn.query(`INSERT INTO ${T} (region, id, name) VALUES ('sx', 1, 'a')`);
    const keeps = async (session: Connection, v: bigint) => {
      await session.query(`UPDATE ${T} SET _lww_ts = ? WHERE region = 'sx' AND id = 1`, [v.toString()]);
      return (await versionOf(conn, 'sx', 1)) === v;
    };
    const [[old]] = await conn.query<RowDataPacket[]>('SELECT secret FROM lww_meta.apply_secret');
    const other = await connect(url);
    try {
      await conn.query(enterApplySessionSql('lww_meta'));
      expect(await keeps(conn, makeVersion(1_000_000n, 2))).toBe(true);
      await conn.query('UPDATE lww_meta.apply_secret SET secret = HEX(RANDOM_BYTES(32))');
      await conn.query(enterApplySessionSql('lww_meta'));
      expect(await keeps(conn, makeVersion(2_000_000n, 2))).toBe(true);
      // The old secret still matches the text install rendered, until install runs again.
      await other.query('SET @lww_apply = ?', [old!.secret]);
      expect(await keeps(other, makeVersion(3_000_000n, 2))).toBe(true);
      await install({ url, nodeId: NODE, tables: [{ schema: 'app', table: WEIRD }] });
      expect(await keeps(other, makeVersion(4_000_000n, 2))).toBe(false);
      expect(await keeps(conn, makeVersion(5_000_000n, 2))).toBe(true);
    } finally {
      await conn.query('SET @lww_apply = NULL');
      await other.end();
      // The secret and the triggers as they were, for the cases after this one.
      await conn.query('UPDATE lww_meta.apply_secret SET secret = ?', [old!.secret]);
      await install({ url, nodeId: NODE, tables: [{ schema: 'app', table: WEIRD }] });
    }
    await conn.query(`DELETE FROM ${T} WHERE region = 'sx'`);
  });

  it('computes versions with exact 64-bit integer math', async () => {
    // A clock whose microseconds do not survive a trip through a double (2^60 < version < 2^64).
    await conn.query('SET TIMESTAMP = 1699999999.999999');
    await conn.query(`INSERT INTO ${T} (region, id) VALUES ('zz', 1)`);
    expect(await versionOf(conn, 'zz', 1)).toBe(makeVersion(1699999999999999n, NODE));
    // An old version near 2^63, planted as the sink would: the update goes exactly one tick above it.
    const planted = (1n << 63n) + 5000n;
    await conn.query(enterApplySessionSql('lww_meta'));
    await conn.query(`UPDATE ${T} SET _lww_ts = ? WHERE region = 'zz' AND id = 1`, [planted.toString()]);
    await conn.query('SET @lww_apply = NULL');
    await conn.query(`UPDATE ${T} SET qty = 1 WHERE region = 'zz' AND id = 1`);
    expect(await versionOf(conn, 'zz', 1)).toBe(nextVersion(planted, 1699999999999999n, NODE));
    expect(await versionOf(conn, 'zz', 1)).toBe((1n << 63n) + 5n * 1024n + BigInt(NODE));
    await conn.query(`DELETE FROM ${T} WHERE region = 'zz'`);
    expect(await tombstoneOf(conn, 'zz', 1)).toBe((1n << 63n) + 6n * 1024n + BigInt(NODE));
    await conn.query('SET TIMESTAMP = DEFAULT');
    await conn.query(enterApplySessionSql('lww_meta'));
    await conn.query(`DELETE FROM ${TOMB} WHERE region = 'zz'`);
    await conn.query('SET @lww_apply = NULL');
  });

  it('an update gets a greater version than the old one even with the clock 5 s behind', async () => {
    const old = (await versionOf(conn, 'eu', 10))!;
    const skewed = Math.floor(Date.now() / 1000) - 5;
    await conn.query('SET TIMESTAMP = ?', [skewed]);
    await conn.query(`UPDATE ${T} SET name = 'skewed' WHERE region = 'eu' AND id = 10`);
    await conn.query('SET TIMESTAMP = DEFAULT');
    const v = (await versionOf(conn, 'eu', 10))!;
    expect(v).toBeGreaterThan(old);
    expect(v).toBe(nextVersion(old, BigInt(skewed) * 1_000_000n, NODE));
    expect(physicalMicrosOf(v)).toBe(physicalMicrosOf(old) + 1n);
  });

  it('a delete writes a tombstone above the row, and a re-insert goes above the tombstone', async () => {
    const rowVersion = (await versionOf(conn, 'eu', 10))!;
    const before = Date.now();
    await conn.query(`DELETE FROM ${T} WHERE region = 'eu' AND id = 10`);
    const tomb = (await tombstoneOf(conn, 'eu', 10))!;
    expect(tomb).toBeGreaterThan(rowVersion);
    expect(nodeIdOf(tomb)).toBe(NODE);
    expect(physicalMicrosOf(tomb)).toBeGreaterThanOrEqual(BigInt(before - 1000) * 1000n);
    await conn.query('SET TIMESTAMP = UNIX_TIMESTAMP() - 5');
    await conn.query(`INSERT INTO ${T} (region, id, name) VALUES ('eu', 10, 'again')`);
    await conn.query('SET TIMESTAMP = DEFAULT');
    const v = (await versionOf(conn, 'eu', 10))!;
    expect(v).toBe(nextVersion(tomb, 0n, NODE));
  });

  it('a local write with sql_log_bin=0 is refused naming the setting (it would reach no other node); the sink’s session may', async () => {
    await conn.query(`INSERT INTO ${T} (region, id, name) VALUES ('lb', 1, 'a')`);
    await conn.query('SET SESSION sql_log_bin = 0');
    try {
      for (const sql of [`INSERT INTO ${T} (region, id, name) VALUES ('lb', 2, 'b')`, `UPDATE ${T} SET name = 'x' WHERE region = 'lb' AND id = 1`, `DELETE FROM ${T} WHERE region = 'lb' AND id = 1`]) {
        await expect(conn.query(sql)).rejects.toThrow(/sql_log_bin=0 in this session/);
      }
      expect((await conn.query<RowDataPacket[]>(`SELECT id, name FROM ${T} WHERE region = 'lb'`))[0].map((r) => `${r.id}:${r.name}`)).toEqual(['1:a']);
      // A sink session is not refused: it writes what it was given.
      await conn.query(enterApplySessionSql('lww_meta'));
      await conn.query(`UPDATE ${T} SET name = 'sink' WHERE region = 'lb' AND id = 1`);
    } finally {
      await conn.query('SET SESSION sql_log_bin = 1, @lww_apply = NULL');
    }
    await conn.query(`DELETE FROM ${T} WHERE region = 'lb'`);
  });

  it('a primary-key change writes a tombstone for the old key with the new row’s version', async () => {
    await conn.query(`UPDATE ${T} SET id = 20 WHERE region = 'eu' AND id = 2`);
    const moved = (await versionOf(conn, 'eu', 20))!;
    expect(await versionOf(conn, 'eu', 2)).toBeUndefined();
    expect(await tombstoneOf(conn, 'eu', 2)).toBe(moved);
    // Moving onto a tombstoned key goes above that tombstone too.
    const tomb10 = (await tombstoneOf(conn, 'eu', 10))!;
    await conn.query(`DELETE FROM ${T} WHERE region = 'eu' AND id = 10`);
    const tomb10After = (await tombstoneOf(conn, 'eu', 10))!;
    expect(tomb10After).toBeGreaterThan(tomb10);
    await conn.query('SET TIMESTAMP = UNIX_TIMESTAMP() - 5');
    await conn.query(`UPDATE ${T} SET id = 10 WHERE region = 'eu' AND id = 20`);
    await conn.query('SET TIMESTAMP = DEFAULT');
    const landed = (await versionOf(conn, 'eu', 10))!;
    expect(landed).toBeGreaterThan(tomb10After);
    expect(landed).toBeGreaterThan(moved);
    expect(await tombstoneOf(conn, 'eu', 20)).toBe(landed);
  });

  it('REPLACE stays above the tombstone of the row it replaces', async () => {
    const old = (await versionOf(conn, 'us', 1))!;
    await conn.query(`REPLACE INTO ${T} (region, id, name) VALUES ('us', 1, 'replaced')`);
    const v = (await versionOf(conn, 'us', 1))!;
    const tomb = (await tombstoneOf(conn, 'us', 1))!;
    expect(tomb).toBeGreaterThan(old);
    expect(v).toBeGreaterThan(tomb);
  });

  it('a delete of a row older than its key\'s tombstone (left by a non-LWW writer) still raises the tombstone', async () => {
    await conn.query(enterApplySessionSql('lww_meta'));
    const high = 9_000_000_000_000_000_000n;
    try {
      await conn.query(`INSERT INTO ${TOMB} (region, id, _lww_ts) VALUES ('ol', 1, ?)`, [high.toString()]);
      await conn.query(`INSERT INTO ${T} (region, id, name, _lww_ts) VALUES ('ol', 1, 'older than its tombstone', 5000)`);
    } finally {
      await conn.query('SET @lww_apply = NULL');
    }
    await conn.query(`DELETE FROM ${T} WHERE region = 'ol' AND id = 1`);
    expect(await tombstoneOf(conn, 'ol', 1)).toBe(nextVersion(high, 0n, NODE));
  });

  it('with @lww_apply set, writes keep their version and leave no tombstone', async () => {
    await conn.query(enterApplySessionSql('lww_meta'));
    try {
      await conn.query(`INSERT INTO ${T} (region, id, name, _lww_ts) VALUES ('ap', 1, 'x', 12345)`);
      expect(await versionOf(conn, 'ap', 1)).toBe(12345n);
      await conn.query(`UPDATE ${T} SET name = 'y', _lww_ts = 12346 WHERE region = 'ap'`);
      expect(await versionOf(conn, 'ap', 1)).toBe(12346n);
      await conn.query(`UPDATE ${T} SET id = 2 WHERE region = 'ap'`);
      await conn.query(`DELETE FROM ${T} WHERE region = 'ap'`);
      expect(await rows(conn, `SELECT * FROM ${TOMB} WHERE region = 'ap'`)).toHaveLength(0);
    } finally {
      await conn.query('SET @lww_apply = NULL');
    }
  });

  it('an application account cannot choose a version, skip the clock, move it ahead or wrap it', async () => {
    for (const host of ['%', 'localhost', '127.0.0.1']) {
      await conn.query(`CREATE USER IF NOT EXISTS 'app'@'${host}' IDENTIFIED BY 'app-pw'`);
      await conn.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON \`app\`.* TO 'app'@'${host}'`);
    }
    const u = new URL(url);
    u.username = 'app';
    u.password = 'app-pw';
    const app = await connect(u.toString());
    try {
      await expect(app.query('SELECT secret FROM lww_meta.apply_secret')).rejects.toThrow(/denied/);
      // The old bypass flag, and a guessed secret, change nothing: every write is stamped.
      for (const flag of ['1', '0'.repeat(64)]) {
        await app.query('SET @lww_apply = ?', [flag]);
        const before = Date.now();
        await app.query(`INSERT INTO ${T} (region, id, name, _lww_ts) VALUES ('ap2', 1, 'mine', 42)`);
        const inserted = await versionOf(conn, 'ap2', 1);
        expectFreshLocalVersion(inserted, before, Date.now());
        await app.query(`UPDATE ${T} SET name = 'x', _lww_ts = 18446744073709551615 WHERE region = 'ap2' AND id = 1`);
        const updated = (await versionOf(conn, 'ap2', 1))!;
        expect(updated).toBeGreaterThan(inserted!);
        expectFreshLocalVersion(updated, before, Date.now());
        await app.query(`DELETE FROM ${T} WHERE region = 'ap2' AND id = 1`);
        expect(await tombstoneOf(conn, 'ap2', 1)).toBeGreaterThan(updated);
      }
      // A session clock moved ahead is refused; one moved back is a slow clock and allowed.
      await app.query('SET TIMESTAMP = UNIX_TIMESTAMP() + 3600');
      await expect(app.query(`INSERT INTO ${T} (region, id) VALUES ('ap2', 2)`)).rejects.toThrow(/session clock/);
      await app.query('SET TIMESTAMP = UNIX_TIMESTAMP() - 3600');
      await app.query(`INSERT INTO ${T} (region, id) VALUES ('ap2', 2)`);
      await app.query('SET TIMESTAMP = DEFAULT');
      // A stored version near 2^64 raises instead of wrapping to a version that loses everywhere.
      await conn.query(enterApplySessionSql('lww_meta'));
      await conn.query(`UPDATE ${T} SET _lww_ts = ? WHERE region = 'ap2' AND id = 2`, [((1n << 64n) - 2n).toString()]);
      await conn.query('SET @lww_apply = NULL');
      await expect(app.query(`UPDATE ${T} SET qty = 7 WHERE region = 'ap2' AND id = 2`)).rejects.toThrow(/overflow/);
      await expect(app.query(`DELETE FROM ${T} WHERE region = 'ap2' AND id = 2`)).rejects.toThrow(/overflow/);
      expect(await versionOf(conn, 'ap2', 2)).toBe((1n << 64n) - 2n);
      await conn.query(enterApplySessionSql('lww_meta'));
      await conn.query(`DELETE FROM ${T} WHERE region = 'ap2'`);
      await conn.query(`DELETE FROM ${TOMB} WHERE region = 'ap2'`);
      await conn.query('SET @lww_apply = NULL');
    } finally {
      await app.end();
      for (const host of ['%', 'localhost', '127.0.0.1']) await conn.query(`DROP USER IF EXISTS 'app'@'${host}'`);
    }
  });

  it('a second install changes nothing', async () => {
    const before = await snapshot(conn);
    const result = await install({ url, nodeId: NODE, tables: [`app.${WEIRD}`, 'app.versioned'] });
    expect(result.recordedNodeId).toBe(false);
    for (const t of result.tables) {
      expect(t.changes).toEqual({ registered: false, addedVersionColumn: false, triggers: [], backfilledRows: 0 });
    }
    expect(await snapshot(conn)).toEqual(before);
  });

  it('install replaces a trigger whose text is outdated', async () => {
    await conn.query('DROP TRIGGER `app`.`lww_bi__versioned`');
    await conn.query('CREATE TRIGGER `app`.`lww_bi__versioned` BEFORE INSERT ON `app`.`versioned` FOR EACH ROW SET NEW._lww_ts = 1');
    const result = await install({ url, nodeId: NODE, tables: ['app.versioned'] });
    expect(result.tables[0]!.changes.triggers).toEqual(['lww_bi__versioned']);
    const before = Date.now();
    await conn.query("INSERT INTO `app`.`versioned` (id, note) VALUES (2, 'b')");
    const [row] = await rows(conn, 'SELECT _lww_ts AS v FROM `app`.`versioned` WHERE id = 2');
    expectFreshLocalVersion(BigInt(row!.v), before, Date.now());
    expect((await install({ url, nodeId: NODE, tables: ['app.versioned'] })).tables[0]!.changes.triggers).toEqual([]);
  });

  it('refuses a second install with a different node id', async () => {
    const attempt = install({ url, nodeId: NODE + 1, tables: ['app.versioned'] });
    await expect(attempt).rejects.toThrow(NodeIdConflictError);
    await expect(attempt).rejects.toThrow(`node id ${NODE} is already recorded on this server; uninstall first`);
  });

  it('warns when two nodes can hand out the same AUTO_INCREMENT ids', async () => {
    // The same server twice: identical settings, so every AUTO_INCREMENT table collides.
    const warnings = await checkAutoIncrementCollisions([url, conn], { tables: [{ schema: 'cli_db', table: 't' }] });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/auto_increment_increment=1, auto_increment_offset=1.*cli_db\.t/);
    expect(await checkAutoIncrementCollisions([url, conn], { tables: [{ schema: 'app', table: 'versioned' }] })).toEqual([]);
  });

  it('installs and uninstalls a schema from the command line', async () => {
    const cli = ['--import', 'tsx', 'src/cli/main.ts'];
    const bad = await execFileAsync(process.execPath, [...cli, 'install', '--url', url, '--node-id', '2000', '--schema', 'cli_db']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(bad).toMatchObject({ code: 2 });
    expect((bad as { stderr: string }).stderr).toContain('--node-id must be an integer in 0..1023');

    const { stdout } = await execFileAsync(process.execPath, [...cli, 'install', '--url', url, '--node-id', String(NODE), '--schema', 'cli_db', '--json']);
    const result = JSON.parse(stdout);
    expect(result.tables.map((t: { table: string }) => t.table)).toEqual(['t']);
    expect(result.tables[0].changes.addedVersionColumn).toBe(true);
    expect(await rows(conn, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'cli_db'")).toHaveLength(5);

    const un = await execFileAsync(process.execPath, [...cli, 'uninstall', '--url', url, '--schema', 'cli_db']);
    expect(un.stdout).toContain('cli_db.t: uninstalled');
    expect(await rows(conn, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'cli_db'")).toHaveLength(0);
    expect(await showCreateTable(conn, 'cli_db.t')).not.toContain('_lww_ts');
  });

  it('uninstall removes exactly what install added and then the metadata schema', async () => {
    const result = await uninstall({ url, tables: [`app.${WEIRD}`, 'app.versioned'] });
    expect(result.droppedMetaSchema).toBe(true);
    expect(result.tables.map((t) => [t.table, t.droppedTriggers.length, t.droppedVersionColumn])).toEqual([
      [WEIRD, 5, true],
      ['versioned', 5, false],
    ]);
    expect(await showCreateTable(conn, T)).toBe(originalWeird);
    expect(await showCreateTable(conn, '`app`.`versioned`')).toBe(originalVersioned);
    expect(await rows(conn, "SELECT 1 FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'app'")).toHaveLength(0);
    expect(await rows(conn, "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'lww_meta'")).toHaveLength(0);
    // Uninstalled, a different node id is accepted again.
    await install({ url, nodeId: NODE + 1, tables: ['app.versioned'] });
    await uninstall({ url, schema: 'app' });
    expect(await rows(conn, "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'lww_meta'")).toHaveLength(0);
  });
});
