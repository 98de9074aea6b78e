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

export function dropDatabaseSql(schema: string): string {
  return `DROP DATABASE IF EXISTS ${quoteIdent(schema)}`;
}

/** Every row of a sbtest table in key order (for comparing with the expected state). */
export function selectAllSbtestSql(schema: string, table: string, versionColumn: string): string {
  return `SELECT \`id\`, \`k\`, \`c\`, \`pad\`, ${quoteIdent(versionColumn)} AS \`v\` FROM ${quoteTable(schema, table)} ORDER BY \`id\``;
}
