// What `lww-sink replicate` refuses: each case ends in a non-zero exit within 60 s with the cause
// named (or, for a node that comes up late, in convergence). One server pair per engine, shared.
import type { RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { parseUrl } from '../../src/db/url.ts';
import { startServers, type RunningServer } from '../../src/servers/index.ts';
import { type CliProcess, spawnCli } from '../helpers/cli-process.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { serveOps } from '../../src/replicator/metrics.ts';
import { converged, eventually, setupNodes, startReplicator } from '../helpers/replication.ts';

const STOP_WITHIN_MS = 60_000;

/** Waits for the CLI to exit (failing after 60 s) and returns the code and the elapsed time. */
async function exitOf(p: CliProcess): Promise<{ code: number | null; ms: number; output: string }> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), STOP_WITHIN_MS);
  });
  const code = await Promise.race([p.exited, timeout]);
  clearTimeout(timer);
  if (code === 'timeout') {
    p.child.kill('SIGKILL');
    throw new Error(`replicate did not exit within ${STOP_WITHIN_MS} ms; output:\n${p.output()}`);
  }
  return { code, ms: Date.now() - started, output: p.output() };
}

function withUser(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  return u.toString();
}

describeEachEngine('replicate refuses loudly', 2, (ctx) => {
  let urls: string[] = [];
  let noBinlog: RunningServer | undefined;
  const replicate = (nodes: string[], extra: string[] = [], env: Record<string, string> = {}) =>
    spawnCli(['replicate', ...nodes.flatMap((n) => ['--node', n]), '--progress-interval', '0', '--start-timeout', '5', ...extra], env);

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    [noBinlog] = await startServers({ engine: ctx.engine, count: 1, extraArgs: ctx.engine === 'mysql' ? ['--disable-log-bin'] : ['--skip-log-bin'] });
  });
  afterAll(async () => {
    await noBinlog?.destroy();
  });

  it('an unknown failpoint, binlog_format=STATEMENT, log_bin=OFF, a missing privilege and tables altered after install each stop it with the cause', async () => {
    const conns = await setupNodes(urls, 'refuse', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL)'], ['t']);
    try {
      const flag = await exitOf(replicate(urls, ['--failpoints', 'noSuchPoint=return(true)']));
      expect(flag.code).toBe(2);
      expect(flag.output).toMatch(/unknown failpoint "noSuchPoint"/);
      const env = await exitOf(replicate(urls, [], { LWW_FAILPOINTS_ENABLE: '1', LWW_FAILPOINTS: 'noSuchPoint=return(true)' }));
      expect(env.code).not.toBe(0);
      expect(env.output).toMatch(/unknown failpoint "noSuchPoint"/);

      await conns[0]!.query("SET GLOBAL binlog_format = 'STATEMENT'");
      try {
        const statement = await exitOf(replicate(urls));
        expect(statement.code).toBe(4);
        expect(statement.output).toMatch(/binlog_format is STATEMENT, must be ROW/);
        expect(statement.output).toMatch(/n1→n2 stopped \(unsafe source setting\)/);
      } finally {
        await conns[0]!.query("SET GLOBAL binlog_format = 'ROW'");
      }

      // An application trigger added after install that does not skip the sink's sessions.
      await conns[1]!.query('CREATE TRIGGER refuse.app_touch BEFORE UPDATE ON refuse.t FOR EACH ROW SET NEW.v = NEW.v + 1');
      try {
        const trigger = await exitOf(replicate(urls));
        expect(trigger.code).not.toBe(0);
        expect(trigger.output).toMatch(/refuse\.t cannot be replicated: its trigger\(s\) app_touch \(BEFORE UPDATE\) would run again on every node[\s\S]*IF @lww_apply IS NULL/);
      } finally {
        await conns[1]!.query('DROP TRIGGER refuse.app_touch');
      }

      // A column altered after install to a charset capture cannot carry byte for byte (model/charsets.ts).
      await conns[1]!.query('ALTER TABLE refuse.t ADD COLUMN s VARCHAR(4) CHARACTER SET big5 NULL');
      try {
        const charset = await exitOf(replicate(urls));
        expect(charset.code).not.toBe(0);
        expect(charset.output).toMatch(/refuse\.t cannot be replicated: its column s is in character set big5/);
      } finally {
        await conns[1]!.query('ALTER TABLE refuse.t DROP COLUMN s');
      }

      // MariaDB: a table made system-versioned, or given an application-time period, after install (model/table.ts).
      if (ctx.engine === 'mariadb') {
        await conns[1]!.query('ALTER TABLE refuse.t ADD SYSTEM VERSIONING');
        try {
          const versioned = await exitOf(replicate(urls));
          expect(versioned.code).not.toBe(0);
          expect(versioned.output).toMatch(/refuse\.t cannot be replicated: it is system-versioned \(WITH SYSTEM VERSIONING\)[\s\S]*DROP SYSTEM VERSIONING/);
        } finally {
          await conns[1]!.query('ALTER TABLE refuse.t DROP SYSTEM VERSIONING');
        }
        await conns[0]!.query("ALTER TABLE refuse.t ADD COLUMN s DATE NOT NULL DEFAULT '2020-01-01', ADD COLUMN e DATE NOT NULL DEFAULT '2030-01-01', ADD PERIOD FOR p (s, e)");
        try {
          const period = await exitOf(replicate(urls));
          expect(period.code).not.toBe(0);
          expect(period.output).toMatch(/refuse\.t cannot be replicated: it has an application-time period \(PERIOD FOR p\)[\s\S]*FOR PORTION OF/);
        } finally {
          await conns[0]!.query('ALTER TABLE refuse.t DROP PERIOD FOR p, DROP COLUMN s, DROP COLUMN e');
        }
      }

      // A node without a binary log installs (install does not need one) but cannot be a source.
      const lone = await setupNodes([urls[0]!, noBinlog!.url], 'refuse', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL)'], ['t']);
      for (const c of lone) await c.end();
      const noLog = await exitOf(replicate([urls[0]!, noBinlog!.url]));
      expect(noLog.code).toBe(4);
      expect(noLog.output).toMatch(/log_bin is OFF, must be ON/);

      // An account that may read and write the tables but not read the binlog.
      for (const c of conns) {
        await c.query("DROP USER IF EXISTS 'limited'@'%'");
        await c.query("CREATE USER 'limited'@'%' IDENTIFIED BY 'pw'");
        await c.query("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `refuse`.* TO 'limited'@'%'");
        await c.query("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER ON `lww_meta`.* TO 'limited'@'%'");
        await c.query("GRANT REPLICATION CLIENT ON *.* TO 'limited'@'%'");
      }
      const limited = urls.map((u) => withUser(u, 'limited', 'pw'));
      expect(parseUrl(limited[0]!).user).toBe('limited');
      const denied = await exitOf(replicate(limited));
      expect(denied.code).toBe(4);
      expect(denied.output).toMatch(/stopped \(missing privilege\)/);
      expect(denied.output).toMatch(/REPLICATION SLAVE/);
      expect(denied.ms).toBeLessThan(STOP_WITHIN_MS);
    } finally {
      for (const c of conns) await c.end();
    }
  });

  it("a table not registered is not inspected at start, though its name differs from a registered one's only in letter case (Orders installed, orders with a Shift-JIS column was refused)", async () => {
    const conns = await setupNodes(urls, 'casejoin', ['CREATE TABLE {{db}}.Orders (id INT PRIMARY KEY, v INT NOT NULL)'], ['Orders']);
    try {
      for (const c of conns) await c.query('CREATE TABLE casejoin.orders (id INT PRIMARY KEY, s VARCHAR(10) CHARACTER SET sjis)');
      const rep = await startReplicator(urls);
      try {
        await conns[0]!.query('INSERT INTO casejoin.Orders (id, v) VALUES (1, 1)');
        await converged(conns, 'casejoin', 'Orders');
      } finally {
        await rep.stop();
      }
    } finally {
      for (const c of conns) await c.end();
    }
  });

  it('a purged binlog at the checkpoint stops it; a node that comes up late is waited for and converges', async () => {
    const conns = await setupNodes(urls, 'purge', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL)'], ['t']);
    try {
      // The second node is down when replicate starts: it retries, then converges once it is up.
      await ctx.servers[1]!.halt();
      const run = replicate(urls, ['--start-timeout', '60']);
      await eventually('a retry of the unreachable node', async () => run.output(), (o) => /cannot be reached yet/.test(o));
      await ctx.servers[1]!.start();
      const [a, b] = [conns[0]!, await connect(urls[1]!)];
      conns[1] = b;
      await a.query('INSERT INTO purge.t (id, v) VALUES (1, 1)');
      await converged([a, b], 'purge', 't');
      run.child.kill('SIGTERM');
      expect(await run.exited).toBe(0);

      // Changes the checkpoint still needs are purged from the source's binlog.
      await a.query('INSERT INTO purge.t (id, v) VALUES (2, 2)');
      const [[cp]] = await b.query<RowDataPacket[]>("SELECT position FROM lww_meta.checkpoints WHERE source_id = 'node-1'");
      const needed = String(cp!.position).split(':')[0];
      // MariaDB keeps a file until its binlog checkpoint is written: rotate and purge until it is gone.
      await eventually(
        `${needed} to be purged`,
        async () => {
          await a.query('FLUSH BINARY LOGS');
          const [[head]] = await a.query<RowDataPacket[]>(ctx.engine === 'mysql' ? 'SHOW BINARY LOG STATUS' : 'SHOW MASTER STATUS');
          await a.query('PURGE BINARY LOGS TO ?', [head!.File]);
          const [files] = await a.query<RowDataPacket[]>('SHOW BINARY LOGS');
          return files.map((f) => String(f.Log_name));
        },
        (files) => !files.includes(needed!),
      );
      const purged = await exitOf(replicate(urls));
      expect(purged.code).toBe(4);
      expect(purged.output).toMatch(/n1→n2 stopped \(binlog not available\)/);
      expect(purged.output).toMatch(/is not on the source any more/);
      const [rows] = await b.query<RowDataPacket[]>('SELECT id FROM purge.t ORDER BY id');
      expect(rows.map((r) => r.id)).toEqual([1]);
    } finally {
      for (const c of conns) await c.end();
    }
  });

  it('a transient failure restarts the direction with backoff, counted in status and metrics, without bumping the owner epoch', async () => {
    const conns = await setupNodes(urls, 'transient', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL)'], ['t']);
    const [a, b] = conns as [typeof conns[0], typeof conns[0]];
    const ops = await serveOps({ host: '127.0.0.1', port: 0 });
    // One attempt per batch and a 1 s lock wait: a lock held on the target fails the sink at once.
    const r = await startReplicator(urls, { sink: { retry: { maxAttempts: 1 }, timeouts: { lockWaitSeconds: 1 }, batch: { maxDelayMs: 5 } }, restartDelayMs: 100, maxRestartDelayMs: 400 });
    ops.attach(r);
    const locker = await connect(urls[1]!);
    try {
      const epoch = async () => {
        const [[row]] = await b.query<RowDataPacket[]>("SELECT owner_epoch FROM lww_meta.checkpoints WHERE source_id = 'node-1'");
        return String(row!.owner_epoch);
      };
      await a.query('INSERT INTO transient.t (id, v) VALUES (1, 1)');
      await converged(conns, 'transient', 't');
      const claimed = await epoch();
      await locker.query('BEGIN');
      await locker.query('SELECT * FROM transient.t WHERE id = 1 FOR UPDATE');
      await a.query('UPDATE transient.t SET v = 2 WHERE id = 1');
      const direction = () => r.directions.find((d) => d.name === 'n1→n2')!;
      await eventually('two restarts of n1→n2', async () => direction().status(), (s) => s.restarts >= 2);
      const status = await direction().status();
      expect(status.lastErrorKind).toBe('transient');
      expect(status.lastError).toMatch(/Lock wait timeout/);
      await locker.query('COMMIT');
      await converged(conns, 'transient', 't');
      const [[row]] = await b.query<RowDataPacket[]>('SELECT v FROM transient.t WHERE id = 1');
      expect(row!.v).toBe(2);
      expect(await epoch()).toBe(claimed);
      const metrics = await (await fetch(`http://127.0.0.1:${ops.address.port}/metrics`)).text();
      const restarts = Number(/lww_direction_restarts_total\{direction="n1→n2"\} (\d+)/.exec(metrics)?.[1]);
      expect(restarts).toBeGreaterThanOrEqual(2);
      // Later ordinary writes still cross: the direction is not wedged.
      await a.query('INSERT INTO transient.t (id, v) VALUES (2, 2)');
      await converged(conns, 'transient', 't');
    } finally {
      await r.stop();
      await ops.close();
      await locker.end();
      for (const c of conns) await c.end();
    }
  });
});
