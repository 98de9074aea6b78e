// Executes one target transaction: the checkpoint advance for every source in the batch first (a
// capture then knows from the transaction's first row event that a sink wrote it); then per table,
// tombstones before deletes, guarded deletes, then the LWW upsert (the keys' tombstones read and
// locked first, keys they hold back left out; version guard and key assignment decided by the
// server's key comparison; then — only when it inserted rows — the removal of inserted rows a
// tombstone covers), rows clashing on a secondary UNIQUE key retried and then replayed in source
// order; then commit. Counts are returned, never merged here.
//
// Round trips of a batch of one table in the steady state: the checkpoint, the tombstone read (one
// per 1,024 keys of the table, not one per statement), the upsert, COMMIT (the transaction starts
// implicitly: the apply connection runs with autocommit off); plus one when a tombstone holds a key
// back, and one when rows were inserted, unless the key is one integer column and the read found no
// tombstone of any key (PartState.tombstoneFree).
//
// Locking (see README "Why concurrent local writes stay exact"): the sink runs at REPEATABLE READ.
// A delete writes (and X-locks) the tombstone before it deletes the row. An upsert first reads the
// keys' tombstones with a shared lock (and the gaps where they are missing): a tombstone committed
// before is seen whatever the snapshot, and none can be raised for those keys until the sink
// commits. The insert-then-remove check after the upsert alone (no read before it) let a row older
// than a local delete's committed tombstone stay inserted, about once in 15 runs of generated seed 4
// on MySQL 9.7 under load (lww_violation, traced to the removal statement finding nothing while a
// locking read in the same transaction right after found the tombstone); it stays as a second check.
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { HorizonCrossedError, OwnershipLostError, UniqueClashError } from '../errors.ts';
import { TypedJson } from '../model/json.ts';
import { tombstoneTableName } from '../model/names.ts';
import type { TableMeta } from '../model/table.ts';
import { advanceCheckpointSql, advanceCheckpointUnlessCollectedSql, readCheckpointSql } from '../sql/checkpoint.ts';
import { lockTableGcStateSql } from '../sql/gc.ts';
import type { Dialect } from '../sql/dialect.ts';
import {
  ColumnDefault,
  deleteHolders,
  deleteTombstoned,
  fitConflictReason,
  guardedDelete,
  insertConflictSql,
  isIntegerKey,
  keyPlaceholder,
  lockTombstones,
  lwwUpsert,
  plainDelete,
  readBackVersions,
  replaceRows,
  rowExists,
  type Statement,
  type TableShape,
  type TombstoneShape,
  tombstonedKeys,
  tombstoneHolders,
  type UniqueValues,
  uniqueHolders,
  upsertTombstones,
} from '../sql/dml.ts';
import { recordReleases, settleClaims, withoutClaimLosers } from './claims.ts';
import type { KeyPlan, PlannedUpsert, TablePlan } from './coalesce.ts';
import {
  applyForeignKeyFollowUps,
  dropChildOfDeletedParent,
  type ForeignKeyFollowUp,
  ForeignKeyFollowUpNeeded,
  type ForeignKeyIo,
  followUpsStillDue,
  moveReferencedRows,
  respellReferencedKeys,
  rowsToDelete,
  tombstoneChildrenOfClashLosers,
} from './foreign-keys.ts';
import { emptyCounters, type TableCounters, upsertOutcome } from './stats.ts';
import type { SqlValue } from './values.ts';

/** Bound parameters per statement stay below the protocol's 65,535 limit. */
export const MAX_PARAMS = 60_000;
export const MAX_ROWS_PER_STATEMENT = 1024;
/**
 * A statement binding more values than this is large: a connection keeps only the LARGE_KEPT most
 * recently used large statements prepared and closes the others after they ran (each one holds
 * client memory and a server prepared statement, max_prepared_stmt_count, for as long as it is cached).
 */
export const UNPREPARE_ABOVE_VALUES = 1000;
/** Enough for the steady state of a busy table (tombstone read, upsert, tombstone check) and a second table. */
export const LARGE_KEPT = 8;
/**
 * Parts longer than STEP_FROM_ROWS are cut at a multiple of this (and a rest shorter than it): a statement's text
 * depends on its row count, and preparing a 1,000-row upsert costs a quarter to a third of running it
 * (5–7 ms, measured on both engines). Batches of a few rows more or less then share the large
 * statement's text and it stays prepared; only the short rest is prepared anew.
 */
export const STATEMENT_ROW_STEP = 16;
/** Parts of at most this many rows are left whole: a small transaction stays one statement. */
export const STEP_FROM_ROWS = 64;

export interface CheckpointAdvance {
  sourceId: string;
  position: string;
  version: bigint;
  epoch: bigint;
  /** Source time (µs) reached at `position`; undefined keeps the stored one. */
  sourceTimeUs?: bigint;
  /** The apply worker whose checkpoint row this advances (0 for a single worker). */
  worker: number;
  /** The sink's ordinal of the source transaction at `position` (orders a stream's worker rows). */
  seq: bigint;
}

export interface ApplyContext {
  conn: Connection;
  dialect: Dialect;
  metaSchema: string;
  /** REPLACE INTO / plain DELETE instead of LWW (the mysqlSinkBypassLWW failpoint). */
  bypass: boolean;
  queryTimeoutMs: number;
  /** The connection runs with autocommit off: its first statement starts the transaction (no BEGIN round trip). */
  implicitBegin?: boolean;
  /**
   * The apply session's max_allowed_packet: multi-row statements are split so that none exceeds it
   * (a single row larger than it is refused by the sink before it gets here). Default: no byte split.
   */
  maxPacketBytes?: number;
  /** Called after the data statements, before COMMIT is sent (the commit-point failpoints). */
  beforeCommit?: () => void;
  /** Called once COMMIT is sent, before its reply is read. */
  commitSent?: () => void;
  /** Told when a statement starts (what it is); the function it returns when it ended (ok: completed). The progress watchdog's view. */
  track?: (what: string) => (ok: boolean) => void;
  /**
   * A replicated parent delete that meets children the deleting node did not know stops the batch
   * with ForeignKeyFollowUpNeeded (foreign-keys.ts): the caller runs runForeignKeyFollowUps and the
   * batch again. Off: those children get the server's action (and a tombstone at their own version).
   */
  foreignKeyFollowUps?: boolean;
  /** This attempt's SET NULL children of deleted parents, checked before COMMIT (set by applyBatch). */
  followUpWatch?: ForeignKeyFollowUp[];
}

