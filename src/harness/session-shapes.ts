// Session shapes beyond the generated transactions (issue #15), each planned from the seed so a seed
// reproduces the run's plan:
//
// - a large transaction (10k–200k rows, default 10k–50k, one per run): multi-row INSERTs of fresh
//   keys (no other writer names them), a delete of every tenth, a few values of megabytes in a
//   MEDIUM* or JSON column when the table has one, and a generated transaction's statements on the
//   hot keys at its end; the oracle reads every key back before COMMIT, as for any transaction;
// - DDL while the writers run (`ddl`): ADD COLUMN with a default, then a column reorder (MODIFY …
//   FIRST/AFTER), each on every node one after the other, as the README tells operators (schema
//   changes are not replicated; a change naming a column the target lacks is held back until the
//   DDL arrives there). Writers start writing the new column once every node has it;
// - a session that sets what the replicator must refuse (`refusedSetting`): binlog_format=STATEMENT
//   and a write (binlog_row_image MINIMAL/NOBLOB is repaired, not refused: README). The run passes
//   only when the replicator stops loudly naming that cause.
import type { Connection } from 'mysql2/promise';
import { connect } from '../db/connection.ts';
import { isConnectionLost, isRetryable } from '../db/retry.ts';
import { addIntColumnSql, bumpCounterSql, columnDdl, deleteByKeysSql, insertRowsSql, moveColumnSql, STATEMENT_FORMAT_SQL } from '../sql/generated.ts';
import { type Random, randomInt, seededRandom } from './random.ts';
import type { GenColumn, GenTable } from './schema-gen.ts';
import { type Candidates, generatedTransaction, type OracleTable, readBack, rowValues, type SeenWrite, type SessionContext } from './session-gen.ts';

/** Rows of a large transaction: the default range, and the most the flag allows. */
export const LARGE_TX_ROWS_DEFAULT: readonly [number, number] = [10_000, 50_000];
export const LARGE_TX_ROWS_MAX = 200_000;

export interface SessionShapeOptions {
  /** Large transactions per run (default 0 here; the CLI gives generated schemas 1). */
  largeTransactions?: number;
  /** Their rows, drawn from [min, max] (default 10k–50k, at most 200k). */
  largeTxRows?: readonly [number, number];
  /** ADD COLUMN and a column reorder on a generated table while the writers run. */
  ddl?: boolean;
  /** A session writes with binlog_format=STATEMENT: the expected outcome is a loud stop. */
  refusedSetting?: boolean;
}

export interface LargeTxPlan {
  node: string;
  /** Which writer thread of the node runs it. */
  thread: number;
  /** When, from the writers' start. */
  atMs: number;
  table: string;
  rows: number;
  /** Every n-th inserted key is deleted again in the same transaction. */
  deleteEvery: number;
  /** Values of megabytes: the column and each value's size (rows 0, 1, … of the transaction). */
  largeValues?: { column: string; bytes: number[] };
  /** Seed of the rows' values (the same content on every attempt). */
  seed: number;
}

export interface DdlPlan {
  table: string;
  /** The added column (INT NOT NULL DEFAULT defaultValue). */
  column: string;
  defaultValue: number;
  /** Nodes in the order the operator runs each statement on them. */
  nodes: string[];
  addAtMs: number;
  /** Between one node's statement and the next node's. */
  gapMs: number;
  moveAtMs: number;
  /** The reorder: this column's definition, moved FIRST (after: null) or AFTER another column. */
  move: { column: string; definition: string; after: string | null };
}

export interface RefusalPlan {
  node: string;
  table: string;
  counter: string;
  setting: 'binlog_format=STATEMENT';
  atMs: number;
}

export interface SessionPlan {
  large: LargeTxPlan[];
  ddl?: DdlPlan;
  refusal?: RefusalPlan;
}

/** The name of the column the DDL shape adds. */
export const DDL_COLUMN = 'x_ddl';

/** A LOB column that holds megabytes (MEDIUM*, LONG*, JSON): the large values' column. */
function largeValueColumn(t: GenTable): GenColumn | undefined {
  return t.columns.find((c) => !c.generated && (c.kind === 'json' || ((c.kind === 'text' || c.kind === 'blob') && /^(MEDIUM|LONG)/i.test(c.type))));
}

