// Reads a table (or its tombstones) in primary-key chunks with bounded memory: one chunk in hand.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { TableSelector } from '../capture/filter.ts';
import { selectChunkSql, TABLES_WITH_COLUMN_SQL } from '../sql/copy.ts';

export type KeyValues = unknown[];

/** Yields chunks of rows in key order, starting after `after` (exclusive) when given. */
export async function* readChunks(
  conn: Connection,
  schema: string,
  table: string,
  key: readonly string[],
  chunkRows: number,
  after?: KeyValues,
): AsyncGenerator<RowDataPacket[]> {
  let last = after;
  for (;;) {
    const sql = selectChunkSql(schema, table, key, chunkRows, last === undefined);
    const [rows] = await conn.query<RowDataPacket[]>(sql, last ?? []);
    if (rows.length === 0) return;
    yield rows;
    const tail = rows[rows.length - 1]!;
    last = key.map((k) => tail[k]);
    if (rows.length < chunkRows) return;
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

/** Concrete `schema.table` names for selectors: `db.t` as is, `db` / `db.*` → its tables with the version column. */
export async function resolveTables(conn: Connection, selectors: readonly TableSelector[], versionColumn: string): Promise<Array<{ schema: string; table: string }>> {
  const out = new Map<string, { schema: string; table: string }>();
  for (const sel of selectors) {
    let schema: string;
    let table: string | undefined;
    if (typeof sel === 'string') {
      const dot = sel.indexOf('.');
      schema = dot < 0 ? sel : sel.slice(0, dot);
      table = dot < 0 || sel.slice(dot + 1) === '*' ? undefined : sel.slice(dot + 1);
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
