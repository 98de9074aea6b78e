// Values as zongji decodes them, adjusted where its form differs from what the column stores, so
// src/writer/values.ts `toSqlValue` writes them back exactly. Zongji is configured (reader.ts) with
// dateStrings and UTC, so temporal values are exact strings; MySQL JSON is rendered from its binary
// form by mysql-json.ts as a SELECT prints it (a TypedJson when it holds DECIMAL, DATE... scalars);
// MariaDB JSON is LONGTEXT and arrives as stored.
import type { Row } from '../model/change.ts';
import { ENUM_ERROR_VALUE } from '../model/enum-error.ts';
import { mysqlJsonValue } from './mysql-json.ts';

/** MySQL column type codes of the binlog TABLE_MAP event that need adjusting. */
const TYPE_YEAR = 13;
const TYPE_ENUM = 247;
export const TYPE_JSON = 245;
export const TYPE_BLOB = 252;

export interface ColumnShape {
  name: string;
  type: number;
  /** A latin1 text column, decoded byte for byte (ISO-8859-1) by zongji: see latin1Text. */
  latin1?: boolean;
}

/**
 * MySQL's latin1 is Windows-1252 with its five unassigned bytes (0x81, 0x8D, 0x8F, 0x90, 0x9D) kept
 * as U+0081… ; zongji's Windows-1252 decoder turned those five into U+FFFD, a character latin1 does not
 * have (the row could not be written back). Decoded as ISO-8859-1 (each byte its code point), the
 * 0x80–0x9F range is mapped here as the server maps it.
 */
/** What bytes 0x80–0x9F are in MySQL's latin1, in byte order. */
const LATIN1_80_9F = '\u20AC\u0081\u201A\u0192\u201E\u2026\u2020\u2021\u02C6\u2030\u0160\u2039\u0152\u008D\u017D\u008F\u0090\u2018\u2019\u201C\u201D\u2022\u2013\u2014\u02DC\u2122\u0161\u203A\u0153\u009D\u017E\u0178';

export function latin1Text(isoDecoded: string): string {
  return /[\u0080-\u009f]/.test(isoDecoded) ? isoDecoded.replace(/[\u0080-\u009f]/g, (c) => LATIN1_80_9F[c.charCodeAt(0) - 0x80]!) : isoDecoded;
}

function normalizeValue(type: number, value: unknown, latin1 = false): unknown {
  if (latin1 && typeof value === 'string') return latin1Text(value);
  // Index 0 of an ENUM is the error value a non-strict server stores for invalid values; zongji has
  // no name for it. Not '': that is a member of ENUM('', ...).
  if (type === TYPE_ENUM && value === undefined) return ENUM_ERROR_VALUE;
  if (value === null || value === undefined) return null;
  // Zongji adds 1900 to the stored byte, so YEAR 0000 (stored 0) comes out as 1900, a year
  // the YEAR type cannot hold (its range is 1901..2155 plus 0000).
  if (type === TYPE_YEAR && value === 1900) return 0;
  // MySQL JSON arrives as the raw binary document (reader.ts has zongji read it as a BLOB).
  if (type === TYPE_JSON && Buffer.isBuffer(value)) return mysqlJsonValue(value);
  // Decoded buffers are views into the packet buffer; a copy keeps queued transactions from pinning
  // whole socket chunks in memory.
  if (Buffer.isBuffer(value)) return Buffer.from(value);
  return value;
}

/**
 * A row image with every column's value in the form toSqlValue stores exactly; columns in `absent`
 * (not in the binlog's image) are left out, so they can never be taken for NULLs.
 */
export function normalizeRow(row: Row, columns: readonly ColumnShape[] | undefined, absent?: ReadonlySet<string>): Row {
  const out: Row = {};
  const shapes = new Map(columns?.map((c) => [c.name, c]));
  for (const [name, value] of Object.entries(row)) {
    if (absent?.has(name)) continue;
    const shape = shapes.get(name);
    out[name] = normalizeValue(shape?.type ?? -1, value, shape?.latin1);
  }
  return out;
}
