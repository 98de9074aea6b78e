import type { Connection, RowDataPacket } from 'mysql2/promise';
import { expect, it } from 'vitest';
import { auditHistory } from '../../src/checker/index.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { binlogHeads, converged, setupNodes, startReplicator, textRows } from '../helpers/replication.ts';

// ON DELETE SET NULL between replicated tables, with writes on both nodes: the parent's delete nulls
// the children itself (its BEFORE DELETE trigger, so the change gets a version and replicates), and a
// child row newer than its parent's delete lands with the reference cleared.
describeEachEngine('ON DELETE SET NULL across nodes', 2, (ctx) => {
  const urls = () => ctx.servers.map((s) => s.url);
  const pause = () => new Promise((r) => setTimeout(r, 5));
  const DDL = [
    'CREATE TABLE {{db}}.p (id INT NOT NULL PRIMARY KEY, name CHAR(8) NOT NULL) ENGINE=InnoDB',
    'CREATE TABLE {{db}}.c (id INT NOT NULL PRIMARY KEY, pid INT NULL, note CHAR(8) NOT NULL, FOREIGN KEY (pid) REFERENCES {{db}}.p (id) ON DELETE SET NULL) ENGINE=InnoDB',
  ];

  it('a parent deleted on one node while the other keeps it newer: the children are nulled on both, with a version', async () => {
    const conns = await setupNodes(urls(), 'fknull2', DDL, ['p', 'c']);
    const [a, b] = conns as [Connection, Connection];
    let rep = await startReplicator(urls());
    await a.query("INSERT INTO fknull2.p (id, name) VALUES (1, 'parent')");
    await a.query("INSERT INTO fknull2.c (id, pid, note) VALUES (10, 1, 'child')");
    await converged(conns, 'fknull2', 'c');
    await rep.stop();
    const from = await binlogHeads(urls());
    // B deletes the parent (its children lose the reference); later A updates the parent, which wins.
    await b.query('DELETE FROM fknull2.p WHERE id = 1');
    await pause();
    await a.query("UPDATE fknull2.p SET name = 'renamed' WHERE id = 1");
    const [[child]] = await b.query<RowDataPacket[]>('SELECT pid, CAST(_lww_ts AS CHAR) AS v FROM fknull2.c WHERE id = 10');
    expect(child!.pid).toBeNull();
    rep = await startReplicator(urls());
    try {
      await converged(conns, 'fknull2', 'p');
      await converged(conns, 'fknull2', 'c');
      for (const c of conns) {
        expect(await textRows(c, 'SELECT id, name FROM fknull2.p')).toEqual(['1|renamed']);
        expect(await textRows(c, 'SELECT id, COALESCE(pid, "null"), CAST(_lww_ts AS CHAR) FROM fknull2.c')).toEqual([`10|null|${child!.v}`]);
      }
    } finally {
      await rep.stop();
    }
    const report = await auditHistory({ nodes: urls(), from, tables: ['fknull2.p', 'fknull2.c'] });
    expect(report.counts, JSON.stringify(report.findings, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).toEqual({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 });
    for (const c of conns) await c.end();
  });

  it('a child row newer than the delete of its ON DELETE SET NULL parent lands with the reference cleared on both nodes', async () => {
    const conns = await setupNodes(urls(), 'fknull', DDL, ['p', 'c']);
    const [a, b] = conns as [Connection, Connection];
    let rep = await startReplicator(urls());
    await a.query("INSERT INTO fknull.p (id, name) VALUES (1, 'parent')");
    await a.query("INSERT INTO fknull.c (id, pid, note) VALUES (10, NULL, 'child')");
    await converged(conns, 'fknull', 'c');
    await rep.stop();
    const from = await binlogHeads(urls());
    // A deletes the parent; later, B points the child at it (B still holds the parent).
    await a.query('DELETE FROM fknull.p WHERE id = 1');
    await pause();
    await b.query("UPDATE fknull.c SET pid = 1, note = 'adopted' WHERE id = 10");
    rep = await startReplicator(urls());
    try {
      await converged(conns, 'fknull', 'c');
      await converged(conns, 'fknull', 'p');
      expect((await rep.status()).directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
      for (const c of conns) {
        expect(await textRows(c, 'SELECT id, COALESCE(pid, "null"), note FROM fknull.c')).toEqual(['10|null|adopted']);
        expect(await textRows(c, 'SELECT id FROM fknull.p')).toEqual([]);
      }
    } finally {
      await rep.stop();
    }
    const report = await auditHistory({ nodes: urls(), from, tables: ['fknull.p', 'fknull.c'] });
    expect(report.counts, JSON.stringify(report.findings, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).toEqual({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 });
    expect(report.foreignKeySetNull).toBe(1);
    for (const c of conns) await c.end();
  });
});

// A parent key under a case-insensitive collation, written in other letters on two nodes: LWW
// respells the older node's parent key to the newest spelling, a key update that is equal under the
// collation, so every child reference still matches; ON UPDATE RESTRICT must not refuse it.
describeEachEngine('a collated parent key respelled under ON UPDATE RESTRICT', 2, (ctx) => {
  const urls = () => ctx.servers.map((s) => s.url);
  const pause = () => new Promise((r) => setTimeout(r, 5));
  const ddl = (onUpdate: string) => [
    'CREATE TABLE {{db}}.p (id VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, name CHAR(8) NOT NULL) ENGINE=InnoDB',
    `CREATE TABLE {{db}}.c (id INT NOT NULL PRIMARY KEY, pid VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, FOREIGN KEY (pid) REFERENCES {{db}}.p (id) ON DELETE CASCADE ON UPDATE ${onUpdate}) ENGINE=InnoDB`,
  ];

  for (const onUpdate of ['RESTRICT', 'NO ACTION', 'CASCADE']) {
    it(`ON UPDATE ${onUpdate}: the newest spelling of the parent key lands on both nodes, the children keep theirs`, async () => {
      const db = `fkcase_${onUpdate.replace(' ', '').toLowerCase()}`;
      const conns = await setupNodes(urls(), db, ddl(onUpdate), ['p', 'c']);
      const [a, b] = conns as [Connection, Connection];
      await (await startReplicator(urls())).stop();
      const from = await binlogHeads(urls());
      // A writes the parent as 'abc' with a child; later B writes it as 'ABC' (newer, no child there).
      await a.query(`INSERT INTO ${db}.p (id, name) VALUES ('abc', 'a')`);
      await a.query(`INSERT INTO ${db}.c (id, pid) VALUES (10, 'abc')`);
      await pause();
      await b.query(`INSERT INTO ${db}.p (id, name) VALUES ('ABC', 'b')`);
      const rep = await startReplicator(urls());
      try {
        await converged(conns, db, 'p');
        await converged(conns, db, 'c');
        expect((await rep.status()).directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
        for (const c of conns) {
          expect(await textRows(c, `SELECT BINARY id, name FROM ${db}.p`)).toEqual(['ABC|b']);
          expect(await textRows(c, `SELECT id, BINARY pid FROM ${db}.c`)).toEqual(['10|abc']);
        }
      } finally {
        await rep.stop();
      }
      const report = await auditHistory({ nodes: urls(), from, tables: [`${db}.p`, `${db}.c`] });
      expect(report.counts, JSON.stringify(report.findings, (_k, v) => (typeof v === 'bigint' ? String(v) : v))).toEqual({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 });
      for (const c of conns) await c.end();
    });
  }
});
