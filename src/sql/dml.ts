// Statement text for applying row changes: the LWW upsert, its REPLACE bypass, tombstones, guarded
// deletes. Pure functions of table shape and row count; values are always bound (`?`).
import type { Dialect } from './dialect.ts';
import { usesRowAlias } from './dialect.ts';
import { placeholders, quoteIdent, quoteList, quoteTable } from './quote.ts';

export interface TableShape {
  schema: string;
  table: string;
  /** Columns written, version column last. */
  columns: readonly string[];
  primaryKey: readonly string[];
  versionColumn: string;
}

export interface TombstoneShape {
  metaSchema: string;
  tombstoneTable: string;
  primaryKey: readonly string[];
  versionColumn: string;
}

const ROW_ALIAS = '_lww_new';

function valuesList(width: number, rows: number): string {
  const one = placeholders(width);
  return new Array(rows).fill(one).join(', ');
}

/**
 * Multi-row LWW upsert: a row is overwritten only by a strictly newer version of the same primary
 * key. The version column is assigned last because assignments are evaluated left to right.
 * Bound values: rows × columns, row-major, in `shape.columns` order.
 */
export function lwwUpsertSql(shape: TableShape, rows: number, dialect: Dialect): string {
  if (shape.columns[shape.columns.length - 1] !== shape.versionColumn) {
    throw new Error('the version column must be the last written column');
  }
  const target = quoteTable(shape.schema, shape.table);
  const stored = (c: string) => `${target}.${quoteIdent(c)}`;
  const alias = usesRowAlias(dialect);
  const incoming = (c: string) => (alias ? `${quoteIdent(ROW_ALIAS)}.${quoteIdent(c)}` : `VALUES(${quoteIdent(c)})`);
  const newer = [
    `${incoming(shape.versionColumn)} > ${stored(shape.versionColumn)}`,
    ...shape.primaryKey.map((k) => `${incoming(k)} = ${stored(k)}`),
  ].join(' AND ');
  const pk = new Set(shape.primaryKey);
  const assignments = shape.columns
    .filter((c) => !pk.has(c))
    .map((c) => `${quoteIdent(c)} = IF(${newer}, ${incoming(c)}, ${stored(c)})`);
  return (
    `INSERT INTO ${target} (${quoteList(shape.columns)}) VALUES ${valuesList(shape.columns.length, rows)}` +
    (alias ? ` AS ${quoteIdent(ROW_ALIAS)}` : '') +
    ` ON DUPLICATE KEY UPDATE ${assignments.join(', ')}`
  );
}

/** What a non-LWW sink does: the incoming row replaces whatever is there. */
export function replaceSql(shape: TableShape, rows: number): string {
  return `REPLACE INTO ${quoteTable(shape.schema, shape.table)} (${quoteList(shape.columns)}) VALUES ${valuesList(shape.columns.length, rows)}`;
}

/** `(a, b) IN ((?, ?), ...)` or `a IN (?, ...)`; bound values: keys × key columns. */
function keyIn(columns: readonly string[], keys: number, qualify: (c: string) => string = quoteIdent): string {
  if (columns.length === 1) {
    return `${qualify(columns[0]!)} IN (${new Array(keys).fill('?').join(', ')})`;
  }
  return `(${columns.map(qualify).join(', ')}) IN (${valuesList(columns.length, keys)})`;
}

/** Locking read of the tombstones of a batch's keys; locks the gaps too, so a concurrent local insert waits. */
export function selectTombstonesForUpdateSql(shape: TombstoneShape, keys: number): string {
  return (
    `SELECT ${quoteList([...shape.primaryKey, shape.versionColumn])} FROM ${quoteTable(shape.metaSchema, shape.tombstoneTable)}` +
    ` WHERE ${keyIn(shape.primaryKey, keys)} FOR UPDATE`
  );
}

/** Upserts tombstones keeping the highest version. Bound values: keys × (key columns + version). */
export function upsertTombstonesSql(shape: TombstoneShape, rows: number, dialect: Dialect): string {
  const target = quoteTable(shape.metaSchema, shape.tombstoneTable);
  const v = quoteIdent(shape.versionColumn);
  const incoming = usesRowAlias(dialect) ? `${quoteIdent(ROW_ALIAS)}.${v}` : `VALUES(${v})`;
  return (
    `INSERT INTO ${target} (${quoteList([...shape.primaryKey, shape.versionColumn])}) VALUES ${valuesList(shape.primaryKey.length + 1, rows)}` +
    (usesRowAlias(dialect) ? ` AS ${quoteIdent(ROW_ALIAS)}` : '') +
    ` ON DUPLICATE KEY UPDATE ${v} = GREATEST(${target}.${v}, ${incoming})`
  );
}

/** Deletes each key only where the stored version is older than the delete. Bound: per key, key columns then version. */
export function guardedDeleteSql(shape: TableShape, keys: number): string {
  const one = `(${[...shape.primaryKey.map((k) => `${quoteIdent(k)} = ?`), `${quoteIdent(shape.versionColumn)} < ?`].join(' AND ')})`;
  return `DELETE FROM ${quoteTable(shape.schema, shape.table)} WHERE ${new Array(keys).fill(one).join(' OR ')}`;
}

/** Plain delete by key (the bypass). Bound: keys × key columns. */
export function plainDeleteSql(shape: TableShape, keys: number): string {
  return `DELETE FROM ${quoteTable(shape.schema, shape.table)} WHERE ${keyIn(shape.primaryKey, keys)}`;
}

/** Current versions of a batch's keys (to tell stale rows from unique-key clashes). Bound: keys × key columns. */
export function selectVersionsSql(shape: TableShape, keys: number): string {
  return (
    `SELECT ${quoteList([...shape.primaryKey, shape.versionColumn])} FROM ${quoteTable(shape.schema, shape.table)}` +
    ` WHERE ${keyIn(shape.primaryKey, keys)}`
  );
}

/** Appends a row to the conflict log. Bound: source_id, schema, table, reason, version, row_json. */
export function insertConflictSql(metaSchema: string): string {
  return (
    `INSERT INTO ${quoteTable(metaSchema, 'conflicts')} (${quoteList(['source_id', 'schema_name', 'table_name', 'reason', 'version', 'row_json'])})` +
    ` VALUES ${placeholders(6)}`
  );
}

/**
 * Removes rows of the given keys whose tombstone is as new or newer. Needed where the server
 * considers keys equal that differ as values (case- or accent-insensitive collations): the join
 * compares with the key's own collation. Bound: keys × key columns.
 */
export function deleteRowsUnderTombstoneSql(shape: TableShape, tomb: TombstoneShape, keys: number): string {
  // No alias for the target: without a default database both engines reject an aliased delete list.
  const target = quoteTable(shape.schema, shape.table);
  const tombTable = quoteTable(tomb.metaSchema, tomb.tombstoneTable);
  const on = shape.primaryKey.map((k) => `${tombTable}.${quoteIdent(k)} = ${target}.${quoteIdent(k)}`).join(' AND ');
  const v = quoteIdent(shape.versionColumn);
  return (
    `DELETE ${target} FROM ${target} JOIN ${tombTable} ON ${on}` +
    ` WHERE ${tombTable}.${v} >= ${target}.${v} AND ${keyIn(shape.primaryKey, keys, (c) => `${target}.${quoteIdent(c)}`)}`
  );
}
