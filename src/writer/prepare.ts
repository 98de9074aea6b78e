// Turns a shape-validated source transaction into key operations against known tables: checks every
// change against the table's metadata and converts values, so a bad transaction is refused whole
// before anything is written. An update that changes the primary key becomes delete + upsert.
import { InvalidChangeError, UnknownColumnError } from '../errors.ts';
import type { Row, RowChange, SourceTransaction } from '../model/change.ts';
import { TypedJson } from '../model/json.ts';
import { compositeKeyText } from '../model/key-text.ts';
import type { ClaimIndex, ColumnMeta, TableMeta } from '../model/table.ts';
import { ColumnDefault } from '../sql/dml.ts';
import { keyPart, type SqlValue, toSqlValue, ValueError } from './values.ts';
import { EnumErrorValue } from '../model/enum-error.ts';
import { parseVersion } from '../model/version.ts';

export interface KeyOp {
  kind: 'upsert' | 'delete';
  meta: TableMeta;
  key: SqlValue[];
  keyId: string;
  version: bigint;
  /** Upserts: values of meta.writableColumns, version last (as a decimal string). */
  row?: SqlValue[];
  sourceId: string;
  /**
   * Deletes split off an update that changed the key as JS sees it: the new key. Whether the server
   * sees a change (not for 'A' → 'a' under a case-insensitive collation) is asked before applying.
   */
  movedTo?: SqlValue[];
  /** Index of the change in its source transaction (the partitioner hashes the change's images). */
  change: number;
  /** Hashes of the change's unique keys, set by the sink when it applies in parallel (see partition.ts). */
  partitionKeys?: number[];
  /** UNIQUE values the change's row gave up, read from its before image (see ClaimRelease). */
  releases?: ClaimRelease[];
  /** Upserts: an update that kept its key, so the source held the row before it (apply.ts guardCollectedHorizon). */
  heldRow?: true;
  /** Upserts of an update: its before image, as given (foreign-keys.ts: did the source's server take an ON UPDATE action). */
  before?: Row;
}

/**
 * A UNIQUE value a row held and gave up (its update moved off the value, or its delete removed the
 * row): the claim it leaves, as the origin's triggers recorded it in their own claim table. Read
 * from the change's before image, which carries the value, the key and the version it was held at.
 */
export interface ClaimRelease {
  claim: ClaimIndex;
  values: SqlValue[];
  owner: SqlValue[];
  version: bigint;
  sourceId: string;
}

export interface PreparedTransaction {
  sourceId: string;
  position: string;
  ops: KeyOp[];
  /** Highest version in the transaction (recorded with the checkpoint). */
  maxVersion: bigint;
  /** The source's commit time (ms), when known (recorded with the checkpoint, see SourceTransaction). */
  sourceTimeMs?: number;
  bytes: number;
}

export function keyIdOf(key: readonly SqlValue[]): string {
  if (key.length === 1) return keyPart(key[0]!);
  return compositeKeyText(key.map(keyPart));
}

function approxBytes(v: SqlValue): number {
  if (v === null || v instanceof ColumnDefault) return 1;
  if (typeof v === 'number') return 8;
  if (typeof v === 'string') return v.length * 2;
  if (v instanceof TypedJson) return v.text.length * 2 + v.scalars.length * 64;
  return v.length;
}

/** Per-table lookups built once per metadata object: this is the hot path (every value of every change). */
interface TablePlan {
  columns: Map<string, ColumnMeta>;
  /** Writable columns except the version column, in writableColumns order. */
  values: ColumnMeta[];
  /** Positions of the primary-key columns in `values`, or null when a key column is not writable. */
  keyIndexes: number[] | null;
}

const plans = new WeakMap<TableMeta, TablePlan>();
function planOf(meta: TableMeta): TablePlan {
  let p = plans.get(meta);
  if (!p) {
    const columns = new Map(meta.columns.map((c) => [c.name, c]));
    const values = meta.writableColumns.filter((c) => c !== meta.versionColumn).map((c) => columns.get(c)!);
    const idx = meta.primaryKey.map((k) => values.findIndex((c) => c.name === k));
    p = { columns, values, keyIndexes: idx.every((i) => i >= 0) ? idx : null };
    plans.set(meta, p);
  }
  return p;
}

