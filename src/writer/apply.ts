// Executes one target transaction: per table, locking read of tombstones, tombstones before
// deletes, guarded deletes, the multi-row LWW upsert, unique-clash detection; then the checkpoint
// advance for every source in the batch; then commit. Counts are returned, never merged here.
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { OwnershipLostError } from '../errors.ts';
import type { TableMeta } from '../model/table.ts';
import { advanceCheckpointSql, readCheckpointSql } from '../sql/checkpoint.ts';
import type { Dialect } from '../sql/dialect.ts';
import {
  deleteRowsUnderTombstoneSql,
  guardedDeleteSql,
  insertConflictSql,
  lwwUpsertSql,
  plainDeleteSql,
  replaceSql,
  selectTombstonesForUpdateSql,
  selectVersionsSql,
  type TableShape,
  type TombstoneShape,
  upsertTombstonesSql,
} from '../sql/dml.ts';
import type { KeyPlan, TablePlan } from './coalesce.ts';
import { keyIdOf } from './prepare.ts';
import { emptyCounters, type TableCounters, upsertOutcome } from './stats.ts';
import { type SqlValue, toSqlValue } from './values.ts';

/** Bound parameters per statement stay below the protocol's 65,535 limit. */
const MAX_PARAMS = 60_000;
const MAX_ROWS_PER_STATEMENT = 1024;
const MAX_KEYS_PER_LOOKUP = 1000;

export interface CheckpointAdvance {
  sourceId: string;
  position: string;
  version: bigint;
  epoch: bigint;
}

export interface ApplyContext {
  conn: Connection;
  dialect: Dialect;
  metaSchema: string;
  /** REPLACE INTO / plain DELETE instead of LWW (the mysqlSinkBypassLWW failpoint). */
  bypass: boolean;
  queryTimeoutMs: number;
}

export interface BatchOutcome {
  tables: Map<string, TableCounters>;
}

