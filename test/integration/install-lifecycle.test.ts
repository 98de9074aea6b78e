// The table registry stays true across install's life: a table installed while replicate is stopped
// (rows on both nodes, writes before the install still in the binlog) converges on the next start;
// names with a dot or a comma install and replicate; an install that fails half-way leaves nothing
// registered, does not block the other tables, and succeeds once rerun after the fix. One server
// pair per engine, shared by the scenarios in order.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { install } from '../../src/install/install.ts';
import { tombstoneTableName } from '../../src/model/names.ts';
import type { Replicator } from '../../src/replicator/replicator.ts';
import { quoteTable } from '../../src/sql/quote.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, eventually, setupNodes, startReplicator } from '../helpers/replication.ts';

const DB = 'life';
const DOTTED = 'we.ird';
const COMMA = 'a,b';
const DDL = [
  'CREATE TABLE {{db}}.base (id INT PRIMARY KEY, v VARCHAR(20))',
  'CREATE TABLE {{db}}.late (id INT PRIMARY KEY, v VARCHAR(20))',
  'CREATE TABLE {{db}}.`we.ird` (id INT PRIMARY KEY, v VARCHAR(20))',
  'CREATE TABLE {{db}}.`a,b` (id INT PRIMARY KEY, v VARCHAR(20))',
  'CREATE TABLE {{db}}.okay (id INT PRIMARY KEY, v VARCHAR(20))',
  'CREATE TABLE {{db}}.noalt (id INT PRIMARY KEY, v VARCHAR(20))',
];

function withUser(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  return u.toString();
}

async function rows(conn: Connection, sql: string, params: unknown[] = []): Promise<RowDataPacket[]> {
  const [r] = await conn.query<RowDataPacket[]>(sql, params);
  return r;
}

/** What install leaves behind for a table: its registry row, triggers, version column and tombstone table. */
async function traces(conn: Connection, table: string): Promise<{ registered: number; triggers: number; versionColumn: number; tombstoneTable: number }> {
  const n = async (sql: string, params: unknown[]) => Number((await rows(conn, sql, params))[0]!.n);
  return {
    registered: await n('SELECT COUNT(*) AS n FROM lww_meta.tables WHERE schema_name = ? AND table_name = ?', [DB, table]),
    triggers: await n('SELECT COUNT(*) AS n FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?', [DB, table]),
    versionColumn: await n("SELECT COUNT(*) AS n FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = '_lww_ts'", [DB, table]),
    tombstoneTable: await n("SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'lww_meta' AND TABLE_NAME = ?", [tombstoneTableName(DB, table)]),
  };
}
const NO_TRACES = { registered: 0, triggers: 0, versionColumn: 0, tombstoneTable: 0 };

