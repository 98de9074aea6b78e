// Creates what the sink needs on a server: the metadata schema and a table's tombstone table.
// Shared by the sink (on first use) and the install command. Idempotent.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { UnsupportedTableError } from '../errors.ts';
import { claimTableName } from '../model/names.ts';
import { CLAIM_VERSION_COLUMN, type ClaimIndex, claimOwnerColumns, type TableMeta } from '../model/table.ts';
import { addCheckpointIdentityColumnsSql, addCheckpointSourceTimeSql, addCheckpointWorkerSql, binarySourceIdSql, CHECKPOINT_IDENTITY_COLUMNS } from '../sql/checkpoint.ts';
import { dropTableSql, enterApplySessionSql, modifyTombstoneColumnsSql } from '../sql/install.ts';
import { COLUMNS_SQL, UNIQUE_KEY_PARTS_SQL, UNIQUE_KEYS_SQL } from '../sql/introspect.ts';
import { claimTableDdl, columnDefinition, type KeyColumnDef, metaSchemaDdl, tombstoneTableDdl } from '../sql/templates.ts';

export async function ensureMetaSchema(conn: Connection, metaSchema: string): Promise<void> {
  for (const stmt of metaSchemaDdl(metaSchema)) await conn.query(stmt);
  // A checkpoints table made by an older version lacks the source time the GC horizon needs.
  const [cols] = await conn.query<RowDataPacket[]>(COLUMNS_SQL, [metaSchema, 'checkpoints']);
  if (!cols.some((c) => c.name === 'source_time_us')) await conn.query(addCheckpointSourceTimeSql(metaSchema));
  // ...and the source server identity (server_uuid, GTID set, binlog head) resumes are checked against.
  const missing = CHECKPOINT_IDENTITY_COLUMNS.filter((want) => !cols.some((c) => c.name === want.name));
  if (missing.length > 0) await conn.query(addCheckpointIdentityColumnsSql(metaSchema, missing));
  // ...and stream ids told apart byte for byte (ids that differed only in letter case shared a row; none can exist twice now).
  const sourceId = cols.find((c) => c.name === 'source_id');
  if (sourceId && sourceId.collation !== 'utf8mb4_bin') await conn.query(binarySourceIdSql(metaSchema));
  // ...and the worker dimension of parallel apply: its one row per stream becomes worker 0's.
  if (!cols.some((c) => c.name === 'worker')) {
    await conn.query(addCheckpointWorkerSql(metaSchema)).catch((err: unknown) => {
      // Another session upgraded it meanwhile (duplicate column name).
      if ((err as { errno?: number }).errno !== 1060) throw err;
    });
  }
}

/** Makes the session one whose writes keep their versions (the sink's, install's backfill). */
export async function enterApplySession(conn: Connection, metaSchema: string): Promise<void> {
  await conn.query(enterApplySessionSql(metaSchema));
}

/**
 * Creates a table's tombstone table, or makes an existing one follow the primary key: a changed
 * column type or collation is altered in place; a changed set of key columns rebuilds the table
 * (old tombstones name keys the table no longer has).
 */
export async function ensureTombstoneTable(
  conn: Connection,
  metaSchema: string,
  meta: TableMeta,
  options: { rebuild: boolean } = { rebuild: false },
): Promise<'unchanged' | 'created' | 'altered' | 'rebuilt'> {
  const key = meta.primaryKey.map((name) => {
    const col = meta.columns.find((c) => c.name === name)!;
    return { name, columnType: col.columnType, charset: col.charset, collation: col.collation };
  });
  const ddl = tombstoneTableDdl(metaSchema, meta.tombstoneTable, key, meta.versionColumn);
  const [cols] = await conn.query<RowDataPacket[]>(COLUMNS_SQL, [metaSchema, meta.tombstoneTable]);
  if (cols.length === 0) {
    await conn.query(ddl);
    return 'created';
  }
  const [idx] = await conn.query<RowDataPacket[]>(UNIQUE_KEYS_SQL, [metaSchema, meta.tombstoneTable]);
  const tombKey = idx.filter((r) => r.indexName === 'PRIMARY').map((r) => String(r.columnName));
  if (tombKey.join('\u0000') !== meta.primaryKey.join('\u0000')) {
    // Only install drops tombstones; a sink stops and says so.
    if (!options.rebuild) {
      throw new UnsupportedTableError(meta.schema, meta.table, `its primary key (${meta.primaryKey.join(', ')}) no longer matches its tombstone table (${tombKey.join(', ')}); run install for it again`);
    }
    await conn.query(dropTableSql(metaSchema, meta.tombstoneTable));
    await conn.query(ddl);
    return 'rebuilt';
  }
  const changed = key.filter((k) => {
    const c = cols.find((x) => x.name === k.name)!;
    return String(c.columnType) !== k.columnType || (c.charset ?? null) !== k.charset || (c.collation ?? null) !== k.collation;
  });
  if (changed.length === 0) return 'unchanged';
  await conn.query(modifyTombstoneColumnsSql(metaSchema, meta.tombstoneTable, changed.map(columnDefinition)));
  return 'altered';
}

