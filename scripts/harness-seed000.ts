// Seed 000 at its own scale: a backlog and a live load through a flapping network, one direction.
//  1. Two servers (A, B) of one engine; 100 empty sysbench tables and a finish-mark table on both,
//     installed. The replicator (a child process, reaching A through a TCP proxy) starts once so its
//     checkpoints exist, then stops: replication is paused.
//  2. Prepare on A only, as sysbench does (multi-row INSERTs stamped by the triggers): 100 × 10,000 =
//     1,000,000 rows that B has not seen — the backlog.
//  3. Resume the replicator; at once 32 writers run oltp_update_non_index on A for 10 minutes, while
//     the proxy cuts the replicator's connections to A for 10 s every 2 minutes (drop, reset,
//     blackhole in turn).
//  4. When the writers stop: the replicator's reported lag; a finish mark on A; time until B holds it
//     (time to converge, from the writers' end); then the state check over every table.
// Exits 0 only when B held the mark, the state check found nothing, and the replicator never exited
// on its own. The writers' commit markers (the `harness` schema) stay on A: nothing here needs that
// schema replicated; the finish mark has a schema of its own.
//   npm run harness:seed000 -- [--engine mysql|mariadb] [--tables 100] [--rows-per-table 10000] [--threads 32]
//     [--duration 10m] [--loss-every 2m] [--loss-for 10s] [--finish-timeout 30m] [--verbose]
//   small: --tables 4 --rows-per-table 1000 --threads 4 --duration 40s --loss-every 15s --loss-for 3s
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { RowDataPacket } from 'mysql2/promise';
import { FINDING_CLASSES } from '../src/checker/report.ts';
import { checkState } from '../src/checker/state-check.ts';
import { connect } from '../src/db/connection.ts';
import { type FaultEffect, parseDuration, runFaults } from '../src/harness/faults.ts';
import { type ReplicatorExit, ReplicatorExitError, ReplicatorProcess } from '../src/harness/replicator-process.ts';
import { TcpProxy } from '../src/harness/tcp-proxy.ts';
import { insertWorkloadRows, prepareWorkloadTables, runWriters, type WorkloadOptions, type WriterStats, workloadTables } from '../src/harness/workload.ts';
import { install } from '../src/install/install.ts';
import { type RunningServer, startServers } from '../src/servers/index.ts';
import { createDatabaseSql, createMarksSql, readMarkSql, writeMarkSql } from '../src/sql/workload.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mysql' },
    tables: { type: 'string', default: '100' },
    'rows-per-table': { type: 'string', default: '10000' },
    threads: { type: 'string', default: '32' },
    duration: { type: 'string', default: '10m' },
    'loss-every': { type: 'string', default: '2m' },
    'loss-for': { type: 'string', default: '10s' },
    'finish-timeout': { type: 'string', default: '30m' },
    verbose: { type: 'boolean', default: false },
  },
});

