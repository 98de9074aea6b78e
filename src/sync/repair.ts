// `lww-sink sync`: a one-shot full-table LWW merge between nodes, to repair what the state check
// reports. Every pair of nodes is merged both ways (A→B, then B→A; with more nodes every pair in
// order, which leaves them all equal), table by table, rows then tombstones, through the LWW sink
// (merge.ts), so each key ends at its LWW winner on every node. The sink's transactions carry their
// own source id (`sync:<node>#rows:<db.t>`): the replicator's checkpoints are left alone, and a
// running replicator's capture drops these writes like any sink's (the winner already exists on the
// node it came from). A dry run reads both sides and counts, per class, what the merge would do.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { nodeLabel } from '../checker/report.ts';
import { connect, redactUrl } from '../db/connection.ts';
import { InvalidOptionsError, LwwError } from '../errors.ts';
import { readNodeIdSql, registeredTablesSql, SCHEMA_EXISTS_SQL } from '../sql/replicator.ts';
import { type Logger, type SinkOptionsInput, silentLogger } from '../writer/options.ts';
import { createSink, type Sink } from '../writer/sink.ts';
import { emptyCounters, type TableCounters } from '../writer/stats.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { DEFAULT_CHUNK_ROWS } from './initial-copy.ts';
import { type MergeProgress, mergeStream, mergeTableOf } from './merge.ts';
import { addMergeCounts, emptyMergeCounts, type MergeCounts } from './plan.ts';
import { resolveTables, tableExists } from './table-reader.ts';

export interface SyncOptions {
  /** Connection URLs of the nodes, at least two. */
  nodes: readonly string[];
  /** `db.t` (or `db` for its tables with the version column); default: the tables install registered on any node. */
  tables?: readonly string[];
  metaSchema?: string;
  versionColumn?: string;
  /** Only read and count; write nothing. */
  dryRun?: boolean;
  /** Rows per source read (default 2000). */
  chunkRows?: number;
  /** Extra sink options (batching, timeouts, failpoints). */
  sink?: Partial<SinkOptionsInput>;
  onProgress?: (p: SyncProgress) => void;
  progressIntervalMs?: number;
  logger?: Logger;
}

export interface SyncProgress extends MergeProgress {
  /** e.g. `A→B` */
  direction: string;
}

/** What the sink did for one table (its counters), when not a dry run. */
export type AppliedCounts = Pick<TableCounters, 'inserted' | 'updated' | 'deleted' | 'tombstoned' | 'skippedStale' | 'skippedByTombstone' | 'uniqueClashes'>;

export interface SyncTableReport {
  /** `schema.table` */
  table: string;
  rowsRead: number;
  tombstonesRead: number;
  /** What the merge found, by class: in a dry run what would be done, else what was sent (and skipped). */
  planned: MergeCounts;
  /** The sink's counters for this table and direction; absent in a dry run. */
  applied?: AppliedCounts;
  seconds: number;
}

export interface SyncDirectionReport {
  /** e.g. `A→B` */
  name: string;
  source: number;
  target: number;
  tables: SyncTableReport[];
}

export interface SyncReport {
  /** Node URLs, passwords redacted; labels A, B, ... in this order. */
  nodes: string[];
  dryRun: boolean;
  directions: SyncDirectionReport[];
  totals: { rowsRead: number; tombstonesRead: number; planned: MergeCounts; applied?: AppliedCounts };
  seconds: number;
}

/** A node that cannot be reached, or lacks a table to sync; names it (password redacted). */
export class SyncNodeError extends LwwError {}

const APPLIED_KEYS = ['inserted', 'updated', 'deleted', 'tombstoned', 'skippedStale', 'skippedByTombstone', 'uniqueClashes'] as const;

function emptyApplied(): AppliedCounts {
  const c = emptyCounters();
  return Object.fromEntries(APPLIED_KEYS.map((k) => [k, c[k]])) as AppliedCounts;
}

interface Node {
  index: number;
  url: string;
  conn: Connection;
  /** Names this node in the sink's source ids: its LWW node id when installed, else host:port. */
  sourceName: string;
}