function convert(meta: TableMeta, index: number, change: RowChange, image: 'before' | 'after', col: ColumnMeta, value: unknown): SqlValue {
  // A before image only finds the row and the UNIQUE value it gives up: the ENUM error value compares
  // as the '' it reads as. Writing it (an after image) stays refused (values.ts).
  if (image === 'before' && value instanceof EnumErrorValue) return '';
  try {
    return toSqlValue(col, value);
  } catch (err) {
    if (err instanceof ValueError) {
      throw new InvalidChangeError(
        `change #${index} (${meta.schema}.${meta.table}, ${change.op}): ${image}.${col.name}: ${err.message}`,
        index,
        `${image}.${col.name}`,
      );
    }
    throw err;
  }
}

function checkColumns(meta: TableMeta, columns: Map<string, ColumnMeta>, index: number, image: 'before' | 'after', row: Row): void {
  for (const name in row) {
    if (!columns.has(name)) throw new UnknownColumnError(meta.schema, meta.table, name, `change #${index}, ${image} image`);
  }
}

function missingKey(meta: TableMeta, index: number, change: RowChange, image: 'before' | 'after', k: string): InvalidChangeError {
  return new InvalidChangeError(
    `change #${index} (${meta.schema}.${meta.table}, ${change.op}): ${image} image lacks primary-key column ${k}`,
    index,
    `${image}.${k}`,
  );
}

function keyOf(meta: TableMeta, index: number, change: RowChange, image: 'before' | 'after', row: Row, columns = planOf(meta).columns): SqlValue[] {
  const key: SqlValue[] = new Array(meta.primaryKey.length);
  for (let i = 0; i < meta.primaryKey.length; i++) {
    const k = meta.primaryKey[i]!;
    const v = row[k];
    if (v === null || v === undefined) throw missingKey(meta, index, change, image, k);
    key[i] = convert(meta, index, change, image, columns.get(k)!, v);
  }
  return key;
}

/**
 * A written target column the after image lacks. When the change says the source table did not
 * have the column when it wrote the row (sourceColumns: schema changes reach the nodes one by one),
 * the column takes its default, as the source's own ALTER TABLE … ADD COLUMN gives that row: the
 * keyword DEFAULT in the row's VALUES tuple, which the upsert's guarded assignment takes for a newer
 * row. Refused: a key, UNIQUE or version column (the sink needs their values), a NOT NULL column
 * without a default, and every column of an image that is merely incomplete (the source had it).
 */
function missingColumn(meta: TableMeta, index: number, change: RowChange, col: ColumnMeta): SqlValue {
  const where = `change #${index} (${meta.schema}.${meta.table}, ${change.op})`;
  const sourceColumns = change.sourceColumns;
  if (!sourceColumns || sourceColumns.includes(col.name)) {
    throw new InvalidChangeError(`${where}: after image lacks column ${col.name}; the sink needs full row images (binlog_row_image=FULL)`, index, `after.${col.name}`);
  }
  const remedy = `the source table had no column ${col.name} when it wrote this row (its ALTER TABLE has not reached it yet)`;
  if (col.name === meta.versionColumn || meta.primaryKey.includes(col.name) || Object.values(meta.uniqueKeys).some((k) => k.includes(col.name))) {
    throw new InvalidChangeError(
      `${where}: ${remedy}, and the target's ${col.name} is part of a primary or UNIQUE key (or the version column): the sink cannot give it a default value; add the column to the source the same way, then restart`,
      index,
      `after.${col.name}`,
    );
  }
  if (col.hasDefault !== true) {
    throw new InvalidChangeError(
      `${where}: ${remedy}, and the target's ${col.name} is NOT NULL without a default (or AUTO_INCREMENT): the sink cannot give the row the value the source's ALTER will; give ${meta.schema}.${meta.table}.${col.name} a default on every node (ALTER TABLE … ALTER COLUMN ${col.name} SET DEFAULT …), or ALTER the source first, then restart`,
      index,
      `after.${col.name}`,
    );
  }
  return ColumnDefault.value;
}

