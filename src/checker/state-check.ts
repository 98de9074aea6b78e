// The state check: are the nodes identical now? Table by table, in primary-key order, in chunks
// whose boundaries come from the first node (keyset, open-ended at both ends so keys that exist only
// on another node are covered). Every chunk's checksum is computed on the servers; rows are fetched
// only for chunks whose checksums differ, then compared in JS with the same normalization. The
// tombstone tables are compared the same way; each differing key is reported with its state on both
// sides (row, tombstone or absent), a class, and the node LWW says should win.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { connect, redactUrl } from '../db/connection.ts';
import { InvalidOptionsError, LwwError, UnknownTableError } from '../errors.ts';
import { tombstoneTableName } from '../model/names.ts';
import type { TableMeta } from '../model/table.ts';
import {
  type ChunkTarget,
  chunkBoundarySql,
  chunkChecksumSql,
  chunkRowsSql,
  type KeyColumn,
  keyRangeParams,
  MARIADB_JSON_CHECKS_SQL,
  rowsByKeySql,
} from '../sql/checksum.ts';
import { type Logger, silentLogger } from '../writer/options.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { canonicalValue, classify, compareKeys, effectiveState, keyParam, lwwWinner, sameState, type ValueColumn } from './compare-values.ts';
import { emptyCounts, findingCount, nodeLabel, type StateReport, type TableStateReport } from './report.ts';
import { type RegisteredTable, readRegisteredTables } from './registry.ts';

export interface CheckStateOptions {
  /** Connection URLs of the nodes, at least two; every node is compared with the first. */
  nodes: string[];
  /** `schema.table` names; default: every table registered in `<metaSchema>.tables` on the first node. */
  tables?: string[];
  metaSchema?: string;
  /** Version column of tables not registered in `<metaSchema>.tables`. */
  versionColumn?: string;
  /** Rows per chunk (by the first node's keys). */
  chunkSize?: number;
  /** Findings kept per table (all are counted). */
  maxFindings?: number;
  connectTimeoutMs?: number;
  /** Per statement; a chunk checksum reads chunkSize rows. */
  queryTimeoutMs?: number;
  logger?: Logger;
}

/** A node that cannot be reached or queried; names the node (password redacted). */
export class CheckerNodeError extends LwwError {
  constructor(
    readonly node: number,
    readonly url: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`node ${nodeLabel(node)} (${url}): ${reason}`, options);
  }
}

/** A table the state check cannot compare reliably, with the reason. */
export class UncheckableTableError extends LwwError {
  constructor(
    readonly schema: string,
    readonly table: string,
    reason: string,
  ) {
    super(`table ${schema}.${table} cannot be checked: ${reason}`);
  }
}

interface NodeSession {
  index: number;
  url: string;
  conn: Connection;
  mariadb: boolean;
  /** JSON_NORMALIZE exists (MariaDB >= 10.7). */
  jsonNormalize: boolean;
}

type TableEntry = RegisteredTable;

/** One table (data or tombstone) as compared on every node. */
interface Side {
  target: ChunkTarget;
  /** Per node: undefined when the table does not exist there (compared as empty). */
  columns: Array<ValueColumn[] | undefined>;
  /** Common column names in the first node's order (what is read and checksummed). */
  names: string[];
  keyNames: string[];
  valueNames: string[];
  versionColumn: string;
}

interface FetchedRow {
  keyText: string;
  key: Record<string, string | null>;
  /** Bound parameters that find this key again. */
  params: unknown[];
  version: bigint;
  values: Record<string, string | null>;
}

type RowMap = Map<string, FetchedRow>;

interface Checksum {
  text: string;
  count: number;
}

interface TableStats {
  chunks: number;
  differing: number;
}

const UNORDERED_KEY_TYPES = new Set(['enum', 'set']);
const LOOKUP_BATCH = 500;

function sameRow(a: FetchedRow | undefined, b: FetchedRow | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.version !== b.version) return false;
  for (const k of Object.keys(a.values)) if (a.values[k] !== b.values[k]) return false;
  return true;
}

/** A column type without the integer display width MariaDB and old MySQL show (int(11) = int). */
function typeName(columnType: string): string {
  return columnType.toLowerCase().replace(/^(tinyint|smallint|mediumint|int|integer|bigint|year)\(\d+\)/, '$1');
}

function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: string }).code;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message || code || String(err);
  }
  return String(err);
}

