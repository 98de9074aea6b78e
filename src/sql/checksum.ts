// Statement text for the state check: chunk boundaries by keyset, chunk checksums computed on the
// server, and row reads for the chunks that differ. Pure functions of table shape; values are bound.
//
// A chunk's checksum is COUNT(*) plus two BIT_XORs of 64-bit words of a digest of the row text, as
// pt-table-checksum does with MD5. The digest is SHA2-256 (its first 128 bits): MySQL 9.7 has no
// MD5() or SHA1() any more, and every node must compute the same digest. Every column is hashed by
// its exact stored value; equal data of slightly different declared types (DECIMAL scale, fsp,
// charset) gives equal text:
//   - every column becomes one term, NULL is the term 'N'; the terms are joined with CONCAT, so a term
//     that fails (NULL for a non-NULL value) makes the row's digest NULL, which is counted and refused;
//   - FLOAT is the text of its exact double value, DOUBLE its own text (both print the shortest text
//     that parses back to the same double, -0 included); a 6-digit FLOAT text would make different
//     values, and whole pairs of rows of a FLOAT key, hash alike;
//   - DECIMAL and fractional temporal values lose the trailing zeros of their fraction;
//   - strings carry their length (`3:abc`) and are converted to utf8mb4; binary values are HEX; BIT
//     values their unsigned integer;
//   - large values (BLOB/TEXT, JSON, spatial) are hashed one by one, never spelled into the row text
//     (HEX doubles a BLOB, and a text past max_allowed_packet becomes NULL). JSON is its stored text
//     (MySQL's canonical text keeps 1 and 1.0 apart; MariaDB keeps the text as written) plus, on
//     MySQL, the scalars whose type the text loses (sql/json-types.ts: a DATE is not a string), spatial
//     values their stored bytes (SRID + WKB).
// The rows of a differing chunk are read as the same per-column terms (readTermSql), so the
// comparison in JS sees exactly what the checksum saw.
// Timestamps depend on the session time zone: the checker's sessions are UTC.
import { BINARY_LOB_TYPES, DECIMAL_TYPES, exactReadExpr, FLOAT_TYPES, INT_TYPES, keyPlaceholder as valuePlaceholder, NUMBERED_TYPES, qualified, SPATIAL_TYPES, TEXT_LOB_TYPES } from './column-read.ts';
import { jsonTypeSignatureSql } from './json-types.ts';
import { quoteIdent, quoteTable } from './quote.ts';

/**
 * A key column's placeholder in the checker's statements: an ENUM or SET key is bound by its number
 * (read as keyParamList reads it), so a range compares in the order the index sorts it (by name, 'b'
 * < 'a' can hold in index order, and a walk by names skipped or repeated keys).
 */
export function keyPlaceholder(c: KeyColumn): string {
  return NUMBERED_TYPES.has(c.dataType) ? 'CAST(? AS UNSIGNED)' : valuePlaceholder(c);
}

export interface ChecksumColumn {
  name: string;
  /** information_schema DATA_TYPE, lower case. */
  dataType: string;
  /** information_schema COLUMN_TYPE, e.g. "decimal(10,2)", "datetime(6)". */
  columnType: string;
  /** True for JSON columns, including MariaDB's LONGTEXT ones with a json_valid() check. */
  json: boolean;
  /** Character set of a text column (information_schema CHARACTER_SET_NAME), where known. */
  charset?: string | null;
}

/** Character sets whose every value converts to a distinct utf8mb4 text: compared as that text. */
const TEXT_EXACT_CHARSETS = new Set(['utf8mb4', 'utf8mb3', 'utf8', 'latin1', 'ascii', 'ucs2', 'utf16', 'utf16le', 'utf32', 'binary']);

/**
 * A text column in a character set where two stored values can read as one text (Shift-JIS 0x5C and
 * 0x815F both read as a backslash): compared by its bytes, or the check would call them equal.
 */
