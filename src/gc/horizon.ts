// The tombstone GC horizon (DESIGN §3, §12): the version below which a node may remove tombstones.
// Pure: observations of every node in, one horizon per node (or a pause with its reasons) out.
//
// A tombstone (key, V) on node X exists to refuse a change of that key with a version below V. It
// may go once no such change can reach any node any more through replication, and every node
// already applied the delete (so a repair that copies rows between nodes cannot bring the row back):
//
// (a) every node P has applied the delete. A delete of origin S with version V committed on S at
//     about physical(V) (a version is never below its statement's clock, and a transaction commits
//     within `margin` of its statements). P's checkpoint for S records the source time T(P←S) its
//     stream reached: every transaction of S that committed before T(P←S) is applied on P. So the
//     delete is applied everywhere once physical(V) + margin <= T(P←S) for every pair P ≠ S.
// (b) nothing with a version below V can still arrive at X. Changes reach X only as local writes of
//     a peer S, read from S's binlog after X's checkpoint for S: they commit after T(X←S) and their
//     versions are at least their statement's clock, so at least T(X←S) − margin (same clock: S's).
//     X's own future local writes are stamped at least now(X) − margin. So physical(V) < T(X←S) −
//     margin for every S, and < now(X) − margin.
//
// Both give one bound: horizon(X) = min(T(P←S) over every ordered pair of nodes, now(X)) − margin,
// and a tombstone goes when physical(V) < horizon(X), i.e. V < horizon(X) << 10. The margin absorbs
// long transactions, clock skew between nodes and the replicator, and heartbeat delays.
//
// Anything unknown holds GC back, never a guess: a node that cannot be reached, a node named in some
// checkpoint but not given, a pair without a checkpoint, a checkpoint without a source time. A
// checkpoint that does not move holds the horizon where it is (its age is reported).
import { NODE_BITS } from '../model/version.ts';

/** A `node-<id>` checkpoint row as read from a node. */
export interface StreamCheckpoint {
  /** The source node's id (from `node-<id>`). */
  sourceNodeId: number;
  /** Source time (µs, the source's clock) reached; undefined when not recorded. */
  sourceTimeUs?: bigint;
}

export type NodeObservation =
  | { name: string; nodeId: number; reachable: true; nowUs: bigint; checkpoints: StreamCheckpoint[] }
  | { name: string; nodeId?: number; reachable: false; error: string };

export interface DirectionProgress {
  /** e.g. `n1→n2` (source→target). */
  name: string;
  sourceNodeId: number;
  targetNodeId: number;
  /** Source time the target applied the source's stream up to; undefined when unknown. */
  sourceTimeUs?: bigint;
  /** How far that lags the source's clock (when the source was reached). */
  lagMs?: number;
}

export interface NodeHorizon {
  name: string;
  nodeId?: number;
  /** Tombstones with a version below this may go; null: GC is paused on this node. */
  horizon: bigint | null;
  /** The physical time of the horizon (µs); null when paused. */
  horizonTimeUs: bigint | null;
  /** What sets the horizon: the slowest direction, or the node's own clock. */
  heldBy?: string;
}

export interface HorizonReport {
  nodes: NodeHorizon[];
  directions: DirectionProgress[];
  /** Why GC is paused (empty when it may run). */
  paused: string[];
}

const STREAM_ID = /^node-(\d+)$/;

/** The source node id of a replication stream's checkpoint id, or undefined for other rows (copy progress, sync). */
export function streamSourceNodeId(sourceId: string): number | undefined {
  const m = STREAM_ID.exec(sourceId);
  return m ? Number(m[1]) : undefined;
}

/** The version bound of a physical time: every version below it has a smaller physical part. */
export function versionBound(physicalUs: bigint): bigint {
  return physicalUs <= 0n ? 0n : physicalUs << NODE_BITS;
}

/** The horizon of every node from what every node reported; see the header comment. */
export function computeHorizons(observed: readonly NodeObservation[], marginUs: bigint): HorizonReport {
  const paused: string[] = [];
  const reachable = observed.filter((n): n is Extract<NodeObservation, { reachable: true }> => n.reachable);
  for (const n of observed) if (!n.reachable) paused.push(`node ${n.name} cannot be reached (${n.error}): its progress is unknown`);
  const byId = new Map<number, string>();
  for (const n of observed) if (n.nodeId !== undefined) byId.set(n.nodeId, n.name);
  // Nodes named by a checkpoint somewhere but not given: their streams still count.
  for (const n of reachable) {
    for (const c of n.checkpoints) {
      if (byId.has(c.sourceNodeId)) continue;
      byId.set(c.sourceNodeId, `node-${c.sourceNodeId}`);
      paused.push(
        `node ${n.name} holds a checkpoint of node id ${c.sourceNodeId}, which was not given: its progress is unknown` +
          ` (give it with --node; if it left for good, delete its checkpoint rows (source_id 'node-${c.sourceNodeId}') on every node and re-seed it before it rejoins)`,
      );
    }
  }
  const directions: DirectionProgress[] = [];
  let slowest: { time: bigint; name: string } | undefined;
  for (const target of reachable) {
    for (const [sourceId, sourceName] of byId) {
      if (sourceId === target.nodeId) continue;
      const name = `${sourceName}→${target.name}`;
      const cp = target.checkpoints.find((c) => c.sourceNodeId === sourceId);
      const source = reachable.find((n) => n.nodeId === sourceId);
      const d: DirectionProgress = { name, sourceNodeId: sourceId, targetNodeId: target.nodeId };
      if (cp?.sourceTimeUs !== undefined) {
        d.sourceTimeUs = cp.sourceTimeUs;
        if (source) d.lagMs = Math.max(0, Number((source.nowUs - cp.sourceTimeUs) / 1000n));
        if (!slowest || cp.sourceTimeUs < slowest.time) slowest = { time: cp.sourceTimeUs, name };
      } else if (!cp) {
        paused.push(`${name}: ${target.name} has no checkpoint for node id ${sourceId} (that direction never started)`);
      } else {
        paused.push(`${name}: the checkpoint records no source time yet (it is written with the next applied transaction or heartbeat)`);
      }
      directions.push(d);
    }
  }
  const nodes: NodeHorizon[] = observed.map((n) => {
    if (paused.length > 0 || !n.reachable) return { name: n.name, nodeId: n.nodeId, horizon: null, horizonTimeUs: null };
    let limit = n.nowUs;
    let heldBy = `${n.name}'s own clock`;
    if (slowest && slowest.time < limit) {
      limit = slowest.time;
      heldBy = slowest.name;
    }
    const time = limit - marginUs;
    return { name: n.name, nodeId: n.nodeId, horizon: versionBound(time), horizonTimeUs: time > 0n ? time : 0n, heldBy };
  });
  return { nodes, directions, paused };
}
