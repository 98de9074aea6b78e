// The full-table LWW merge of one table's rows (or tombstones) from a source node into a target, in
// primary-key chunks: read a chunk from the source, look up the versions the target holds for its
// keys, classify each key (plan.ts), and hand what would change to the sink, which applies it with
// LWW under its own locks (a key changed meanwhile is decided again there). Keys the target already
// holds at the same or a newer version are not sent: versions of a key only grow, so a skipped key
// stays covered. Without a sink it is a dry run: it only counts.
//
// Used by the first start of a replication direction (initial-copy.ts) and by `lww-sink sync`
// (repair.ts). Memory: one chunk in hand, plus whatever the sink queues (bounded by its
// limits.maxQueueBytes besides the window it is applying, which makes this loop wait).
import type { Connection } from 'mysql2/promise';
import type { RowChange } from '../model/change.ts';
import { HorizonCrossedError } from '../errors.ts';
import type { Sink } from '../writer/sink.ts';
import { afterRowsMerged, classifyRow, classifyTombstone, emptyMergeCounts, type MergeClass, type MergeCounts } from './plan.ts';
import { approxRowBytes, type ChunkSource, encodeKey, type KeyValues, keyIdOf, lookupVersions, readChunks, rowsToRead } from './table-reader.ts';
import type { TableMeta } from '../model/table.ts';
import type { ReadColumn, TypedColumn } from '../sql/column-read.ts';

export type MergeKind = 'rows' | 'tombstones';

/** A table as the merge needs it (from the source's metadata). */
export interface MergeTable {
  schema: string;
  table: string;
  primaryKey: readonly string[];
  /** Columns written (no generated ones), version column last. */
  writableColumns: readonly string[];
  /** Types of the columns, so each is read exactly (sql/column-read.ts). */
  columnTypes: readonly TypedColumn[];
  versionColumn: string;
  metaSchema: string;
  tombstoneTable: string;
}

/** The merge's view of a table, from its metadata. */
export function mergeTableOf(meta: TableMeta, metaSchema: string): MergeTable {
  return {
    schema: meta.schema,
    table: meta.table,
    primaryKey: meta.primaryKey,
    writableColumns: meta.writableColumns,
    columnTypes: meta.columns.map((c) => ({ name: c.name, dataType: c.dataType, columnType: c.columnType })),
    versionColumn: meta.versionColumn,
    metaSchema,
    tombstoneTable: meta.tombstoneTable,
  };
}

export interface MergeProgress {
  /** `schema.table` */
  table: string;
  kind: MergeKind;
  /** Rows (or tombstones) read from the source so far in this run. */
  read: number;
  /** Rows handed to the sink so far (read minus skipped). */
  sent: number;
  /** Rows to read in this run (after the resume key); approximate when `estimated`. */
  total: number;
  estimated: boolean;
  rowsPerSecond: number;
  etaSeconds: number | undefined;
  /** This run started after a key stored by an earlier one. */
  resumed: boolean;
  done: boolean;
}

export interface MergeStreamOptions {
  source: Connection;
  /** Target connection for version lookups; null: no plan, every row is sent (the sink still decides). */
  target: Connection | null;
  /** Null: dry run, nothing is written. */
  sink: Sink | null;
  table: MergeTable;
  kind: MergeKind;
  /** The sink's source id for this stream's transactions (its checkpoint row on the target). */
  sourceId: string;
  chunkRows: number;
  /** Resume after this key (exclusive). */
  after?: KeyValues;
  /** Whether the target holds the tombstone table (a dry run against a target that never had one). */
  targetHasTombstones: boolean;
  onProgress?: (p: MergeProgress) => void;
  progressIntervalMs?: number;
  /**
   * The tombstone GC horizon guard (needs `target`): the target's collected horizon for this table,
   * read again per chunk, and the node names for the error. A source row older than it for a key
   * the target holds neither a row nor a tombstone of may be a row whose delete the target already
   * collected: the merge stops with HorizonCrossedError instead of bringing it back.
   */
  horizon?: { collectedBelow: () => Promise<bigint>; source: string; target: string };
}

export interface MergeStreamResult {
  read: number;
  sent: number;
  /** By class; all zero when the stream ran without a plan (target null). */
  counts: MergeCounts;
  seconds: number;
}

/** Position of a copy stream: after this key. */
export const KEY_PREFIX = 'key:';
export const DONE = 'done';
/** The checkpoint's position column holds 4,096 characters; longer keys keep the previous position. */
const MAX_POSITION_CHARS = 4000;
/** One sink transaction per this many approximate bytes of a chunk (far below the sink's maxTransactionBytes). */
const MAX_TRANSACTION_BYTES = 8 << 20;

/** Names with their types where known (a name alone is read as the client returns it). */
function typed(t: MergeTable, names: readonly string[]): ReadColumn[] {
  return names.map((n) => t.columnTypes.find((c) => c.name === n) ?? n);
}

function sourceOf(t: MergeTable, kind: MergeKind): ChunkSource {
  const key = typed(t, t.primaryKey);
  return kind === 'rows'
    ? { schema: t.schema, table: t.table, columns: typed(t, t.writableColumns), key }
    : { schema: t.metaSchema, table: t.tombstoneTable, columns: [...key, t.versionColumn], key };
}