export interface BatchOutcome {
  tables: Map<string, TableCounters>;
}

/** Thrown with the table whose statement failed, so the caller can report it without values. */
export class StatementError extends Error {
  constructor(
    readonly table: string,
    override readonly cause: unknown,
  ) {
    super(`statement on ${table} failed`);
  }
}

/** Room left in a packet for the statement text and the protocol's per-value headers. */
export const PACKET_OVERHEAD_BYTES = 256 * 1024;

/** An upper bound of a value's size on the wire (UTF-8 takes at most 3 bytes per UTF-16 unit). */
export function wireBytesAtMost(v: SqlValue): number {
  if (v === null || v instanceof ColumnDefault) return 1;
  if (typeof v === 'number') return 9;
  if (typeof v === 'string') return v.length * 3 + 9;
  if (v instanceof TypedJson) return v.text.length * 3 + v.scalars.length * 64 + 9;
  return v.length + 9;
}

/** The exact size of a value on the wire, where it matters (a value near the packet limit). */
export function wireBytes(v: SqlValue): number {
  if (typeof v === 'string') return Buffer.byteLength(v, 'utf8') + 9;
  if (v instanceof TypedJson) return Buffer.byteLength(v.text, 'utf8') + v.scalars.length * 64 + 9;
  return wireBytesAtMost(v);
}

export function rowWireBytesAtMost(row: readonly SqlValue[]): number {
  let n = 0;
  for (const v of row) n += wireBytesAtMost(v);
  return n;
}

/** Parts of at most `size` items whose rows (by `bytesOf`) stay within `budget` bytes; a row alone may exceed it. */
function partsWithin<T>(items: readonly T[], size: number, budget: number | undefined, bytesOf: (item: T) => number): T[][] {
  const out: T[][] = [];
  if (budget === undefined) {
    for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
    return out;
  }
  let part: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const b = bytesOf(item);
    if (part.length > 0 && (part.length >= size || bytes + b > budget)) {
      out.push(part);
      part = [];
      bytes = 0;
    }
    part.push(item);
    bytes += b;
  }
  if (part.length > 0) out.push(part);
  return out;
}

/** partsWithin, each part then cut so that its large statement's text repeats (stepped). */
function chunksWithin<T>(items: readonly T[], size: number, budget: number | undefined, bytesOf: (item: T) => number): T[][] {
  return budget === undefined ? chunks(items, size) : partsWithin(items, size, budget, bytesOf).flatMap(stepped);
}

/** A part cut at the largest multiple of STATEMENT_ROW_STEP, so that its large statement's text repeats. */
function stepped<T>(part: T[]): T[][] {
  if (part.length <= STEP_FROM_ROWS) return [part];
  const cut = part.length - (part.length % STATEMENT_ROW_STEP);
  return cut === 0 || cut === part.length ? [part] : [part.slice(0, cut), part.slice(cut)];
}

function statementBudget(ctx: ApplyContext): number | undefined {
  return ctx.maxPacketBytes === undefined ? undefined : Math.max(1024, ctx.maxPacketBytes - PACKET_OVERHEAD_BYTES);
}

export function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(...stepped(items.slice(i, i + size)));
  return out;
}

interface Shapes {
  name: string;
  table: TableShape;
  tomb: TombstoneShape;
}

const shapeCache = new WeakMap<TableMeta, Map<string, Shapes>>();

/** Statement shapes of a table, built once per metadata object (and metadata schema). */
export function shapesOf(meta: TableMeta, metaSchema: string): Shapes {
  let byMeta = shapeCache.get(meta);
  if (!byMeta) {
    byMeta = new Map();
    shapeCache.set(meta, byMeta);
  }
  let s = byMeta.get(metaSchema);
  if (!s) {
    const keyPlaceholders = meta.primaryKey.map((k) => keyPlaceholder(meta.columns.find((c) => c.name === k)!));
    s = {
      name: `${meta.schema}.${meta.table}`,
      table: { schema: meta.schema, table: meta.table, columns: meta.writableColumns, primaryKey: meta.primaryKey, versionColumn: meta.versionColumn, keyPlaceholders },
      tomb: { metaSchema, tombstoneTable: meta.tombstoneTable, primaryKey: meta.primaryKey, versionColumn: meta.versionColumn, keyPlaceholders },
    };
    byMeta.set(metaSchema, s);
  }
  return s;
}

/** `INSERT shop.t`: the statement's verb and table, for the watchdog's report. */
function tracked(ctx: ApplyContext, table: string, sql: string): ((ok: boolean) => void) | undefined {
  if (!ctx.track) return undefined;
  const space = sql.indexOf(' ');
  return ctx.track(`${space > 0 ? sql.slice(0, space) : sql} ${table}`);
}

export async function run(ctx: ApplyContext, table: string, stmt: Statement): Promise<ResultSetHeader> {
  const end = tracked(ctx, table, stmt.sql);
  try {
    const [res] = await ctx.conn.execute<ResultSetHeader>({ sql: stmt.sql, timeout: ctx.queryTimeoutMs }, stmt.values);
    end?.(true);
    releaseLarge(ctx, stmt, true);
    return res;
  } catch (err) {
    end?.(false);
    releaseLarge(ctx, stmt, false);
    throw new StatementError(table, err);
  }
}

export async function select(ctx: ApplyContext, table: string, stmt: Statement): Promise<RowDataPacket[]> {
  const end = tracked(ctx, table, stmt.sql);
  try {
    const [rows] = await ctx.conn.execute<RowDataPacket[]>({ sql: stmt.sql, timeout: ctx.queryTimeoutMs }, stmt.values);
    end?.(true);
    releaseLarge(ctx, stmt, true);
    return rows;
  } catch (err) {
    end?.(false);
    releaseLarge(ctx, stmt, false);
    throw new StatementError(table, err);
  }
}

/** Per connection, the large statements it keeps prepared, least recently used first. */
const largeKept = new WeakMap<Connection, Set<string>>();

/**
 * Keeps a large statement prepared among the connection's LARGE_KEPT most recently used ones and
 * closes the one that falls out; a failed one is closed at once (see UNPREPARE_ABOVE_VALUES).
 */
