// Statements for foreign keys between replicated tables that the plain LWW apply cannot settle
// (src/writer/foreign-keys.ts decides when they run): the foreign keys that reference a table, a
// collated referenced key respelled without the foreign key's ON UPDATE action, and the tombstones
// of child rows an ON DELETE CASCADE is about to remove. Pure; bound values in order.
import { TypedJson } from '../model/json.ts';
import type { Dialect } from './dialect.ts';
import { usesRowAlias } from './dialect.ts';
import { type BoundValue, ColumnDefault, derivedRows, INDEX_COLUMN, type SqlValue, type Statement, type TableShape, type TombstoneShape } from './dml.ts';
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

/** Foreign keys that reference a table, one row per column in key order (bound: schema, table). */
export const REFERENCING_FOREIGN_KEYS_SQL =
  'SELECT k.CONSTRAINT_NAME AS name, k.TABLE_SCHEMA AS childSchema, k.TABLE_NAME AS childTable, k.COLUMN_NAME AS childColumn,' +
  ' k.REFERENCED_COLUMN_NAME AS parentColumn, r.UPDATE_RULE AS updateRule, r.DELETE_RULE AS deleteRule' +
  ' FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r' +
  ' ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME' +
  ' WHERE k.REFERENCED_TABLE_SCHEMA = ? AND k.REFERENCED_TABLE_NAME = ?' +
  ' ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION';

/** A table's own foreign keys with a given ON DELETE rule, one row per column (bound: schema, table, rule). */
export const FOREIGN_KEYS_BY_DELETE_RULE_SQL =
  'SELECT k.CONSTRAINT_NAME AS name, k.COLUMN_NAME AS columnName, k.REFERENCED_TABLE_SCHEMA AS parentSchema, k.REFERENCED_TABLE_NAME AS parentTable,' +
  ' k.REFERENCED_COLUMN_NAME AS parentColumn FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r' +
  ' ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME' +
  ' WHERE k.TABLE_SCHEMA = ? AND k.TABLE_NAME = ? AND k.REFERENCED_TABLE_NAME IS NOT NULL AND r.DELETE_RULE = ?' +
  ' ORDER BY k.CONSTRAINT_NAME, k.ORDINAL_POSITION';

/** Primary-key columns of a table in key order (bound: schema, table). */
export const PRIMARY_KEY_COLUMNS_SQL =
  "SELECT COLUMN_NAME AS columnName FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX";

/** Whether a column exists (bound: schema, table, column). */
export const COLUMN_EXISTS_SQL = 'SELECT 1 AS found FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?';

/** Whether a table exists (bound: schema, table). */
export const TABLE_EXISTS_SQL = 'SELECT 1 AS found FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?';

const ALIAS = '_lww_n';

function keyValue(v: SqlValue): BoundValue {
  if (v instanceof TypedJson) throw new Error('a typed JSON document can only be a written column value');
  if (v instanceof ColumnDefault) throw new Error("a column's DEFAULT can only be a written column value");
  return v;
}
const VERSION_PLACEHOLDER = 'CAST(? AS DECIMAL(20,0))';

/** The session's foreign-key checks off, the old setting kept in a user variable; restoreForeignKeyChecks puts it back. */
export const FOREIGN_KEY_CHECKS_OFF_SQL = 'SET @lww_fk_checks = @@SESSION.foreign_key_checks, SESSION foreign_key_checks = 0';
export const RESTORE_FOREIGN_KEY_CHECKS_SQL = 'SET SESSION foreign_key_checks = @lww_fk_checks';

/** Referenced columns of a parent table, with the typed placeholder of each (dml.ts keyPlaceholder). */
export interface ReferencedColumns {
  columns: readonly string[];
  placeholders: readonly string[];
}

function derived(shape: TableShape, refs: ReferencedColumns, n: number): string {
  const names = [...shape.primaryKey.map((_, i) => `_lww_k${i}`), ...refs.columns.map((_, i) => `_lww_r${i}`), '_lww_v'];
  const exprs = [...shape.keyPlaceholders, ...refs.placeholders, VERSION_PLACEHOLDER];
  const first = `SELECT ${exprs.map((e, i) => `${e} AS ${quoteIdent(names[i]!)}`).join(', ')}`;
  return [first, ...new Array<string>(n - 1).fill(`SELECT ${exprs.join(', ')}`)].join(' UNION ALL ');
}

