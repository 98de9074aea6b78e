// Keyset-paged reads for copying a table in primary-key order. Pure text; values bound.
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

/** `(a, b) > (?, ?)` — bound: the last key of the previous chunk. */
function after(key: readonly string[]): string {
  return key.length === 1 ? `${quoteIdent(key[0]!)} > ?` : `(${quoteList(key)}) > (${key.map(() => '?').join(', ')})`;
}

/** The next chunk of rows after a key (or from the start). Bound: last key (if any), then nothing: LIMIT is inlined as an integer. */
export function selectChunkSql(schema: string, table: string, key: readonly string[], limit: number, fromStart: boolean): string {
  if (!Number.isInteger(limit) || limit <= 0) throw new Error(`chunk size must be a positive integer, got ${limit}`);
  return `SELECT * FROM ${quoteTable(schema, table)}${fromStart ? '' : ` WHERE ${after(key)}`} ORDER BY ${quoteList(key)} LIMIT ${limit}`;
}

export function countRowsSql(schema: string, table: string): string {
  return `SELECT COUNT(*) AS \`n\` FROM ${quoteTable(schema, table)}`;
}

/** Base tables of a schema that carry the version column. Bound: schema, version column. */
export const TABLES_WITH_COLUMN_SQL =
  "SELECT t.TABLE_NAME AS name FROM information_schema.TABLES t JOIN information_schema.COLUMNS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME WHERE t.TABLE_SCHEMA = ? AND t.TABLE_TYPE = 'BASE TABLE' AND c.COLUMN_NAME = ? ORDER BY t.TABLE_NAME";
