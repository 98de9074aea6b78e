// First start of a direction: merge every existing row (and tombstone) of the source into the
// target through the LWW sink, in primary-key chunks (merge.ts). Each chunk's progress is the
// checkpoint of a per-table copy stream (`<sourceId>#rows:<db.t>`, `#tombstones:`), committed with
// the chunk's data, so a crashed copy resumes after its last committed chunk. Writes made during the
// copy are replayed by the stream afterwards; LWW makes that harmless.
import type { Connection } from 'mysql2/promise';
import type { TableSelector } from '../capture/filter.ts';
import { connect, redactUrl, type Target } from '../db/connection.ts';
import { collectedBelow } from '../gc/state.ts';
import type { Logger } from '../writer/options.ts';
import type { Sink } from '../writer/sink.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { DONE, KEY_PREFIX, type MergeKind, type MergeProgress, mergeStream, mergeTableOf } from './merge.ts';
import { addMergeCounts, emptyMergeCounts, type MergeCounts } from './plan.ts';
import { decodeKey, resolveTables, tableExists } from './table-reader.ts';

/** Progress of one table's copy stream (rows or tombstones), reported every progressIntervalMs and when it ends. */
export interface CopyProgress extends MergeProgress {
  /** Rows read so far in this run (the same as `read`). */
  copied: number;
  resumedAfterKey: boolean;
}

export interface CopyOptions {
  sourceUrl: string;
  tables: readonly TableSelector[];
  sink: Sink;
  /** The stream's source id; each table's copy progress is kept under `<sourceId>#rows:<table>`. */
  sourceId: string;
  metaSchema: string;
  versionColumn: string;
  /** Rows per source read (default 2000). */
  chunkRows?: number;
  /**
   * Look up the target's versions and send only rows that change something (default true). False
   * sends every row and leaves the decision to the sink alone.
   */
  compareTarget?: boolean;
  logger?: Logger;
  onProgress?: (p: CopyProgress) => void;
  progressIntervalMs?: number;
  /** Node names for a HorizonCrossedError (default: the redacted URLs). */
  names?: { source: string; target: string };
}

export interface CopyTableReport {
  table: string;
  /** Rows and tombstones read from the source in this run (from the resume key when resumed). */
  rows: number;
  tombstones: number;
  /** Rows and tombstones handed to the sink (the rest the target already held at the same or a newer version). */
  written: number;
  /** What the merge planned, by class (rows and tombstones together). */
  counts: MergeCounts;
  resumed: boolean;
  /** Copied completely by an earlier run: nothing read. */
  skippedDone: boolean;
  seconds: number;
}

export interface CopyReport {
  tables: CopyTableReport[];
  /** Rows and tombstones read from the source in this run. */
  rowsCopied: number;
  rowsWritten: number;
  seconds: number;
}

export const DEFAULT_CHUNK_ROWS = 2000;

/** Checkpoint ids of a table's copy streams. */
export function copyStreamId(sourceId: string, kind: MergeKind, schema: string, table: string): string {
  return `${sourceId}#${kind}:${schema}.${table}`;
}

/** Copies every selected table's rows and tombstones from the source into the sink's target. */
export async function copyTables(o: CopyOptions): Promise<CopyReport> {
  const started = Date.now();
  const report: CopyReport = { tables: [], rowsCopied: 0, rowsWritten: 0, seconds: 0 };
  const conn = await connect(o.sourceUrl);
  let targetConn: Connection | null = null;
  const names = o.names ?? { source: redactUrl(o.sourceUrl), target: typeof o.sink.options.target === 'string' ? redactUrl(o.sink.options.target) : 'the target' };
  try {
    // Always opened: the target's GC horizon decides whether its versions must be looked up.
    targetConn = await connect(o.sink.options.target as Target);
    const tc = targetConn;
    for (const { schema, table } of await resolveTables(conn, o.tables, o.versionColumn)) {
      const t0 = Date.now();
      const meta = await loadTableMeta(conn, schema, table, o.versionColumn);
      const mt = mergeTableOf(meta, o.metaSchema);
      const collected = () => collectedBelow(tc, o.metaSchema, schema, table);
      // A target that collected tombstones is always compared: a row it lacks may be a collected delete.
      const target = (o.compareTarget ?? true) || (await collected()) > 0n ? tc : null;
      const entry: CopyTableReport = { table: `${schema}.${table}`, rows: 0, tombstones: 0, written: 0, counts: emptyMergeCounts(), resumed: false, skippedDone: true, seconds: 0 };
      for (const kind of ['rows', 'tombstones'] as const) {
        const streamId = copyStreamId(o.sourceId, kind, schema, table);
        const cp = await o.sink.checkpoint(streamId);
        if (cp?.position === DONE) continue;
        // A source that never deleted anything may have no tombstone table: nothing to copy then.
        if (kind === 'tombstones' && !(await tableExists(conn, o.metaSchema, mt.tombstoneTable))) {
          await o.sink.write({ sourceId: streamId, position: DONE, changes: [] });
          await o.sink.flush();
          continue;
        }
        const after = cp?.position.startsWith(KEY_PREFIX) ? decodeKey(cp.position.slice(KEY_PREFIX.length)) : undefined;
        const result = await mergeStream({
          source: conn,
          target,
          sink: o.sink,
          table: mt,
          kind,
          sourceId: streamId,
          chunkRows: o.chunkRows ?? DEFAULT_CHUNK_ROWS,
          after,
          targetHasTombstones: target ? await tableExists(target, o.metaSchema, mt.tombstoneTable) : false,
          progressIntervalMs: o.progressIntervalMs,
          onProgress: o.onProgress ? (p) => o.onProgress!({ ...p, copied: p.read, resumedAfterKey: p.resumed }) : undefined,
          horizon: target ? { collectedBelow: collected, ...names } : undefined,
        });
        entry.skippedDone = false;
        entry.resumed ||= after !== undefined;
        if (kind === 'rows') entry.rows = result.read;
        else entry.tombstones = result.read;
        entry.written += result.sent;
        addMergeCounts(entry.counts, result.counts);
      }
      entry.seconds = (Date.now() - t0) / 1000;
      report.tables.push(entry);
      report.rowsCopied += entry.rows + entry.tombstones;
      report.rowsWritten += entry.written;
    }
  } finally {
    await conn.end();
    await targetConn?.end();
  }
  report.seconds = (Date.now() - started) / 1000;
  return report;
}