/** Columns a reorder may move: plain data columns no key, generated column or foreign key depends on. */
function movableColumns(t: GenTable): GenColumn[] {
  const generatedSources = t.columns.filter((c) => c.generated).map((c) => c.generated!.expression);
  return t.columns.filter(
    (c) =>
      !c.generated &&
      !t.primaryKey.includes(c.name) &&
      !t.uniques.some((u) => u.includes(c.name)) &&
      c.name !== t.foreignKey?.column &&
      !generatedSources.some((e) => e.includes(`\`${c.name}\``)) &&
      ['int', 'bigint_u', 'varchar', 'char', 'varbinary', 'datetime', 'date', 'decimal', 'enum', 'set'].includes(c.kind),
  );
}

/** The plan of a run's extra session shapes, from the seed alone (pure: the same arguments give the same plan). */
export function planSessions(seed: number, tables: readonly GenTable[], nodes: readonly string[], threads: number, durationMs: number, o: SessionShapeOptions): SessionPlan {
  const random = seededRandom(seed * 48_271 + 977);
  const at = (from: number, to: number) => Math.round(durationMs * (from + random() * (to - from)));
  const [min, max] = o.largeTxRows ?? LARGE_TX_ROWS_DEFAULT;
  const large: LargeTxPlan[] = [];
  const withLob = tables.filter((t) => largeValueColumn(t) !== undefined);
  for (let i = 0; i < (o.largeTransactions ?? 0); i++) {
    const t = (withLob.length > 0 ? withLob : tables)[randomInt(random, 0, withLob.length > 0 ? withLob.length : tables.length)]!;
    const lob = largeValueColumn(t);
    large.push({
      node: nodes[randomInt(random, 0, nodes.length)]!,
      thread: randomInt(random, 0, threads),
      atMs: at(0.1, 0.4),
      table: t.name,
      rows: randomInt(random, min, max + 1),
      deleteEvery: 10,
      ...(lob ? { largeValues: { column: lob.name, bytes: Array.from({ length: 3 }, () => randomInt(random, 1 << 20, 4 << 20)) } } : {}),
      seed: Math.floor(random() * 2 ** 31),
    });
  }
  let ddl: DdlPlan | undefined;
  if (o.ddl) {
    const t = tables[randomInt(random, 0, tables.length)]!;
    const order = random() < 0.5 ? [...nodes] : [...nodes].reverse();
    const movable = movableColumns(t);
    const added: GenColumn = { name: DDL_COLUMN, kind: 'int', type: 'INT', nullable: false };
    const moved = movable.length > 0 ? movable[randomInt(random, 0, movable.length)]! : added;
    const others = t.columns.filter((c) => c.name !== moved.name);
    const after = random() < 0.4 ? null : others[randomInt(random, 0, others.length)]!.name;
    const addAtMs = at(0.15, 0.3);
    const gapMs = randomInt(random, 300, 1500);
    const defaultValue = randomInt(random, 1, 1000);
    ddl = {
      table: t.name,
      column: DDL_COLUMN,
      defaultValue,
      nodes: order,
      addAtMs,
      gapMs,
      moveAtMs: addAtMs + gapMs * nodes.length + randomInt(random, 500, 1500),
      move: { column: moved.name, definition: moved === added ? `${columnDdl(added)} DEFAULT ${defaultValue}` : columnDdl(moved), after },
    };
  }
  let refusal: RefusalPlan | undefined;
  if (o.refusedSetting) {
    const t = tables[randomInt(random, 0, tables.length)]!;
    refusal = { node: nodes[randomInt(random, 0, nodes.length)]!, table: t.name, counter: t.counter ?? 'n', setting: 'binlog_format=STATEMENT', atMs: at(0.3, 0.5) };
  }
  return { large, ...(ddl ? { ddl } : {}), ...(refusal ? { refusal } : {}) };
}

const pad2 = (n: number) => String(n).padStart(2, '0');
/** 'YYYY-MM-DD HH:MM:SS' of a UTC instant. */
function utcText(ms: number, date = false): string {
  const d = new Date(ms);
  const day = `${d.getUTCFullYear()}-${pad2(d.getUTCMonth() + 1)}-${pad2(d.getUTCDate())}`;
  return date ? day : `${day} ${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())}`;
}

/**
 * The i-th fresh value of a key column: outside every generated pool (other writers never name it),
 * distinct for i < 200,000 under any collation, and within the column's type.
 */
export function freshKeyValue(col: GenColumn, i: number): unknown {
  switch (col.kind) {
    case 'int':
      return BigInt(10_000_000 + i);
    case 'bigint_u':
      return BigInt(10_000_000_000 + i);
    case 'varchar':
    case 'char':
      return `zz${i.toString(36)}`;
    case 'varbinary': {
      const b = Buffer.alloc(5);
      b[0] = 0x4c;
      b.writeUInt32BE(i, 1);
      return b;
    }
    case 'datetime':
      return utcText(Date.UTC(2150, 0, 1) + i * 1000);
    case 'timestamp':
      // Inside TIMESTAMP's range, past the pools' 2001–2030, whatever the session's time zone.
      return utcText(Date.UTC(2035, 0, 2) + i * 1000);
    case 'date':
      return utcText(Date.UTC(2200, 0, 1) + i * 86_400_000, true);
    case 'decimal':
      return String(1_000_000 + i);
    default:
      throw new Error(`no fresh key values for a ${col.kind} key column`);
  }
}

