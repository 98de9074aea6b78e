// Statement text for install / uninstall: the node and table registry in the metadata schema, the
// version column, its backfill, and the catalog reads that decide what is already there.
// Pure functions; values are bound (`?`).
import { APPLY_SECRET_TABLE } from '../model/names.ts';
import { quoteIdent, quoteTable } from './quote.ts';
import { NOW_MICROS_SQL } from './triggers.ts';

/** A table of the metadata schema exists (bound: metaSchema, table name such as 'node' or 'tables'). */
export const META_TABLE_EXISTS_SQL = 'SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?';

/**
 * Base tables of a schema, MariaDB's system-versioned ones included: install refuses those by name
 * rather than leave them out without a word (bound: schema).
 */
export const SCHEMA_BASE_TABLES_SQL =
  "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') ORDER BY TABLE_NAME";

/**
 * A registered table's name against information_schema's: byte for byte, as the server tells tables
 * apart, not by the metadata schema's collation, which took 'Orders' and 'orders' (and 'café' and
 * 'cafe') for one table.
 */
function sameTable(rSchema: string, rTable: string, iSchema: string, iTable: string): string {
  const bin = (e: string) => `CAST(${e} AS BINARY)`;
  // (Under lower_case_table_names the server folds names itself; the collation's equality stays.)
  return `${rSchema} = ${iSchema} AND ${rTable} = ${iTable} AND (@@lower_case_table_names <> 0 OR (${bin(rSchema)} = ${bin(iSchema)} AND ${bin(rTable)} = ${bin(iTable)}))`;
}

/** Registered tables that are no longer base tables (MariaDB: ALTER TABLE … ADD SYSTEM VERSIONING after install). */
export function registeredTableTypesSql(metaSchema: string): string {
  return (
    'SELECT t.TABLE_SCHEMA AS schemaName, t.TABLE_NAME AS tableName, t.TABLE_TYPE AS tableType' +
    ` FROM information_schema.TABLES t JOIN ${quoteTable(metaSchema, 'tables')} r` +
    ` ON ${sameTable('r.schema_name', 'r.table_name', 't.TABLE_SCHEMA', 't.TABLE_NAME')} WHERE t.TABLE_TYPE <> 'BASE TABLE' ORDER BY t.TABLE_SCHEMA, t.TABLE_NAME`
  );
}

/**
 * Registered tables with a CHECK constraint: MariaDB lists an application-time period only as one
 * (named like the period), so only these need SHOW CREATE TABLE to look for periods.
 */
export function registeredTablesWithChecksSql(metaSchema: string): string {
  return (
    'SELECT DISTINCT c.TABLE_SCHEMA AS schemaName, c.TABLE_NAME AS tableName' +
    ` FROM information_schema.TABLE_CONSTRAINTS c JOIN ${quoteTable(metaSchema, 'tables')} r` +
    ` ON ${sameTable('r.schema_name', 'r.table_name', 'c.TABLE_SCHEMA', 'c.TABLE_NAME')} WHERE c.CONSTRAINT_TYPE = 'CHECK' ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME`
  );
}

/** Triggers on one table (bound: schema, table). */
export const TABLE_TRIGGERS_SQL =
  'SELECT TRIGGER_NAME AS name, ACTION_TIMING AS timing, EVENT_MANIPULATION AS event FROM information_schema.TRIGGERS' +
  ' WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?';

/** Triggers on one table with their bodies (bound: schema, table). */
export const TABLE_TRIGGER_BODIES_SQL =
  'SELECT TRIGGER_NAME AS name, ACTION_TIMING AS timing, EVENT_MANIPULATION AS event, ACTION_STATEMENT AS body FROM information_schema.TRIGGERS' +
  ' WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?';

/** Triggers on the registered (installed) tables, with their bodies. */
export function registeredTableTriggersSql(metaSchema: string): string {
  return (
    'SELECT t.TRIGGER_NAME AS name, t.ACTION_TIMING AS timing, t.EVENT_MANIPULATION AS event, t.EVENT_OBJECT_SCHEMA AS schemaName,' +
    ` t.EVENT_OBJECT_TABLE AS tableName, t.ACTION_STATEMENT AS body FROM information_schema.TRIGGERS t JOIN ${quoteTable(metaSchema, 'tables')} r` +
    ` ON ${sameTable('r.schema_name', 'r.table_name', 't.EVENT_OBJECT_SCHEMA', 't.EVENT_OBJECT_TABLE')}`
  );
}

/** Text columns of the registered tables with their character sets (start refuses those capture cannot carry, model/charsets.ts). */
export function registeredTableCharsetsSql(metaSchema: string): string {
  return (
    'SELECT c.TABLE_SCHEMA AS schemaName, c.TABLE_NAME AS tableName, c.COLUMN_NAME AS name, c.CHARACTER_SET_NAME AS charset' +
    ` FROM information_schema.COLUMNS c JOIN ${quoteTable(metaSchema, 'tables')} r` +
    ` ON ${sameTable('r.schema_name', 'r.table_name', 'c.TABLE_SCHEMA', 'c.TABLE_NAME')} WHERE c.CHARACTER_SET_NAME IS NOT NULL ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION`
  );
}