/** Splits `schema.table` at the first dot. */
export function parseTableName(name: string): { schema: string; table: string } {
  const dot = name.indexOf('.');
  if (dot <= 0 || dot === name.length - 1) throw new InvalidOptionsError(`table "${name}" must be given as schema.table`);
  return { schema: name.slice(0, dot), table: name.slice(dot + 1) };
}

class StateChecker {
  private readonly metaSchema: string;
  private readonly versionColumn: string;
  private readonly chunkSize: number;
  private readonly maxFindings: number;
  private readonly queryTimeoutMs: number;
  private readonly logger: Logger;

  constructor(
    private readonly sessions: NodeSession[],
    /** A second connection to the first node: the next chunk boundary is read while a chunk is checksummed. */
    private readonly boundaryConn: Connection,
    options: CheckStateOptions,
  ) {
    this.metaSchema = options.metaSchema ?? 'lww_meta';
    this.versionColumn = options.versionColumn ?? '_lww_ts';
    this.chunkSize = options.chunkSize ?? 10_000;
    this.maxFindings = options.maxFindings ?? 10_000;
    this.queryTimeoutMs = options.queryTimeoutMs ?? 600_000;
    this.logger = options.logger ?? silentLogger;
  }

  private async query(node: number, sql: string, values: unknown[] = [], conn?: Connection): Promise<RowDataPacket[]> {
    const session = this.sessions[node]!;
    try {
      const [rows] = await (conn ?? session.conn).query<RowDataPacket[]>({ sql, values, timeout: this.queryTimeoutMs });
      return rows;
    } catch (err) {
      throw new CheckerNodeError(node, session.url, describeError(err), { cause: err });
    }
  }

  async resolveTables(names: string[] | undefined): Promise<TableEntry[]> {
    let registered: TableEntry[] | undefined;
    try {
      registered = await readRegisteredTables(this.sessions[0]!.conn, this.metaSchema);
    } catch (err) {
      throw new CheckerNodeError(0, this.sessions[0]!.url, describeError(err), { cause: err });
    }
    if (names === undefined) {
      if (!registered || registered.length === 0) {
        throw new InvalidOptionsError(
          `no tables are registered in ${this.metaSchema}.tables on node A (run install, or name the tables to check with --tables schema.table,...)`,
        );
      }
      return registered;
    }
    return names.map((name) => {
      const { schema, table } = parseTableName(name);
      return (
        registered?.find((r) => r.schema === schema && r.table === table) ?? {
          schema,
          table,
          tombstoneTable: tombstoneTableName(schema, table),
          versionColumn: this.versionColumn,
        }
      );
    });
  }

  /** The table's metadata on one node (undefined when it does not exist there), JSON columns marked. */
  private async describe(node: number, schema: string, table: string, versionColumn: string): Promise<{ meta: TableMeta; columns: ValueColumn[] } | undefined> {
    const session = this.sessions[node]!;
    let meta: TableMeta;
    try {
      meta = await loadTableMeta(session.conn, schema, table, versionColumn);
    } catch (err) {
      if (err instanceof UnknownTableError) return undefined;
      if (err instanceof LwwError) throw new CheckerNodeError(node, session.url, err.message, { cause: err });
      throw new CheckerNodeError(node, session.url, describeError(err), { cause: err });
    }
    const jsonColumns = new Set<string>();
    if (session.mariadb) {
      for (const r of await this.query(node, MARIADB_JSON_CHECKS_SQL, [schema, table])) {
        if (/^json_valid\(`.*`\)$/i.test(String(r.clause))) jsonColumns.add(String(r.name));
      }
    }
    const columns = meta.columns.map((c) => ({
      name: c.name,
      dataType: c.dataType,
      columnType: c.columnType,
      json: c.dataType === 'json' || jsonColumns.has(c.name),
    }));
    return { meta, columns };
  }

