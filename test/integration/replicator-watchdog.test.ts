// The progress watchdog on real servers: a direction whose apply is blocked by a lock another
// session holds on the target stops loudly, naming what it waited on (restarted once, then failed);
// an idle source, however long, never trips it.
import type { Connection } from 'mysql2/promise';
import { afterEach, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import type { Replicator } from '../../src/replicator/replicator.ts';
import type { Logger } from '../../src/writer/options.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, setupNodes, startReplicator } from '../helpers/replication.ts';

const DDL = ['CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL)'];
const STALL_MS = 2500;

function recordingLogger(): Logger & { lines: Array<{ level: string; msg: string }> } {
  const lines: Array<{ level: string; msg: string }> = [];
  const at = (level: string) => (msg: string) => {
    lines.push({ level, msg });
  };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

describeEachEngine('the progress watchdog', 2, (ctx) => {
  let replicator: Replicator | undefined;
  let conns: Connection[] = [];
  afterEach(async () => {
    await replicator?.stop();
    replicator = undefined;
    for (const c of conns) c.destroy();
    conns = [];
  });

  it('an idle source never trips it; a lock held on the target row stops the direction loudly with the diagnosis', async () => {
    const urls = ctx.servers.map((s) => s.url);
    conns = await setupNodes(urls, 'stall', DDL, ['t']);
    const a = conns[0]!;
    const log = recordingLogger();
    replicator = await startReplicator(urls, {
      stallTimeoutMs: STALL_MS,
      applyWorkers: 1,
      logger: log,
      // The sink's own lock wait outlasts the watchdog: what trips is the watchdog, not a lock-wait error.
      sink: { batch: { maxDelayMs: 5 }, timeouts: { lockWaitSeconds: 120 } },
      initialCopy: false,
    });
    await a.query('INSERT INTO stall.t (id, v) VALUES (1, 1)');
    await converged(conns, 'stall', 't');

    // Idle for four watchdog periods: keepalives and the sinks' checkpoint writes keep both binlogs moving.
    await new Promise((r) => setTimeout(r, 4 * STALL_MS + 1000));
    const idle = await replicator.status();
    for (const d of idle.directions) {
      expect(d.stalls, `${d.name} while idle`).toBe(0);
      expect(d.restarts, `${d.name} while idle`).toBe(0);
      expect(d.state).toBe('streaming');
    }
    expect(log.lines.filter((l) => /stalled/.test(l.msg))).toEqual([]);

    // Another session on B holds the row's lock; A's update of it then blocks n1→n2's apply.
    const holder = await connect(urls[1]!);
    conns.push(holder);
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM stall.t WHERE id = 1 FOR UPDATE');
    await a.query('UPDATE stall.t SET v = 2 WHERE id = 1');
    const t0 = Date.now();
    const failure = await replicator.wait().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    const elapsed = Date.now() - t0;
    expect(failure, 'the direction must fail').toBeInstanceOf(Error);
    const message = failure!.message;
    // Restarted once (first stall), failed on the second with no commit in between.
    expect(message).toMatch(/^replication n1→n2 stopped \(stalled again without progress\): n1→n2 stalled: no progress for/);
    for (const part of ['state streaming', 'read position ', 'applied checkpoint ', 'source binlog head ', 'sink pending 1 transactions', 'stalled again at the same checkpoint']) {
      expect(message).toContain(part);
    }
    // What it waited on: the apply statement, its target session in a lock wait, and who holds the lock.
    expect(message).toMatch(/waiting on: apply worker 0 statement \w+ stall\.t in flight for \d+\.\d s \(target connection \d+\)/);
    expect(message).toMatch(/InnoDB transaction LOCK WAIT/);
    // Who holds it: from the lock-wait tables (MariaDB), or as the transaction holding row locks (MySQL, performance_schema off).
    expect(message).toMatch(new RegExp(`held by connection ${holder.threadId} |connection ${holder.threadId} holds \\d+ row locks in a transaction open \\d+ s \\(RUNNING, idle in its transaction\\)`));
    expect(elapsed).toBeLessThan(6 * STALL_MS + 10_000);

    const status = await replicator.status();
    const stuck = status.directions.find((d) => d.name === 'n1→n2')!;
    expect(stuck).toMatchObject({ state: 'failed', stalls: 2, restarts: 1, lastErrorKind: 'permanent', lastErrorCause: 'stalled again without progress' });
    // The first stall was logged with its diagnosis before the restart.
    const logged = log.lines.filter((l) => l.level === 'error' && /^n1→n2 stalled/.test(l.msg));
    expect(logged.length).toBe(2);
    expect(log.lines.some((l) => l.level === 'warn' && /n1→n2: stalled \(no progress\); restarting from the checkpoint/.test(l.msg))).toBe(true);
    // The other direction, idle, is untouched.
    expect(status.directions.find((d) => d.name === 'n2→n1')).toMatchObject({ state: 'streaming', stalls: 0, restarts: 0 });
    await holder.query('ROLLBACK');
  });
});
