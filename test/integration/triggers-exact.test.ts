// Issue #11, install and trigger side: cascaded deletes get tombstones, triggers appear in one
// atomic step under live writers, tombstone tables follow primary-key DDL; and, with real
// concurrent sessions, REPLACE in a REPEATABLE READ transaction that read before, a READ COMMITTED
// insert racing a replicated delete, an insert after a delete committed past the transaction's
// snapshot. Invariant checked each time: no row is at or below its key's tombstone.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { createSink } from '../../src/index.ts';
import { install } from '../../src/install/install.ts';
import { makeVersion } from '../../src/model/version.ts';
import { enterApplySessionSql } from '../../src/sql/install.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { freshDatabase } from '../helpers/db.ts';

const DB = 'conc';
const TOMB = `lww_meta.tomb__${DB}__t`;

/** A peer's version 5 s ahead of this server's clock (clock skew). */
const peerVersion = () => makeVersion(BigInt(Date.now() + 5000) * 1000n, 2);

describeEachEngine('install and triggers: cascades, atomic triggers, tombstone DDL, concurrency', 1, (ctx) => {
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

  it('a delete of a parent with ON DELETE CASCADE or SET NULL children is refused with foreign_key_checks=0 (the server would leave the children, the peers would not), and nothing changes', async () => {
    await freshDatabase(conn, 'fk0', [
      'CREATE TABLE {{db}}.p (id INT PRIMARY KEY) ENGINE=InnoDB',
      'CREATE TABLE {{db}}.c (id INT PRIMARY KEY, pid INT NOT NULL, FOREIGN KEY (pid) REFERENCES {{db}}.p (id) ON DELETE CASCADE) ENGINE=InnoDB',
      'CREATE TABLE {{db}}.n (id INT PRIMARY KEY, pid INT NULL, FOREIGN KEY (pid) REFERENCES {{db}}.p (id) ON DELETE SET NULL) ENGINE=InnoDB',
    ]);
    await install({ url, nodeId: 3, tables: ['fk0.p', 'fk0.c', 'fk0.n'] });
    await conn.query('INSERT INTO fk0.p (id) VALUES (1), (2), (3)');
    await conn.query('INSERT INTO fk0.c (id, pid) VALUES (10, 1), (20, 2)');
    await conn.query('INSERT INTO fk0.n (id, pid) VALUES (11, 1)');
    await conn.query('SET SESSION foreign_key_checks = 0');
    try {
      await expect(conn.query('DELETE FROM fk0.p WHERE id IN (1, 2)')).rejects.toThrow(/foreign_key_checks=0 while deleting a row referenced/);
      // A parent without children is deleted as usual (maintenance scripts delete children first).
      await conn.query('DELETE FROM fk0.p WHERE id = 3');
    } finally {
      await conn.query('SET SESSION foreign_key_checks = 1');
    }
    expect((await q('SELECT id FROM fk0.p ORDER BY id')).map((r) => r.id)).toEqual([1, 2]);
    expect((await q('SELECT id, pid FROM fk0.n')).map((r) => `${r.id}:${r.pid}`)).toEqual(['11:1']);
    expect(await q('SELECT id FROM lww_meta.tomb__fk0__c')).toEqual([]);
    // With the checks on, the delete goes through and its children follow, with tombstones.
    await conn.query('DELETE FROM fk0.p WHERE id = 1');
    expect((await q('SELECT id FROM fk0.c ORDER BY id')).map((r) => r.id)).toEqual([20]);
    expect((await q('SELECT id FROM lww_meta.tomb__fk0__c')).map((r) => r.id)).toEqual([10]);
    expect((await q('SELECT id, pid FROM fk0.n')).map((r) => `${r.id}:${r.pid}`)).toEqual(['11:null']);
  });

  it('install on a live table creates its triggers in one step: no stamped row is updated without a new version or deleted without a tombstone', async () => {
    await freshDatabase(conn, 'live', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL DEFAULT 0, _lww_ts BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB']);
    const writers = await Promise.all([connect(url), connect(url)]);
    let stop = false;
    let next = 0;
    const stamped: number[] = [];
    const unversionedUpdates: number[] = [];
    const version = async (w: Connection, id: number) => BigInt((await w.query<RowDataPacket[]>('SELECT _lww_ts AS v FROM live.t WHERE id = ?', [id]))[0][0]!.v);
    // Each writer: insert, update, delete, as fast as it can, while install runs. Two deletes of
    // neighbouring keys can deadlock on the tombstone table's gap locks (the triggers' locking read
    // of a missing tombstone); the server rolls the statement back and, as an application does, the
    // writer runs it again.
    const retried = async (w: Connection, sql: string, id: number) => {
      for (;;) {
        try {
          return await w.query(sql, [id]);
        } catch (err) {
          if ((err as { errno?: number }).errno !== 1213) throw err;
        }
      }
    };
    const loops = writers.map(async (w) => {
      while (!stop) {
        const id = ++next;
        await retried(w, 'INSERT INTO live.t (id) VALUES (?)', id);
        const inserted = await version(w, id);
        await retried(w, 'UPDATE live.t SET v = 1 WHERE id = ?', id);
        if (inserted > 0n && (await version(w, id)) <= inserted) unversionedUpdates.push(id);
        if (inserted > 0n) stamped.push(id);
        await retried(w, 'DELETE FROM live.t WHERE id = ?', id);
      }
    });
    try {
      while (next < 20) await new Promise((r) => setTimeout(r, 5));
      await install({ url, nodeId: 3, tables: ['live.t'] });
      const after = next;
      while (next < after + 20) await new Promise((r) => setTimeout(r, 5));
    } finally {
      stop = true;
      await Promise.all(loops);
      for (const w of writers) await w.end();
    }
    const tombs = new Set((await q('SELECT id FROM lww_meta.tomb__live__t')).map((r) => r.id as number));
    expect(stamped.length).toBeGreaterThan(0);
    expect(unversionedUpdates).toEqual([]);
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
      // A sink that loads the new shape alters the tombstone table itself: a replicated delete of a
      // key beyond INT is stored, not refused as out of range.
      const big = 2n ** 40n;
      await sink.write({ sourceId: 'd', position: '0', changes: [{ schema: 'ddl', table: 't', op: 'delete', before: { id: big, k: 'x' }, version: 5n }] });
      await sink.flush();
      const [col] = await q("SELECT COLUMN_TYPE AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'lww_meta' AND TABLE_NAME = 'tomb__ddl__t' AND COLUMN_NAME = 'id'");
      expect(String(col!.t)).toMatch(/^bigint/);
      expect((await q('SELECT id FROM lww_meta.tomb__ddl__t ORDER BY id')).map((r) => String(r.id))).toEqual(['1', big.toString()]);
      await conn.query('ALTER TABLE ddl.t MODIFY id BIGINT UNSIGNED NOT NULL');
      await install({ url, nodeId: 3, tables: ['ddl.t'] });
      const [col2] = await q("SELECT COLUMN_TYPE AS t FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'lww_meta' AND TABLE_NAME = 'tomb__ddl__t' AND COLUMN_NAME = 'id'");
      expect(String(col2!.t)).toMatch(/^bigint(\(20\))? unsigned/);
      await conn.query('DELETE FROM lww_meta.tomb__ddl__t WHERE id > 1');
      await conn.query('ALTER TABLE ddl.t DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)');
      sink.refreshMetadata('ddl', 't'); // what the replicator does when capture reports the DDL
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

  describe('triggers under concurrency and isolation levels', () => {
    let admin: Connection;
    let app: Connection;
    let sink: Connection;

    beforeAll(async () => {
      const url = ctx.servers[0]!.url;
      admin = await connect(url);
      await admin.query('DROP DATABASE IF EXISTS lww_meta');
      await freshDatabase(admin, DB, ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL) ENGINE=InnoDB']);
      await install({ url, nodeId: 1, tables: [`${DB}.t`] });
      app = await connect(url);
      // The sink's session: its writes keep the versions they carry.
      sink = await connect(url, { init: ['SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ', enterApplySessionSql('lww_meta')] });
    });
    afterAll(async () => {
      for (const c of [app, sink, admin]) await c?.end();
    });

    /** Rows at or below their tombstone: must always be empty. */
    const underTombstone = async () => {
      const [r] = await admin.query<RowDataPacket[]>(`SELECT t.id FROM ${DB}.t t JOIN ${TOMB} tb ON tb.id = t.id WHERE tb._lww_ts >= t._lww_ts`);
      return r.map((x) => x.id);
    };
    const versions = async (id: number) => {
      const [[row]] = await admin.query<RowDataPacket[]>(`SELECT _lww_ts AS v FROM ${DB}.t WHERE id = ?`, [id]);
      const [[tomb]] = await admin.query<RowDataPacket[]>(`SELECT _lww_ts AS v FROM ${TOMB} WHERE id = ?`, [id]);
      return { row: row ? BigInt(row.v) : undefined, tomb: tomb ? BigInt(tomb.v) : undefined };
    };
    /**
     * Until the application's statement waits for a row lock, or has been held up 3 s some other way
     * (seen on MariaDB: the session blocked before InnoDB reports a lock wait), or has finished: the
     * race is set either way, and what the test asserts afterwards holds in every interleaving.
     */
    const waitForLockWait = async (statement: Promise<string>) => {
      let settled = false;
      void statement.then(() => {
        settled = true;
      });
      const started = Date.now();
      while (!settled && Date.now() - started < 3000) {
        const [[r]] = await admin.query<RowDataPacket[]>("SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'");
        if (Number(r!.n) > 0) return;
        await new Promise((res) => setTimeout(res, 25));
      }
    };

    it('REPLACE, ODKU and INSERT IGNORE in a transaction that read before see the latest row, at either isolation level', async () => {
      let id = 100;
      for (const level of ['REPEATABLE READ', 'READ COMMITTED']) {
        for (const stmt of ['REPLACE INTO', 'INSERT INTO', 'INSERT IGNORE INTO']) {
          id++;
          await admin.query(`INSERT INTO ${DB}.t (id, v) VALUES (?, 'old'), (?, 'old2')`, [id, id + 1000]);
          await app.query(`SET SESSION TRANSACTION ISOLATION LEVEL ${level}`);
          await app.query('BEGIN');
          await app.query(`SELECT * FROM ${DB}.t WHERE id IN (?, ?)`, [id, id + 1000]);
          // A replicated update from a peer whose clock is 5 s ahead commits meanwhile.
          const peer = peerVersion();
          await sink.query(`UPDATE ${DB}.t SET v = 'peer', _lww_ts = ? WHERE id IN (?, ?)`, [peer.toString(), id, id + 1000]);
          const tail = stmt === 'INSERT INTO' ? " ON DUPLICATE KEY UPDATE v = 'local'" : '';
          await app.query(`${stmt} ${DB}.t (id, v) VALUES (?, 'local'), (?, 'local')${tail}`, [id, id + 1000]);
          await app.query('COMMIT');
          for (const k of [id, id + 1000]) {
            const { row, tomb } = await versions(k);
            if (stmt === 'INSERT IGNORE INTO') expect(row).toBe(peer);
            else expect(row! > peer && (tomb === undefined || row! > tomb)).toBe(true);
          }
        }
      }
      expect(await underTombstone()).toEqual([]);
    });

    it('a READ COMMITTED insert racing a replicated delete never lands below the tombstone', async () => {
      for (const [id, level] of [
        [5, 'READ COMMITTED'],
        [6, 'REPEATABLE READ'],
      ] as const) {
        const d = peerVersion();
        await app.query(`SET SESSION TRANSACTION ISOLATION LEVEL ${level}`);
        // The sink deletes the key (no row yet: its delete holds the gap), the application inserts
        // it and waits for that gap, the sink writes the tombstone and commits, the insert resumes.
        // A deadlock on either side is normal: the sink retries (tombstone first), the application
        // sees SQLSTATE 40001 like the trigger's own refusal.
        await sink.query('BEGIN');
        await sink.query(`DELETE FROM ${DB}.t WHERE id = ? AND _lww_ts < ?`, [id, d.toString()]);
        const inserting = app.query(`INSERT INTO ${DB}.t (id, v) VALUES (?, 'local')`, [id]).then(
          () => 'inserted',
          (e: { sqlState?: string }) => e.sqlState ?? 'error',
        );
        await waitForLockWait(inserting);
        const tombstone = `INSERT INTO ${TOMB} (id, _lww_ts) VALUES (?, ?) ON DUPLICATE KEY UPDATE _lww_ts = GREATEST(_lww_ts, VALUES(_lww_ts))`;
        try {
          await sink.query(tombstone, [id, d.toString()]);
          await sink.query('COMMIT');
        } catch (e) {
          expect((e as { errno?: number }).errno).toBe(1213);
          await sink.query('ROLLBACK');
          await inserting;
          await sink.query('BEGIN');
          await sink.query(tombstone, [id, d.toString()]);
          await sink.query(`DELETE FROM ${DB}.t WHERE id = ? AND _lww_ts < ?`, [id, d.toString()]);
          await sink.query('COMMIT');
        }
        const outcome = await inserting;
        const { row, tomb } = await versions(id);
        expect(tomb).toBe(d);
        if (outcome === 'inserted') expect(row === undefined || row > d).toBe(true);
        else {
          // Refused as a serialization failure: the application retries, above the tombstone.
          expect(outcome).toBe('40001');
          expect(row).toBeUndefined();
          await app.query(`INSERT INTO ${DB}.t (id, v) VALUES (?, 'retried')`, [id]);
          expect((await versions(id)).row! > d).toBe(true);
        }
      }
      expect(await underTombstone()).toEqual([]);
    });

    it('a replicated older insert waits for an uncommitted local delete and stays out below its tombstone (integer key, no tombstone before)', async () => {
      // The sink reads the key's tombstone with a lock before its upsert and, finding none on an
      // integer key, runs no check after it: the read has to wait for the local delete's uncommitted
      // tombstone. A plain (snapshot) read would find nothing and the older row would land below it.
      const lww = createSink({ target: url, failpoints: '' });
      try {
        await lww.write({ sourceId: 'peer', position: '1', changes: [{ schema: DB, table: 't', op: 'insert', after: { id: 9, v: 'warm' }, version: peerVersion() }] });
        await lww.flush();
        await app.query('SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ');
        await app.query('BEGIN');
        await app.query(`INSERT INTO ${DB}.t (id, v) VALUES (8, 'local')`);
        await app.query(`DELETE FROM ${DB}.t WHERE id = 8`);
        const older = makeVersion(BigInt(Date.now() - 60_000) * 1000n, 2);
        const applying = lww
          .write({ sourceId: 'peer', position: '2', changes: [{ schema: DB, table: 't', op: 'insert', after: { id: 8, v: 'older' }, version: older }] })
          .then(() => lww.flush())
          .then(
            () => 'applied',
            (e: Error) => e.message,
          );
        await waitForLockWait(applying);
        await app.query('COMMIT');
        expect(await applying).toBe('applied');
        const { row, tomb } = await versions(8);
        expect(row).toBeUndefined();
        expect(tomb! > older).toBe(true);
        expect(lww.stats().tables[`${DB}.t`]).toMatchObject({ skippedByTombstone: 1 });
        expect(await underTombstone()).toEqual([]);
      } finally {
        await lww.abort();
      }
    });

    it('an insert in a transaction whose snapshot predates a replicated delete goes above its tombstone', async () => {
      await admin.query(`INSERT INTO ${DB}.t (id, v) VALUES (7, 'x')`);
      for (const level of ['REPEATABLE READ', 'READ COMMITTED']) {
        await app.query(`SET SESSION TRANSACTION ISOLATION LEVEL ${level}`);
        await app.query('BEGIN');
        await app.query(`SELECT * FROM ${DB}.t`);
        const d = peerVersion();
        await sink.query('BEGIN');
        await sink.query(`INSERT INTO ${TOMB} (id, _lww_ts) VALUES (7, ?) ON DUPLICATE KEY UPDATE _lww_ts = GREATEST(_lww_ts, VALUES(_lww_ts))`, [d.toString()]);
        await sink.query(`DELETE FROM ${DB}.t WHERE id = 7 AND _lww_ts < ?`, [d.toString()]);
        await sink.query('COMMIT');
        await app.query(`INSERT INTO ${DB}.t (id, v) VALUES (7, 'again')`);
        await app.query('COMMIT');
        const { row, tomb } = await versions(7);
        expect(row! > tomb!).toBe(true);
      }
      expect(await underTombstone()).toEqual([]);
    });
  });
});
