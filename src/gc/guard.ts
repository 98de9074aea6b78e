// The stream's side of the GC horizon: a direction that resumes from its checkpoint replays the
// source's changes after it, whose versions are no older than the checkpoint's source time (less
// the margin). The target removed tombstones only below horizons that waited for this stream, so
// normally everything it collected lies below that time. When it collected past it — the source
// was left out of GC (its checkpoints removed, or a node restored from an old backup) for longer
// than the horizon — a replayed older write could bring back a row whose tombstone is gone.
import type { Connection } from 'mysql2/promise';
import { HorizonCrossedError } from '../errors.ts';
import { versionBound } from './horizon.ts';
import { readCollected } from './state.ts';

/** Throws HorizonCrossedError when the target collected tombstones newer than the stream's checkpoint. */
export async function checkStreamHorizon(o: {
  target: Pick<Connection, 'query'>;
  metaSchema: string;
  sourceTimeUs: bigint | undefined;
  source: string;
  targetName: string;
  sourceId: string;
}): Promise<void> {
  const collected = await readCollected(o.target, o.metaSchema);
  let worst: { table: string; below: bigint } | undefined;
  for (const [table, c] of collected) if (!worst || c.collectedBelow > worst.below) worst = { table, below: c.collectedBelow };
  if (!worst || worst.below === 0n) return;
  if (o.sourceTimeUs !== undefined && worst.below <= versionBound(o.sourceTimeUs)) return;
  const applied = o.sourceTimeUs === undefined ? 'an unknown time' : new Date(Number(o.sourceTimeUs / 1000n)).toISOString();
  throw new HorizonCrossedError(
    `${o.targetName} garbage-collected tombstones of ${worst.table} up to version ${worst.below}, but has applied ${o.source}'s changes only up to ${applied}: ` +
      `${o.source} was away longer than the GC horizon, and its pending older changes could bring deleted rows back. ` +
      `Re-seed ${o.source} from a peer (README "Tombstone GC": empty its tables, remove the checkpoints of source ${o.sourceId} on every node, restart replication)`,
    o.source,
    o.targetName,
    worst.table,
  );
}
