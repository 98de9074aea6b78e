// Groups a batch's key operations per table and key. LWW is commutative per key, so only the
// highest upsert and the highest delete of each key matter; keeping both makes the resulting row
// and tombstone independent of how changes were split into batches. Every upsert is kept too, in
// source order, for the one case where order matters: rows that clash on a secondary UNIQUE key
// inside one batch (a unique swap) are replayed one at a time in source order.
import type { Row } from '../model/change.ts';
import type { TableMeta } from '../model/table.ts';
import { tableKey } from '../model/table.ts';
import type { ClaimRelease, KeyOp } from './prepare.ts';
import type { SqlValue } from './values.ts';

export interface PlannedUpsert {
  /** Position of the change in the batch (source order). */
  seq: number;
  row: SqlValue[];
  version: bigint;
  sourceId: string;
  /** An update that kept its key (KeyOp.heldRow). */
  heldRow?: true;
  /** An update's before image (KeyOp.before). */
  before?: Row;
}

export interface KeyPlan {
  key: SqlValue[];
  upsert?: PlannedUpsert;
  /** Every upsert of the key in this batch, in source order ('version' mode only). */
  history: PlannedUpsert[];
  deleteVersion?: bigint;
  /** The highest delete is a primary-key change: the key the row moved to (KeyOp.movedTo). */
  movedTo?: SqlValue[];
  /** Delete operations of the key in this batch (a key change counts once with its trigger's tombstone). */
  deletes?: number;
}

export interface TablePlan {
  meta: TableMeta;
  keys: Map<string, KeyPlan>;
  /** Upserts that arrived after a newer one of the same key in this batch: LWW conflicts (stale). */
  staleInBatch: number;
  /** Upserts replaced by a later, newer one of the same key in this batch (ordinary successive writes). */
  coalesced: number;
  /** UNIQUE values the batch's rows gave up (LWW: recorded as claims before the table's upserts). */
  releases: ClaimRelease[];
}

function plannedUpsert(op: KeyOp, seq: number): PlannedUpsert {
  const up: PlannedUpsert = { seq, row: op.row!, version: op.version, sourceId: op.sourceId };
  if (op.heldRow) up.heldRow = true;
  if (op.before) up.before = op.before;
  return up;
}

/**
 * Coalesces operations in stream order. `version` (LWW): the highest upsert and the highest delete
 * per key, the later one on equal versions. `arrival` (what a non-LWW sink does): the last
 * operation per key, whatever its version. Keys are grouped by their JS text; keys the server
 * considers equal but JS does not ('A'/'a', 1.5/'1.50') stay apart here and meet in the server's
 * statements, which are correct for any grouping.
 */
export function coalesce(ops: Iterable<KeyOp>, order: 'version' | 'arrival' = 'version'): TablePlan[] {
  const tables = new Map<string, TablePlan>();
  let seq = 0;
  // Consecutive operations mostly share a metadata object: their plan without a key text per operation.
  let lastMeta: TableMeta | undefined;
  let lastPlan: TablePlan | undefined;
  for (const op of ops) {
    seq++;
    let plan = op.meta === lastMeta ? lastPlan : undefined;
    if (!plan) {
      const tk = tableKey(op.meta.schema, op.meta.table);
      plan = tables.get(tk);
      if (!plan) {
        plan = { meta: op.meta, keys: new Map(), staleInBatch: 0, coalesced: 0, releases: [] };
        tables.set(tk, plan);
      }
      lastMeta = op.meta;
      lastPlan = plan;
    }
    if (op.releases) plan.releases.push(...op.releases);
    let k = plan.keys.get(op.keyId);
    if (!k) {
      k = { key: op.key, history: [] };
      plan.keys.set(op.keyId, k);
    }
    if (order === 'arrival') {
      if (op.kind === 'delete') {
        k.upsert = undefined;
        k.deleteVersion = op.version;
      } else {
        k.upsert = plannedUpsert(op, seq);
        k.deleteVersion = undefined;
      }
    } else if (op.kind === 'delete') {
      if (k.deleteVersion === undefined || op.version !== k.deleteVersion) k.deletes = (k.deletes ?? 0) + 1;
      if (k.deleteVersion === undefined || op.version > k.deleteVersion) {
        k.deleteVersion = op.version;
        if (op.movedTo) k.movedTo = op.movedTo;
        else delete k.movedTo;
      } else if (op.version === k.deleteVersion && op.movedTo) {
        // The same delete seen twice (a key change and its trigger's tombstone): it is a move.
        k.movedTo = op.movedTo;
      }
    } else {
      const up = plannedUpsert(op, seq);
      k.history.push(up);
      if (!k.upsert || op.version >= k.upsert.version) {
        if (k.upsert) plan.coalesced++;
        k.upsert = up;
      } else {
        plan.staleInBatch++;
      }
    }
  }
  // A fixed table order keeps lock acquisition order stable across concurrent sinks.
  return parentsFirst([...tables.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, p]) => p));
}

/**
 * Orders plans so that a table comes after every table of the batch its foreign keys reference
 * (parents first; otherwise the given order). The sink writes rows in this order and deletes in the
 * reverse, so a parent inserted and a child that names it in one batch, or a child deleted and its
 * parent, pass the foreign-key checks as they did on the source. Tables on a reference cycle get a
 * fixed order all the same (the first one met goes after the others); a cycle's rows may then need
 * the peer's checks relaxed, which the sink does not do: such a batch stops loudly.
 */
export function parentsFirst(plans: readonly TablePlan[]): TablePlan[] {
  const byKey = new Map(plans.map((p) => [tableKey(p.meta.schema, p.meta.table), p]));
  const out: TablePlan[] = [];
  const state = new Map<TablePlan, 'visiting' | 'done'>();
  const visit = (p: TablePlan) => {
    if (state.has(p)) return;
    state.set(p, 'visiting');
    for (const parent of p.meta.parents ?? []) {
      const q = byKey.get(parent);
      if (q) visit(q);
    }
    state.set(p, 'done');
    out.push(p);
  };
  for (const p of plans) visit(p);
  return out;
}