function releaseLarge(ctx: ApplyContext, stmt: Statement, ok: boolean): void {
  if (stmt.values.length <= UNPREPARE_ABOVE_VALUES) return;
  let kept = largeKept.get(ctx.conn);
  if (!kept) {
    kept = new Set();
    largeKept.set(ctx.conn, kept);
  }
  // A Set keeps insertion order: re-adding moves the statement to the most recent end.
  kept.delete(stmt.sql);
  if (!ok) {
    unprepare(ctx, stmt.sql);
    return;
  }
  kept.add(stmt.sql);
  if (kept.size <= LARGE_KEPT) return;
  const oldest = kept.values().next().value!;
  kept.delete(oldest);
  unprepare(ctx, oldest);
}

function unprepare(ctx: ApplyContext, sql: string): void {
  try {
    // The same cache key as execute's (no nestTables/rowsAsArray); close needs no reply.
    ctx.conn.unprepare(sql);
  } catch {
    // A connection already lost has nothing left to close.
  }
}

function statementErrno(err: unknown): number | undefined {
  return (err instanceof StatementError ? (err.cause as { errno?: number }) : undefined)?.errno;
}

function isDupEntry(err: unknown): boolean {
  const errno = statementErrno(err);
  return errno === 1062 || errno === 1586;
}

/** ER_NO_REFERENCED_ROW(_2): a row names a parent the target does not hold. */
function isMissingParent(err: unknown): boolean {
  const errno = statementErrno(err);
  return errno === 1452 || errno === 1216;
}

/** ER_ROW_IS_REFERENCED(_2): a foreign key refused a change of a referenced row. */
function isReferencedRow(err: unknown): boolean {
  const errno = statementErrno(err);
  return errno === 1451 || errno === 1217;
}

/** The apply session as foreign-keys.ts uses it. */
export function foreignKeyIo(ctx: ApplyContext): ForeignKeyIo {
  return {
    dialect: ctx.dialect,
    metaSchema: ctx.metaSchema,
    run: (table, stmt) => run(ctx, table, stmt),
    select: (table, stmt) => select(ctx, table, stmt),
    logConflict: (table, c) => logConflict(ctx, table, c),
    discard: () => ctx.conn.destroy(),
    ...(ctx.followUpWatch ? { followUps: ctx.followUpWatch } : {}),
  };
}

/**
 * Runs a batch's foreign-key follow-ups (ForeignKeyFollowUpNeeded) on the apply connection, after
 * the batch rolled back: one transaction with no checkpoint row (capture hands it on as this node's
 * own), at versions of this node (lww_meta.node) just above each child's.
 */
export async function runForeignKeyFollowUps(ctx: ApplyContext, nodeId: number, followUps: readonly ForeignKeyFollowUp[], sourceId: string): Promise<number> {
  return applyForeignKeyFollowUps(
    foreignKeyIo({ ...ctx, followUpWatch: undefined }),
    nodeId,
    async () => {
      await ctx.conn.query('COMMIT');
    },
    async () => {
      await ctx.conn.query('ROLLBACK');
    },
    followUps,
    sourceId,
  );
}

/** Appends a conflict-log row: the named columns of a row (binary as base64) and the version it concerns. */
export async function logConflict(ctx: ApplyContext, meta: Pick<TableMeta, 'schema' | 'table'>, c: { sourceId: string; reason: string; version: bigint; columns: readonly string[]; value: (column: string, i: number) => unknown }): Promise<void> {
  const row: Record<string, unknown> = {};
  c.columns.forEach((name, i) => {
    const v = c.value(name, i);
    row[name] = Buffer.isBuffer(v) ? { base64: v.toString('base64') } : v instanceof ColumnDefault ? { default: true } : v;
  });
  await run(ctx, `${ctx.metaSchema}.conflicts`, {
    sql: insertConflictSql(ctx.metaSchema),
    values: [c.sourceId, meta.schema, meta.table, fitConflictReason(c.reason), c.version.toString(), JSON.stringify(row)],
  });
}

/** The conflict-log row of an incoming upsert (all its written columns). */
export function ofUpsert(meta: TableMeta, up: PlannedUpsert, reason: string) {
  return { sourceId: up.sourceId, reason, version: up.version, columns: meta.writableColumns, value: (_c: string, i: number) => up.row[i] };
}

interface Stored {
  row?: bigint;
  tomb?: bigint;
}

/** The stored row and tombstone versions of keys, matched by the server's key equality. */
export async function readBack(ctx: ApplyContext, meta: TableMeta, keys: readonly SqlValue[][]): Promise<Stored[]> {
  const s = shapesOf(meta, ctx.metaSchema);
  const out: Stored[] = [];
  const per = Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / (meta.primaryKey.length + 1)));
  for (const part of chunks(keys, per)) {
    const base = out.length;
    for (let i = 0; i < part.length; i++) out.push({});
    for (const r of await select(ctx, s.name, readBackVersions(s.table, s.tomb, part))) {
      const o = out[base + Number(r._lww_i)]!;
      if (r.row_version !== null) o.row = BigInt(r.row_version as string);
      if (r.tomb_version !== null) o.tomb = BigInt(r.tomb_version as string);
    }
  }
  return out;
}

/** Not applied although nothing newer holds the key: another row holds one of its UNIQUE values. */
function clashedOut(up: PlannedUpsert, stored: Stored): boolean {
  return (stored.row === undefined || stored.row < up.version) && (stored.tomb === undefined || stored.tomb < up.version);
}

interface TombstoneRead {
  /** Positions of the keys held back by a tombstone as new or newer. */
  held: Set<number>;
  /** No tombstone of any of the keys exists (each key's gap stays locked until commit). */
  none: boolean;
}

/** A key list padded to STATEMENT_ROW_STEP by repeating its last key (harmless in a read), so that the statement's text repeats. */
function paddedKeys(keys: SqlValue[][]): SqlValue[][] {
  if (keys.length <= STEP_FROM_ROWS || keys.length % STATEMENT_ROW_STEP === 0) return keys;
  const last = keys[keys.length - 1]!;
  const out = keys.slice();
  while (out.length % STATEMENT_ROW_STEP !== 0) out.push(last);
  return out;
}

/** Bytes a key's row takes in tombstonedKeys beside its values, at most: position, version, and statement text per key column. */
const keyRowExtraBytes = (keyColumns: number) => 64 + 64 * keyColumns;

