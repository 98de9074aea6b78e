import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { currentPosition } from '../../src/capture/source.ts';
import { connect } from '../../src/db/connection.ts';
import { install } from '../../src/install/install.ts';
import { nodeIdOf } from '../../src/model/version.ts';
import { inspectNodes, type Replicator } from '../../src/replicator/replicator.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, eventually, setupNodes, snapshot, startReplicator, textRows } from '../helpers/replication.ts';

const DDL = ['CREATE TABLE {{db}}.items (id INT NOT NULL PRIMARY KEY, v VARCHAR(40) NOT NULL, n INT NOT NULL DEFAULT 0)'];

describeEachEngine('bidirectional replication', 2, (ctx) => {
  let urls: string[];
  let a: Connection;
  let b: Connection;
  let replicator: Replicator | null = null;

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
  });
  beforeEach(async () => {
    [a, b] = (await setupNodes(urls, 'app', DDL, ['items'])) as [Connection, Connection];
  });
  afterEach(async () => {
    await replicator?.stop();
    replicator = null;
    await a?.end();
    await b?.end();
  });
  afterAll(() => undefined);

  const row = async (c: Connection, id: number) => {
    const [r] = await c.query<RowDataPacket[]>('SELECT id, v, _lww_ts FROM app.items WHERE id = ?', [id]);
    return r[0] ? `${r[0].v}@${r[0]._lww_ts}` : 'absent';
  };

  it('a write on one node appears on the other exactly once and is never sent back', async () => {
    replicator = await startReplicator(urls);
    const startA = await currentPosition(a);
    const startB = await currentPosition(b);
    await a.query("INSERT INTO app.items (id, v) VALUES (1, 'from-a')");
    await b.query("INSERT INTO app.items (id, v) VALUES (2, 'from-b')");
    await converged([a, b], 'app', 'items');
    expect(await row(b, 1)).toBe(await row(a, 1));
    await new Promise((r) => setTimeout(r, 1500));
    // Each node's binlog holds exactly two row events for the table: its own write and the peer's, applied once.
    for (const [conn, start] of [
      [a, startA],
      [b, startB],
    ] as const) {
      const [file, pos] = [start.slice(0, start.lastIndexOf(':')), Number(start.slice(start.lastIndexOf(':') + 1))];
      const [events] = await conn.query<RowDataPacket[]>(`SHOW BINLOG EVENTS IN '${file}' FROM ${pos}`);
      const maps = events.filter((e) => /Table_map/i.test(String(e.Event_type)) && /`?app`?\.`?items`?(\W|$)/.test(String(e.Info)));
      expect(maps.length).toBe(2);
    }
    const status = await replicator.status();
    for (const d of status.directions) {
      expect(d.sink.totals.inserted).toBe(1);
      expect(d.captured.transactions).toBe(1);
      expect(d.captured.dropped).toBeGreaterThanOrEqual(1);
    }
  });

  it('concurrent updates of a key converge to the higher version; a later local write wins even with a clock 5 s behind', async () => {
    await a.query("INSERT INTO app.items (id, v) VALUES (1, 'base')");
    replicator = await startReplicator(urls);
    await converged([a, b], 'app', 'items');
    await replicator.stop();
    await a.query("UPDATE app.items SET v = 'a-wins?' WHERE id = 1");
    await b.query("UPDATE app.items SET v = 'b-later' WHERE id = 1");
    replicator = await startReplicator(urls);
    const state = await converged([a, b], 'app', 'items');
    expect(JSON.parse(state)[0].v).toBe('b-later');
    // A writer whose clock is 5 s behind still beats the replicated version it has seen.
    await a.query('SET TIMESTAMP = UNIX_TIMESTAMP(NOW(6)) - 5');
    await a.query("UPDATE app.items SET v = 'skewed-but-later' WHERE id = 1");
    await a.query('SET TIMESTAMP = DEFAULT');
    const after = JSON.parse(await converged([a, b], 'app', 'items'));
    expect(after[0].v).toBe('skewed-but-later');
    expect(nodeIdOf(BigInt(after[0]._lww_ts))).toBe(1);
  });

  it('a delete on one side and a concurrent update on the other converge, in both orders', async () => {
    await a.query("INSERT INTO app.items (id, v) VALUES (1, 'one'), (2, 'two')");
    replicator = await startReplicator(urls);
    await converged([a, b], 'app', 'items');
    await replicator.stop();
    // Key 1: delete first, update later (update wins). Key 2: update first, delete later (delete wins).
    await a.query('DELETE FROM app.items WHERE id = 1');
    await new Promise((r) => setTimeout(r, 5));
    await b.query("UPDATE app.items SET v = 'updated-after-delete' WHERE id = 1");
    await b.query("UPDATE app.items SET v = 'updated-before-delete' WHERE id = 2");
    await new Promise((r) => setTimeout(r, 5));
    await a.query('DELETE FROM app.items WHERE id = 2');
    replicator = await startReplicator(urls);
    const state = JSON.parse(await converged([a, b], 'app', 'items'));
    expect(state.map((r: { id: number; v: string }) => `${r.id}:${r.v}`)).toEqual(['1:updated-after-delete']);
    const tomb = async (c: Connection) => (await c.query<RowDataPacket[]>('SELECT id, _lww_ts FROM lww_meta.tomb__app__items ORDER BY id'))[0];
    await eventually('tombstones to agree', async () => [JSON.stringify(await tomb(a)), JSON.stringify(await tomb(b))], ([x, y]) => x === y);
  });

  it('a primary-key change on one side and an update of the old key on the other converge', async () => {
    await a.query("INSERT INTO app.items (id, v) VALUES (1, 'orig')");
    replicator = await startReplicator(urls);
    await converged([a, b], 'app', 'items');
    await replicator.stop();
    await b.query("UPDATE app.items SET v = 'b-edit' WHERE id = 1");
    await new Promise((r) => setTimeout(r, 5));
    await a.query('UPDATE app.items SET id = 10 WHERE id = 1');
    replicator = await startReplicator(urls);
    const state = JSON.parse(await converged([a, b], 'app', 'items'));
    expect(state.map((r: { id: number; v: string }) => `${r.id}:${r.v}`)).toEqual(['10:orig']);
  });

  it('a server restart while replicating: the replicator reconnects and converges', async () => {
    replicator = await startReplicator(urls);
    await a.query("INSERT INTO app.items (id, v) VALUES (1, 'before-restart')");
    await converged([a, b], 'app', 'items');
    await b.end();
    await ctx.servers[1]!.halt();
    await a.query("INSERT INTO app.items (id, v) VALUES (2, 'while-b-down')");
    await ctx.servers[1]!.start();
    b = await connect(urls[1]!);
    await b.query("INSERT INTO app.items (id, v) VALUES (3, 'after-restart')");
    const state = JSON.parse(await converged([a, b], 'app', 'items', 60_000));
    expect(state.map((r: { id: number }) => r.id)).toEqual([1, 2, 3]);
  });

  it('a table installed while replicating joins every direction within seconds: its rows from before and after reach the other node', async () => {
    replicator = await startReplicator(urls, { registryIntervalMs: 300 });
    for (const c of [a, b]) await c.query('CREATE TABLE app.later (id INT PRIMARY KEY, v INT)');
    await a.query('INSERT INTO app.later (id, v) VALUES (1, 1)');
    for (const [i, url] of urls.entries()) await install({ url, nodeId: i + 1, tables: ['app.later'] });
    await a.query('INSERT INTO app.later (id, v) VALUES (2, 2)');
    await b.query('INSERT INTO app.later (id, v) VALUES (3, 3)');
    const state = JSON.parse(await converged([a, b], 'app', 'later'));
    expect(state.map((r: { id: number; v: number }) => `${r.id}:${r.v}`)).toEqual(['1:1', '2:2', '3:3']);
    await a.query('UPDATE app.later SET v = 20 WHERE id = 2');
    expect(JSON.parse(await converged([a, b], 'app', 'later')).find((r: { id: number }) => r.id === 2).v).toBe(20);
  });

  it('a change naming a column the target lacks is held back with a clear error until the DDL reaches the target', async () => {
    replicator = await startReplicator(urls);
    await a.query('ALTER TABLE app.items ADD COLUMN note VARCHAR(20) NULL');
    await a.query("INSERT INTO app.items (id, v, note) VALUES (1, 'with-note', 'hello')");
    const stuck = await eventually(
      'the direction to report the missing column',
      async () => (await replicator!.status()).directions.find((d) => d.name === 'n1→n2')!.lastError ?? '',
      (e) => /note does not exist in app.items/.test(e),
    );
    expect(stuck).toMatch(/column note does not exist in app\.items/);
    expect(await snapshot(b, 'app', 'items')).toBe('[]');
    await b.query('ALTER TABLE app.items ADD COLUMN note VARCHAR(20) NULL');
    const state = JSON.parse(await converged([a, b], 'app', 'items'));
    expect(state.map((r: { id: number; note: string }) => `${r.id}:${r.note}`)).toEqual(['1:hello']);
  });

  it('a row written before the source had a column reaches a node that has it: the column takes its default, and the nodes converge after the source ALTERs', async () => {
    replicator = await startReplicator(urls);
    await a.query("INSERT INTO app.items (id, v) VALUES (1, 'first')");
    await converged([a, b], 'app', 'items');
    await replicator.stop();
    replicator = null;
    // B first: a column with a default, a nullable one without, then a reorder; a local write of the new column.
    await b.query("ALTER TABLE app.items ADD COLUMN d INT NOT NULL DEFAULT 7, ADD COLUMN note VARCHAR(20) NULL");
    await b.query('ALTER TABLE app.items MODIFY v VARCHAR(40) NOT NULL AFTER note');
    await b.query("UPDATE app.items SET d = 99, note = 'b-note' WHERE id = 1");
    // A, still without them, writes newer: an update of that row and a new row.
    await new Promise((r) => setTimeout(r, 5));
    await a.query("UPDATE app.items SET v = 'from-a' WHERE id = 1");
    await a.query("INSERT INTO app.items (id, v) VALUES (2, 'new-on-a')");
    replicator = await startReplicator(urls);
    const onB = await eventually(
      "A's rows on B",
      () => textRows(b, 'SELECT id, v, d, note FROM app.items ORDER BY id'),
      (rows) => rows.length === 2 && rows[0]!.startsWith('1|from-a'),
    );
    // The source's own ALTER will give its rows d = 7 and note NULL: so does B, over B's own older write (d = 99).
    expect(onB).toEqual(['1|from-a|7|null', '2|new-on-a|7|null']);
    // B's older write waits on A for the column; then A's ALTER, and both converge.
    await a.query("ALTER TABLE app.items ADD COLUMN d INT NOT NULL DEFAULT 7, ADD COLUMN note VARCHAR(20) NULL");
    await a.query('ALTER TABLE app.items MODIFY v VARCHAR(40) NOT NULL AFTER note');
    const state = JSON.parse(await converged([a, b], 'app', 'items'));
    expect(state.map((r: { id: number; v: string; d: number; note: string | null }) => `${r.id}:${r.v}:${r.d}:${r.note}`)).toEqual(['1:from-a:7:null', '2:new-on-a:7:null']);
    await eventually('both directions streaming', async () => (await replicator!.status()).directions.map((d) => d.state).join(), (s) => s === 'streaming,streaming');
  });

  it('a row written before the source had a column stops loudly where that column is NOT NULL without a default', async () => {
    replicator = await startReplicator(urls);
    await b.query('ALTER TABLE app.items ADD COLUMN r INT NOT NULL');
    await a.query("INSERT INTO app.items (id, v) VALUES (3, 'no-default')");
    const failed = await eventually(
      'n1→n2 to stop',
      async () => (await replicator!.status()).directions.find((d) => d.name === 'n1→n2')!,
      (d) => d.state === 'failed',
    );
    expect(failed.lastError).toMatch(/app\.items, insert\): the source table had no column r .*NOT NULL without a default/);
    expect(await textRows(b, 'SELECT id FROM app.items')).toEqual([]);
  });

  it('refuses two nodes with the same node id and nodes that are not installed', async () => {
    await install({ url: urls[1]!, nodeId: 1, tables: ['app.items'] }).catch(() => undefined);
    await b.query('DROP DATABASE lww_meta');
    await expect(inspectNodes(urls, 'lww_meta')).rejects.toThrow(/is not installed/);
    await install({ url: urls[1]!, nodeId: 1, tables: ['app.items'] });
    await expect(inspectNodes(urls, 'lww_meta')).rejects.toThrow(/both have node id 1/);
    expect(await snapshot(b, 'app', 'items')).toBe('[]');
  });
});

