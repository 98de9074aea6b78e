import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterEach, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { spawnCli, type CliProcess } from '../helpers/cli-process.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, eventually, setupNodes } from '../helpers/replication.ts';

const DDL = ['CREATE TABLE {{db}}.events (id INT NOT NULL PRIMARY KEY, node VARCHAR(4) NOT NULL, n INT NOT NULL)'];

describeEachEngine('replicator killed with SIGKILL mid-stream', 2, (ctx) => {
  let procs: CliProcess[] = [];
  afterEach(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    procs = [];
  });

  it('restarts from the checkpoints: 10,000 transactions converge, none lost, none applied twice', async () => {
    const urls = ctx.servers.map((s) => s.url);
    const conns = await setupNodes(urls, 'crash', DDL, ['events']);
    const replicate = () => {
      const p = spawnCli(['replicate', '--node', urls[0]!, '--node', urls[1]!, '--progress-interval', '0', '--batch-rows', '64']);
      procs.push(p);
      return p;
    };
    let proc = replicate();
    await conns[0]!.query("INSERT INTO crash.events (id, node, n) VALUES (0, 'm', 0)");
    await eventually('the replicator to stream', async () => (await conns[1]!.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM crash.events'))[0][0]!.n, (n) => Number(n) === 1, 60_000);

    // 2 nodes × 4 writers × 1,250 single-row transactions, with updates of earlier rows mixed in.
    let written = 0;
    const writer = async (node: number, w: number) => {
      const c: Connection = await connect(urls[node]!);
      for (let i = 0; i < 1250; i++) {
        const id = 1 + node * 100_000 + w * 10_000 + i;
        if (i % 5 === 4) await c.query('UPDATE crash.events SET n = n + 1 WHERE id = ?', [id - 1]);
        else await c.query('INSERT INTO crash.events (id, node, n) VALUES (?, ?, ?)', [id, `n${node}`, i]);
        written++;
      }
      await c.end();
    };
    const writers = Promise.all([0, 1].flatMap((node) => [0, 1, 2, 3].map((w) => writer(node, w))));
    await eventually('half of the stream', async () => written, (n) => n >= 5000, 120_000);
    proc.child.kill('SIGKILL');
    await proc.exited;
    await new Promise((r) => setTimeout(r, 500));
    proc = replicate();
    await writers;
    const state = JSON.parse(await converged(conns, 'crash', 'events', 120_000)) as Array<{ id: number; n: number }>;
    const expected = 1 + 2 * 4 * 1000; // inserts; every fifth statement updated the row before it
    expect(state.length).toBe(expected);
    expect(state.filter((r) => r.id !== 0 && r.id % 10_000 !== 0 && (r.id % 10_000) % 5 === 4).every((r) => r.n === ((r.id % 10_000) - 1) + 1)).toBe(true);
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    for (const c of conns) await c.end();
  });
});