function comparedAsBytes(col: ChecksumColumn): boolean {
  return typeof col.charset === 'string' && !TEXT_EXACT_CHARSETS.has(col.charset) && (STRING_TYPES.has(col.dataType) || TEXT_LOB_TYPES.has(col.dataType));
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

const FRACTIONAL_TEMPORAL_TYPES = new Set(['datetime', 'timestamp', 'time']);
const STRING_TYPES = new Set(['char', 'varchar', 'enum', 'set']);

/** The NULL term: no other term can be this text (numbers, hex, digests and length-prefixed text all differ). */
export const NULL_TERM = 'N';
/** Separator between terms; only length-prefixed terms can contain it. */
export const TERM_SEPARATOR = '#';
/** Large values up to this many bytes are read whole for the report; longer ones as their digest and length. */
export const INLINE_BYTES = 4096;

/** Digits after the point of DECIMAL(p,s) (s) or of a temporal type with fsp (e.g. datetime(6)). */
export function fractionDigits(columnType: string): number {
  const m = /\(\s*\d+\s*,\s*(\d+)\s*\)/.exec(columnType) ?? /^(?:datetime|timestamp|time)\s*\(\s*(\d+)\s*\)/i.exec(columnType);
  return m ? Number(m[1]) : 0;
}

function trimFraction(expr: string): string {
  return `TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM ${expr}))`;
}

/** Large values are hashed one by one; these are their bytes as hashed: text and JSON in utf8mb4, the rest as stored. */
function largeValue(col: ChecksumColumn): string | undefined {
  const q = quoteIdent(col.name);
  // MySQL JSON: the text and the scalars whose type the text loses (`1.0 /* $ DECIMAL */`).
  if (col.dataType === 'json') return `CONCAT(CONVERT(${q} USING utf8mb4), IFNULL(CONCAT(' /* ', ${jsonTypeSignatureSql(col.name)}, ' */'), ''))`;
  if (TEXT_LOB_TYPES.has(col.dataType) && comparedAsBytes(col)) return `CAST(${q} AS BINARY)`;
  if (col.json || TEXT_LOB_TYPES.has(col.dataType)) return `CONVERT(${q} USING utf8mb4)`;
  if (BINARY_LOB_TYPES.has(col.dataType) || SPATIAL_TYPES.has(col.dataType)) return q;
  return undefined;
}

/** How a row read shows the ENUM error value (index 0, which reads as '' like a member ''). */
export const ENUM_ERROR_TEXT = '(ENUM error value, index 0)';

/** One column's term in the row text (NULL when the value is NULL, or when it cannot be hashed). */
export function checksumTermSql(col: ChecksumColumn): string {
  const q = quoteIdent(col.name);
  const t = col.dataType;
  // '!' is no length-prefixed text.
  if (t === 'enum') return `IF(${q} + 0 = 0, '!', ${stringTerm(q)})`;
  const large = largeValue(col);
  if (!large && comparedAsBytes(col)) return `CONCAT(LENGTH(${q}), ':', HEX(${q}))`;
  if (large) return `SHA2(${large}, 256)`;
  if (INT_TYPES.has(t) || t === 'date' || (FLOAT_TYPES.has(t) && t !== 'float')) return q;
  if (t === 'float') return `CAST(${q} AS DOUBLE)`;
  if (DECIMAL_TYPES.has(t) || FRACTIONAL_TEMPORAL_TYPES.has(t)) return fractionDigits(col.columnType) > 0 ? trimFraction(q) : q;
  if (t === 'bit') return `CAST(${q} AS UNSIGNED)`;
  if (STRING_TYPES.has(t)) return stringTerm(q);
  // Binary strings and anything unknown: the bytes.
  return `HEX(${q})`;
}

function stringTerm(q: string): string {
  return `CONCAT(CHAR_LENGTH(${q}), ':', CONVERT(${q} USING utf8mb4))`;
}

/**
 * One column as a row read shows it and JS compares it, as text: the same equality as checksumTermSql.
 * Large values up to INLINE_BYTES whole (spatial ones as `SRID n 0x<WKB>`), longer ones as
 * `sha256:<digest> (<n> bytes)`; binary values as 0x<hex>.
 */
export function readTermSql(col: ChecksumColumn): string {
  const q = quoteIdent(col.name);
  const t = col.dataType;
  const large = largeValue(col);
  if (large) {
    let whole = large;
    if (BINARY_LOB_TYPES.has(t)) whole = `CONCAT('0x', HEX(${q}))`;
    else if (comparedAsBytes(col)) whole = `CONCAT(CONVERT(${q} USING utf8mb4), ' (0x', HEX(${q}), ')')`;
    else if (SPATIAL_TYPES.has(t)) whole = `CONCAT('SRID ', ST_SRID(${q}), ' 0x', HEX(SUBSTRING(${q}, 5)))`;
    return `IF(LENGTH(${large}) <= ${INLINE_BYTES}, ${whole}, CONCAT('sha256:', SHA2(${large}, 256), ' (', LENGTH(${large}), ' bytes)'))`;
  }
  if (FLOAT_TYPES.has(t)) return exactReadExpr(col)!;
  if (t === 'enum') return `IF(${q} + 0 = 0, '${ENUM_ERROR_TEXT}', CONVERT(${q} USING utf8mb4))`;
  // The text and, where two values can read alike, the bytes that tell them apart.
  if (comparedAsBytes(col)) return `CONCAT(CONVERT(${q} USING utf8mb4), ' (0x', HEX(${q}), ')')`;
  if (STRING_TYPES.has(t)) return `CONVERT(${q} USING utf8mb4)`;
  const term = checksumTermSql(col);
  return term.startsWith('HEX(') ? `CONCAT('0x', ${term})` : term;
}

/** The text of a whole row: one term per column, in the given order; NULL only when a term failed. */
export function rowTextSql(columns: readonly ChecksumColumn[]): string {
  const terms = columns.map((c) => `IF(${quoteIdent(c.name)} IS NULL, '${NULL_TERM}', ${checksumTermSql(c)})`);
  return terms.length === 1 ? terms[0]! : `CONCAT(${terms.join(`, '${TERM_SEPARATOR}', `)})`;
}

/**
 * `key > (lower)` or `key <= (upper)` as a disjunction the range optimizers of both engines use
 * (a row constructor comparison is not a range on every engine):
 *   (a > ?) OR (a = ? AND b > ?)
 * Bound values: see keyBoundParams.
 */
function keyBoundSql(key: readonly KeyColumn[], side: 'lower' | 'upper', qualifier?: string): string {
  const terms: string[] = [];
  for (let i = 0; i < key.length; i++) {
    const last = i === key.length - 1;
    const op = side === 'lower' ? '>' : last ? '<=' : '<';
    const parts = key.slice(0, i).map((c) => `${qualified(c.name, qualifier)} = ${keyPlaceholder(c)}`);
    parts.push(`${qualified(key[i]!.name, qualifier)} ${op} ${keyPlaceholder(key[i]!)}`);
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
export function keyRangeWhere(key: readonly KeyColumn[], range: RangeShape, qualifier?: string): string {
  const parts: string[] = [];
  if (range.lower) parts.push(keyBoundSql(key, 'lower', qualifier));
  if (range.upper) parts.push(keyBoundSql(key, 'upper', qualifier));
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

/** Alias of the i-th key column read exactly, to bind it again (see keyPlaceholder). */
export function keyParamAlias(i: number): string {
  return `_lww_p${i}`;
}

/** Alias of the i-th compared column's read term (readTermSql). */
export function termAlias(i: number): string {
  return `_lww_t${i}`;
}

/** Alias of the version column in row reads. */
export const VERSION_ALIAS = '_lww_v';

function keyParamList(key: readonly KeyColumn[], qualifier?: string): string {
  return key.map((c, i) => `${NUMBERED_TYPES.has(c.dataType) ? `${qualified(c.name, qualifier)} + 0` : (exactReadExpr(c, qualifier) ?? qualified(c.name, qualifier))} AS ${keyParamAlias(i)}`).join(', ');
}

/**
 * The key that ends a chunk of n rows after `lower` (and not past `upper`): the n-th key in key
 * order, read exactly (keyParamAlias). No row means the range holds fewer than n rows. Bound values:
 * keyRangeParams, then n - 1.
 */
export function chunkBoundarySql(target: ChunkTarget, range: RangeShape): string {
  return `SELECT ${keyParamList(target.key)} FROM ${source(target)}${keyRangeWhere(target.key, range)}${orderByKey(target)} LIMIT 1 OFFSET ?`;
}

/**
 * COUNT(*), the XOR over a key range of the rows' digests (two 64-bit words, as decimal strings), and
 * the rows whose digest is NULL because a term could not be computed (row_count, hash_hi, hash_lo,
 * unhashable). Bound values: keyRangeParams.
 */
export function chunkChecksumSql(target: ChunkTarget, columns: readonly ChecksumColumn[], range: RangeShape): string {
  // The digest is computed once per row in a derived table; NO_MERGE keeps MySQL from inlining it
  // twice (MariaDB reads the hint as a comment).
  const word = (from: number) => `BIT_XOR(CAST(CONV(SUBSTRING(${DIGEST_ALIAS}, ${from}, 16), 16, 10) AS UNSIGNED))`;
  return (
    `SELECT /*+ NO_MERGE(${DIGESTS_ALIAS}) */ COUNT(*) AS row_count, ${word(1)} AS hash_hi, ${word(17)} AS hash_lo,` +
    ` COUNT(*) - COUNT(${DIGEST_ALIAS}) AS unhashable` +
    ` FROM (SELECT SHA2(${rowTextSql(columns)}, 256) AS ${DIGEST_ALIAS} FROM ${source(target)}${keyRangeWhere(target.key, range)}) AS ${DIGESTS_ALIAS}`
  );
}

const DIGEST_ALIAS = '_lww_digest';
const DIGESTS_ALIAS = '_lww_digests';

/** A row read: the key read exactly (keyParamAlias), every compared column's read term (termAlias), the version. */
function rowReadList(target: ChunkTarget, columns: readonly ChecksumColumn[], versionColumn: string): string {
  const terms = columns.map((c, i) => `${readTermSql(c)} AS ${termAlias(i)}`);
  return [keyParamList(target.key), ...terms, `${quoteIdent(versionColumn)} AS ${VERSION_ALIAS}`].join(', ');
}

/** The rows of a key range in key order, read as rowReadList. Bound values: keyRangeParams. */
export function chunkRowsSql(target: ChunkTarget, columns: readonly ChecksumColumn[], versionColumn: string, range: RangeShape): string {
  return `SELECT ${rowReadList(target, columns, versionColumn)} FROM ${source(target)}${keyRangeWhere(target.key, range)}${orderByKey(target)}`;
}

function keysWhere(target: ChunkTarget, keys: number): string {
  if (keys < 1) throw new Error('a read by key needs at least one key');
  if (target.key.length === 1) {
    const k = target.key[0]!;
    return `${quoteIdent(k.name)} IN (${new Array(keys).fill(keyPlaceholder(k)).join(', ')})`;
  }
  const one = `(${target.key.map((c) => `${quoteIdent(c.name)} = ${keyPlaceholder(c)}`).join(' AND ')})`;
  return new Array(keys).fill(one).join(' OR ');
}

/** The rows of n given keys, the columns as stored. Bound values: the keys' values, key after key. */
export function rowsByKeySql(target: ChunkTarget, columns: readonly string[], keys: number): string {
  return `SELECT ${columns.map(quoteIdent).join(', ')} FROM ${quoteTable(target.schema, target.table)} WHERE ${keysWhere(target, keys)}`;
}

/** The rows of n given keys, read as rowReadList. Bound values: the keys' values, key after key. */
export function termRowsByKeySql(target: ChunkTarget, columns: readonly ChecksumColumn[], versionColumn: string, keys: number): string {
  return `SELECT ${rowReadList(target, columns, versionColumn)} FROM ${quoteTable(target.schema, target.table)} WHERE ${keysWhere(target, keys)}`;
}

/** Alias of the position of the asked key a row of termRowsForEachKeySql answers. */
export const ASKED_ALIAS = '_lww_asked';

/**
 * As termRowsByKeySql, each row tagged with the position of the asked key it answers (ASKED_ALIAS):
 * one SELECT per key, so a stored row answers every asked key the server calls equal to it ('alpha'
 * asked, 'ALPHA' stored under a case-insensitive collation; both spellings asked, both answered).
 * Bound values: the keys' values, key after key.
 */
export function termRowsForEachKeySql(target: ChunkTarget, columns: readonly ChecksumColumn[], versionColumn: string, keys: number): string {
  if (keys < 1) throw new Error('a read by key needs at least one key');
  const list = rowReadList(target, columns, versionColumn);
  const from = quoteTable(target.schema, target.table);
  const where = keysWhere(target, 1);
  return Array.from({ length: keys }, (_, i) => `SELECT ${i} AS ${ASKED_ALIAS}, ${list} FROM ${from} WHERE ${where}`).join(' UNION ALL ');
}

/**
 * Keys of a range of the tombstone table whose row is still visible in the data table with a version
 * at or below the tombstone's (a row LWW says is deleted): the key read exactly (keyParamAlias).
 * Bound values: keyRangeParams.
 */
export function coveredRowsSql(tombstones: ChunkTarget, data: { schema: string; table: string }, versionColumn: string, range: RangeShape): string {
  const join = tombstones.key.map((c) => `${qualified(c.name, 'd')} = ${qualified(c.name, 't')}`).join(' AND ');
  const where = keyRangeWhere(tombstones.key, range, 't');
  const covered = `${qualified(versionColumn, 'd')} <= ${qualified(versionColumn, 't')}`;
  return (
    `SELECT ${keyParamList(tombstones.key, 't')} FROM ${quoteTable(tombstones.schema, tombstones.table)} AS t FORCE INDEX (PRIMARY) JOIN ${quoteTable(data.schema, data.table)} AS d ON ${join}` +
    `${where ? `${where} AND ` : ' WHERE '}${covered}`
  );
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
