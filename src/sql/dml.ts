// Statement builders for applying row changes: the tombstone check of a batch's keys (locking), the
// version-guarded LWW upsert, its REPLACE bypass, tombstones, guarded deletes, read-backs. Pure functions of
// table shape and values; each returns the text and the values to bind, in order.
//
// Key equality belongs to the server: every key value is bound through a typed placeholder (CAST to
// the column's type, COLLATE the column's collation), so DATETIME(6) '10:00:00' equals
// '10:00:00.000000', DECIMAL 1.5 equals '1.50', and 'A' equals 'a' under a case-insensitive
// collation — exactly as the primary-key index compares them.
import { type JsonScalarType, TypedJson } from '../model/json.ts';
import type { Dialect } from './dialect.ts';
import { usesRowAlias } from './dialect.ts';
import { placeholders, quoteIdent, quoteList, quoteTable } from './quote.ts';

/** A value bound to a `?`. */
export type BoundValue = string | number | Buffer | null;

/**
 * The column's default, rendered as the SQL `DEFAULT` keyword in an INSERT's VALUES tuple (the server
 * decides the value, expression defaults included): a column the source table did not have when it
 * wrote the row (see prepare.ts). Written column values only; never a key, version or compared value.
 */
export class ColumnDefault {
  static readonly value = new ColumnDefault();
  private constructor() {}
  toString(): string {
    return 'DEFAULT';
  }
}

/** A column value: bound as it is, a MySQL JSON document with typed scalars (written by typedJsonExpr), or the column's DEFAULT. */
export type SqlValue = BoundValue | TypedJson | ColumnDefault;

export interface Statement {
  sql: string;
  values: BoundValue[];
}

/** What the builders need to know about a column's type (information_schema names). */
export interface ColumnType {
  dataType: string;
  columnType: string;
  charset: string | null;
  collation: string | null;
}

export interface TableShape {
  schema: string;
  table: string;
  /** Columns written, version column last. */
  columns: readonly string[];
  primaryKey: readonly string[];
  versionColumn: string;
  /** Typed placeholder of each primary-key column, in key order (see keyPlaceholder). */
  keyPlaceholders: readonly string[];
}

export interface TombstoneShape {
  metaSchema: string;
  tombstoneTable: string;
  primaryKey: readonly string[];
  versionColumn: string;
  keyPlaceholders: readonly string[];
}

export const ROW_ALIAS = '_lww_new';
export const INDEX_COLUMN = '_lww_i';
// Not CAST(? AS UNSIGNED): MySQL types that parameter as a signed BIGINT and clips values above 2^63.
const UNSIGNED_PLACEHOLDER = 'CAST(? AS DECIMAL(20,0))';
const SIGNED_PLACEHOLDER = 'CAST(? AS SIGNED)';
export const VERSION_PLACEHOLDER = UNSIGNED_PLACEHOLDER;
const SAFE_NAME = /^[A-Za-z0-9_]+$/;

/**
 * The placeholder of a key value, typed like the column so comparisons follow the column's type and
 * collation: `CAST(? AS DATETIME(6))`, `CAST(? AS DECIMAL(10,2))`, `CAST(? AS CHAR CHARACTER SET
 * utf8mb4) COLLATE utf8mb4_general_ci`, `CAST(? AS BINARY(4))` (padded like a BINARY(4) column)...
 */
export function keyPlaceholder(col: ColumnType): string {
  const t = col.dataType.toLowerCase();
  const ct = col.columnType.toLowerCase();
  const precision = /\((\d+)\)/.exec(ct)?.[1];
  switch (t) {
    case 'tinyint':
    case 'smallint':
    case 'mediumint':
    case 'int':
    case 'integer':
    case 'bigint':
      return ct.includes('unsigned') ? UNSIGNED_PLACEHOLDER : SIGNED_PLACEHOLDER;
    case 'decimal':
    case 'numeric': {
      const m = /\((\d+)(?:,(\d+))?\)/.exec(ct);
      return m ? `CAST(? AS DECIMAL(${m[1]},${m[2] ?? 0}))` : 'CAST(? AS DECIMAL)';
    }
    case 'datetime':
    case 'timestamp':
      return `CAST(? AS DATETIME${precision ? `(${precision})` : ''})`;
    case 'time':
      return timeCast(precision);
    case 'date':
      return 'CAST(? AS DATE)';
    case 'binary':
      return `CAST(? AS BINARY${precision ? `(${precision})` : ''})`;
    case 'varbinary':
    case 'tinyblob':
    case 'blob':
    case 'mediumblob':
    case 'longblob':
      return 'CAST(? AS BINARY)';
    case 'char':
    case 'varchar':
    case 'tinytext':
    case 'text':
    case 'mediumtext':
    case 'longtext':
    case 'enum':
    case 'set': {
      if (!col.charset || !col.collation || !SAFE_NAME.test(col.charset) || !SAFE_NAME.test(col.collation)) return '?';
      return `CAST(? AS CHAR CHARACTER SET ${col.charset}) COLLATE ${col.collation}`;
    }
    default:
      return '?';
  }
}