/** Reads and locks the keys' tombstones (see lockTombstones and tombstonedKeys), in statements within the parameter and packet limits. */
async function readTombstones(ctx: ApplyContext, meta: TableMeta, keys: readonly KeyPlan[], versions: readonly bigint[]): Promise<TombstoneRead> {
  const s = shapesOf(meta, ctx.metaSchema);
  const per = Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / (meta.primaryKey.length + 2)));
  const bytesOf = (k: KeyPlan) => rowWireBytesAtMost(k.key) + keyRowExtraBytes(k.key.length);
  // Within the packet budget like the upserts, with room for the lock statement's padding (up to
  // STATEMENT_ROW_STEP - 1 more copies of a key).
  const budget = statementBudget(ctx);
  let widest = 0;
  if (budget !== undefined) for (const k of keys) widest = Math.max(widest, bytesOf(k));
  const room = budget === undefined ? undefined : Math.max(1, budget - (STATEMENT_ROW_STEP - 1) * widest);
  const held = new Set<number>();
  let none = true;
  let at = 0;
  for (const part of partsWithin(keys, per, room, bytesOf)) {
    const from = at;
    at += part.length;
    const partVersions = versions.slice(from, at);
    // Lock first with a plain key list; only when tombstones exist, ask which keys they hold back.
    const found = await select(ctx, s.name, lockTombstones(s.tomb, paddedKeys(part.map((k) => k.key))));
    if (found.length === 0) continue;
    none = false;
    // bigint: no Math.min.
    let least = partVersions[0]!;
    for (const v of partVersions) if (v < least) least = v;
    if (!found.some((r) => BigInt(r[meta.versionColumn] as string) >= least)) continue;
    const rows = await select(ctx, s.name, tombstonedKeys(s.table, s.tomb, part.map((k, i) => [...k.key, partVersions[i]!.toString()])));
    for (const r of rows) held.add(from + Number(r._lww_i));
  }
  return { held, none };
}

/** Positions of the keys held back by a tombstone as new or newer (locking read, see tombstonedKeys). */
async function tombstonedAt(ctx: ApplyContext, meta: TableMeta, keys: readonly KeyPlan[], versions: readonly bigint[]): Promise<Set<number>> {
  return (await readTombstones(ctx, meta, keys, versions)).held;
}

interface PartState {
  /**
   * The part's tombstones were already read and locked, and only live rows are left (a late older
   * child row whose parent is gone is never inserted even for a moment; a live row the foreign key
   * still refuses is a real error and stops the direction). Unchecked parts are read first.
   */
  checked?: boolean;
  /** A collated referenced key was respelled for this part once already (foreign-keys.ts). */
  respelled?: boolean;
  /**
   * The locking read found no tombstone of any key and the key is one integer column (MySQL and MariaDB only): no inserted
   * row can be covered, so the check after the upsert is left out. Integers have no spelling, so
   * the read's per-key equalities cannot miss a tombstone the way collated keys can on MariaDB
   * (see deleteTombstoned), and the read's gap locks keep one from appearing before commit.
   */
  tombstoneFree?: boolean;
}

/**
 * Applies one statement's worth of upserts and counts them; returns the keys that clashed on a
 * secondary UNIQUE key (not counted yet). A clash while updating fails the statement (and only the
 * statement): its rows are then applied one by one. A clash while inserting is a silent no-op of
 * the key guard, found by reading the keys back.
 */
async function upsertPart(ctx: ApplyContext, meta: TableMeta, part: KeyPlan[], counts: TableCounters, hasUnique: boolean, state: PartState = {}): Promise<KeyPlan[]> {
  const s = shapesOf(meta, ctx.metaSchema);
  const { checked = false, respelled = false } = state;
  if (!checked) {
    const held = await tombstonedAt(ctx, meta, part, part.map((k) => k.upsert!.version));
    counts.skippedByTombstone += held.size;
    const live = held.size === 0 ? part : part.filter((_, i) => !held.has(i));
    return live.length === 0 ? [] : upsertPart(ctx, meta, live, counts, hasUnique, { checked: true, respelled });
  }
  try {
    const res = await run(ctx, s.name, lwwUpsert(s.table, part.map((k) => k.upsert!.row), ctx.dialect));
    const o = upsertOutcome(part.length, res.affectedRows, res.info);
    // The tombstone half of the guard: only inserted rows can be covered (see deleteTombstoned).
    const covered = o.inserted > 0 && !state.tombstoneFree ? (await run(ctx, s.name, deleteTombstoned(s.table, s.tomb, part.map((k) => k.key)))).affectedRows : 0;
    counts.inserted += o.inserted - covered;
    counts.updated += o.updated;
    counts.skippedByTombstone += covered;
    if (!hasUnique || o.skipped === 0) {
      counts.skippedStale += o.skipped;
      return [];
    }
    const stored = await readBack(ctx, meta, part.map((k) => k.key));
    const clashed = part.filter((k, i) => clashedOut(k.upsert!, stored[i]!));
    // Keys left absent under a tombstone as new: the covered ones, and skipped ones that met a
    // UNIQUE clash instead of being inserted (held back by the tombstone all the same).
    const absentUnderTomb = part.filter((k, i) => stored[i]!.row === undefined && stored[i]!.tomb !== undefined && stored[i]!.tomb! >= k.upsert!.version).length;
    const held = Math.max(0, absentUnderTomb - covered);
    counts.skippedByTombstone += held;
    counts.skippedStale += o.skipped - clashed.length - held;
    return clashed;
  } catch (err) {
    // A collated referenced key respelled (foreign-keys.ts); the retry meets the error again only if something else was refused.
    if (isReferencedRow(err) && !respelled && (await respellReferencedKeys(foreignKeyIo(ctx), meta, part, 'refused'))) return upsertPart(ctx, meta, part, counts, hasUnique, { ...state, respelled: true });
    // Refused again after a respell: the part can hold one key in two spellings (keys equal under the
    // collation stay apart in coalesce), each newer than the stored row. In one statement they take
    // turns: the respell gives the row one spelling, the upsert's other row changes it back, refused,
    // respelled again... without end (generated seeds 5 and 11 looped there). One row at a time, each
    // gets one respell and the newest version's spelling is the one that stays.
    if (isReferencedRow(err) && respelled && part.length > 1) {
      const clashed: KeyPlan[] = [];
      for (const one of part) clashed.push(...(await upsertPart(ctx, meta, [one], counts, hasUnique, { checked, tombstoneFree: state.tombstoneFree })));
      return clashed;
    }
    if (isMissingParent(err)) {
      if (part.length > 1) {
        const clashed: KeyPlan[] = [];
        for (const one of part) clashed.push(...(await upsertPart(ctx, meta, [one], counts, hasUnique, { checked: true, tombstoneFree: state.tombstoneFree })));
        return clashed;
      }
      // A stale write (a replay of one this node already settled newer) is refused by the foreign key
      // before the upsert's version guard: it changes nothing, whatever its parent.
      const [stored] = await readBack(ctx, meta, [part[0]!.key]);
      if (stored?.row !== undefined && stored.row >= part[0]!.upsert!.version) {
        counts.skippedStale++;
        return [];
      }
      if (await dropChildOfDeletedParent(foreignKeyIo(ctx), meta, part[0]!, counts)) return [];
      const nulled = meta.setNullKeys && (await nullDeletedParents(ctx, meta, part[0]!));
      if (nulled) return upsertPart(ctx, meta, [nulled], counts, hasUnique, { checked: true });
      throw err;
    }
    if (!isDupEntry(err)) throw err;
    if (part.length === 1) return part;
    const clashed: KeyPlan[] = [];
    for (const one of part) clashed.push(...(await upsertPart(ctx, meta, [one], counts, hasUnique, { checked, tombstoneFree: state.tombstoneFree })));
    return clashed;
  }
}