/** The i-th fresh key tuple of a table: the first key column fresh, the others from the pool's first tuple. */
export function freshKey(t: GenTable, i: number): unknown[] {
  const first = t.columns.find((c) => c.name === t.primaryKey[0])!;
  return [freshKeyValue(first, i), ...(t.keyPool[0] ?? []).slice(1)];
}

function largeValue(col: GenColumn, bytes: number, random: Random): unknown {
  const text = () => {
    const unit = Math.floor(random() * 1e12).toString(36).padEnd(8, 'q');
    return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
  };
  if (col.kind === 'json') return JSON.stringify({ big: text().slice(0, bytes - 12), n: bytes });
  if (col.kind === 'blob') {
    const b = Buffer.alloc(bytes);
    for (let i = 0; i < bytes; i += 4096) b[i] = randomInt(random, 0, 256);
    return b;
  }
  return text();
}

const INSERT_ROWS = 500;
const DELETE_KEYS = 200;

/**
 * The large transaction on an open transaction: fresh rows inserted (some with values of megabytes),
 * every n-th deleted again, then a generated transaction's statements; what it wrote is read back
 * before COMMIT (the oracle), bulk keys in chunks of 500.
 */
export async function largeTransaction(conn: Connection, plan: LargeTxPlan, ctx: SessionContext, node: string): Promise<{ writes: SeenWrite[]; statements: number }> {
  const t = ctx.tables.find((x) => x.name === plan.table)!;
  const o = ctx.oracle.get(t.name)!;
  const random = seededRandom(plan.seed);
  const writable = t.columns.filter((c) => !c.generated);
  const names = writable.map((c) => c.name);
  const lob = plan.largeValues ? t.columns.find((c) => c.name === plan.largeValues!.column) : undefined;
  // Bulk rows keep LOB and JSON values small (the schema's own reach 100 KB): the size is in the row count, and in the few large values.
  const bulkTable: GenTable = { ...t, columns: t.columns.map((c) => (['text', 'blob', 'json'].includes(c.kind) ? { ...c, length: Math.min(c.length ?? 100, 100) } : c)) };
  let statements = 0;
  const keys: unknown[][] = [];
  const rowOf = (i: number): unknown[] => {
    const key = freshKey(t, i);
    keys.push(key);
    const values = rowValues(bulkTable, key, random, ctx.tables);
    // Fresh rows reference no parent and hold no UNIQUE value: nothing of theirs can clash.
    if (t.foreignKey) values.set(t.foreignKey.column, null);
    for (const u of t.uniques) for (const c of u) values.set(c, null);
    if (lob && i < plan.largeValues!.bytes.length) values.set(lob.name, largeValue(lob, plan.largeValues!.bytes[i]!, random));
    return names.map((n) => values.get(n));
  };
  let i = 0;
  // The rows with large values one statement each (a statement stays far below max_allowed_packet).
  for (; lob && i < plan.largeValues!.bytes.length && i < plan.rows; i++) {
    await conn.query(insertRowsSql(ctx.schema, t.name, 'INSERT', names, 1), rowOf(i));
    statements++;
    ctx.shapes.set('value:large', (ctx.shapes.get('value:large') ?? 0) + 1);
  }
  while (i < plan.rows) {
    const n = Math.min(INSERT_ROWS, plan.rows - i);
    const values: unknown[] = [];
    for (let j = 0; j < n; j++) values.push(...rowOf(i + j));
    await conn.query(insertRowsSql(ctx.schema, t.name, 'INSERT', names, n), values);
    statements++;
    i += n;
  }
  const doomed = keys.filter((_, k) => k % plan.deleteEvery === plan.deleteEvery - 1);
  for (let k = 0; k < doomed.length; k += DELETE_KEYS) {
    const chunk = doomed.slice(k, k + DELETE_KEYS);
    await conn.query(deleteByKeysSql(ctx.schema, t.name, o.key, chunk.length), chunk.flat());
    statements++;
  }
  // Hot keys too, at the end (their locks are held only briefly).
  const tail = await generatedTransaction(conn, random, ctx, node);
  const cand: Candidates = { byTable: new Map([[t.name, keys]]) };
  const bulk = await readBack(conn, ctx, cand, node, 500);
  ctx.shapes.set('tx:large', (ctx.shapes.get('tx:large') ?? 0) + 1);
  ctx.shapes.set('tx:large-rows', (ctx.shapes.get('tx:large-rows') ?? 0) + plan.rows);
  ctx.shapes.set('tx:large-deletes', (ctx.shapes.get('tx:large-deletes') ?? 0) + doomed.length);
  return { writes: [...bulk, ...tail.writes], statements: statements + tail.statements };
}

