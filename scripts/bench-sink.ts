// Sink throughput against the physical limit. In one run and on the same generated rows (each
// method on a fresh table), per batch size:
//   (a) bare multi-row REPLACE        — what a non-LWW apply costs: the baseline;
//   (b) bare LWW upsert statement     — the project's statement (src/sql/dml.ts) executed directly;
//   (c) the sink (LWW)                — everything around the statement: tombstones, checkpoint, JS;
//   (d) the sink in bypass mode       — the same sink writing REPLACE INTO;
//   (e) the sink on an installed table — as every real target is: the project's triggers fire for
//       each row the sink writes (they tell its session and keep its versions), which (a)-(d),
//       like native replication, do not pay. Method `installed`.
// (a) and (b) are one autocommitted statement per batch, like the sink's one commit per batch.
// Median of --rounds rounds; the order of the methods rotates per round so none always runs first.
// Machines here are shared and noisy: compare ratios within one run, not absolute rates across runs.
//   npm run bench:sink -- [--engine mysql|mariadb] [--rows 40000] [--rounds 3] [--batches 1,32,256,1024] [--apply-workers 1] [--statement-times]
// --cpu-prof DIR writes a V8 CPU profile of each timed sink run (only the timed part; summarise
// one with scripts/cpu-profile-top.ts).
// --statement-times prints, per timed run, the server's own time per statement kind (its slow log at
// long_query_time 0, as a table): where a batch's server time goes, apart from the client's.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Connection } from 'mysql2/promise';
import { connect } from '../src/db/connection.ts';
import { seededRandom } from '../src/harness/random.ts';
import { createSink, type SourceTransactionInput } from '../src/index.ts';
import { install } from '../src/install/install.ts';
import { ensureMetaSchema, ensureTombstoneTable } from '../src/install/provision.ts';
import type { Dialect } from '../src/sql/dialect.ts';
import { lwwUpsert, replaceRows, type SqlValue, type Statement } from '../src/sql/dml.ts';
import { quoteIdent } from '../src/sql/quote.ts';
import { startServers } from '../src/servers/index.ts';
import { shapesOf } from '../src/writer/apply.ts';
import { loadTableMeta } from '../src/writer/table-metadata.ts';
import { profiledInto } from './cpu-profile.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mysql' },
    rows: { type: 'string', default: '40000' },
    rounds: { type: 'string', default: '3' },
    batches: { type: 'string', default: '1,32,256,1024' },
    // A subset of methods (e.g. `sink` under `node --cpu-prof`); ratios need `replace` in the set.
    methods: { type: 'string', default: 'replace,upsert,sink,bypass' },
    // Batch 1 is one commit per row: fewer rows keep the run short (rates, not totals, are compared).
    'rows-batch1': { type: 'string', default: '2000' },
    'cpu-prof': { type: 'string' },
    // The sink's apply workers (sink and bypass methods); 1 is one connection, as the baselines.
    'apply-workers': { type: 'string', default: '1' },
    'statement-times': { type: 'boolean', default: false },
  },
});
const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const dialect: Dialect = engine;
const ROWS = Number(values.rows);
const ROUNDS = Number(values.rounds);
const BATCH_SIZES = values.batches.split(',').map(Number);
const META = 'lww_meta';

type Change = SourceTransactionInput['changes'][number];
type Method = 'replace' | 'upsert' | 'sink' | 'bypass' | 'installed';
const ALL_METHODS: readonly Method[] = ['replace', 'upsert', 'sink', 'bypass', 'installed'];
const METHODS = values.methods.split(',').filter((m): m is Method => (ALL_METHODS as readonly string[]).includes(m));

function changeSet(db: string, n: number): Change[] {
  const random = seededRandom(42);
  const out: Change[] = [];
  let next = 1;
  for (let i = 0; i < n; i++) {
    const update = next > 100 && random() < 0.3;
    const id = update ? 1 + Math.floor(random() * (next - 1)) : next++;
    const after = { id, a: Math.floor(random() * 1e6), b: `value-${i}-${random().toString(36).slice(2)}`, c: random() * 1000, d: '2024-05-06 07:08:09.123456' };
    out.push({ schema: db, table: 't', op: update ? 'update' : 'insert', after, version: BigInt(1_000_000 + i) << 10n });
  }
  return out;
}

