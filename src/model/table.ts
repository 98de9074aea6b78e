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
  /**
   * An INSERT that gives the column `DEFAULT` stores what ALTER TABLE … ADD COLUMN gives existing
   * rows: the column has a default (a literal or an expression), or is nullable (NULL). False for a
   * NOT NULL column without one and for AUTO_INCREMENT; undefined when not known (treated as false).
   */
  hasDefault?: boolean;
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
  /** Secondary UNIQUE keys that have a claim table on this server (see ClaimIndex). */
  claims?: ClaimIndex[];
}

/**
 * A secondary UNIQUE key whose given-up values are remembered in a claim table of the metadata
 * schema: the value, the primary key of the row that held it (owner) and the row's version while
 * it held it, highest per value. A row claiming the value at an older version loses to it on every
 * node, whether the newer holder still holds the value there or not (DESIGN §4, README "UNIQUE keys").
 */
export interface ClaimIndex {
  index: string;
  /** Claim table name in the metadata schema. */
  table: string;
  /** The key's columns, in index order (named as in the data table). */
  columns: string[];
}

/** Owner column names of a claim table: one per primary-key column, by position. */
export function claimOwnerColumns(primaryKey: readonly string[]): string[] {
  return primaryKey.map((_, i) => `_lww_owner${i}`);
}

/** The version column of a claim table. */
export const CLAIM_VERSION_COLUMN = '_lww_claimed_at';

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