/**
 * The rows of `shape` (matched by the server's key equality) older than an incoming version whose
 * referenced columns equal the incoming values under their collations but not byte for byte: the
 * LWW upsert would respell them. Rows: key values, referenced values, version.
 */
function respellable(shape: TableShape, refs: ReferencedColumns, rows: readonly (readonly SqlValue[])[]): { join: string; where: string; values: BoundValue[] } {
  const target = quoteTable(shape.schema, shape.table);
  const ref = (n: string) => `${quoteIdent(ALIAS)}.${quoteIdent(n)}`;
  const on = shape.primaryKey.map((k, i) => `${target}.${quoteIdent(k)} = ${ref(`_lww_k${i}`)}`).join(' AND ');
  const equal = refs.columns.map((c, i) => `${target}.${quoteIdent(c)} = ${ref(`_lww_r${i}`)}`).join(' AND ');
  const differ = refs.columns.map((c, i) => `CAST(${target}.${quoteIdent(c)} AS BINARY) <> CAST(${ref(`_lww_r${i}`)} AS BINARY)`).join(' OR ');
  const width = shape.primaryKey.length + refs.columns.length + 1;
  const values: BoundValue[] = [];
  for (const r of rows) {
    if (r.length !== width) throw new Error(`a row has ${r.length} values, the statement binds ${width}`);
    for (const v of r) values.push(keyValue(v));
  }
  return {
    join: `${target} JOIN (${derived(shape, refs, rows.length)}) AS ${quoteIdent(ALIAS)} ON ${on}`,
    where: `${target}.${quoteIdent(shape.versionColumn)} < ${ref('_lww_v')} AND ${equal} AND (${differ})`,
    values,
  };
}

/** How many of the rows respellReferenced would change (a locking read: the rows stay as read). */
export function countRespellable(shape: TableShape, refs: ReferencedColumns, rows: readonly (readonly SqlValue[])[]): Statement {
  const r = respellable(shape, refs, rows);
  return { sql: `SELECT COUNT(*) AS ${quoteIdent('n')} FROM ${r.join} WHERE ${r.where} FOR UPDATE`, values: r.values };
}

/**
 * Sets the referenced columns of those rows to the incoming spelling, nothing else (the version is
 * the upsert's job). Run with foreign-key checks off: the old and new values are equal under the
 * columns' collations, as the foreign keys compare them, so no reference can dangle.
 */
export function respellReferenced(shape: TableShape, refs: ReferencedColumns, rows: readonly (readonly SqlValue[])[]): Statement {
  const r = respellable(shape, refs, rows);
  const target = quoteTable(shape.schema, shape.table);
  const sets = refs.columns.map((c, i) => `${target}.${quoteIdent(c)} = ${quoteIdent(ALIAS)}.${quoteIdent(`_lww_r${i}`)}`).join(', ');
  return { sql: `UPDATE ${r.join} SET ${sets} WHERE ${r.where}`, values: r.values };
}

/**
 * Which deleted keys (rows: key values then the delete's version) the server holds equal to a key
 * written newer (rows: key values then the write's version), spelled otherwise ('beta' and 'Beta'
 * under a case-insensitive collation). Rows: `_lww_i`, the positions among the deleted keys.
 */
export function rewrittenKeys(shape: TableShape, deleted: readonly (readonly SqlValue[])[], written: readonly (readonly SqlValue[])[]): Statement {
  const width = shape.primaryKey.length + 1;
  const keys = shape.primaryKey.map((_, i) => `_lww_k${i}`);
  const d = derivedRows([INDEX_COLUMN, ...keys, '_lww_v'], ['CAST(? AS UNSIGNED)', ...shape.keyPlaceholders, VERSION_PLACEHOLDER], deleted.length);
  const w = derivedRows([...keys, '_lww_v'], [...shape.keyPlaceholders, VERSION_PLACEHOLDER], written.length);
  const on = keys.map((k) => `${quoteIdent('_lww_d')}.${quoteIdent(k)} = ${quoteIdent('_lww_w')}.${quoteIdent(k)}`).join(' AND ');
  const values: BoundValue[] = [];
  deleted.forEach((r, i) => {
    if (r.length !== width) throw new Error(`a row has ${r.length} values, the statement binds ${width}`);
    values.push(i, ...r.map(keyValue));
  });
  for (const r of written) {
    if (r.length !== width) throw new Error(`a row has ${r.length} values, the statement binds ${width}`);
    values.push(...r.map(keyValue));
  }
  return {
    sql:
      `SELECT DISTINCT ${quoteIdent('_lww_d')}.${quoteIdent(INDEX_COLUMN)} FROM (${d}) AS ${quoteIdent('_lww_d')} JOIN (${w}) AS ${quoteIdent('_lww_w')}` +
      ` ON ${on} AND ${quoteIdent('_lww_w')}.${quoteIdent('_lww_v')} > ${quoteIdent('_lww_d')}.${quoteIdent('_lww_v')}`,
    values,
  };
}

