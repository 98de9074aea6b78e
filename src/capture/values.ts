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
}

function normalizeValue(type: number, value: unknown): unknown {
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
  const types = new Map(columns?.map((c) => [c.name, c.type]));
  for (const [name, value] of Object.entries(row)) {
    if (absent?.has(name)) continue;
    out[name] = normalizeValue(types.get(name) ?? -1, value);
  }
  return out;
}
