// Reads and caches what the sink needs to know about a table from information_schema.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { UnknownTableError, UnsupportedTableError } from '../errors.ts';
import { tombstoneTableName } from '../model/names.ts';
import type { ColumnMeta, SetNullForeignKey, TableMeta } from '../model/table.ts';
import { isGeneratedColumn, tableKey, unsupportedKeyColumn, unsupportedTableType } from '../model/table.ts';
import { CHECK_CLAUSES_SQL } from '../sql/install.ts';
import { COLUMNS_SQL, FOREIGN_PARENTS_SQL, SET_NULL_FOREIGN_KEYS_SQL, TABLE_EXISTS_SQL, UNIQUE_KEYS_SQL } from '../sql/introspect.ts';

interface ColumnRow extends RowDataPacket {
  name: string;
  dataType: string;
  columnType: string;
  nullable: string;
  extra: string;
  generation: string | null;
  charset: string | null;
  collation: string | null;
  columnDefault: string | null;
}

/** Loads one table's metadata; refuses tables without a primary key or version column. */
export async function loadTableMeta(conn: Connection, schema: string, table: string, versionColumn: string): Promise<TableMeta> {
  const [exists] = await conn.query<RowDataPacket[]>(TABLE_EXISTS_SQL, [schema, table]);
  if (exists.length === 0) throw new UnknownTableError(schema, table);
  const type = unsupportedTableType(String(exists[0]!.tableType));
  if (type) throw new UnsupportedTableError(schema, table, type);
  const [cols] = await conn.query<ColumnRow[]>(COLUMNS_SQL, [schema, table]);
  const columns: ColumnMeta[] = cols.map((c) => ({
    name: c.name,
    dataType: String(c.dataType).toLowerCase(),
    columnType: String(c.columnType),
    nullable: c.nullable === 'YES',
    generated: isGeneratedColumn(c),
    charset: c.charset,
    collation: c.collation,
    // COLUMN_DEFAULT is NULL both for DEFAULT NULL and for no default: a nullable column has NULL either way.
    hasDefault: !/auto_increment/i.test(c.extra ?? '') && (c.nullable === 'YES' || c.columnDefault !== null),
    columnDefault: c.columnDefault,
    extra: c.extra ?? '',
    generation: c.generation,
  }));
  const [checks] = await conn.query<RowDataPacket[]>(CHECK_CLAUSES_SQL, [schema, table]);
  for (const c of columns) {
    const valid = `json_valid(\`${c.name.replaceAll('`', '``')}\`)`;
    if (c.dataType !== 'json' && checks.some((r) => String(r.clause).trim() === valid)) c.json = true;
  }
  const [idx] = await conn.query<RowDataPacket[]>(UNIQUE_KEYS_SQL, [schema, table]);
  const uniqueKeys: Record<string, string[]> = {};
  let primaryKey: string[] = [];
  for (const r of idx) {
    const name = String(r.indexName);
    if (name === 'PRIMARY') primaryKey.push(String(r.columnName));
    else {
      uniqueKeys[name] ??= [];
      uniqueKeys[name].push(String(r.columnName));
    }
  }
  if (primaryKey.length === 0) throw new UnsupportedTableError(schema, table, 'it has no primary key (LWW needs one to identify rows)');
  const version = columns.find((c) => c.name === versionColumn);
  if (!version) {
    throw new UnsupportedTableError(schema, table, `it has no version column ${versionColumn} (run install, or add it as BIGINT UNSIGNED NOT NULL)`);
  }
  if (!/^bigint\b.*unsigned/i.test(version.columnType)) {
    throw new UnsupportedTableError(schema, table, `version column ${versionColumn} is ${version.columnType}, must be BIGINT UNSIGNED`);
  }
  primaryKey = primaryKey.filter(Boolean);
  for (const k of primaryKey) {
    const why = unsupportedKeyColumn(columns.find((c) => c.name === k)!);
    if (why) throw new UnsupportedTableError(schema, table, why);
  }
  const writableColumns = [
    ...columns.filter((c) => !c.generated && c.name !== versionColumn).map((c) => c.name),
    versionColumn,
  ];
  const [fks] = await conn.query<RowDataPacket[]>(FOREIGN_PARENTS_SQL, [schema, table]);
  const parents = fks.map((r) => tableKey(String(r.parentSchema), String(r.parentTable))).filter((k) => k !== tableKey(schema, table));
  const [setNullRows] = await conn.query<RowDataPacket[]>(SET_NULL_FOREIGN_KEYS_SQL, [schema, table]);
  const setNullKeys = new Map<string, SetNullForeignKey>();
  for (const r of setNullRows) {
    const name = String(r.name);
    let fk = setNullKeys.get(name);
    if (!fk) {
      fk = { name, columns: [], parentSchema: String(r.parentSchema), parentTable: String(r.parentTable), parentColumns: [] };
      setNullKeys.set(name, fk);
    }
    fk.columns.push(String(r.columnName));
    fk.parentColumns.push(String(r.parentColumn));
  }
  return {
    schema,
    table,
    columns,
    primaryKey,
    uniqueKeys,
    versionColumn,
    writableColumns,
    tombstoneTable: tombstoneTableName(schema, table),
    ...(parents.length > 0 ? { parents } : {}),
    ...(setNullKeys.size > 0 ? { setNullKeys: [...setNullKeys.values()] } : {}),
  };
}

/** Table metadata by name, loaded once and refreshed on demand (after DDL). */
export class TableMetadataCache {
  private readonly tables = new Map<string, Promise<TableMeta>>();
  private readonly loaded = new Map<string, TableMeta>();
  /** The last table peek found: consecutive changes mostly name one table (no key text per change). */
  private last: { schema: string; table: string; meta: TableMeta } | undefined;

  constructor(
    private readonly load: (schema: string, table: string) => Promise<TableMeta>,
  ) {}

  get(schema: string, table: string): Promise<TableMeta> {
    const key = tableKey(schema, table);
    let entry = this.tables.get(key);
    if (!entry) {
      const pending = this.load(schema, table);
      entry = pending;
      this.tables.set(key, pending);
      pending.then(
        (meta) => {
          if (this.tables.get(key) === pending) {
            this.loaded.set(key, meta);
            this.last = undefined;
          }
        },
        // A failed load is not cached: the table may be created or fixed later.
        () => this.tables.delete(key),
      );
    }
    return entry;
  }

  /** The metadata when already loaded, without waiting. */
  peek(schema: string, table: string): TableMeta | undefined {
    const last = this.last;
    if (last && last.schema === schema && last.table === table) return last.meta;
    const meta = this.loaded.get(tableKey(schema, table));
    if (meta) this.last = { schema, table, meta };
    return meta;
  }

  refresh(schema?: string, table?: string): void {
    this.last = undefined;
    for (const map of [this.tables, this.loaded] as Array<Map<string, unknown>>) {
      if (schema === undefined) map.clear();
      else if (table === undefined) {
        for (const key of map.keys()) if (key.startsWith(`${schema}\u0000`)) map.delete(key);
      } else map.delete(tableKey(schema, table));
    }
  }
}