/** An ON DELETE CASCADE foreign key of an installed child table, seen from its parent. */
export interface CascadeChildShape {
  schema: string;
  table: string;
  primaryKey: readonly string[];
  versionColumn: string;
  /** Pairs: the child's column and the parent column it references. */
  columns: readonly { child: string; parent: string }[];
}

/** The child rows (key columns, then `_lww_v`: their version) that the guarded delete of these parent keys would cascade. */
function cascadedRows(parent: TableShape, child: CascadeChildShape, rows: readonly (readonly SqlValue[])[], versionAs: string): Statement {
  const p = quoteTable(parent.schema, parent.table);
  const c = quoteTable(child.schema, child.table);
  const names = [...parent.primaryKey.map((_, i) => `_lww_k${i}`), '_lww_v'];
  const exprs = [...parent.keyPlaceholders, VERSION_PLACEHOLDER];
  const first = `SELECT ${exprs.map((e, i) => `${e} AS ${quoteIdent(names[i]!)}`).join(', ')}`;
  const d = [first, ...new Array<string>(rows.length - 1).fill(`SELECT ${exprs.join(', ')}`)].join(' UNION ALL ');
  const ref = (n: string) => `${quoteIdent(ALIAS)}.${quoteIdent(n)}`;
  const onParent = parent.primaryKey.map((k, i) => `${p}.${quoteIdent(k)} = ${ref(`_lww_k${i}`)}`).join(' AND ');
  const onChild = child.columns.map((x) => `${c}.${quoteIdent(x.child)} = ${p}.${quoteIdent(x.parent)}`).join(' AND ');
  const width = parent.primaryKey.length + 1;
  const values: BoundValue[] = [];
  for (const r of rows) {
    if (r.length !== width) throw new Error(`a row has ${r.length} values, the statement binds ${width}`);
    for (const v of r) values.push(keyValue(v));
  }
  return {
    sql:
      `SELECT ${child.primaryKey.map((k) => `${c}.${quoteIdent(k)}`).join(', ')}, ${c}.${quoteIdent(child.versionColumn)} AS ${quoteIdent(versionAs)}` +
      ` FROM (${d}) AS ${quoteIdent(ALIAS)} JOIN ${p} ON ${onParent} JOIN ${c} ON ${onChild}` +
      ` WHERE ${p}.${quoteIdent(parent.versionColumn)} < ${ref('_lww_v')}`,
    values,
  };
}

/**
 * The child rows a guarded delete of these parent keys (rows: key values then the delete's version)
 * would cascade, read FOR UPDATE: the parent rows are locked too, so no child can join them before
 * the delete.
 */
export function lockCascadedChildren(parent: TableShape, child: CascadeChildShape, rows: readonly (readonly SqlValue[])[]): Statement {
  const s = cascadedRows(parent, child, rows, '_lww_v');
  return { sql: `${s.sql} FOR UPDATE`, values: s.values };
}

