import type { Connection, RowDataPacket } from 'mysql2/promise';
import { expect, it } from 'vitest';
import { auditHistory } from '../../src/checker/index.ts';
import { Replicator } from '../../src/replicator/replicator.ts';
import { fitConflictReason, insertConflictSql } from '../../src/sql/dml.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { binlogHeads, converged, eventually, expectCleanAudit, setupNodes, startReplicator, textRows } from '../helpers/replication.ts';

// Two nodes give one secondary UNIQUE value to different rows while nothing replicates (the
// application's unique check passes on each node alone). Last-write-wins across the UNIQUE key: the
// newer row keeps the value on every node, the older one ends deleted at its own version, in
// whichever order the rows meet; where versions cannot order the rows one way, the direction stops.
describeEachEngine('secondary UNIQUE clashes across nodes', 2, (ctx) => {
  const urls = () => ctx.servers.map((s) => s.url);
  const pause = () => new Promise((r) => setTimeout(r, 5));

  it('the newer row keeps the UNIQUE value on both nodes, the older is removed at its version, and the audit accepts it', async () => {
    const ddl = ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, u VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL, c VARCHAR(20) NOT NULL, UNIQUE KEY uq (u))'];
    const conns = await setupNodes(urls(), 'uclash', ddl, ['t']);
    // The initial copy done first: the clashes below meet the streaming path.
    await (await startReplicator(urls())).stop();
    const from = await binlogHeads(urls());
    const [a, b] = conns as [Connection, Connection];
    // Versions rise in this order: 1 (A), 4 (B), 2 (B), 3 (A). 'X' and 'x' are one value under _ci.
    await a.query("INSERT INTO uclash.t (id, u, c) VALUES (1, 'x', 'from A')");
    await pause();
    await b.query("INSERT INTO uclash.t (id, u, c) VALUES (4, 'Y', 'from B')");
    await pause();
    await b.query("INSERT INTO uclash.t (id, u, c) VALUES (2, 'X', 'from B')");
    await pause();
    await a.query("INSERT INTO uclash.t (id, u, c) VALUES (3, 'y', 'from A')");
    const [[v1], [v4]] = await Promise.all([
      a.query<RowDataPacket[]>('SELECT CAST(_lww_ts AS CHAR) AS v FROM uclash.t WHERE id = 1').then(([r]) => r.map((x) => String(x.v))),
      b.query<RowDataPacket[]>('SELECT CAST(_lww_ts AS CHAR) AS v FROM uclash.t WHERE id = 4').then(([r]) => r.map((x) => String(x.v))),
    ]);
    const rep = await startReplicator(urls());
    try {
      await converged(conns, 'uclash', 't');
      const status = await rep.status();
      expect(status.directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
      for (const c of conns) {
        expect(await textRows(c, 'SELECT id, u, c FROM uclash.t ORDER BY id')).toEqual(['2|X|from B', '3|y|from A']);
        // The losers are deleted at their own versions, as if their own nodes had deleted them (with
        // parallel apply a loser's tombstone may commit just after the rows converged).
        const tombs = await eventually('both tombstones', () => textRows(c, 'SELECT id, CAST(_lww_ts AS CHAR) FROM lww_meta.tomb__uclash__t ORDER BY id'), (t) => t.length >= 2, 10_000);
        expect(tombs).toEqual([`1|${v1}`, `4|${v4}`]);
        expect(await textRows(c, "SELECT COUNT(*) FROM lww_meta.conflicts WHERE table_name = 't' AND reason LIKE 'unique key clash: removed%'")).toEqual(['2']);
      }
      const counted = await rep.status();
      const clashes = counted.directions.reduce((n, d) => n + Object.values(d.sink.tables).reduce((m, t) => m + t.uniqueClashes, 0), 0);
      expect(clashes).toBe(4);
    } finally {
      await rep.stop();
    }
    const report = await auditHistory({ nodes: urls(), from, tables: ['uclash.t'] });
    expectCleanAudit(report);
    expect(report.uniqueClashRemovals).toBe(4);
    for (const c of conns) await c.end();
  });

  it('a row removed by a clash after an older delete of it in the same batch is judged by the right tombstone', async () => {
    const ddl = ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, u CHAR(4) NOT NULL, c CHAR(8) NOT NULL, UNIQUE KEY uq (u))'];
    const conns = await setupNodes(urls(), 'uclash3', ddl, ['t']);
    const [a, b] = conns as [Connection, Connection];
    let rep = await startReplicator(urls());
    await a.query("INSERT INTO uclash3.t (id, u, c) VALUES (1, 'x', 'first')");
    await converged(conns, 'uclash3', 't');
    await rep.stop();
    const from = await binlogHeads(urls());
    // B deletes row 1 (older), A updates it (newer), B gives 'x' to row 5 (newest): A's sink writes
    // row 1's tombstone at B's delete version (the row is newer), then removes the row for row 5.
    await b.query('DELETE FROM uclash3.t WHERE id = 1');
    await pause();
    await a.query("UPDATE uclash3.t SET c = 'updated' WHERE id = 1");
    await pause();
    await b.query("INSERT INTO uclash3.t (id, u, c) VALUES (5, 'x', 'newest')");
    rep = await startReplicator(urls());
    try {
      await converged(conns, 'uclash3', 't');
      for (const c of conns) expect(await textRows(c, 'SELECT id, u, c FROM uclash3.t')).toEqual(['5|x|newest']);
    } finally {
      await rep.stop();
    }
    const report = await auditHistory({ nodes: urls(), from, tables: ['uclash3.t'] });
    expectCleanAudit(report);
    expect(report.uniqueClashRemovals).toBe(2);
    for (const c of conns) await c.end();
  });

  it('a row newer than one holder of its UNIQUE values and older than another stops the direction, naming both', async () => {
    const ddl = ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, a CHAR(4) NOT NULL, b CHAR(4) NOT NULL, UNIQUE KEY ua (a), UNIQUE KEY ub (b))'];
    const conns = await setupNodes(urls(), 'uclash2', ddl, ['t']);
    await (await startReplicator(urls())).stop();
    const [a, b] = conns as [Connection, Connection];
    await a.query("INSERT INTO uclash2.t (id, a, b) VALUES (1, 'a', 'p')");
    await pause();
    await b.query("INSERT INTO uclash2.t (id, a, b) VALUES (2, 'a', 'q')");
    await pause();
    await a.query("INSERT INTO uclash2.t (id, a, b) VALUES (3, 'c', 'q')");
    const rep = new Replicator({ nodes: urls(), restartDelayMs: 200, sink: { batch: { maxDelayMs: 5 } } });
    await rep.start();
    // It never streams in both directions: the direction into A fails.
    await rep.whenStreaming().catch(() => undefined);
    try {
      // Row 2 reaches A, where row 1 (older) holds 'a' and row 3 (newer) holds 'q'.
      const failed = await eventually(
        'the direction into A to fail',
        async () => (await rep.status()).directions.find((d) => d.state === 'failed'),
        (d) => d !== undefined,
      );
      expect(failed!.lastErrorKind).toBe('permanent');
      expect(failed!.lastError).toMatch(/uclash2\.t: .*UNIQUE.*row \(id="?2"?\).*newer than some rows.*\(id=1\).*\(id=3\)/);
      // Nothing of it was written: A still holds its own rows only.
      expect(await textRows(a, 'SELECT id FROM uclash2.t ORDER BY id')).toEqual(['1', '3']);
    } finally {
      await rep.stop();
    }
    for (const c of conns) await c.end();
  });

  // Reasons name schemas, tables and foreign keys (64 characters each at most): a follow-up's can pass the
  // log's VARCHAR(255), which a strict-mode server refuses, failing the sink's transaction on every retry.
  it('a conflict-log reason longer than the column is stored cut to it, and only so', async () => {
    const conns = await setupNodes(urls(), 'ureason', ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY)'], ['t']);
    const long = `foreign key cascade: removed by this node as its own delete (version 1) before the delete of its parent ${'ü'.repeat(64)}.${'😀'.repeat(64)} (${'x'.repeat(64)})`;
    const insert = (c: Connection, reason: string) => c.query(insertConflictSql('lww_meta'), ['node-1', 'ureason', 't', reason, '1', '{}']);
    for (const c of conns) {
      await expect(insert(c, long)).rejects.toThrow(/too long/i);
      await insert(c, fitConflictReason(long));
      expect(await textRows(c, "SELECT reason FROM lww_meta.conflicts WHERE schema_name = 'ureason'")).toEqual([fitConflictReason(long)]);
      await c.end();
    }
  });
});
