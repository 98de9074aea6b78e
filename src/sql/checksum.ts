// Statement text for the state check: chunk boundaries by keyset, chunk checksums computed on the
// server, and row reads for the chunks that differ. Pure functions of table shape; values are bound.
//
// A chunk's checksum is COUNT(*) plus two BIT_XORs of 64-bit words of a digest of the row text, as
// pt-table-checksum does with MD5. The digest is SHA2-256 (its first 128 bits): MySQL 9.7 has no
// MD5() or SHA1() any more, and every node must compute the same digest. The row text is built so that equal data gives equal text on every node
// (even when column types differ slightly) and different data gives different text:
//   - every column becomes one term, NULL is the term 'N' (CONCAT_WS alone would skip it);
//   - terms that can contain the separator (strings, JSON) carry their length: `3:abc`;
//   - DECIMAL and fractional temporal values lose the trailing zeros of their fraction;
//   - binary values are HEX, BIT values their unsigned integer;
//   - strings are converted to utf8mb4 so a charset difference alone does not differ;
//   - JSON is the server's canonical text (MySQL stores it normalized; MariaDB: JSON_NORMALIZE).
// Timestamps depend on the session time zone: the checker's sessions are UTC.
import { quoteIdent, quoteTable } from './quote.ts';

export interface ChecksumColumn {
  name: string;
  /** information_schema DATA_TYPE, lower case. */
  dataType: string;
  /** information_schema COLUMN_TYPE, e.g. "decimal(10,2)", "datetime(6)". */
  columnType: string;
  /** True for JSON columns, including MariaDB's LONGTEXT ones with a json_valid() check. */
  json: boolean;
}

export interface KeyColumn {
  name: string;
  dataType: string;
  columnType: string;
}

export interface ChunkTarget {
  schema: string;
  table: string;
  /** Primary-key columns in key order. */
  key: readonly KeyColumn[];
}

/** Which bounds a key range has: (lower, upper]. A missing bound is open-ended. */
export interface RangeShape {
  lower: boolean;
  upper: boolean;
}

export interface NormalizeOptions {
  /** Use JSON_NORMALIZE() on JSON columns (MariaDB >= 10.7); MySQL's JSON text is already canonical. */
  jsonNormalize: boolean;
}

const INT_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint', 'year']);
const DECIMAL_TYPES = new Set(['decimal', 'numeric', 'fixed']);
const FLOAT_TYPES = new Set(['float', 'double', 'real', 'double precision']);
const FRACTIONAL_TEMPORAL_TYPES = new Set(['datetime', 'timestamp', 'time']);
const STRING_TYPES = new Set(['char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext', 'enum', 'set']);

/** The NULL term: no other term can be this text (numbers, hex and length-prefixed text all differ). */
export const NULL_TERM = 'N';
/** Separator between terms; only length-prefixed terms can contain it. */
export const TERM_SEPARATOR = '#';

/** Digits after the point of DECIMAL(p,s) (s) or of a temporal type with fsp (e.g. datetime(6)). */
export function fractionDigits(columnType: string): number {
  const m = /\(\s*\d+\s*,\s*(\d+)\s*\)/.exec(columnType) ?? /^(?:datetime|timestamp|time)\s*\(\s*(\d+)\s*\)/i.exec(columnType);
  return m ? Number(m[1]) : 0;
}

function trimFraction(expr: string): string {
  return `TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM ${expr}))`;
}

function lengthPrefixed(lengthOf: string, text: string): string {
  return `CONCAT(CHAR_LENGTH(${lengthOf}), ':', ${text})`;
}

