// What install needs to know about a table before it changes anything: that it exists, is a base
// table (not system-versioned, no application-time period) with a primary key, and whether the
// version column is already there (and usable).
// Unlike loadTableMeta, this works before the version column exists.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { UnknownTableError, UnsupportedTableError } from '../errors.ts';
import { COLUMNS_SQL, showCreateTableSql, TABLE_EXISTS_SQL, UNIQUE_KEYS_SQL } from '../sql/introspect.ts';
import { applicationPeriods, applicationPeriodsReason, isGeneratedColumn, unsupportedKeyColumn, unsupportedTableType } from '../model/table.ts';
import { unsupportedCharsetColumn } from '../model/charsets.ts';
import { CASCADING_FOREIGN_KEYS_SQL, TABLE_TRIGGER_BODIES_SQL } from '../sql/install.ts';
import { TRIGGER_KINDS } from '../sql/triggers.ts';
import { triggerName } from '../model/names.ts';

export interface TableInspection {
  schema: string;
  table: string;
  primaryKey: string[];
  /** COLUMN_TYPE of the version column, or undefined when the table does not have it yet. */
  versionColumnType: string | undefined;
  /** The version column is INVISIBLE (false also when it does not exist yet). */
  versionColumnInvisible: boolean;
  /** Foreign keys whose ON DELETE / ON UPDATE actions change this table's rows without firing its triggers. */
  cascadingForeignKeys: { name: string; parentSchema: string; parent: string; onDelete: string; onUpdate: string }[];
}

/** Throws UnknownTableError / UnsupportedTableError for a table install cannot take. */
export async function inspectTable(conn: Connection, schema: string, table: string, versionColumn: string): Promise<TableInspection> {
  const [exists] = await conn.query<RowDataPacket[]>(TABLE_EXISTS_SQL, [schema, table]);
  if (exists.length === 0) throw new UnknownTableError(schema, table);
  const type = unsupportedTableType(String(exists[0]!.tableType));
  if (type) throw new UnsupportedTableError(schema, table, `${type}, then run install again`);
  const periods = await applicationPeriodsOf(conn, schema, table);
  if (periods.length > 0) throw new UnsupportedTableError(schema, table, `${applicationPeriodsReason(periods)}, then run install again`);
  const [keys] = await conn.query<RowDataPacket[]>(UNIQUE_KEYS_SQL, [schema, table]);
  const primaryKey = keys.filter((k) => k.indexName === 'PRIMARY').map((k) => String(k.columnName));
  if (primaryKey.length === 0) {
    throw new UnsupportedTableError(schema, table, 'it has no primary key (LWW needs one to identify rows); add a PRIMARY KEY and run install again');
  }
  if (primaryKey.includes(versionColumn)) {
    throw new UnsupportedTableError(schema, table, `its primary key contains the version column ${versionColumn}`);
  }
  const [cols] = await conn.query<RowDataPacket[]>(COLUMNS_SQL, [schema, table]);
  for (const k of primaryKey) {
    const c = cols.find((r) => r.name === k)!;
    const why = unsupportedKeyColumn({ name: k, dataType: String(c.dataType), generated: isGeneratedColumn(c) });
    if (why) throw new UnsupportedTableError(schema, table, `${why}, then run install again`);
  }
  // Text whose bytes capture cannot carry exactly would differ on the other nodes (model/charsets.ts).
  for (const c of cols) {
    const why = unsupportedCharsetColumn({ name: String(c.name), charset: c.charset as string | null });
    if (why) throw new UnsupportedTableError(schema, table, `${why}, then run install again`);
  }
  const version = cols.find((c) => c.name === versionColumn);
  const versionColumnType = version ? String(version.columnType) : undefined;
  if (versionColumnType !== undefined && !/^bigint\b.*unsigned/i.test(versionColumnType)) {
    throw new UnsupportedTableError(schema, table, `its column ${versionColumn} is ${versionColumnType}; the version column must be BIGINT UNSIGNED`);
  }
  if (version && isGeneratedColumn(version)) {
    throw new UnsupportedTableError(schema, table, `its version column ${versionColumn} is a generated column`);
  }
  const [fks] = await conn.query<RowDataPacket[]>(CASCADING_FOREIGN_KEYS_SQL, [schema, table]);
  const cascadingForeignKeys = fks.map((f) => ({
    name: String(f.name),
    // The parent may be in another schema (REFERENTIAL_CONSTRAINTS names its schema as the unique constraint's).
    parentSchema: String(f.parentSchema ?? schema),
    parent: String(f.parent),
    onDelete: String(f.onDelete),
    onUpdate: String(f.onUpdate),
  }));
  // The application's own triggers also fire for the rows the sink writes on every other node: a
  // value one sets (NEW.updated_at = NOW()) differs from the source's at the same version, a row it
  // writes elsewhere is written again on each node. Only a body that skips the sink's sessions is safe.
  const [triggers] = await conn.query<RowDataPacket[]>(TABLE_TRIGGER_BODIES_SQL, [schema, table]);
  const unguarded = triggers.filter((t) => isUnguardedAppTrigger(table, String(t.name), String(t.body)));
  if (unguarded.length > 0) {
    throw new UnsupportedTableError(schema, table, `${unguardedTriggersReason(unguarded.map((t) => `${t.name} (${t.timing} ${t.event})`))}, then run install again`);
  }
  const versionColumnInvisible = /\bINVISIBLE\b/i.test(String(version?.extra ?? ''));
  return { schema, table, primaryKey, versionColumnType, versionColumnInvisible, cascadingForeignKeys };
}

/** The table's application-time periods (MariaDB `PERIOD FOR`), read from SHOW CREATE TABLE (model/table.ts applicationPeriods). */
export async function applicationPeriodsOf(conn: Pick<Connection, 'query'>, schema: string, table: string): Promise<string[]> {
  const [rows] = await conn.query<RowDataPacket[]>(showCreateTableSql(schema, table));
  return applicationPeriods(String(rows[0]?.['Create Table'] ?? ''));
}

/** A body wholly inside `IF @lww_apply IS NULL THEN … END IF` (with or without BEGIN … END), comments aside. */
const GUARDED_BODY = /^(BEGIN\s+)?IF\s+@lww_apply\s+IS\s+NULL\s+THEN\b[\s\S]*\bEND\s+IF\s*;?\s*(END\s*;?)?$/i;

/**
 * An application's trigger on a replicated table whose body is not wholly skipped in the sink's
 * sessions. A text search: a body that mentions the guard in a comment, guards only some of its
 * statements or reverses it does not pass.
 */
export function isUnguardedAppTrigger(table: string, name: string, body: string): boolean {
  if (TRIGGER_KINDS.some((k) => triggerName(table, k) === name)) return false;
  const code = body
    .replace(/\/\*(?!M?!)[\s\S]*?\*\//g, ' ')
    .replace(/(--\s|#)[^\n]*/g, ' ')
    .trim();
  return !GUARDED_BODY.test(code);
}

/** Why such triggers are refused, and what to do (`name (TIMING EVENT)` each). */
export function unguardedTriggersReason(triggers: readonly string[]): string {
  return (
    `its trigger(s) ${triggers.join(', ')} would run again on every node for the rows replicated there (a value it sets would differ from the source's at the same version; rows it writes would be written twice): ` +
    "make each body skip the sink's sessions — wrap it in IF @lww_apply IS NULL THEN … END IF"
  );
}
