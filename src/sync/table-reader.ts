// Reads a table (or its tombstones) in primary-key chunks with bounded memory (one chunk in hand),
// looks up the versions a peer holds for a chunk's keys, and names tables for the merge.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { TableSelector } from '../capture/filter.ts';
import { parseTableSelectorText } from '../install/table-list.ts';
import { compositeKeyText } from '../model/key-text.ts';
import { bindKeyValue, columnName, type ReadColumn, withExactValues } from '../sql/column-read.ts';
import { countRowsSql, ESTIMATED_ROWS_SQL, keyBoundParams, lookupVersionsSql, rangeVersionsSql, selectChunkSql, TABLES_WITH_COLUMN_SQL } from '../sql/copy.ts';
import { TABLE_EXISTS_SQL } from '../sql/introspect.ts';

export type KeyValues = unknown[];

export interface ChunkSource {
  schema: string;
  table: string;
  /** Columns read (typed ones exactly, see sql/column-read.ts); must include the key columns. */
  columns: readonly ReadColumn[];
  key: readonly ReadColumn[];
}

/** A key's values as bound parameters (integers as bigint, so they compare exactly). */
export function keyParams(key: readonly ReadColumn[], values: KeyValues): unknown[] {
  return keyBoundParams(values.map((v, i) => bindKeyValue(key[i]!, v)));
}

export interface ReadOptions {
  chunkRows: number;
  /** Start after this key (exclusive); from the first key when absent. */
  after?: KeyValues;
  /** A chunk larger than this (approximate bytes) halves the next chunk's row limit. */
  maxChunkBytes?: number;
}

/** Approximate bytes of a row's values (strings and buffers by length, the rest 8). */
export function approxRowBytes(row: Record<string, unknown>): number {
  let n = 0;
  for (const k in row) {
    const v = row[k];
    if (typeof v === 'string') n += v.length;
    else if (Buffer.isBuffer(v)) n += v.length;
    else n += 8;
  }
  return n;
}

/**
 * Yields chunks of rows in key order. The next chunk is read while the caller works on the current
 * one (two chunks in hand at most); wide rows shrink the chunks so one stays within maxChunkBytes.
 */
export async function* readChunks(conn: Connection, src: ChunkSource, options: ReadOptions): AsyncGenerator<RowDataPacket[]> {
  let limit = options.chunkRows;
  const maxBytes = options.maxChunkBytes ?? 32 << 20;
  const fetch = async (after: KeyValues | undefined, n: number): Promise<RowDataPacket[]> => {
    const sql = selectChunkSql(src.schema, src.table, src.columns, src.key, n, after === undefined);
    const [rows] = await conn.query<RowDataPacket[]>(sql, after === undefined ? [] : keyParams(src.key, after));
    return withExactValues(rows, src.columns);
  };
  let pending: Promise<RowDataPacket[]> | null = fetch(options.after, limit);
  try {
    while (pending) {
      const rows = await pending;
      pending = null;
      if (rows.length === 0) return;
      if (rows.length === limit) {
        if (limit > 1 && rows.reduce((n, r) => n + approxRowBytes(r), 0) > maxBytes) limit = Math.max(1, Math.floor(limit / 2));
        const tail = rows[rows.length - 1]!;
        pending = fetch(
          src.key.map((k) => tail[columnName(k)]),
          limit,
        );
      }
      yield rows;
    }
  } finally {
    // A caller that stops early leaves no query running on the connection.
    await pending?.catch(() => undefined);
  }
}

/** Encodes a key for storage as text (binary key parts survive as base64). */
export function encodeKey(values: KeyValues): string {
  return JSON.stringify(values.map((v) => (Buffer.isBuffer(v) ? { b64: v.toString('base64') } : v)));
}

export function decodeKey(text: string): KeyValues {
  const parsed = JSON.parse(text) as unknown[];
  return parsed.map((v) => (v !== null && typeof v === 'object' && 'b64' in v ? Buffer.from(String((v as { b64: string }).b64), 'base64') : v));
}