/** One column's normalized text (NULL when the value is NULL). */
export function normalizedColumnSql(col: ChecksumColumn, options: NormalizeOptions): string {
  const q = quoteIdent(col.name);
  const t = col.dataType;
  if (col.json) {
    if (options.jsonNormalize) {
      const normalized = `JSON_NORMALIZE(${q})`;
      return lengthPrefixed(normalized, normalized);
    }
    return lengthPrefixed(q, `CONVERT(${q} USING utf8mb4)`);
  }
  if (INT_TYPES.has(t) || FLOAT_TYPES.has(t) || t === 'date') return q;
  if (DECIMAL_TYPES.has(t) || FRACTIONAL_TEMPORAL_TYPES.has(t)) return fractionDigits(col.columnType) > 0 ? trimFraction(q) : q;
  if (t === 'bit') return `CAST(${q} AS UNSIGNED)`;
  if (STRING_TYPES.has(t)) return lengthPrefixed(q, `CONVERT(${q} USING utf8mb4)`);
  // Binary strings, spatial and anything unknown: the bytes.
  return `HEX(${q})`;
}

/** The normalized text of a whole row: one term per column, in the given order. */
export function rowTextSql(columns: readonly ChecksumColumn[], options: NormalizeOptions): string {
  const terms = columns.map((c) => `COALESCE(${normalizedColumnSql(c, options)}, '${NULL_TERM}')`);
  return `CONCAT_WS('${TERM_SEPARATOR}', ${terms.join(', ')})`;
}

/**
 * A bound key value, cast where a plain parameter would compare inexactly: DECIMAL and floating-point
 * keys compare against a value of their own type (a string or a decimal literal would compare as
 * a double). Integer keys are bound as bigint, which the client renders as an exact literal.
 */
export function keyPlaceholder(col: KeyColumn): string {
  const t = col.dataType;
  if (DECIMAL_TYPES.has(t)) {
    const m = /\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)/.exec(col.columnType);
    return `CAST(? AS DECIMAL(${m ? m[1] : '65'},${m?.[2] ?? '0'}))`;
  }
  if (t === 'float') return 'CAST(? AS FLOAT)';
  if (FLOAT_TYPES.has(t)) return 'CAST(? AS DOUBLE)';
  return '?';
}

/**
 * `key > (lower)` or `key <= (upper)` as a disjunction the range optimizers of both engines use
 * (a row constructor comparison is not a range on every engine):
 *   (a > ?) OR (a = ? AND b > ?)
 * Bound values: see keyBoundParams.
 */
function keyBoundSql(key: readonly KeyColumn[], side: 'lower' | 'upper'): string {
  const terms: string[] = [];
  for (let i = 0; i < key.length; i++) {
    const last = i === key.length - 1;
    const op = side === 'lower' ? '>' : last ? '<=' : '<';
    const parts = key.slice(0, i).map((c) => `${quoteIdent(c.name)} = ${keyPlaceholder(c)}`);
    parts.push(`${quoteIdent(key[i]!.name)} ${op} ${keyPlaceholder(key[i]!)}`);
    terms.push(parts.join(' AND '));
  }
  return terms.length === 1 ? terms[0]! : `(${terms.map((t) => `(${t})`).join(' OR ')})`;
}

/** The bound values of one bound of keyBoundSql: the key's prefixes, shortest first. */
export function keyBoundParams<T>(values: readonly T[]): T[] {
  const out: T[] = [];
  for (let i = 0; i < values.length; i++) out.push(...values.slice(0, i + 1));
  return out;
}

/** ` WHERE <lower> AND <upper>`, or '' for a range open on both ends. Bound values: keyRangeParams. */
export function keyRangeWhere(key: readonly KeyColumn[], range: RangeShape): string {
  const parts: string[] = [];
  if (range.lower) parts.push(keyBoundSql(key, 'lower'));
  if (range.upper) parts.push(keyBoundSql(key, 'upper'));
  return parts.length === 0 ? '' : ` WHERE ${parts.join(' AND ')}`;
}

/** Bound values of keyRangeWhere for the given bounds (undefined = open). */
export function keyRangeParams<T>(lower: readonly T[] | undefined, upper: readonly T[] | undefined): T[] {
  return [...(lower ? keyBoundParams(lower) : []), ...(upper ? keyBoundParams(upper) : [])];
}

function source(target: ChunkTarget): string {
  return `${quoteTable(target.schema, target.table)} FORCE INDEX (PRIMARY)`;
}

