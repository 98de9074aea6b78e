// What merging one source row or tombstone into a target does under LWW (DESIGN.md §3, §4), decided
// from versions alone. The sink makes the same decision again under its locks when it writes; the
// plan lets the merge send only what changes something and lets a dry run say what would change.
// Pure functions.

/**
 * `insert` the target lacks the key; `update` the target's row is older; `delete` a newer source
 * tombstone removes the target's row; `tombstone` the target records a newer tombstone for a key it
 * holds no row of; `skip` the target already holds the same or a newer version (row or tombstone).
 */
export type MergeClass = 'insert' | 'update' | 'delete' | 'tombstone' | 'skip';

export const MERGE_CLASSES: readonly MergeClass[] = ['insert', 'update', 'delete', 'tombstone', 'skip'];

export type MergeCounts = Record<MergeClass, number>;

export function emptyMergeCounts(): MergeCounts {
  return { insert: 0, update: 0, delete: 0, tombstone: 0, skip: 0 };
}

export function addMergeCounts(into: MergeCounts, from: MergeCounts): void {
  for (const c of MERGE_CLASSES) into[c] += from[c];
}

/** Changes a merge makes (everything but skips). */
export function changeCount(c: MergeCounts): number {
  return c.insert + c.update + c.delete + c.tombstone;
}

/** A source row of version `v` against the target's row and tombstone versions for its key. */
export function classifyRow(v: bigint, targetRow: bigint | undefined, targetTombstone: bigint | undefined): MergeClass {
  if (targetTombstone !== undefined && targetTombstone >= v) return 'skip';
  if (targetRow === undefined) return 'insert';
  return targetRow < v ? 'update' : 'skip';
}

/** A source tombstone of version `v`: deletes an older target row; is recorded when newer than the target's tombstone. */
export function classifyTombstone(v: bigint, targetRow: bigint | undefined, targetTombstone: bigint | undefined): MergeClass {
  if (targetRow !== undefined && targetRow < v) return 'delete';
  if (targetTombstone === undefined || targetTombstone < v) return 'tombstone';
  return 'skip';
}

/** The target row's version after a source row of version `sourceRow` was merged into it (rows go before tombstones). */
export function afterRowsMerged(sourceRow: bigint | undefined, targetRow: bigint | undefined, targetTombstone: bigint | undefined): bigint | undefined {
  if (sourceRow === undefined) return targetRow;
  const c = classifyRow(sourceRow, targetRow, targetTombstone);
  return c === 'insert' || c === 'update' ? sourceRow : targetRow;
}