/** Thrown with the table whose statement failed, so the caller can report it without values. */
export class StatementError extends Error {
  constructor(
    readonly table: string,
    override readonly cause: unknown,
  ) {
    super(`statement on ${table} failed`);
  }
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function shapeOf(meta: TableMeta): TableShape {
  return { schema: meta.schema, table: meta.table, columns: meta.writableColumns, primaryKey: meta.primaryKey, versionColumn: meta.versionColumn };
}

function tombShapeOf(meta: TableMeta, metaSchema: string): TombstoneShape {
  return { metaSchema, tombstoneTable: meta.tombstoneTable, primaryKey: meta.primaryKey, versionColumn: meta.versionColumn };
}

async function exec(ctx: ApplyContext, table: string, sql: string, values: SqlValue[]): Promise<ResultSetHeader> {
  try {
    const [res] = await ctx.conn.execute<ResultSetHeader>({ sql, timeout: ctx.queryTimeoutMs }, values);
    return res;
  } catch (err) {
    throw new StatementError(table, err);
  }
}

async function select(ctx: ApplyContext, table: string, sql: string, values: SqlValue[]): Promise<RowDataPacket[]> {
  try {
    const [rows] = await ctx.conn.execute<RowDataPacket[]>({ sql, timeout: ctx.queryTimeoutMs }, values);
    return rows;
  } catch (err) {
    throw new StatementError(table, err);
  }
}

/** Key id of a row read back from the server, normalized like incoming keys. */
function readKeyId(meta: TableMeta, row: RowDataPacket): string {
  return keyIdOf(meta.primaryKey.map((k) => toSqlValue(meta.columns.find((c) => c.name === k)!, row[k])));
}

function isDupEntry(err: unknown): boolean {
  return err instanceof StatementError && (err.cause as { errno?: number })?.errno === 1062;
}

async function readTombstones(ctx: ApplyContext, meta: TableMeta, keys: KeyPlan[]): Promise<Map<string, bigint>> {
  const found = new Map<string, bigint>();
  const shape = tombShapeOf(meta, ctx.metaSchema);
  const name = `${meta.schema}.${meta.table}`;
  for (const part of chunks(keys, Math.min(MAX_KEYS_PER_LOOKUP, Math.floor(MAX_PARAMS / meta.primaryKey.length)))) {
    const rows = await select(ctx, name, selectTombstonesForUpdateSql(shape, part.length), part.flatMap((k) => k.key));
    for (const r of rows) found.set(readKeyId(meta, r), BigInt(r[meta.versionColumn] as string));
  }
  return found;
}

async function readVersions(ctx: ApplyContext, meta: TableMeta, keys: SqlValue[][]): Promise<Map<string, bigint>> {
  const found = new Map<string, bigint>();
  const name = `${meta.schema}.${meta.table}`;
  for (const part of chunks(keys, Math.min(MAX_KEYS_PER_LOOKUP, Math.floor(MAX_PARAMS / meta.primaryKey.length)))) {
    const rows = await select(ctx, name, selectVersionsSql(shapeOf(meta), part.length), part.flat());
    for (const r of rows) found.set(readKeyId(meta, r), BigInt(r[meta.versionColumn] as string));
  }
  return found;
}

async function logConflict(ctx: ApplyContext, meta: TableMeta, up: NonNullable<KeyPlan['upsert']>, reason: string): Promise<void> {
  const row: Record<string, unknown> = {};
  meta.writableColumns.forEach((c, i) => {
    const v = up.row[i];
    row[c] = Buffer.isBuffer(v) ? { base64: v.toString('base64') } : v;
  });
  await exec(ctx, `${ctx.metaSchema}.conflicts`, insertConflictSql(ctx.metaSchema), [
    up.sourceId,
    meta.schema,
    meta.table,
    reason,
    up.version.toString(),
    JSON.stringify(row),
  ]);
}

async function applyUpserts(ctx: ApplyContext, meta: TableMeta, upserts: KeyPlan[], counts: TableCounters): Promise<void> {
  const shape = shapeOf(meta);
  const name = `${meta.schema}.${meta.table}`;
  const perStatement = Math.max(1, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / shape.columns.length)));
  const hasUnique = Object.keys(meta.uniqueKeys).length > 0;
  for (const part of chunks(upserts, perStatement)) {
    let outcome: { inserted: number; updated: number; skipped: number };
    let clashed: KeyPlan[] = [];
    try {
      const res = await exec(ctx, name, lwwUpsertSql(shape, part.length, ctx.dialect), part.flatMap((k) => k.upsert!.row));
      outcome = upsertOutcome(part.length, res.affectedRows, res.info);
    } catch (err) {
      // A clash on a secondary UNIQUE key while updating a row fails the statement (and only the
      // statement): apply its rows one by one to find and log the clashing ones.
      if (!isDupEntry(err) || part.length === 1) {
        if (isDupEntry(err)) {
          counts.uniqueClashes++;
          await logConflict(ctx, meta, part[0]!.upsert!, 'unique key clash (duplicate entry on a secondary UNIQUE key)');
          continue;
        }
        throw err;
      }
      outcome = { inserted: 0, updated: 0, skipped: 0 };
      for (const one of part) {
        try {
          const res = await exec(ctx, name, lwwUpsertSql(shape, 1, ctx.dialect), one.upsert!.row);
          const o = upsertOutcome(1, res.affectedRows, res.info);
          outcome.inserted += o.inserted;
          outcome.updated += o.updated;
          outcome.skipped += o.skipped;
        } catch (e) {
          if (!isDupEntry(e)) throw e;
          clashed.push(one);
        }
      }
    }
    // The primary-key guard turns an insert that hits another row's UNIQUE key into a no-op that
    // looks like a stale skip; a row whose stored version is still older than ours was not applied.
    if (hasUnique && outcome.skipped > 0) {
      const stored = await readVersions(ctx, meta, part.map((k) => k.key));
      const silent = part.filter((k) => {
        if (clashed.includes(k)) return false;
        const v = stored.get(keyIdOf(k.key));
        return v === undefined || v < k.upsert!.version;
      });
      outcome.skipped -= silent.length;
      clashed = [...clashed, ...silent];
    }
    for (const k of clashed) await logConflict(ctx, meta, k.upsert!, 'unique key clash (another row holds the same secondary UNIQUE key)');
    counts.inserted += outcome.inserted;
    counts.updated += outcome.updated;
    counts.skippedStale += outcome.skipped;
    counts.uniqueClashes += clashed.length;
  }
}