function toChange(t: MergeTable, kind: MergeKind, row: Record<string, unknown>, version: bigint): RowChange {
  if (kind === 'rows') return { schema: t.schema, table: t.table, op: 'insert', after: row, version };
  const before: Record<string, unknown> = {};
  for (const k of t.primaryKey) before[k] = row[k];
  return { schema: t.schema, table: t.table, op: 'delete', before, version };
}

/** Refuses a chunk with a row the target cannot decide: older than its GC horizon and unknown to it (see MergeStreamOptions.horizon). */
async function guardHorizon(o: MergeStreamOptions, rows: Record<string, unknown>[], classes: MergeClass[], keys: unknown[][]): Promise<void> {
  const h = o.horizon!;
  const t = o.table;
  let below: bigint | undefined;
  for (let i = 0; i < rows.length; i++) {
    if (classes[i] !== 'insert') continue;
    below ??= await h.collectedBelow();
    const v = BigInt(rows[i]![t.versionColumn] as string);
    if (v >= below) continue;
    throw new HorizonCrossedError(
      `refusing to merge ${t.schema}.${t.table} from ${h.source} into ${h.target}: key ${encodeKey(keys[i]!)} has version ${v} on ${h.source}, ` +
        `older than the tombstones ${h.target} already garbage-collected (below version ${below}), and ${h.target} has no row or tombstone for it: ` +
        `it may be a deleted row whose tombstone is gone, and merging it would bring it back. ${h.source}'s data is older than the GC horizon: ` +
        `re-seed ${h.source} from a peer (README "Tombstone GC"); if the row is really new, update it on ${h.source} so it gets a new version`,
      h.source,
      h.target,
      `${t.schema}.${t.table}`,
    );
  }
}

/** Merges one stream (a table's rows or its tombstones) from the source into the sink's target. */
export async function mergeStream(o: MergeStreamOptions): Promise<MergeStreamResult> {
  const t = o.table;
  const src = sourceOf(t, o.kind);
  const name = `${t.schema}.${t.table}`;
  const started = Date.now();
  const { rows: total, estimated } = await rowsToRead(o.source, src, o.after);
  const counts = emptyMergeCounts();
  let read = 0;
  let sent = 0;
  let lastReport = started;
  let position = o.after === undefined ? 'start' : `${KEY_PREFIX}${encodeKey(o.after)}`;
  const report = (done: boolean) => {
    const now = Date.now();
    lastReport = now;
    const rate = read / Math.max(0.001, (now - started) / 1000);
    const remaining = Math.max(0, total - read);
    o.onProgress?.({ table: name, kind: o.kind, read, sent, total, estimated, rowsPerSecond: rate, etaSeconds: done ? 0 : rate > 0 ? remaining / rate : undefined, resumed: o.after !== undefined, done });
  };
  for await (const rows of readChunks(o.source, src, { chunkRows: o.chunkRows, after: o.after })) {
    const keys = rows.map((r) => t.primaryKey.map((k) => r[k]));
    let classes: MergeClass[] | null = null;
    if (o.target) {
      const targetRows = await lookupVersions(o.target, t.schema, t.table, src.key, t.versionColumn, keys);
      const targetTombs = o.targetHasTombstones
        ? await lookupVersions(o.target, t.metaSchema, t.tombstoneTable, src.key, t.versionColumn, keys)
        : new Map<string, bigint>();
      // A dry run changes nothing, so the tombstones see the target as it was before the rows
      // stream: bring in the source rows that stream would have written.
      const sourceRows = !o.sink && o.kind === 'tombstones' ? await lookupVersions(o.source, t.schema, t.table, src.key, t.versionColumn, keys) : null;
      classes = rows.map((r, i) => {
        const id = keyIdOf(keys[i]!);
        const v = BigInt(r[t.versionColumn] as string);
        if (o.kind === 'rows') return classifyRow(v, targetRows.get(id), targetTombs.get(id));
        return classifyTombstone(v, afterRowsMerged(sourceRows?.get(id), targetRows.get(id), targetTombs.get(id)), targetTombs.get(id));
      });
      for (const c of classes) counts[c]++;
      if (o.horizon && o.kind === 'rows') await guardHorizon(o, rows, classes, keys);
    }
    read += rows.length;
    if (o.sink) {
      // One sink transaction per slice of the chunk, each carrying the position of its last key.
      let changes: RowChange[] = [];
      let bytes = 0;
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i]!;
        if (classes?.[i] !== 'skip') {
          changes.push(toChange(t, o.kind, r, BigInt(r[t.versionColumn] as string)));
          bytes += approxRowBytes(r);
        }
        const last = i === rows.length - 1;
        if (last || bytes >= MAX_TRANSACTION_BYTES) {
          const next = `${KEY_PREFIX}${encodeKey(keys[i]!)}`;
          if (next.length <= MAX_POSITION_CHARS) position = next;
          sent += changes.length;
          await o.sink.write({ sourceId: o.sourceId, position, changes });
          changes = [];
          bytes = 0;
        }
      }
    }
    if (o.onProgress && Date.now() - lastReport >= (o.progressIntervalMs ?? 2000)) report(false);
  }
  if (o.sink) {
    await o.sink.write({ sourceId: o.sourceId, position: DONE, changes: [] });
    await o.sink.flush();
  }
  if (o.onProgress) report(true);
  return { read, sent, counts, seconds: (Date.now() - started) / 1000 };
}