const CHAR_PLACEHOLDER = /^CAST\(\? AS CHAR CHARACTER SET [A-Za-z0-9_]+\) COLLATE [A-Za-z0-9_]+$/;

/**
 * The placeholder of a value compared directly with a table column (`col = ?`): a character value
 * is bound plain, so the column's own collation decides (a bound string is merely coercible). The
 * typed form is for derived tables and value-to-value comparisons, where nothing else names the
 * collation. A direct comparison with the typed form is wrong on MariaDB 10.11: in an OR of
 * equalities ('alpha' OR 'ALPHA' under utf8mb4_bin) its range optimizer merges the two values into
 * one, and the statement misses a row (a delete leaves it, a read does not see it).
 */
export function columnPlaceholder(placeholder: string): string {
  return CHAR_PLACEHOLDER.test(placeholder) ? '?' : placeholder;
}

/** A key or version value: typed JSON documents are row values only (JSON is never part of a key). */
export function bound(v: SqlValue): BoundValue {
  if (v instanceof TypedJson) throw new Error('a typed JSON document can only be a written column value');
  if (v instanceof ColumnDefault) throw new Error("a column's DEFAULT can only be a written column value");
  return v;
}

function rowsOf(width: number, rows: readonly (readonly SqlValue[])[]): BoundValue[] {
  const values: BoundValue[] = [];
  for (const r of rows) {
    if (r.length !== width) throw new Error(`a row has ${r.length} values, the statement binds ${width}`);
    for (const v of r) values.push(bound(v));
  }
  return values;
}

/**
 * A bound TIME value: the parameter is made a string first. MySQL 9.7 reads a string parameter of a
 * prepared `CAST(? AS TIME)` as a date when it can ('10:05:20' became 00:00:00, '12:00:00.001'
 * 01:00:00), so distinct TIME keys met as one and a delete removed another key's row; the same text
 * cast from a string expression is read as a time (MariaDB reads both right).
 */
function timeCast(precision: string | undefined): string {
  return `CAST(CAST(? AS CHAR) AS TIME${precision ? `(${precision})` : ''})`;
}

// What each typed JSON scalar is cast to; DECIMAL takes the stored precision and scale.
const JSON_SCALARS: Record<JsonScalarType, string> = {
  decimal: 'CAST(? AS DECIMAL)',
  date: 'CAST(? AS DATE)',
  time: timeCast('6'),
  datetime: 'CAST(? AS DATETIME(6))',
  // MySQL 9.7 reads a string bound to a prepared CAST(? AS UNSIGNED) as a DECIMAL and refuses one past 2^63 - 1.
  unsigned: 'CAST(CAST(? AS CHAR) AS UNSIGNED)',
};

/**
 * `JSON_SET(CAST(? AS JSON), ?, CAST(? AS DATE), ...)`: the document's text with each typed scalar
 * set back as its SQL type, so MySQL stores a DECIMAL, DATE, TIME, DATETIME or unsigned integer
 * there, as the source did. Binds the text, then path and value per scalar.
 */