  async checkTable(entry: TableEntry): Promise<TableStateReport> {
    const name = `${entry.schema}.${entry.table}`;
    const report: TableStateReport = {
      table: name,
      tombstoneTable: `${this.metaSchema}.${entry.tombstoneTable}`,
      chunks: 0,
      chunksDiffering: 0,
      tombstoneChunks: 0,
      tombstoneChunksDiffering: 0,
      rowsFetched: 0,
      counts: emptyCounts(),
      findings: [],
      findingsTruncated: false,
      schemaDifferences: [],
      notes: [],
    };
    const nodes = this.sessions.map((s) => s.index);
    const described = await Promise.all(nodes.map((i) => this.describe(i, entry.schema, entry.table, entry.versionColumn)));
    const missing = nodes.filter((i) => !described[i]);
    if (missing.length > 0) {
      report.schemaDifferences.push(`table does not exist on node ${missing.map(nodeLabel).join(', ')}`);
      return report;
    }
    const metas = described.map((d) => d!);
    const keyNames = metas[0]!.meta.primaryKey;
    for (const i of nodes.slice(1)) {
      if (metas[i]!.meta.primaryKey.join('\u0000') !== keyNames.join('\u0000')) {
        report.schemaDifferences.push(
          `primary key is (${keyNames.join(', ')}) on node A but (${metas[i]!.meta.primaryKey.join(', ')}) on node ${nodeLabel(i)}`,
        );
      }
    }
    if (report.schemaDifferences.length > 0) return report;
    for (const k of keyNames) {
      const col = metas[0]!.columns.find((c) => c.name === k)!;
      if (UNORDERED_KEY_TYPES.has(col.dataType)) {
        throw new UncheckableTableError(entry.schema, entry.table, `primary-key column ${k} is ${col.dataType.toUpperCase()}: its sort order differs from its comparison order`);
      }
    }
    const names = this.commonColumns(metas.map((m) => m.columns), report);
    const dataSide = this.side(entry.schema, entry.table, metas.map((m) => m.columns), names, keyNames, entry.versionColumn);

    const tombMetas = await Promise.all(nodes.map((i) => this.describe(i, this.metaSchema, entry.tombstoneTable, entry.versionColumn)));
    const tombSide = tombMetas.some(Boolean)
      ? this.side(
          this.metaSchema,
          entry.tombstoneTable,
          tombMetas.map((m) => m?.columns),
          [...keyNames, entry.versionColumn],
          keyNames,
          entry.versionColumn,
          tombMetas.find(Boolean)!.columns,
        )
      : undefined;

    const addFinding = (key: FetchedRow, i: number, a: ReturnType<typeof effectiveState>, b: ReturnType<typeof effectiveState>) => {
      if (sameState(a, b)) return;
      const cls = classify(a, b);
      report.counts[cls]++;
      if (report.findings.length >= this.maxFindings) {
        report.findingsTruncated = true;
        return;
      }
      const w = lwwWinner(a, b);
      report.findings.push({ table: name, key: key.key, nodes: [0, i], states: [a, b], class: cls, winner: w === null ? null : w === 'a' ? 0 : i });
    };

    const dataStats: TableStats = { chunks: 0, differing: 0 };
    await this.compareSide(dataSide, dataStats, report, async (maps, differing) => {
      // Keys whose rows differ between the reference and a node; their tombstones decide the state.
      const candidates = new Map<string, { row: FetchedRow; pairs: number[] }>();
      for (const i of differing) {
        for (const k of new Set([...maps[0]!.keys(), ...maps[i]!.keys()])) {
          const a = maps[0]!.get(k);
          const b = maps[i]!.get(k);
          if (sameRow(a, b)) continue;
          const c = candidates.get(k) ?? { row: (a ?? b)!, pairs: [] };
          c.pairs.push(i);
          candidates.set(k, c);
        }
      }
      if (candidates.size === 0) return;
      const keys = [...candidates.values()].map((c) => c.row);
      const tombs = tombSide ? await this.lookup(tombSide, [0, ...differing], keys, report) : [];
      for (const [k, c] of candidates) {
        for (const i of c.pairs) {
          const a = effectiveState(maps[0]!.get(k), tombs[0]?.get(k)?.version);
          const b = effectiveState(maps[i]!.get(k), tombs[i]?.get(k)?.version);
          addFinding(c.row, i, a, b);
        }
      }
    });
    report.chunks = dataStats.chunks;
    report.chunksDiffering = dataStats.differing;

    if (tombSide) {
      const tombStats: TableStats = { chunks: 0, differing: 0 };
      await this.compareSide(tombSide, tombStats, report, async (maps, differing) => {
        const candidates = new Map<string, { row: FetchedRow; pairs: number[] }>();
        for (const i of differing) {
          for (const k of new Set([...maps[0]!.keys(), ...maps[i]!.keys()])) {
            const a = maps[0]!.get(k);
            const b = maps[i]!.get(k);
            if (a?.version === b?.version) continue;
            const c = candidates.get(k) ?? { row: (a ?? b)!, pairs: [] };
            c.pairs.push(i);
            candidates.set(k, c);
          }
        }
        if (candidates.size === 0) return;
        const rows = await this.lookup(dataSide, [0, ...differing], [...candidates.values()].map((c) => c.row), report);
        for (const [k, c] of candidates) {
          for (const i of c.pairs) {
            // Keys whose rows differ were reported with the table's chunks.
            if (!sameRow(rows[0]!.get(k), rows[i]!.get(k))) continue;
            const a = effectiveState(rows[0]!.get(k), maps[0]!.get(k)?.version);
            const b = effectiveState(rows[i]!.get(k), maps[i]!.get(k)?.version);
            addFinding(c.row, i, a, b);
          }
        }
      });
      report.tombstoneChunks = tombStats.chunks;
      report.tombstoneChunksDiffering = tombStats.differing;
    }
    // Row and tombstone findings interleaved in key order, for a readable report.
    report.findings.sort((x, y) => compareKeys(Object.values(x.key), Object.values(y.key)) || x.nodes[1] - y.nodes[1]);
    this.logger.info('state check: table compared', {
      table: name,
      chunks: report.chunks,
      chunksDiffering: report.chunksDiffering,
      rowsFetched: report.rowsFetched,
      findings: findingCount(report),
    });
    return report;
  }