async function openNode(index: number, url: string, metaSchema: string): Promise<Node> {
  let conn: Connection;
  try {
    conn = await connect(url);
  } catch (err) {
    throw new SyncNodeError(`cannot connect to node ${nodeLabel(index)} (${redactUrl(url)}): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  let sourceName = `${conn.config.host ?? 'localhost'}:${conn.config.port ?? 3306}`;
  const [schema] = await conn.query<RowDataPacket[]>(SCHEMA_EXISTS_SQL, [metaSchema]);
  if (schema.length > 0 && (await tableExists(conn, metaSchema, 'node'))) {
    const [rows] = await conn.query<RowDataPacket[]>(readNodeIdSql(metaSchema));
    if (rows[0]) sourceName = `node-${rows[0].node_id}`;
  }
  return { index, url, conn, sourceName };
}

/** The tables install registered on any of the nodes. */
async function registeredTables(nodes: Node[], metaSchema: string): Promise<Array<{ schema: string; table: string }>> {
  // As objects: names may hold dots or commas.
  const names = new Map<string, { schema: string; table: string }>();
  for (const n of nodes) {
    if (!(await tableExists(n.conn, metaSchema, 'tables'))) continue;
    const [rows] = await n.conn.query<RowDataPacket[]>(registeredTablesSql(metaSchema));
    for (const r of rows) names.set(`${r.schema_name}\u0000${r.table_name}`, { schema: String(r.schema_name), table: String(r.table_name) });
  }
  return [...names.keys()].sort().map((k) => names.get(k)!);
}

async function mergeDirection(
  o: SyncOptions & { metaSchema: string; versionColumn: string },
  source: Node,
  target: Node,
  tables: Array<{ schema: string; table: string }>,
): Promise<SyncDirectionReport> {
  const name = `${nodeLabel(source.index)}→${nodeLabel(target.index)}`;
  const log = o.logger ?? silentLogger;
  const report: SyncDirectionReport = { name, source: source.index, target: target.index, tables: [] };
  let sink: Sink | null = null;
  if (!o.dryRun) {
    sink = createSink({
      target: target.url,
      metaSchema: o.metaSchema,
      versionColumn: o.versionColumn,
      owner: `lww-sink sync ${process.pid}`,
      logger: log,
      ...o.sink,
      batch: { maxDelayMs: 5, ...o.sink?.batch },
    });
  }
  try {
    for (const { schema, table } of tables) {
      const t0 = Date.now();
      const qualified = `${schema}.${table}`;
      if (!(await tableExists(source.conn, schema, table))) {
        throw new SyncNodeError(`table ${qualified} does not exist on node ${nodeLabel(source.index)} (${redactUrl(source.url)}): create it there first`);
      }
      if (!(await tableExists(target.conn, schema, table))) {
        throw new SyncNodeError(`table ${qualified} does not exist on node ${nodeLabel(target.index)} (${redactUrl(target.url)}): create it there first`);
      }
      const meta = await loadTableMeta(source.conn, schema, table, o.versionColumn);
      const mt = mergeTableOf(meta, o.metaSchema);
      const entry: SyncTableReport = { table: qualified, rowsRead: 0, tombstonesRead: 0, planned: emptyMergeCounts(), seconds: 0 };
      for (const kind of ['rows', 'tombstones'] as const) {
        if (kind === 'tombstones' && !(await tableExists(source.conn, o.metaSchema, mt.tombstoneTable))) continue;
        const result = await mergeStream({
          source: source.conn,
          target: target.conn,
          sink,
          table: mt,
          kind,
          sourceId: `sync:${source.sourceName}#${kind}:${qualified}`,
          chunkRows: o.chunkRows ?? DEFAULT_CHUNK_ROWS,
          targetHasTombstones: await tableExists(target.conn, o.metaSchema, mt.tombstoneTable),
          progressIntervalMs: o.progressIntervalMs,
          onProgress: o.onProgress ? (p) => o.onProgress!({ ...p, direction: name }) : undefined,
        });
        if (kind === 'rows') entry.rowsRead = result.read;
        else entry.tombstonesRead = result.read;
        addMergeCounts(entry.planned, result.counts);
      }
      if (sink) {
        const counters = sink.stats().tables[qualified] ?? emptyCounters();
        entry.applied = Object.fromEntries(APPLIED_KEYS.map((k) => [k, counters[k]])) as AppliedCounts;
      }
      entry.seconds = (Date.now() - t0) / 1000;
      report.tables.push(entry);
    }
    await sink?.close();
  } finally {
    await sink?.abort();
  }
  return report;
}