export function typedJsonExpr(doc: TypedJson): Statement {
  const parts = ['CAST(? AS JSON)'];
  const values: BoundValue[] = [doc.text];
  for (const s of doc.scalars) {
    let scalar = JSON_SCALARS[s.type];
    if (scalar === undefined) throw new Error(`unknown JSON scalar type ${String(s.type)}`);
    if (s.type === 'decimal') {
      const { precision, scale } = s;
      if (!Number.isInteger(precision) || !Number.isInteger(scale) || precision! < 1 || precision! > 65 || scale! < 0 || scale! > 30 || scale! > precision!) {
        throw new Error(`DECIMAL(${precision},${scale}) inside JSON is not a DECIMAL type`);
      }
      scalar = `CAST(? AS DECIMAL(${precision},${scale}))`;
    }
    parts.push('?', scalar);
    values.push(s.path, s.value);
  }
  return { sql: doc.scalars.length === 0 ? parts[0]! : `JSON_SET(${parts.join(', ')})`, values };
}

/**
 * `(?, ?, ...), (...)` for rows of written values and the flattened values: one placeholder per
 * column, except a typed JSON document, which becomes its JSON_SET expression in that row, and a
 * ColumnDefault, which becomes the keyword DEFAULT (nothing bound).
 */
function valueRows(columnPlaceholders: readonly string[], rows: readonly (readonly SqlValue[])[]): Statement {
  const width = columnPlaceholders.length;
  const one = `(${columnPlaceholders.join(', ')})`;
  const tuples: string[] = [];
  const values: BoundValue[] = [];
  for (const r of rows) {
    if (r.length !== width) throw new Error(`a row has ${r.length} values, the statement binds ${width}`);
    let typed = false;
    for (let i = 0; i < width; i++) {
      const v = r[i]!;
      if (v instanceof TypedJson || v instanceof ColumnDefault) typed = true;
      values.push(v as BoundValue);
    }
    if (!typed) {
      tuples.push(one);
      continue;
    }
    values.length -= width;
    const items = r.map((v, i) => {
      if (v instanceof ColumnDefault) return 'DEFAULT';
      if (!(v instanceof TypedJson)) {
        values.push(v);
        return columnPlaceholders[i]!;
      }
      const expr = typedJsonExpr(v);
      values.push(...expr.values);
      return expr.sql;
    });
    tuples.push(`(${items.join(', ')})`);
  }
  return { sql: tuples.join(', '), values };
}

/** The placeholder of each written column: typed for key columns and the version, plain otherwise. */
function columnPlaceholders(shape: TableShape): string[] {
  const keyIndex = new Map(shape.primaryKey.map((k, i) => [k, i]));
  return shape.columns.map((c) => {
    if (c === shape.versionColumn) return VERSION_PLACEHOLDER;
    const i = keyIndex.get(c);
    return i === undefined ? '?' : shape.keyPlaceholders[i]!;
  });
}

/** `SELECT e1 AS c1, e2 AS c2 UNION ALL SELECT e1, e2 ...` : bound rows as a derived table. */
export function derivedRows(names: readonly string[], exprs: readonly string[], rows: number): string {
  const first = `SELECT ${exprs.map((e, i) => `${e} AS ${quoteIdent(names[i]!)}`).join(', ')}`;
  const next = `SELECT ${exprs.join(', ')}`;
  return [first, ...new Array<string>(rows - 1).fill(next)].join(' UNION ALL ');
}

function checkShape(shape: TableShape): void {
  if (shape.columns[shape.columns.length - 1] !== shape.versionColumn) throw new Error('the version column must be the last written column');
  if (shape.keyPlaceholders.length !== shape.primaryKey.length) throw new Error('one key placeholder per primary-key column');
}

/**
 * Locks the tombstones of the given keys (shared; under REPEATABLE READ also the gaps where they
 * are missing) and returns their versions. The cheap first step of the upsert's tombstone check:
 * when it finds none (the common case) no key is held back. Keys: key values.
 */
export function lockTombstones(tomb: TombstoneShape, keys: readonly (readonly SqlValue[])[]): Statement {
  // An OR of per-key equalities, not a row-constructor IN: that one compares a composite key with
  // mixed types (TIMESTAMP with a DATETIME cast) differently from the index and missed tombstones.
  const one = keyEquals(tomb.primaryKey, tomb.keyPlaceholders);
  return {
    sql:
      `SELECT ${quoteIdent(tomb.versionColumn)} FROM ${quoteTable(tomb.metaSchema, tomb.tombstoneTable)}` +
      ` WHERE ${new Array(keys.length).fill(one).join(' OR ')} LOCK IN SHARE MODE`,
    values: rowsOf(tomb.primaryKey.length, keys),
  };
}

