// Turns a shape-validated source transaction into key operations against known tables: checks every
// change against the table's metadata and converts values, so a bad transaction is refused whole
// before anything is written. An update that changes the primary key becomes delete + upsert.
import { InvalidChangeError, UnknownColumnError } from '../errors.ts';
import type { Row, RowChange, SourceTransaction } from '../model/change.ts';
import type { ColumnMeta, TableMeta } from '../model/table.ts';
import { keyPart, type SqlValue, toSqlValue, ValueError } from './values.ts';

export interface KeyOp {
  kind: 'upsert' | 'delete';
  meta: TableMeta;
  key: SqlValue[];
  keyId: string;
  version: bigint;
  /** Upserts: values of meta.writableColumns, version last (as a decimal string). */
  row?: SqlValue[];
  sourceId: string;
}

export interface PreparedTransaction {
  sourceId: string;
  position: string;
  ops: KeyOp[];
  /** Highest version in the transaction (recorded with the checkpoint). */
  maxVersion: bigint;
  bytes: number;
}

export function keyIdOf(key: readonly SqlValue[]): string {
  return key.map(keyPart).join('\u0001');
}

function approxBytes(v: SqlValue): number {
  if (v === null) return 1;
  if (typeof v === 'number') return 8;
  if (typeof v === 'string') return v.length * 2;
  return v.length;
}

/** Column lookups per table, built once per metadata object (hot path: every value of every change). */
const columnsByName = new WeakMap<TableMeta, Map<string, ColumnMeta>>();
function columnMap(meta: TableMeta): Map<string, ColumnMeta> {
  let m = columnsByName.get(meta);
  if (!m) {
    m = new Map(meta.columns.map((c) => [c.name, c]));
    columnsByName.set(meta, m);
  }
  return m;
}

function convert(meta: TableMeta, index: number, change: RowChange, image: 'before' | 'after', column: string, value: unknown): SqlValue {
  const col = columnMap(meta).get(column)!;
  try {
    return toSqlValue(col, value);
  } catch (err) {
    if (err instanceof ValueError) {
      throw new InvalidChangeError(
        `change #${index} (${meta.schema}.${meta.table}, ${change.op}): ${image}.${column}: ${err.message}`,
        index,
        `${image}.${column}`,
      );
    }
    throw err;
  }
}

function checkColumns(meta: TableMeta, index: number, image: 'before' | 'after', row: Row): void {
  const columns = columnMap(meta);
  for (const name in row) {
    if (!columns.has(name)) throw new UnknownColumnError(meta.schema, meta.table, name, `change #${index}, ${image} image`);
  }
}

function keyOf(meta: TableMeta, index: number, change: RowChange, image: 'before' | 'after', row: Row): SqlValue[] {
  return meta.primaryKey.map((k) => {
    if (!(k in row) || row[k] === null || row[k] === undefined) {
      throw new InvalidChangeError(
        `change #${index} (${meta.schema}.${meta.table}, ${change.op}): ${image} image lacks primary-key column ${k}`,
        index,
        `${image}.${k}`,
      );
    }
    return convert(meta, index, change, image, k, row[k]);
  });
}

function fullRow(meta: TableMeta, index: number, change: RowChange, row: Row): SqlValue[] {
  const values: SqlValue[] = [];
  for (const name of meta.writableColumns) {
    if (name === meta.versionColumn) {
      values.push(change.version.toString());
      continue;
    }
    if (!(name in row)) {
      throw new InvalidChangeError(
        `change #${index} (${meta.schema}.${meta.table}, ${change.op}): after image lacks column ${name}; the sink needs full row images (binlog_row_image=FULL)`,
        index,
        `after.${name}`,
      );
    }
    values.push(convert(meta, index, change, 'after', name, row[name]));
  }
  return values;
}

/** Validates a transaction against table metadata and expands it into key operations. */
export function prepareTransaction(txn: SourceTransaction, metaOf: (change: RowChange) => TableMeta): PreparedTransaction {
  const ops: KeyOp[] = [];
  let maxVersion = 0n;
  let bytes = 0;
  txn.changes.forEach((change, index) => {
    const meta = metaOf(change);
    if (change.version > maxVersion) maxVersion = change.version;
    if (change.before) checkColumns(meta, index, 'before', change.before);
    if (change.after) checkColumns(meta, index, 'after', change.after);
    const base = { meta, version: change.version, sourceId: txn.sourceId };
    if (change.op === 'delete') {
      const key = keyOf(meta, index, change, 'before', change.before!);
      ops.push({ ...base, kind: 'delete', key, keyId: keyIdOf(key) });
      bytes += key.reduce<number>((n, v) => n + approxBytes(v), 16);
      return;
    }
    const key = keyOf(meta, index, change, 'after', change.after!);
    const row = fullRow(meta, index, change, change.after!);
    const keyId = keyIdOf(key);
    if (change.op === 'update' && change.before) {
      const oldKey = keyOf(meta, index, change, 'before', change.before);
      const oldKeyId = keyIdOf(oldKey);
      if (oldKeyId !== keyId) ops.push({ ...base, kind: 'delete', key: oldKey, keyId: oldKeyId });
    }
    ops.push({ ...base, kind: 'upsert', key, keyId, row });
    bytes += row.reduce<number>((n, v) => n + approxBytes(v), 16);
  });
  return { sourceId: txn.sourceId, position: txn.position, ops, maxVersion, bytes };
}
