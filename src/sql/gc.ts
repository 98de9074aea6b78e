// Statements of tombstone and metadata garbage collection (src/gc/). Pure: each builder returns the
// text and its bound values. Collection reads candidates without locks in key order, then deletes
// exactly those keys again under the horizon condition in a short transaction: a tombstone raised
// meanwhile (above the horizon) stays, and no statement scans (and locks) more than its batch.
import { afterKey, keyBoundParams, keysInClause, orderByKey, positiveLimit } from './copy.ts';
import { exactSelectList, type ReadColumn } from './column-read.ts';
import type { Statement } from './dml.ts';
import { quoteIdent, quoteTable } from './quote.ts';
import { NOW_MICROS_SQL } from './triggers.ts';

export interface BoundStatement {
  sql: string;
  values: unknown[];
}

/** A server's clock in microseconds since the epoch (UTC), as the triggers read it. */
export const SERVER_CLOCK_SQL = `SELECT ${NOW_MICROS_SQL} AS \`now_us\``;

/** Every checkpoint row of a node (the GC keeps the `node-<id>` streams and the copy-progress rows). */
export function readCheckpointsSql(meta: string): BoundStatement {
  return {
    sql:
      'SELECT `source_id`, `position`, `source_time_us`,' +
      ' TIMESTAMPDIFF(SECOND, `updated_at`, CURRENT_TIMESTAMP(6)) AS `idle_seconds`' +
      ` FROM ${quoteTable(meta, 'checkpoints')} ORDER BY \`source_id\``,
    values: [],
  };
}

/** What this node collected, per table. */
export function readGcStateSql(meta: string): BoundStatement {
  return { sql: `SELECT \`schema_name\`, \`table_name\`, \`collected_below\`, \`collected_rows\` FROM ${quoteTable(meta, 'gc_state')}`, values: [] };
}

/** One table's collected horizon (bound: schema, table). */
export function readTableGcStateSql(meta: string, schema: string, table: string): BoundStatement {
  return {
    sql: `SELECT \`collected_below\` FROM ${quoteTable(meta, 'gc_state')} WHERE \`schema_name\` = ? AND \`table_name\` = ?`,
    values: [schema, table],
  };
}

/** The same, as a locking read: a collector raising it (in the transaction that removes the tombstones) waits for the reader's commit, or the reader for the collector's. */
export function lockTableGcStateSql(meta: string, schema: string, table: string): Statement {
  return { sql: `${readTableGcStateSql(meta, schema, table).sql} LOCK IN SHARE MODE`, values: [schema, table] };
}

/**
 * The next tombstones below the horizon in key order, after `after` (exclusive) or from the start;
 * a consistent read, no locks. `key` typed so the keys come back exactly.
 */
export function collectableTombstonesSql(
  meta: string,
  tombstoneTable: string,
  key: readonly ReadColumn[],
  versionColumn: string,
  horizon: bigint,
  limit: number,
  after?: readonly unknown[],
): BoundStatement {
  const where = `${after ? `${afterKey(key)} AND ` : ''}${quoteIdent(versionColumn)} < ?`;
  return {
    sql:
      `SELECT ${exactSelectList([...key, versionColumn])} FROM ${quoteTable(meta, tombstoneTable)}` +
      ` WHERE ${where}${orderByKey(meta, tombstoneTable, key)} LIMIT ${positiveLimit(limit)}`,
    values: [...(after ? keyBoundParams(after) : []), horizon.toString()],
  };
}

/** Deletes exactly these keys' tombstones if they are still below the horizon. `keys` as bound values. */
export function deleteTombstonesSql(meta: string, tombstoneTable: string, key: readonly ReadColumn[], versionColumn: string, horizon: bigint, keys: readonly (readonly unknown[])[]): BoundStatement {
  return {
    sql: `DELETE FROM ${quoteTable(meta, tombstoneTable)} WHERE ${keysInClause(key, keys.length)} AND ${quoteIdent(versionColumn)} < ?`,
    values: [...keys.flat(), horizon.toString()],
  };
}