/**
 * Which of the given keys have a tombstone of the same or a newer version (`_lww_i`: positions).
 * A locking read (shared): the batch's tombstones, and under REPEATABLE READ the gaps where they
 * are missing, stay as read until commit, so a concurrent local delete waits for the upsert that
 * follows. Rows: key values then version.
 */
export function tombstonedKeys(shape: TableShape, tomb: TombstoneShape, rows: readonly (readonly SqlValue[])[]): Statement {
  const tombTable = quoteTable(tomb.metaSchema, tomb.tombstoneTable);
  const names = [INDEX_COLUMN, ...shape.primaryKey.map((_, i) => `_lww_k${i}`), '_lww_v'];
  const exprs = ['CAST(? AS SIGNED)', ...shape.keyPlaceholders, VERSION_PLACEHOLDER];
  const ref = (n: string) => `${quoteIdent(ROW_ALIAS)}.${quoteIdent(n)}`;
  const on = shape.primaryKey.map((k, i) => `${tombTable}.${quoteIdent(k)} = ${ref(names[i + 1]!)}`).join(' AND ');
  return {
    sql:
      `SELECT ${ref(INDEX_COLUMN)} AS ${quoteIdent(INDEX_COLUMN)} FROM (${derivedRows(names, exprs, rows.length)}) AS ${quoteIdent(ROW_ALIAS)}` +
      ` JOIN ${tombTable} ON ${on} WHERE ${tombTable}.${quoteIdent(tomb.versionColumn)} >= ${ref('_lww_v')} LOCK IN SHARE MODE`,
    values: rows.flatMap((r, i) => {
      if (r.length !== shape.primaryKey.length + 1) throw new Error(`a row has ${r.length} values, the statement binds ${shape.primaryKey.length + 1}`);
      return [String(i), ...r.map(bound)];
    }),
  };
}

/**
 * The LWW upsert of rows (values of `shape.columns`, version last); a row it inserts for a key with
 * a newer tombstone is removed by deleteTombstoned in the same transaction:
 * - an existing row is overwritten only by a strictly newer version of the same primary key (the
 *   key guard keeps a secondary UNIQUE clash from overwriting an unrelated row);
 * - key columns are assigned under the same guard, so a collated key's spelling converges.
 * The version column is assigned last: assignments are evaluated left to right. Values stay in a
 * VALUES list: a derived table would cut long values at 64 KiB (MySQL) or crash the server (MariaDB).
 */
export function lwwUpsert(shape: TableShape, rows: readonly (readonly SqlValue[])[], dialect: Dialect): Statement {
  checkShape(shape);
  if (rows.length === 0) throw new Error('an upsert needs at least one row');
  const target = quoteTable(shape.schema, shape.table);
  const stored = (c: string) => `${target}.${quoteIdent(c)}`;
  const alias = usesRowAlias(dialect);
  const incoming = (c: string) => (alias ? `${quoteIdent(ROW_ALIAS)}.${quoteIdent(c)}` : `VALUES(${quoteIdent(c)})`);
  const newer = [`${incoming(shape.versionColumn)} > ${stored(shape.versionColumn)}`, ...shape.primaryKey.map((k) => `${incoming(k)} = ${stored(k)}`)].join(
    ' AND ',
  );
  const assignments = shape.columns.map((c) => `${quoteIdent(c)} = IF(${newer}, ${incoming(c)}, ${stored(c)})`);
  const tuples = valueRows(columnPlaceholders(shape), rows);
  const sql =
    `INSERT INTO ${target} (${quoteList(shape.columns)}) VALUES ${tuples.sql}` +
    (alias ? ` AS ${quoteIdent(ROW_ALIAS)}` : '') +
    ` ON DUPLICATE KEY UPDATE ${assignments.join(', ')}`;
  return { sql, values: tuples.values };
}

