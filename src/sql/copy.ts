// Statements of the full-table merge (initial copy and sync): keyset-paged reads in primary-key
// order, row counts for progress, and non-locking version lookups on the target. Pure text; values
// always bound. Typed columns are read exactly (column-read.ts) and typed keys compared against
// parameters of their own type; a bare name is read and compared as the client returns it.
import { columnName, exactSelectList, keyPlaceholder, type ReadColumn } from './column-read.ts';
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

/**
 * The lexicographic comparison of the key with a bound key, as `a > ? OR (a = ? AND b > ?) OR ...`
 * with `a >= ?` in front: a range both engines read through the primary key. The row-constructor form
 * `(a, b) > (?, ?)` is no range on MySQL 9.7 nor MariaDB 10.11 (a full index scan per chunk).
 * Bound: keyBoundParams(bound).
 */
function keyBound(key: readonly ReadColumn[], op: '>' | '>=' | '<='): string {
  const q = key.map((c) => quoteIdent(columnName(c)));
  const p = key.map(keyPlaceholder);
  const strict = op === '<=' ? '<' : '>';
  if (q.length === 1) return `${q[0]} ${op} ${p[0]}`;
  const terms = q.map((col, i) => {
    const cmp = `${col} ${i === q.length - 1 ? op : strict} ${p[i]}`;
    return i === 0 ? cmp : `(${[...q.slice(0, i).map((c, j) => `${c} = ${p[j]}`), cmp].join(' AND ')})`;
  });
  return `${q[0]} ${op === '<=' ? '<=' : '>='} ${p[0]} AND (${terms.join(' OR ')})`;
}

/** `key > bound` in the range form of keyBound. Bound: keyBoundParams(bound). */
export function afterKey(key: readonly ReadColumn[]): string {
  return keyBound(key, '>');
}

/** `key IN (...)` for `keys` keys, each column compared under its own type. Bound: keys × key columns. */
export function keysInClause(key: readonly ReadColumn[], keys: number): string {
  if (!Number.isInteger(keys) || keys <= 0) throw new Error(`lookup needs at least one key, got ${keys}`);
  const names = key.map(columnName);
  return key.length === 1
    ? `${quoteIdent(names[0]!)} IN (${new Array(keys).fill(keyPlaceholder(key[0]!)).join(', ')})`
    : `(${quoteList(names)}) IN (${new Array(keys).fill(`(${key.map(keyPlaceholder).join(', ')})`).join(', ')})`;
}

/** ORDER BY the key columns, qualified: an exact read keeps the column's name as its alias, and an alias would sort as text. */
export function orderByKey(schema: string, table: string, key: readonly ReadColumn[]): string {
  return ` ORDER BY ${key.map((c) => `${quoteTable(schema, table)}.${quoteIdent(columnName(c))}`).join(', ')}`;
}

/** The bound values of a key comparison (`keyBound`, `afterKey`) with this key. */
export function keyBoundParams<T>(last: readonly T[]): T[] {
  if (last.length === 1) return [last[0]!];
  const out: T[] = [last[0]!];
  for (let i = 0; i < last.length; i++) out.push(...last.slice(0, i + 1));
  return out;
}

export function positiveLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit <= 0) throw new Error(`chunk size must be a positive integer, got ${limit}`);
  return limit;
}

/**
 * The next chunk of a table in key order, after a key or from the start. LIMIT is inlined as an
 * integer; bound: `keyBoundParams(lastKey)` unless `fromStart`.
 */
export function selectChunkSql(schema: string, table: string, columns: readonly ReadColumn[], key: readonly ReadColumn[], limit: number, fromStart: boolean): string {
  return (
    `SELECT ${exactSelectList(columns)} FROM ${quoteTable(schema, table)}` +
    `${fromStart ? '' : ` WHERE ${afterKey(key)}`}${orderByKey(schema, table, key)} LIMIT ${positiveLimit(limit)}`
  );
}

/** Rows of a table, or those after a key. Bound: `keyBoundParams(lastKey)` when `afterAKey`. */
export function countRowsSql(schema: string, table: string, key: readonly ReadColumn[] = [], afterAKey = false): string {
  return `SELECT COUNT(*) AS \`n\` FROM ${quoteTable(schema, table)}${afterAKey ? ` WHERE ${afterKey(key)}` : ''}`;
}

/** The storage engine's row estimate (cheap, approximate). Bound: schema, table. */
export const ESTIMATED_ROWS_SQL = 'SELECT TABLE_ROWS AS `n` FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?';

/**
 * The given columns of the rows with the given keys, without locks. Bound: keys × key columns.
 */
export function selectByKeysSql(schema: string, table: string, columns: readonly ReadColumn[], key: readonly ReadColumn[], keys: number): string {
  return `SELECT ${exactSelectList(columns)} FROM ${quoteTable(schema, table)} WHERE ${keysInClause(key, keys)}`;
}

/**
 * Key and version of the given keys, without locks (the merge only plans with them; the sink decides
 * under its own locks). Bound: keys × key columns.
 */
export function lookupVersionsSql(schema: string, table: string, key: readonly ReadColumn[], versionColumn: string, keys: number): string {
  return selectByKeysSql(schema, table, [...key, versionColumn], key, keys);
}

/**
 * Key and version of every row with a key in [first, last], without locks: the versions a target
 * holds for a chunk of source keys, read as one range. LIMIT inlined; bound: keyBoundParams(first),
 * then keyBoundParams(last).
 */
export function rangeVersionsSql(schema: string, table: string, key: readonly ReadColumn[], versionColumn: string, limit: number): string {
  return (
    `SELECT ${exactSelectList([...key, versionColumn])} FROM ${quoteTable(schema, table)}` +
    ` WHERE ${keyBound(key, '>=')} AND ${keyBound(key, '<=')}${orderByKey(schema, table, key)} LIMIT ${positiveLimit(limit)}`
  );
}

/** Base tables of a schema that carry the version column. Bound: schema, version column. */
export const TABLES_WITH_COLUMN_SQL =
  "SELECT t.TABLE_NAME AS name FROM information_schema.TABLES t JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME WHERE t.TABLE_SCHEMA = ? AND t.TABLE_TYPE = 'BASE TABLE' AND c.COLUMN_NAME = ? ORDER BY t.TABLE_NAME";
