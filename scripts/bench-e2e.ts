// End-to-end backlog drain against what users would run instead. Three servers of one engine:
// A (source), B (this project's replicator A→B; one B per --apply-workers count, drained one after
// another), R (a native asynchronous replica of A).
//  1. A and B get the same sysbench tables, installed; R replicates A from its first event, then
//     stops. The replicator records its start position on B, then stops.
//  2. Backlog: sysbench-like single-row updates (oltp_update_non_index) over 10 tables commit
//     --transactions transactions on A, then one finish mark.
//  3. Drains, one after another (the machine is shared; nothing else of ours runs meanwhile):
//     (1) this replicator A→B until B holds the mark; (2) START REPLICA on R (MySQL:
//     replica_parallel_workers, WRITESET dependency tracking where the version still has the
//     setting — 8.4+ always tracks write sets; MariaDB: slave_parallel_threads, optimistic mode)
//     until R holds the mark; (3) the physical limit: bare multi-row REPLACE of the final rows (every
//     row the backlog changed, 1024 rows per autocommitted statement, one connection) into empty
//     copies of the tables on B.
// Prints transactions/s of each (backlog transactions / drain seconds) and the ratios, and checks
// that B and R hold exactly A's rows (CHECKSUM TABLE). Compare ratios within one run.
//   npm run bench:e2e -- [--engine mysql|mariadb] [--transactions 100000] [--threads 8] [--rows-per-table 10000] [--workers 4]
//                        [--apply-workers 1,4]   (the replicator's apply workers per direction; a list compares them in one run)
//                        [--cpu-prof DIR]        (a V8 CPU profile of each replicator drain, this process's main thread:
//                                                 capture, sink and JS; summarise with scripts/cpu-profile-top.ts)
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { connect } from '../src/db/connection.ts';
import { INITIAL_VERSION, prepareWorkloadTables, runWriters, type WorkloadOptions, workloadTables } from '../src/harness/workload.ts';
import { install } from '../src/install/install.ts';
import { DEFAULT_APPLY_WORKERS, Replicator } from '../src/replicator/replicator.ts';
import { replaceRows, type SqlValue } from '../src/sql/dml.ts';
import { quoteTable } from '../src/sql/quote.ts';
import { createDatabaseSql, createMarksSql, createSbtestSql, readMarkSql, writeMarkSql } from '../src/sql/workload.ts';
import { type RunningServer, startServers } from '../src/servers/index.ts';
import { profiledInto } from './cpu-profile.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mysql' },
    transactions: { type: 'string', default: '100000' },
    threads: { type: 'string', default: '8' },
    'rows-per-table': { type: 'string', default: '10000' },
    workers: { type: 'string', default: '4' },
    'apply-workers': { type: 'string', default: `1,${DEFAULT_APPLY_WORKERS}` },
    'cpu-prof': { type: 'string' },
  },
});
const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const TRANSACTIONS = Number(values.transactions);
const WORKERS = Number(values.workers);
const APPLY_WORKERS = values['apply-workers'].split(',').map(Number);
if (APPLY_WORKERS.some((n) => !Number.isInteger(n) || n < 1)) throw new RangeError(`--apply-workers must list positive integers (got ${values['apply-workers']})`);
const SCHEMA = 'e2e';
const MARKS = 'e2e_marks';
const LIMIT_SCHEMA = 'e2e_limit';
const REPLACE_ROWS = 1024;
const DRAIN_TIMEOUT_MS = 30 * 60_000;

const threads = Number(values.threads);
const wl: WorkloadOptions = {
  kind: 'oltp_update_non_index',
  schema: SCHEMA,
  tables: 10,
  rowsPerTable: Number(values['rows-per-table']),
  threads,
  transactionsPerThread: Math.ceil(TRANSACTIONS / threads),
  seed: 13,
};
const sbtables = Array.from({ length: wl.tables }, (_, t) => `sbtest${t + 1}`);
const tables = [...workloadTables(wl), `${MARKS}.harness_marks`];
const secondsSince = (t: bigint) => Number(process.hrtime.bigint() - t) / 1e9;

async function withConn<T>(url: string, f: (c: Connection) => Promise<T>): Promise<T> {
  const c = await connect(url);
  try {
    return await f(c);
  } finally {
    await c.end();
  }
}

async function writeMark(url: string): Promise<string> {
  const token = randomUUID();
  await withConn(url, (c) => c.query(writeMarkSql(MARKS), ['A', token, token]));
  return token;
}

/** Profiles `body` into --cpu-prof DIR when given (only the timed drain, not the backlog's writers). */
async function profiling<T>(name: string, body: () => Promise<T>): Promise<T> {
  const dir = values['cpu-prof'];
  return profiledInto(dir ? join(dir, `e2e-${engine}-${name}.cpuprofile`) : undefined, body);
}

