// Creates what the sink needs on a server: the metadata schema and a table's tombstone table.
// Shared by the sink (on first use) and the install command. Idempotent.
import type { Connection } from 'mysql2/promise';
import type { TableMeta } from '../model/table.ts';
import { enterApplySessionSql } from '../sql/install.ts';
import { metaSchemaDdl, tombstoneTableDdl } from '../sql/templates.ts';

export async function ensureMetaSchema(conn: Connection, metaSchema: string): Promise<void> {
  for (const stmt of metaSchemaDdl(metaSchema)) await conn.query(stmt);
}

/** Makes the session one whose writes keep their versions (the sink's, install's backfill). */
export async function enterApplySession(conn: Connection, metaSchema: string): Promise<void> {
  await conn.query(enterApplySessionSql(metaSchema));
}

export async function ensureTombstoneTable(conn: Connection, metaSchema: string, meta: TableMeta): Promise<void> {
  const key = meta.primaryKey.map((name) => {
    const col = meta.columns.find((c) => c.name === name)!;
    return { name, columnType: col.columnType, charset: col.charset, collation: col.collation };
  });
  await conn.query(tombstoneTableDdl(metaSchema, meta.tombstoneTable, key, meta.versionColumn));
}
