// What the sink knows about a replicated table, read from information_schema.

export interface ColumnMeta {
  name: string;
  /** information_schema DATA_TYPE, lower case: int, varchar, json, bit... */
  dataType: string;
  /** information_schema COLUMN_TYPE, e.g. "bigint unsigned", "bit(64)", "enum('a','b')" */
  columnType: string;
  nullable: boolean;
  generated: boolean;
  charset: string | null;
  collation: string | null;
  /** MariaDB's JSON: a LONGTEXT the server checks with json_valid(). */
  json?: boolean;
}

export interface TableMeta {
  schema: string;
  table: string;
  /** All columns in ordinal order. */
  columns: ColumnMeta[];
  /** Primary-key column names in key order. */
  primaryKey: string[];
  /** Secondary UNIQUE keys (name → columns); clashes on these are detected and logged. */
  uniqueKeys: Record<string, string[]>;
  versionColumn: string;
  /** Columns the sink writes: non-generated, in ordinal order, version column last. */
  writableColumns: string[];
  /** Name of the tombstone table in the metadata schema. */
  tombstoneTable: string;
  /** Tables its foreign keys reference (tableKey), itself excluded: written before it, deleted after it. */
  parents?: string[];
  /** Its foreign keys with ON DELETE SET NULL (what a row referencing a deleted parent becomes). */
  setNullKeys?: SetNullForeignKey[];
}

export interface SetNullForeignKey {
  name: string;
  columns: string[];
  parentSchema: string;
  parentTable: string;
  parentColumns: string[];
}

export function tableKey(schema: string, table: string): string {
  return `${schema}\u0000${table}`;
}