/** One row whose Value is OFF where MySQL's foreign keys live in the SQL layer (9.6+); no row on MariaDB and older MySQL. */
export const NATIVE_FOREIGN_KEYS_SQL = "SHOW GLOBAL VARIABLES LIKE 'innodb_native_foreign_keys'";

/** Foreign-key columns of tables whose rows reference this one with ON DELETE CASCADE or SET NULL (bound: schema, table). */
export const CASCADE_CHILDREN_SQL =
  'SELECT kcu.TABLE_SCHEMA AS childSchema, kcu.TABLE_NAME AS childTable, kcu.CONSTRAINT_NAME AS name,' +
  ' kcu.COLUMN_NAME AS childColumn, kcu.REFERENCED_COLUMN_NAME AS parentColumn, rc.DELETE_RULE AS onDelete' +
  ' FROM information_schema.REFERENTIAL_CONSTRAINTS rc JOIN information_schema.KEY_COLUMN_USAGE kcu' +
  ' ON kcu.CONSTRAINT_SCHEMA = rc.CONSTRAINT_SCHEMA AND kcu.CONSTRAINT_NAME = rc.CONSTRAINT_NAME AND kcu.TABLE_NAME = rc.TABLE_NAME' +
  " WHERE rc.UNIQUE_CONSTRAINT_SCHEMA = ? AND rc.REFERENCED_TABLE_NAME = ? AND rc.DELETE_RULE IN ('CASCADE', 'SET NULL')" +
  ' ORDER BY kcu.TABLE_SCHEMA, kcu.TABLE_NAME, kcu.CONSTRAINT_NAME, kcu.ORDINAL_POSITION';

/** CHECK clauses of a table: MariaDB's JSON is LONGTEXT with CHECK (json_valid(`col`)) (bound: schema, table). */
export const CHECK_CLAUSES_SQL =
  'SELECT cc.CHECK_CLAUSE AS clause FROM information_schema.TABLE_CONSTRAINTS tc JOIN information_schema.CHECK_CONSTRAINTS cc' +
  ' ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME' +
  " WHERE tc.TABLE_SCHEMA = ? AND tc.TABLE_NAME = ? AND tc.CONSTRAINT_TYPE = 'CHECK'";

/** Foreign keys of a table whose actions change its rows without firing its triggers (bound: schema, table). */
export const CASCADING_FOREIGN_KEYS_SQL =
  'SELECT CONSTRAINT_NAME AS name, UNIQUE_CONSTRAINT_SCHEMA AS parentSchema, REFERENCED_TABLE_NAME AS parent, DELETE_RULE AS onDelete, UPDATE_RULE AS onUpdate' +
  ' FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?' +
  " AND (DELETE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT') OR UPDATE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT'))";

/** Tables with an AUTO_INCREMENT column, outside the system schemas. */
export const AUTO_INCREMENT_TABLES_SQL =
  "SELECT DISTINCT TABLE_SCHEMA AS schemaName, TABLE_NAME AS tableName FROM information_schema.COLUMNS WHERE EXTRA LIKE '%auto_increment%'" +
  " AND TABLE_SCHEMA NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema')";

/** The server-wide settings new sessions (the applications') start with. */
export const AUTO_INCREMENT_SETTINGS_SQL =
  'SELECT @@GLOBAL.auto_increment_increment AS aiIncrement, @@GLOBAL.auto_increment_offset AS aiOffset';

/** What install changes in a caller's session, read first so it can be put back. */
export const SAVE_SESSION_SQL = 'SELECT @lww_apply AS apply, @@SESSION.sql_mode AS sqlMode';

/** Bound: @lww_apply value, sql_mode. */
export const SET_SESSION_SQL = 'SET @lww_apply = ?, SESSION sql_mode = ?';

/** This node's apply secret (rendered into the triggers, see sql/triggers.sql). */
export function readApplySecretSql(metaSchema: string): string {
  return `SELECT secret FROM ${quoteTable(metaSchema, APPLY_SECRET_TABLE)} WHERE singleton = 1`;
}

/**
 * Makes this session a replicator session: @lww_apply takes the node's secret, so the triggers
 * keep the versions it writes. Needs SELECT on the metadata schema (applications have none).
 */
export function enterApplySessionSql(metaSchema: string): string {
  return `SET @lww_apply = (SELECT secret FROM ${quoteTable(metaSchema, APPLY_SECRET_TABLE)} WHERE singleton = 1)`;
}

export function selectNodeIdSql(metaSchema: string): string {
  return `SELECT node_id AS nodeId FROM ${quoteTable(metaSchema, 'node')} WHERE singleton = 1`;
}