/** The row's written values (plan.values), version last. */
function fullRow(meta: TableMeta, cols: readonly ColumnMeta[], index: number, change: RowChange, row: Row): SqlValue[] {
  const values: SqlValue[] = new Array(cols.length + 1);
  for (let i = 0; i < cols.length; i++) {
    const col = cols[i]!;
    const v = row[col.name];
    if (v === undefined && !(col.name in row)) {
      values[i] = missingColumn(meta, index, change, col);
      continue;
    }
    values[i] = convert(meta, index, change, 'after', col, v);
  }
  values[cols.length] = change.version.toString();
  return values;
}

function rowBytes(values: readonly SqlValue[]): number {
  let n = 16;
  for (const v of values) n += approxBytes(v);
  return n;
}

/** Validates a transaction against table metadata and expands it into key operations. */
export function prepareTransaction(txn: SourceTransaction, metaOf: (change: RowChange, index: number) => TableMeta): PreparedTransaction {
  const ops: KeyOp[] = [];
  let maxVersion = 0n;
  let bytes = 0;
  const sourceId = txn.sourceId;
  // Consecutive changes of one table (the common case) share one plan lookup.
  let meta: TableMeta | undefined;
  let plan: TablePlan | undefined;
  for (let index = 0; index < txn.changes.length; index++) {
    const change = txn.changes[index]!;
    const m = metaOf(change, index);
    if (m !== meta) {
      meta = m;
      plan = planOf(m);
    }
    const { columns, keyIndexes } = plan!;
    const version = change.version;
    if (version > maxVersion) maxVersion = version;
    if (change.before) checkColumns(m, columns, index, 'before', change.before);
    if (change.after) checkColumns(m, columns, index, 'after', change.after);
    if (change.op === 'delete') {
      const key = keyOf(m, index, change, 'before', change.before!, columns);
      const op: KeyOp = { kind: 'delete', meta: m, key, keyId: keyIdOf(key), version, sourceId, change: index };
      if (m.claims && m.claims.length > 0) {
        const releases = releasesOf(m, index, change, sourceId);
        if (releases.length > 0) op.releases = releases;
      }
      ops.push(op);
      bytes += rowBytes(key);
      continue;
    }
    const after = change.after!;
    // The version column is written from change.version: one given in the image must be the same.
    const stamped = after[m.versionColumn];
    if (typeof stamped === 'number' && !Number.isSafeInteger(stamped)) {
      throw new InvalidChangeError(
        `change #${index} (${m.schema}.${m.table}, ${change.op}): after.${m.versionColumn} is the JS number ${stamped}, which cannot hold a 64-bit version exactly (a decoder that read it with JSON.parse?); give it as a bigint or a decimal string, or leave it out (the sink writes the change's version)`,
        index,
        `after.${m.versionColumn}`,
      );
    }
    if (stamped !== undefined && stamped !== null && !sameVersion(stamped, version)) {
      throw new InvalidChangeError(
        `change #${index} (${m.schema}.${m.table}, ${change.op}): after.${m.versionColumn} is ${String(stamped)} but the change's version is ${version}; the sink writes the version, so give one or make them agree`,
        index,
        `after.${m.versionColumn}`,
      );
    }
    let key: SqlValue[];
    let row: SqlValue[];
    if (keyIndexes) {
      // Key values are taken from the converted row, after checking they are present.
      const pk = m.primaryKey;
      for (let i = 0; i < pk.length; i++) {
        const v = after[pk[i]!];
        if (v === null || v === undefined) throw missingKey(m, index, change, 'after', pk[i]!);
      }
      row = fullRow(m, plan!.values, index, change, after);
      key = new Array(keyIndexes.length);
      for (let i = 0; i < keyIndexes.length; i++) key[i] = row[keyIndexes[i]!]!;
    } else {
      key = keyOf(m, index, change, 'after', after, columns);
      row = fullRow(m, plan!.values, index, change, after);
    }
    pushUpsert(ops, m, columns, index, change, key, row, sourceId);
    bytes += rowBytes(row);
  }
  const prepared: PreparedTransaction = { sourceId: txn.sourceId, position: txn.position, ops, maxVersion, bytes };
  if (txn.sourceTimeMs !== undefined) prepared.sourceTimeMs = txn.sourceTimeMs;
  return prepared;
}

