// The tables install registered on a node, as both checks read them.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { registeredTablesSql } from '../sql/checksum.ts';

export interface RegisteredTable {
  schema: string;
  table: string;
  tombstoneTable: string;
  versionColumn: string;
}

/** The registry's rows, or undefined when the node has no metadata schema or registry table. */
export async function readRegisteredTables(conn: Connection, metaSchema: string): Promise<RegisteredTable[] | undefined> {
  try {
    const [rows] = await conn.query<RowDataPacket[]>(registeredTablesSql(metaSchema));
    return rows.map((r) => ({
      schema: String(r.schemaName),
      table: String(r.tableName),
      tombstoneTable: String(r.tombstoneTable),
      versionColumn: String(r.versionColumn),
    }));
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ER_NO_SUCH_TABLE' || code === 'ER_BAD_DB_ERROR') return undefined;
    throw err;
  }
}
