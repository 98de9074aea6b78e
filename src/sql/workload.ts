// Statement text for the harness workloads (sysbench-like tables). Pure; values are bound.
import { quoteIdent, quoteTable } from './quote.ts';

export function createDatabaseSql(schema: string): string {
  return `CREATE DATABASE IF NOT EXISTS ${quoteIdent(schema)} CHARACTER SET utf8mb4`;
}

export function createSbtestSql(schema: string, table: string, versionColumn: string): string {
  return (
    `CREATE TABLE IF NOT EXISTS ${quoteTable(schema, table)} (` +
    '`id` INT NOT NULL, `k` INT NOT NULL DEFAULT 0, `c` CHAR(120) NOT NULL DEFAULT \'\', `pad` CHAR(60) NOT NULL DEFAULT \'\',' +
    ` ${quoteIdent(versionColumn)} BIGINT UNSIGNED NOT NULL DEFAULT 0, PRIMARY KEY (\`id\`), KEY \`k\` (\`k\`)) ENGINE=InnoDB`
  );
}

/** Bulk insert of prepared rows with explicit versions. Bound: rows × (id, k, c, pad, version). */
export function insertSbtestRowsSql(schema: string, table: string, versionColumn: string, rows: number): string {
  const one = '(?, ?, ?, ?, ?)';
  return `INSERT INTO ${quoteTable(schema, table)} (\`id\`, \`k\`, \`c\`, \`pad\`, ${quoteIdent(versionColumn)}) VALUES ${new Array(rows).fill(one).join(', ')}`;
}

/** Bulk insert as an application writes it: no version column, so the triggers stamp every row. Bound: rows × (id, k, c, pad). */
export function insertSbtestLocalRowsSql(schema: string, table: string, rows: number): string {
  return `INSERT INTO ${quoteTable(schema, table)} (\`id\`, \`k\`, \`c\`, \`pad\`) VALUES ${new Array(rows).fill('(?, ?, ?, ?)').join(', ')}`;
}

export const sbtest = {
  /** Bound: c, id */
  updateNonIndex: (schema: string, table: string) => `UPDATE ${quoteTable(schema, table)} SET \`c\` = ? WHERE \`id\` = ?`,
  /** Bound: id */
  updateIndex: (schema: string, table: string) => `UPDATE ${quoteTable(schema, table)} SET \`k\` = \`k\` + 1 WHERE \`id\` = ?`,
  /** Bound: id */
  delete: (schema: string, table: string) => `DELETE FROM ${quoteTable(schema, table)} WHERE \`id\` = ?`,
  /** Bound: id, k, c, pad */
  insert: (schema: string, table: string) => `INSERT INTO ${quoteTable(schema, table)} (\`id\`, \`k\`, \`c\`, \`pad\`) VALUES (?, ?, ?, ?)`,
  /** Bound: id. The row as this transaction sees it (its own write included). */
  read: (schema: string, table: string, versionColumn: string) =>
    `SELECT \`k\`, \`c\`, \`pad\`, ${quoteIdent(versionColumn)} AS \`v\` FROM ${quoteTable(schema, table)} WHERE \`id\` = ?`,
  /** Bound: id. */
  readTombstone: (metaSchema: string, tombstoneTable: string, versionColumn: string) =>
    `SELECT ${quoteIdent(versionColumn)} AS \`v\` FROM ${quoteTable(metaSchema, tombstoneTable)} WHERE \`id\` = ?`,
};

/** Freezes the session clock (simulated skew). Bound: unix seconds with microseconds. */
export const SET_TIMESTAMP_SQL = 'SET TIMESTAMP = ?';
export const RESET_TIMESTAMP_SQL = 'SET TIMESTAMP = DEFAULT';

/** The finish-mark table: each node writes one row after its workload; the peer holding it proves the stream caught up. */
export function createMarksSql(schema: string, versionColumn: string): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(schema, 'harness_marks')} (\`node\` VARCHAR(32) NOT NULL PRIMARY KEY, \`token\` VARCHAR(64) NOT NULL, ${quoteIdent(versionColumn)} BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB`;
}

/** Bound: node, token, token. */
export function writeMarkSql(schema: string): string {
  return `INSERT INTO ${quoteTable(schema, 'harness_marks')} (\`node\`, \`token\`) VALUES (?, ?) ON DUPLICATE KEY UPDATE \`token\` = ?`;
}

/** Bound: node. */
export function readMarkSql(schema: string): string {
  return `SELECT \`token\` FROM ${quoteTable(schema, 'harness_marks')} WHERE \`node\` = ?`;
}

/**
 * The writers' commit markers: every writer transaction inserts one row with a unique id, so a commit
 * whose reply was lost is decided by whether its row is there. Never installed or replicated: a row on
 * a node was committed by that node's own writer. No version column (the triggers never see it).
 */
export const WRITER_MARKERS_TABLE = 'writer_markers';

export function createWriterMarkersSql(schema: string): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteTable(schema, WRITER_MARKERS_TABLE)} (\`id\` CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY) ENGINE=InnoDB`;
}

/** Bound: id. Written last in the transaction, just before COMMIT. */
export function writeWriterMarkerSql(schema: string): string {
  return `INSERT INTO ${quoteTable(schema, WRITER_MARKERS_TABLE)} (\`id\`) VALUES (?)`;
}

/**
 * Bound: `count` ids. Which of these markers exist. A locking read: it waits for a transaction that
 * inserted one and is still undecided (its COMMIT in flight, or its session not yet gone), so an
 * absent marker means the transaction rolled back, not that it has not committed yet.
 */
export function readWriterMarkersSql(schema: string, count: number): string {
  return `SELECT \`id\` FROM ${quoteTable(schema, WRITER_MARKERS_TABLE)} WHERE \`id\` IN (${new Array(count).fill('?').join(', ')}) LOCK IN SHARE MODE`;
}

/** Resolving markers waits for undecided transactions only this long per attempt (seconds). */
export const SHORT_LOCK_WAIT_SQL = 'SET SESSION innodb_lock_wait_timeout = 1';

export function dropDatabaseSql(schema: string): string {
  return `DROP DATABASE IF EXISTS ${quoteIdent(schema)}`;
}

/** Every row of a sbtest table in key order (for comparing with the expected state). */
export function selectAllSbtestSql(schema: string, table: string, versionColumn: string): string {
  return `SELECT \`id\`, \`k\`, \`c\`, \`pad\`, ${quoteIdent(versionColumn)} AS \`v\` FROM ${quoteTable(schema, table)} ORDER BY \`id\``;
}
