// One garbage-collection pass over every node: observe each node (clock, checkpoints), compute the
// horizons (horizon.ts), then on each node remove tombstones below its horizon, table by table, in
// small batches (a non-locking read of up to `batchRows` keys, then one short transaction deleting
// exactly those keys if still below the horizon and raising the table's gc_state), and apply the
// retention to the conflict log and to idle copy/sync progress rows. A dry run reads and counts only.
// GC paused (anything unknown) still applies the retentions: they do not depend on the peers.
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { readRegisteredTables } from '../checker/registry.ts';
import { connect, redactUrl } from '../db/connection.ts';
import { InvalidOptionsError, UnknownTableError } from '../errors.ts';
import type { TableMeta } from '../model/table.ts';
import { bindKeyValue, columnName, type TypedColumn } from '../sql/column-read.ts';
import {
  collectableTombstonesSql,
  countExpiredConflictsSql,
  countTombstonesSql,
  deleteConflictsSql,
  deleteProgressRowsSql,
  deleteTombstonesSql,
  expiredConflictsSql,
  idleProgressRowsSql,
  recordCollectedSql,
} from '../sql/gc.ts';
import { claimTablesOf } from '../install/provision.ts';
import { deleteClaimsBelowSql } from '../sql/claims.ts';
import { TABLE_EXISTS_SQL } from '../sql/introspect.ts';
import { type Logger, silentLogger } from '../writer/options.ts';
import { isRetryable } from '../db/retry.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { computeHorizons, type DirectionProgress, type NodeObservation, streamSourceNodeId } from './horizon.ts';
import { type CheckpointRow, observeNode } from './state.ts';

export const DEFAULT_GC_MARGIN_MS = 10 * 60_000;
export const DEFAULT_RETENTION_MS = 7 * 24 * 3600_000;
export const DEFAULT_GC_BATCH_ROWS = 1000;

export interface GcOptions {
  /** Connection URLs of every node of the mesh. */
  nodes: readonly string[];
  metaSchema?: string;
  /** Safety margin for long transactions and clock skew (default 10 minutes). */
  marginMs?: number;
  /** Conflict-log rows and idle copy/sync progress rows older than this go (default 7 days). */
  retentionMs?: number;
  /** Read and count only; write nothing. */
  dryRun?: boolean;
  /** Tombstones (and other rows) per delete transaction (default 1000). */
  batchRows?: number;
  connectTimeoutMs?: number;
  logger?: Logger;
}

export interface GcTableReport {
  /** `schema.table` */
  table: string;
  /** Tombstones before this pass. */
  tombstones: number;
  /** Removed (a dry run: below the horizon, would be removed). */
  collected: number;
}

export interface GcNodeReport {
  name: string;
  url: string;
  nodeId?: number;
  /** False when the node could not be reached or read (GC is paused then). */
  reachable: boolean;
  /** Tombstones with a version below this may go; null while GC is paused. */
  horizon: bigint | null;
  /** The horizon as a time (ISO 8601), null while paused. */
  horizonTime: string | null;
  heldBy?: string;
  tables: GcTableReport[];
  tombstones: number;
  collected: number;
  conflictsRemoved: number;
  progressRowsRemoved: number;
  /** Claims of UNIQUE values removed (below the horizon). */
  claimsRemoved: number;
  /** The pass failed on this node (the rest went on). */
  error?: string;
}

export interface GcReport {
  dryRun: boolean;
  marginMs: number;
  retentionMs: number;
  /** Why tombstone collection is paused; empty when it ran. */
  paused: string[];
  directions: DirectionProgress[];
  nodes: GcNodeReport[];
  seconds: number;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function isoOf(us: bigint | null): string | null {
  return us === null ? null : new Date(Number(us / 1000n)).toISOString();
}

/** Copy/sync progress rows idle for the retention that nothing reads back: sync runs, and copies of streams that no longer exist. */
export function expiredProgressRows(rows: readonly CheckpointRow[], idleIds: readonly string[]): string[] {
  const streams = new Set(rows.filter((r) => streamSourceNodeId(r.sourceId) !== undefined).map((r) => r.sourceId));
  return idleIds.filter((id) => {
    const hash = id.indexOf('#');
    if (hash < 0) return false;
    if (id.startsWith('sync:')) return true;
    // A direction's copy progress says its tables were copied: kept while the direction exists, or its next start would copy again.
    return !streams.has(id.slice(0, hash));
  });
}

async function inTransaction<T>(conn: Connection, work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    await conn.query('BEGIN');
    try {
      const out = await work();
      await conn.query('COMMIT');
      return out;
    } catch (err) {
      await conn.query('ROLLBACK').catch(() => undefined);
      if (attempt < 3 && isRetryable(err)) continue;
      throw err;
    }
  }
}