function orderByKey(target: ChunkTarget): string {
  return ` ORDER BY ${target.key.map((c) => quoteIdent(c.name)).join(', ')}`;
}

/**
 * The key that ends a chunk of n rows after `lower` (and not past `upper`): the n-th key in key
 * order. No row means the range holds fewer than n rows. Bound values: keyRangeParams, then n - 1.
 */
export function chunkBoundarySql(target: ChunkTarget, range: RangeShape): string {
  return (
    `SELECT ${target.key.map((c) => quoteIdent(c.name)).join(', ')} FROM ${source(target)}${keyRangeWhere(target.key, range)}` +
    `${orderByKey(target)} LIMIT 1 OFFSET ?`
  );
}

/**
 * COUNT(*) and the XOR over a key range of the rows' digests, two 64-bit words, as decimal strings
 * (row_count, hash_hi, hash_lo). Bound values: keyRangeParams.
 */
export function chunkChecksumSql(target: ChunkTarget, columns: readonly ChecksumColumn[], range: RangeShape, options: NormalizeOptions): string {
  // The digest is computed once per row in a derived table; NO_MERGE keeps MySQL from inlining it
  // twice (MariaDB reads the hint as a comment).
  const word = (from: number) => `BIT_XOR(CAST(CONV(SUBSTRING(${DIGEST_ALIAS}, ${from}, 16), 16, 10) AS UNSIGNED))`;
  return (
    `SELECT /*+ NO_MERGE(${DIGESTS_ALIAS}) */ COUNT(*) AS row_count, ${word(1)} AS hash_hi, ${word(17)} AS hash_lo` +
    ` FROM (SELECT SHA2(${rowTextSql(columns, options)}, 256) AS ${DIGEST_ALIAS} FROM ${source(target)}${keyRangeWhere(target.key, range)}) AS ${DIGESTS_ALIAS}`
  );
}

const DIGEST_ALIAS = '_lww_digest';
const DIGESTS_ALIAS = '_lww_digests';

/** The rows of a key range in key order. Bound values: keyRangeParams. */
export function chunkRowsSql(target: ChunkTarget, columns: readonly string[], range: RangeShape): string {
  return `SELECT ${columns.map(quoteIdent).join(', ')} FROM ${source(target)}${keyRangeWhere(target.key, range)}${orderByKey(target)}`;
}

/** The rows of n given keys. Bound values: the keys' values, key after key. */
export function rowsByKeySql(target: ChunkTarget, columns: readonly string[], keys: number): string {
  if (keys < 1) throw new Error('rowsByKeySql needs at least one key');
  let where: string;
  if (target.key.length === 1) {
    const k = target.key[0]!;
    where = `${quoteIdent(k.name)} IN (${new Array(keys).fill(keyPlaceholder(k)).join(', ')})`;
  } else {
    const one = `(${target.key.map((c) => `${quoteIdent(c.name)} = ${keyPlaceholder(c)}`).join(' AND ')})`;
    where = new Array(keys).fill(one).join(' OR ');
  }
  return `SELECT ${columns.map(quoteIdent).join(', ')} FROM ${quoteTable(target.schema, target.table)} WHERE ${where}`;
}

/** The tables registered by install, with where their tombstones live. */
export function registeredTablesSql(metaSchema: string): string {
  return (
    'SELECT schema_name AS schemaName, table_name AS tableName, tombstone_table AS tombstoneTable, version_column AS versionColumn' +
    ` FROM ${quoteTable(metaSchema, 'tables')} ORDER BY schema_name, table_name`
  );
}

/** MariaDB keeps JSON as LONGTEXT with a column CHECK (json_valid(`c`)). Bound: schema, table. */
export const MARIADB_JSON_CHECKS_SQL =
  'SELECT CONSTRAINT_NAME AS name, CHECK_CLAUSE AS clause FROM information_schema.CHECK_CONSTRAINTS' +
  " WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ? AND LEVEL = 'Column'";