const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const positive = (name: string, text: string | undefined) => {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer (got ${text})`);
  return n;
};
const durationMs = parseDuration(values.duration!);
const lossEveryMs = parseDuration(values['loss-every']!);
const lossForMs = parseDuration(values['loss-for']!);
const finishTimeoutMs = parseDuration(values['finish-timeout']!);
if (lossEveryMs > 0 && lossEveryMs <= lossForMs) throw new Error('--loss-every must be longer than --loss-for (or 0 for no network loss)');

const SCHEMA = 'seed000';
/** The finish mark: a replicated schema of its own (never `harness`, whose writer markers stay local). */
const MARKS = 'seed000_marks';
const wl: WorkloadOptions = {
  kind: 'oltp_update_non_index',
  schema: SCHEMA,
  tables: positive('tables', values.tables),
  rowsPerTable: positive('rows-per-table', values['rows-per-table']),
  threads: positive('threads', values.threads),
  durationMs,
  seed: 0,
};
const tables = [...workloadTables(wl), `${MARKS}.harness_marks`];
const PROGRESS_MS = Math.min(30_000, Math.max(5_000, Math.round(durationMs / 8)));
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const lag = (ms: number | undefined) => (ms === undefined ? '?' : ms < 10_000 ? `${Math.round(ms)} ms` : secs(ms));
const stamp = (t0: number) => `[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s]`;

interface DirectionLine {
  name: string;
  state: string;
  lagMs?: number;
  lagBytes?: number;
  restarts: number;
  lastError?: string;
  sink: { totals: { inserted: number; updated: number; deleted: number; skippedStale: number } };
}

/** A→B as the replicator's last status line reports it (the replicate command names the nodes n1, n2). */
function aToB(replicator: ReplicatorProcess): DirectionLine | undefined {
  return (replicator.lastStatus as { directions?: DirectionLine[] } | undefined)?.directions?.find((d) => d.name === 'n1→n2');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const servers = await startServers({ engine, count: 2 });
const [A, B] = servers as [RunningServer, RunningServer];
const proxy = new TcpProxy(A.host, A.port);
let replicator: ReplicatorProcess | undefined;
const t0 = Date.now();
try {
  const version = await (async () => {
    const c = await connect(A.url);
    const [[v]] = (await c.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
    await c.end();
    return v!.v;
  })();
  console.log(
    `harness:seed000 on ${engine} ${version}: ${wl.tables} tables × ${wl.rowsPerTable} rows prepared on A while paused, then ${wl.kind} with ${wl.threads} threads on A for ${secs(durationMs)}` +
      `${lossEveryMs > 0 ? `, replicator↔A network loss of ${secs(lossForMs)} every ${secs(lossEveryMs)} (drop, reset, blackhole in turn)` : ', no network loss'}`,
  );

  // 1. Empty tables, installed on both; the replicator's first start records its checkpoints.
  for (const [i, s] of [A, B].entries()) {
    await prepareWorkloadTables(s.url, { ...wl, rowsPerTable: 0 });
    const c = await connect(s.url);
    await c.query(createDatabaseSql(MARKS));
    await c.query(createMarksSql(MARKS, '_lww_ts'));
    await c.end();
    await install({ url: s.url, nodeId: i + 1, tables });
  }
  console.log(`${stamp(t0)} ${tables.length} tables created and installed on A and B`);
  await proxy.start();
  let exited: (exit: ReplicatorExit) => void = () => undefined;
  const died = new Promise<ReplicatorExit>((resolve) => (exited = resolve));
  replicator = new ReplicatorProcess({
    nodes: [proxy.rewrite(A.url), B.url],
    tables,
    onLog: values.verbose ? (line) => console.log(`  replicator: ${line}`) : undefined,
    onUnexpectedExit: (exit) => exited(exit),
  });
  const failed = (exit: ReplicatorExit) => new ReplicatorExitError(exit, replicator?.directions() ?? [], Date.now() - t0);
  replicator.start();
  for (let waited = 0; ; waited += 100) {
    const dirs = (replicator.lastStatus as { directions?: DirectionLine[] } | undefined)?.directions ?? [];
    if (dirs.length === 2 && dirs.every((d) => d.state === 'streaming')) break;
    if (replicator.unexpectedExit) throw failed(replicator.unexpectedExit);
    if (waited > 120_000) throw new Error('the replicator did not start streaming within 120 s');
    await sleep(100);
  }
  const pauseCode = await replicator.stop();
  if (pauseCode !== 0) throw new Error(`the replicator's first run stopped with code ${pauseCode}`);
  console.log(`${stamp(t0)} replicator started (checkpoints recorded) and stopped: paused`);

  // 2. The backlog: rows on A only, stamped by A's triggers.
  let t = Date.now();
  const prepared = await insertWorkloadRows(A.url, wl, 4);
  console.log(`${stamp(t0)} backlog: ${prepared} rows inserted on A in ${secs(Date.now() - t)} (${Math.round(prepared / ((Date.now() - t) / 1000))} rows/s)`);

  // 3. Resume, write, cut.
  replicator.start();
  const started = Date.now();
  const control = { stopped: false };
  const writers = runWriters({ name: 'A', url: A.url }, wl, control);
  const abort = new AbortController();
  const faults = runFaults(
    lossEveryMs > 0 ? [{ kind: 'net', node: 'A', atMs: lossEveryMs, durationMs: lossForMs, everyMs: lossEveryMs }] : [],
    durationMs,
    {
      killReplicator: async () => false,
      restartReplicator: async () => undefined,
      cutNetwork: (_link, mode) => (mode === 'slow' ? 0 : proxy.cut(mode)),
      healNetwork: () => proxy.restore(),
      stopServer: async () => undefined,
      startServer: async () => undefined,
      setSkew: () => undefined,
      log: (m) => console.log(`${stamp(t0)} ${m}`),
    },
    started,
    abort.signal,
  );
  let maxLagMs = 0;
  let caughtUpMs: number | undefined;
  const sample = setInterval(() => {
    const d = aToB(replicator!);
    if (d?.lagMs === undefined) return;
    maxLagMs = Math.max(maxLagMs, d.lagMs);
    if (caughtUpMs === undefined && d.lagMs < 5000) caughtUpMs = Date.now() - started;
  }, 1000).unref();
  const progress = setInterval(() => {
    const d = aToB(replicator!);
    const tot = d?.sink.totals;
    console.log(
      `${stamp(t0)} writing ${secs(Date.now() - started)}: A→B ${d?.state ?? 'starting'} applied=${tot ? tot.inserted + tot.updated + tot.deleted : 0} ` +
        `lag=${d?.lagMs === undefined ? '?' : `${Math.round(d.lagMs)}ms`} behind=${d?.lagBytes ?? '?'}B restarts=${d?.restarts ?? 0}${proxy.isCut ? ' (network cut)' : ''}`,
    );
  }, PROGRESS_MS).unref();
  let stats: WriterStats;
  let effects: FaultEffect[];
  try {
    const outcome = await Promise.race([Promise.all([writers, faults]), died]);
    if (!Array.isArray(outcome)) {
      control.stopped = true;
      abort.abort();
      await Promise.allSettled([writers, faults]);
      throw failed(outcome);
    }
    [stats, effects] = outcome;
  } finally {
    clearInterval(progress);
  }
  const writersEnd = Date.now();
  const writeMs = writersEnd - started;
  const endLine = aToB(replicator);
  const lagAtEnd = { ms: endLine?.lagMs, bytes: endLine?.lagBytes, state: endLine?.state };

  // 4. Finish mark on A; B holding it means everything A wrote before it has crossed.
  const token = randomUUID();
  const a = await connect(A.url);
  await a.execute(writeMarkSql(MARKS), ['A', token, token]);
  await a.end();
  const b = await connect(B.url);
  let convergeMs: number | undefined;
  try {
    while (Date.now() - writersEnd < finishTimeoutMs) {
      if (replicator.unexpectedExit) throw failed(replicator.unexpectedExit);
      const [rows] = await b.execute<RowDataPacket[]>(readMarkSql(MARKS), ['A']);
      if (rows[0]?.token === token) {
        convergeMs = Date.now() - writersEnd;
        break;
      }
      await sleep(200);
    }
  } finally {
    await b.end();
    clearInterval(sample);
  }
  const finalLine = aToB(replicator);
  const directions = replicator.directions();
  const stopCode = await replicator.stop();
  if (replicator.unexpectedExit) throw failed(replicator.unexpectedExit);
  if (stopCode !== 0) throw failed({ code: stopCode, signal: null, lastError: replicator.lastError, logTail: [] });
  console.log(`${stamp(t0)} ${convergeMs === undefined ? `B did NOT hold the finish mark within ${secs(finishTimeoutMs)}` : 'B holds the finish mark'}; checking state`);

  t = Date.now();
  const state = await checkState({ nodes: [A.url, B.url], tables });
  const stateMs = Date.now() - t;
  const counts = FINDING_CLASSES.map((c) => [c, state.tables.reduce((n, tb) => n + tb.counts[c], 0)] as const).filter(([, n]) => n > 0);
  const schemaDiffs = state.tables.flatMap((tb) => tb.schemaDifferences);

  const o = stats.outcomes;
  const took = effects.filter((e) => e.tookEffect);
  const totals = finalLine?.sink.totals;
  const lines = [
    `harness:seed000 result (${engine} ${version})`,
    `  backlog             ${prepared} rows on A (${wl.tables} tables × ${wl.rowsPerTable}) while the replicator was paused`,
    `  transactions        ${stats.transactions} committed on A in ${secs(writeMs)} (${(stats.transactions / (writeMs / 1000)).toFixed(1)} txn/s, ${wl.threads} threads; ` +
      `${stats.retries} retries, ${stats.reconnects} reconnects; unknown commit outcomes ${o.committed} committed / ${o.notCommitted} not / ${o.unresolved.length} unresolved)`,
    `  lag at the end      ${lag(lagAtEnd.ms)} (replicator's last reported A→B lag when the writers stopped; ${lagAtEnd.bytes ?? '?'} binlog bytes behind, ${lagAtEnd.state ?? '?'})`,
    `  lag during the run  max ${lag(maxLagMs)}; ${caughtUpMs === undefined ? 'never below 5 s while writing' : `first below 5 s at ${secs(caughtUpMs)} after resuming`}`,
    `  time to converge    ${convergeMs === undefined ? `NOT within ${secs(finishTimeoutMs)}` : secs(convergeMs)} (writers' end → finish mark on B)`,
    `  diverged rows       ${state.totals.findings}${counts.length ? ` (${counts.map(([c, n]) => `${c}=${n}`).join(' ')})` : ''}${schemaDiffs.length ? `; schema differences: ${schemaDiffs.join('; ')}` : ''} — state check of ${state.tables.length} tables, ${state.totals.chunks} chunks, ${secs(stateMs)}`,
    `  faults              ${took.length} of ${effects.length} took effect: ${effects.map((e) => `${e.mode}@${secs(e.atMs)} down ${secs(e.downtimeMs)} (${e.connections ?? 0} connections)`).join(', ') || 'none'}`,
    `  replicator          A→B applied=${totals ? totals.inserted + totals.updated + totals.deleted : '?'} stale=${totals?.skippedStale ?? '?'}; ` +
      `restarts ${directions.map((d) => `${d.name}=${d.restarts}${d.lastError ? ` (last error: ${d.lastError})` : ''}`).join(', ')}; ${replicator.starts} starts`,
    `  total               ${secs(Date.now() - t0)}`,
  ];
  console.log(lines.join('\n'));
  const ok = convergeMs !== undefined && state.identical && state.totals.findings === 0 && o.unresolved.length === 0;
  console.log(ok ? 'PASS: converged, 0 diverged rows' : 'FAIL');
  if (!ok) process.exitCode = 1;
} catch (err) {
  console.error(`FAIL: ${err instanceof Error ? err.message : String(err)}`);
  if (err instanceof ReplicatorExitError) console.error(err.exit.logTail.join('\n'));
  process.exitCode = 1;
} finally {
  await replicator?.stop().catch(() => undefined);
  await proxy.stop();
  await Promise.all(servers.map((s) => s.destroy()));
}
