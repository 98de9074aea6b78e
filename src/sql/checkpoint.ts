// Checkpoint statements. The advance is conditioned on the owner epoch, so a writer that lost
// ownership changes nothing and learns it from the affected-row count. A stream has one row per
// apply worker (`worker`, 0 for a single worker); worker 0's row is the one claimed and the one
// that records the source's identity; a claim hands its epoch to the other workers' rows.
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

const T = (meta: string) => quoteTable(meta, 'checkpoints');

/** Creates the row if missing and bumps its owner epoch. Bound: source_id, owner, owner. */
export function claimCheckpointSql(meta: string): string {
  return (
    `INSERT INTO ${T(meta)} (${quoteList(['source_id', 'owner', 'owner_epoch'])}) VALUES (?, ?, 1)` +
    ' ON DUPLICATE KEY UPDATE `owner_epoch` = `owner_epoch` + 1, `owner` = ?'
  );
}

/** Worker 0's row (the claimed one). Bound: source_id. */
export function readCheckpointSql(meta: string, forUpdate = false): string {
  return `SELECT \`position\`, \`last_version\`, \`owner_epoch\`, \`owner\`, \`source_time_us\` FROM ${T(meta)} WHERE \`source_id\` = ? AND \`worker\` = 0${forUpdate ? ' FOR UPDATE' : ''}`;
}

/** One worker's row. Bound: source_id, worker. */
export function readWorkerCheckpointSql(meta: string): string {
  return `SELECT \`position\`, \`apply_seq\` FROM ${T(meta)} WHERE \`source_id\` = ? AND \`worker\` = ?`;
}

/** Every worker's row of a stream, worker 0 first. Bound: source_id. */
export function readWorkerCheckpointsSql(meta: string, forUpdate = false): string {
  return (
    'SELECT `worker`, `position`, `last_version`, `owner_epoch`, `owner`, `source_time_us`, `apply_seq`' +
    ` FROM ${T(meta)} WHERE \`source_id\` = ? ORDER BY \`worker\`${forUpdate ? ' FOR UPDATE' : ''}`
  );
}

/** After a claim of worker 0's row: the other workers' rows take its epoch. Bound: owner_epoch, owner, source_id. */
export function claimWorkerRowsSql(meta: string): string {
  return `UPDATE ${T(meta)} SET \`owner_epoch\` = ?, \`owner\` = ? WHERE \`source_id\` = ? AND \`worker\` > 0`;
}

/** Rows of workers 1..n-1 where missing. Bound per row: source_id, worker, owner, owner_epoch. */
export function addWorkerRowsSql(meta: string, rows: number): string {
  const values = Array.from({ length: rows }, () => '(?, ?, ?, ?)').join(', ');
  return `INSERT INTO ${T(meta)} (${quoteList(['source_id', 'worker', 'owner', 'owner_epoch'])}) VALUES ${values} ON DUPLICATE KEY UPDATE \`worker\` = \`worker\``;
}

/** Rows of workers a smaller pool no longer has. Bound: source_id, first worker to drop, owner_epoch. */
export function dropWorkerRowsSql(meta: string): string {
  return `DELETE FROM ${T(meta)} WHERE \`source_id\` = ? AND \`worker\` >= ? AND \`owner_epoch\` = ?`;
}

/**
 * Every worker's row back to the stream's resume point (the lowest one). Bound: position, apply_seq,
 * source time (or null), version, source_id, owner_epoch.
 */
export function rewindWorkerRowsSql(meta: string): string {
  return (
    `UPDATE ${T(meta)} SET \`position\` = ?, \`apply_seq\` = ?, \`source_time_us\` = ?, \`last_version\` = GREATEST(\`last_version\`, CAST(? AS DECIMAL(20,0)))` +
    ' WHERE `source_id` = ? AND `owner_epoch` = ?'
  );
}

/**
 * Bound: position, version, source time (µs, or null: keep the stored one), apply_seq, source_id,
 * worker, owner_epoch. Affects 0 rows when the epoch moved on. The source time only rises: it is a
 * binlog event's time, which a session's SET TIMESTAMP sets (a mysqlbinlog replay, an import) and a
 * source clock step back lowers, while binlog order is commit order, so the highest time read is
 * the best bound of what committed before. Assigned (before 2026-12-05), a past-stamped transaction
 * took it below what the target's GC had collected, and the next start stopped the direction for
 * good as a source "away longer than the GC horizon" (gc.test, flaky with idle workers' rows). A
 * change stamped below a collection still meets the apply's own guard (guardCollectedHorizon).
 */
export function advanceCheckpointSql(meta: string): string {
  return (
    `UPDATE ${T(meta)} SET \`position\` = ?, \`last_version\` = GREATEST(\`last_version\`, CAST(? AS DECIMAL(20,0))),` +
    ' `source_time_us` = GREATEST(COALESCE(CAST(? AS DECIMAL(20,0)), `source_time_us`), COALESCE(`source_time_us`, 0)), `apply_seq` = ?,' +
    ' `applied_batches` = `applied_batches` + 1, `updated_at` = CURRENT_TIMESTAMP(6)' +
    ' WHERE `source_id` = ? AND `worker` = ? AND `owner_epoch` = ?'
  );
}

