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
  /** information_schema COLUMN_DEFAULT, EXTRA and GENERATION_EXPRESSION as shown (the checker compares definitions). */
  columnDefault?: string | null;
  extra?: string;
  generation?: string | null;
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

/**
 * A column information_schema shows as generated: EXTRA `VIRTUAL GENERATED` / `STORED GENERATED`
 * (MariaDB also `PERSISTENT`), or a generation expression. Not MySQL's `DEFAULT_GENERATED`: that is
 * a column with an expression default (CURRENT_TIMESTAMP, `(UUID())`), written like any other —
 * taken for generated, the sink left it out of every row and each node kept its own default.
 */
export function isGeneratedColumn(c: { readonly [column: string]: unknown }): boolean {
  return /\b(VIRTUAL|STORED|PERSISTENT) GENERATED\b/i.test(String(c.extra ?? '')) || (c.generation !== null && c.generation !== undefined && c.generation !== '');
}

/**
 * Why a primary-key column cannot identify a row on every node, or undefined when it can. The sink
 * binds key values and compares them in its statements (tombstones, guarded deletes, key moves):
 * - BIT: a bound value compares unlike the stored bits (MariaDB matched no row, so replicated
 *   deletes removed nothing while their tombstones were written; MySQL refused the conversion);
 * - a generated column: the sink writes rows without it, so its statements cannot name the key.
 */
export function unsupportedKeyColumn(col: { name: string; dataType: string; generated: boolean }): string | undefined {
  if (col.dataType.toLowerCase() === 'bit') return `its primary-key column ${col.name} is BIT, whose bound values do not compare like its stored bits on every server; use BINARY(n) or an integer type`;
  if (col.generated) return `its primary-key column ${col.name} is a generated column, which the sink cannot write or name in its statements; make the key a stored, written column`;
  return undefined;
}

/**
 * Why a table of this information_schema TABLE_TYPE cannot be replicated, or undefined for a base
 * table. MariaDB's system-versioned tables (`SYSTEM VERSIONED`): each update or delete also writes a
 * history row, which the binlog carries as an insert of the same primary key (on a peer it would
 * overwrite the current row with old values), and a DELETE is logged as an update of the hidden
 * row_end column, so no delete reaches the peers; the history's row_start/row_end are each node's own times.
 */
export function unsupportedTableType(tableType: string): string | undefined {
  if (tableType === 'BASE TABLE') return undefined;
  if (tableType === 'SYSTEM VERSIONED') {
    return (
      'it is system-versioned (WITH SYSTEM VERSIONING): every update or delete also writes a history row, which the binlog carries as an insert ' +
      'of the same primary key (the other nodes would take its old values for the current row), and a DELETE is logged as an update of the ' +
      "hidden row_end column, so no delete would reach them; each node's history would hold its own times. " +
      'Remove it with ALTER TABLE … DROP SYSTEM VERSIONING on every node (copy the history elsewhere first if it is needed)'
    );
  }
  return `it is a ${tableType}, not a base table`;
}

/**
 * The application-time periods (MariaDB `PERIOD FOR p (s, e)`; not `SYSTEM_TIME`) a SHOW CREATE
 * TABLE text declares. MariaDB 10.11 shows them nowhere in information_schema but as a CHECK
 * constraint named like the period; each stands on a line of its own in SHOW CREATE TABLE, where a
 * column's line starts with its name and a comment's newline is escaped.
 */
export function applicationPeriods(createTable: string): string[] {
  const out: string[] = [];
  for (const m of createTable.matchAll(/^\s*PERIOD FOR (`(?:[^`]|``)+`|[^\s(`]+)\s*\(/gm)) {
    const name = m[1]!.startsWith('`') ? m[1]!.slice(1, -1).replaceAll('``', '`') : m[1]!;
    if (m[1]!.startsWith('`') || name.toUpperCase() !== 'SYSTEM_TIME') out.push(name);
  }
  return out;
}

/**
 * Why a table with these application-time periods cannot be replicated. `DELETE … FOR PORTION OF`
 * deletes the row and inserts the parts outside the portion before the row's AFTER DELETE trigger
 * writes its tombstone, so a part that keeps the key is stamped without seeing it: the row and the
 * tombstone get one version, and capture finds no tombstone for the delete (checked on MariaDB 10.11).
 */
export function applicationPeriodsReason(periods: readonly string[]): string {
  const list = periods.join(', ');
  return (
    `it has an application-time period (PERIOD FOR ${list}): DELETE or UPDATE … FOR PORTION OF splits a row into a delete and inserts of the ` +
    'parts left outside the portion, and the server inserts them before the delete trigger writes the tombstone, so a part that keeps the ' +
    "primary key gets the tombstone's own version (the other nodes would drop it, and replication stopped with \"wrote no tombstone\"); " +
    `a key WITHOUT OVERLAPS also refuses the sink's INSERT … ON DUPLICATE KEY UPDATE. Drop the period on every node (ALTER TABLE … DROP PERIOD FOR ${periods[0]}, ` +
    'changing a key WITHOUT OVERLAPS in the same statement) and split rows with plain DELETE and INSERT'
  );
}