/**
 * A row whose ON DELETE SET NULL foreign key names a parent that was deleted (its tombstone is
 * there, the row is not): the row as that foreign key leaves it — those columns NULL — as the
 * target's own cascade does to the same row when the parent's delete arrives after it (the peer
 * that wrote the row ends the same way). Logged, so the audit knows the applied values differ from
 * the origin's. Undefined when no such parent was found (the foreign key error stands).
 */
async function nullDeletedParents(ctx: ApplyContext, meta: TableMeta, k: KeyPlan): Promise<KeyPlan | undefined> {
  const up = k.upsert!;
  const row = [...up.row];
  const nulled: string[] = [];
  for (const fk of meta.setNullKeys ?? []) {
    const idx = fk.columns.map((c) => meta.writableColumns.indexOf(c));
    // A column given its DEFAULT has no value here to look the parent up by: the foreign key error stands.
    if (idx.some((i) => i < 0 || row[i] === null || row[i] instanceof ColumnDefault)) continue;
    const match: UniqueValues = {
      columns: fk.parentColumns,
      placeholders: fk.columns.map((c) => keyPlaceholder(meta.columns.find((m) => m.name === c)!)),
      values: idx.map((i) => row[i]!),
    };
    const parent = `${fk.parentSchema}.${fk.parentTable}`;
    if ((await select(ctx, parent, rowExists(fk.parentSchema, fk.parentTable, match))).length > 0) continue;
    // The parent's tombstone table is keyed by its primary key: a foreign key to other columns
    // cannot be checked there, and the error stands.
    const tombstone = tombstoneTableName(fk.parentSchema, fk.parentTable);
    const deleted = await select(ctx, parent, rowExists(ctx.metaSchema, tombstone, match)).catch(() => []);
    if (deleted.length === 0) continue;
    for (const i of idx) row[i] = null;
    nulled.push(`${fk.name} (${fk.columns.join(', ')})`);
  }
  if (nulled.length === 0) return undefined;
  const changed: PlannedUpsert = { ...up, row };
  await logConflict(ctx, meta, ofUpsert(meta, changed, `foreign key set null: ${nulled.join(', ')} named a deleted parent`));
  return { ...k, upsert: changed };
}

/**
 * Clashing rows are retried while a round makes progress (a row moved off a UNIQUE value frees it
 * for another); what still clashes is replayed one change at a time in source order, the order in
 * which the source's own unique checks passed (a swap through a temporary value). Only a key whose
 * newest change still did not land is a conflict: logged and counted.
 */
async function applyUpserts(ctx: ApplyContext, meta: TableMeta, keys: KeyPlan[], counts: TableCounters): Promise<void> {
  const hasUnique = Object.keys(meta.uniqueKeys).length > 0;
  const perStatement = Math.max(1, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / meta.writableColumns.length)));
  const integerKey = isIntegerKey(shapesOf(meta, ctx.metaSchema).table);
  let pending = keys;
  for (;;) {
    // One tombstone read for the round's keys, not one per statement: a round trip fewer per part.
    const read = await readTombstones(ctx, meta, pending, pending.map((k) => k.upsert!.version));
    counts.skippedByTombstone += read.held.size;
    const live = read.held.size === 0 ? pending : pending.filter((_, i) => !read.held.has(i));
    // TiDB takes no gap locks (and treats LOCK IN SHARE MODE as a no-op at most): the check stays there.
    const state: PartState = { checked: true, tombstoneFree: read.none && integerKey && ctx.dialect !== 'tidb' };
    const clashed: KeyPlan[] = [];
    for (const part of chunksWithin(live, perStatement, statementBudget(ctx), (k) => rowWireBytesAtMost(k.upsert!.row))) {
      clashed.push(...(await upsertPart(ctx, meta, part, counts, hasUnique, state)));
    }
    if (clashed.length === 0) return;
    const progress = clashed.length < pending.length;
    pending = clashed;
    if (!progress) break;
  }
  const s = shapesOf(meta, ctx.metaSchema);
  const history = pending.flatMap((k) => k.history.map((up) => ({ k, up }))).sort((a, b) => a.up.seq - b.up.seq);
  // A key one of whose changes names a parent the target no longer holds leaves the replay: its newest
  // change goes the way of every upsert (upsertPart: SET NULL, CASCADE, tombstone checks), not a bare statement.
  const viaForeignKey = new Set<KeyPlan>();
  for (const { k, up } of history) {
    if (viaForeignKey.has(k)) continue;
    if ((await tombstonedAt(ctx, meta, [k], [up.version])).size > 0) continue;
    try {
      await run(ctx, s.name, lwwUpsert(s.table, [up.row], ctx.dialect));
    } catch (err) {
      if (!isMissingParent(err)) {
        if (!isDupEntry(err)) throw err;
        continue;
      }
      // The step as ON DELETE SET NULL leaves it (the swap goes on in order); otherwise (CASCADE) the key leaves the replay.
      const nulled = meta.setNullKeys ? await nullDeletedParents(ctx, meta, { ...k, upsert: up }) : undefined;
      if (!nulled) {
        viaForeignKey.add(k);
        continue;
      }
      try {
        await run(ctx, s.name, lwwUpsert(s.table, [nulled.upsert!.row], ctx.dialect));
      } catch (again) {
        if (isMissingParent(again)) viaForeignKey.add(k);
        else if (!isDupEntry(again)) throw again;
      }
    }
  }
  for (const k of viaForeignKey) {
    for (const clashed of await upsertPart(ctx, meta, [k], counts, hasUnique)) await resolveUniqueClash(ctx, meta, clashed, counts);
  }
  const rest = pending.filter((k) => !viaForeignKey.has(k));
  const stored = await readBack(ctx, meta, rest.map((k) => k.key));
  for (let i = 0; i < rest.length; i++) {
    const up = rest[i]!.upsert!;
    const st = stored[i]!;
    if (!settled(up, st, counts)) await resolveUniqueClash(ctx, meta, rest[i]!, counts);
  }
}