/** Identity of a key read from either node: numbers and numeric strings compare alike. */
export function keyIdOf(values: KeyValues): string {
  return compositeKeyText(values.map((v) => (Buffer.isBuffer(v) ? `b${v.toString('hex')}` : `s${String(v)}`)));
}

/** Keys per IN lookup statement (bound parameters stay far below the protocol's 65,535). */
const LOOKUP_KEYS = 1000;

/**
 * Versions a node holds for the given keys, sorted in key order as a chunk is (absent keys are
 * missing from the map). One range read of [first key, last key]; when the node holds many more
 * keys in that range than asked for, IN lookups of exactly the keys instead.
 */
export async function lookupVersions(
  conn: Connection,
  schema: string,
  table: string,
  key: readonly ReadColumn[],
  versionColumn: string,
  keys: readonly KeyValues[],
): Promise<Map<string, bigint>> {
  const found = new Map<string, bigint>();
  if (keys.length === 0) return found;
  const collect = (rows: RowDataPacket[]) => {
    for (const r of rows) found.set(keyIdOf(key.map((k) => r[columnName(k)])), BigInt(r[versionColumn] as string));
  };
  const limit = 2 * keys.length + 16;
  const [ranged] = await conn.query<RowDataPacket[]>(rangeVersionsSql(schema, table, key, versionColumn, limit), [
    ...keyParams(key, keys[0]!),
    ...keyParams(key, keys[keys.length - 1]!),
  ]);
  if (ranged.length < limit) {
    collect(ranged);
    return found;
  }
  for (let i = 0; i < keys.length; i += LOOKUP_KEYS) {
    const part = keys.slice(i, i + LOOKUP_KEYS);
    const [rows] = await conn.query<RowDataPacket[]>(lookupVersionsSql(schema, table, key, versionColumn, part.length), part.flatMap((k) => k.map((v, j) => bindKeyValue(key[j]!, v))));
    collect(rows);
  }
  return found;
}

export async function tableExists(conn: Connection, schema: string, table: string): Promise<boolean> {
  const [rows] = await conn.query<RowDataPacket[]>(TABLE_EXISTS_SQL, [schema, table]);
  return rows.length > 0;
}

/** Exact counts up to this estimate; beyond it the engine's estimate is used (COUNT(*) scans the table). */
const EXACT_COUNT_UP_TO = 5_000_000;

/** Rows to read (after a key when resuming): exact for tables up to a few million rows, else estimated. */
export async function rowsToRead(conn: Connection, src: ChunkSource, after?: KeyValues): Promise<{ rows: number; estimated: boolean }> {
  const [est] = await conn.query<RowDataPacket[]>(ESTIMATED_ROWS_SQL, [src.schema, src.table]);
  const estimate = Number(est[0]?.n ?? 0);
  if (estimate > EXACT_COUNT_UP_TO) return { rows: estimate, estimated: true };
  const [rows] = await conn.query<RowDataPacket[]>(countRowsSql(src.schema, src.table, src.key, after !== undefined), after === undefined ? [] : keyParams(src.key, after));
  return { rows: Number(rows[0]?.n ?? 0), estimated: false };
}

/** Concrete `schema.table` names for selectors: `db.t` as is, `db` / `db.*` → its tables with the version column. */
export async function resolveTables(conn: Connection, selectors: readonly TableSelector[], versionColumn: string): Promise<Array<{ schema: string; table: string }>> {
  const out = new Map<string, { schema: string; table: string }>();
  for (const sel of selectors) {
    let schema: string;
    let table: string | undefined;
    if (typeof sel === 'string') {
      ({ schema, table } = parseTableSelectorText(sel));
    } else {
      schema = sel.schema;
      table = sel.table;
    }
    if (table !== undefined) {
      out.set(`${schema}.${table}`, { schema, table });
      continue;
    }
    const [rows] = await conn.query<RowDataPacket[]>(TABLES_WITH_COLUMN_SQL, [schema, versionColumn]);
    for (const r of rows) out.set(`${schema}.${r.name}`, { schema, table: String(r.name) });
  }
  return [...out.values()];
}
