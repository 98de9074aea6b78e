// Statements over a UNIQUE key's claim table (src/model/table.ts ClaimIndex): recording values
// given up, finding the rows an older claim of a value must give way to, and the incoming rows a
// newer claim beats. Values compare under the columns' types and collations (typed placeholders,
// see keyPlaceholder), as the UNIQUE index compares them.
import { CLAIM_VERSION_COLUMN, claimOwnerColumns } from '../model/table.ts';
import type { Dialect } from './dialect.ts';
import { usesRowAlias } from './dialect.ts';
import { type BoundValue, bound, columnPlaceholder, derivedRows, INDEX_COLUMN, ROW_ALIAS, type SqlValue, type Statement, type TableShape, VERSION_PLACEHOLDER } from './dml.ts';
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

export interface ClaimShape {
  metaSchema: string;
  claimTable: string;
  /** The UNIQUE key's columns, in index order. */
  columns: readonly string[];
  /** Typed placeholder of each of them (keyPlaceholder). */
  placeholders: readonly string[];
}

/** One claim: the value, the key of the row that held it, the version it held it at. */
export interface ClaimRow {
  values: readonly SqlValue[];
  owner: readonly SqlValue[];
  version: bigint;
}

function checkWidth(claim: ClaimShape, shape: TableShape, c: ClaimRow): void {
  if (c.values.length !== claim.columns.length || c.owner.length !== shape.primaryKey.length) {
    throw new Error(`a claim has ${c.values.length} values and ${c.owner.length} key values, the statement binds ${claim.columns.length} and ${shape.primaryKey.length}`);
  }
}

/** Records claims, keeping the highest version (and its owner) per value. */
export function upsertClaims(shape: TableShape, claim: ClaimShape, rows: readonly ClaimRow[], dialect: Dialect): Statement {
  const target = quoteTable(claim.metaSchema, claim.claimTable);
  const owners = claimOwnerColumns(shape.primaryKey);
  const v = quoteIdent(CLAIM_VERSION_COLUMN);
  const alias = usesRowAlias(dialect);
  const incoming = (c: string) => (alias ? `${quoteIdent(ROW_ALIAS)}.${quoteIdent(c)}` : `VALUES(${quoteIdent(c)})`);
  const one = `(${[...claim.placeholders, ...shape.keyPlaceholders, VERSION_PLACEHOLDER].join(', ')})`;
  const newer = `${incoming(CLAIM_VERSION_COLUMN)} > ${target}.${v}`;
  // Owners first: assignments run left to right, and they compare with the stored version.
  const assignments = [...owners.map((o) => `${quoteIdent(o)} = IF(${newer}, ${incoming(o)}, ${target}.${quoteIdent(o)})`), `${v} = GREATEST(${target}.${v}, ${incoming(CLAIM_VERSION_COLUMN)})`];
  const values: BoundValue[] = [];
  for (const r of rows) {
    checkWidth(claim, shape, r);
    values.push(...r.values.map(bound), ...r.owner.map(bound), r.version.toString());
  }
  return {
    sql:
      `INSERT INTO ${target} (${quoteList([...claim.columns, ...owners, CLAIM_VERSION_COLUMN])}) VALUES ${new Array(rows.length).fill(one).join(', ')}` +
      (alias ? ` AS ${quoteIdent(ROW_ALIAS)}` : '') +
      ` ON DUPLICATE KEY UPDATE ${assignments.join(', ')}`,
    values,
  };
}

/**
 * The WHERE condition selecting the rows that hold a claimed value at an older version than the
 * claim, other than the claim's owner: they give way to it (the older claimant of a value loses,
 * whether the newer one still holds it or gave it up since). `spared`: keys (as the server returned
 * them) left out although they match.
 */
