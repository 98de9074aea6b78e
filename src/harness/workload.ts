// Concurrent writers for the harness: sysbench-like oltp_update_non_index and oltp_write_only, and
// a hot-key workload where both sides fight over few keys. Every writer records what each
// acknowledged (committed) write stored — key, version, values or delete — so the harness knows the
// expected final state: per key, the write with the highest version. A commit whose reply never came
// is decided by the transaction's own marker row (outcomes.ts), never guessed and never dropped.
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { connect } from '../db/connection.ts';
import { isConnectionLost, isRetryable } from '../db/retry.ts';
import { tombstoneTableName } from '../model/names.ts';
import { SET_ISOLATION_SQL } from '../sql/generated.ts';
import {
  createDatabaseSql,
  createSbtestSql,
  createWriterMarkersSql,
  insertSbtestLocalRowsSql,
  insertSbtestRowsSql,
  RESET_TIMESTAMP_SQL,
  SET_TIMESTAMP_SQL,
  sbtest,
  writeWriterMarkerSql,
} from '../sql/workload.ts';
import { addTallies, checkMarkers, emptyTally, type InDoubt, newMarker, OutcomeLedger, type OutcomeTally, resolveOutcomes } from './outcomes.ts';
import { type Random, randomInt, seededRandom } from './random.ts';
import { type GeneratedSchema, type GenTable, generateSchema } from './schema-gen.ts';
import { harnessClockMs } from './skew-cost.ts';
import { type LargeTxPlan, largeTransaction, type SessionPlan, type SessionShapeOptions, withDdlColumn } from './session-shapes.ts';
import {
  generatedTransaction,
  type IsolationChoice,
  loadOracleTables,
  OracleUncertainError,
  prepareGeneratedTables,
  type SessionContext,
  sbtestGenTables,
} from './session-gen.ts';

export type WorkloadKind = 'oltp_update_non_index' | 'oltp_write_only' | 'hot_keys';

export interface WorkloadOptions extends SessionShapeOptions {
  kind: WorkloadKind;
  schema: string;
  tables: number;
  rowsPerTable: number;
  /** Writer connections per node. */
  threads: number;
  /** Stop after this long (ms) ... */
  durationMs?: number;
  /** ... or after this many transactions per thread (COMMITs sent), whichever comes first. */
  transactionsPerThread?: number;
  seed: number;
  /** Hot-key workload: how many keys per table the writers fight over. */
  hotKeys?: number;
  /** Key skew for the sysbench workloads: 1 = uniform, larger = more weight on low ids. */
  keySkew?: number;
  versionColumn?: string;
  metaSchema?: string;
  /** Writers' isolation level: one for all, or mixed per transaction (default REPEATABLE READ). */
  isolation?: IsolationChoice;
  /** Generated sessions: explicit multi-statement transactions (snapshot read first, savepoints, upserts, key changes…). */
  explicitTx?: boolean;
  /** Generated schema: random tables from this seed (schema-gen.ts) instead of the sbtest ones; implies generated sessions. */
  schemaGen?: number;
  /** How long a writer keeps trying to decide its unknown commit outcomes after its last transaction (ms, default 60 s). */
  resolveTimeoutMs?: number;
}

/** The harness's own schema: the finish marks (replicated) and the writers' commit markers (not replicated). */
export const HARNESS_SCHEMA = 'harness';

/** Whether the writers run generated sessions (session-gen.ts) rather than the fixed sbtest statements. */
export function usesGeneratedSessions(opts: Pick<WorkloadOptions, 'explicitTx' | 'schemaGen'>): boolean {
  return opts.explicitTx === true || opts.schemaGen !== undefined;
}

