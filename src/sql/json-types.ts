// MySQL's JSON type keeps scalars its text form cannot tell apart: a DECIMAL 1.0 prints like a
// DOUBLE, a DATE like the string "2024-01-01", an unsigned 7 like a signed one; opaque values
// (BLOB, BIT, ...) print as "base64:type…" strings. A copy that reads the text and writes it back
// turns them into DOUBLE, STRING and INTEGER, and a checker that hashes the text misses the change.
// These expressions walk a document on the server (a recursive CTE over JSON_KEYS / JSON_TABLE) and
// list such scalars: as a signature for the checker, as path/type/value triples for the copy.
// MySQL only (MariaDB's JSON is text); MySQL 8.0.14+ for the outer reference in the CTE.
import { type JsonScalarType, TypedJson } from '../model/json.ts';
import { quoteIdent } from './quote.ts';

/** JSON_TYPE() names a document's text carries: everything else is listed. */
const TEXT_TYPES = "'OBJECT', 'ARRAY', 'BOOLEAN', 'NULL', 'INTEGER', 'DOUBLE', 'STRING'";
/** Types the sink can set back with a CAST (model/json.ts JsonScalarType). */
const CASTABLE_TYPES = "'DECIMAL', 'DATE', 'TIME', 'DATETIME', 'UNSIGNED INTEGER'";

// Names inside the walk start with _lww_ so that the document expression's own column resolves to
// the outer row, not to the walk's columns.
const P = '_lww_jp';
const V = '_lww_jv';
const I = '_lww_ji';
const K = '_lww_jk';
const W = '_lww_jw';

/** Rows (path, value) of every value in the document, containers included. */
function walk(doc: string): string {
  const isArray = `JSON_TYPE(${V}) = 'ARRAY'`;
  return (
    `WITH RECURSIVE ${W} (${P}, ${V}) AS (SELECT CAST('$' AS CHAR(16000)), ${doc}` +
    ` UNION ALL SELECT IF(${isArray}, CONCAT(${P}, '[', ${I} - 1, ']'), CONCAT(${P}, '.', JSON_QUOTE(${K}))),` +
    ` IF(${isArray}, JSON_EXTRACT(${V}, CONCAT('$[', ${I} - 1, ']')), JSON_EXTRACT(${V}, CONCAT('$.', JSON_QUOTE(${K}))))` +
    ` FROM ${W}, JSON_TABLE(IF(JSON_TYPE(${V}) = 'OBJECT', JSON_KEYS(${V}), ${V}), '$[*]' COLUMNS (${I} FOR ORDINALITY, ${K} TEXT PATH '$' NULL ON ERROR)) AS _lww_jt` +
    ` WHERE JSON_TYPE(${V}) IN ('OBJECT', 'ARRAY'))`
  );
}

/**
 * `$."d" DATE, $[0] UNSIGNED INTEGER` for a MySQL JSON column's scalars whose type its text loses,
 * in path order; NULL when there are none (or the value is NULL). Needs group_concat_max_len above
 * the signature's length (db/connection.ts sets it).
 */
export function jsonTypeSignatureSql(column: string): string {
  return `(${walk(quoteIdent(column))} SELECT GROUP_CONCAT(CONCAT(${P}, ' ', JSON_TYPE(${V})) ORDER BY ${P} SEPARATOR ', ') FROM ${W} WHERE JSON_TYPE(${V}) NOT IN (${TEXT_TYPES}))`;
}

/**
 * A JSON array of [path, type, value] for a MySQL JSON column's scalars the sink can set back with a
 * CAST (DECIMAL, DATE, TIME, DATETIME, UNSIGNED INTEGER), each value as MySQL prints it; NULL when
 * there are none.
 */
export function jsonCastableScalarsSql(column: string, qualifier?: string): string {
  const doc = qualifier ? `${qualifier}.${quoteIdent(column)}` : quoteIdent(column);
  return `(${walk(doc)} SELECT JSON_ARRAYAGG(JSON_ARRAY(${P}, JSON_TYPE(${V}), JSON_UNQUOTE(${V}))) FROM ${W} WHERE JSON_TYPE(${V}) IN (${CASTABLE_TYPES}))`;
}

const SCALAR_TYPES: Record<string, JsonScalarType> = {
  DECIMAL: 'decimal',
  DATE: 'date',
  TIME: 'time',
  DATETIME: 'datetime',
  'UNSIGNED INTEGER': 'unsigned',
};

/**
 * The document read as text plus its castable scalars (jsonCastableScalarsSql) as a TypedJson, or the
 * text alone when it has none. A DECIMAL's precision is not in its text: the digits it prints are
 * the smallest that hold it, which sets the same value and type back.
 */
export function typedJsonOf(text: string, scalars: string | null): string | TypedJson {
  if (scalars === null) return text;
  const triples = JSON.parse(scalars) as Array<[string, string, string]>;
  return new TypedJson(
    text,
    triples.map(([path, type, value]) => {
      const t = SCALAR_TYPES[type];
      if (!t) throw new Error(`JSON scalar type ${type} cannot be set back`);
      if (t !== 'decimal') return { path, type: t, value };
      const [whole = '', fraction = ''] = value.replace(/^-/, '').split('.');
      const scale = fraction.length;
      return { path, type: t, value, precision: Math.max(1, whole.replace(/^0+/, '').length + scale), scale };
    }),
  );
}

/** The alias a row read gives a MySQL JSON column's castable scalars (column-read.ts exactSelectList). */
export function jsonScalarsAlias(column: string): string {
  return `_lww_json_scalars:${column}`;
}