/** Raises (or writes) the tombstones of those child rows to each row's own version; a newer one takes the row's key spelling. */
export function tombstoneCascadedChildren(parent: TableShape, child: CascadeChildShape, tomb: Pick<TombstoneShape, 'metaSchema' | 'tombstoneTable'>, rows: readonly (readonly SqlValue[])[], dialect: Dialect): Statement {
  // The version is named like the tombstone's column: MySQL refuses the row alias after INSERT … SELECT.
  const s = cascadedRows(parent, child, rows, child.versionColumn);
  const target = quoteTable(tomb.metaSchema, tomb.tombstoneTable);
  const v = quoteIdent(child.versionColumn);
  const incoming = (col: string) => (usesRowAlias(dialect) ? `${quoteIdent('_lww_h')}.${quoteIdent(col)}` : `VALUES(${quoteIdent(col)})`);
  const newer = `${incoming(child.versionColumn)} > ${target}.${v}`;
  const keys = child.primaryKey.map((k) => `${quoteIdent(k)} = IF(${newer}, ${incoming(k)}, ${target}.${quoteIdent(k)})`);
  return {
    sql:
      `INSERT INTO ${target} (${quoteList([...child.primaryKey, child.versionColumn])}) SELECT * FROM (${s.sql}) AS ${quoteIdent('_lww_h')}` +
      ` ON DUPLICATE KEY UPDATE ${[...keys, `${v} = GREATEST(${target}.${v}, ${incoming(child.versionColumn)})`].join(', ')}`,
    values: s.values,
  };
}

/**
 * One child row by its key, only while it holds `version`: lock it (a read), delete it, or clear
 * the foreign key's columns giving it the version `to` (the sink's follow-ups of a replicated parent
 * delete, writer/foreign-keys.ts). Key values as the server returned them, bound through the
 * child's typed key placeholders.
 */
export function childAtVersion(
  child: CascadeChildShape & { keyPlaceholders: readonly string[] },
  key: readonly SqlValue[],
  version: bigint,
  how: 'lock' | 'delete' | { nullAt: bigint },
): Statement {
  if (key.length !== child.primaryKey.length) throw new Error(`a key has ${key.length} values, the table's primary key ${child.primaryKey.length}`);
  const c = quoteTable(child.schema, child.table);
  const where = [...child.primaryKey.map((k, i) => `${c}.${quoteIdent(k)} = ${child.keyPlaceholders[i]}`), `${c}.${quoteIdent(child.versionColumn)} = ${VERSION_PLACEHOLDER}`].join(' AND ');
  const values: BoundValue[] = [...key.map(keyValue), version.toString()];
  if (how === 'lock') return { sql: `SELECT 1 AS ${quoteIdent('found')} FROM ${c} WHERE ${where} FOR UPDATE`, values };
  if (how === 'delete') return { sql: `DELETE FROM ${c} WHERE ${where}`, values };
  const sets = [...child.columns.map((x) => `${quoteIdent(x.child)} = NULL`), `${quoteIdent(child.versionColumn)} = ${VERSION_PLACEHOLDER}`];
  return { sql: `UPDATE ${c} SET ${sets.join(', ')} WHERE ${where}`, values: [how.nullAt.toString(), ...values] };
}

/**
 * Which of these child rows (rows: key values then a version) still hold that version: `_lww_i`,
 * their positions. Matched by the server's key equality, through the child's typed key placeholders.
 */
export function childRowsAtVersions(child: CascadeChildShape & { keyPlaceholders: readonly string[] }, rows: readonly (readonly SqlValue[])[]): Statement {
  const width = child.primaryKey.length + 1;
  const keys = child.primaryKey.map((_, i) => `_lww_k${i}`);
  const d = derivedRows([INDEX_COLUMN, ...keys, '_lww_v'], ['CAST(? AS UNSIGNED)', ...child.keyPlaceholders, VERSION_PLACEHOLDER], rows.length);
  const c = quoteTable(child.schema, child.table);
  const ref = (n: string) => `${quoteIdent(ALIAS)}.${quoteIdent(n)}`;
  const on = [...child.primaryKey.map((k, i) => `${c}.${quoteIdent(k)} = ${ref(keys[i]!)}`), `${c}.${quoteIdent(child.versionColumn)} = ${ref('_lww_v')}`].join(' AND ');
  const values: BoundValue[] = [];
  rows.forEach((r, i) => {
    if (r.length !== width) throw new Error(`a row has ${r.length} values, the statement binds ${width}`);
    values.push(i, ...r.map(keyValue));
  });
  return { sql: `SELECT ${ref(INDEX_COLUMN)} FROM (${d}) AS ${quoteIdent(ALIAS)} JOIN ${c} ON ${on}`, values };
}
