// Last-write-wins across a secondary UNIQUE key when the newer claimant gave the value up again:
// the claims a batch's rows left (read from before images, see prepare.ts ClaimRelease) are
// recorded in the key's claim table; rows holding such a value at an older version give way to the
// claim, and incoming rows older than a stored claim of their value lose to it. Without this, the
// outcome of a clash depended on whether the older row met the newer one before it moved off the
// value, which differs by node (a coalesced batch never shows the intermediate claim).
import type { RowDataPacket } from 'mysql2/promise';
import type { ClaimIndex, TableMeta } from '../model/table.ts';
import { beatenByClaims, type ClaimRow, type ClaimShape, deleteBelowClaims, heldBelowClaims, rowsBelowClaims, upsertClaims } from '../sql/claims.ts';
import { guardedDelete, keyPlaceholder, type SqlValue, tombstoneRowsWhere, upsertTombstones } from '../sql/dml.ts';
import { rewrittenKeys } from '../sql/foreign-keys.ts';
import { type ApplyContext, chunks, foreignKeyIo, logConflict, MAX_PARAMS, MAX_ROWS_PER_STATEMENT, ofUpsert, readBack, run, select, shapesOf } from './apply.ts';
import type { KeyPlan } from './coalesce.ts';
import { tombstoneChildrenOfClashLosers } from './foreign-keys.ts';
import type { ClaimRelease } from './prepare.ts';
import type { TableCounters } from './stats.ts';

const claimShapes = new WeakMap<ClaimIndex, ClaimShape>();

function claimShapeOf(meta: TableMeta, claim: ClaimIndex, metaSchema: string): ClaimShape {
  let s = claimShapes.get(claim);
  if (!s || s.metaSchema !== metaSchema) {
    const placeholders = claim.columns.map((c) => keyPlaceholder(meta.columns.find((m) => m.name === c)!));
    s = { metaSchema, claimTable: claim.table, columns: claim.columns, placeholders };
    claimShapes.set(claim, s);
  }
  return s;
}

function perStatement(meta: TableMeta, claim: ClaimIndex): number {
  return Math.max(1, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / (claim.columns.length + meta.primaryKey.length + 2))));
}

/**
 * Records the batch's released claims, then removes every row holding a claimed value at an older
 * version than the claim (other than the claim's owner): tombstone at the row's own version, as a
 * clash with a holder does (apply.ts resolveUniqueClash), logged and counted. A holder whose key
 * the batch writes again newer (`upserts`) is left to its upsert, which overwrites it (and meets
 * the claims itself, withoutClaimLosers): removing it first would take its ON DELETE CASCADE / SET
 * NULL children, which the node that wrote the newer row never removed (harness --schema-gen 114:
 * one node kept the child), as rowsToDelete leaves a parent deleted and written again in one batch.
 */
export async function recordReleases(ctx: ApplyContext, meta: TableMeta, releases: readonly ClaimRelease[], counts: TableCounters, upserts: readonly KeyPlan[] = []): Promise<void> {
  const s = shapesOf(meta, ctx.metaSchema);
  for (const claim of meta.claims ?? []) {
    const mine = releases.filter((r) => r.claim.table === claim.table);
    if (mine.length === 0) continue;
    const shape = claimShapeOf(meta, claim, ctx.metaSchema);
    for (const part of chunks(mine, perStatement(meta, claim))) {
      await run(ctx, `${ctx.metaSchema}.${claim.table}`, upsertClaims(s.table, shape, part, ctx.dialect));
      const found = await select(ctx, s.name, rowsBelowClaims(s.table, shape, part));
      if (found.length === 0) continue;
      const keyOf = (h: RowDataPacket) => meta.primaryKey.map((c) => h[c] as SqlValue);
      const rewritten = await rewrittenNewer(ctx, meta, found, upserts);
      const holders = found.filter((_, i) => !rewritten.has(i));
      if (holders.length === 0) continue;
      const spared = found.filter((_, i) => rewritten.has(i)).map(keyOf);
      await run(ctx, s.name, tombstoneRowsWhere(s.table, s.tomb, heldBelowClaims(s.table, shape, part, spared), ctx.dialect));
      const below = (h: RowDataPacket) => (BigInt(h._lww_v as string) + 1n).toString();
      await tombstoneChildrenOfClashLosers(foreignKeyIo(ctx), meta, holders.map((h) => [...keyOf(h), below(h)]), part[0]!.sourceId, counts);
      const removed = (await run(ctx, s.name, deleteBelowClaims(s.table, shape, part, spared))).affectedRows;
      counts.uniqueClashes += removed;
      for (const h of holders) {
        await logConflict(ctx, meta, {
          sourceId: part[0]!.sourceId,
          reason: `unique key clash: removed by a newer claim of its ${claim.index} value`,
          version: BigInt(h._lww_v as string),
          columns: meta.primaryKey,
          value: (c) => h[c],
        });
      }
    }
  }
}

