// Statement text for the harness's generated schemas and sessions: DDL of a generated table, the
// DML the writers mix (INSERT, INSERT IGNORE, REPLACE, INSERT … ON DUPLICATE KEY UPDATE, multi-row
// UPDATE/DELETE by key lists, key changes), and the oracle's reads (a key's identity under its
// collation, the row's canonical text, the tombstone). Pure; every value is bound.
import { type ChecksumColumn, checksumTermSql, NULL_TERM, TERM_SEPARATOR } from './checksum.ts';
import { keyPlaceholder, type TypedColumn } from './column-read.ts';
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

/** A column of a table to create, as DDL pieces. */
export interface ColumnDdl {
  name: string;
  /** Type text, e.g. "DECIMAL(12,2)" or "VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin". */
  type: string;
  nullable: boolean;
  generated?: { expression: string; stored: boolean };
}

export interface TableDdl {
  columns: readonly ColumnDdl[];
  primaryKey: readonly string[];
  uniques: readonly (readonly string[])[];
  foreignKey?: { name: string; column: string; parentTable: string; parentColumn: string; onDelete: string };
}

export function columnDdl(c: ColumnDdl): string {
  if (c.generated) return `${quoteIdent(c.name)} ${c.type} AS ${c.generated.expression} ${c.generated.stored ? 'STORED' : 'VIRTUAL'}`;
  // A NOT NULL TIMESTAMP gets an explicit default, so no server makes it auto-initialized or auto-updated.
  const tsDefault = /^TIMESTAMP/i.test(c.type) && !c.nullable ? " DEFAULT '2001-01-01 00:00:00'" : '';
  return `${quoteIdent(c.name)} ${c.type} ${c.nullable ? 'NULL' : 'NOT NULL'}${tsDefault}`;
}

export function createGeneratedTableSql(schema: string, table: string, ddl: TableDdl, versionColumn: string): string {
  const parts = ddl.columns.map(columnDdl);
  parts.push(`${quoteIdent(versionColumn)} BIGINT UNSIGNED NOT NULL DEFAULT 0`);
  parts.push(`PRIMARY KEY (${quoteList(ddl.primaryKey)})`);
  for (const [i, u] of ddl.uniques.entries()) parts.push(`UNIQUE KEY ${quoteIdent(`uk${i + 1}`)} (${quoteList(u)})`);
  const fk = ddl.foreignKey;
  if (fk) {
    parts.push(
      `CONSTRAINT ${quoteIdent(fk.name)} FOREIGN KEY (${quoteIdent(fk.column)}) REFERENCES ${quoteTable(schema, fk.parentTable)} (${quoteIdent(fk.parentColumn)}) ON DELETE ${fk.onDelete}`,
    );
  }
  return `CREATE TABLE ${quoteTable(schema, table)} (${parts.join(', ')}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`;
}

export type InsertVerb = 'INSERT' | 'INSERT IGNORE' | 'REPLACE';

/**
 * A multi-row INSERT / INSERT IGNORE / REPLACE; with `update`, INSERT … ON DUPLICATE KEY UPDATE
 * assigning each listed column a bound value (the same for every clashing row).
 * Bound: rows × columns values, then the update values.
 */
export function insertRowsSql(schema: string, table: string, verb: InsertVerb, columns: readonly string[], rows: number, update?: readonly string[]): string {
  const one = `(${new Array(columns.length).fill('?').join(', ')})`;
  const odku = update && update.length > 0 ? ` ON DUPLICATE KEY UPDATE ${update.map((c) => `${quoteIdent(c)} = ?`).join(', ')}` : '';
  return `${verb} INTO ${quoteTable(schema, table)} (${quoteList(columns)}) VALUES ${new Array(rows).fill(one).join(', ')}${odku}`;
}

/** `(k1 = ? AND k2 = ?) OR …` for n keys (typed placeholders: DECIMAL keys compare as DECIMAL). */
export function keyListWhere(key: readonly TypedColumn[], keys: number): string {
  if (keys < 1) throw new Error('a key list needs at least one key');
  const one = key.map((c) => `${quoteIdent(c.name)} = ${keyPlaceholder(c)}`).join(' AND ');
  return keys === 1 ? one : new Array(keys).fill(`(${one})`).join(' OR ');
}

/**
 * UPDATE of n keys: each `set` column gets a bound value, each `increment` column n = n + 1.
 * Bound: the set values, then the keys' values key after key.
 */
