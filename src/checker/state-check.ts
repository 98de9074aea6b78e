// The state check: are the nodes identical now? Table by table (the union of every node's registry;
// registry differences fail the check), in primary-key order, in chunks whose boundaries come from
// the first node (keyset, open-ended at both ends so keys that exist only on another node are
// covered). Every chunk's checksum is computed on the servers from each column's exact value; rows
// are fetched only for chunks whose checksums differ, read as the same exact per-column text, and
// compared in JS. A differing chunk whose rows compare equal (twice) is an `unexplained_chunk`
// finding, never forgiven. The tombstone tables are compared the same way, and each tombstone chunk
// is joined with its table on every node to find rows still shown under an equal or newer tombstone.
// Each differing key is reported with its state on both sides (row, tombstone or absent), a class,
// and the node LWW says should win.
import { parseTableRef } from '../install/table-list.ts';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { connect, redactUrl } from '../db/connection.ts';
import { InvalidOptionsError, LwwError, UnknownTableError } from '../errors.ts';
import { tombstoneTableName } from '../model/names.ts';
import type { TableMeta } from '../model/table.ts';
import {
  ASKED_ALIAS,
  type ChunkTarget,
  chunkBoundarySql,
  chunkChecksumSql,
  chunkRowsSql,
  coveredRowsSql,
  type KeyColumn,
  keyParamAlias,
  keyRangeParams,
  MARIADB_JSON_CHECKS_SQL,
  termAlias,
  termRowsByKeySql,
  termRowsForEachKeySql,
  VERSION_ALIAS,
} from '../sql/checksum.ts';
import { BINARY_LOB_TYPES, bindKeyValue, TEXT_LOB_TYPES } from '../sql/column-read.ts';
import { type Logger, silentLogger } from '../writer/options.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { UNIQUE_KEY_PREFIXES_SQL } from '../sql/introspect.ts';
import { collectedBelow } from '../gc/state.ts';
import { classify, compareKeys, effectiveState, isCollectedTombstone, isFinding, lwwWinner, type ValueColumn } from './compare-values.ts';
import { schemaDifferences, type TableSchema } from './schema-compare.ts';
import { emptyCounts, findingCount, type NodeState, nodeLabel, type StateFinding, type StateReport, type TableStateReport } from './report.ts';
import { type RegisteredTable, readRegisteredTables } from './registry.ts';

export interface CheckStateOptions {
  /** Connection URLs of the nodes, at least two; every node is compared with the first. */
  nodes: string[];
  /** `schema.table` names; default: every table registered in `<metaSchema>.tables` on any node. */
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
}

interface TableEntry extends RegisteredTable {
  /** How the nodes' registries disagree about this table (each fails the check). */
  registryDifferences: string[];
}

/** One table (data or tombstone) as compared on every node. */
interface Side {
  target: ChunkTarget;
  /** Per node: undefined when the table does not exist there (compared as empty). */
  columns: Array<ValueColumn[] | undefined>;
  /** Common column names in the first node's order (what is checksummed). */
  names: string[];
  /** The names read as terms (all but the version column), in this order (termAlias). */
  termNames: string[];
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

/** A key range (lower, upper] as bound values; undefined = open. */
interface Range {
  lo: unknown[] | undefined;
  hi: unknown[] | undefined;
}

interface TableStats {
  chunks: number;
  differing: number;
}

const LOOKUP_BATCH = 500;
/** Keys per lookup statement (one SELECT per key, see termRowsForEachKeySql). */
const LOOKUP_PER_STATEMENT = 100;

function sameRow(a: FetchedRow | undefined, b: FetchedRow | undefined): boolean {
  if (!a || !b) return a === b;
  if (a.version !== b.version) return false;
  for (const k of Object.keys(a.values)) if (a.values[k] !== b.values[k]) return false;
  return true;
}

function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: string }).code;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message || code || String(err);
  }
  return String(err);
}