/** Counts an upsert whose key's stored state decides it (landed, newer row, newer tombstone); false when it clashed. */
function settled(up: PlannedUpsert, st: Stored, counts: TableCounters): boolean {
  if (st.tomb !== undefined && st.tomb >= up.version) counts.skippedByTombstone++;
  else if (st.row === up.version) counts.updated++;
  else if (st.row !== undefined && st.row > up.version) counts.skippedStale++;
  else return false;
  return true;
}

/** The incoming row's values of every secondary UNIQUE key that can clash (no NULL column). */
function uniqueValuesOf(meta: TableMeta, row: readonly SqlValue[]): UniqueValues[] | string {
  const out: UniqueValues[] = [];
  for (const [name, columns] of Object.entries(meta.uniqueKeys)) {
    const values: SqlValue[] = [];
    for (const c of columns) {
      const i = meta.writableColumns.indexOf(c);
      // A generated column's value is the server's: the sink cannot name the holder by it.
      if (i < 0) return `UNIQUE key ${name} includes column ${c}, which the sink does not write`;
      values.push(row[i]!);
    }
    if (values.some((v) => v === null)) continue; // a UNIQUE index holds any number of NULLs
    out.push({ columns, placeholders: columns.map((c) => keyPlaceholder(meta.columns.find((m) => m.name === c)!)), values });
  }
  return out;
}

/**
 * Last-write-wins across a secondary UNIQUE key, when nothing else let the newest change of a key
 * land (DESIGN §4: a clash is never silently lost). The rows holding the incoming row's UNIQUE
 * values and the incoming row compete as one: the highest version keeps the values, every other
 * row is removed with a tombstone at its own version (a replay of it is then refused everywhere,
 * a later write of its key still lands). Every node meets the same rows with the same versions
 * whatever the arrival order — a holder that arrives later loses to the stored newer row the same
 * way — so the nodes converge; each outcome is counted and written to the conflict log (reason
 * `unique key clash: …`, the removed row's version), which the history audit reads. Where versions
 * do not order the rows one way (the incoming row newer than one holder and older than another),
 * or a holder cannot be found by value, the direction stops (UniqueClashError).
 */
async function resolveUniqueClash(ctx: ApplyContext, meta: TableMeta, k: KeyPlan, counts: TableCounters): Promise<void> {
  const up = k.upsert!;
  const s = shapesOf(meta, ctx.metaSchema);
  const uniques = uniqueValuesOf(meta, up.row);
  const keyText = keyDescription(meta, k.key);
  if (typeof uniques === 'string') throw new UniqueClashError(meta.schema, meta.table, `row ${keyText} (version ${up.version}): ${uniques}`);
  const holders = uniques.length === 0 ? [] : await select(ctx, s.name, uniqueHolders(s.table, uniques, k.key));
  if (holders.length === 0) {
    // The value was freed after the last try (a later change of the batch moved its holder off it).
    // The retry keeps the tombstone half of the guard: a key held back by one is not written.
    if ((await tombstonedAt(ctx, meta, [k], [up.version])).size > 0) {
      counts.skippedByTombstone++;
      return;
    }
    await run(ctx, s.name, lwwUpsert(s.table, [up.row], ctx.dialect));
    const [now] = await readBack(ctx, meta, [k.key]);
    if (now && settled(up, now, counts)) return;
    const values = uniques.map((u) => `(${u.columns.map((c, i) => `${c}=${describeValue(u.values[i])}`).join(', ')})`).join(' ') || 'none without NULL';
    throw new UniqueClashError(
      meta.schema,
      meta.table,
      `row ${keyText} (version ${up.version}) did not land, but no other row holds its UNIQUE values ${values} as the sink compares them ` +
        `(stored: row version ${now?.row ?? 'none'}, tombstone version ${now?.tomb ?? 'none'}; a prefix or functional UNIQUE index?)`,
    );
  }
  const versions = holders.map((h) => BigInt(h._lww_v as string));
  const holderText = holders.map((h, i) => `${keyDescription(meta, meta.primaryKey.map((c) => h[c]))} version ${versions[i]}`).join(', ');
  if (versions.every((v) => v < up.version)) {
    await run(ctx, s.name, tombstoneHolders(s.table, s.tomb, uniques, k.key, ctx.dialect));
    await tombstoneChildrenOfClashLosers(foreignKeyIo(ctx), meta, holders.map((h) => [...meta.primaryKey.map((c) => h[c] as SqlValue), up.version.toString()]), up.sourceId, counts);
    await run(ctx, s.name, deleteHolders(s.table, uniques, k.key, up.version.toString()));
    if (!(await landAfterClash(ctx, meta, k, counts))) {
      throw new UniqueClashError(meta.schema, meta.table, `row ${keyText} (version ${up.version}) still did not land after the older rows holding its UNIQUE values were removed (${holderText})`);
    }
    counts.uniqueClashes += holders.length;
    for (let i = 0; i < holders.length; i++) {
      const holder = holders[i]!;
      await logConflict(ctx, meta, { sourceId: up.sourceId, reason: `unique key clash: removed by newer row ${keyText} (version ${up.version})`, version: versions[i]!, columns: meta.primaryKey, value: (c) => holder[c] });
    }
    return;
  }
  if (versions.every((v) => v > up.version)) {
    // The incoming row loses: its key ends deleted at its version, as on the node where it lost first.
    const tombRow = [...k.key, up.version.toString()];
    await run(ctx, s.name, upsertTombstones(s.tomb, [tombRow], ctx.dialect));
    await tombstoneChildrenOfClashLosers(foreignKeyIo(ctx), meta, [tombRow], up.sourceId, counts);
    counts.deleted += (await run(ctx, s.name, guardedDelete(s.table, [tombRow]))).affectedRows;
    counts.uniqueClashes++;
    await logConflict(ctx, meta, ofUpsert(meta, up, `unique key clash: removed by newer row(s) ${holderText}`));
    return;
  }
  throw new UniqueClashError(meta.schema, meta.table, `row ${keyText} (version ${up.version}) is newer than some rows holding its UNIQUE values and older than others (${holderText})`);
}