/**
 * The tombstone half of the upsert's guard, run right after it in the same transaction: deletes the
 * rows of the given keys that a tombstone of the same or a newer version covers. Only a row the
 * upsert just inserted can be covered (a stored row is always newer than its key's tombstone, and
 * the upsert only replaces it with a newer one), so the caller runs this only when the upsert
 * inserted rows. The join compares the key columns of the two tables (same types and collations)
 * and reads the tombstones with a shared lock (a multi-table DELETE at REPEATABLE READ locks what
 * it reads), so a tombstone committed concurrently is seen, and none can appear before commit.
 * The keys come as derived rows, not as an OR of per-key equalities on the table: with two keys
 * that differ only in a binary-collated column's letter case ('alpha' OR 'ALPHA', each COLLATE
 * utf8mb4_bin), MariaDB 10.11 found the join empty ("Impossible WHERE") and left the covered row
 * in place (MySQL 9.7 does the same with the values inlined). Keys: key values.
 */
export function deleteTombstoned(shape: TableShape, tomb: TombstoneShape, keys: readonly (readonly SqlValue[])[]): Statement {
  const target = quoteTable(shape.schema, shape.table);
  const tombTable = quoteTable(tomb.metaSchema, tomb.tombstoneTable);
  if (isIntegerKey(shape)) {
    // One integer key column: an IN-list on the table's key finds the same rows (integers have no
    // collation or spelling) without a derived table, which MariaDB materialises (~4x slower at 1024
    // keys). The plan and the locks stay: the table's rows by primary key, each row's tombstone by
    // its primary key (shared, with the gap where it is missing).
    const k = quoteIdent(shape.primaryKey[0]!);
    return {
      sql:
        `DELETE ${target} FROM ${target} JOIN ${tombTable} ON ${tombTable}.${k} = ${target}.${k}` +
        ` WHERE ${target}.${k} IN (${new Array<string>(keys.length).fill(shape.keyPlaceholders[0]!).join(', ')})` +
        ` AND ${tombTable}.${quoteIdent(tomb.versionColumn)} >= ${target}.${quoteIdent(shape.versionColumn)}`,
      values: rowsOf(1, keys),
    };
  }
  const names = shape.primaryKey.map((_, i) => `_lww_k${i}`);
  const ref = (i: number) => `${quoteIdent(ROW_ALIAS)}.${quoteIdent(names[i]!)}`;
  const byKey = shape.primaryKey.map((k, i) => `${target}.${quoteIdent(k)} = ${ref(i)}`).join(' AND ');
  const on = shape.primaryKey.map((k) => `${tombTable}.${quoteIdent(k)} = ${target}.${quoteIdent(k)}`).join(' AND ');
  return {
    sql:
      `DELETE ${target} FROM (${derivedRows(names, shape.keyPlaceholders, keys.length)}) AS ${quoteIdent(ROW_ALIAS)}` +
      ` JOIN ${target} ON ${byKey} JOIN ${tombTable} ON ${on}` +
      ` WHERE ${tombTable}.${quoteIdent(tomb.versionColumn)} >= ${target}.${quoteIdent(shape.versionColumn)}`,
    values: rowsOf(shape.primaryKey.length, keys),
  };
}

/**
 * A primary key of one integer column: its typed placeholder is an integer cast (see keyPlaceholder;
 * a DECIMAL(20,0) column shares the unsigned one, and is as exact: numbers have no collation).
 */
export function isIntegerKey(shape: Pick<TableShape, 'primaryKey' | 'keyPlaceholders'>): boolean {
  return shape.primaryKey.length === 1 && (shape.keyPlaceholders[0] === SIGNED_PLACEHOLDER || shape.keyPlaceholders[0] === UNSIGNED_PLACEHOLDER);
}

/** What a non-LWW sink does: the incoming row replaces whatever is there. */
export function replaceRows(shape: TableShape, rows: readonly (readonly SqlValue[])[]): Statement {
  const tuples = valueRows(new Array<string>(shape.columns.length).fill('?'), rows);
  return {
    sql: `REPLACE INTO ${quoteTable(shape.schema, shape.table)} (${quoteList(shape.columns)}) VALUES ${tuples.sql}`,
    values: tuples.values,
  };
}

/** `(a = e1 AND b = e2)` for one key, columns qualified by `qualify`. */
export function keyEquals(columns: readonly string[], exprs: readonly string[], qualify: (c: string) => string = quoteIdent): string {
  const parts = columns.map((c, i) => `${qualify(c)} = ${columnPlaceholder(exprs[i]!)}`);
  return parts.length === 1 ? parts[0]! : `(${parts.join(' AND ')})`;
}