/** The tables generated sessions write: the generated schema's, or the sbtest tables described for the generator. */
export function generatedTables(opts: WorkloadOptions): { schema: GeneratedSchema | undefined; tables: GenTable[] } {
  if (opts.schemaGen !== undefined) {
    const schema = generateSchema(opts.schemaGen, { hotKeys: opts.hotKeys });
    return { schema, tables: schema.tables };
  }
  const keys = opts.kind === 'hot_keys' ? Math.min(opts.hotKeys ?? 8, opts.rowsPerTable) : opts.rowsPerTable;
  return { schema: undefined, tables: sbtestGenTables(opts.tables, keys) };
}

export interface RowValues {
  k: number;
  c: string;
  pad: string;
}

export interface AckedWrite {
  node: string;
  table: string;
  /** sbtest: the id; generated sessions: the key's identity under its collation (session-gen.ts). */
  id: number | string;
  version: bigint;
  /** null: the write deleted the key (sbtest; generated sessions leave it null and use text). */
  row: RowValues | null;
  /** Generated sessions: the row's canonical text; null: deleted. */
  text?: string | null;
  /** Generated sessions: how many oracle columns the text holds (a column added later holds its default). */
  width?: number;
  /** Harness clock (ms): when its transaction sent BEGIN, read it back, and had COMMIT answered (skew-cost.ts). */
  begunAt?: number;
  readAt?: number;
  committedAt?: number;
}

export interface WriterStats {
  node: string;
  transactions: number;
  statements: number;
  retries: number;
  reconnects: number;
  /** Commits whose outcome was unknown, decided by their markers (committed ones' writes are in `acked`), or unresolved. */
  outcomes: OutcomeTally;
  acked: AckedWrite[];
  /** Generated sessions: how many times each shape ran (statements, transaction shapes, isolation levels). */
  shapes: Record<string, number>;
}

/**
 * Writer clock skew per node, settable while writers run (the clock-skew fault). A clock ahead is
 * played as every other node's clock behind by as much: the triggers refuse SET TIMESTAMP ahead of
 * the server's clock, and only the nodes' clocks relative to each other decide LWW.
 */
export class ClockSkew {
  private readonly skewMs = new Map<string, number>();
  set(node: string, ms: number): void {
    this.skewMs.set(node, ms);
  }
  /** The offset a node's writers apply (never ahead of the server's clock). */
  get(node: string): number {
    return (this.skewMs.get(node) ?? 0) - Math.max(0, ...this.skewMs.values());
  }
}

const tableName = (i: number) => `sbtest${i + 1}`;

function randomText(random: Random, length: number): string {
  let s = '';
  while (s.length < length) s += Math.floor(random() * 1e12).toString(36);
  return s.slice(0, length);
}

function initialRow(seed: number, table: number, id: number): RowValues {
  const r = seededRandom(seed * 1_000_003 + table * 10_007 + id);
  return { k: randomInt(r, 1, 1_000_000), c: randomText(r, 119), pad: randomText(r, 59) };
}

/** The version every node gives prepared rows, so all nodes start identical. */
export const INITIAL_VERSION = 1n << 10n;

/** Creates the sbtest tables on one node and loads identical rows (with the sink's flag, so no trigger stamps them). */
export async function prepareWorkloadTables(url: string, opts: WorkloadOptions): Promise<void> {
  const versionColumn = opts.versionColumn ?? '_lww_ts';
  const markers = await connect(url);
  try {
    await markers.query(createDatabaseSql(HARNESS_SCHEMA));
    await markers.query(createWriterMarkersSql(HARNESS_SCHEMA));
  } finally {
    await markers.end();
  }
  if (opts.schemaGen !== undefined) return prepareGeneratedTables(url, opts.schema, generatedTables(opts).schema!, versionColumn, INITIAL_VERSION);
  const conn = await connect(url, { init: ['SET @lww_apply = 1'] });
  try {
    await conn.query(createDatabaseSql(opts.schema));
    for (let t = 0; t < opts.tables; t++) {
      await conn.query(createSbtestSql(opts.schema, tableName(t), versionColumn));
      for (let start = 1; start <= opts.rowsPerTable; start += 500) {
        const ids = Array.from({ length: Math.min(500, opts.rowsPerTable - start + 1) }, (_, i) => start + i);
        const values = ids.flatMap((id) => {
          const r = initialRow(opts.seed, t, id);
          return [id, r.k, r.c, r.pad, INITIAL_VERSION.toString()];
        });
        await conn.query(insertSbtestRowsSql(opts.schema, tableName(t), versionColumn, ids.length), values);
      }
    }
  } finally {
    await conn.end();
  }
}