/**
 * Creates the claim table of each secondary UNIQUE key that can have one (whole columns the sink
 * writes: not a prefix, an expression or a generated column) and returns them. An existing claim
 * table whose columns no longer match its key is rebuilt: its claims named values of another shape.
 */
export async function ensureClaimTables(conn: Connection, metaSchema: string, meta: TableMeta): Promise<ClaimIndex[]> {
  const [parts] = await conn.query<RowDataPacket[]>(UNIQUE_KEY_PARTS_SQL, [meta.schema, meta.table]);
  const keys = new Map<string, { columns: string[]; eligible: boolean }>();
  for (const p of parts) {
    const name = String(p.indexName);
    let k = keys.get(name);
    if (!k) {
      k = { columns: [], eligible: true };
      keys.set(name, k);
    }
    const col = p.columnName === null ? undefined : meta.columns.find((c) => c.name === String(p.columnName));
    if (!col || col.generated || p.subPart !== null || col.name === meta.versionColumn) k.eligible = false;
    else k.columns.push(col.name);
  }
  const defOf = (name: string, as = name): KeyColumnDef => {
    const col = meta.columns.find((c) => c.name === name)!;
    return { name: as, columnType: col.columnType, charset: col.charset, collation: col.collation };
  };
  const owners = claimOwnerColumns(meta.primaryKey);
  const out: ClaimIndex[] = [];
  for (const [index, k] of keys) {
    if (!k.eligible || k.columns.some((c) => owners.includes(c) || c === CLAIM_VERSION_COLUMN)) continue;
    const table = claimTableName(meta.schema, meta.table, index);
    const values = k.columns.map((c) => defOf(c));
    const ddl = claimTableDdl(metaSchema, table, values, meta.primaryKey.map((c, i) => defOf(c, owners[i])), CLAIM_VERSION_COLUMN);
    const [cols] = await conn.query<RowDataPacket[]>(COLUMNS_SQL, [metaSchema, table]);
    const want = [...values, ...meta.primaryKey.map((c, i) => defOf(c, owners[i]))];
    const same =
      cols.length === want.length + 1 &&
      want.every((w) => {
        const c = cols.find((x) => x.name === w.name);
        return c !== undefined && String(c.columnType) === w.columnType && (c.charset ?? null) === w.charset && (c.collation ?? null) === w.collation;
      });
    if (cols.length > 0 && !same) await conn.query(dropTableSql(metaSchema, table));
    if (cols.length === 0 || !same) await conn.query(ddl);
    out.push({ index, table, columns: k.columns });
  }
  return out;
}

/** The existing claim tables of a table's current secondary UNIQUE keys (what uninstall drops). */
export async function claimTablesOf(conn: Connection, metaSchema: string, ref: { schema: string; table: string }): Promise<string[]> {
  const [parts] = await conn.query<RowDataPacket[]>(UNIQUE_KEY_PARTS_SQL, [ref.schema, ref.table]);
  const out: string[] = [];
  for (const index of new Set(parts.map((p) => String(p.indexName)))) {
    const table = claimTableName(ref.schema, ref.table, index);
    const [cols] = await conn.query<RowDataPacket[]>(COLUMNS_SQL, [metaSchema, table]);
    if (cols.length > 0) out.push(table);
  }
  return out;
}