const [server] = await startServers({ engine, count: 1 });
const url = server!.url;
const admin = await connect(url);
let dbSeq = 0;
async function freshTable(installed = false): Promise<string> {
  const db = `bench_${++dbSeq}`;
  await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(db)}`);
  await admin.query(`CREATE DATABASE ${quoteIdent(db)}`);
  await admin.query(
    `CREATE TABLE ${quoteIdent(db)}.t (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, b VARCHAR(64) NOT NULL, c DOUBLE NOT NULL, d DATETIME(6) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)`,
  );
  if (installed) await install({ url, nodeId: 1, metaSchema: META, tables: [{ schema: db, table: 't' }] });
  return db;
}

function elapsedSince(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/** This process's CPU time (all threads, µs) per change of the last timed part: the client's cost, which waiting on a loaded server does not inflate. */
let cpuPerChange = Number.NaN;
function cpuSince(start: NodeJS.CpuUsage, changes: number): void {
  const used = process.cpuUsage(start);
  cpuPerChange = (used.user + used.system) / changes;
}

let profiled = 0;
/** Profiles the timed part of a sink run into --cpu-prof DIR (this process's main thread only). */
async function profiling<T>(name: string, body: () => Promise<T>): Promise<T> {
  const dir = values['cpu-prof'];
  return profiledInto(dir ? join(dir, `${String(++profiled).padStart(2, '0')}-${engine}-${name}.cpuprofile`) : undefined, body);
}

async function viaSink(changes: Change[], batch: number, bypass: boolean): Promise<number> {
  const sink = createSink({
    target: url,
    batch: { maxRows: batch, maxDelayMs: 5 },
    applyWorkers: Number(values['apply-workers']),
    failpoints: bypass ? 'mysqlSinkBypassLWW=return(true)' : '',
  });
  // Warm-up outside the timing: metadata, tombstone table, checkpoint claim.
  await sink.write({ sourceId: 'bench', position: '0', changes: [] });
  await sink.flush();
  const secs = await profiling(`${bypass ? 'bypass' : 'sink'}-batch${batch}`, async () => {
    const start = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    for (let i = 0; i < changes.length; i += 1) {
      await sink.write({ sourceId: 'bench', position: String(i + 1), changes: [changes[i]!] });
    }
    await sink.flush();
    cpuSince(cpu, changes.length);
    return elapsedSince(start);
  });
  await sink.close();
  return changes.length / secs;
}

/** One statement per batch of rows, autocommitted, on one connection: no sink around it. */
async function bare(conn: Connection, db: string, changes: Change[], batch: number, build: (rows: SqlValue[][]) => Statement): Promise<number> {
  const meta = await loadTableMeta(conn, db, 't', '_lww_ts');
  const rows = changes.map((c) => meta.writableColumns.map((col) => (col === meta.versionColumn ? c.version.toString() : ((c.after as Record<string, SqlValue>)[col] ?? null))));
  // Statement text built outside the timing, as a prepared statement would be.
  const statements = [];
  for (let i = 0; i < rows.length; i += batch) statements.push(build(rows.slice(i, i + batch)));
  const start = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  for (const s of statements) await conn.execute(s.sql, s.values);
  cpuSince(cpu, changes.length);
  return changes.length / elapsedSince(start);
}

/** Server-side statement preparations and executions per 1,000 changes of the last timed run (each PREPARE is a round trip and a parse). */
let preparesPerK = Number.NaN;
let executesPerK = Number.NaN;
/** Bytes the server received per change (statement texts, parameters, protocol): what the client had to encode and send. */
let bytesPerChange = Number.NaN;
async function statementCounts(): Promise<{ prepare: number; execute: number; received: number }> {
  const [rows] = (await admin.query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute', 'Bytes_received')")) as unknown as [Array<{ Variable_name: string; Value: string }>];
  const of = (name: string) => Number(rows.find((r) => r.Variable_name === name)?.Value ?? Number.NaN);
  return { prepare: of('Com_stmt_prepare'), execute: of('Com_stmt_execute'), received: of('Bytes_received') };
}

/** What a logged statement is, from its text (the sink's statements and the baselines'). */
function statementKind(sql: string): string {
  const s = sql.replace(/\s+/g, ' ').trimStart();
  if (/^COMMIT/i.test(s)) return 'COMMIT';
  if (/^(START TRANSACTION|BEGIN)/i.test(s)) return 'BEGIN';
  if (/^REPLACE/i.test(s)) return 'REPLACE';
  if (/^INSERT/i.test(s)) return /ON DUPLICATE KEY UPDATE/i.test(s) ? (/^INSERT INTO `?lww_meta/.test(s) ? 'upsert lww_meta' : 'LWW upsert') : 'INSERT';
  if (/^UPDATE/i.test(s)) return /^UPDATE `?lww_meta/.test(s) ? 'UPDATE lww_meta (checkpoint)' : 'UPDATE';
  if (/^DELETE/i.test(s)) return 'DELETE (tombstone guard)';
  if (/^SELECT/i.test(s)) return /FOR UPDATE|LOCK IN SHARE MODE/i.test(s) ? 'SELECT locking (tombstones)' : 'SELECT';
  if (/^SET/i.test(s)) return 'SET';
  return s.split(' ')[0]!.toUpperCase();
}

async function slowLogOn(): Promise<void> {
  await admin.query("SET GLOBAL log_output = 'TABLE', GLOBAL long_query_time = 0, GLOBAL slow_query_log = 1");
  await admin.query('TRUNCATE TABLE mysql.slow_log');
}

/** Server time per statement kind of the timed run, from mysql.slow_log (this admin session's own statements excluded). */
async function slowLogOff(label: string): Promise<void> {
  await admin.query('SET GLOBAL slow_query_log = 0');
  const [rows] = (await admin.query(
    'SELECT CONCAT(LEFT(CAST(sql_text AS CHAR), 200), \' … \', RIGHT(CAST(sql_text AS CHAR), 300), IF(LOCATE(\'ON DUPLICATE KEY UPDATE\', sql_text) > 0, \' ON DUPLICATE KEY UPDATE\', \'\')) AS sql_text, TIME_TO_SEC(query_time) AS secs, TIME_TO_SEC(lock_time) AS lock_secs FROM mysql.slow_log WHERE thread_id <> CONNECTION_ID()',
  )) as unknown as [Array<{ sql_text: string; secs: string | number; lock_secs: string | number }>];
  const byKind = new Map<string, { n: number; ms: number }>();
  for (const r of rows) {
    const kind = statementKind(r.sql_text);
    const e = byKind.get(kind) ?? { n: 0, ms: 0 };
    e.n++;
    e.ms += Number(r.secs) * 1000;
    byKind.set(kind, e);
  }
  const total = [...byKind.values()].reduce((a, e) => a + e.ms, 0);
  const parts = [...byKind.entries()].sort((a, b) => b[1].ms - a[1].ms).map(([kind, e]) => `${kind} ${e.ms.toFixed(0)} ms (${e.n})`);
  console.log(`  server time, ${label}: ${total.toFixed(0)} ms = ${parts.join(', ')}`);
  await admin.query('TRUNCATE TABLE mysql.slow_log');
}

async function measure(method: Method, batch: number, n: number): Promise<number> {
  const before = await statementCounts();
  if (values['statement-times']) await slowLogOn();
  try {
    return await measureRun(method, batch, n);
  } finally {
    if (values['statement-times']) await slowLogOff(`${method} batch ${batch}`);
    const after = await statementCounts();
    preparesPerK = ((after.prepare - before.prepare) * 1000) / n;
    executesPerK = ((after.execute - before.execute) * 1000) / n;
    bytesPerChange = (after.received - before.received) / n;
  }
}

async function measureRun(method: Method, batch: number, n: number): Promise<number> {
  const db = await freshTable(method === 'installed');
  const changes = changeSet(db, n);
  try {
    if (method === 'sink' || method === 'bypass' || method === 'installed') return await viaSink(changes, batch, method === 'bypass');
    const conn = await connect(url);
    try {
      const meta = await loadTableMeta(conn, db, 't', '_lww_ts');
      await ensureMetaSchema(conn, META);
      await ensureTombstoneTable(conn, META, meta);
      const s = shapesOf(meta, META);
      return await bare(conn, db, changes, batch, (rows) => (method === 'replace' ? replaceRows(s.table, rows) : lwwUpsert(s.table, rows, dialect)));
    } finally {
      await conn.end();
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(db)}`);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
// A method left out with --methods prints a dash, not NaN.
const k = (x: number) => (Number.isNaN(x) ? '—' : `${(x / 1000).toFixed(1)}k`);
const ratio = (a: number, b: number) => (Number.isNaN(a / b) ? '—' : Number((a / b).toFixed(2)));

