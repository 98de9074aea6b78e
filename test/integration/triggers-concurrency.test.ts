// Issue #11, trigger side, with real concurrent sessions: REPLACE in a REPEATABLE READ transaction
// that read before, a READ COMMITTED insert racing a replicated delete, an insert after a delete
// committed past the transaction's snapshot. Invariant checked each time: no row is at or below
// its key's tombstone.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { install } from '../../src/install/install.ts';
import { makeVersion } from '../../src/model/version.ts';
import { enterApplySessionSql } from '../../src/sql/install.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { freshDatabase } from '../helpers/db.ts';

const DB = 'conc';
const TOMB = `lww_meta.tomb__${DB}__t`;

/** A peer's version 5 s ahead of this server's clock (clock skew). */
const peerVersion = () => makeVersion(BigInt(Date.now() + 5000) * 1000n, 2);

describeEachEngine('triggers under concurrency and isolation levels', 1, (ctx) => {
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
  const waitForLockWait = async () => {
    for (let i = 0; i < 200; i++) {
      const [[r]] = await admin.query<RowDataPacket[]>("SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'");
      if (Number(r!.n) > 0) return;
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error('the application session never waited for the lock');
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
      await waitForLockWait();
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