describeEachEngine('install lifecycle', 2, (ctx) => {
  let urls: string[];
  let a: Connection;
  let b: Connection;
  let replicator: Replicator | null = null;
  const same = (table: string) => converged([a, b], DB, table);
  const values = async (table: string) => JSON.parse(await same(table)).map((r: { id: number; v: string }) => [r.id, r.v]);

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    [a, b] = (await setupNodes(urls, DB, DDL, ['base'])) as [Connection, Connection];
    replicator = await startReplicator(urls);
    await a.query("INSERT INTO life.base VALUES (1, 'one')");
    await same('base');
    await replicator.stop();
    replicator = null;
  });
  afterAll(async () => {
    await replicator?.stop();
    await a?.end();
    await b?.end();
  });

  it('a table with rows installed while replicate is stopped converges on the next start (writes before the install included), and later writes cross', async () => {
    // Rows on both nodes, and writes on A while the table is not installed yet: they are in the
    // binlog after A→B's checkpoint, without a version column.
    await a.query("INSERT INTO life.late VALUES (1, 'a1'), (2, 'a2'), (3, 'a3')");
    await a.query("UPDATE life.late SET v = 'a2-updated' WHERE id = 2");
    await a.query('DELETE FROM life.late WHERE id = 3');
    await b.query("INSERT INTO life.late VALUES (4, 'b4'), (5, 'b5')");
    await install({ url: urls[0]!, nodeId: 1, tables: [`${DB}.late`] });
    await a.query("INSERT INTO life.late VALUES (6, 'a6-after-install')");
    await install({ url: urls[1]!, nodeId: 2, tables: [`${DB}.late`] });
    replicator = await startReplicator(urls);
    expect(await values('late')).toEqual([
      [1, 'a1'],
      [2, 'a2-updated'],
      [4, 'b4'],
      [5, 'b5'],
      [6, 'a6-after-install'],
    ]);
    await a.query("UPDATE life.late SET v = 'later' WHERE id = 4");
    await b.query("INSERT INTO life.base VALUES (2, 'two')");
    expect(await values('late')).toContainEqual([4, 'later']);
    expect(await values('base')).toEqual([
      [1, 'one'],
      [2, 'two'],
    ]);
    expect((await replicator.status()).directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
  });

  it('tables named with a dot or a comma install and replicate, without stopping other tables', async () => {
    await replicator?.stop();
    replicator = null;
    for (const [i, url] of urls.entries()) await install({ url, nodeId: i + 1, tables: [{ schema: DB, table: DOTTED }, { schema: DB, table: COMMA }] });
    replicator = await startReplicator(urls);
    await a.query(`INSERT INTO ${quoteTable(DB, DOTTED)} VALUES (1, 'dot')`);
    await b.query(`INSERT INTO ${quoteTable(DB, COMMA)} VALUES (1, 'comma')`);
    await a.query("INSERT INTO life.base VALUES (3, 'three')");
    expect(await values(DOTTED)).toEqual([[1, 'dot']]);
    expect(await values(COMMA)).toEqual([[1, 'comma']]);
    await b.query(`UPDATE ${quoteTable(DB, DOTTED)} SET v = 'dot-later' WHERE id = 1`);
    await a.query(`DELETE FROM ${quoteTable(DB, COMMA)} WHERE id = 1`);
    expect(await values(DOTTED)).toEqual([[1, 'dot-later']]);
    expect(await values(COMMA)).toEqual([]);
    expect(await values('base')).toContainEqual([3, 'three']);
    expect((await replicator!.status()).directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
  });

  it('an install that fails half-way (ALTER denied on one table) leaves nothing registered, does not block replication, and succeeds when rerun after the GRANT', async () => {
    // An installing account that may ALTER one of the two tables only.
    for (const c of [a, b]) {
      await c.query("DROP USER IF EXISTS 'installer'@'%'");
      await c.query("CREATE USER 'installer'@'%' IDENTIFIED BY 'pw'");
      await c.query(`GRANT SELECT, UPDATE, TRIGGER, LOCK TABLES ON ${DB}.* TO 'installer'@'%'`);
      await c.query(`GRANT ALTER ON ${DB}.okay TO 'installer'@'%'`);
      await c.query("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP ON lww_meta.* TO 'installer'@'%'");
    }
    const installer = urls.map((u) => withUser(u, 'installer', 'pw'));
    await a.query("INSERT INTO life.okay VALUES (1, 'ok')");
    await a.query("INSERT INTO life.noalt VALUES (1, 'na')");
    const refused = await install({ url: installer[0]!, nodeId: 1, tables: [`${DB}.okay`, `${DB}.noalt`] }).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(refused).toBeInstanceOf(Error);
    expect(refused!.message).toMatch(/ALTER/);
    expect(refused!.message).toMatch(/noalt/);
    // All or nothing: neither table keeps anything of the refused run.
    expect(await traces(a, 'okay')).toEqual(NO_TRACES);
    expect(await traces(a, 'noalt')).toEqual(NO_TRACES);
    expect((await rows(a, 'SELECT * FROM life.okay')).length).toBe(1);

    // Replication of the installed tables is not blocked, also across a restart.
    await replicator?.stop();
    replicator = await startReplicator(urls);
    await a.query("INSERT INTO life.base VALUES (4, 'four')");
    expect(await values('base')).toContainEqual([4, 'four']);

    // After the GRANT, the same install succeeds; the next start copies and streams the tables.
    // (SUPER: creating triggers with binary logging on, see README "Privileges".)
    for (const c of [a, b]) {
      await c.query(`GRANT ALTER ON ${DB}.* TO 'installer'@'%'`);
      await c.query("GRANT SUPER ON *.* TO 'installer'@'%'");
    }
    await replicator?.stop();
    for (const [i, url] of installer.entries()) await install({ url, nodeId: i + 1, tables: [`${DB}.okay`, `${DB}.noalt`] });
    expect(await traces(a, 'noalt')).toMatchObject({ registered: 1, versionColumn: 1, tombstoneTable: 1 });
    replicator = await startReplicator(urls);
    await a.query("UPDATE life.noalt SET v = 'na-later' WHERE id = 1");
    expect(await values('okay')).toEqual([[1, 'ok']]);
    expect(await values('noalt')).toEqual([[1, 'na-later']]);
    await eventually('base to stay in step', () => values('base'), (v) => v.length === 4);
  });
});