/**
 * advanceCheckpointSql that also matches no row when one of the given tables collected tombstones
 * above a version: per table (schema, table, version), the batch's oldest update of a row its source
 * held; three more parameters each, last. The subquery reads those gc_state rows by key with shared
 * locks (an UPDATE's subquery in REPEATABLE READ: a collector's raise of them, or its first insert,
 * waits for the batch, and the batch waits for a raise under way and sees it); other tables' rows
 * stay unlocked, so a collection waits only for batches that write its table. No extra round trip.
 */
export function advanceCheckpointUnlessCollectedSql(meta: string, tables: number): string {
  const one = '(`schema_name` = ? AND `table_name` = ? AND `collected_below` > CAST(? AS DECIMAL(20,0)))';
  return `${advanceCheckpointSql(meta)} AND NOT EXISTS (SELECT 1 FROM ${quoteTable(meta, 'gc_state')} WHERE ${Array(tables).fill(one).join(' OR ')})`;
}

/** Upgrades a checkpoints table made before parallel apply: the existing row becomes worker 0's. */
export function addCheckpointWorkerSql(meta: string): string {
  return (
    `ALTER TABLE ${T(meta)} ADD COLUMN \`worker\` SMALLINT UNSIGNED NOT NULL DEFAULT 0 AFTER \`source_id\`,` +
    ' ADD COLUMN `apply_seq` BIGINT UNSIGNED NOT NULL DEFAULT 0, DROP PRIMARY KEY, ADD PRIMARY KEY (`source_id`, `worker`)'
  );
}

/** Upgrades a checkpoints table whose stream ids compared case- and accent-insensitively (sql/meta.sql). */
export function binarySourceIdSql(meta: string): string {
  return `ALTER TABLE ${T(meta)} MODIFY \`source_id\` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`;
}

/** Upgrades a checkpoints table made before the source time was recorded. */
export function addCheckpointSourceTimeSql(meta: string): string {
  return `ALTER TABLE ${T(meta)} ADD COLUMN \`source_time_us\` BIGINT UNSIGNED NULL`;
}

/** The columns that identify the source server of a checkpoint, with their definitions (added in place to older tables). */
export const CHECKPOINT_IDENTITY_COLUMNS: ReadonlyArray<{ name: string; definition: string }> = [
  { name: 'source_uuid', definition: 'VARCHAR(64) NULL' },
  { name: 'source_gtid_set', definition: 'TEXT NULL' },
  { name: 'source_head', definition: 'VARCHAR(4096) NULL' },
];

/** Upgrades a checkpoints table made before checkpoints identified their source server. */
export function addCheckpointIdentityColumnsSql(meta: string, columns: ReadonlyArray<{ name: string; definition: string }>): string {
  return `ALTER TABLE ${T(meta)} ${columns.map((c) => `ADD COLUMN ${quoteIdent(c.name)} ${c.definition}`).join(', ')}`;
}

/** Bound: source_id. */
export function readSourceIdentitySql(meta: string): string {
  return `SELECT \`source_uuid\`, \`source_gtid_set\`, \`source_head\` FROM ${T(meta)} WHERE \`source_id\` = ? AND \`worker\` = 0`;
}

/** Bound: uuid, gtid set (or null), head position, source_id, owner_epoch. Affects 0 rows when the epoch moved on. */
export function recordSourceIdentitySql(meta: string): string {
  return (
    `UPDATE ${T(meta)} SET \`source_uuid\` = ?, \`source_gtid_set\` = ?, \`source_head\` = ?` +
    ' WHERE `source_id` = ? AND `worker` = 0 AND `owner_epoch` = ?'
  );
}

/** Who the source server is (MySQL): its uuid and GTID state. */
export const MYSQL_SOURCE_IDENTITY_SQL =
  "SELECT @@GLOBAL.server_uuid AS uuid, @@GLOBAL.gtid_mode AS gtidMode, @@GLOBAL.gtid_executed AS gtidSet";

/** MariaDB has no server_uuid: the server id, and the binlog's GTID state (always kept). */
export const MARIADB_SOURCE_IDENTITY_SQL =
  "SELECT CONCAT('server_id:', @@GLOBAL.server_id) AS uuid, 'ON' AS gtidMode, @@GLOBAL.gtid_binlog_state AS gtidSet";

/** MySQL: 1 when every GTID of the bound set is in the server's executed set. */
export const MYSQL_GTID_CONTAINED_SQL = 'SELECT GTID_SUBSET(?, @@GLOBAL.gtid_executed) AS contained';

/**
 * For messages, not for running here: the statement an operator runs on a target to forget a
 * source's checkpoint and its initial-copy progress (`<sourceId>#...`), so the next start re-seeds.
 */
export function resetCheckpointSqlText(meta: string, sourceId: string): string {
  const literal = (v: string) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
  return `DELETE FROM ${T(meta)} WHERE \`source_id\` = ${literal(sourceId)} OR \`source_id\` LIKE ${literal(`${sourceId.replace(/[\\%_]/g, (c) => `\\${c}`)}#%`)}`;
}
