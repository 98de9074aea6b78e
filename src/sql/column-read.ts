// How a column is read so that its value survives the trip to JS and back exactly, and how a key
// read that way is bound again. The copy, sync and the state check read through these; pure text.
//
// mysql2's text protocol gives most types exactly (bigints and DECIMALs as strings, dates as
// strings), except: FLOAT arrives as 6 significant digits (37.774929 → 37.7749), DOUBLE as a JS
// number (-0 becomes 0 once printed), and GEOMETRY parsed into objects without its SRID.
import { ENUM_ERROR_VALUE } from '../model/enum-error.ts';
import { jsonCastableScalarsSql, jsonScalarsAlias, typedJsonOf } from './json-types.ts';
import { quoteIdent } from './quote.ts';

/** A column as the readers need it: information_schema DATA_TYPE (lower case) and COLUMN_TYPE. */
export interface TypedColumn {
  name: string;
  dataType: string;
  columnType: string;
}

/** A column to read: its name alone reads it as mysql2 returns it (no type known). */
export type ReadColumn = string | TypedColumn;

export const INT_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint', 'year']);
export const DECIMAL_TYPES = new Set(['decimal', 'numeric', 'fixed']);
export const FLOAT_TYPES = new Set(['float', 'double', 'real', 'double precision']);
export const SPATIAL_TYPES = new Set([
  'geometry',
  'point',
  'linestring',
  'polygon',
  'multipoint',
  'multilinestring',
  'multipolygon',
  'geometrycollection',
  'geomcollection',
]);
export const TEXT_LOB_TYPES = new Set(['tinytext', 'text', 'mediumtext', 'longtext']);
/** Types the server sorts by their number (member index, bit set) and compares with text by their name: a key of one is walked by its number. */
export const NUMBERED_TYPES = new Set(['enum', 'set']);
export const BINARY_LOB_TYPES = new Set(['tinyblob', 'blob', 'mediumblob', 'longblob']);

export function columnName(c: ReadColumn): string {
  return typeof c === 'string' ? c : c.name;
}

/**
 * The expression that reads a column exactly, or undefined when the plain column already is exact:
 * FLOAT and DOUBLE as the text of their exact double value (the server prints the shortest text that
 * parses back to the same double, -0 included), spatial values as their stored bytes (SRID + WKB,
 * which both engines accept back into a spatial column).
 */
export function exactReadExpr(c: TypedColumn, qualifier?: string): string | undefined {
  const q = qualified(c.name, qualifier);
  if (c.dataType === 'float') return `CAST(CAST(${q} AS DOUBLE) AS CHAR)`;
  if (FLOAT_TYPES.has(c.dataType)) return `CAST(${q} AS CHAR)`;
  if (SPATIAL_TYPES.has(c.dataType)) return `CAST(${q} AS BINARY)`;
  return undefined;
}

export function qualified(name: string, qualifier?: string): string {
  return qualifier ? `${qualifier}.${quoteIdent(name)}` : quoteIdent(name);
}

/**
 * Select-list items reading columns exactly, each under its own name; a MySQL JSON column also
 * reads its typed scalars under jsonScalarsAlias, which withTypedJson folds into the value.
 */
export function exactSelectList(columns: readonly ReadColumn[], qualifier?: string): string {
  return columns
    .map((c) => {
      if (typeof c === 'string') return qualified(c, qualifier);
      if (c.dataType === 'json') return `${qualified(c.name, qualifier)}, ${jsonCastableScalarsSql(c.name, qualifier)} AS ${quoteIdent(jsonScalarsAlias(c.name))}`;
      if (c.dataType === 'enum') return `${qualified(c.name, qualifier)}, ${qualified(c.name, qualifier)} + 0 AS ${quoteIdent(enumIndexAlias(c.name))}`;
      const expr = exactReadExpr(c, qualifier);
      return expr ? `${expr} AS ${quoteIdent(c.name)}` : qualified(c.name, qualifier);
    })
    .join(', ');
}

function enumIndexAlias(column: string): string {
  return `_lww_enum_index:${column}`;
}

/**
 * Rows read with exactSelectList as values to write back: a MySQL JSON value with its typed scalars
 * (a TypedJson where it has some), the ENUM error value (index 0) as ENUM_ERROR_VALUE, not ''.
 */
export function withExactValues<R extends Record<string, unknown>>(rows: R[], columns: readonly ReadColumn[]): R[] {
  for (const c of columns) {
    if (typeof c === 'string' || (c.dataType !== 'json' && c.dataType !== 'enum')) continue;
    const alias = c.dataType === 'json' ? jsonScalarsAlias(c.name) : enumIndexAlias(c.name);
    for (const row of rows) {
      const value = row[c.name];
      const extra = row[alias];
      delete row[alias];
      const out = row as Record<string, unknown>;
      if (c.dataType === 'json' && typeof value === 'string') out[c.name] = typedJsonOf(value, typeof extra === 'string' ? extra : null);
      else if (c.dataType === 'enum' && value !== null && Number(extra) === 0) out[c.name] = ENUM_ERROR_VALUE;
    }
  }
  return rows;
}

/**
 * A bound key value, cast where a plain parameter would compare inexactly: DECIMAL and floating-point
 * keys compare against a value of their own type (a string compares with a number column as a
 * double). Integer keys are bound as bigint (bindKeyValue), which the client renders exactly.
 */
export function keyPlaceholder(c: ReadColumn): string {
  if (typeof c === 'string') return '?';
  const t = c.dataType;
  if (DECIMAL_TYPES.has(t)) {
    const m = /\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)/.exec(c.columnType);
    return `CAST(? AS DECIMAL(${m ? m[1] : '65'},${m?.[2] ?? '0'}))`;
  }
  if (t === 'float') return 'CAST(? AS FLOAT)';
  if (FLOAT_TYPES.has(t)) return 'CAST(? AS DOUBLE)';
  return '?';
}

/** A key value read exactly, as a bound parameter: integers as bigint (rendered exactly), the rest as read. */
export function bindKeyValue(c: ReadColumn, value: unknown): unknown {
  if (typeof c !== 'string' && (INT_TYPES.has(c.dataType) || NUMBERED_TYPES.has(c.dataType)) && (typeof value === 'string' || typeof value === 'number') && /^-?\d+$/.test(String(value))) {
    return BigInt(String(value));
  }
  return value;
}