/** Raises a table's collected horizon and adds to its count, in the transaction of the delete. */
export function recordCollectedSql(meta: string, schema: string, table: string, collectedBelow: bigint, rows: number): BoundStatement {
  const below = collectedBelow.toString();
  return {
    sql:
      `INSERT INTO ${quoteTable(meta, 'gc_state')} (\`schema_name\`, \`table_name\`, \`collected_below\`, \`collected_rows\`) VALUES (?, ?, ?, ?)` +
      ' ON DUPLICATE KEY UPDATE `collected_below` = GREATEST(`collected_below`, CAST(? AS DECIMAL(20,0))), `collected_rows` = `collected_rows` + ?,' +
      ' `updated_at` = CURRENT_TIMESTAMP(6)',
    values: [schema, table, below, rows, below, rows],
  };
}

/** Tombstones of a table, and how many are below the horizon (a dry run; scans the table). */
export function countTombstonesSql(meta: string, tombstoneTable: string, versionColumn: string, horizon: bigint | null): BoundStatement {
  const v = quoteIdent(versionColumn);
  return horizon === null
    ? { sql: `SELECT COUNT(*) AS \`total\`, 0 AS \`below\` FROM ${quoteTable(meta, tombstoneTable)}`, values: [] }
    : { sql: `SELECT COUNT(*) AS \`total\`, COALESCE(SUM(${v} < ?), 0) AS \`below\` FROM ${quoteTable(meta, tombstoneTable)}`, values: [horizon.toString()] };
}

const olderThan = (column: string) => `${quoteIdent(column)} < CURRENT_TIMESTAMP(6) - INTERVAL ? SECOND`;

/** Ids of conflict-log rows older than the retention, oldest first (no locks). */
export function expiredConflictsSql(meta: string, retentionSeconds: number, limit: number): BoundStatement {
  return {
    sql: `SELECT \`id\` FROM ${quoteTable(meta, 'conflicts')} WHERE ${olderThan('created_at')} ORDER BY \`id\` LIMIT ${positiveLimit(limit)}`,
    values: [retentionSeconds],
  };
}

/** How many conflict-log rows are older than the retention (a dry run). */
export function countExpiredConflictsSql(meta: string, retentionSeconds: number): BoundStatement {
  return { sql: `SELECT COUNT(*) AS \`n\` FROM ${quoteTable(meta, 'conflicts')} WHERE ${olderThan('created_at')}`, values: [retentionSeconds] };
}

/** Deletes these conflict-log rows. */
export function deleteConflictsSql(meta: string, ids: readonly (string | number)[], retentionSeconds: number): BoundStatement {
  return {
    sql: `DELETE FROM ${quoteTable(meta, 'conflicts')} WHERE ${keysInClause(['id'], ids.length)} AND ${olderThan('created_at')}`,
    values: [...ids, retentionSeconds],
  };
}

/** Progress streams (copy and sync, `…#rows:…`) none of whose worker rows was updated for the retention. */
export function idleProgressRowsSql(meta: string, retentionSeconds: number): BoundStatement {
  return {
    sql:
      `SELECT \`source_id\` FROM ${quoteTable(meta, 'checkpoints')} WHERE \`source_id\` LIKE '%#%'` +
      ' GROUP BY `source_id` HAVING MAX(`updated_at`) < CURRENT_TIMESTAMP(6) - INTERVAL ? SECOND ORDER BY `source_id`',
    values: [retentionSeconds],
  };
}

/** Deletes these progress rows if still idle for the retention. */
export function deleteProgressRowsSql(meta: string, sourceIds: readonly string[], retentionSeconds: number): BoundStatement {
  return {
    sql: `DELETE FROM ${quoteTable(meta, 'checkpoints')} WHERE ${keysInClause(['source_id'], sourceIds.length)} AND ${olderThan('updated_at')}`,
    values: [...sourceIds, retentionSeconds],
  };
}