/** Bound: node id. */
export function insertNodeIdSql(metaSchema: string): string {
  return `INSERT INTO ${quoteTable(metaSchema, 'node')} (singleton, node_id) VALUES (1, ?)`;
}

const REGISTRY_COLUMNS =
  'schema_name AS schemaName, table_name AS tableName, tombstone_table AS tombstoneTable,' +
  ' version_column AS versionColumn, added_version_column AS addedVersionColumn';

/** All registered tables, in name order. */
export function selectRegisteredTablesSql(metaSchema: string): string {
  return `SELECT ${REGISTRY_COLUMNS} FROM ${quoteTable(metaSchema, 'tables')} ORDER BY schema_name, table_name`;
}

/** Bound: schema, table, tombstone table, version column, added (0/1). */
export function registerTableSql(metaSchema: string): string {
  return (
    `INSERT INTO ${quoteTable(metaSchema, 'tables')} (schema_name, table_name, tombstone_table, version_column, added_version_column)` +
    ' VALUES (?, ?, ?, ?, ?)'
  );
}

/** Bound: schema, table. */
export function markVersionColumnAddedSql(metaSchema: string): string {
  return `UPDATE ${quoteTable(metaSchema, 'tables')} SET added_version_column = 1 WHERE schema_name = ? AND table_name = ?`;
}

/** Bound: schema, table. */
export function unregisterTableSql(metaSchema: string): string {
  return `DELETE FROM ${quoteTable(metaSchema, 'tables')} WHERE schema_name = ? AND table_name = ?`;
}

export function countRegisteredTablesSql(metaSchema: string): string {
  return `SELECT COUNT(*) AS n FROM ${quoteTable(metaSchema, 'tables')}`;
}

/** INVISIBLE (MySQL >= 8.0.23, MariaDB >= 10.3) keeps `INSERT … VALUES` without a column list and `SELECT *` as they were. */
export function addVersionColumnSql(schema: string, table: string, versionColumn: string, invisible = true): string {
  return `ALTER TABLE ${quoteTable(schema, table)} ADD COLUMN ${quoteIdent(versionColumn)} BIGINT UNSIGNED NOT NULL DEFAULT 0${invisible ? ' INVISIBLE' : ''}`;
}

/** Upgrades a version column an older install added as a visible column (same definition, INVISIBLE). */
export function hideVersionColumnSql(schema: string, table: string, versionColumn: string): string {
  return `ALTER TABLE ${quoteTable(schema, table)} MODIFY COLUMN ${quoteIdent(versionColumn)} BIGINT UNSIGNED NOT NULL DEFAULT 0 INVISIBLE`;
}

/** Whether a server (its VERSION() text) has invisible columns: MySQL >= 8.0.23, MariaDB >= 10.3. */
export function supportsInvisibleColumns(version: string): boolean {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (!m) return false;
  const [maj, min, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (/mariadb/i.test(version)) return maj > 10 || (maj === 10 && min >= 3);
  return maj > 8 || (maj === 8 && (min > 0 || patch >= 23));
}

export function dropVersionColumnSql(schema: string, table: string, versionColumn: string): string {
  return `ALTER TABLE ${quoteTable(schema, table)} DROP COLUMN ${quoteIdent(versionColumn)}`;
}

/**
 * Gives up to `limit` unversioned rows (version 0) a version of this node: (now_us << 10) | node id,
 * the same integer math as the triggers. Run in an apply session so the update trigger keeps it.
 * Bound: node id.
 */
export function backfillVersionSql(schema: string, table: string, versionColumn: string, limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`backfill limit must be a positive integer, got ${limit}`);
  const col = quoteIdent(versionColumn);
  return `UPDATE ${quoteTable(schema, table)} SET ${col} = (${NOW_MICROS_SQL} << 10) | CAST(? AS UNSIGNED) WHERE ${col} = 0 LIMIT ${limit}`;
}

export function showCreateTriggerSql(schema: string, trigger: string): string {
  return `SHOW CREATE TRIGGER ${quoteTable(schema, trigger)}`;
}

/** Holds off the table's writers while its triggers are swapped, so no write goes unstamped. */
export function lockTableForWriteSql(schema: string, table: string): string {
  return `LOCK TABLES ${quoteTable(schema, table)} WRITE`;
}

export const UNLOCK_TABLES_SQL = 'UNLOCK TABLES';

export function dropTableSql(schema: string, table: string): string {
  return `DROP TABLE IF EXISTS ${quoteTable(schema, table)}`;
}

export function dropSchemaSql(schema: string): string {
  return `DROP DATABASE IF EXISTS ${quoteIdent(schema)}`;
}

/** Tombstone key columns whose type or collation no longer matches the table's primary key. */
export function modifyTombstoneColumnsSql(metaSchema: string, tombstoneTable: string, definitions: readonly string[]): string {
  return `ALTER TABLE ${quoteTable(metaSchema, tombstoneTable)} ${definitions.map((d) => `MODIFY COLUMN ${d}`).join(', ')}`;
}