  /** Columns present on every node, in the first node's order; other differences go to the report. */
  private commonColumns(perNode: ValueColumn[][], report: TableStateReport): string[] {
    const first = perNode[0]!;
    const names = first.map((c) => c.name).filter((n) => perNode.every((cols) => cols.some((c) => c.name === n)));
    perNode.forEach((cols, i) => {
      if (i === 0) return;
      for (const c of first) {
        const other = cols.find((o) => o.name === c.name);
        if (!other) report.schemaDifferences.push(`column ${c.name} exists on node A but not on node ${nodeLabel(i)}`);
        else if (typeName(other.columnType) !== typeName(c.columnType) || other.json !== c.json) {
          report.notes.push(`column ${c.name} is ${c.columnType} on node A and ${other.columnType} on node ${nodeLabel(i)} (compared by value)`);
        }
      }
      for (const c of cols) {
        if (!first.some((f) => f.name === c.name)) report.schemaDifferences.push(`column ${c.name} exists on node ${nodeLabel(i)} but not on node A`);
      }
    });
    return names;
  }

  private side(
    schema: string,
    table: string,
    perNode: Array<ValueColumn[] | undefined>,
    names: string[],
    keyNames: string[],
    versionColumn: string,
    reference: ValueColumn[] = perNode[0]!,
  ): Side {
    const key: KeyColumn[] = keyNames.map((k) => {
      const c = reference.find((r) => r.name === k)!;
      return { name: c.name, dataType: c.dataType, columnType: c.columnType };
    });
    const pick = (cols: ValueColumn[] | undefined) => {
      if (!cols) return undefined;
      const picked = names.map((n) => cols.find((c) => c.name === n));
      const absent = names.filter((_, i) => !picked[i]);
      if (absent.length > 0) throw new UncheckableTableError(schema, table, `it lacks column(s) ${absent.join(', ')} on some node`);
      return picked as ValueColumn[];
    };
    return {
      target: { schema, table, key },
      columns: perNode.map(pick),
      names,
      keyNames,
      valueNames: names.filter((n) => n !== versionColumn && !keyNames.includes(n)),
      versionColumn,
    };
  }

  private parseRow(side: Side, node: number, raw: RowDataPacket): FetchedRow {
    const cols = side.columns[node]!;
    const byName = new Map(cols.map((c) => [c.name, c]));
    const keyValues = side.keyNames.map((k) => canonicalValue(byName.get(k)!, raw[k]));
    const key: Record<string, string | null> = {};
    side.keyNames.forEach((k, i) => {
      key[k] = keyValues[i]!;
    });
    const values: Record<string, string | null> = {};
    for (const n of side.valueNames) values[n] = canonicalValue(byName.get(n)!, raw[n]);
    return {
      keyText: JSON.stringify(keyValues),
      key,
      params: side.keyNames.map((k) => keyParam(byName.get(k)!, raw[k])),
      version: BigInt(String(raw[side.versionColumn])),
      values,
    };
  }