/** Polls until `url` holds the mark; returns when it does. */
async function awaitMark(url: string, token: string, what: string): Promise<void> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  await withConn(url, async (c) => {
    for (;;) {
      const [rows] = await c.query<RowDataPacket[]>(readMarkSql(MARKS), ['A']).catch(() => [[] as RowDataPacket[]]);
      if (rows[0]?.token === token) return;
      if (Date.now() > deadline) throw new Error(`${what}: the finish mark did not arrive within ${DRAIN_TIMEOUT_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  });
}

/** Native replication of `source` into `replica` from the source's first event, parallel appliers. */
async function configureReplica(replica: RunningServer, source: RunningServer): Promise<string> {
  return withConn(replica.url, async (c) => {
    if (engine === 'mysql') {
      await c.query(`SET GLOBAL replica_parallel_workers = ${WORKERS}`);
      await c.query(
        `CHANGE REPLICATION SOURCE TO SOURCE_HOST = '127.0.0.1', SOURCE_PORT = ${source.port}, SOURCE_USER = 'root', SOURCE_PASSWORD = '', SOURCE_AUTO_POSITION = 1, GET_SOURCE_PUBLIC_KEY = 1`,
      );
      // 8.0: WRITESET is a source setting; 8.4+ removed it and always tracks write sets.
      const tracking = await withConn(source.url, async (s) => {
        try {
          await s.query("SET GLOBAL binlog_transaction_dependency_tracking = 'WRITESET'");
          return 'WRITESET (set)';
        } catch {
          return 'WRITESET (always on in this version)';
        }
      });
      const [[v]] = (await c.query('SELECT @@replica_parallel_workers AS w, @@replica_preserve_commit_order AS p')) as unknown as [[{ w: number; p: number }]];
      return `replica_parallel_workers=${v!.w}, replica_preserve_commit_order=${v!.p}, dependency tracking ${tracking}`;
    }
    await c.query(`SET GLOBAL slave_parallel_threads = ${WORKERS}`);
    await c.query("SET GLOBAL slave_parallel_mode = 'optimistic'");
    await c.query(`CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = ${source.port}, MASTER_USER = 'root', MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos`);
    const [[v]] = (await c.query('SELECT @@slave_parallel_threads AS t, @@slave_parallel_mode AS m')) as unknown as [[{ t: number; m: string }]];
    return `slave_parallel_threads=${v!.t}, slave_parallel_mode=${v!.m}`;
  });
}

const replicaSql = (start: boolean) => (engine === 'mysql' ? (start ? 'START REPLICA' : 'STOP REPLICA') : start ? 'START SLAVE' : 'STOP SLAVE');

function newReplicator(a: string, b: string, applyWorkers: number): Replicator {
  return new Replicator({ nodes: [a, b], tables, initialCopy: false, applyWorkers, sink: { batch: { maxDelayMs: 5 } }, capture: { heartbeatMs: 1000 } });
}

/** Every row the backlog changed, as A holds it now (id, k, c, pad, version). */
async function finalRows(url: string): Promise<Map<string, SqlValue[][]>> {
  const out = new Map<string, SqlValue[][]>();
  await withConn(url, async (c) => {
    for (const t of sbtables) {
      const [rows] = await c.query<RowDataPacket[]>(
        `SELECT id, k, c, pad, CAST(_lww_ts AS CHAR) AS v FROM ${quoteTable(SCHEMA, t)} WHERE _lww_ts > ? ORDER BY id`,
        [INITIAL_VERSION.toString()],
      );
      out.set(
        t,
        rows.map((r) => [r.id, r.k, r.c, r.pad, r.v]),
      );
    }
  });
  return out;
}

/** Bare multi-row REPLACE of the final rows into empty copies of the tables; returns seconds. */
async function replaceLimit(url: string, rows: Map<string, SqlValue[][]>): Promise<number> {
  return withConn(url, async (c) => {
    await c.query(createDatabaseSql(LIMIT_SCHEMA));
    for (const t of sbtables) await c.query(createSbtestSql(LIMIT_SCHEMA, t, '_lww_ts'));
    const statements = [...rows].flatMap(([t, rs]) => {
      const shape = { schema: LIMIT_SCHEMA, table: t, columns: ['id', 'k', 'c', 'pad', '_lww_ts'], primaryKey: ['id'], versionColumn: '_lww_ts', keyPlaceholders: ['?'] };
      const out = [];
      for (let i = 0; i < rs.length; i += REPLACE_ROWS) out.push(replaceRows(shape, rs.slice(i, i + REPLACE_ROWS)));
      return out;
    });
    const start = process.hrtime.bigint();
    for (const s of statements) await c.execute(s.sql, s.values);
    return secondsSince(start);
  });
}

async function checksums(url: string): Promise<string> {
  return withConn(url, async (c) => {
    const [rows] = await c.query<RowDataPacket[]>(`CHECKSUM TABLE ${sbtables.map((t) => quoteTable(SCHEMA, t)).join(', ')}`);
    return rows.map((r) => String(r.Checksum)).join(',');
  });
}

const servers = await startServers({ engine, count: 2 + APPLY_WORKERS.length });
const [A, R, ...Bs] = servers as [RunningServer, RunningServer, ...RunningServer[]];
const B = Bs[0]!;
try {
  const version = await withConn(A.url, async (c) => ((await c.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]])[0][0].v);
  console.log(`bench:e2e on ${engine} ${version}: backlog of ${TRANSACTIONS} transactions (${wl.tables} tables × ${wl.rowsPerTable} rows, oltp_update_non_index, ${threads} writers)`);
  const nativeSettings = await configureReplica(R, A);
  await withConn(R.url, (c) => c.query(replicaSql(true)));
  for (const [i, s] of [A, ...Bs].entries()) {
    await prepareWorkloadTables(s.url, wl);
    await withConn(s.url, async (c) => {
      await c.query(createDatabaseSql(MARKS));
      await c.query(createMarksSql(MARKS, '_lww_ts'));
    });
    // Each B its own node id: A keeps one checkpoint per B for the B→A direction.
    await install({ url: s.url, nodeId: i + 1, tables });
  }
  // R has everything A had before the backlog; then it stops until its drain.
  await awaitMark(R.url, await writeMark(A.url), 'native replica setup');
  await withConn(R.url, (c) => c.query(replicaSql(false)));
  // The replicator records its start position on each B, then stops until its drain.
  for (const [i, b] of Bs.entries()) {
    const first = newReplicator(A.url, b.url, APPLY_WORKERS[i]!);
    await first.start();
    await first.whenStreaming();
    await first.stop();
  }

  let started = process.hrtime.bigint();
  const writers = await runWriters({ name: 'A', url: A.url }, wl);
  const backlog = writers.transactions + 1;
  const token = await writeMark(A.url);
  console.log(`  backlog: ${backlog} transactions on A in ${secondsSince(started).toFixed(1)} s (${writers.retries} retries)`);

  const ourSecsOf: number[] = [];
  for (const [i, b] of Bs.entries()) {
    started = process.hrtime.bigint();
    const replicator = newReplicator(A.url, b.url, APPLY_WORKERS[i]!);
    await profiling(`${APPLY_WORKERS[i]}-workers`, async () => {
      await replicator.start();
      await awaitMark(b.url, token, 'replicator');
    });
    ourSecsOf.push(secondsSince(started));
    await replicator.stop();
  }

  started = process.hrtime.bigint();
  await withConn(R.url, (c) => c.query(replicaSql(true)));
  await awaitMark(R.url, token, 'native replica');
  const nativeSecs = secondsSince(started);

  const rows = await finalRows(A.url);
  const rowCount = [...rows.values()].reduce((n, r) => n + r.length, 0);
  const limitSecs = await replaceLimit(B.url, rows);

  const [sumA, sumR, ...sumBs] = await Promise.all([A, R, ...Bs].map((s) => checksums(s.url)));
  const rate = (secs: number) => backlog / secs;
  const [native, limit] = [rate(nativeSecs), rate(limitSecs)];
  console.log(`  native: ${nativeSettings}`);
  for (const [i, secs] of ourSecsOf.entries()) {
    const label = `(1) this replicator A→B, ${APPLY_WORKERS[i]} apply worker${APPLY_WORKERS[i] === 1 ? '' : 's'}:`.padEnd(42);
    console.log(`  ${label}${secs.toFixed(1)} s, ${Math.round(rate(secs))} transactions/s`);
  }
  console.log(`  ${'(2) native replication:'.padEnd(42)}${nativeSecs.toFixed(1)} s, ${Math.round(native)} transactions/s`);
  console.log(`  ${'(3) bare REPLACE of final rows:'.padEnd(42)}${limitSecs.toFixed(1)} s for ${rowCount} rows, ${Math.round(limit)} transactions/s`);
  for (const [i, secs] of ourSecsOf.entries()) {
    const ours = rate(secs);
    console.log(`  ${APPLY_WORKERS[i]} apply worker(s): replicator / native ${(ours / native).toFixed(2)}, replicator / REPLACE limit ${(ours / limit).toFixed(2)}`);
  }
  console.log(`  native / REPLACE limit ${(native / limit).toFixed(2)}`);
  const differs = sumBs.map((sum, i) => (sum === sumA ? '' : `B${i + 1}`)).filter(Boolean);
  console.log(`  ${differs.length === 0 ? 'every B equals' : `${differs.join(', ')} DIFFER FROM`} A, R ${sumR === sumA ? 'equals' : 'DIFFERS FROM'} A (CHECKSUM TABLE)`);
  if (differs.length > 0 || sumR !== sumA) process.exitCode = 1;
} finally {
  await Promise.all(servers.map((s) => s.destroy()));
}