/** `schema.table`, split at the first dot, or backtick-quoted parts for names holding dots (install's parser). */
export function parseTableName(name: string): { schema: string; table: string } {
  return parseTableRef(name);
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

  /**
   * The tables to check: the named ones, else the union of every node's registry. Either way, a
   * table registered on some nodes but not others, or registered differently, is a difference.
   */
  async resolveTables(names: string[] | undefined): Promise<TableEntry[]> {
    const registries = await Promise.all(
      this.sessions.map(async (s) => {
        try {
          return await readRegisteredTables(s.conn, this.metaSchema);
        } catch (err) {
          throw new CheckerNodeError(s.index, s.url, describeError(err), { cause: err });
        }
      }),
    );
    const wanted =
      names?.map(parseTableName) ??
      [...new Map(registries.flatMap((r) => r ?? []).map((r) => [`${r.schema}.${r.table}`, { schema: r.schema, table: r.table }])).values()].sort(
        (x, y) => (x.schema === y.schema ? (x.table < y.table ? -1 : 1) : x.schema < y.schema ? -1 : 1),
      );
    if (wanted.length === 0) {
      throw new InvalidOptionsError(
        `no tables are registered in ${this.metaSchema}.tables on any node (run install, or name the tables to check with --tables schema.table,...)`,
      );
    }
    return wanted.map(({ schema, table }) => {
      const perNode = registries.map((r) => r?.find((e) => e.schema === schema && e.table === table));
      const first = perNode.find(Boolean);
      const registryDifferences: string[] = [];
      const registeredOn = perNode.flatMap((e, i) => (e ? [nodeLabel(i)] : []));
      if (first && registeredOn.length < perNode.length) {
        const missing = perNode.flatMap((e, i) => (e ? [] : [nodeLabel(i)]));
        registryDifferences.push(`registered in ${this.metaSchema}.tables on node ${registeredOn.join(', ')} but not on node ${missing.join(', ')}`);
      }
      perNode.forEach((e, i) => {
        if (!e || !first || e === first) return;
        if (e.tombstoneTable !== first.tombstoneTable || e.versionColumn !== first.versionColumn) {
          registryDifferences.push(
            `registered with tombstone table ${first.tombstoneTable} and version column ${first.versionColumn} on node ${registeredOn[0]}` +
              ` but ${e.tombstoneTable} and ${e.versionColumn} on node ${nodeLabel(i)}`,
          );
        }
      });
      return {
        schema,
        table,
        tombstoneTable: first?.tombstoneTable ?? tombstoneTableName(schema, table),
        versionColumn: first?.versionColumn ?? this.versionColumn,
        registryDifferences,
      };
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
      charset: c.charset,
    }));
    return { meta, columns };
  }

  /** A table's definition on one node as schema-compare.ts compares it: its columns and UNIQUE keys (prefix lengths included). */
  private async definition(node: number, meta: TableMeta): Promise<TableSchema> {
    const parts = new Map<string, string[]>();
    for (const r of await this.query(node, UNIQUE_KEY_PREFIXES_SQL, [meta.schema, meta.table])) {
      const name = String(r.indexName);
      parts.set(name, [...(parts.get(name) ?? []), r.prefix === null || r.prefix === undefined ? String(r.columnName) : `${r.columnName}(${r.prefix})`]);
    }
    return { columns: meta.columns, uniqueKeys: [...parts.values()] };
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
      schemaDifferences: entry.registryDifferences.map((d) => `registry: ${d}`),
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
    const otherKeys = nodes.slice(1).filter((i) => metas[i]!.meta.primaryKey.join('\u0000') !== keyNames.join('\u0000'));
    for (const i of otherKeys) {
      report.schemaDifferences.push(`primary key is (${keyNames.join(', ')}) on node A but (${metas[i]!.meta.primaryKey.join(', ')}) on node ${nodeLabel(i)}`);
    }
    if (otherKeys.length > 0) return report;
    const names = this.commonColumns(metas.map((m) => m.columns), report);
    report.schemaDifferences.push(...schemaDifferences(await Promise.all(nodes.map((i) => this.definition(i, metas[i]!.meta))), nodeLabel));
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

    const reported = new Set<string>();
    const push = (finding: Omit<StateFinding, 'table'>) => {
      report.counts[finding.class]++;
      if (report.findings.length >= this.maxFindings) {
        report.findingsTruncated = true;
        return;
      }
      report.findings.push({ table: name, ...finding });
    };
    /** Reports the pair (A, node i) for a key once, when it is a finding. */
    const judge = (key: FetchedRow, i: number, a: NodeState, b: NodeState) => {
      if (!isFinding(a, b)) return;
      const id = `${key.keyText}\u0000${i}`;
      if (reported.has(id)) return;
      reported.add(id);
      const w = lwwWinner(a, b);
      push({ key: key.key, nodes: [0, i], states: [a, b], class: classify(a, b), winner: w === null ? null : w === 'a' ? 0 : i });
    };
    const unexplained = (side: Side, range: Range, i: number, a: Checksum, b: Checksum) => {
      const key: Record<string, string> = {};
      side.target.key.forEach((c, j) => {
        key[c.name] = `(${range.lo ? boundText(range.lo[j]) : 'start'}, ${range.hi ? boundText(range.hi[j]) : 'end'}]`;
      });
      const states: [NodeState, NodeState] = [
        { kind: 'chunk', rows: a.count, checksum: a.text },
        { kind: 'chunk', rows: b.count, checksum: b.text },
      ];
      push({ key, nodes: [0, i], states, class: 'unexplained_chunk', winner: null });
    };
    // Each node's collected GC horizon for the table, read when a tombstone-vs-absent key needs it and
    // read again once when it does not explain one (a GC pass may have run since).
    const collected: Array<bigint | undefined> = [];
    let collectedTombstones = 0;
    const collectedOf = async (i: number, fresh: boolean) => {
      if (fresh || collected[i] === undefined) {
        try {
          collected[i] = await collectedBelow(this.sessions[i]!.conn, this.metaSchema, entry.schema, entry.table);
        } catch (err) {
          throw new CheckerNodeError(i, this.sessions[i]!.url, describeError(err), { cause: err });
        }
      }
      return collected[i]!;
    };
    const explainedByGc = async (i: number, a: NodeState, b: NodeState) => {
      if (!isCollectedTombstone(a, b, 1n << 64n, 1n << 64n)) return false;
      for (const fresh of [false, true]) {
        if (isCollectedTombstone(a, b, await collectedOf(0, fresh), await collectedOf(i, fresh))) return true;
      }
      return false;
    };
    /** Judges keys on nodes A and `others` from their rows and tombstones (looked up when not given). */
    const judgeKeys = async (keys: Map<string, { row: FetchedRow; pairs: number[] }>, others: number[], rows?: Array<RowMap | undefined>, tombs?: Array<RowMap | undefined>) => {
      if (keys.size === 0) return;
      const list = [...keys.values()].map((c) => c.row);
      rows ??= await this.lookup(dataSide, [0, ...others], list, report);
      tombs ??= tombSide ? await this.lookup(tombSide, [0, ...others], list, report) : [];
      // Spellings of one key ('alpha' on one node, 'ALPHA' on another) that found the same stored
      // rows and tombstones are one key: judged once.
      const seen = new Set<string>();
      for (const [k, c] of keys) {
        const stored = [0, ...others].flatMap((n) => [rows[n]?.get(k)?.keyText ?? null, tombs[n]?.get(k)?.keyText ?? null]);
        const found = stored.some((t) => t !== null) ? JSON.stringify(stored) : k;
        for (const i of c.pairs) {
          if (seen.has(`${i}:${found}`)) continue;
          seen.add(`${i}:${found}`);
          const [ra, rb] = spelled(rows[0]?.get(k), rows[i]?.get(k));
          const a = effectiveState(ra, tombs[0]?.get(k)?.version);
          const b = effectiveState(rb, tombs[i]?.get(k)?.version);
          if (await explainedByGc(i, a, b)) collectedTombstones++;
          else judge(c.row, i, a, b);
        }
      }
    };
    /** Keys whose reads differ between A and a differing node; the nodes with at least one. */
    const differingKeys = (maps: Array<RowMap | undefined>, differing: number[], same: (a: FetchedRow | undefined, b: FetchedRow | undefined) => boolean) => {
      const keys = new Map<string, { row: FetchedRow; pairs: number[] }>();
      const explained = new Set<number>();
      for (const i of differing) {
        for (const k of new Set([...maps[0]!.keys(), ...maps[i]!.keys()])) {
          const a = maps[0]!.get(k);
          const b = maps[i]!.get(k);
          if (same(a, b)) continue;
          const c = keys.get(k) ?? { row: (a ?? b)!, pairs: [] };
          c.pairs.push(i);
          keys.set(k, c);
          explained.add(i);
        }
      }
      return { keys, explained };
    };

    // Keys with a string or floating-point part can be one key in two spellings (a collation, -0 and 0).
    const spellable = dataSide.target.key.some((c) => SPELLABLE_KEY_TYPES.has(c.dataType));
    const dataStats: TableStats = { chunks: 0, differing: 0 };
    await this.compareSide(dataSide, dataStats, report, {
      onDiff: async (maps, differing) => {
        const { keys, explained } = differingKeys(maps, differing, sameRow);
        // A key one node's chunk lacks may be there spelled otherwise ('a' and 'A' under a _ci
        // collation, 'a' and 'a ' under PAD SPACE): looked up by key, it is one key, not a row
        // missing on each side. Keys both chunks hold are judged from the chunks.
        if (!spellable) {
          await judgeKeys(keys, differing, maps);
          return explained;
        }
        const inBoth = new Map<string, { row: FetchedRow; pairs: number[] }>();
        const onOneSide = new Map<string, { row: FetchedRow; pairs: number[] }>();
        for (const [k, c] of keys) (c.pairs.every((i) => maps[0]!.has(k) && maps[i]!.has(k)) ? inBoth : onOneSide).set(k, c);
        await judgeKeys(inBoth, differing, maps);
        await judgeKeys(onOneSide, differing);
        return explained;
      },
      onUnexplained: (range, i, a, b) => unexplained(dataSide, range, i, a, b),
    });
    report.chunks = dataStats.chunks;
    report.chunksDiffering = dataStats.differing;

    if (tombSide) {
      const tombStats: TableStats = { chunks: 0, differing: 0 };
      await this.compareSide(tombSide, tombStats, report, {
        onDiff: async (maps, differing) => {
          // Tombstones that differ; a stale one below its row's version explains the chunk but is no finding.
          const { keys, explained } = differingKeys(maps, differing, (a, b) => a?.version === b?.version);
          // Tombstones looked up by key, not taken from the chunk: a node's tombstone may spell the key
          // otherwise (the chunk maps hold exact spellings).
          await judgeKeys(keys, differing);
          return explained;
        },
        onUnexplained: (range, i, a, b) => unexplained(tombSide, range, i, a, b),
        // Rows shown under an equal or newer tombstone, on any node, whether or not the nodes agree.
        onChunk: async (range) => {
          const covered = await Promise.all(nodes.map((i) => this.coveredRows(tombSide, dataSide, i, range)));
          const keys = new Map<string, { row: FetchedRow; pairs: number[] }>();
          for (const row of covered.flat()) keys.set(row.keyText, { row, pairs: nodes.slice(1) });
          await judgeKeys(keys, nodes.slice(1));
        },
      });
      report.tombstoneChunks = tombStats.chunks;
      report.tombstoneChunksDiffering = tombStats.differing;
    }
    if (collectedTombstones > 0) {
      report.notes.push(`${collectedTombstones} tombstone(s) held on one node were already garbage-collected on another (below its GC horizon): not a divergence`);
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
        // Other attributes: schema-compare.ts. MariaDB's JSON is a LONGTEXT with a json_valid() check.
        else if (other.json !== c.json) report.schemaDifferences.push(`column ${c.name} is ${c.json ? '' : 'not '}JSON on node A, ${other.json ? '' : 'not '}JSON on node ${nodeLabel(i)}`);
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
      columns: alikeLargeValues(perNode.map(pick), keyNames),
      names,
      termNames: names.filter((n) => n !== versionColumn),
      keyNames,
      valueNames: names.filter((n) => n !== versionColumn && !keyNames.includes(n)),
      versionColumn,
    };
  }

  /** The compared columns of a side on a node, version column excluded (termNames' order). */
  private termColumns(side: Side, node: number): ValueColumn[] {
    return side.columns[node]!.filter((c) => c.name !== side.versionColumn);
  }

  private parseRow(side: Side, raw: RowDataPacket): FetchedRow {
    const terms = new Map(side.termNames.map((n, j) => [n, termText(raw[termAlias(j)])]));
    const key: Record<string, string | null> = {};
    for (const k of side.keyNames) key[k] = terms.get(k) ?? null;
    const values: Record<string, string | null> = {};
    for (const n of side.valueNames) values[n] = terms.get(n) ?? null;
    return {
      keyText: JSON.stringify(side.keyNames.map((k) => key[k])),
      key,
      params: side.target.key.map((c, i) => bindKeyValue(c, raw[keyParamAlias(i)])),
      version: BigInt(String(raw[VERSION_ALIAS])),
      values,
    };
  }

  private async checksum(side: Side, node: number, range: Range): Promise<Checksum> {
    const cols = side.columns[node];
    if (!cols) return { text: '0/0/0', count: 0 };
    const sql = chunkChecksumSql(side.target, cols, { lower: !!range.lo, upper: !!range.hi });
    const [r] = await this.query(node, sql, keyRangeParams(range.lo, range.hi));
    const unhashable = Number(r!.unhashable ?? 0);
    if (unhashable > 0) {
      throw new UncheckableTableError(
        side.target.schema,
        side.target.table,
        `on node ${nodeLabel(node)} (${this.sessions[node]!.url}), ${unhashable} row(s) after ${range.lo ? JSON.stringify(range.lo.map(boundText)) : 'the start'}` +
          ' could not be hashed (a column value hashed to NULL; is a value longer than max_allowed_packet? raise it on that node)',
      );
    }
    const count = Number(r!.row_count);
    return { text: `${count}/${r!.hash_hi ?? 0}/${r!.hash_lo ?? 0}`, count };
  }

  private async fetchRange(side: Side, node: number, range: Range, report: TableStateReport): Promise<RowMap> {
    const map: RowMap = new Map();
    if (!side.columns[node]) return map;
    const sql = chunkRowsSql(side.target, this.termColumns(side, node), side.versionColumn, { lower: !!range.lo, upper: !!range.hi });
    const rows = await this.query(node, sql, keyRangeParams(range.lo, range.hi));
    report.rowsFetched += rows.length;
    for (const raw of rows) {
      const row = this.parseRow(side, raw);
      map.set(row.keyText, row);
    }
    return map;
  }

  /**
   * The rows of the given keys on the given nodes (index → map; other nodes undefined), each under
   * the asked key's text: the stored row may spell the key differently where the server calls the
   * spellings one key (a tombstone 'alpha' beside the row 'ALPHA' under a case-insensitive collation).
   */
  private async lookup(side: Side, nodes: number[], keys: FetchedRow[], report: TableStateReport): Promise<Array<RowMap | undefined>> {
    const out: Array<RowMap | undefined> = [];
    await Promise.all(
      nodes.map(async (node) => {
        const map: RowMap = new Map();
        out[node] = map;
        if (!side.columns[node]) return;
        for (let i = 0; i < keys.length; i += LOOKUP_PER_STATEMENT) {
          const batch = keys.slice(i, i + LOOKUP_PER_STATEMENT);
          const sql = termRowsForEachKeySql(side.target, this.termColumns(side, node), side.versionColumn, batch.length);
          const rows = await this.query(node, sql, batch.flatMap((k) => k.params));
          report.rowsFetched += rows.length;
          for (const raw of rows) map.set(batch[Number(raw[ASKED_ALIAS])]!.keyText, this.parseRow(side, raw));
        }
      }),
    );
    return out;
  }

  /** Keys of a tombstone range whose row a node still shows at or below the tombstone's version, as rows to look up. */
  private async coveredRows(tombs: Side, data: Side, node: number, range: Range): Promise<FetchedRow[]> {
    if (!tombs.columns[node]) return [];
    const sql = coveredRowsSql(tombs.target, data.target, tombs.versionColumn, { lower: !!range.lo, upper: !!range.hi });
    const rows = await this.query(node, sql, keyRangeParams(range.lo, range.hi));
    if (rows.length === 0) return [];
    // Read back by key so the key's text is the same exact text as everywhere else.
    const params = rows.map((r) => tombs.target.key.map((c, i) => bindKeyValue(c, r[keyParamAlias(i)])));
    const found: FetchedRow[] = [];
    for (let i = 0; i < params.length; i += LOOKUP_BATCH) {
      const batch = params.slice(i, i + LOOKUP_BATCH);
      const sql2 = termRowsByKeySql(tombs.target, this.termColumns(tombs, node), tombs.versionColumn, batch.length);
      for (const raw of await this.query(node, sql2, batch.flat())) found.push(this.parseRow(tombs, raw));
    }
    return found;
  }

  /** The key ending the next chunk of `size` rows after `lower` (not past `upper`) on a node, or undefined. */
  private async boundary(side: Side, node: number, lower: unknown[] | undefined, upper: unknown[] | undefined, conn?: Connection): Promise<unknown[] | undefined> {
    const sql = chunkBoundarySql(side.target, { lower: !!lower, upper: !!upper });
    const rows = await this.query(node, sql, [...keyRangeParams(lower, upper), this.chunkSize - 1], conn);
    if (rows.length === 0) return undefined;
    return side.target.key.map((c, i) => bindKeyValue(c, rows[0]![keyParamAlias(i)]));
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
      if (lo && JSON.stringify(b.map(boundText)) === JSON.stringify(lo.map(boundText))) {
        throw new UncheckableTableError(side.target.schema, side.target.table, 'its primary key does not advance in key order (a key type whose comparison and sort order differ)');
      }
      next = this.boundary(side, node, b, upper, conn);
      // Keep the prefetch from becoming an unhandled rejection if the chunk below fails first.
      next.catch(() => undefined);
      await visit(lo, b, false);
      lo = b;
    }
  }

  private async compareSide(side: Side, stats: TableStats, report: TableStateReport, on: SideHandlers): Promise<void> {
    const all = this.sessions.map((s) => s.index);
    /** `only`: a second look at the nodes whose difference the rows did not explain. */
    const compareRange = async (range: Range, maySplit: boolean, only?: number[]): Promise<void> => {
      const nodes = only ? [0, ...only] : all;
      const sums: Checksum[] = [];
      await Promise.all(
        nodes.map(async (i) => {
          sums[i] = await this.checksum(side, i, range);
        }),
      );
      if (!only) stats.chunks++;
      const differing = nodes.filter((i) => i > 0 && sums[i]!.text !== sums[0]!.text);
      if (differing.length === 0) {
        if (!only) await on.onChunk?.(range);
        return;
      }
      if (!only) stats.differing++;
      this.logger.debug('state check: chunk differs', { table: `${side.target.schema}.${side.target.table}`, nodes: differing.map(nodeLabel) });
      // A chunk far larger on some node (keys missing on the first) is split by that node's keys.
      const involved = [0, ...differing];
      const largest = involved.reduce((best, i) => (sums[i]!.count > sums[best]!.count ? i : best), 0);
      if (maySplit && !only && sums[largest]!.count > 2 * this.chunkSize) {
        // A range the split cannot narrow (rows vanished meanwhile) is read as it is.
        await this.walk(side, largest, range.lo, range.hi, (l, h, whole) => compareRange({ lo: l, hi: h }, !whole));
        return;
      }
      if (!only) await on.onChunk?.(range);
      const maps: Array<RowMap | undefined> = [];
      await Promise.all(
        involved.map(async (i) => {
          maps[i] = await this.fetchRange(side, i, range, report);
        }),
      );
      const explained = await on.onDiff(maps, differing);
      const left = differing.filter((i) => !explained.has(i));
      if (left.length === 0) return;
      // Rows that changed between the checksum and the read explain nothing either: look again once.
      if (!only) return compareRange(range, false, left);
      for (const i of left) on.onUnexplained(range, i, sums[0]!, sums[i]!);
    };
    if (side.columns[0]) await this.walk(side, 0, undefined, undefined, (l, h) => compareRange({ lo: l, hi: h }, true), this.boundaryConn);
    else await compareRange({ lo: undefined, hi: undefined }, true);
  }
}