  private async checksum(side: Side, node: number, lower: unknown[] | undefined, upper: unknown[] | undefined): Promise<Checksum> {
    const cols = side.columns[node];
    if (!cols) return { text: '0/0/0', count: 0 };
    const session = this.sessions[node]!;
    const sql = chunkChecksumSql(side.target, cols, { lower: !!lower, upper: !!upper }, { jsonNormalize: session.jsonNormalize });
    const [r] = await this.query(node, sql, keyRangeParams(lower, upper));
    const count = Number(r!.row_count);
    return { text: `${count}/${r!.hash_hi ?? 0}/${r!.hash_lo ?? 0}`, count };
  }

  private async fetchRange(side: Side, node: number, lower: unknown[] | undefined, upper: unknown[] | undefined, report: TableStateReport): Promise<RowMap> {
    const map: RowMap = new Map();
    if (!side.columns[node]) return map;
    const sql = chunkRowsSql(side.target, side.names, { lower: !!lower, upper: !!upper });
    const rows = await this.query(node, sql, keyRangeParams(lower, upper));
    report.rowsFetched += rows.length;
    for (const raw of rows) {
      const row = this.parseRow(side, node, raw);
      map.set(row.keyText, row);
    }
    return map;
  }

  /** The rows of the given keys on the given nodes (index → map; other nodes undefined). */
  private async lookup(side: Side, nodes: number[], keys: FetchedRow[], report: TableStateReport): Promise<Array<RowMap | undefined>> {
    const out: Array<RowMap | undefined> = [];
    await Promise.all(
      nodes.map(async (node) => {
        const map: RowMap = new Map();
        out[node] = map;
        if (!side.columns[node]) return;
        for (let i = 0; i < keys.length; i += LOOKUP_BATCH) {
          const batch = keys.slice(i, i + LOOKUP_BATCH);
          const rows = await this.query(node, rowsByKeySql(side.target, side.names, batch.length), batch.flatMap((k) => k.params));
          report.rowsFetched += rows.length;
          for (const raw of rows) {
            const row = this.parseRow(side, node, raw);
            map.set(row.keyText, row);
          }
        }
      }),
    );
    return out;
  }

  /** The key ending the next chunk of `size` rows after `lower` (not past `upper`) on a node, or undefined. */
  private async boundary(side: Side, node: number, lower: unknown[] | undefined, upper: unknown[] | undefined, conn?: Connection): Promise<unknown[] | undefined> {
    const sql = chunkBoundarySql(side.target, { lower: !!lower, upper: !!upper });
    const rows = await this.query(node, sql, [...keyRangeParams(lower, upper), this.chunkSize - 1], conn);
    if (rows.length === 0) return undefined;
    const cols = side.columns[node]!;
    return side.keyNames.map((k) => keyParam(cols.find((c) => c.name === k)!, rows[0]![k]));
  }

  /**
   * Walks (lower, upper] in chunks bounded by `node`'s keys, comparing each (`whole`: the chunk is
   * the entire range). The next boundary is read while the current chunk is compared when a spare
   * connection is given.
   */
  private async walk(
    side: Side,
    node: number,
    lower: unknown[] | undefined,
    upper: unknown[] | undefined,
    visit: (lo: unknown[] | undefined, hi: unknown[] | undefined, whole: boolean) => Promise<void>,
    conn?: Connection,
  ): Promise<void> {
    let lo = lower;
    let next = this.boundary(side, node, lo, upper, conn);
    for (;;) {
      const b = await next;
      if (b === undefined) {
        await visit(lo, upper, lo === lower);
        return;
      }
      if (lo && JSON.stringify(b.map(String)) === JSON.stringify(lo.map(String))) {
        throw new UncheckableTableError(side.target.schema, side.target.table, 'its primary key does not advance in key order (a key type whose comparison and sort order differ)');
      }
      next = this.boundary(side, node, b, upper, conn);
      // Keep the prefetch from becoming an unhandled rejection if the chunk below fails first.
      next.catch(() => undefined);
      await visit(lo, b, false);
      lo = b;
    }
  }