async function applyTableLww(ctx: ApplyContext, plan: TablePlan, counts: TableCounters): Promise<void> {
  const { meta } = plan;
  const name = `${meta.schema}.${meta.table}`;
  const keys = [...plan.keys.values()];
  counts.skippedStale += plan.staleInBatch;
  counts.coalesced += plan.coalesced;
  const tombs = await readTombstones(ctx, meta, keys);
  const deletes = keys.filter((k) => k.deleteVersion !== undefined);
  if (deletes.length > 0) {
    const tshape = tombShapeOf(meta, ctx.metaSchema);
    const width = meta.primaryKey.length + 1;
    // Tombstone first, then the row: a concurrent local insert of the key waits on the tombstone lock.
    for (const part of chunks(deletes, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / width)))) {
      await exec(ctx, name, upsertTombstonesSql(tshape, part.length, ctx.dialect), part.flatMap((k) => [...k.key, k.deleteVersion!.toString()]));
      const res = await exec(ctx, name, guardedDeleteSql(shapeOf(meta), part.length), part.flatMap((k) => [...k.key, k.deleteVersion!.toString()]));
      counts.deleted += res.affectedRows;
      counts.tombstoned += part.length;
    }
    for (const k of deletes) {
      const id = keyIdOf(k.key);
      const old = tombs.get(id);
      if (old === undefined || k.deleteVersion! > old) tombs.set(id, k.deleteVersion!);
    }
  }
  const upserts: KeyPlan[] = [];
  for (const k of keys) {
    if (!k.upsert) continue;
    const tomb = tombs.get(keyIdOf(k.key));
    if (tomb !== undefined && tomb >= k.upsert.version) counts.skippedByTombstone++;
    else upserts.push(k);
  }
  if (upserts.length > 0) await applyUpserts(ctx, meta, upserts, counts);
  if (upserts.length > 0 && hasCollatedKey(meta)) {
    // Keys matched above by value; the server may hold 'A' where 'a' arrived. Its own comparison decides.
    const tshape = tombShapeOf(meta, ctx.metaSchema);
    for (const part of chunks(upserts, Math.min(MAX_KEYS_PER_LOOKUP, Math.floor(MAX_PARAMS / meta.primaryKey.length)))) {
      const res = await exec(ctx, name, deleteRowsUnderTombstoneSql(shapeOf(meta), tshape, part.length), part.flatMap((k) => k.key));
      counts.skippedByTombstone += res.affectedRows;
      counts.inserted -= Math.min(counts.inserted, res.affectedRows);
    }
  }
}

const STRING_TYPES = new Set(['char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext', 'enum', 'set']);

/** True when a key column compares by a collation under which different values can be equal. */
function hasCollatedKey(meta: TableMeta): boolean {
  return meta.primaryKey.some((k) => {
    const c = meta.columns.find((col) => col.name === k);
    return c !== undefined && STRING_TYPES.has(c.dataType) && c.collation !== null && !/_bin$/.test(c.collation);
  });
}

async function applyTableBypass(ctx: ApplyContext, plan: TablePlan, counts: TableCounters): Promise<void> {
  const { meta } = plan;
  const name = `${meta.schema}.${meta.table}`;
  const shape = shapeOf(meta);
  const keys = [...plan.keys.values()];
  const deletes = keys.filter((k) => !k.upsert);
  for (const part of chunks(deletes, Math.min(MAX_KEYS_PER_LOOKUP, Math.floor(MAX_PARAMS / meta.primaryKey.length)))) {
    const res = await exec(ctx, name, plainDeleteSql(shape, part.length), part.flatMap((k) => k.key));
    counts.deleted += res.affectedRows;
  }
  const upserts = keys.filter((k) => k.upsert);
  const perStatement = Math.max(1, Math.min(MAX_ROWS_PER_STATEMENT, Math.floor(MAX_PARAMS / shape.columns.length)));
  for (const part of chunks(upserts, perStatement)) {
    await exec(ctx, name, replaceSql(shape, part.length), part.flatMap((k) => k.upsert!.row));
    counts.replaced += part.length;
  }
}

/** Applies a coalesced batch and advances checkpoints in one transaction. */
export async function applyBatch(ctx: ApplyContext, plans: TablePlan[], advances: CheckpointAdvance[]): Promise<BatchOutcome> {
  const tables = new Map<string, TableCounters>();
  await ctx.conn.query('BEGIN');
  try {
    for (const plan of plans) {
      const counts = emptyCounters();
      tables.set(`${plan.meta.schema}.${plan.meta.table}`, counts);
      if (ctx.bypass) await applyTableBypass(ctx, plan, counts);
      else await applyTableLww(ctx, plan, counts);
    }
    for (const a of advances) {
      const res = await exec(ctx, `${ctx.metaSchema}.checkpoints`, advanceCheckpointSql(ctx.metaSchema), [
        a.position,
        a.version.toString(),
        a.sourceId,
        a.epoch.toString(),
      ]);
      if (res.affectedRows === 0) {
        const [rows] = await ctx.conn.query<RowDataPacket[]>(readCheckpointSql(ctx.metaSchema), [a.sourceId]);
        throw new OwnershipLostError(a.sourceId, a.epoch, BigInt((rows[0]?.owner_epoch as string | undefined) ?? '0'));
      }
    }
    await ctx.conn.query('COMMIT');
  } catch (err) {
    await ctx.conn.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
  return { tables };
}
