// First start of a direction: merge every existing row (and tombstone) of the source into the
// target through the LWW sink, in primary-key chunks. Each chunk's progress is the checkpoint of a
// per-table copy stream, committed with the chunk's data, so a crashed copy resumes at its last
// chunk. Writes made during the copy are replayed by the stream afterwards; LWW makes that harmless.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { TableSelector } from '../capture/filter.ts';
import { connect } from '../db/connection.ts';
import type { RowChange } from '../model/change.ts';
import { tombstoneTableName } from '../model/names.ts';
import { countRowsSql } from '../sql/copy.ts';
import type { Logger } from '../writer/options.ts';
import type { Sink } from '../writer/sink.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { decodeKey, encodeKey, readChunks, resolveTables } from './table-reader.ts';

export interface CopyProgress {
  table: string;
  kind: 'rows' | 'tombstones';
  copied: number;
  total: number;
  rowsPerSecond: number;
  etaSeconds: number | undefined;
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
  chunkRows?: number;
  logger?: Logger;
  onProgress?: (p: CopyProgress) => void;
  progressIntervalMs?: number;
}

export interface CopyReport {
  tables: Array<{ table: string; rows: number; tombstones: number; resumed: boolean; skippedDone: boolean; seconds: number }>;
  rowsCopied: number;
  seconds: number;
}

const DONE = 'done';

async function copyOne(
  conn: Connection,
  o: CopyOptions,
  kind: 'rows' | 'tombstones',
  schema: string,
  table: string,
  readSchema: string,
  readTable: string,
  key: string[],
): Promise<{ copied: number; resumed: boolean; skippedDone: boolean }> {
  const streamId = `${o.sourceId}#${kind}:${schema}.${table}`;
  const cp = await o.sink.checkpoint(streamId);
  if (cp?.position === DONE) return { copied: 0, resumed: false, skippedDone: true };
  const after = cp?.position.startsWith('key:') ? decodeKey(cp.position.slice(4)) : undefined;
  const [[count]] = await conn.query<RowDataPacket[]>(countRowsSql(readSchema, readTable));
  const total = Number(count?.n ?? 0);
  const started = Date.now();
  let lastReport = 0;
  let copied = 0;
  for await (const rows of readChunks(conn, readSchema, readTable, key, o.chunkRows ?? 2000, after)) {
    const changes: RowChange[] = rows.map((r) => {
      const version = BigInt(r[o.versionColumn] as string);
      if (kind === 'rows') return { schema, table, op: 'insert', after: { ...r }, version };
      const before: Record<string, unknown> = {};
      for (const k of key) before[k] = r[k];
      return { schema, table, op: 'delete', before, version };
    });
    const last = rows[rows.length - 1]!;
    await o.sink.write({ sourceId: streamId, position: `key:${encodeKey(key.map((k) => last[k]))}`, changes });
    copied += rows.length;
    const now = Date.now();
    if (o.onProgress && now - lastReport >= (o.progressIntervalMs ?? 2000)) {
      lastReport = now;
      const rate = copied / Math.max(0.001, (now - started) / 1000);
      const remaining = Math.max(0, total - copied);
      o.onProgress({ table: `${schema}.${table}`, kind, copied, total, rowsPerSecond: rate, etaSeconds: rate > 0 ? remaining / rate : undefined, resumedAfterKey: after !== undefined });
    }
  }
  await o.sink.write({ sourceId: streamId, position: DONE, changes: [] });
  await o.sink.flush();
  return { copied, resumed: after !== undefined, skippedDone: false };
}

/** Copies every selected table's rows and tombstones from the source into the sink's target. */
export async function copyTables(o: CopyOptions): Promise<CopyReport> {
  const started = Date.now();
  const conn = await connect(o.sourceUrl);
  const report: CopyReport = { tables: [], rowsCopied: 0, seconds: 0 };
  try {
    for (const { schema, table } of await resolveTables(conn, o.tables, o.versionColumn)) {
      const t0 = Date.now();
      const meta = await loadTableMeta(conn, schema, table, o.versionColumn);
      const rows = await copyOne(conn, o, 'rows', schema, table, schema, table, meta.primaryKey);
      const tombstones = await copyOne(conn, o, 'tombstones', schema, table, o.metaSchema, tombstoneTableName(schema, table), meta.primaryKey);
      report.tables.push({
        table: `${schema}.${table}`,
        rows: rows.copied,
        tombstones: tombstones.copied,
        resumed: rows.resumed || tombstones.resumed,
        skippedDone: rows.skippedDone && tombstones.skippedDone,
        seconds: (Date.now() - t0) / 1000,
      });
      report.rowsCopied += rows.copied + tombstones.copied;
    }
  } finally {
    await conn.end();
  }
  report.seconds = (Date.now() - started) / 1000;
  return report;
}
