// The replicator's memory while it carries one very large source transaction: `lww-sink replicate`
// runs as its own process between two fresh servers; one transaction on node 1 inserts --rows rows
// (default 1,000,000) and updates every tenth; the script samples the process's RSS until node 2
// holds them all and prints the peak (the kernel's VmHWM). Target: under 300 MB.
//   npm run measure:memory -- [--engine mysql|mariadb|both] [--rows 1000000]
// The replicator runs from dist/ when it was built (npm run build), else from the sources through tsx.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { connect } from '../src/db/connection.ts';
import { CLI_NODE_ARGS } from '../src/harness/replicator-process.ts';
import { install } from '../src/install/install.ts';
import { type Engine, startServers } from '../src/servers/index.ts';

const { values } = parseArgs({ options: { engine: { type: 'string', default: 'both' }, rows: { type: 'string', default: '1000000' } } });
const rows = Number(values.rows);
if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`--rows must be a positive integer (got ${values.rows})`);
const engines: Engine[] = values.engine === 'both' ? ['mysql', 'mariadb'] : [values.engine === 'mariadb' ? 'mariadb' : 'mysql'];
const BUILT = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const cliArgs = existsSync(BUILT) ? [BUILT] : [...CLI_NODE_ARGS];
const MB = 1024 * 1024;

/** VmRSS and VmHWM (peak) of a process, in bytes. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

async function count(conn: Connection): Promise<number> {
  const [r] = await conn.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM memdb.t');
  return Number(r[0]!.n);
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function measure(engine: Engine): Promise<void> {
  const servers = await startServers({ engine, count: 2 });
  const conns: Connection[] = [];
  try {
    const urls = servers.map((s) => s.url);
    for (const [i, url] of urls.entries()) {
      const c = await connect(url);
      conns.push(c);
      await c.query('CREATE DATABASE memdb');
      await c.query('CREATE TABLE memdb.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(32) NOT NULL)');
      await install({ url, nodeId: i + 1, tables: ['memdb.t'] });
    }
    const [a, b] = conns as [Connection, Connection];
    const child = spawn(process.execPath, [...cliArgs, 'replicate', ...urls.flatMap((u) => ['--node', u]), '--progress-interval', '0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'warn' },
    });
    let stderr = '';
    child.stderr!.on('data', (d) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      // Streaming: a marker row crosses.
      await a.query("INSERT INTO memdb.t VALUES (0, 0, 'marker')");
      await waitFor('the marker row to cross', async () => (await count(b)) === 1, 60_000);
      const idle = memoryOf(child.pid!);
      let sampledPeak = idle.rss;
      const sampler = setInterval(() => {
        try {
          sampledPeak = Math.max(sampledPeak, memoryOf(child.pid!).rss);
        } catch {
          // exited
        }
      }, 100);
      const started = Date.now();
      const s = await connect(urls[0]!);
      try {
        await s.query(engine === 'mysql' ? 'SET SESSION cte_max_recursion_depth = ?' : 'SET SESSION max_recursive_iterations = ?', [rows + 1]);
        await s.query('BEGIN');
        await s.query(
          `INSERT INTO memdb.t (id, v, s) SELECT n, n, CONCAT('row-', n) FROM (WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ${rows}) SELECT n FROM seq) AS x`,
        );
        await s.query('UPDATE memdb.t SET v = v + 1 WHERE id % 10 = 0');
        await s.query('COMMIT');
      } finally {
        await s.end();
      }
      const committed = (Date.now() - started) / 1000;
      // Every row, then the whole transaction (its updates come in its last chunks): node 2 equals node 1.
      await waitFor(`${rows} rows to cross`, async () => (await count(b)) === rows + 1 || child.exitCode !== null, 30 * 60_000);
      const print = async (c: Connection) =>
        JSON.stringify((await c.query<RowDataPacket[]>("SELECT SUM(v) AS s, BIT_XOR(CRC32(CONCAT_WS('|', id, v, s, _lww_ts))) AS h FROM memdb.t"))[0][0]);
      const expected = await print(a);
      let equal = false;
      const settled = async () => {
        equal = (await print(b)) === expected;
        return equal || child.exitCode !== null;
      };
      await waitFor('node 2 to equal node 1', settled, 10 * 60_000).catch(() => undefined);
      clearInterval(sampler);
      if (child.exitCode !== null) throw new Error(`replicate exited with ${child.exitCode}:\n${stderr}`);
      const crossed = (Date.now() - started) / 1000;
      const end = memoryOf(child.pid!);
      console.log(
        `measure-memory on ${engine}: one source transaction of ${rows.toLocaleString('en')} inserted rows (+${Math.floor(rows / 10).toLocaleString('en')} updates) ` +
          `committed in ${committed.toFixed(1)} s, on node 2 after ${crossed.toFixed(1)} s (${equal ? 'identical' : 'DIFFERENT'})`,
      );
      console.log(
        `  replicator RSS: idle ${(idle.rss / MB).toFixed(0)} MB, peak ${(end.peak / MB).toFixed(0)} MB (VmHWM; sampled max ${(sampledPeak / MB).toFixed(0)} MB), ` +
          `target < 300 MB: ${end.peak < 300 * MB ? 'met' : 'NOT met'}  [${cliArgs[0] === BUILT ? 'dist' : 'tsx'}]`,
      );
      if (!equal) process.exitCode = 1;
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  } finally {
    for (const c of conns) await c.end();
    await Promise.all(servers.map((s) => s.destroy()));
  }
}

for (const engine of engines) await measure(engine);