/**
 * Upserts tombstones keeping the highest version; a newer tombstone also takes the incoming key
 * spelling (collated keys converge like rows). Rows: key values then the delete's version.
 */
export function upsertTombstones(tomb: TombstoneShape, rows: readonly (readonly SqlValue[])[], dialect: Dialect): Statement {
  const target = quoteTable(tomb.metaSchema, tomb.tombstoneTable);
  const v = quoteIdent(tomb.versionColumn);
  const alias = usesRowAlias(dialect);
  const incoming = (c: string) => (alias ? `${quoteIdent(ROW_ALIAS)}.${quoteIdent(c)}` : `VALUES(${quoteIdent(c)})`);
  const one = `(${[...tomb.keyPlaceholders, VERSION_PLACEHOLDER].join(', ')})`;
  const newer = `${incoming(tomb.versionColumn)} > ${target}.${v}`;
  const keys = tomb.primaryKey.map((k) => `${quoteIdent(k)} = IF(${newer}, ${incoming(k)}, ${target}.${quoteIdent(k)})`);
  return {
    sql:
      `INSERT INTO ${target} (${quoteList([...tomb.primaryKey, tomb.versionColumn])}) VALUES ${new Array(rows.length).fill(one).join(', ')}` +
      (alias ? ` AS ${quoteIdent(ROW_ALIAS)}` : '') +
      ` ON DUPLICATE KEY UPDATE ${[...keys, `${v} = GREATEST(${target}.${v}, ${incoming(tomb.versionColumn)})`].join(', ')}`,
    values: rowsOf(tomb.primaryKey.length + 1, rows),
  };
}

/** Deletes each key only where the stored version is older than the delete. Rows: key values then version. */
export function guardedDelete(shape: TableShape, rows: readonly (readonly SqlValue[])[]): Statement {
  const one = `(${[...shape.primaryKey.map((k, i) => `${quoteIdent(k)} = ${columnPlaceholder(shape.keyPlaceholders[i]!)}`), `${quoteIdent(shape.versionColumn)} < ${VERSION_PLACEHOLDER}`].join(' AND ')})`;
  return {
    sql: `DELETE FROM ${quoteTable(shape.schema, shape.table)} WHERE ${new Array(rows.length).fill(one).join(' OR ')}`,
    values: rowsOf(shape.primaryKey.length + 1, rows),
  };
}

/**
 * Moves one row from key `from` to key `to` (a replicated primary-key change), only where the stored
 * version is older than the change: the server then takes the ON UPDATE action of the foreign keys
 * that reference the row, as the source's did. Binds the new key, the old key, then the version.
 */
export function moveKey(shape: TableShape, from: readonly SqlValue[], to: readonly SqlValue[], version: string): Statement {
  const set = shape.primaryKey.map((k, i) => `${quoteIdent(k)} = ${shape.keyPlaceholders[i]!}`).join(', ');
  const where = [...shape.primaryKey.map((k, i) => `${quoteIdent(k)} = ${columnPlaceholder(shape.keyPlaceholders[i]!)}`), `${quoteIdent(shape.versionColumn)} < ${VERSION_PLACEHOLDER}`].join(' AND ');
  return {
    sql: `UPDATE ${quoteTable(shape.schema, shape.table)} SET ${set} WHERE ${where}`,
    values: [...to.map(bound), ...from.map(bound), version],
  };
}

/** Plain delete by key (the bypass). Rows: key values. */
export function plainDelete(shape: TableShape, keys: readonly (readonly SqlValue[])[]): Statement {
  const one = keyEquals(shape.primaryKey, shape.keyPlaceholders);
  return {
    sql: `DELETE FROM ${quoteTable(shape.schema, shape.table)} WHERE ${new Array(keys.length).fill(one).join(' OR ')}`,
    values: rowsOf(shape.primaryKey.length, keys),
  };
}

/**
 * For each given key (by position), the stored row's version and the tombstone's version, matched
 * by the server's key equality; a missing side reads NULL. Tells an upsert that lost to a newer row
 * or tombstone from one that clashed on a secondary UNIQUE key. Returns columns `_lww_i`, `row_version`, `tomb_version`.
 */
