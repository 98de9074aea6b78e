// Issue #11, install side: cascaded deletes get tombstones, triggers appear in one atomic step
// under live writers, tombstone tables follow primary-key DDL.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { createSink } from '../../src/index.ts';
import { install } from '../../src/install/install.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { freshDatabase } from '../helpers/db.ts';

describeEachEngine('install: cascades, atomic triggers, tombstone DDL', 1, (ctx) => {
  let url: string;
  let conn: Connection;
  const q = async (sql: string, params: unknown[] = []) => (await conn.query<RowDataPacket[]>(sql, params))[0];

  beforeAll(async () => {
    url = ctx.servers[0]!.url;
    conn = await connect(url);
    await conn.query('DROP DATABASE IF EXISTS lww_meta');
  });
  afterAll(async () => {
    await conn?.end();
  });

  it('a cascaded delete writes tombstones for the child rows, so a late older child insert stays deleted', async () => {
    await freshDatabase(conn, 'casc', [
      'CREATE TABLE {{db}}.p (id INT PRIMARY KEY, name VARCHAR(10)) ENGINE=InnoDB',
      'CREATE TABLE {{db}}.c (id INT PRIMARY KEY, pid INT NOT NULL, v INT, FOREIGN KEY (pid) REFERENCES {{db}}.p (id) ON DELETE CASCADE) ENGINE=InnoDB',
    ]);
    // Parent first, child later: the parent's cascade trigger appears when the child is installed.
    await install({ url, nodeId: 3, tables: ['casc.p'] });
    const second = await install({ url, nodeId: 3, tables: ['casc.c'] });
    expect(second.warnings.filter((w) => /foreign key/.test(w))).toEqual([]);
    expect((await q("SELECT TRIGGER_NAME AS n FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'casc' AND EVENT_OBJECT_TABLE = 'p' AND ACTION_TIMING = 'BEFORE' AND EVENT_MANIPULATION = 'DELETE'")).map((r) => r.n)).toEqual(['lww_bd__p']);
    await conn.query("INSERT INTO casc.p (id, name) VALUES (1, 'a'), (2, 'b')");
    await conn.query('INSERT INTO casc.c (id, pid, v) VALUES (10, 1, 0), (11, 1, 0), (20, 2, 0)');
    const [child11] = await q('SELECT _lww_ts AS v FROM casc.c WHERE id = 11');
    await conn.query('DELETE FROM casc.p WHERE id = 1');
    const [parentTomb] = await q('SELECT _lww_ts AS v FROM lww_meta.tomb__casc__p WHERE id = 1');
    const childTombs = await q('SELECT id, _lww_ts AS v FROM lww_meta.tomb__casc__c ORDER BY id');
    expect(childTombs.map((r) => r.id)).toEqual([10, 11]);
    for (const t of childTombs) {
      expect(BigInt(t.v) >= BigInt(parentTomb!.v)).toBe(true);
      expect(BigInt(t.v) > BigInt(child11!.v)).toBe(true);
    }
    expect((await q('SELECT id FROM casc.c ORDER BY id')).map((r) => r.id)).toEqual([20]);
    // A peer's older update of child 11 arrives late: held back by the cascade's tombstone.
    const sink = createSink({ target: url, failpoints: '' });
    try {
      await sink.write({ sourceId: 'peer', position: '1', changes: [{ schema: 'casc', table: 'c', op: 'insert', after: { id: 11, pid: 2, v: 9 }, version: BigInt(child11!.v) + 1n }] });
      await sink.flush();
      expect(sink.stats().tables['casc.c']!.skippedByTombstone).toBe(1);
    } finally {
      await sink.close();
    }
    expect((await q('SELECT id FROM casc.c ORDER BY id')).map((r) => r.id)).toEqual([20]);
  });

  it('install on a live table creates its triggers in one step: no stamped insert is deleted without a tombstone', async () => {
    await freshDatabase(conn, 'live', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB']);
    const writer = await connect(url);
    let stop = false;
    let next = 0;
    const stamped: number[] = [];
    const loop = (async () => {
      while (!stop) {
        const id = ++next;
        await writer.query('INSERT INTO live.t (id) VALUES (?)', [id]);
        const [[row]] = await writer.query<RowDataPacket[]>('SELECT _lww_ts AS v FROM live.t WHERE id = ?', [id]);
        if (BigInt(row!.v) > 0n) stamped.push(id);
        await writer.query('DELETE FROM live.t WHERE id = ?', [id]);
      }
    })();
    try {
      while (next < 20) await new Promise((r) => setTimeout(r, 5));
      await install({ url, nodeId: 3, tables: ['live.t'] });
      const after = next;
      while (next < after + 20) await new Promise((r) => setTimeout(r, 5));
    } finally {
      stop = true;
      await loop;
      await writer.end();
    }
    const tombs = new Set((await q('SELECT id FROM lww_meta.tomb__live__t')).map((r) => r.id as number));
    expect(stamped.length).toBeGreaterThan(0);
    expect(stamped.filter((id) => !tombs.has(id))).toEqual([]);
  });

  it('a re-install makes the tombstone table follow primary-key DDL', async () => {
    await freshDatabase(conn, 'ddl', ['CREATE TABLE {{db}}.t (id INT NOT NULL, k VARCHAR(5) NOT NULL DEFAULT \'x\', PRIMARY KEY (id)) ENGINE=InnoDB']);
    await install({ url, nodeId: 3, tables: ['ddl.t'] });
    await conn.query('INSERT INTO ddl.t (id) VALUES (1)');
    await conn.query('DELETE FROM ddl.t');
    await conn.query('ALTER TABLE ddl.t MODIFY id BIGINT NOT NULL');
    const sink = createSink({ target: url, failpoints: '' });
    try {
      await install({ url, nodeId: 3, tables: ['ddl.t'] });
      const [col] = await q("SELECT COLUMN_TYPE AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'lww_meta' AND TABLE_NAME = 'tomb__ddl__t' AND COLUMN_NAME = 'id'");
      expect(String(col!.t)).toMatch(/^bigint/);
      expect((await q('SELECT id FROM lww_meta.tomb__ddl__t')).map((r) => Number(r.id))).toEqual([1]);
      await conn.query('ALTER TABLE ddl.t DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)');
      // The sink stops rather than guess; a re-install rebuilds the tombstone table and says so.
      await expect(sink.write({ sourceId: 'd', position: '1', changes: [{ schema: 'ddl', table: 't', op: 'delete', before: { id: 5, k: 'y' }, version: 5n }] })).rejects.toThrow(
        /no longer matches its tombstone table.*run install/,
      );
      const result = await install({ url, nodeId: 3, tables: ['ddl.t'] });
      expect(result.warnings.join('\n')).toMatch(/tombstone table .* was rebuilt/);
      const key = await q("SELECT COLUMN_NAME AS c FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'lww_meta' AND TABLE_NAME = 'tomb__ddl__t' AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX");
      expect(key.map((r) => r.c)).toEqual(['id', 'k']);
      await conn.query("INSERT INTO ddl.t (id, k) VALUES (2, 'y')");
      await conn.query('DELETE FROM ddl.t');
      expect((await q('SELECT id, k FROM lww_meta.tomb__ddl__t')).map((r) => `${r.id}:${r.k}`)).toEqual(['2:y']);
    } finally {
      await sink.abort();
    }
  });
});