/** Merges every table both ways between every pair of nodes (or, with dryRun, counts what that would do). */
export async function syncNodes(options: SyncOptions): Promise<SyncReport> {
  const started = Date.now();
  const metaSchema = options.metaSchema ?? 'lww_meta';
  const versionColumn = options.versionColumn ?? '_lww_ts';
  if (options.nodes.length < 2) throw new InvalidOptionsError(`sync needs at least two nodes (got ${options.nodes.length})`);
  const chunkRows = options.chunkRows ?? DEFAULT_CHUNK_ROWS;
  if (!Number.isInteger(chunkRows) || chunkRows < 1 || chunkRows > 50_000) throw new InvalidOptionsError(`chunkRows must be an integer in 1..50000 (got ${chunkRows})`);
  const nodes: Node[] = [];
  try {
    for (const [i, url] of options.nodes.entries()) nodes.push(await openNode(i, url, metaSchema));
    const selectors = options.tables ?? (await registeredTables(nodes, metaSchema));
    if (selectors.length === 0) throw new InvalidOptionsError(`no tables to sync: none registered in ${metaSchema}.tables on any node; pass --tables db.t,...`);
    const tables = await resolveTables(nodes[0]!.conn, selectors, versionColumn);
    const o = { ...options, metaSchema, versionColumn, chunkRows };
    const report: SyncReport = {
      nodes: options.nodes.map(redactUrl),
      dryRun: options.dryRun ?? false,
      directions: [],
      totals: { rowsRead: 0, tombstonesRead: 0, planned: emptyMergeCounts(), applied: options.dryRun ? undefined : emptyApplied() },
      seconds: 0,
    };
    for (let i = 0; i < nodes.length; i++) {
      for (let j = i + 1; j < nodes.length; j++) {
        for (const [s, t] of [
          [nodes[i]!, nodes[j]!],
          [nodes[j]!, nodes[i]!],
        ] as const) {
          const d = await mergeDirection(o, s, t, tables);
          report.directions.push(d);
          for (const e of d.tables) {
            report.totals.rowsRead += e.rowsRead;
            report.totals.tombstonesRead += e.tombstonesRead;
            addMergeCounts(report.totals.planned, e.planned);
            if (e.applied && report.totals.applied) for (const k of APPLIED_KEYS) report.totals.applied[k] += e.applied[k];
          }
        }
      }
    }
    report.seconds = (Date.now() - started) / 1000;
    return report;
  } finally {
    for (const n of nodes) await n.conn.end().catch(() => undefined);
  }
}

function grid(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => [...(r[i] ?? '')].length)));
  return rows.map((r) => r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ').trimEnd()).join('\n');
}

/** The human summary: per direction and table, the classes found and (unless a dry run) what the sink did. */
export function formatSyncReport(report: SyncReport): string {
  const out: string[] = [`${report.dryRun ? 'Dry run: nothing written. ' : ''}LWW sync of ${report.nodes.length} nodes`];
  for (const [i, url] of report.nodes.entries()) out.push(`  ${nodeLabel(i)} = ${url}`);
  const head = report.dryRun
    ? ['table', 'rows', 'tombstones', 'insert', 'update', 'delete', 'tombstone', 'skip']
    : ['table', 'rows', 'tombstones', 'inserted', 'updated', 'deleted', 'tombstoned', 'skip', 'stale'];
  for (const d of report.directions) {
    out.push('', `${d.name}${report.dryRun ? ' (would do)' : ''}:`);
    const rows = [head];
    for (const t of d.tables) {
      const p = t.planned;
      const a = t.applied;
      rows.push(
        a
          ? [t.table, String(t.rowsRead), String(t.tombstonesRead), String(a.inserted), String(a.updated), String(a.deleted), String(a.tombstoned), String(p.skip), String(a.skippedStale + a.skippedByTombstone)]
          : [t.table, String(t.rowsRead), String(t.tombstonesRead), String(p.insert), String(p.update), String(p.delete), String(p.tombstone), String(p.skip)],
      );
    }
    out.push(
      grid(rows)
        .split('\n')
        .map((l) => `  ${l}`)
        .join('\n'),
    );
  }
  const p = report.totals.planned;
  const a = report.totals.applied;
  out.push('');
  out.push(
    a
      ? `done in ${report.seconds.toFixed(1)} s: inserted ${a.inserted}, updated ${a.updated}, deleted ${a.deleted}, tombstones written ${a.tombstoned}; ` +
          `${p.skip} already up to date${a.skippedStale + a.skippedByTombstone > 0 ? `, ${a.skippedStale + a.skippedByTombstone} found newer on the target when written` : ''}` +
          `${a.uniqueClashes > 0 ? `; ${a.uniqueClashes} unique-key clash(es) logged in the conflicts table` : ''}`
      : `would insert ${p.insert}, update ${p.update}, delete ${p.delete}, record ${p.tombstone} tombstone(s); ${p.skip} already up to date (${report.seconds.toFixed(1)} s)`,
  );
  return out.join('\n');
}

/** The report as JSON (counts are plain numbers). */
export function syncReportToJson(report: SyncReport, indent = 2): string {
  return JSON.stringify(report, null, indent);
}
