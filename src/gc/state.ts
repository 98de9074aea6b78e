// What the GC reads from a node: its clock, its replication checkpoints (with the source time each
// reached), and what it already collected per table (gc_state). Thin I/O over src/sql/gc.ts; the
// repair paths and the state check read the collected horizons through here too.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { readNodeIdSql } from '../sql/replicator.ts';
import { readCheckpointsSql, readGcStateSql, readTableGcStateSql, SERVER_CLOCK_SQL } from '../sql/gc.ts';
import { TABLE_EXISTS_SQL } from '../sql/introspect.ts';
import { type NodeObservation, type StreamCheckpoint, streamSourceNodeId } from './horizon.ts';

type Queryable = Pick<Connection, 'query'>;

/** The server's clock (µs since the epoch, UTC), as its triggers read it. */
export async function serverClockUs(conn: Queryable): Promise<bigint> {
  const [rows] = await conn.query<RowDataPacket[]>(SERVER_CLOCK_SQL);
  return BigInt(String(rows[0]!.now_us));
}

/** The server's clock in whole milliseconds (rounded down). */
export async function sourceClockMs(conn: Queryable): Promise<number> {
  return Number((await serverClockUs(conn)) / 1000n);
}

export interface CheckpointRow {
  sourceId: string;
  position: string;
  sourceTimeUs?: bigint;
  idleSeconds: number;
}

export async function readCheckpoints(conn: Queryable, metaSchema: string): Promise<CheckpointRow[]> {
  const { sql, values } = readCheckpointsSql(metaSchema);
  const [rows] = await conn.query<RowDataPacket[]>(sql, values);
  return rows.map((r) => ({
    sourceId: String(r.source_id),
    position: String(r.position),
    ...(r.source_time_us === null || r.source_time_us === undefined ? {} : { sourceTimeUs: BigInt(String(r.source_time_us)) }),
    idleSeconds: Number(r.idle_seconds ?? 0),
  }));
}

/**
 * The replication streams among checkpoint rows (`node-<id>` with a position). A stream applied by
 * several workers has a row per worker: it reached the lowest of their source times, and an
 * unknown one makes the stream's unknown.
 */
export function streamCheckpoints(rows: readonly CheckpointRow[]): StreamCheckpoint[] {
  const byId = new Map<number, StreamCheckpoint & { unknown: boolean }>();
  for (const r of rows) {
    const id = streamSourceNodeId(r.sourceId);
    if (id === undefined || r.position === '') continue;
    const s = byId.get(id) ?? { sourceNodeId: id, unknown: false };
    byId.set(id, s);
    if (r.sourceTimeUs === undefined) s.unknown = true;
    else if (s.sourceTimeUs === undefined || r.sourceTimeUs < s.sourceTimeUs) s.sourceTimeUs = r.sourceTimeUs;
  }
  return [...byId.values()].map(({ sourceNodeId, sourceTimeUs, unknown }) => (unknown || sourceTimeUs === undefined ? { sourceNodeId } : { sourceNodeId, sourceTimeUs }));
}

/** A reachable node's id, clock and stream checkpoints. */
export async function observeNode(conn: Queryable, name: string, metaSchema: string): Promise<Extract<NodeObservation, { reachable: true }> & { rows: CheckpointRow[] }> {
  const [idRows] = await conn.query<RowDataPacket[]>(readNodeIdSql(metaSchema));
  if (idRows.length === 0) throw new Error(`node ${name} is not installed (no node id in ${metaSchema}.node)`);
  const nowUs = await serverClockUs(conn);
  const rows = await readCheckpoints(conn, metaSchema);
  return { name, nodeId: Number(idRows[0]!.node_id), reachable: true, nowUs, checkpoints: streamCheckpoints(rows), rows };
}

async function hasGcState(conn: Queryable, metaSchema: string): Promise<boolean> {
  const [rows] = await conn.query<RowDataPacket[]>(TABLE_EXISTS_SQL, [metaSchema, 'gc_state']);
  return rows.length > 0;
}

export interface CollectedState {
  collectedBelow: bigint;
  collectedRows: number;
}

/** What the node collected per `schema.table` (empty when it never collected). */
export async function readCollected(conn: Queryable, metaSchema: string): Promise<Map<string, CollectedState>> {
  const out = new Map<string, CollectedState>();
  if (!(await hasGcState(conn, metaSchema))) return out;
  const { sql, values } = readGcStateSql(metaSchema);
  const [rows] = await conn.query<RowDataPacket[]>(sql, values);
  for (const r of rows) out.set(`${r.schema_name}.${r.table_name}`, { collectedBelow: BigInt(String(r.collected_below)), collectedRows: Number(r.collected_rows) });
  return out;
}

/** The version below which the node may have removed tombstones of this table (0: none removed). */
export async function collectedBelow(conn: Queryable, metaSchema: string, schema: string, table: string): Promise<bigint> {
  if (!(await hasGcState(conn, metaSchema))) return 0n;
  const { sql, values } = readTableGcStateSql(metaSchema, schema, table);
  const [rows] = await conn.query<RowDataPacket[]>(sql, values);
  return rows.length === 0 ? 0n : BigInt(String(rows[0]!.collected_below));
}
