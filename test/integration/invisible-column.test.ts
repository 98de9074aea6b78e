// Install adds the version column INVISIBLE: application SQL written before install (INSERT … VALUES
// without a column list, SELECT *) behaves as before, replication still carries every row's version,
// and a visible column left by an older install is made invisible by re-running install.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { install } from '../../src/install/install.ts';
import type { Replicator } from '../../src/replicator/replicator.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { eventually, setupNodes, startReplicator } from '../helpers/replication.ts';

const DB = 'inv';
const DDL = ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL)'];

const rows = async (c: Connection, sql: string, params: unknown[] = []) => (await c.query<RowDataPacket[]>(sql, params))[0];

describeEachEngine('the invisible version column', 2, (ctx) => {
  let a: Connection;
  let b: Connection;
  let replicator: Replicator | undefined;
  beforeAll(async () => {
    const conns = await setupNodes(
      ctx.servers.map((s) => s.url),
      DB,
      DDL,
      ['t'],
    );
    a = conns[0]!;
    b = conns[1]!;
  });
  afterAll(async () => {
    await replicator?.stop();
    await a?.end();
    await b?.end();
  });

  it('leaves INSERT … VALUES without a column list and SELECT * as they were before install', async () => {
    await a.query(`INSERT INTO ${DB}.t VALUES (1, 'x')`);
    const [row] = await rows(a, `SELECT * FROM ${DB}.t WHERE id = 1`);
    expect(Object.keys(row!)).toEqual(['id', 'name']);
    const [versioned] = await rows(a, `SELECT _lww_ts AS v FROM ${DB}.t WHERE id = 1`);
    expect(BigInt(versioned!.v) & 1023n).toBe(1n); // stamped by node 1's trigger
  });

  it('replicates rows with their versions (binlog images include the invisible column)', async () => {
    replicator = await startReplicator(ctx.servers.map((s) => s.url));
    await a.query(`INSERT INTO ${DB}.t VALUES (2, 'from a')`);
    const [source] = await rows(a, `SELECT _lww_ts AS v FROM ${DB}.t WHERE id = 2`);
    const [copied] = await eventually(
      'row 2 on b',
      () => rows(b, `SELECT name, _lww_ts AS v FROM ${DB}.t WHERE id = 2`),
      (r) => r.length === 1,
    );
    expect(copied).toEqual({ name: 'from a', v: source!.v });
    await replicator.stop();
    replicator = undefined;
  });

  it('upgrades a visible column left by an older install in place', async () => {
    await a.query(`ALTER TABLE ${DB}.t MODIFY COLUMN _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0`); // as the old install added it
    expect(Object.keys((await rows(a, `SELECT * FROM ${DB}.t WHERE id = 1`))[0]!)).toContain('_lww_ts');
    const [before] = await rows(a, `SELECT _lww_ts AS v FROM ${DB}.t WHERE id = 1`);
    await install({ url: ctx.servers[0]!.url, nodeId: 1, tables: [`${DB}.t`] });
    expect(Object.keys((await rows(a, `SELECT * FROM ${DB}.t WHERE id = 1`))[0]!)).toEqual(['id', 'name']);
    const [after] = await rows(a, `SELECT _lww_ts AS v FROM ${DB}.t WHERE id = 1`);
    expect(after!.v).toBe(before!.v);
    await a.query(`INSERT INTO ${DB}.t VALUES (3, 'after upgrade')`);
    expect(Number((await rows(a, `SELECT COUNT(*) AS n FROM ${DB}.t`))[0]!.n)).toBe(3);
  });

  it('keeps an operator-made visible version column visible (only install-added columns are hidden)', async () => {
    const c = await connect(ctx.servers[1]!.url);
    try {
      await c.query(`CREATE TABLE ${DB}.own (id INT NOT NULL PRIMARY KEY, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0)`);
      await install({ url: ctx.servers[1]!.url, nodeId: 2, tables: [`${DB}.own`] });
      await c.query(`INSERT INTO ${DB}.own VALUES (1, 0)`);
      expect(Object.keys((await rows(c, `SELECT * FROM ${DB}.own`))[0]!)).toEqual(['id', '_lww_ts']);
    } finally {
      await c.end();
    }
  });
});