class NodeCollector {
  constructor(
    private readonly conn: Connection,
    private readonly o: Required<Pick<GcOptions, 'metaSchema' | 'batchRows' | 'dryRun'>>,
    private readonly report: GcNodeReport,
  ) {}

  private async rows(stmt: { sql: string; values: unknown[] }): Promise<RowDataPacket[]> {
    const [rows] = await this.conn.query<RowDataPacket[]>(stmt.sql, stmt.values);
    return rows;
  }

  async tombstones(horizon: bigint | null): Promise<void> {
    const meta = this.o.metaSchema;
    for (const t of (await readRegisteredTables(this.conn, meta)) ?? []) {
      const [exists] = await this.conn.query<RowDataPacket[]>(TABLE_EXISTS_SQL, [meta, t.tombstoneTable]);
      if (exists.length === 0) continue;
      const count = (await this.rows(countTombstonesSql(meta, t.tombstoneTable, t.versionColumn, horizon)))[0]!;
      const entry: GcTableReport = { table: `${t.schema}.${t.table}`, tombstones: Number(count.total), collected: 0 };
      this.report.tables.push(entry);
      this.report.tombstones += entry.tombstones;
      if (horizon === null) continue;
      if (this.o.dryRun) entry.collected = Number(count.below);
      else if (Number(count.below) > 0) entry.collected = await this.collectTable(t.schema, t.table, t.tombstoneTable, t.versionColumn, horizon);
      this.report.collected += entry.collected;
      if (!this.o.dryRun) this.report.claimsRemoved += await this.collectClaims(t, horizon);
    }
  }

  /**
   * Claims of UNIQUE values below the horizon: a claim only decides against rows older than itself,
   * and no write below the horizon can still arrive anywhere (local writes are stamped above it).
   */
  private async collectClaims(t: { schema: string; table: string }, horizon: bigint): Promise<number> {
    let removed = 0;
    for (const claimTable of await claimTablesOf(this.conn, this.o.metaSchema, t)) {
      for (;;) {
        const [res] = await this.conn.query<ResultSetHeader>(deleteClaimsBelowSql(this.o.metaSchema, claimTable, this.o.batchRows), [horizon.toString()]);
        removed += res.affectedRows;
        if (res.affectedRows < this.o.batchRows) break;
      }
    }
    return removed;
  }

  private async collectTable(schema: string, table: string, tombstoneTable: string, versionColumn: string, horizon: bigint): Promise<number> {
    const meta = this.o.metaSchema;
    let tableMeta: TableMeta;
    try {
      tableMeta = await loadTableMeta(this.conn, schema, table, versionColumn);
    } catch (err) {
      if (err instanceof UnknownTableError) return 0;
      throw err;
    }
    const key: TypedColumn[] = tableMeta.primaryKey.map((k) => {
      const c = tableMeta.columns.find((col) => col.name === k)!;
      return { name: c.name, dataType: c.dataType, columnType: c.columnType };
    });
    let after: unknown[] | undefined;
    let removed = 0;
    for (;;) {
      const found = await this.rows(collectableTombstonesSql(meta, tombstoneTable, key, versionColumn, horizon, this.o.batchRows, after));
      if (found.length === 0) break;
      const keys = found.map((r) => key.map((k) => bindKeyValue(k, r[columnName(k)])));
      // Recorded as the highest version removed + 1: a tombstone below it may be gone (repair guards, state check).
      const highest = found.reduce((m, r) => {
        const v = BigInt(String(r[versionColumn]));
        return v > m ? v : m;
      }, 0n);
      removed += await inTransaction(this.conn, async () => {
        // The horizon is raised before any tombstone goes: a sink batch that read it (its checkpoint
        // statement, shared locks) holds this back until it commits, and a later batch waits for this
        // one and sees the new horizon (apply.ts guardCollectedHorizon); both take the locks in one order.
        const raise = recordCollectedSql(meta, schema, table, highest + 1n, 0);
        await this.conn.query(raise.sql, raise.values);
        const del = deleteTombstonesSql(meta, tombstoneTable, key, versionColumn, horizon, keys);
        const [res] = await this.conn.query<ResultSetHeader>(del.sql, del.values);
        if (res.affectedRows > 0) {
          const rec = recordCollectedSql(meta, schema, table, highest + 1n, res.affectedRows);
          await this.conn.query(rec.sql, rec.values);
        }
        return res.affectedRows;
      });
      if (found.length < this.o.batchRows) break;
      after = keys[keys.length - 1];
    }
    return removed;
  }