export function updateByKeysSql(schema: string, table: string, set: readonly string[], increment: readonly string[], key: readonly TypedColumn[], keys: number): string {
  const assignments = [...set.map((c) => `${quoteIdent(c)} = ?`), ...increment.map((c) => `${quoteIdent(c)} = ${quoteIdent(c)} + 1`)];
  return `UPDATE ${quoteTable(schema, table)} SET ${assignments.join(', ')} WHERE ${keyListWhere(key, keys)}`;
}

/** Bound: the keys' values key after key. */
export function deleteByKeysSql(schema: string, table: string, key: readonly TypedColumn[], keys: number): string {
  return `DELETE FROM ${quoteTable(schema, table)} WHERE ${keyListWhere(key, keys)}`;
}

/**
 * The listed columns of n keys' rows: a consistent (snapshot) read, or a locking read.
 * Bound: the keys' values key after key.
 */
export function selectByKeysSql(schema: string, table: string, columns: readonly string[], key: readonly TypedColumn[], keys: number, lock: boolean): string {
  return `SELECT ${quoteList(columns)} FROM ${quoteTable(schema, table)} WHERE ${keyListWhere(key, keys)}${lock ? ' FOR UPDATE' : ''}`;
}

/** Locking read of the rows holding any of n values of one column (unique clashes, child rows). Bound: the values. */
export function lockByColumnValuesSql(schema: string, table: string, columns: readonly string[], column: TypedColumn, values: number): string {
  return `SELECT ${quoteList(columns)} FROM ${quoteTable(schema, table)} WHERE ${quoteIdent(column.name)} IN (${new Array(values).fill(keyPlaceholder(column)).join(', ')}) FOR UPDATE`;
}

/** A column the oracle reads: typed, with its collation (strings). */
export interface OracleColumn extends ChecksumColumn {
  collation: string | null;
}

/**
 * One column as the oracle compares it: its canonical term (checksumTermSql); TIMESTAMP values in UTC
 * whatever the session's time zone (a writer session may run in another one).
 */
function oracleTermSql(c: OracleColumn): string {
  const term = checksumTermSql(c);
  if (c.dataType !== 'timestamp') return term;
  return term.replaceAll(quoteIdent(c.name), `CONVERT_TZ(${quoteIdent(c.name)}, @@session.time_zone, '+00:00')`);
}

/**
 * One key's identity under its columns' types and collations, as text: strings under a non-binary
 * collation by their collation weights (so 'A' and 'a' are one key where the server says so),
 * everything else by its canonical term (1.5 = 1.50, a zero fraction = none).
 */
export function keyIdentitySql(key: readonly OracleColumn[]): string {
  const terms = key.map((c) => {
    if (c.collation && !/_bin$/.test(c.collation) && ['char', 'varchar', 'enum', 'set'].includes(c.dataType)) return `HEX(WEIGHT_STRING(${quoteIdent(c.name)}))`;
    return oracleTermSql(c);
  });
  return terms.length === 1 ? `CAST(${terms[0]} AS CHAR)` : `CONCAT_WS('|', ${terms.join(', ')})`;
}

/** The canonical text of a row's columns (as rowTextSql, TIMESTAMP in UTC). */
export function oracleRowTextSql(columns: readonly OracleColumn[]): string {
  const terms = columns.map((c) => `IF(${quoteIdent(c.name)} IS NULL, '${NULL_TERM}', ${oracleTermSql(c)})`);
  return terms.length === 1 ? terms[0]! : `CONCAT(${terms.join(`, '${TERM_SEPARATOR}', `)})`;
}

/**
 * The oracle's read of n keys' rows: identity (i), canonical text of the written columns (t), version (v).
 * Bound: the keys' values key after key.
 */
export function oracleRowsSql(schema: string, table: string, key: readonly OracleColumn[], columns: readonly OracleColumn[], versionColumn: string, keys: number): string {
  return `SELECT ${keyIdentitySql(key)} AS i, ${oracleRowTextSql(columns)} AS t, ${quoteIdent(versionColumn)} AS v FROM ${quoteTable(schema, table)} WHERE ${keyListWhere(key, keys)}`;
}

/** Every row of a table read as oracleRowsSql. */
export function oracleAllRowsSql(schema: string, table: string, key: readonly OracleColumn[], columns: readonly OracleColumn[], versionColumn: string): string {
  return `SELECT ${keyIdentitySql(key)} AS i, ${oracleRowTextSql(columns)} AS t, ${quoteIdent(versionColumn)} AS v FROM ${quoteTable(schema, table)}`;
}