/**
 * Writes a clash's winner once the older holders are gone. A row that also names a parent deleted
 * here goes the way of every upsert (upsertPart: ON DELETE SET NULL clears the reference, CASCADE
 * drops it); before, the foreign key's refusal stopped the direction. False when it neither landed
 * nor went with its parent.
 */
async function landAfterClash(ctx: ApplyContext, meta: TableMeta, k: KeyPlan, counts: TableCounters): Promise<boolean> {
  const s = shapesOf(meta, ctx.metaSchema);
  const up = k.upsert!;
  try {
    await run(ctx, s.name, lwwUpsert(s.table, [up.row], ctx.dialect));
  } catch (err) {
    if (!isMissingParent(err)) throw err;
    return (await upsertPart(ctx, meta, [k], counts, true, { checked: true })).length === 0;
  }
  const [after] = await readBack(ctx, meta, [k.key]);
  return after?.row === up.version;
}

function keyDescription(meta: TableMeta, key: readonly unknown[]): string {
  return `(${meta.primaryKey.map((c, i) => `${c}=${describeValue(key[i])}`).join(', ')})`;
}

function describeValue(v: unknown): string {
  if (Buffer.isBuffer(v)) return `0x${v.toString('hex')}`;
  if (v instanceof TypedJson) return 'json';
  return typeof v === 'string' ? v : String(v);
}

/** A table's tombstones and deletes (the first phase, children before parents). */
async function applyDeletesLww(ctx: ApplyContext, plan: TablePlan, counts: TableCounters, sourceId: string): Promise<void> {
  const { meta } = plan;
  const s = shapesOf(meta, ctx.metaSchema);
  const keys = [...plan.keys.values()];
  counts.skippedStale += plan.staleInBatch;
  counts.coalesced += plan.coalesced;
  const deletes = keys.filter((k) => k.deleteVersion !== undefined);
  const width = meta.primaryKey.length + 1;
  // Tombstone first, then the row: a local insert of the key re-reads the tombstone after its row
  // exists (triggers), so one of the two always sees the other.
  for (const part of chunks(deletes, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / width)))) {
    const rows = part.map((k) => [...k.key, k.deleteVersion!.toString()]);
    await run(ctx, s.name, upsertTombstones(s.tomb, rows, ctx.dialect));
    const moved = await moveReferencedRows(foreignKeyIo(ctx), meta, part, plan.keys, counts);
    const doomed = await rowsToDelete(foreignKeyIo(ctx), meta, moved.size === 0 ? part : part.filter((k) => !moved.has(k)), keys, sourceId, counts);
    if (doomed.length > 0) counts.deleted += (await run(ctx, s.name, guardedDelete(s.table, doomed))).affectedRows;
    counts.tombstoned += part.length;
  }
}

/** An upsert coming only from updates that kept their key: the source held the row (KeyOp.heldRow). */
function ofHeldRow(k: KeyPlan): boolean {
  return k.upsert?.heldRow === true && k.history.every((h) => h.heldRow);
}

/** Per table with upserts of rows their source held, the oldest of their versions: [schema, table, version] as bound values. */
function oldestHeldRowVersions(plans: readonly TablePlan[]): string[][] {
  const out: string[][] = [];
  for (const plan of plans) {
    let least: bigint | undefined;
    for (const k of plan.keys.values()) if (ofHeldRow(k) && (least === undefined || k.upsert!.version < least)) least = k.upsert!.version;
    if (least !== undefined) out.push([plan.meta.schema, plan.meta.table, least.toString()]);
  }
  return out;
}

/**
 * An update of a row the source held, with a version below the table's collected GC horizon, of a
 * key the target holds neither a row nor a tombstone of, cannot be decided: the target once had the
 * row, deleted it, and collected the tombstone whose version would decide. That is a foreign-key
 * follow-up (stamped just above the row it corrects) or a write of a session whose clock is behind,
 * from a node that lagged longer than the margin and applies the delete after it; inserting would
 * bring the row back on this node only. The batch stops with HorizonCrossedError instead
 * (permanent: the direction fails, it does not loop), as a sync does. An insert that old is the
 * source's new row of a key both nodes collected (a session with SET TIMESTAMP in the past): the
 * source kept it, so it lands (gc.test.ts). Runs only when the batch's checkpoint statement found a
 * collection above the batch's oldest such update (applyBatch); both reads lock.
 */
async function guardCollectedHorizon(ctx: ApplyContext, meta: TableMeta, upserts: readonly KeyPlan[]): Promise<void> {
  const held = upserts.filter(ofHeldRow);
  if (held.length === 0) return;
  const rows = await select(ctx, `${ctx.metaSchema}.gc_state`, lockTableGcStateSql(ctx.metaSchema, meta.schema, meta.table));
  const below = rows.length === 0 ? 0n : BigInt(String(rows[0]!.collected_below));
  const under = held.filter((k) => k.upsert!.version < below);
  if (under.length === 0) return;
  const stored = await readBack(ctx, meta, under.map((k) => k.key));
  // A tombstone at or above the version decides (the update loses); one below it may have been written
  // after the collection (an old delete from a third node) and proves nothing about the one collected.
  const i = stored.findIndex((st, j) => st.row === undefined && (st.tomb === undefined || st.tomb < under[j]!.upsert!.version));
  if (i < 0) return;
  const k = under[i]!;
  const v = k.upsert!.version;
  const tomb = `${ctx.metaSchema}.${tombstoneTableName(meta.schema, meta.table)}`;
  throw new HorizonCrossedError(
    `refusing to apply ${meta.schema}.${meta.table} key ${keyDescription(meta, k.key)} at version ${v} from ${k.upsert!.sourceId}: ` +
      `the source updated a row this target does not hold, at a version below the table's tombstones this target garbage-collected (below version ${below}), ` +
      'so the delete that would decide it may be gone here, and applying the update could bring the row back on this node only. ' +
      'The version is older than its transaction by more than the GC margin (a foreign-key follow-up or an update of a session whose clock is behind, ' +
      `from a node that lagged longer than the margin). If the row was deleted here, give this node the delete back: a row in ${tomb} for the key at version ${v + 1n} or above ` +
      '(written with the sink flag, see README "Tombstone GC"), and restart; the update then loses on every node. Otherwise re-seed this node from a peer',
    k.upsert!.sourceId,
    'the target',
    `${meta.schema}.${meta.table}`,
  );
}