  async retention(retentionSeconds: number, checkpoints: readonly CheckpointRow[]): Promise<void> {
    const meta = this.o.metaSchema;
    if (this.o.dryRun) {
      this.report.conflictsRemoved = Number((await this.rows(countExpiredConflictsSql(meta, retentionSeconds)))[0]!.n);
    } else {
      for (;;) {
        const ids = (await this.rows(expiredConflictsSql(meta, retentionSeconds, this.o.batchRows))).map((r) => String(r.id));
        if (ids.length === 0) break;
        this.report.conflictsRemoved += await inTransaction(this.conn, async () => {
          const del = deleteConflictsSql(meta, ids, retentionSeconds);
          const [res] = await this.conn.query<ResultSetHeader>(del.sql, del.values);
          return res.affectedRows;
        });
        if (ids.length < this.o.batchRows) break;
      }
    }
    const idle = (await this.rows(idleProgressRowsSql(meta, retentionSeconds))).map((r) => String(r.source_id));
    const expired = expiredProgressRows(checkpoints, idle);
    if (this.o.dryRun) {
      this.report.progressRowsRemoved = expired.length;
      return;
    }
    for (let i = 0; i < expired.length; i += this.o.batchRows) {
      const part = expired.slice(i, i + this.o.batchRows);
      this.report.progressRowsRemoved += await inTransaction(this.conn, async () => {
        const del = deleteProgressRowsSql(meta, part, retentionSeconds);
        const [res] = await this.conn.query<ResultSetHeader>(del.sql, del.values);
        return res.affectedRows;
      });
    }
  }
}

/** Refuses options a pass could not run with (the scheduler checks them once, at start). */
export function validateGcOptions(o: GcOptions): void {
  if (o.nodes.length < 2) throw new InvalidOptionsError(`GC needs every node of the mesh, at least two (got ${o.nodes.length})`);
  for (const [name, v] of [
    ['marginMs', o.marginMs],
    ['retentionMs', o.retentionMs],
  ] as const) {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) throw new InvalidOptionsError(`${name} must be a non-negative integer of milliseconds (got ${v})`);
  }
  if (o.batchRows !== undefined && (!Number.isSafeInteger(o.batchRows) || o.batchRows < 1 || o.batchRows > 10_000)) {
    throw new InvalidOptionsError(`batchRows must be an integer in 1..10000 (got ${o.batchRows})`);
  }
}

