// Checkpoint statements. The advance is conditioned on the owner epoch, so a writer that lost
// ownership changes nothing and learns it from the affected-row count.
import { quoteList, quoteTable } from './quote.ts';

const T = (meta: string) => quoteTable(meta, 'checkpoints');

/** Creates the row if missing and bumps its owner epoch. Bound: source_id, owner, owner. */
export function claimCheckpointSql(meta: string): string {
  return (
    `INSERT INTO ${T(meta)} (${quoteList(['source_id', 'owner', 'owner_epoch'])}) VALUES (?, ?, 1)` +
    ' ON DUPLICATE KEY UPDATE `owner_epoch` = `owner_epoch` + 1, `owner` = ?'
  );
}

/** Bound: source_id. */
export function readCheckpointSql(meta: string, forUpdate = false): string {
  return `SELECT \`position\`, \`last_version\`, \`owner_epoch\`, \`owner\`, \`source_time_us\` FROM ${T(meta)} WHERE \`source_id\` = ?${forUpdate ? ' FOR UPDATE' : ''}`;
}

/**
 * Bound: position, version, source time (µs, or null: keep the stored one), source_id, owner_epoch.
 * Affects 0 rows when the epoch moved on. The source time is assigned, not raised: after a source
 * clock step back the stored time goes back too, which only holds the GC horizon back.
 */
export function advanceCheckpointSql(meta: string): string {
  return (
    `UPDATE ${T(meta)} SET \`position\` = ?, \`last_version\` = GREATEST(\`last_version\`, ?),` +
    ' `source_time_us` = COALESCE(?, `source_time_us`),' +
    ' `applied_batches` = `applied_batches` + 1, `updated_at` = CURRENT_TIMESTAMP(6)' +
    ' WHERE `source_id` = ? AND `owner_epoch` = ?'
  );
}

/** Upgrades a checkpoints table made before the source time was recorded. */
export function addCheckpointSourceTimeSql(meta: string): string {
  return `ALTER TABLE ${T(meta)} ADD COLUMN \`source_time_us\` BIGINT UNSIGNED NULL`;
}