/** Tombstones of n keys: identity (i) and version (v). Bound: the keys' values key after key. */
export function oracleTombstonesSql(metaSchema: string, tombstoneTable: string, key: readonly OracleColumn[], versionColumn: string, keys: number): string {
  return `SELECT ${keyIdentitySql(key)} AS i, ${quoteIdent(versionColumn)} AS v FROM ${quoteTable(metaSchema, tombstoneTable)} WHERE ${keyListWhere(key, keys)}`;
}

/**
 * The sink's removals the conflict log names for a table's rows at a version (UNIQUE clash, foreign
 * key cascade; `withSetNull`: also the references it cleared): their reasons. Bound: schema, table, version.
 */
export function sinkRemovalReasonsSql(metaSchema: string, withSetNull = false): string {
  return (
    `SELECT reason FROM ${quoteTable(metaSchema, 'conflicts')} WHERE schema_name = ? AND table_name = ? AND version = CAST(? AS DECIMAL(20,0))` +
    ` AND (reason LIKE 'unique key clash: removed%' OR reason LIKE 'foreign key cascade%'${withSetNull ? " OR reason LIKE 'foreign key set null%'" : ''})`
  );
}

/** A node's foreign-key conflict-log entries of a table, among them the sink's follow-ups (writer/foreign-keys.ts): reason and version. Bound: schema, table. */
export function sinkFollowUpsSql(metaSchema: string): string {
  return (
    `SELECT reason, CAST(version AS CHAR) AS version FROM ${quoteTable(metaSchema, 'conflicts')} WHERE schema_name = ? AND table_name = ?` +
    " AND reason LIKE 'foreign key %'"
  );
}

/**
 * Tombstones whose oracle identity (i) equals this one as the server compares it, with their
 * versions (v): the comparison may fold case ('beta' and 'BETA' of a binary key column both come
 * back), so the caller keeps the exact identity. Bound: the identity.
 */
export function oracleTombstoneByIdentitySql(metaSchema: string, tombstoneTable: string, key: readonly OracleColumn[], versionColumn: string): string {
  const id = keyIdentitySql(key);
  return `SELECT ${id} AS i, CAST(${quoteIdent(versionColumn)} AS CHAR) AS v FROM ${quoteTable(metaSchema, tombstoneTable)} WHERE ${id} = ?`;
}

/** Session settings a writer session may run with. */
export const SET_ISOLATION_SQL = {
  'read-committed': 'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED',
  'repeatable-read': 'SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ',
} as const;
/** Bound: a time zone offset such as '+05:30'. */
export const SET_TIME_ZONE_SQL = 'SET SESSION time_zone = ?';
export const SAVEPOINT_SQL = 'SAVEPOINT lww_sp';
export const ROLLBACK_TO_SAVEPOINT_SQL = 'ROLLBACK TO SAVEPOINT lww_sp';
export const ROW_IMAGE_MINIMAL_SQL = 'SET SESSION binlog_row_image = MINIMAL';
export const ROW_IMAGE_FULL_SQL = 'SET SESSION binlog_row_image = FULL';
export const STATEMENT_FORMAT_SQL = 'SET SESSION binlog_format = STATEMENT';
export const ROW_FORMAT_SQL = 'SET SESSION binlog_format = ROW';

/** ADD COLUMN with an integer default (a DDL literal: DEFAULT takes no parameter), as an operator would run it on each node. */
export function addIntColumnSql(schema: string, table: string, column: string, defaultValue: number): string {
  if (!Number.isSafeInteger(defaultValue)) throw new Error(`a column default must be an integer (got ${defaultValue})`);
  return `ALTER TABLE ${quoteTable(schema, table)} ADD COLUMN ${quoteIdent(column)} INT NOT NULL DEFAULT ${defaultValue}`;
}

/** A column reorder: MODIFY with the column's own definition, moved FIRST or AFTER another column. */
export function moveColumnSql(schema: string, table: string, definition: string, after: string | null): string {
  return `ALTER TABLE ${quoteTable(schema, table)} MODIFY COLUMN ${definition} ${after === null ? 'FIRST' : `AFTER ${quoteIdent(after)}`}`;
}

/** Every row's counter changed in one statement (the refused-setting session's write). */
export function bumpCounterSql(schema: string, table: string, counter: string): string {
  return `UPDATE ${quoteTable(schema, table)} SET ${quoteIdent(counter)} = ${quoteIdent(counter)} + 1`;
}