export function heldBelowClaims(shape: TableShape, claim: ClaimShape, rows: readonly ClaimRow[], spared: readonly (readonly SqlValue[])[] = []): Statement {
  const version = quoteIdent(shape.versionColumn);
  const key = `(${shape.primaryKey.map((k, i) => `${quoteIdent(k)} = ${columnPlaceholder(shape.keyPlaceholders[i]!)}`).join(' AND ')})`;
  const one = `(${claim.columns.map((c, i) => `${quoteIdent(c)} = ${columnPlaceholder(claim.placeholders[i]!)}`).join(' AND ')} AND ${version} < ${VERSION_PLACEHOLDER} AND NOT ${key})`;
  const values: BoundValue[] = [];
  for (const r of rows) {
    checkWidth(claim, shape, r);
    values.push(...r.values.map(bound), r.version.toString(), ...r.owner.map(bound));
  }
  const held = new Array(rows.length).fill(one).join(' OR ');
  if (spared.length === 0) return { sql: held, values };
  for (const k of spared) {
    if (k.length !== shape.primaryKey.length) throw new Error(`a spared key has ${k.length} values, the statement binds ${shape.primaryKey.length}`);
    values.push(...k.map(bound));
  }
  return { sql: `(${held}) AND NOT (${new Array(spared.length).fill(key).join(' OR ')})`, values };
}

/** The rows heldBelowClaims selects, locked: their primary-key columns and `_lww_v` (version as text). */
export function rowsBelowClaims(shape: TableShape, claim: ClaimShape, rows: readonly ClaimRow[]): Statement {
  const where = heldBelowClaims(shape, claim, rows);
  const cols = [...shape.primaryKey.map(quoteIdent), `CAST(${quoteIdent(shape.versionColumn)} AS CHAR) AS ${quoteIdent('_lww_v')}`];
  return { sql: `SELECT ${cols.join(', ')} FROM ${quoteTable(shape.schema, shape.table)} WHERE ${where.sql} FOR UPDATE`, values: where.values };
}

/** Deletes the rows heldBelowClaims selects (after tombstoneRowsWhere gave each its tombstone). */
export function deleteBelowClaims(shape: TableShape, claim: ClaimShape, rows: readonly ClaimRow[], spared: readonly (readonly SqlValue[])[] = []): Statement {
  const where = heldBelowClaims(shape, claim, rows, spared);
  return { sql: `DELETE FROM ${quoteTable(shape.schema, shape.table)} WHERE ${where.sql}`, values: where.values };
}

/**
 * Which incoming rows (by position, `_lww_i`) a stored claim of their value beats: a claim by
 * another row at a newer version. A locking read, so a claim committed meanwhile is seen. Rows:
 * the value, the row's key, its version.
 */
export function beatenByClaims(shape: TableShape, claim: ClaimShape, rows: readonly ClaimRow[]): Statement {
  const target = quoteTable(claim.metaSchema, claim.claimTable);
  const owners = claimOwnerColumns(shape.primaryKey);
  const names = [INDEX_COLUMN, ...claim.columns.map((_, i) => `_lww_u${i}`), ...shape.primaryKey.map((_, i) => `_lww_k${i}`), '_lww_v'];
  const exprs = ['CAST(? AS SIGNED)', ...claim.placeholders, ...shape.keyPlaceholders, VERSION_PLACEHOLDER];
  const ref = (n: string) => `${quoteIdent(ROW_ALIAS)}.${quoteIdent(n)}`;
  const on = claim.columns.map((c, i) => `${target}.${quoteIdent(c)} = ${ref(`_lww_u${i}`)}`).join(' AND ');
  const same = owners.map((o, i) => `${target}.${quoteIdent(o)} = ${ref(`_lww_k${i}`)}`).join(' AND ');
  const values: BoundValue[] = [];
  rows.forEach((r, i) => {
    checkWidth(claim, shape, r);
    values.push(String(i), ...r.values.map(bound), ...r.owner.map(bound), r.version.toString());
  });
  return {
    sql:
      `SELECT ${ref(INDEX_COLUMN)} AS ${quoteIdent(INDEX_COLUMN)} FROM (${derivedRows(names, exprs, rows.length)}) AS ${quoteIdent(ROW_ALIAS)}` +
      ` JOIN ${target} ON ${on} WHERE ${target}.${quoteIdent(CLAIM_VERSION_COLUMN)} > ${ref('_lww_v')} AND NOT (${same}) LOCK IN SHARE MODE`,
    values,
  };
}

/** Garbage collection: claims older than the horizon (no write that old can still arrive), a bounded chunk. */
export function deleteClaimsBelowSql(metaSchema: string, claimTable: string, limit: number): string {
  return `DELETE FROM ${quoteTable(metaSchema, claimTable)} WHERE ${quoteIdent(CLAIM_VERSION_COLUMN)} < CAST(? AS DECIMAL(20,0)) LIMIT ${Math.max(1, Math.floor(limit))}`;
}