describeEachEngine('replication between three nodes (full mesh)', 3, (ctx) => {
  it('a write on any node reaches the other two exactly once and all converge', async () => {
    const urls = ctx.servers.map((s) => s.url);
    const conns = await setupNodes(urls, 'mesh', DDL, ['items']);
    const replicator = await startReplicator(urls);
    try {
      expect(replicator.directions.map((d) => d.name).sort()).toEqual(['n1→n2', 'n1→n3', 'n2→n1', 'n2→n3', 'n3→n1', 'n3→n2']);
      for (const [i, c] of conns.entries()) await c.query('INSERT INTO mesh.items (id, v) VALUES (?, ?)', [i + 1, `from-n${i + 1}`]);
      await conns[2]!.query("UPDATE mesh.items SET v = 'edited-on-n3' WHERE id = 3");
      const state = JSON.parse(await converged(conns, 'mesh', 'items'));
      expect(state.map((r: { id: number; v: string }) => `${r.id}:${r.v}`)).toEqual(['1:from-n1', '2:from-n2', '3:edited-on-n3']);
      await new Promise((r) => setTimeout(r, 1000));
      const status = await replicator.status();
      // Each direction carries only its source's own writes: n3's two transactions to each peer, one for the others.
      for (const d of status.directions) expect(d.captured.transactions).toBe(d.name.startsWith('n3') ? 2 : 1);
    } finally {
      await replicator.stop();
      for (const c of conns) await c.end();
    }
  });
});
