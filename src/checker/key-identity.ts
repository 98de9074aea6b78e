// Which binlog key images name the same row: the server decides, under each key column's collation.
// Under a case- or accent-insensitive collation 'alpha' and 'ALPHA' are one key (the primary key
// lets only one of them exist), and under a PAD SPACE collation 'a' and 'a ' are too; the audit must
// judge them as one key's history. The identity of a character key value is its weight string under
// the column's collation (trailing spaces removed first for PAD SPACE), asked of the server in
// batches; every other column keeps its canonical text.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { ColumnMeta } from '../model/table.ts';
import { quoteIdent } from '../sql/quote.ts';

export interface KeyCollation {
  charset: string;
  collation: string;
  /** Trailing spaces do not count (every collation but NO PAD ones). */
  padSpace: boolean;
}

const BATCH = 200;
const NAME = /^[A-Za-z0-9_]+$/;

/** The collations of a table's key columns (undefined: not a character column); PAD attributes asked of the server. */
export async function keyCollations(conn: Connection, keyColumns: readonly Pick<ColumnMeta, 'charset' | 'collation'>[]): Promise<Array<KeyCollation | undefined>> {
  const out: Array<KeyCollation | undefined> = [];
  for (const c of keyColumns) {
    if (c.collation === null || c.charset === null || c.charset === 'binary') out.push(undefined);
    else out.push({ charset: c.charset, collation: c.collation, padSpace: await isPadSpace(conn, c.collation) });
  }
  return out;
}

async function isPadSpace(conn: Connection, collation: string): Promise<boolean> {
  try {
    const [rows] = await conn.query<RowDataPacket[]>('SELECT PAD_ATTRIBUTE AS pad FROM information_schema.COLLATIONS WHERE COLLATION_NAME = ?', [collation]);
    if (rows[0]) return String(rows[0].pad).toUpperCase() !== 'NO PAD';
  } catch {
    // MariaDB has no PAD_ATTRIBUTE: its NO PAD collations say so in their names.
  }
  return !/nopad/i.test(collation);
}

/** Identity text of each value under the collation (hex weight string), asked in batches. */
export async function collatedIdentities(conn: Connection, c: KeyCollation, values: readonly string[]): Promise<Map<string, string>> {
  if (!NAME.test(c.charset) || !NAME.test(c.collation)) throw new Error(`unexpected charset/collation name ${c.charset}/${c.collation}`);
  const out = new Map<string, string>();
  const distinct = [...new Set(values)];
  const converted = `CONVERT(? USING ${c.charset})`;
  const value = c.padSpace ? `TRIM(TRAILING ' ' FROM ${converted})` : converted;
  const one = (i: number) => `SELECT ${i} AS ${quoteIdent('i')}, HEX(WEIGHT_STRING(${value} COLLATE ${c.collation})) AS ${quoteIdent('w')}`;
  for (let at = 0; at < distinct.length; at += BATCH) {
    const part = distinct.slice(at, at + BATCH);
    const [rows] = await conn.query<RowDataPacket[]>(part.map((_, i) => one(i)).join(' UNION ALL '), part);
    for (const r of rows) out.set(part[Number(r.i)]!, String(r.w));
  }
  return out;
}
