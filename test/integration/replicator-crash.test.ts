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

  /** The apply_seq of every worker row of both directions' streams (node-1 on B, node-2 on A). */
  const workerSeqs = async (conns: Connection[]) => {
    const out: number[][] = [];
    for (const [i, c] of conns.entries()) {
      const [rows] = await c.query<RowDataPacket[]>('SELECT apply_seq FROM lww_meta.checkpoints WHERE source_id = ? ORDER BY worker', [`node-${2 - i}`]);
      out.push(rows.map((r) => Number(r.apply_seq)));
    }
    return out;
  };
  const spread = (seqs: number[][]) => seqs.some((s) => new Set(s).size > 1);
  /** Single-row updates of many keys on node A (rows whose fifth statement never touched them), so that A→B's workers get work. */
  const nudgeWorkers = async (c: Connection, attempt: number) => {
    for (let i = 0; i < 400; i += 5) {
      for (let w = 0; w < 4; w++) await c.query('UPDATE crash.events SET n = n + ? WHERE id = ?', [attempt * 1000, 1 + w * 10_000 + i]);
    }
  };

  for (const workers of [1, 8]) {
    it(`${workers} apply worker(s): restarts from the checkpoints, every transaction converges, none lost, none applied twice`, async () => {
      const urls = ctx.servers.map((s) => s.url);
      const conns = await setupNodes(urls, 'crash', DDL, ['events']);
      const replicate = () => {
        const p = spawnCli(['replicate', '--node', urls[0]!, '--node', urls[1]!, '--progress-interval', '0', '--batch-rows', '64', '--apply-workers', String(workers)]);
        procs.push(p);
        return p;
      };
      let proc = replicate();
      await conns[0]!.query("INSERT INTO crash.events (id, node, n) VALUES (0, 'm', 0)");
      await eventually('the replicator to stream', async () => (await conns[1]!.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM crash.events'))[0][0]!.n, (n) => Number(n) === 1, 60_000);

      // 2 nodes × 4 writers × 500 single-row transactions, with updates of earlier rows mixed in.
      const perWriter = 500;
      let written = 0;
      const writer = async (node: number, w: number) => {
        const c: Connection = await connect(urls[node]!);
        for (let i = 0; i < perWriter; i++) {
          const id = 1 + node * 100_000 + w * 10_000 + i;
          if (i % 5 === 4) await c.query('UPDATE crash.events SET n = n + 1 WHERE id = ?', [id - 1]);
          else await c.query('INSERT INTO crash.events (id, node, n) VALUES (?, ?, ?)', [id, `n${node}`, i]);
          written++;
        }
        await c.end();
      };
      const writers = Promise.all([0, 1].flatMap((node) => [0, 1, 2, 3].map((w) => writer(node, w))));
      await eventually('half of the stream', async () => written, (n) => n >= 4 * perWriter, 120_000);
      if (workers === 1) {
        proc.child.kill('SIGKILL');
        await proc.exited;
      } else {
        // Killed while its workers' checkpoints differ (a worker committed its share of a window
        // the others had not, or skipped idle windows); seen in the rows the dead process left.
        let left: number[][] = [];
        for (let attempt = 1; ; attempt++) {
          // A retry may start after the writers finished: then nothing would set the workers apart.
          // Updates of rows no assertion reads the value of (inserted, never updated by the writers) give them work.
          const nudge = attempt === 1 ? Promise.resolve() : nudgeWorkers(conns[0]!, attempt);
          await eventually('workers at different checkpoints', () => workerSeqs(conns), spread, 60_000);
          proc.child.kill('SIGKILL');
          await proc.exited;
          await nudge;
          left = await workerSeqs(conns);
          if (spread(left) || attempt === 10) break;
          proc = replicate();
        }
        expect(spread(left), JSON.stringify(left)).toBe(true);
        expect(left.every((s) => s.length === 8)).toBe(true);
      }
      await new Promise((r) => setTimeout(r, 500));
      proc = replicate();
      await writers;
      const state = JSON.parse(await converged(conns, 'crash', 'events', 120_000)) as Array<{ id: number; n: number }>;
      const expected = 1 + 2 * 4 * (perWriter * 4) / 5; // inserts; every fifth statement updated the row before it
      expect(state.length).toBe(expected);
      // Every row's value: n = i as inserted, i + 1 where the next statement updated it. Rows the
      // nudges may have changed (node A's rows with i % 5 === 0) are left out of the value check.
      const valued = state.filter((r) => r.id !== 0 && !(r.id < 100_000 && ((r.id % 10_000) - 1) % 5 === 0));
      const wrong = valued.filter((r) => {
        const i = (r.id % 10_000) - 1;
        return r.n !== (i % 5 === 3 ? i + 1 : i);
      });
      expect(wrong).toEqual([]);
      expect(valued.filter((r) => ((r.id % 10_000) - 1) % 5 === 3).length).toBe(2 * 4 * (perWriter / 5));
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toBe(0);
      for (const c of conns) await c.end();
    });
  }
});