/** The oracle's tables once every node has the added column: it reads it last, after the start's columns, its default standing in for texts read before. */
export function oracleWithDdlColumn(oracle: ReadonlyMap<string, OracleTable>, plan: DdlPlan): Map<string, OracleTable> {
  const out = new Map(oracle);
  const o = out.get(plan.table)!;
  out.set(plan.table, {
    ...o,
    columns: [...o.columns, { name: plan.column, dataType: 'int', columnType: 'int', json: false, collation: null }],
    appended: [...(o.appended ?? []), String(plan.defaultValue)],
  });
  return out;
}

/** The session context once every node has the added column: writers write it, the oracle reads it. */
export function withDdlColumn(ctx: SessionContext, plan: DdlPlan): void {
  const col: GenColumn = { name: plan.column, kind: 'int', type: 'INT', nullable: false };
  ctx.tables = ctx.tables.map((t) => (t.name === plan.table ? { ...t, columns: [...t.columns, col] } : t));
  ctx.oracle = oracleWithDdlColumn(ctx.oracle, plan);
}

const sleepUntil = (at: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const ms = at - Date.now();
    if (ms <= 0 || signal.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/** One DDL statement on a node, retried while the node cannot be reached (a fault may have stopped it). */
async function onNode(url: string, sql: string, signal: AbortSignal): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    let conn: Connection | undefined;
    try {
      conn = await connect(url, { connectTimeoutMs: 2000 });
      await conn.query(sql);
      return;
    } catch (err) {
      if (attempt >= 60 || signal.aborted || !(isConnectionLost(err) || conn === undefined)) throw err;
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      await conn?.end().catch(() => undefined);
    }
  }
}

export interface DdlOutcome {
  /** Statements run, each with the node and when (ms from the writers' start). */
  statements: Array<{ node: string; sql: string; atMs: number }>;
  error?: string;
}

/**
 * Runs the DDL plan as an operator would: each statement on every node in turn. `onAdded` is called
 * once every node has the new column (the writers may use it from then on).
 */
export async function runDdl(plan: DdlPlan, schema: string, urls: ReadonlyMap<string, string>, startedAt: number, signal: AbortSignal, onAdded: () => void): Promise<DdlOutcome> {
  const out: DdlOutcome = { statements: [] };
  const each = async (sql: string, at: number) => {
    for (const [k, node] of plan.nodes.entries()) {
      await sleepUntil(startedAt + at + k * plan.gapMs, signal);
      if (signal.aborted) return false;
      await onNode(urls.get(node)!, sql, signal);
      out.statements.push({ node, sql, atMs: Date.now() - startedAt });
    }
    return true;
  };
  try {
    if (!(await each(addIntColumnSql(schema, plan.table, plan.column, plan.defaultValue), plan.addAtMs))) return out;
    onAdded();
    await each(moveColumnSql(schema, plan.table, plan.move.definition, plan.move.after), plan.moveAtMs);
  } catch (err) {
    out.error = (err as Error).message;
  }
  return out;
}

/** The refused-setting session: the setting, then one write of a replicated table (autocommitted). */
export async function runRefusal(plan: RefusalPlan, schema: string, url: string, startedAt: number, signal: AbortSignal): Promise<{ atMs: number; rows: number } | { error: string } | undefined> {
  await sleepUntil(startedAt + plan.atMs, signal);
  if (signal.aborted) return undefined;
  let conn: Connection | undefined;
  try {
    conn = await connect(url, { connectTimeoutMs: 2000 });
    await conn.query(STATEMENT_FORMAT_SQL);
    // Every row of a table the writers fight over: a deadlock with them is normal, go again.
    for (let attempt = 1; ; attempt++) {
      try {
        const [res] = await conn.query(bumpCounterSql(schema, plan.table, plan.counter));
        return { atMs: Date.now() - startedAt, rows: (res as { affectedRows: number }).affectedRows };
      } catch (err) {
        if (attempt >= 20 || signal.aborted || !isRetryable(err)) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } catch (err) {
    return { error: (err as Error).message };
  } finally {
    await conn?.end().catch(() => undefined);
  }
}
