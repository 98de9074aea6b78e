// Read-only queries against information_schema and server variables. Bound: schema, table.
import { quoteTable } from './quote.ts';

export const COLUMNS_SQL =
  'SELECT COLUMN_NAME AS name, DATA_TYPE AS dataType, COLUMN_TYPE AS columnType, IS_NULLABLE AS nullable,' +
  ' EXTRA AS extra, GENERATION_EXPRESSION AS generation, CHARACTER_SET_NAME AS charset, COLLATION_NAME AS collation,' +
  ' COLUMN_DEFAULT AS columnDefault' +
  ' FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION';

export const UNIQUE_KEYS_SQL =
  'SELECT INDEX_NAME AS indexName, COLUMN_NAME AS columnName FROM information_schema.STATISTICS' +
  ' WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX';

/** UNIQUE keys other than the primary key, one row per part with its prefix length (SUB_PART, NULL for the whole column). */
export const UNIQUE_KEY_PREFIXES_SQL =
  'SELECT INDEX_NAME AS indexName, COLUMN_NAME AS columnName, SUB_PART AS prefix FROM information_schema.STATISTICS' +
  " WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY' ORDER BY INDEX_NAME, SEQ_IN_INDEX";

/** The tables a table's foreign keys reference (its parents). */
export const FOREIGN_PARENTS_SQL =
  'SELECT DISTINCT REFERENCED_TABLE_SCHEMA AS parentSchema, REFERENCED_TABLE_NAME AS parentTable FROM information_schema.KEY_COLUMN_USAGE' +
  ' WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND REFERENCED_TABLE_NAME IS NOT NULL';

/** Foreign keys with ON DELETE SET NULL, one row per column in key order (bound: schema, table). */
export const SET_NULL_FOREIGN_KEYS_SQL =
  'SELECT k.CONSTRAINT_NAME AS name, k.COLUMN_NAME AS columnName, k.REFERENCED_TABLE_SCHEMA AS parentSchema, k.REFERENCED_TABLE_NAME AS parentTable,' +
  ' k.REFERENCED_COLUMN_NAME AS parentColumn FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r' +
  ' ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME' +
  " WHERE k.TABLE_SCHEMA = ? AND k.TABLE_NAME = ? AND k.REFERENCED_TABLE_NAME IS NOT NULL AND r.DELETE_RULE = 'SET NULL'" +
  ' ORDER BY k.CONSTRAINT_NAME, k.ORDINAL_POSITION';

export const TABLE_EXISTS_SQL =
  "SELECT TABLE_TYPE AS tableType FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?";

/** SHOW CREATE TABLE: the only place MariaDB 10.11 names a table's application-time periods. */
export function showCreateTableSql(schema: string, table: string): string {
  return `SHOW CREATE TABLE ${quoteTable(schema, table)}`;
}

export const VERSION_SQL = 'SELECT VERSION() AS version';

/** Secondary UNIQUE keys, one row per part in key order, with the prefix length of prefix parts (bound: schema, table). */
export const UNIQUE_KEY_PARTS_SQL =
  'SELECT INDEX_NAME AS indexName, COLUMN_NAME AS columnName, SUB_PART AS subPart FROM information_schema.STATISTICS' +
  " WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY' ORDER BY INDEX_NAME, SEQ_IN_INDEX";