/** A table's upserts (the second phase, parents before children). */
async function applyUpsertsLww(ctx: ApplyContext, plan: TablePlan, counts: TableCounters): Promise<void> {
  let upserts = [...plan.keys.values()].filter((k) => k.upsert);
  if (plan.meta.claims && plan.meta.claims.length > 0) {
    // Claims first: an incoming row older than a claim of its value (this batch's or stored) loses.
    if (plan.releases.length > 0) await recordReleases(ctx, plan.meta, plan.releases, counts, upserts);
    if (upserts.length > 0) upserts = await withoutClaimLosers(ctx, plan.meta, upserts, counts);
  }
  if (upserts.length > 0) await respellReferencedKeys(foreignKeyIo(ctx), plan.meta, upserts, 'before');
  if (upserts.length > 0) await applyUpserts(ctx, plan.meta, upserts, counts);
  // Then the values incoming rows held without ending stored here count as claims too.
  if (plan.meta.claims && plan.meta.claims.length > 0) await settleClaims(ctx, plan.meta, upserts, counts);
}

async function applyTableBypass(ctx: ApplyContext, plan: TablePlan, counts: TableCounters): Promise<void> {
  const { meta } = plan;
  const s = shapesOf(meta, ctx.metaSchema);
  const keys = [...plan.keys.values()];
  const deletes = keys.filter((k) => !k.upsert);
  for (const part of chunks(deletes, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / meta.primaryKey.length)))) {
    const res = await run(ctx, s.name, plainDelete(s.table, part.map((k) => k.key)));
    counts.deleted += res.affectedRows;
  }
  const upserts = keys.filter((k) => k.upsert);
  const perStatement = Math.max(1, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / meta.writableColumns.length)));
  for (const part of chunksWithin(upserts, perStatement, statementBudget(ctx), (k) => rowWireBytesAtMost(k.upsert!.row))) {
    await run(ctx, s.name, replaceRows(s.table, part.map((k) => k.upsert!.row)));
    counts.replaced += part.length;
  }
}

/** Applies a coalesced batch and advances checkpoints in one transaction. */
export async function applyBatch(ctx: ApplyContext, plans: TablePlan[], advances: CheckpointAdvance[]): Promise<BatchOutcome> {
  const tables = new Map<string, TableCounters>();
  ctx.followUpWatch = ctx.foreignKeyFollowUps && !ctx.bypass ? [] : undefined;
  // Updates of held rows ask the first checkpoint statement whether their tables collected tombstones above the oldest of them (guardCollectedHorizon).
  let heldSince: string[][] | undefined = ctx.bypass ? undefined : oldestHeldRowVersions(plans);
  if (heldSince?.length === 0) heldSince = undefined;
  let guard = false;
  if (!ctx.implicitBegin) await ctx.conn.query('BEGIN');
  try {
    // The checkpoint first: a capture reading this transaction from the binlog knows from its first
    // row event that a sink wrote it, before it could hand any part of it on (no loops, see
    // capture/assembler.ts chunks). It commits with the data all the same.
    for (const a of advances) {
      const values = [a.position, a.version.toString(), a.sourceTimeUs === undefined ? null : a.sourceTimeUs.toString(), a.seq.toString(), a.sourceId, a.worker, a.epoch.toString()];
      let res = await run(
        ctx,
        `${ctx.metaSchema}.checkpoints`,
        heldSince === undefined ? { sql: advanceCheckpointSql(ctx.metaSchema), values } : { sql: advanceCheckpointUnlessCollectedSql(ctx.metaSchema, heldSince.length), values: [...values, ...heldSince.flat()] },
      );
      if (res.affectedRows === 0 && heldSince !== undefined) {
        // Not moved: the checkpoint is no longer ours, or a table collected above an update. Ask which.
        const [rows] = await ctx.conn.query<RowDataPacket[]>(readCheckpointSql(ctx.metaSchema), [a.sourceId]);
        if (rows.length > 0 && BigInt(rows[0]!.owner_epoch as string) === a.epoch) {
          guard = true;
          res = await run(ctx, `${ctx.metaSchema}.checkpoints`, { sql: advanceCheckpointSql(ctx.metaSchema), values });
        }
      }
      if (res.affectedRows === 0) {
        // A locking read: the latest owner (a consistent read could repeat an epoch read earlier in this transaction).
        const [rows] = await ctx.conn.query<RowDataPacket[]>(readCheckpointSql(ctx.metaSchema, true), [a.sourceId]);
        throw new OwnershipLostError(a.sourceId, a.epoch, BigInt((rows[0]?.owner_epoch as string | undefined) ?? '0'));
      }
      heldSince = undefined;
    }
    // Before any write of the batch (no lock taken on a tombstone yet, and no follow-up run): each
    // table's horizon, when the checkpoint statement found a collection, or had none to ask.
    if (guard || heldSince !== undefined) {
      for (const plan of plans) await guardCollectedHorizon(ctx, plan.meta, [...plan.keys.values()].filter((k) => k.upsert));
    }
    const countsOf = (plan: TablePlan) => {
      const name = `${plan.meta.schema}.${plan.meta.table}`;
      let counts = tables.get(name);
      if (!counts) {
        counts = emptyCounters();
        tables.set(name, counts);
      }
      return counts;
    };
    if (ctx.bypass) {
      for (const plan of plans) await applyTableBypass(ctx, plan, countsOf(plan));
    } else {
      // Plans come parents first (coalesce.ts parentsFirst): deletes run children first, then
      // every table's upserts parents first, as the source's foreign-key checks allowed them.
      const sourceIds = [...new Set(advances.map((a) => a.sourceId))].join(',');
      for (const plan of [...plans].reverse()) await applyDeletesLww(ctx, plan, countsOf(plan), sourceIds);
      for (const plan of plans) await applyUpsertsLww(ctx, plan, countsOf(plan));
    }
    if (ctx.followUpWatch && ctx.followUpWatch.length > 0) {
      // SET NULL children the server cleared with no version of their own, which nothing in the batch wrote newer since.
      const due = await followUpsStillDue(foreignKeyIo(ctx), ctx.followUpWatch);
      if (due.length > 0) throw new ForeignKeyFollowUpNeeded(due);
    }
    ctx.beforeCommit?.();
    const end = ctx.track?.('COMMIT');
    const commit = ctx.conn.query('COMMIT');
    ctx.commitSent?.();
    await commit.then(
      () => end?.(true),
      (err: unknown) => {
        end?.(false);
        throw err;
      },
    );
  } catch (err) {
    await ctx.conn.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
  return { tables };
}