/**
 * Loads the sbtest rows into tables that are already installed, as sysbench's prepare does: local
 * writes (multi-row INSERTs of 500 rows, autocommitted) that the triggers stamp with this node's
 * versions, so a peer learns them only through replication. Tables are spread over `connections`
 * connections. Returns the rows inserted.
 */
export async function insertWorkloadRows(url: string, opts: Pick<WorkloadOptions, 'schema' | 'tables' | 'rowsPerTable' | 'seed'>, connections = 4): Promise<number> {
  let next = 0;
  let inserted = 0;
  const worker = async () => {
    const conn = await connect(url);
    try {
      for (let t = next++; t < opts.tables; t = next++) {
        for (let start = 1; start <= opts.rowsPerTable; start += 500) {
          const ids = Array.from({ length: Math.min(500, opts.rowsPerTable - start + 1) }, (_, i) => start + i);
          const values = ids.flatMap((id) => {
            const r = initialRow(opts.seed, t, id);
            return [id, r.k, r.c, r.pad];
          });
          await conn.query(insertSbtestLocalRowsSql(opts.schema, tableName(t), ids.length), values);
          inserted += ids.length;
        }
      }
    } finally {
      await conn.end();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(connections, opts.tables)) }, worker));
  return inserted;
}

export function workloadTables(opts: Pick<WorkloadOptions, 'schema' | 'tables' | 'schemaGen' | 'hotKeys'>): string[] {
  if (opts.schemaGen !== undefined) return generateSchema(opts.schemaGen, { hotKeys: opts.hotKeys }).tables.map((t) => `${opts.schema}.${t.name}`);
  return Array.from({ length: opts.tables }, (_, t) => `${opts.schema}.${tableName(t)}`);
}

interface Touch {
  table: string;
  id: number;
}

/** One transaction's statements, chosen by the workload kind. Returns the keys it changed. */
async function runTransaction(conn: Connection, random: Random, opts: WorkloadOptions): Promise<{ touched: Touch[]; statements: number }> {
  const t = randomInt(random, 0, opts.tables);
  const table = tableName(t);
  const s = opts.schema;
  const pickId = () => {
    if (opts.kind === 'hot_keys') return randomInt(random, 1, (opts.hotKeys ?? 8) + 1);
    const skew = opts.keySkew ?? 1;
    return 1 + Math.floor(opts.rowsPerTable * random() ** skew);
  };
  const touched: Touch[] = [];
  let statements = 0;
  const exec = async (sql: string, values: unknown[]) => {
    statements++;
    const [res] = await conn.execute<ResultSetHeader>(sql, values as never[]);
    return res.affectedRows;
  };
  const reinsert = async (id: number) => {
    await exec(sbtest.delete(s, table), [id]);
    await exec(sbtest.insert(s, table), [id, randomInt(random, 1, 1_000_000), randomText(random, 119), randomText(random, 59)]);
    touched.push({ table, id });
  };
  switch (opts.kind) {
    case 'oltp_update_non_index': {
      const id = pickId();
      if ((await exec(sbtest.updateNonIndex(s, table), [randomText(random, 119), id])) > 0) touched.push({ table, id });
      break;
    }
    case 'oltp_write_only': {
      const [a, b, c] = [pickId(), pickId(), pickId()];
      if ((await exec(sbtest.updateIndex(s, table), [a])) > 0) touched.push({ table, id: a });
      if ((await exec(sbtest.updateNonIndex(s, table), [randomText(random, 119), b])) > 0) touched.push({ table, id: b });
      await reinsert(c);
      break;
    }
    case 'hot_keys': {
      const id = pickId();
      const r = random();
      if (r < 0.6) {
        if ((await exec(sbtest.updateNonIndex(s, table), [randomText(random, 119), id])) > 0) touched.push({ table, id });
      } else if (r < 0.8) {
        if ((await exec(sbtest.delete(s, table), [id])) > 0) touched.push({ table, id });
      } else {
        await reinsert(id);
      }
      break;
    }
  }
  return { touched, statements };
}