function sameVersion(stamped: unknown, version: bigint): boolean {
  try {
    return parseVersion(typeof stamped === 'number' ? stamped : String(stamped)) === version;
  } catch {
    return false;
  }
}

function pushUpsert(ops: KeyOp[], meta: TableMeta, columns: Map<string, ColumnMeta>, index: number, change: RowChange, key: SqlValue[], row: SqlValue[], sourceId: string): void {
  const keyId = keyIdOf(key);
  let heldRow = false;
  if (change.op === 'update' && change.before) {
    const oldKey = keyOf(meta, index, change, 'before', change.before, columns);
    const oldKeyId = keyIdOf(oldKey);
    if (oldKeyId !== keyId) ops.push({ kind: 'delete', meta, key: oldKey, keyId: oldKeyId, version: change.version, sourceId, movedTo: key, change: index });
    else heldRow = true;
  }
  const op: KeyOp = { kind: 'upsert', meta, key, keyId, row, version: change.version, sourceId, change: index };
  if (heldRow) op.heldRow = true;
  if (change.op === 'update' && change.before) op.before = change.before;
  if (change.op === 'update' && change.before && meta.claims && meta.claims.length > 0) {
    const releases = releasesOf(meta, index, change, sourceId);
    if (releases.length > 0) op.releases = releases;
  }
  ops.push(op);
}

/**
 * The UNIQUE values an update or delete gave up, for the keys with a claim table: every value of a
 * delete's before image, and an update's values that changed (by bytes: a change the collation
 * calls equal, 'x' to 'X', leaves a claim the row itself still holds, which displaces nothing).
 * A before image without the key's columns or the version (a source that sends keys only) gives
 * none: such a source gets the clash resolution of the rows the target still holds, no more.
 */
function releasesOf(meta: TableMeta, index: number, change: RowChange, sourceId: string): ClaimRelease[] {
  const before = change.before!;
  const stamp = before[meta.versionColumn];
  if (stamp === null || stamp === undefined) return [];
  const columns = planOf(meta).columns;
  const out: ClaimRelease[] = [];
  for (const claim of meta.claims!) {
    if (claim.columns.some((c) => before[c] === null || before[c] === undefined)) continue;
    const values = claim.columns.map((c) => convert(meta, index, change, 'before', columns.get(c)!, before[c]));
    if (change.op === 'update') {
      const after = change.after!;
      if (claim.columns.every((c) => c in after)) {
        const now = claim.columns.map((c) => (after[c] === null ? null : convert(meta, index, change, 'after', columns.get(c)!, after[c])));
        if (now.every((v, i) => v !== null && keyIdOf([v]) === keyIdOf([values[i]!]))) continue;
      }
    }
    const text = String(stamp);
    if (!/^[0-9]{1,20}$/.test(text)) {
      throw new InvalidChangeError(`change #${index} (${meta.schema}.${meta.table}, ${change.op}): before.${meta.versionColumn}: not a version: ${text}`, index, `before.${meta.versionColumn}`);
    }
    // The claim is recorded at this version and beats every older holder of the value: the row the
    // change replaced is older than the change, always (a larger one would be trusted blindly).
    const held = BigInt(text);
    if (held >= change.version) {
      throw new InvalidChangeError(
        `change #${index} (${meta.schema}.${meta.table}, ${change.op}): before.${meta.versionColumn} ${text} is not below the change's version ${change.version}; the row a change replaces is older than it`,
        index,
        `before.${meta.versionColumn}`,
      );
    }
    out.push({ claim, values, owner: keyOf(meta, index, change, 'before', before), version: held, sourceId });
  }
  return out;
}
