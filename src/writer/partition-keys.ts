// What the partitioner (partition.ts) is given for the sink's key operations: the hashes of every
// unique key of the source change an operation came from (primary and secondary, before and after
// images, values converted as the sink writes them, so two spellings of a value convert alike), and
// per window the foreign-key links between its tables. Pure.
import type { RowChange, SourceTransaction } from '../model/change.ts';
import type { ColumnMeta, TableMeta } from '../model/table.ts';
import { tableKey } from '../model/table.ts';
import { fnv1a, keyHashes, partitionByHashes } from './partition.ts';
import type { KeyOp, PreparedTransaction } from './prepare.ts';
import { toSqlValue } from './values.ts';

interface KeyColumns {
  /** Every unique key, primary key first, as column-name lists. */
  keys: string[][];
  /** Each column of those keys once, with its metadata when the table has it. */
  columns: Array<{ name: string; col: ColumnMeta | undefined }>;
}

const keyColumnsOf = new WeakMap<TableMeta, KeyColumns>();

/** Worked out once per metadata object: this runs for every change under parallel apply. */
function keyColumns(meta: TableMeta): KeyColumns {
  let k = keyColumnsOf.get(meta);
  if (!k) {
    const keys = [meta.primaryKey, ...Object.values(meta.uniqueKeys)];
    const names = [...new Set(keys.flat())];
    k = { keys, columns: names.map((name) => ({ name, col: meta.columns.find((c) => c.name === name) })) };
    keyColumnsOf.set(meta, k);
  }
  return k;
}

function uniqueKeys(meta: TableMeta): string[][] {
  return keyColumns(meta).keys;
}

/** The unique-key columns of an image, converted as the sink writes them (the raw value when it does not convert). */
function keyImage(meta: TableMeta, image: Readonly<Record<string, unknown>> | null | undefined): Record<string, unknown> | null {
  if (!image) return null;
  const out: Record<string, unknown> = {};
  for (const { name, col } of keyColumns(meta).columns) {
    const raw = image[name];
    try {
      out[name] = col ? toSqlValue(col, raw) : raw;
    } catch {
      out[name] = raw;
    }
  }
  return out;
}

/** Sets each operation's partition keys: the unique-key hashes of its change (both halves of a key move share them). */
export function setPartitionKeys(txn: SourceTransaction, prepared: PreparedTransaction): void {
  let last = -1;
  let hashes: number[] = [];
  for (const op of prepared.ops) {
    if (op.change !== last) {
      last = op.change;
      const change: RowChange = txn.changes[op.change]!;
      const meta = op.meta;
      hashes = keyHashes({
        table: `${meta.schema}.${meta.table}`,
        uniqueKeys: uniqueKeys(meta),
        before: keyImage(meta, change.before),
        after: keyImage(meta, change.after),
      });
    }
    op.partitionKeys = hashes;
  }
}

/**
 * Splits a window's operations over `workers` (source order kept within each). Rows sharing a
 * unique key stay together (partition.ts); so do all rows of tables linked by a foreign key inside
 * the window, as a whole: a child row and the parent it names must commit in source order, and
 * their keys do not say which parent row a child names.
 */
export function splitOps(ops: readonly KeyOp[], workers: number): KeyOp[][] {
  if (workers === 1) return [[...ops]];
  const tables = new Set<string>();
  for (const op of ops) tables.add(tableKey(op.meta.schema, op.meta.table));
  const parentsInWindow = new Set<string>();
  const linked = new Map<TableMeta, number[]>();
  for (const op of ops) {
    for (const p of op.meta.parents ?? []) if (tables.has(p)) parentsInWindow.add(p);
  }
  const linksOf = (meta: TableMeta): number[] => {
    let links = linked.get(meta);
    if (!links) {
      const self = tableKey(meta.schema, meta.table);
      links = [...(meta.parents ?? []).filter((p) => tables.has(p)), ...(parentsInWindow.has(self) ? [self] : [])].map((t) => fnv1a(`fk\u0000${t}`));
      linked.set(meta, links);
    }
    return links;
  };
  const hashes = ops.map((op) => {
    const links = linksOf(op.meta);
    // Set by the sink for every operation; without them the key itself keeps a key's changes together.
    const own = op.partitionKeys ?? [fnv1a(`${op.meta.schema}.${op.meta.table}\u0000${op.keyId}`)];
    return links.length === 0 ? own : [...own, ...links];
  });
  const { rowsOf } = partitionByHashes(hashes, workers);
  return rowsOf.map((idx) => idx.map((i) => ops[i]!));
}