  private async compareSide(
    side: Side,
    stats: TableStats,
    report: TableStateReport,
    onDiff: (maps: Array<RowMap | undefined>, differing: number[]) => Promise<void>,
  ): Promise<void> {
    const nodes = this.sessions.map((s) => s.index);
    const compareRange = async (lo: unknown[] | undefined, hi: unknown[] | undefined, maySplit: boolean): Promise<void> => {
      const sums = await Promise.all(nodes.map((i) => this.checksum(side, i, lo, hi)));
      stats.chunks++;
      const differing = nodes.filter((i) => i > 0 && sums[i]!.text !== sums[0]!.text);
      if (differing.length === 0) return;
      stats.differing++;
      this.logger.debug('state check: chunk differs', { table: `${side.target.schema}.${side.target.table}`, nodes: differing.map(nodeLabel) });
      // A chunk far larger on some node (keys missing on the first) is split by that node's keys.
      const involved = [0, ...differing];
      const largest = involved.reduce((best, i) => (sums[i]!.count > sums[best]!.count ? i : best), 0);
      if (maySplit && sums[largest]!.count > 2 * this.chunkSize) {
        // A range the split cannot narrow (rows vanished meanwhile) is read as it is.
        await this.walk(side, largest, lo, hi, (l, h, whole) => compareRange(l, h, !whole));
        return;
      }
      const maps: Array<RowMap | undefined> = [];
      await Promise.all(
        involved.map(async (i) => {
          maps[i] = await this.fetchRange(side, i, lo, hi, report);
        }),
      );
      await onDiff(maps, differing);
    };
    if (side.columns[0]) await this.walk(side, 0, undefined, undefined, (l, h) => compareRange(l, h, true), this.boundaryConn);
    else await compareRange(undefined, undefined, true);
  }
}

async function openNode(index: number, url: string, connectTimeoutMs: number): Promise<NodeSession> {
  const shown = redactUrl(url);
  let conn: Connection;
  try {
    conn = await connect(url, { connectTimeoutMs });
  } catch (err) {
    throw new CheckerNodeError(index, shown, `cannot connect: ${describeError(err)}`, { cause: err });
  }
  try {
    const [rows] = await conn.query<RowDataPacket[]>('SELECT VERSION() AS version');
    const version = String(rows[0]!.version);
    const mariadb = /mariadb/i.test(version);
    const m = /^(\d+)\.(\d+)/.exec(version);
    const jsonNormalize = mariadb && !!m && (Number(m[1]) > 10 || (Number(m[1]) === 10 && Number(m[2]) >= 7));
    return { index, url: shown, conn, mariadb, jsonNormalize };
  } catch (err) {
    conn.destroy();
    throw new CheckerNodeError(index, shown, describeError(err), { cause: err });
  }
}

function validate(options: CheckStateOptions): void {
  if (!Array.isArray(options.nodes) || options.nodes.length < 2) throw new InvalidOptionsError('the state check needs at least two nodes');
  const chunk = options.chunkSize ?? 10_000;
  if (!Number.isInteger(chunk) || chunk < 1) throw new InvalidOptionsError(`chunkSize must be a positive integer (got ${chunk})`);
  const max = options.maxFindings ?? 10_000;
  if (!Number.isInteger(max) || max < 0) throw new InvalidOptionsError(`maxFindings must be a non-negative integer (got ${max})`);
  for (const t of options.tables ?? []) parseTableName(t);
}

/** Compares every node with the first, table by table; see the header comment. */
export async function checkState(options: CheckStateOptions): Promise<StateReport> {
  validate(options);
  const started = Date.now();
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const opened = await Promise.allSettled(options.nodes.map((url, i) => openNode(i, url, connectTimeoutMs)));
  const sessions = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const conns: Connection[] = sessions.map((s) => s.conn);
  try {
    const failed = opened.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    let boundaryConn: Connection;
    try {
      boundaryConn = await connect(options.nodes[0]!, { connectTimeoutMs });
    } catch (err) {
      throw new CheckerNodeError(0, sessions[0]!.url, `cannot connect: ${describeError(err)}`, { cause: err });
    }
    conns.push(boundaryConn);
    const checker = new StateChecker(sessions, boundaryConn, options);
    const entries = await checker.resolveTables(options.tables);
    const tables: TableStateReport[] = [];
    for (const entry of entries) tables.push(await checker.checkTable(entry));
    const totals = {
      chunks: tables.reduce((s, t) => s + t.chunks + t.tombstoneChunks, 0),
      chunksDiffering: tables.reduce((s, t) => s + t.chunksDiffering + t.tombstoneChunksDiffering, 0),
      rowsFetched: tables.reduce((s, t) => s + t.rowsFetched, 0),
      findings: tables.reduce((s, t) => s + findingCount(t), 0),
    };
    return {
      nodes: sessions.map((s) => s.url),
      tables,
      identical: totals.findings === 0 && tables.every((t) => t.schemaDifferences.length === 0),
      totals,
      durationMs: Date.now() - started,
    };
  } finally {
    await Promise.allSettled(conns.map((c) => c.end()));
  }
}
