// Where the LWW apply meets a foreign key's referential action between replicated tables (apply.ts
// calls in at three points; ON DELETE SET NULL is apply.ts nullDeletedParents):
//
// - A collated referenced key respelled ('abc' -> 'ABC' under a case-insensitive collation, 'a' ->
//   'a ' under PAD SPACE): LWW gives the key the newest spelling, a key update equal to the old one
//   under the collation, so every child reference still matches. ON UPDATE RESTRICT / NO ACTION
//   would refuse it, CASCADE / SET NULL would change the children without a version (a peer keeps
//   them as they were). So that one update runs with foreign-key checks off — only where the server
//   finds the old and new values equal under the columns' collations — and the children keep the
//   spelling they were written with, as on the node that wrote the parent. A respelling made by an
//   update on the source is applied with the checks on instead (respellReferencedKeys): the
//   source's server took its ON UPDATE action, and this one must take the same.
// - ON DELETE CASCADE and a child write that meets its parent's delete on the other node: on the
//   node that wrote the child, the parent's delete (replicated) cascades the child away; on the node
//   that deleted the parent, the child's write arrives to a missing parent. Both end without the
//   row, with a tombstone at the child write's own version (a replay of it is refused, a later write
//   of the key lands), logged in the conflict log (`foreign key cascade: …`, which the history audit
//   reads) and counted (`foreignKeyCascades`).
// - A replicated parent delete that meets child rows the deleting node did not know (written here
//   concurrently): the server's own ON DELETE action would change them with no version of their
//   own, and a node where the parent was written again before the child's write arrived would keep
//   it unchanged — one version, two states (generated seeds 101, 107, 109, 117). So the sink takes
//   that action itself first, as this node's own write (ForeignKeyFollowUpNeeded): the batch rolls
//   back, the children are deleted (CASCADE) or their references cleared (SET NULL) in a transaction
//   of their own (no checkpoint: it replicates like a local one) at the least version of this node
//   above the child's, which wins over the child's write everywhere and over nothing later, and the
//   batch runs again. Crash-safe: that transaction commits first.
import type { ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { tombstoneTableName } from '../model/names.ts';
import type { TableMeta } from '../model/table.ts';
import { nextVersion } from '../model/version.ts';
import { COLUMNS_SQL } from '../sql/introspect.ts';
import type { Dialect } from '../sql/dialect.ts';
import { ColumnDefault, guardedDelete, keyPlaceholder, lockTombstones, moveKey, rowExists, type SqlValue, type Statement, type TableShape, type TombstoneShape, type UniqueValues, upsertTombstones } from '../sql/dml.ts';
import {
  type CascadeChildShape,
  COLUMN_EXISTS_SQL,
  countRespellable,
  FOREIGN_KEY_CHECKS_OFF_SQL,
  FOREIGN_KEYS_BY_DELETE_RULE_SQL,
  childAtVersion,
  childRowsAtVersions,
  lockCascadedChildren,
  PRIMARY_KEY_COLUMNS_SQL,
  REFERENCING_FOREIGN_KEYS_SQL,
  RESTORE_FOREIGN_KEY_CHECKS_SQL,
  type ReferencedColumns,
  respellReferenced,
  rewrittenKeys,
  TABLE_EXISTS_SQL,
  tombstoneCascadedChildren as tombstoneChildrenSql,
} from '../sql/foreign-keys.ts';
import type { KeyPlan } from './coalesce.ts';
import { keyIdOf } from './prepare.ts';
import { toSqlValue } from './values.ts';
import type { TableCounters } from './stats.ts';

/** A conflict-log row: the named columns of a row and the version it concerns (apply.ts logConflict). */
export interface ConflictEntry {
  sourceId: string;
  reason: string;
  version: bigint;
  columns: readonly string[];
  value: (column: string, i: number) => unknown;
}

/** What this module needs of the apply session (apply.ts builds it; no import back). */
export interface ForeignKeyIo {
  dialect: Dialect;
  metaSchema: string;
  run(table: string, stmt: Statement): Promise<ResultSetHeader>;
  select(table: string, stmt: Statement): Promise<RowDataPacket[]>;
  logConflict(table: { schema: string; table: string }, c: ConflictEntry): Promise<void>;
  /** The connection must not be used again (a session setting could not be put back). */
  discard(): void;
  /** Set: children of parents this batch deletes are collected as follow-ups (rowsToDelete), not left to the server's action. */
  followUps?: ForeignKeyFollowUp[];
}

const ROWS_PER_STATEMENT = 500;

interface CascadeChild extends CascadeChildShape {
  tombstoneTable: string;
  /** Typed placeholders of the child's primary-key columns (dml.ts keyPlaceholder). */
  keyPlaceholders: string[];
  /** The foreign key's name. */
  name: string;
}

/** How the conflict log names a follow-up (the harness oracle reads them): a CASCADE one starts with the first, a SET NULL one holds the second. */
export const FOLLOW_UP_CASCADE_REASON = 'foreign key cascade: removed by this node as its own delete';
export const FOLLOW_UP_SET_NULL_MARK = 'cleared by this node as its own update';

/** A child row that a replicated parent delete would change, found before the delete: what this node does of it as its own write. */
export interface ForeignKeyFollowUp {
  action: 'CASCADE' | 'SET NULL';
  child: CascadeChild;
  /** The parent table (schema.table). */
  parent: string;
  /** The child's key values, as the server returned them. */
  key: SqlValue[];
  /** The child's version when it was found: the follow-up changes the row only while it still holds it. */
  version: bigint;
}

/**
 * A batch's parent delete meets child rows the deleting node did not know: the batch is rolled back,
 * the follow-ups run as this node's own writes (applyForeignKeyFollowUps), and the batch runs again.
 * Not a failure: the worker does not count it as an attempt.
 */
export class ForeignKeyFollowUpNeeded extends Error {
  constructor(readonly followUps: ForeignKeyFollowUp[]) {
    super(`${followUps.length} child row(s) of a replicated parent delete need this node's own foreign-key action first`);
  }
}

interface ParentForeignKeys {
  /** Every column a foreign key references, with its position among the written columns; undefined when none can be respelled. */
  referenced?: ReferencedColumns & { index: number[] };
  /** Some foreign key's ON UPDATE action changes the children (CASCADE, SET NULL, SET DEFAULT). */
  updateActs: boolean;
  /** Installed tables whose rows go with a deleted row of this one (ON DELETE CASCADE). */
  cascadeChildren: CascadeChild[];
  /** Installed tables whose references to a deleted row of this one are cleared (ON DELETE SET NULL). */
  setNullChildren: CascadeChild[];
  /** Some foreign key's ON DELETE action changes the children (CASCADE, SET NULL). */
  deleteActs: boolean;
}

interface CascadeKey {
  name: string;
  columns: string[];
  parentSchema: string;
  parentTable: string;
  parentColumns: string[];
}

// Per table metadata object (a refresh after DDL makes a new one) and metadata schema.
const parentCache = new WeakMap<TableMeta, Map<string, Promise<ParentForeignKeys>>>();
const childCache = new WeakMap<TableMeta, Promise<CascadeKey[]>>();

function shapeOf(meta: TableMeta): TableShape {
  const keyPlaceholders = meta.primaryKey.map((k) => keyPlaceholder(meta.columns.find((c) => c.name === k)!));
  return { schema: meta.schema, table: meta.table, columns: meta.writableColumns, primaryKey: meta.primaryKey, versionColumn: meta.versionColumn, keyPlaceholders };
}

function tombShapeOf(meta: TableMeta, metaSchema: string): TombstoneShape {
  const s = shapeOf(meta);
  return { metaSchema, tombstoneTable: meta.tombstoneTable, primaryKey: meta.primaryKey, versionColumn: meta.versionColumn, keyPlaceholders: s.keyPlaceholders };
}

function name(meta: TableMeta): string {
  return `${meta.schema}.${meta.table}`;
}

async function loadParentForeignKeys(io: ForeignKeyIo, meta: TableMeta): Promise<ParentForeignKeys> {
  const rows = await io.select(name(meta), { sql: REFERENCING_FOREIGN_KEYS_SQL, values: [meta.schema, meta.table] });
  const byKey = new Map<string, { childSchema: string; childTable: string; deleteRule: string; updateRule: string; columns: { child: string; parent: string }[] }>();
  for (const r of rows) {
    const id = `${r.childSchema}\u0000${r.childTable}\u0000${r.name}`;
    let fk = byKey.get(id);
    if (!fk) {
      fk = { childSchema: String(r.childSchema), childTable: String(r.childTable), deleteRule: String(r.deleteRule), updateRule: String(r.updateRule), columns: [] };
      byKey.set(id, fk);
    }
    fk.columns.push({ child: String(r.childColumn), parent: String(r.parentColumn) });
  }
  const fks = [...byKey.values()];
  const columns = [...new Set(fks.flatMap((fk) => fk.columns.map((c) => c.parent)))];
  const metas = columns.map((c) => meta.columns.find((m) => m.name === c));
  const index = columns.map((c) => meta.writableColumns.indexOf(c));
  // Only a column with a collation can hold two spellings of one value; a generated one is the server's.
  const referenced =
    columns.length > 0 && metas.some((m) => m?.collation) && index.every((i) => i >= 0)
      ? { columns, placeholders: metas.map((m) => keyPlaceholder(m!)), index }
      : undefined;
  const cascadeChildren: CascadeChild[] = [];
  const setNullChildren: CascadeChild[] = [];
  for (const [id, fk] of byKey) {
    if ((fk.deleteRule !== 'CASCADE' && fk.deleteRule !== 'SET NULL') || (fk.childSchema === meta.schema && fk.childTable === meta.table)) continue;
    // Installed: the child has the version column and its tombstone table exists.
    const tombstoneTable = tombstoneTableName(fk.childSchema, fk.childTable);
    const [hasVersion, hasTomb] = await Promise.all([
      io.select(name(meta), { sql: COLUMN_EXISTS_SQL, values: [fk.childSchema, fk.childTable, meta.versionColumn] }),
      io.select(name(meta), { sql: TABLE_EXISTS_SQL, values: [io.metaSchema, tombstoneTable] }),
    ]);
    if (hasVersion.length === 0 || hasTomb.length === 0) continue;
    const pk = await io.select(name(meta), { sql: PRIMARY_KEY_COLUMNS_SQL, values: [fk.childSchema, fk.childTable] });
    const primaryKey = pk.map((r) => String(r.columnName));
    const childColumns = await io.select(name(meta), { sql: COLUMNS_SQL, values: [fk.childSchema, fk.childTable] });
    const keyPlaceholders = primaryKey.map((k) => {
      const c = childColumns.find((r) => String(r.name) === k)!;
      return keyPlaceholder({ dataType: String(c.dataType), columnType: String(c.columnType), charset: c.charset === null ? null : String(c.charset), collation: c.collation === null ? null : String(c.collation) });
    });
    const child: CascadeChild = { schema: fk.childSchema, table: fk.childTable, primaryKey, versionColumn: meta.versionColumn, columns: fk.columns, tombstoneTable, keyPlaceholders, name: id.split('\u0000')[2]! };
    (fk.deleteRule === 'CASCADE' ? cascadeChildren : setNullChildren).push(child);
  }
  const updateActs = fks.some((fk) => fk.updateRule !== 'RESTRICT' && fk.updateRule !== 'NO ACTION');
  const deleteActs = fks.some((fk) => fk.deleteRule === 'CASCADE' || fk.deleteRule === 'SET NULL');
  return { ...(referenced ? { referenced } : {}), updateActs, cascadeChildren, setNullChildren, deleteActs };
}

function parentForeignKeys(io: ForeignKeyIo, meta: TableMeta): Promise<ParentForeignKeys> {
  let byMeta = parentCache.get(meta);
  if (!byMeta) {
    byMeta = new Map();
    parentCache.set(meta, byMeta);
  }
  let p = byMeta.get(io.metaSchema);
  if (!p) {
    p = loadParentForeignKeys(io, meta);
    byMeta.set(io.metaSchema, p);
    // A failed load is not kept: the next batch asks again.
    p.catch(() => byMeta.delete(io.metaSchema));
  }
  return p;
}

function cascadeKeys(io: ForeignKeyIo, meta: TableMeta): Promise<CascadeKey[]> {
  let p = childCache.get(meta);
  if (!p) {
    p = io.select(name(meta), { sql: FOREIGN_KEYS_BY_DELETE_RULE_SQL, values: [meta.schema, meta.table, 'CASCADE'] }).then((rows) => {
      const keys = new Map<string, CascadeKey>();
      for (const r of rows) {
        let fk = keys.get(String(r.name));
        if (!fk) {
          fk = { name: String(r.name), columns: [], parentSchema: String(r.parentSchema), parentTable: String(r.parentTable), parentColumns: [] };
          keys.set(fk.name, fk);
        }
        fk.columns.push(String(r.columnName));
        fk.parentColumns.push(String(r.parentColumn));
      }
      return [...keys.values()];
    });
    childCache.set(meta, p);
    p.catch(() => childCache.delete(meta));
  }
  return p;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Gives the stored rows the incoming spelling of their referenced columns where the server finds
 * it equal to the stored one (and the incoming version newer); the upsert then finds nothing of
 * them to change. `refused`: after a foreign key refused the upsert (ON UPDATE RESTRICT / NO
 * ACTION); `before`: ahead of the upsert, only for a table whose foreign keys' ON UPDATE action
 * would change the children. True when a row was respelled.
 *
 * Two ways a row comes to be respelled, told apart by the source's before image:
 * - LWW chose between spellings two nodes wrote (no update of the source changed the bytes): no
 *   server took an ON UPDATE action anywhere, so foreign-key checks are off for that one statement
 *   and the children keep the spelling they were written with, as on the node that wrote the parent.
 * - An update on the source changed the bytes ('abc' -> 'ABC', 'x' -> 'x  '): the source's server
 *   took its ON UPDATE CASCADE / SET NULL action on the children it held, with no version of theirs
 *   (no trigger runs for it). Respelled here with checks on, this server takes the same action,
 *   so the children end alike (with checks off they kept the old spelling at the same version, on
 *   this node only, for good).
 */
export async function respellReferencedKeys(io: ForeignKeyIo, meta: TableMeta, keys: readonly KeyPlan[], when: 'refused' | 'before'): Promise<boolean> {
  const fks = await parentForeignKeys(io, meta);
  const refs = fks.referenced;
  if (!refs || (when === 'before' && !fks.updateActs)) return false;
  const shape = shapeOf(meta);
  // A referenced column given its DEFAULT (see prepare.ts) has no spelling to compare: such a row is not respelled.
  const candidates = keys.filter((k) => k.upsert && !refs.index.some((i) => k.upsert!.row[i] instanceof ColumnDefault));
  const row = (k: KeyPlan) => [...k.key, ...refs.index.map((i) => k.upsert!.row[i]!), k.upsert!.version.toString()];
  const followed = when === 'before' ? candidates.filter((k) => sourceChangedReferenced(meta, refs.index, k)) : [];
  const kept = followed.length === 0 ? candidates : candidates.filter((k) => !followed.includes(k));
  let respelled = false;
  for (const part of chunks(followed.map(row), ROWS_PER_STATEMENT)) {
    respelled = (await io.run(name(meta), respellReferenced(shape, refs, part))).affectedRows > 0 || respelled;
  }
  for (const part of chunks(kept.map(row), ROWS_PER_STATEMENT)) {
    const [found] = await io.select(name(meta), countRespellable(shape, refs, part));
    if (Number(found?.n ?? 0) === 0) continue;
    await io.run(name(meta), { sql: FOREIGN_KEY_CHECKS_OFF_SQL, values: [] });
    try {
      const res = await io.run(name(meta), respellReferenced(shape, refs, part));
      respelled ||= res.affectedRows > 0;
    } finally {
      await io.run(name(meta), { sql: RESTORE_FOREIGN_KEY_CHECKS_SQL, values: [] }).catch((err: unknown) => {
        io.discard();
        throw err;
      });
    }
  }
  return respelled;
}

/** Some update of the key in this batch changed the bytes of a referenced column on the source (its before image against its row). */
function sourceChangedReferenced(meta: TableMeta, index: readonly number[], k: KeyPlan): boolean {
  return [k.upsert!, ...k.history].some((up) => {
    const before = up.before;
    if (!before) return false;
    return index.some((i) => {
      const column = meta.columns.find((c) => c.name === meta.writableColumns[i]);
      const was = column ? before[column.name] : undefined;
      // A before image without the column (a source that sends keys only) shows no change.
      if (was === undefined || column === undefined) return false;
      try {
        return !sameBytes(toSqlValue(column, was), up.row[i]);
      } catch {
        return false;
      }
    });
  });
}

function sameBytes(a: unknown, b: unknown): boolean {
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  return a === b || (a !== null && b !== null && String(a) === String(b));
}

/**
 * An incoming row that an ON DELETE CASCADE foreign key refused because its parent is gone here (no
 * row, a tombstone): the parent's delete cascades the row away on every node that held it, so it is
 * not written; its key gets a tombstone at the row's version (an older stored row goes), logged and
 * counted. False when no such parent was found (the foreign key error stands).
 */
export async function dropChildOfDeletedParent(io: ForeignKeyIo, meta: TableMeta, k: KeyPlan, counts: TableCounters): Promise<boolean> {
  const up = k.upsert!;
  const gone: string[] = [];
  for (const fk of await cascadeKeys(io, meta)) {
    const idx = fk.columns.map((c) => meta.writableColumns.indexOf(c));
    // A column given its DEFAULT has no value here to look the parent up by: the foreign key error stands.
    if (idx.some((i) => i < 0 || up.row[i] === null || up.row[i] instanceof ColumnDefault)) continue;
    const match: UniqueValues = {
      columns: fk.parentColumns,
      placeholders: fk.columns.map((c) => keyPlaceholder(meta.columns.find((m) => m.name === c)!)),
      values: idx.map((i) => up.row[i]!),
    };
    const parent = `${fk.parentSchema}.${fk.parentTable}`;
    if ((await io.select(parent, rowExists(fk.parentSchema, fk.parentTable, match))).length > 0) continue;
    // The parent's tombstone table is keyed by its primary key: a foreign key to other columns
    // cannot be checked there, and the error stands.
    const deleted = await io.select(parent, rowExists(io.metaSchema, tombstoneTableName(fk.parentSchema, fk.parentTable), match)).catch(() => []);
    if (deleted.length > 0) gone.push(`${fk.name} (${fk.columns.join(', ')})`);
  }
  if (gone.length === 0) return false;
  const tombRow = [...k.key, up.version.toString()];
  // Tombstone first, then the row (apply.ts: a local insert re-reads the tombstone after its row exists).
  await io.run(name(meta), upsertTombstones(tombShapeOf(meta, io.metaSchema), [tombRow], io.dialect));
  counts.deleted += (await io.run(name(meta), guardedDelete(shapeOf(meta), [tombRow]))).affectedRows;
  counts.foreignKeyCascades++;
  await io.logConflict(meta, {
    sourceId: up.sourceId,
    reason: `foreign key cascade: ${gone.join(', ')} named a deleted parent; the row goes with it`,
    version: up.version,
    columns: meta.writableColumns,
    value: (_c, i) => up.row[i],
  });
  return true;
}

/**
 * Server errors a key move can meet: the new key is taken (1062, 1586), a foreign key refuses the
 * change (1451, 1217), or the row's own parent is not there yet (1452, 1216: written later in this
 * batch, whose upserts follow the deletes).
 */
const MOVE_REFUSED = new Set([1062, 1586, 1451, 1217, 1452, 1216]);

/**
 * A replicated primary-key change of a row other tables reference ON UPDATE CASCADE or SET NULL. The
 * source's server changed (or cleared) the children's references itself, with no trigger: no change
 * of theirs carries a version (MySQL 9.7 logs them at their old one, MariaDB not at all). Applied as
 * a delete of the old key, the children here went with the parent, as this node's own follow-up,
 * on every node (or were nulled). The row is moved here by an UPDATE of its key instead, so this
 * server takes the same ON UPDATE action; the new key's upsert then writes the row's values. Only
 * where the batch holds nothing else of the two keys that could make the stored row another one:
 * the old key has this one delete and no write, the new key no delete and no write older than the
 * move (later writes of it are fine: the upsert takes the newest), and no tombstone holds the new
 * key at the move's version (locking read). A taken new key or a foreign key that refuses leaves the
 * key to the delete (as before). `byId`: the table's keys in this batch by key text (TablePlan.keys).
 * Returns the keys moved.
 */
export async function moveReferencedRows(io: ForeignKeyIo, meta: TableMeta, keys: readonly KeyPlan[], byId: ReadonlyMap<string, KeyPlan>, counts: TableCounters): Promise<Set<KeyPlan>> {
  const moved = new Set<KeyPlan>();
  const candidates = keys.filter((k) => k.movedTo !== undefined);
  if (candidates.length === 0 || !(await parentForeignKeys(io, meta)).updateActs) return moved;
  const shape = shapeOf(meta);
  const tomb = tombShapeOf(meta, io.metaSchema);
  for (const k of candidates) {
    const version = k.deleteVersion!;
    // Renamed twice, or a row written at the old key in between: the stored row may not be the one that moved.
    if ((k.deletes ?? 1) > 1 || k.upsert || k.history.length > 0) continue;
    const to = byId.get(keyIdOf(k.movedTo!));
    if (!to?.upsert || to.deleteVersion !== undefined || !to.history.some((h) => h.version === version) || to.history.some((h) => h.version < version)) continue;
    const held = await io.select(name(meta), lockTombstones(tomb, [k.movedTo!]));
    if (held.some((r) => BigInt(String(r[meta.versionColumn])) >= version)) continue;
    try {
      if ((await io.run(name(meta), moveKey(shape, k.key, k.movedTo!, version.toString()))).affectedRows === 0) continue;
    } catch (err) {
      if (MOVE_REFUSED.has((err as { cause?: { errno?: number } }).cause?.errno ?? 0)) continue;
      throw err;
    }
    moved.add(k);
    counts.deleted++;
  }
  return moved;
}

/**
 * Before the guarded delete of a batch's keys (their tombstones are written): the rows to delete
 * (key values then the delete's version). For a table with ON DELETE CASCADE or SET NULL children:
 * - a key written again, newer, in the same batch (a REPLACE, a delete and a re-insert) is not
 *   deleted, only overwritten by its upsert: deleting it would cascade (or null, with no version)
 *   children the deleting node never saw, which reach it later and land there unchanged, as its
 *   parent exists again (the children it saw come with their own changes: its trigger's tombstones
 *   and stamped updates, or nothing where a MySQL REPLACE kept them);
 * - the child rows an ON DELETE CASCADE will remove are tombstoned first. The node that deleted the parent
 *   removed every child it held (its trigger tombstoned them, and those tombstones came first in
 *   this transaction), so a child still here was written concurrently; it gets a tombstone at its own
 *   version — what the other node gives it when the write arrives to a missing parent
 *   (dropChildOfDeletedParent) — logged and counted.
 */
export async function rowsToDelete(io: ForeignKeyIo, meta: TableMeta, keys: readonly KeyPlan[], batch: readonly KeyPlan[], sourceId: string, counts: TableCounters): Promise<SqlValue[][]> {
  const fks = await parentForeignKeys(io, meta);
  let doomed = fks.deleteActs ? keys.filter((k) => !(k.upsert && k.upsert.version > k.deleteVersion!)) : keys;
  // Another spelling of the key, written newer (a REPLACE from 'beta' to 'Beta'), is the same row for the server.
  const spelled = fks.deleteActs && meta.primaryKey.some((c) => meta.columns.find((m) => m.name === c)?.collation) ? batch.filter((k) => k.upsert && k.deleteVersion === undefined) : [];
  if (doomed.length > 0 && spelled.length > 0) {
    const shape = shapeOf(meta);
    const respelt = new Set<number>();
    for (const part of chunks(spelled, ROWS_PER_STATEMENT)) {
      const written = part.map((k) => [...k.key, k.upsert!.version.toString()]);
      const deleted = doomed.map((k) => [...k.key, k.deleteVersion!.toString()]);
      for (const r of await io.select(name(meta), rewrittenKeys(shape, deleted, written))) respelt.add(Number(r._lww_i));
    }
    doomed = doomed.filter((_, i) => !respelt.has(i));
  }
  const rows = doomed.map((k) => [...k.key, k.deleteVersion!.toString()]);
  if (rows.length === 0) return rows;
  if (io.followUps) {
    // Children still here were written concurrently (see above): this node's own action first.
    const cascaded = await childrenOf(io, meta, fks.cascadeChildren, rows, 'CASCADE');
    if (cascaded.length > 0) throw new ForeignKeyFollowUpNeeded(cascaded);
    // SET NULL: the children the deleting node cleared come later in this batch, newer (its trigger's
    // stamped updates); what is still at the version found here when the batch ends was not (apply.ts).
    io.followUps.push(...(await childrenOf(io, meta, fks.setNullChildren, rows, 'SET NULL')));
    return rows;
  }
  await tombstoneCascadedChildren(io, meta, fks.cascadeChildren, rows, sourceId, counts, 'deleted on another node');
  return rows;
}

/**
 * Before the sink removes stored rows of a table by last-write-wins across a UNIQUE key (a clash
 * with a newer row, a newer claim of the value): the server's ON DELETE CASCADE takes their child
 * rows with them, so each child gets a tombstone at its own version first, logged and counted —
 * what a replicated delete of the parent gives it (rowsToDelete), and what the other node gives
 * such a child when it arrives to the removed parent (dropChildOfDeletedParent). Without it the
 * child went on this node with no tombstone and no word (found by `harness --schema-gen 109`: one
 * node held the child's tombstone, the other nothing). Rows: the removed rows' key values, then the
 * version they are removed below.
 */
export async function tombstoneChildrenOfClashLosers(io: ForeignKeyIo, meta: TableMeta, rows: readonly SqlValue[][], sourceId: string, counts: TableCounters): Promise<void> {
  if (rows.length === 0) return;
  const fks = await parentForeignKeys(io, meta);
  if (fks.cascadeChildren.length > 0) await tombstoneCascadedChildren(io, meta, fks.cascadeChildren, rows, sourceId, counts, 'removed by a UNIQUE clash');
}

async function tombstoneCascadedChildren(
  io: ForeignKeyIo,
  meta: TableMeta,
  children: readonly CascadeChild[],
  rows: readonly SqlValue[][],
  sourceId: string,
  counts: TableCounters,
  how: string,
): Promise<void> {
  const shape = shapeOf(meta);
  for (const child of children) {
    const childName = `${child.schema}.${child.table}`;
    for (const part of chunks(rows, ROWS_PER_STATEMENT)) {
      const found = await io.select(childName, lockCascadedChildren(shape, child, part));
      if (found.length === 0) continue;
      await io.run(childName, tombstoneChildrenSql(shape, child, { metaSchema: io.metaSchema, tombstoneTable: child.tombstoneTable }, part, io.dialect));
      counts.foreignKeyCascades += found.length;
      for (const r of found) {
        await io.logConflict(child, {
          sourceId,
          reason: `foreign key cascade: removed with its parent ${name(meta)}, ${how}`,
          version: BigInt(r._lww_v as string),
          columns: child.primaryKey,
          value: (c) => r[c],
        });
      }
    }
  }
}

/** The child rows the guarded delete of these parent rows would change (locking read), as follow-ups. */
async function childrenOf(io: ForeignKeyIo, meta: TableMeta, children: readonly CascadeChild[], rows: readonly SqlValue[][], action: ForeignKeyFollowUp['action']): Promise<ForeignKeyFollowUp[]> {
  const shape = shapeOf(meta);
  const out: ForeignKeyFollowUp[] = [];
  for (const child of children) {
    for (const part of chunks(rows, ROWS_PER_STATEMENT)) {
      for (const r of await io.select(`${child.schema}.${child.table}`, lockCascadedChildren(shape, child, part))) {
        out.push({ action, child, parent: name(meta), key: child.primaryKey.map((k) => r[k] as SqlValue), version: BigInt(String(r._lww_v)) });
      }
    }
  }
  return out;
}

/** Of these SET NULL follow-ups, the ones whose rows still hold the version they were found at (the foreign key's action left them so). */
export async function followUpsStillDue(io: ForeignKeyIo, followUps: readonly ForeignKeyFollowUp[]): Promise<ForeignKeyFollowUp[]> {
  const due: ForeignKeyFollowUp[] = [];
  const byChild = new Map<CascadeChild, ForeignKeyFollowUp[]>();
  for (const f of followUps) {
    const list = byChild.get(f.child);
    if (list) list.push(f);
    else byChild.set(f.child, [f]);
  }
  for (const [child, list] of byChild) {
    for (const part of chunks(list, ROWS_PER_STATEMENT)) {
      const found = await io.select(`${child.schema}.${child.table}`, childRowsAtVersions(child, part.map((f) => [...f.key, f.version.toString()])));
      for (const r of found) due.push(part[Number(r._lww_i)]!);
    }
  }
  return due;
}

/**
 * Runs follow-ups as this node's own writes (ForeignKeyFollowUpNeeded), in a transaction of their
 * own that writes no checkpoint, so capture hands it on like a local one: each child row, only while
 * it still holds the version it was found at, is deleted (CASCADE: its tombstone written first) or
 * has its references cleared (SET NULL), at the least version of this node above the row's own. That
 * beats the child's write it corrects and nothing later: a newer write of the row made meanwhile on
 * another node (a delete, say) still wins everywhere — stamped with the clock, the follow-up would
 * bring a concurrently deleted row back (generated seed 101 on MariaDB). Logged in the conflict log
 * at the row's version. Returns how many rows changed.
 */
export async function applyForeignKeyFollowUps(io: ForeignKeyIo, nodeId: number, commit: () => Promise<void>, rollback: () => Promise<void>, followUps: readonly ForeignKeyFollowUp[], sourceId: string): Promise<number> {
  let changed = 0;
  try {
    for (const f of followUps) {
      const name = `${f.child.schema}.${f.child.table}`;
      // DESIGN.md's hlc with the clock left out: the least version of this node above the row's.
      const to = nextVersion(f.version, 0n, nodeId);
      if (f.action === 'CASCADE') {
        // Locked first, so the tombstone is written only for a row that is then deleted (tombstone before row, as every delete).
        if ((await io.select(name, childAtVersion(f.child, f.key, f.version, 'lock'))).length === 0) continue;
        const tomb = { metaSchema: io.metaSchema, tombstoneTable: f.child.tombstoneTable, primaryKey: f.child.primaryKey, versionColumn: f.child.versionColumn, keyPlaceholders: f.child.keyPlaceholders };
        await io.run(name, upsertTombstones(tomb, [[...f.key, to.toString()]], io.dialect));
      }
      const res = await io.run(name, childAtVersion(f.child, f.key, f.version, f.action === 'CASCADE' ? 'delete' : { nullAt: to }));
      if (res.affectedRows === 0) continue;
      changed += res.affectedRows;
      await io.logConflict(f.child, {
        sourceId,
        reason:
          f.action === 'CASCADE'
            ? `${FOLLOW_UP_CASCADE_REASON} (version ${to}) before the delete of its parent ${f.parent} (${f.child.name}) from another node, which did not know the row`
            : `foreign key set null: ${f.child.name} (${f.child.columns.map((c) => c.child).join(', ')}) ${FOLLOW_UP_SET_NULL_MARK} (version ${to}) before the delete of its parent ${f.parent} from another node, which did not know the row`,
        version: f.version,
        columns: f.child.primaryKey,
        value: (_c, i) => f.key[i],
      });
    }
    await commit();
  } catch (err) {
    await rollback().catch(() => undefined);
    throw err;
  }
  return changed;
}
