import { createServer } from 'node:net';
import { expect, it } from 'vitest';
import { spawnCli } from '../helpers/cli-process.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, eventually, setupNodes } from '../helpers/replication.ts';

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

describeEachEngine('lww-sink replicate (command)', 2, (ctx) => {
  it('prints JSON status, serves Prometheus metrics and stops gracefully on SIGTERM', async () => {
    const urls = ctx.servers.map((s) => s.url);
    const conns = await setupNodes(urls, 'cli', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL)'], ['t']);
    const port = await freePort();
    const p = spawnCli(['replicate', '--node', urls[0]!, '--node', urls[1]!, '--json', '--progress-interval', '1', '--metrics-addr', `127.0.0.1:${port}`]);
    const lastStatus = () =>
      p
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{') && l.includes('"directions"')) // log lines are JSON too (stderr is not a terminal)
        .map((l) => JSON.parse(l) as { directions: Array<{ name: string; state: string; lagBytes?: number; sink: { totals: { inserted: number } } }> })
        .pop();
    try {
      await eventually('both directions to stream', async () => lastStatus(), (s) => s?.directions.every((d) => d.state === 'streaming') === true);
      await conns[0]!.query('INSERT INTO cli.t (id, v) VALUES (1, 1), (2, 2)');
      await converged(conns, 'cli', 't');
      const status = await eventually('a status line with the applied rows', async () => lastStatus(), (s) => s?.directions.find((d) => d.name === 'n1→n2')?.sink.totals.inserted === 2);
      expect(status!.directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/lww_applied_rows_total\{direction="n1→n2"\} 2/);
      expect(metrics).toMatch(/lww_lag_bytes\{direction="n2→n1"\} \d+/);
      p.child.kill('SIGTERM');
      expect(await p.exited).toBe(0);
      expect(p.output()).toMatch(/stopped gracefully/);
    } finally {
      p.child.kill('SIGKILL');
      for (const c of conns) await c.end();
    }
  });

  it('exits 2 with usage on bad flags and 4 with a clear message when a node is not installed', async () => {
    const bad = spawnCli(['replicate', '--node', ctx.servers[0]!.url]);
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toMatch(/at least two --node/);
    const conns = await setupNodes(ctx.servers.map((s) => s.url), 'cli2', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY)'], ['t']);
    await conns[1]!.query('DROP DATABASE lww_meta');
    const notInstalled = spawnCli(['replicate', '--node', ctx.servers[0]!.url, '--node', ctx.servers[1]!.url]);
    expect(await notInstalled.exited).toBe(4);
    expect(notInstalled.output()).toMatch(/is not installed/);
    for (const c of conns) await c.end();
  });
});
