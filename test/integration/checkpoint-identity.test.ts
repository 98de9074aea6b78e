// Checkpoints identify their source server: a resume against another server, or after the source's
// binary log was reset, stops replicate (exit 4, both server ids and the remedy named) with nothing
// applied to the peer; following the remedy converges again.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { install } from '../../src/install/install.ts';
import { resetCheckpointSqlText } from '../../src/sql/checkpoint.ts';
import { type CliProcess, spawnCli } from '../helpers/cli-process.ts';
import { freshDatabase } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, setupNodes, startReplicator } from '../helpers/replication.ts';

const DDL = ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL)'];

async function exitOf(p: CliProcess): Promise<{ code: number | null; output: string }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), 60_000);
  });
  const code = await Promise.race([p.exited, timeout]);
  clearTimeout(timer);
  if (code === 'timeout') {
    p.child.kill('SIGKILL');
    throw new Error(`replicate did not exit within 60 s; output:\n${p.output()}`);
  }
  return { code, output: p.output() };
}

const replicate = (nodes: string[]) =>
  spawnCli(['replicate', ...nodes.flatMap((n) => ['--node', n]), '--progress-interval', '0', '--start-timeout', '5', '--gc-interval', '0']);

async function ids(c: Connection, db: string): Promise<number[]> {
  const [rows] = await c.query<RowDataPacket[]>(`SELECT id FROM ${db}.t ORDER BY id`);
  return rows.map((r) => Number(r.id));
}

async function uuidOf(c: Connection, engine: string): Promise<string> {
  const [[r]] = await c.query<RowDataPacket[]>(engine === 'mysql' ? 'SELECT @@server_uuid AS u' : "SELECT CONCAT('server_id:', @@server_id) AS u");
  return String(r!.u);
}

describeEachEngine('checkpoints identify the source server', 3, (ctx) => {
  it('a resume against another server is refused, naming both servers', async () => {
    const urls = ctx.servers.map((s) => s.url);
    const conns = await setupNodes([urls[0]!, urls[1]!], 'ident', DDL, ['t']);
    const other = await connect(urls[2]!);
    try {
      const r = await startReplicator([urls[0]!, urls[1]!], { gc: false });
      await conns[0]!.query('INSERT INTO ident.t (id, v) VALUES (1, 1), (2, 2)');
      await converged(conns, 'ident', 't');
      await r.stop();
      const [[cp]] = await conns[1]!.query<RowDataPacket[]>("SELECT source_uuid FROM lww_meta.checkpoints WHERE source_id = 'node-1'");
      expect(cp!.source_uuid).toBe(await uuidOf(conns[0]!, ctx.engine));

      // The URL of node 1 now points at another server, installed with the same node id.
      await other.query('DROP DATABASE IF EXISTS lww_meta');
      await freshDatabase(other, 'ident', DDL);
      await install({ url: urls[2]!, nodeId: 1, tables: ['ident.t'] });
      await other.query('INSERT INTO ident.t (id, v) VALUES (3, 3)');
      const run = await exitOf(replicate([urls[2]!, urls[1]!]));
      expect(run.code).toBe(4);
      expect(run.output).toMatch(/n1→n2 stopped \(checkpoint belongs to another server or binlog history\)/);
      expect(run.output).toContain(await uuidOf(conns[0]!, ctx.engine));
      expect(run.output).toContain(await uuidOf(other, ctx.engine));
      expect(run.output).toMatch(/DELETE FROM `lww_meta`.`checkpoints`/);
      expect(await ids(conns[1]!, 'ident')).toEqual([1, 2]);
    } finally {
      await other.end();
      for (const c of conns) await c.end();
    }
  });

  it('a resume after the source binlog was reset is refused; the named remedy converges again', async () => {
    const urls = [ctx.servers[0]!.url, ctx.servers[1]!.url];
    const conns = await setupNodes(urls, 'reset', DDL, ['t']);
    const [a, b] = conns as [Connection, Connection];
    try {
      let r = await startReplicator(urls, { gc: false });
      await a.query('INSERT INTO reset.t (id, v) VALUES (1, 1)');
      await b.query('INSERT INTO reset.t (id, v) VALUES (2, 2)');
      await converged(conns, 'reset', 't');
      await r.stop();

      await a.query(ctx.engine === 'mysql' ? 'RESET BINARY LOGS AND GTIDS' : 'RESET MASTER');
      await a.query('INSERT INTO reset.t (id, v) VALUES (3, 3)');
      const run = await exitOf(replicate(urls));
      expect(run.code).toBe(4);
      expect(run.output).toMatch(/n1→n2 stopped \(checkpoint belongs to another server or binlog history\)/);
      expect(run.output).toMatch(/was reset since the checkpoint|past the binlog head/);
      expect(run.output).toMatch(/RESET BINARY LOGS AND GTIDS \/ RESET MASTER/);
      expect(await ids(b, 'reset')).toEqual([1, 2]);

      // The remedy the message names: forget the checkpoint on the target; the next start re-seeds.
      await b.query(resetCheckpointSqlText('lww_meta', 'node-1'));
      r = await startReplicator(urls, { gc: false });
      try {
        const state = await converged(conns, 'reset', 't');
        expect(JSON.parse(state).map((row: { id: number }) => row.id)).toEqual([1, 2, 3]);
        await a.query('UPDATE reset.t SET v = 30 WHERE id = 3');
        await converged(conns, 'reset', 't');
        const [[row]] = await b.query<RowDataPacket[]>('SELECT v FROM reset.t WHERE id = 3');
        expect(row!.v).toBe(30);
      } finally {
        await r.stop();
      }
    } finally {
      for (const c of conns) await c.end();
    }
  });
});