/** Positions of the holders (key columns, `_lww_v`) whose key an upsert of the batch writes at a newer version, by the server's key equality. */
async function rewrittenNewer(ctx: ApplyContext, meta: TableMeta, holders: readonly RowDataPacket[], upserts: readonly KeyPlan[]): Promise<Set<number>> {
  const out = new Set<number>();
  if (upserts.length === 0) return out;
  const s = shapesOf(meta, ctx.metaSchema);
  const held = holders.map((h) => [...meta.primaryKey.map((c) => h[c] as SqlValue), String(h._lww_v)]);
  const width = meta.primaryKey.length + 1;
  // The statement binds every holder (with its position) and a part of the upserts.
  const per = Math.max(1, Math.floor((MAX_PARAMS - held.length * (width + 1)) / width));
  for (const part of chunks(upserts, Math.min(MAX_ROWS_PER_STATEMENT, per))) {
    const written = part.map((k) => [...k.key, k.upsert!.version.toString()]);
    for (const r of await select(ctx, s.name, rewrittenKeys(s.table, held, written))) out.add(Number(r._lww_i));
  }
  return out;
}

/**
 * The incoming upserts that a stored claim of one of their UNIQUE values beats (another row held
 * the value at a newer version) lose as they would to a newer holder: the key ends deleted at the
 * upsert's version, logged and counted. Returns the keys left to apply.
 */
export async function withoutClaimLosers(ctx: ApplyContext, meta: TableMeta, keys: readonly KeyPlan[], counts: TableCounters): Promise<KeyPlan[]> {
  const s = shapesOf(meta, ctx.metaSchema);
  const lost = new Map<KeyPlan, string>();
  for (const claim of meta.claims ?? []) {
    const idx = claim.columns.map((c) => meta.writableColumns.indexOf(c));
    const candidates: { k: KeyPlan; row: ClaimRow }[] = [];
    for (const k of keys) {
      if (lost.has(k)) continue;
      const up = k.upsert!;
      const values = idx.map((i) => up.row[i]!);
      if (values.some((v) => v === null)) continue;
      candidates.push({ k, row: { values, owner: k.key, version: up.version } });
    }
    const shape = claimShapeOf(meta, claim, ctx.metaSchema);
    for (const part of chunks(candidates, perStatement(meta, claim))) {
      const beaten = await select(ctx, `${ctx.metaSchema}.${claim.table}`, beatenByClaims(s.table, shape, part.map((c) => c.row)));
      for (const b of beaten) lost.set(part[Number(b._lww_i)]!.k, claim.index);
    }
  }
  if (lost.size === 0) return [...keys];
  const losers = [...lost.keys()];
  const stored = await readBack(ctx, meta, losers.map((k) => k.key));
  for (let i = 0; i < losers.length; i++) {
    const k = losers[i]!;
    const up = k.upsert!;
    const st = stored[i]!;
    // Already decided by the key itself: a newer row or tombstone of it is stored.
    if (st.tomb !== undefined && st.tomb >= up.version) {
      counts.skippedByTombstone++;
      continue;
    }
    if (st.row !== undefined && st.row >= up.version) {
      counts.skippedStale++;
      continue;
    }
    const tombRow = [...k.key, up.version.toString()];
    await run(ctx, s.name, upsertTombstones(s.tomb, [tombRow], ctx.dialect));
    await tombstoneChildrenOfClashLosers(foreignKeyIo(ctx), meta, [tombRow], up.sourceId, counts);
    counts.deleted += (await run(ctx, s.name, guardedDelete(s.table, [tombRow]))).affectedRows;
    counts.uniqueClashes++;
    await logConflict(ctx, meta, ofUpsert(meta, up, `unique key clash: removed by a newer claim of its ${lost.get(k)} value`));
  }
  return keys.filter((k) => !lost.has(k));
}