export function readBackVersions(shape: TableShape, tomb: TombstoneShape, keys: readonly (readonly SqlValue[])[]): Statement {
  const target = quoteTable(shape.schema, shape.table);
  const tombTable = quoteTable(tomb.metaSchema, tomb.tombstoneTable);
  const names = [INDEX_COLUMN, ...shape.primaryKey.map((_, i) => `_lww_k${i}`)];
  const exprs = ['CAST(? AS SIGNED)', ...shape.keyPlaceholders];
  const ref = (i: number) => `${quoteIdent(ROW_ALIAS)}.${quoteIdent(names[i + 1]!)}`;
  const on = (table: string) => shape.primaryKey.map((k, i) => `${table}.${quoteIdent(k)} = ${ref(i)}`).join(' AND ');
  const v = quoteIdent(shape.versionColumn);
  return {
    sql:
      `SELECT ${quoteIdent(ROW_ALIAS)}.${quoteIdent(INDEX_COLUMN)} AS ${quoteIdent(INDEX_COLUMN)}, ${target}.${v} AS row_version, ${tombTable}.${quoteIdent(tomb.versionColumn)} AS tomb_version` +
      ` FROM (${derivedRows(names, exprs, keys.length)}) AS ${quoteIdent(ROW_ALIAS)}` +
      ` LEFT JOIN ${target} ON ${on(target)} LEFT JOIN ${tombTable} ON ${on(tombTable)}` +
      // A locking read sees the latest committed versions, as the upsert did; the transaction's
      // snapshot could miss a newer row a local write committed since, and take a stale skip for a clash.
      ' LOCK IN SHARE MODE',
    values: keys.flatMap((k, i) => [String(i), ...k.map(bound)]),
  };
}

/**
 * Whether pairs of key values are the same key for the server (`same0`, `same1`, ... as 0/1): an
 * update from 'A' to 'a' under a case-insensitive collation does not change the primary key.
 * Pairs: old key values then new key values.
 */
export function sameKeys(shape: Pick<TableShape, 'primaryKey' | 'keyPlaceholders'>, pairs: readonly (readonly SqlValue[])[]): Statement {
  const n = shape.primaryKey.length;
  const one = (i: number) => `(${shape.keyPlaceholders.map((p) => `${p} = ${p}`).join(' AND ')}) AS ${quoteIdent(`same${i}`)}`;
  // Each comparison binds old[k], new[k] per key column, in key order.
  return {
    sql: `SELECT ${pairs.map((_, i) => one(i)).join(', ')}`,
    values: pairs.flatMap((p) => {
      if (p.length !== 2 * n) throw new Error(`a key pair has ${p.length} values, expected ${2 * n}`);
      return p.slice(0, n).flatMap((v, k) => [bound(v), bound(p[n + k]!)]);
    }),
  };
}

/** A secondary UNIQUE key's values in one row: columns, their typed placeholders (keyPlaceholder) and values. */
export interface UniqueValues {
  columns: readonly string[];
  placeholders: readonly string[];
  values: readonly SqlValue[];
}

/** `(u1 = ? AND u2 = ?) OR (…)` over the given unique keys, and NOT the row's own primary key. */
function holdingUnique(shape: TableShape, uniques: readonly UniqueValues[], ownKey: readonly SqlValue[]): Statement {
  const any = uniques.map((u) => keyEquals(u.columns, u.placeholders)).join(' OR ');
  return {
    sql: `(${any}) AND NOT ${keyEquals(shape.primaryKey, shape.keyPlaceholders)}`,
    values: [...uniques.flatMap((u) => u.values.map(bound)), ...ownKey.map(bound)],
  };
}

/**
 * The rows other than `ownKey` holding any of the given UNIQUE values (compared under the columns'
 * collations, as the unique index compares them), locked. Returns their primary-key columns and
 * `_lww_v` (the version as text).
 */
export function uniqueHolders(shape: TableShape, uniques: readonly UniqueValues[], ownKey: readonly SqlValue[]): Statement {
  const where = holdingUnique(shape, uniques, ownKey);
  const cols = [...shape.primaryKey.map(quoteIdent), `CAST(${quoteIdent(shape.versionColumn)} AS CHAR) AS ${quoteIdent('_lww_v')}`];
  return { sql: `SELECT ${cols.join(', ')} FROM ${quoteTable(shape.schema, shape.table)} WHERE ${where.sql} FOR UPDATE`, values: where.values };
}