/** What this transaction stored for each key it touched, read inside the transaction. */
async function readOwnWrites(conn: Connection, opts: WorkloadOptions, node: string, touched: Touch[]): Promise<AckedWrite[]> {
  const versionColumn = opts.versionColumn ?? '_lww_ts';
  const meta = opts.metaSchema ?? 'lww_meta';
  const out = new Map<string, AckedWrite>();
  for (const { table, id } of touched) {
    const [rows] = await conn.execute<RowDataPacket[]>(sbtest.read(opts.schema, table, versionColumn), [id]);
    if (rows[0]) {
      const r = rows[0];
      out.set(`${table}/${id}`, { node, table, id, version: BigInt(r.v as string), row: { k: Number(r.k), c: String(r.c), pad: String(r.pad) } });
      continue;
    }
    const [tomb] = await conn.execute<RowDataPacket[]>(sbtest.readTombstone(meta, tombstoneTableName(opts.schema, table), versionColumn), [id]);
    if (!tomb[0]) throw new Error(`${opts.schema}.${table} id ${id} was deleted but has no tombstone: are the triggers installed?`);
    out.set(`${table}/${id}`, { node, table, id, version: BigInt(tomb[0].v as string), row: null });
  }
  return [...out.values()];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs `opts.threads` writers against one node until the duration or transaction budget is used. */
export async function runWriters(
  node: { name: string; url: string },
  opts: WorkloadOptions,
  control: WriterControl = { stopped: false },
): Promise<WriterStats> {
  const startedAt = Date.now();
  const stats: WriterStats = { node: node.name, transactions: 0, statements: 0, retries: 0, reconnects: 0, outcomes: emptyTally(), acked: [], shapes: {} };
  const session = usesGeneratedSessions(opts) ? await sessionContext(node.url, opts) : undefined;
  const isolation = opts.isolation ?? 'repeatable-read';
  const deadline = opts.durationMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + opts.durationMs;
  const budget = opts.transactionsPerThread ?? Number.POSITIVE_INFINITY;
  const seedBase = opts.seed * 7919 + [...node.name].reduce((n, ch) => n * 31 + ch.charCodeAt(0), 0);
  const ledgers: Array<OutcomeLedger<AckedWrite>> = [];

  const thread = async (index: number) => {
    const random = seededRandom(seedBase + index * 104_729);
    // This thread's large transactions, in time order; each stays due until it commits.
    const large = (session ? (control.plan?.large ?? []) : []).filter((l) => l.node === node.name && l.thread === index).sort((a, b) => a.atMs - b.atMs);
    const ledger = new OutcomeLedger<AckedWrite>((writes) => stats.acked.push(...writes));
    ledgers.push(ledger);
    let conn: Connection | null = null;
    let done = 0;
    let inDoubt: InDoubt<AckedWrite> | undefined;
    let nextCheck = 0;
    while (done < budget && Date.now() < deadline && !control.stopped) {
      try {
        if (!conn) {
          conn = await connect(node.url, { connectTimeoutMs: 2000 });
          await conn.query(SET_ISOLATION_SQL[isolation === 'mixed' ? 'repeatable-read' : isolation]);
        }
        if (ledger.size > 0 && Date.now() >= nextCheck) {
          // The node answers again: decide what is pending (a still-undecided one waits for a later look).
          if (!(await checkMarkers(node.url, HARNESS_SCHEMA, ledger))) nextCheck = Date.now() + 1000;
        }
        const skewMs = control.skew?.get(node.name) ?? 0;
        if (skewMs !== 0) await conn.execute(SET_TIMESTAMP_SQL, [(Date.now() + skewMs) / 1000]);
        else await conn.query(RESET_TIMESTAMP_SQL);
        let level: keyof typeof SET_ISOLATION_SQL = isolation === 'mixed' ? 'repeatable-read' : isolation;
        if (isolation === 'mixed') {
          // SET TRANSACTION (no SESSION) applies to the next transaction only.
          level = random() < 0.5 ? 'read-committed' : 'repeatable-read';
          await conn.query(SET_ISOLATION_SQL[level].replace('SESSION ', ''));
        }
        if (session && control.ddlAdded && !session.ddlApplied) {
          // Every node has the added column now: write it and read it from here on.
          withDdlColumn(session, control.ddlAdded);
          session.ddlApplied = true;
        }
        const due: LargeTxPlan | undefined = large[0] && Date.now() - startedAt >= large[0].atMs ? large[0] : undefined;
        const begunAt = harnessClockMs();
        await conn.query('BEGIN');
        const { writes, statements } = due
          ? await largeSessionTransaction(conn, due, session!, node.name)
          : session
            ? await sessionTransaction(conn, random, session, node.name, level)
            : await sbtestTransaction(conn, random, opts, node.name);
        // Real times for the skew-cost count (skew-cost.ts): read back before COMMIT, committed when it answers.
        const readAt = harnessClockMs();
        for (const w of writes) {
          w.begunAt = begunAt;
          w.readAt = readAt;
        }
        // The marker, last before COMMIT: whether this row exists later says whether the transaction committed.
        const marker = newMarker();
        await conn.execute(writeWriterMarkerSql(HARNESS_SCHEMA), [marker]);
        inDoubt = { marker, node: node.name, writes, error: '', at: Date.now() };
        await conn.query('COMMIT');
        inDoubt = undefined;
        const committedAt = harnessClockMs();
        for (const w of writes) w.committedAt = committedAt;
        if (due) large.shift();
        stats.acked.push(...writes);
        stats.statements += statements;
        stats.transactions++;
        done++;
      } catch (err) {
        if (inDoubt) {
          // COMMIT was sent and did not answer OK (lost connection, or an error): only the marker can tell.
          const e = err as { code?: string; message?: string };
          ledger.add({ ...inDoubt, error: `${e.code ?? 'error'}: ${e.message ?? String(err)}` });
          inDoubt = undefined;
          nextCheck = 0;
          done++; // its COMMIT was sent: it counts against the budget, whatever it turns out to be
        }
        // The oracle could not be sure what the transaction changed, or the triggers asked for a retry
        // (SQLSTATE 40001: a replicated delete raced a local insert): roll back and go again.
        const retryState = err instanceof OracleUncertainError ? 'oracle:uncertain-retried' : (err as { sqlState?: string }).sqlState === '40001' ? 'retry:40001' : undefined;
        if (conn && retryState) {
          await conn.query('ROLLBACK').catch(() => undefined);
          stats.retries++;
          session?.shapes.set(retryState, (session.shapes.get(retryState) ?? 0) + 1);
          continue;
        }
        if (conn && isConnectionLost(err)) {
          conn.destroy();
          conn = null;
          stats.reconnects++;
          await sleep(200);
          continue;
        }
        if (!conn) {
          // Cannot connect (server stopped by a fault): wait and try again.
          stats.reconnects++;
          await sleep(200);
          continue;
        }
        await conn.query('ROLLBACK').catch(() => undefined);
        if (isRetryable(err)) {
          stats.retries++;
          continue;
        }
        conn.destroy();
        throw err;
      }
    }
    await conn?.end().catch(() => undefined);
  };
  await Promise.all(Array.from({ length: opts.threads }, (_, i) => thread(i)));
  // After the last transaction: keep looking until every outcome is decided or the bound runs out.
  await Promise.all(ledgers.map((l) => resolveOutcomes(node.url, HARNESS_SCHEMA, l, opts.resolveTimeoutMs ?? 60_000, () => control.stopped)));
  stats.outcomes = addTallies(ledgers.map((l) => l.tally));
  if (session) {
    stats.shapes = Object.fromEntries([...session.shapes].sort(([a], [b]) => a.localeCompare(b)));
    stats.shapes[`isolation:${isolation}`] = stats.transactions;
  }
  return stats;
}

/** What the harness tells running writers: stop, clock skew, the planned session shapes, DDL that every node has. */
export interface WriterControl {
  stopped: boolean;
  skew?: ClockSkew;
  /** Large transactions to run (generated sessions), by node and thread. */
  plan?: SessionPlan;
  /** Set once every node has the DDL plan's added column. */
  ddlAdded?: NonNullable<SessionPlan['ddl']>;
}

/** The generated sessions' context on one node: the tables, and the oracle's typed view of them. */
async function sessionContext(url: string, opts: WorkloadOptions): Promise<SessionContext & { ddlApplied?: boolean }> {
  const versionColumn = opts.versionColumn ?? '_lww_ts';
  const metaSchema = opts.metaSchema ?? 'lww_meta';
  const { tables } = generatedTables(opts);
  const conn = await connect(url);
  try {
    const oracle = await loadOracleTables(conn, opts.schema, tables.map((t) => t.name), versionColumn, metaSchema);
    return { schema: opts.schema, metaSchema, versionColumn, tables, oracle, explicitTx: opts.explicitTx ?? false, timeZones: opts.schemaGen !== undefined, shapes: new Map() };
  } finally {
    await conn.end();
  }
}

async function sessionTransaction(conn: Connection, random: Random, ctx: SessionContext, node: string, level: string): Promise<{ writes: AckedWrite[]; statements: number }> {
  ctx.shapes.set(`tx-isolation:${level}`, (ctx.shapes.get(`tx-isolation:${level}`) ?? 0) + 1);
  const { writes, statements } = await generatedTransaction(conn, random, ctx, node);
  return { writes: writes.map((w) => ({ node: w.node, table: w.table, id: w.id, version: w.version, row: null, text: w.text, width: w.width })), statements };
}

async function largeSessionTransaction(conn: Connection, plan: LargeTxPlan, ctx: SessionContext, node: string): Promise<{ writes: AckedWrite[]; statements: number }> {
  const { writes, statements } = await largeTransaction(conn, plan, ctx, node);
  return { writes: writes.map((w) => ({ node: w.node, table: w.table, id: w.id, version: w.version, row: null, text: w.text, width: w.width })), statements };
}

async function sbtestTransaction(conn: Connection, random: Random, opts: WorkloadOptions, node: string): Promise<{ writes: AckedWrite[]; statements: number }> {
  const { touched, statements } = await runTransaction(conn, random, opts);
  return { writes: await readOwnWrites(conn, opts, node, touched), statements };
}

export interface ExpectedRow {
  version: bigint;
  row: RowValues | null;
}

/** Per `table/id`, the state LWW must converge to: the acknowledged write with the highest version. */
export function expectedState(opts: WorkloadOptions, acked: Iterable<AckedWrite>): Map<string, ExpectedRow> {
  const expected = new Map<string, ExpectedRow>();
  for (let t = 0; t < opts.tables; t++) {
    for (let id = 1; id <= opts.rowsPerTable; id++) {
      expected.set(`${tableName(t)}/${id}`, { version: INITIAL_VERSION, row: initialRow(opts.seed, t, id) });
    }
  }
  for (const w of acked) {
    const key = `${w.table}/${w.id}`;
    const cur = expected.get(key);
    if (!cur || w.version > cur.version) expected.set(key, { version: w.version, row: w.row });
  }
  return expected;
}