/** One GC pass over every node (see the header comment). Never throws for a node's failure: it is in the report. */
export async function collectGarbage(options: GcOptions): Promise<GcReport> {
  validateGcOptions(options);
  const started = Date.now();
  const metaSchema = options.metaSchema ?? 'lww_meta';
  const marginMs = options.marginMs ?? DEFAULT_GC_MARGIN_MS;
  const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
  const dryRun = options.dryRun ?? false;
  const log = options.logger ?? silentLogger;
  const names = options.nodes.map((_, i) => `n${i + 1}`);
  const conns: Array<Connection | undefined> = [];
  try {
    const observed: NodeObservation[] = [];
    const rows: CheckpointRow[][] = [];
    for (const [i, url] of options.nodes.entries()) {
      try {
        const conn = await connect(url, { connectTimeoutMs: options.connectTimeoutMs ?? 5000 });
        conns[i] = conn;
        const o = await observeNode(conn, names[i]!, metaSchema);
        rows[i] = o.rows;
        observed.push({ name: o.name, nodeId: o.nodeId, reachable: true, nowUs: o.nowUs, checkpoints: o.checkpoints });
      } catch (err) {
        rows[i] = [];
        observed.push({ name: names[i]!, reachable: false, error: describe(err) });
      }
    }
    const horizons = computeHorizons(observed, BigInt(marginMs) * 1000n);
    const report: GcReport = { dryRun, marginMs, retentionMs, paused: horizons.paused, directions: horizons.directions, nodes: [], seconds: 0 };
    for (const [i, url] of options.nodes.entries()) {
      const h = horizons.nodes[i]!;
      const node: GcNodeReport = {
        name: h.name,
        url: redactUrl(url),
        nodeId: h.nodeId,
        reachable: conns[i] !== undefined && observed[i]!.reachable,
        horizon: h.horizon,
        horizonTime: isoOf(h.horizonTimeUs),
        ...(h.heldBy ? { heldBy: h.heldBy } : {}),
        tables: [],
        tombstones: 0,
        collected: 0,
        conflictsRemoved: 0,
        claimsRemoved: 0,
        progressRowsRemoved: 0,
      };
      report.nodes.push(node);
      const conn = conns[i];
      if (!conn || !node.reachable) {
        node.error = (observed[i] as { error?: string }).error ?? 'not reached';
        continue;
      }
      const collector = new NodeCollector(conn, { metaSchema, batchRows: options.batchRows ?? DEFAULT_GC_BATCH_ROWS, dryRun }, node);
      // The retentions do not depend on the tombstones: a failure of one does not skip the other.
      for (const step of [() => collector.tombstones(h.horizon), () => collector.retention(Math.floor(retentionMs / 1000), rows[i]!)]) {
        try {
          await step();
        } catch (err) {
          node.error = [node.error, describe(err)].filter(Boolean).join('; ');
          log.warn(`gc: ${node.name}: ${describe(err)}`);
        }
      }
    }
    report.seconds = (Date.now() - started) / 1000;
    return report;
  } finally {
    await Promise.allSettled(conns.map((c) => c?.end()));
  }
}

/** The human summary of a pass. */
export function formatGcReport(r: GcReport): string {
  const out: string[] = [
    `${r.dryRun ? 'Dry run: nothing written. ' : ''}Tombstone GC (margin ${Math.round(r.marginMs / 1000)} s, retention ${Math.round(r.retentionMs / 1000)} s)`,
  ];
  if (r.paused.length > 0) out.push('GC paused (nothing is guessed):', ...r.paused.map((p) => `  - ${p}`));
  out.push('', 'progress per direction (source time applied on the target):');
  for (const d of r.directions) {
    out.push(`  ${d.name}: ${d.sourceTimeUs === undefined ? 'unknown' : `${isoOf(d.sourceTimeUs)}${d.lagMs === undefined ? '' : ` (${(d.lagMs / 1000).toFixed(1)} s behind)`}`}`);
  }
  out.push('', 'per node:');
  for (const n of r.nodes) {
    const horizon = n.horizon === null ? 'paused' : `${n.horizonTime} (version < ${n.horizon}; held by ${n.heldBy})`;
    out.push(`  ${n.name} ${n.url}: horizon ${horizon}`);
    out.push(
      `    tombstones ${n.tombstones}, ${r.dryRun ? 'would remove' : 'removed'} ${n.collected}; UNIQUE claims removed ${n.claimsRemoved}; conflict-log rows ${r.dryRun ? 'would remove' : 'removed'} ${n.conflictsRemoved}; progress rows ${n.progressRowsRemoved}`,
    );
    for (const t of n.tables) out.push(`      ${t.table}: ${t.tombstones} tombstones, ${t.collected} ${r.dryRun ? 'below the horizon' : 'removed'}`);
    if (n.error) out.push(`    error: ${n.error}`);
  }
  out.push('', `done in ${r.seconds.toFixed(1)} s`);
  return out.join('\n');
}
