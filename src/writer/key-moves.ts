// An update whose key changed as JS sees it need not change the key for the server: 'A' → 'a'
// under a case-insensitive collation, DECIMAL 1.5 → '1.50', DATETIME '10:00' → '10:00:00.000000'.
// Applied as delete + upsert with one version, the delete's tombstone would hold back the upsert
// and the row would vanish. The server decides which updates really moved their key (one query
// per table, only for transactions that have such updates); the others lose their delete.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { TableMeta } from '../model/table.ts';
import { sameKeys } from '../sql/dml.ts';
import { shapesOf } from './apply.ts';
import type { KeyOp, PreparedTransaction } from './prepare.ts';

const INTEGER_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint']);
const MAX_PAIRS = 500;

/** Integer keys are normalized to canonical text, so JS text equality is the server's equality. */
function textIsExact(meta: TableMeta): boolean {
  return meta.primaryKey.every((k) => INTEGER_TYPES.has(meta.columns.find((c) => c.name === k)!.dataType));
}

/** Key moves the server must judge; empty (the common case) means nothing to ask. */
export function keyMovesToCheck(txn: PreparedTransaction): KeyOp[] {
  let out: KeyOp[] | undefined;
  for (const o of txn.ops) {
    if (o.kind !== 'delete' || o.movedTo === undefined || textIsExact(o.meta)) continue;
    out ??= [];
    out.push(o);
  }
  // No array per transaction in the common case (no key moves).
  return out ?? NONE;
}

const NONE: KeyOp[] = [];

/** Drops the delete half of updates whose old and new keys are the same key for the server. */
export async function dropUnmovedKeyDeletes(conn: Connection, metaSchema: string, txn: PreparedTransaction, moves: KeyOp[]): Promise<void> {
  const byTable = new Map<TableMeta, KeyOp[]>();
  for (const m of moves) byTable.set(m.meta, [...(byTable.get(m.meta) ?? []), m]);
  const unmoved = new Set<KeyOp>();
  for (const [meta, ops] of byTable) {
    const { table } = shapesOf(meta, metaSchema);
    for (let i = 0; i < ops.length; i += MAX_PAIRS) {
      const part = ops.slice(i, i + MAX_PAIRS);
      const stmt = sameKeys(table, part.map((o) => [...o.key, ...o.movedTo!]));
      const [rows] = await conn.execute<RowDataPacket[]>(stmt.sql, stmt.values);
      part.forEach((o, j) => {
        if (Number(rows[0]![`same${j}`]) === 1) unmoved.add(o);
      });
    }
  }
  if (unmoved.size === 0) return;
  // The update kept its key after all: its upsert is of a row the source held (KeyOp.heldRow).
  const kept = new Set([...unmoved].map((o) => o.change));
  for (const o of txn.ops) if (o.kind === 'upsert' && kept.has(o.change)) o.heldRow = true;
  txn.ops = txn.ops.filter((o) => !unmoved.has(o));
}