/**
 * Tombstones for the rows holding the given UNIQUE values, each at the holder's own version (read
 * server-side, so key values never make a round trip through the client's types).
 */
export function tombstoneHolders(shape: TableShape, tomb: TombstoneShape, uniques: readonly UniqueValues[], ownKey: readonly SqlValue[], dialect: Dialect): Statement {
  return tombstoneRowsWhere(shape, tomb, holdingUnique(shape, uniques, ownKey), dialect);
}

/** Tombstones for the rows a WHERE condition selects, each at the row's own version (see tombstoneHolders). */
export function tombstoneRowsWhere(shape: TableShape, tomb: TombstoneShape, where: Statement, dialect: Dialect): Statement {
  const target = quoteTable(tomb.metaSchema, tomb.tombstoneTable);
  const v = quoteIdent(tomb.versionColumn);
  const cols = quoteList([...tomb.primaryKey, tomb.versionColumn]);
  // A derived table: MySQL refuses the row alias after INSERT … SELECT, and VALUES() is deprecated there.
  const src = `SELECT ${cols} FROM ${quoteTable(shape.schema, shape.table)} WHERE ${where.sql}`;
  const incoming = (c: string) => (usesRowAlias(dialect) ? `${quoteIdent('_lww_h')}.${quoteIdent(c)}` : `VALUES(${quoteIdent(c)})`);
  // As upsertTombstones: a newer tombstone also takes the removed row's key spelling.
  const newer = `${incoming(tomb.versionColumn)} > ${target}.${v}`;
  const keys = tomb.primaryKey.map((k) => `${quoteIdent(k)} = IF(${newer}, ${incoming(k)}, ${target}.${quoteIdent(k)})`);
  return {
    sql: `INSERT INTO ${target} (${cols}) SELECT * FROM (${src}) AS ${quoteIdent('_lww_h')} ON DUPLICATE KEY UPDATE ${[...keys, `${v} = GREATEST(${target}.${v}, ${incoming(tomb.versionColumn)})`].join(', ')}`,
    values: where.values,
  };
}

/** Deletes the rows holding the given UNIQUE values, other than `ownKey`, whose version is below `below`. */
export function deleteHolders(shape: TableShape, uniques: readonly UniqueValues[], ownKey: readonly SqlValue[], below: string): Statement {
  const where = holdingUnique(shape, uniques, ownKey);
  return {
    sql: `DELETE FROM ${quoteTable(shape.schema, shape.table)} WHERE ${where.sql} AND ${quoteIdent(shape.versionColumn)} < ${VERSION_PLACEHOLDER}`,
    values: [...where.values, below],
  };
}

/** Whether a row with these column values exists, read with a shared lock (latest committed, held to commit). */
export function rowExists(schema: string, table: string, match: UniqueValues): Statement {
  return {
    sql: `SELECT 1 AS ${quoteIdent('found')} FROM ${quoteTable(schema, table)} WHERE ${keyEquals(match.columns, match.placeholders)} LIMIT 1 LOCK IN SHARE MODE`,
    values: match.values.map(bound),
  };
}

/** The conflict log's reason column holds this many characters (sql/meta.sql). */
export const CONFLICT_REASON_CHARS = 255;

/**
 * A reason as the conflict log can store it: cut to the column's width (characters, as the server
 * counts them) with an ellipsis. Reasons name schemas, tables and keys, so long names would make the
 * strict-mode insert fail, and with it, on every retry, the sink transaction that logs it.
 */
export function fitConflictReason(reason: string): string {
  const chars = Array.from(reason);
  return chars.length <= CONFLICT_REASON_CHARS ? reason : `${chars.slice(0, CONFLICT_REASON_CHARS - 1).join('')}…`;
}

/** Appends a row to the conflict log. Bound: source_id, schema, table, reason, version, row_json. */
export function insertConflictSql(metaSchema: string): string {
  return (
    `INSERT INTO ${quoteTable(metaSchema, 'conflicts')} (${quoteList(['source_id', 'schema_name', 'table_name', 'reason', 'version', 'row_json'])})` +
    ` VALUES ${placeholders(6)}`
  );
}
