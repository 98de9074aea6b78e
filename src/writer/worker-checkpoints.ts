// A stream's checkpoint when several apply workers each advance their own row (worker-pool.ts):
// the stream resumes from the lowest row — the one with the smallest apply_seq, the sink's ordinal
// of source transactions — since everything before it is committed by every worker. Before a sink
// writes a stream, every worker row is set back to that point (and rows of workers a smaller pool
// no longer has are dropped, rows of new workers added), so that the rows agree again and a
// worker's row never claims more than it applied. A table from before parallel apply has one row,
// worker 0's, with apply_seq 0: it is its own resume point and needs no change for one worker.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { OwnershipLostError } from '../errors.ts';
import { addWorkerRowsSql, dropWorkerRowsSql, readWorkerCheckpointsSql, rewindWorkerRowsSql } from '../sql/checkpoint.ts';

export interface WorkerRow {
  worker: number;
  position: string;
  lastVersion: bigint;
  ownerEpoch: bigint;
  owner: string;
  sourceTimeUs?: bigint;
  applySeq: bigint;
}

export interface ResumePoint {
  position: string;
  applySeq: bigint;
  lastVersion: bigint;
  /** The lowest source time of the rows; undefined when one of them has none. */
  sourceTimeUs?: bigint;
}

function rowOf(r: RowDataPacket): WorkerRow {
  return {
    worker: Number(r.worker),
    position: String(r.position),
    lastVersion: BigInt(String(r.last_version)),
    ownerEpoch: BigInt(String(r.owner_epoch)),
    owner: String(r.owner),
    ...(r.source_time_us === null || r.source_time_us === undefined ? {} : { sourceTimeUs: BigInt(String(r.source_time_us)) }),
    applySeq: BigInt(String(r.apply_seq)),
  };
}

export async function readWorkerRows(conn: Pick<Connection, 'execute'>, metaSchema: string, sourceId: string, forUpdate = false): Promise<WorkerRow[]> {
  const [rows] = await conn.execute<RowDataPacket[]>(readWorkerCheckpointsSql(metaSchema, forUpdate), [sourceId]);
  return rows.map(rowOf);
}

/** Where a stream resumes: the row with the lowest apply_seq (the lowest worker on a tie). */
export function resumePoint(rows: readonly WorkerRow[]): ResumePoint | undefined {
  let low: WorkerRow | undefined;
  let time: bigint | undefined;
  let timeKnown = rows.length > 0;
  for (const r of rows) {
    if (!low || r.applySeq < low.applySeq || (r.applySeq === low.applySeq && r.worker < low.worker)) low = r;
    if (r.sourceTimeUs === undefined) timeKnown = false;
    else if (time === undefined || r.sourceTimeUs < time) time = r.sourceTimeUs;
  }
  if (!low) return undefined;
  return { position: low.position, applySeq: low.applySeq, lastVersion: low.lastVersion, ...(timeKnown && time !== undefined ? { sourceTimeUs: time } : {}) };
}

/** True when the rows are exactly workers 0..workers-1 at one point: nothing to align. */
export function aligned(rows: readonly WorkerRow[], workers: number): boolean {
  if (rows.length !== workers) return false;
  const first = rows[0]!;
  return rows.every((r, i) => r.worker === i && r.applySeq === first.applySeq && r.position === first.position && r.sourceTimeUs === first.sourceTimeUs);
}

/**
 * Sets every worker row of a stream to its resume point, for a pool of `workers`, in one
 * transaction (locking the rows); returns the resume point's apply_seq, from which the sink numbers
 * the stream's next transactions. Refuses (OwnershipLostError) when `epoch` no longer owns it.
 */
export async function alignWorkerRows(conn: Connection, o: { metaSchema: string; sourceId: string; epoch: bigint; owner: string; workers: number }): Promise<bigint> {
  await conn.query('BEGIN');
  try {
    const rows = await readWorkerRows(conn, o.metaSchema, o.sourceId, true);
    const head = rows.find((r) => r.worker === 0);
    if (!head || head.ownerEpoch !== o.epoch) throw new OwnershipLostError(o.sourceId, o.epoch, head?.ownerEpoch ?? 0n);
    const point = resumePoint(rows)!;
    if (!aligned(rows, o.workers)) {
      if (rows.some((r) => r.worker >= o.workers)) await conn.execute(dropWorkerRowsSql(o.metaSchema), [o.sourceId, o.workers, o.epoch.toString()]);
      if (o.workers > 1) {
        const values = Array.from({ length: o.workers - 1 }, (_, i) => [o.sourceId, i + 1, o.owner, o.epoch.toString()]).flat();
        await conn.execute(addWorkerRowsSql(o.metaSchema, o.workers - 1), values);
      }
      await conn.execute(rewindWorkerRowsSql(o.metaSchema), [
        point.position,
        point.applySeq.toString(),
        point.sourceTimeUs === undefined ? null : point.sourceTimeUs.toString(),
        point.lastVersion.toString(),
        o.sourceId,
        o.epoch.toString(),
      ]);
    }
    await conn.query('COMMIT');
    return point.applySeq;
  } catch (err) {
    await conn.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