try {
  const [[version]] = (await admin.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
  console.log(
    `bench:sink on ${engine} ${version!.v}: ${ROWS} changes per run (batch 1: ${values['rows-batch1']}), 30% updates, median of ${ROUNDS} rounds, sink apply workers ${values['apply-workers']}`,
  );
  const table: Array<Record<string, string | number>> = [];
  for (const batch of BATCH_SIZES) {
    const n = batch === 1 ? Math.min(ROWS, Number(values['rows-batch1'])) : ROWS;
    const rates = new Map<Method, number[]>(METHODS.map((m) => [m, []]));
    const cpus = new Map<Method, number[]>(METHODS.map((m) => [m, []]));
    const statements = new Map<Method, string[]>(METHODS.map((m) => [m, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let j = 0; j < METHODS.length; j++) {
        const m = METHODS[(j + round) % METHODS.length]!;
        rates.get(m)!.push(await measure(m, batch, n));
        cpus.get(m)!.push(cpuPerChange);
        statements.get(m)!.push(`${preparesPerK.toFixed(1)}/${executesPerK.toFixed(1)}/${bytesPerChange.toFixed(0)}`);
      }
    }
    const med = (m: Method) => (rates.has(m) ? median(rates.get(m)!) : Number.NaN);
    const replace = med('replace');
    table.push({
      batch,
      'REPLACE rows/s': k(replace),
      'LWW stmt rows/s': k(med('upsert')),
      'sink rows/s': k(med('sink')),
      'bypass rows/s': k(med('bypass')),
      'installed rows/s': k(med('installed')),
      'stmt/REPLACE': ratio(med('upsert'), replace),
      'sink/REPLACE': ratio(med('sink'), replace),
      'bypass/REPLACE': ratio(med('bypass'), replace),
      'sink/bypass': ratio(med('sink'), med('bypass')),
      'installed/REPLACE': ratio(med('installed'), replace),
      // Client CPU per change (median): the sink's own JS, mysql2 and this loop; the bare methods show the floor.
      'sink CPU µs/chg': cpus.has('sink') ? Number(median(cpus.get('sink')!).toFixed(1)) : '—',
      'REPLACE CPU µs/chg': cpus.has('replace') ? Number(median(cpus.get('replace')!).toFixed(1)) : '—',
    });
    console.log(`  batch ${batch}: ${METHODS.map((m) => `${m} [${rates.get(m)!.map(k).join(' ')}]`).join(', ')}`);
    console.log(`  batch ${batch} server PREPARE/EXECUTE per 1,000 changes/bytes received per change: ${METHODS.map((m) => `${m} [${statements.get(m)!.join(' ')}]`).join(', ')}`);
    console.log(`  batch ${batch} client CPU µs/change: ${METHODS.map((m) => `${m} [${cpus.get(m)!.map((c) => c.toFixed(1)).join(' ')}]`).join(', ')}`);
  }
  console.table(table);
} finally {
  await admin.end();
  await server!.destroy();
}