/** What compareSide does with a chunk: compare differing rows (returning the nodes they explain), report a difference they do not explain, look at every chunk. */
interface SideHandlers {
  onDiff: (maps: Array<RowMap | undefined>, differing: number[]) => Promise<Set<number>>;
  onUnexplained: (range: Range, node: number, a: Checksum, b: Checksum) => void;
  onChunk?: (range: Range) => Promise<void>;
}

const SHORT_TEXT = new Set(['char', 'varchar']);
const SHORT_BINARY = new Set(['binary', 'varbinary']);

/**
 * A column that is a short string on one node and a TEXT/BLOB on another is hashed alike on every
 * node (as a large value), so equal data compares equal: the two forms hash differently.
 */
function alikeLargeValues(perNode: Array<ValueColumn[] | undefined>, keyNames: readonly string[]): Array<ValueColumn[] | undefined> {
  const present = perNode.filter((c): c is ValueColumn[] => c !== undefined);
  if (present.length < 2) return perNode;
  const large = new Map<string, string>();
  present[0]!.forEach((first, j) => {
    if (keyNames.includes(first.name)) return;
    const types = present.map((cols) => cols[j]!.dataType);
    for (const [short, long, as] of [[SHORT_TEXT, TEXT_LOB_TYPES, 'longtext'], [SHORT_BINARY, BINARY_LOB_TYPES, 'longblob']] as const) {
      if (types.some((t) => short.has(t)) && types.some((t) => long.has(t)) && types.every((t) => short.has(t) || long.has(t))) large.set(first.name, as);
    }
  });
  if (large.size === 0) return perNode;
  return perNode.map((cols) => cols?.map((c) => (large.has(c.name) ? { ...c, dataType: large.get(c.name)! } : c)));
}

const SPELLABLE_KEY_TYPES = new Set(['char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext', 'enum', 'set', 'float', 'double', 'real']);

/** The key's stored spelling, where the two rows (one key under the collation) spell it differently. */
const KEY_SPELLING = '(key as stored)';

/** Two nodes' rows of one key; when they spell the key differently, that spelling is a value of each. */
function spelled(a: FetchedRow | undefined, b: FetchedRow | undefined): [FetchedRow | undefined, FetchedRow | undefined] {
  if (!a || !b || a.keyText === b.keyText) return [a, b];
  const withKey = (r: FetchedRow) => ({ ...r, values: { ...r.values, [KEY_SPELLING]: JSON.stringify(Object.values(r.key)) } });
  return [withKey(a), withKey(b)];
}

/** A read term as text: servers send text, numbers for some numeric terms, bytes for binary ones. */
function termText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
  return String(v);
}

/** A bound key value as report text. */
function boundText(v: unknown): string {
  if (v instanceof Uint8Array) return `0x${Buffer.from(v).toString('hex').toUpperCase()}`;
  return String(v);
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
    return { index, url: shown, conn, mariadb };
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
