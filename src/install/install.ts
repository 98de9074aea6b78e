// `install` / `uninstall`: prepares tables of one server for LWW replication and takes it back.
//
// install, per table: registry row (first, so an interrupted install can still be undone), version
// column, tombstone table, triggers, then the backfill of unversioned rows. The triggers exist
// before the backfill, so a row written meanwhile is stamped by them and only rows still at
// version 0 are backfilled. Every step looks before it acts: running install again changes nothing.
// Everything is checked before the first change, so a refusal leaves the server untouched.
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { connect } from '../db/connection.ts';
import { explainPrivilegeError } from '../db/privileges.ts';
import { InstallRefusedError, InstallUndoneError, InvalidOptionsError, LwwError, NodeIdConflictError, UnsupportedTableError } from '../errors.ts';
import { tombstoneTableName, triggerName } from '../model/names.ts';
import type { TableMeta } from '../model/table.ts';
import { MAX_NODE_ID } from '../model/version.ts';
import {
  addVersionColumnSql,
  backfillVersionSql,
  CASCADE_CHILDREN_SQL,
  countRegisteredTablesSql,
  dropSchemaSql,
  dropTableSql,
  dropVersionColumnSql,
  hideVersionColumnSql,
  insertNodeIdSql,
  lockTableForWriteSql,
  META_TABLE_EXISTS_SQL,
  markVersionColumnAddedSql,
  NATIVE_FOREIGN_KEYS_SQL,
  readApplySecretSql,
  registerTableSql,
  SAVE_SESSION_SQL,
  SET_SESSION_SQL,
  selectNodeIdSql,
  selectRegisteredTablesSql,
  showCreateTriggerSql,
  supportsInvisibleColumns,
  TABLE_TRIGGERS_SQL,
  UNLOCK_TABLES_SQL,
  unregisterTableSql,
} from '../sql/install.ts';
import { COLUMNS_SQL, VERSION_SQL } from '../sql/introspect.ts';
import { quoteIdent } from '../sql/quote.ts';
import { type CascadeChild, dropTriggerSql, TRIGGER_KINDS, type TriggerDefinition, triggerDefinitions } from '../sql/triggers.ts';
import { type Logger, silentLogger } from '../writer/options.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { inspectTable, type TableInspection } from './inspect.ts';
import { claimTablesOf, ensureClaimTables, ensureMetaSchema, ensureTombstoneTable, enterApplySession } from './provision.ts';
import { baseTablesOf, checkTableSelection, formatTableRef, type TableRef } from './table-list.ts';

export type { TableRef } from './table-list.ts';

/** The server to work on: a mysql:// URL (a connection is opened and closed) or an open connection. */
export type InstallTarget = { url: string; connection?: undefined } | { connection: Connection; url?: undefined };

interface CommonOptions {
  /** `db.t` names or references; exactly one of tables / schema. */
  tables?: readonly (string | TableRef)[];
  /** Every base table of this schema. */
  schema?: string;
  /** Default `lww_meta`. */
  metaSchema?: string;
  logger?: Logger;
}

export type InstallOptions = InstallTarget &
  CommonOptions & {
    /** 0..1023: the low 10 bits of every version this server stamps. */
    nodeId: number;
    /** Default `_lww_ts`. */
    versionColumn?: string;
    /** Rows per backfill statement (default 10 000), so no statement locks a whole big table. */
    backfillChunkRows?: number;
  };

export type UninstallOptions = InstallTarget & CommonOptions;

export interface InstalledTable {
  schema: string;
  table: string;
  tombstoneTable: string;
  versionColumn: string;
  /** True when install added the version column (in this run or an earlier one): uninstall drops it. */
  versionColumnAddedByInstall: boolean;
  /** What this run changed; all false / 0 when the table was already installed. */
  changes: {
    registered: boolean;
    addedVersionColumn: boolean;
    /** Trigger names created or (when their text was outdated) replaced. */
    triggers: string[];
    backfilledRows: number;
  };
}

export interface InstallResult {
  nodeId: number;
  metaSchema: string;
  /** False when the node id was already recorded. */
  recordedNodeId: boolean;
  tables: InstalledTable[];
  /** Things an operator should know: writes that the triggers cannot see (cascading foreign keys). */
  warnings: string[];
}

export interface UninstalledTable {
  schema: string;
  table: string;
  /** False when the table was not registered (only leftover triggers, if any, were dropped). */
  wasInstalled: boolean;
  droppedTriggers: string[];
  droppedVersionColumn: boolean;
  droppedTombstoneTable: string | undefined;
}

export interface UninstallResult {
  metaSchema: string;
  tables: UninstalledTable[];
  /** True when no table remained registered and the metadata schema was dropped. */
  droppedMetaSchema: boolean;
  warnings: string[];
}

interface RegistryRow {
  schemaName: string;
  tableName: string;
  tombstoneTable: string;
  versionColumn: string;
  addedVersionColumn: boolean;
}

const DEFAULT_META_SCHEMA = 'lww_meta';
const DEFAULT_VERSION_COLUMN = '_lww_ts';
const DEFAULT_BACKFILL_CHUNK = 10_000;
/** The sql_mode the triggers are created with (a trigger runs with the mode it was created under). */
const TRIGGER_SQL_MODE = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,ERROR_FOR_DIVISION_BY_ZERO';

function checkIdentifier(what: string, name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) throw new InvalidOptionsError(`${what} must be a non-empty name`);
  try {
    quoteIdent(name);
  } catch (e) {
    throw new InvalidOptionsError(`${what}: ${(e as Error).message}`);
  }
  return name;
}

function checkTarget(options: InstallTarget): void {
  const hasUrl = options.url !== undefined;
  const hasConnection = options.connection !== undefined;
  if (hasUrl === hasConnection) throw new InvalidOptionsError('give either url or connection (exactly one)');
  if (hasUrl && (typeof options.url !== 'string' || options.url.length === 0)) throw new InvalidOptionsError('url must be a mysql:// URL');
}

/** Opens the target (when given a URL) and sets the session up; undoes both afterwards. */
async function withSession<T>(options: InstallTarget, work: (conn: Connection) => Promise<T>): Promise<T> {
  const conn = options.connection ?? (await connect(options.url!));
  const owned = options.connection === undefined;
  let saved: RowDataPacket | undefined;
  try {
    if (!owned) [[saved]] = await conn.query<RowDataPacket[]>(SAVE_SESSION_SQL);
    // Triggers get a fixed sql_mode; the session becomes an apply session once the secret exists.
    await conn.query(SET_SESSION_SQL, [null, TRIGGER_SQL_MODE]);
    return await work(conn);
  } finally {
    if (owned) await conn.end().catch(() => conn.destroy());
    else if (saved) await conn.query(SET_SESSION_SQL, [saved.apply, saved.sqlMode]);
  }
}

async function count(conn: Connection, sql: string, params: unknown[] = []): Promise<number> {
  const [rows] = await conn.query<RowDataPacket[]>(sql, params);
  return Number(rows[0]!.n);
}

/** The node id recorded on the server, or undefined when install never ran there. */
export async function recordedNodeId(conn: Connection, metaSchema = DEFAULT_META_SCHEMA): Promise<number | undefined> {
  if ((await count(conn, META_TABLE_EXISTS_SQL, [metaSchema, 'node'])) === 0) return undefined;
  const [rows] = await conn.query<RowDataPacket[]>(selectNodeIdSql(metaSchema));
  return rows.length === 0 ? undefined : Number(rows[0]!.nodeId);
}

async function registeredTables(conn: Connection, metaSchema: string): Promise<Map<string, RegistryRow>> {
  const map = new Map<string, RegistryRow>();
  if ((await count(conn, META_TABLE_EXISTS_SQL, [metaSchema, 'tables'])) === 0) return map;
  const [rows] = await conn.query<RowDataPacket[]>(selectRegisteredTablesSql(metaSchema));
  for (const r of rows) {
    const row: RegistryRow = {
      schemaName: String(r.schemaName),
      tableName: String(r.tableName),
      tombstoneTable: String(r.tombstoneTable),
      versionColumn: String(r.versionColumn),
      addedVersionColumn: Number(r.addedVersionColumn) !== 0,
    };
    map.set(formatTableRef({ schema: row.schemaName, table: row.tableName }), row);
  }
  return map;
}

async function hasColumn(conn: Connection, schema: string, table: string, column: string): Promise<boolean> {
  const [cols] = await conn.query<RowDataPacket[]>(COLUMNS_SQL, [schema, table]);
  return cols.some((c) => c.name === column);
}

/** Names of this table's triggers. */
async function triggersOn(conn: Connection, schema: string, table: string): Promise<Map<string, { timing: string; event: string }>> {
  const [rows] = await conn.query<RowDataPacket[]>(TABLE_TRIGGERS_SQL, [schema, table]);
  return new Map(rows.map((r) => [String(r.name), { timing: String(r.timing), event: String(r.event) }]));
}

/** True when the server's trigger is exactly the one install would create. */
async function triggerIsCurrent(conn: Connection, schema: string, def: TriggerDefinition): Promise<boolean> {
  // SHOW CREATE TRIGGER gives the text as written; MySQL's ACTION_STATEMENT garbles quoted names
  // that hold both a doubled backtick and non-ASCII characters.
  const [rows] = await conn.query<RowDataPacket[]>(showCreateTriggerSql(schema, def.name));
  const statement = rows[0]?.['SQL Original Statement'];
  // The head is the server's own rendering (definer, one line); the body is ours, as written.
  if (typeof statement !== 'string' || !statement.endsWith(def.body)) return false;
  return /FOR EACH ROW\s+$/.test(statement.slice(0, statement.length - def.body.length));
}

/**
 * Creates missing triggers, replaces outdated ones and drops a cascade trigger no longer needed, all
 * under LOCK TABLES ... WRITE: the table's writers wait, so no write ever sees some of the triggers
 * and not the others (a delete without its tombstone, an update keeping its old version).
 * Returns the names it created, replaced or dropped.
 */
async function ensureTriggers(conn: Connection, schema: string, table: string, defs: TriggerDefinition[]): Promise<string[]> {
  const existing = await triggersOn(conn, schema, table);
  const missing: TriggerDefinition[] = [];
  const outdated: TriggerDefinition[] = [];
  for (const def of defs) {
    const found = existing.get(def.name);
    if (!found) missing.push(def);
    else if (found.timing !== def.timing || found.event !== def.event || !(await triggerIsCurrent(conn, schema, def))) outdated.push(def);
  }
  const wanted = new Set(defs.map((d) => d.name));
  const stale = TRIGGER_KINDS.map((k) => triggerName(table, k)).filter((n) => existing.has(n) && !wanted.has(n));
  if (missing.length + outdated.length + stale.length === 0) return [];
  await conn.query(lockTableForWriteSql(schema, table));
  try {
    for (const name of [...outdated.map((d) => d.name), ...stale]) await conn.query(dropTriggerSql(schema, name));
    for (const def of [...outdated, ...missing]) await conn.query(def.create);
  } finally {
    await conn.query(UNLOCK_TABLES_SQL);
  }
  return [...missing, ...outdated].map((d) => d.name).concat(stale);
}

/** Installed tables whose rows reference this table with ON DELETE CASCADE or SET NULL (not itself). */
async function cascadeChildren(conn: Connection, ref: TableRef, installed: Map<string, RegistryRow>): Promise<CascadeChild[]> {
  const [rows] = await conn.query<RowDataPacket[]>(CASCADE_CHILDREN_SQL, [ref.schema, ref.table]);
  const byFk = new Map<string, { schema: string; table: string; onDelete: 'CASCADE' | 'SET NULL'; columns: { child: string; parent: string }[] }>();
  for (const r of rows) {
    const child = { schema: String(r.childSchema), table: String(r.childTable) };
    if (child.schema === ref.schema && child.table === ref.table) continue;
    const key = `${formatTableRef(child)}\u0000${String(r.name)}`;
    const fk = byFk.get(key) ?? { ...child, onDelete: String(r.onDelete) === 'SET NULL' ? ('SET NULL' as const) : ('CASCADE' as const), columns: [] };
    fk.columns.push({ child: String(r.childColumn), parent: String(r.parentColumn) });
    byFk.set(key, fk);
  }
  const out: CascadeChild[] = [];
  for (const fk of byFk.values()) {
    const reg = installed.get(formatTableRef(fk));
    if (!reg) continue;
    const meta = await loadTableMeta(conn, fk.schema, fk.table, reg.versionColumn);
    out.push({ ...fk, primaryKey: meta.primaryKey, versionColumn: reg.versionColumn, tombstoneTable: reg.tombstoneTable });
  }
  return out;
}

async function backfill(conn: Connection, ref: TableRef, versionColumn: string, nodeId: number, chunk: number): Promise<number> {
  const sql = backfillVersionSql(ref.schema, ref.table, versionColumn, chunk);
  let total = 0;
  for (;;) {
    const [result] = await conn.query<ResultSetHeader>(sql, [nodeId]);
    total += result.affectedRows;
    if (result.affectedRows < chunk) return total;
  }
}

function checkNodeId(nodeId: unknown): number {
  if (typeof nodeId !== 'number' || !Number.isInteger(nodeId) || nodeId < 0 || nodeId > MAX_NODE_ID) {
    throw new InvalidOptionsError(`nodeId must be an integer in 0..${MAX_NODE_ID} (got ${String(nodeId)})`);
  }
  return nodeId;
}

/** Prepares tables of one server for LWW replication; idempotent. */
export async function install(options: InstallOptions): Promise<InstallResult> {
  checkTarget(options);
  const nodeId = checkNodeId(options.nodeId);
  const metaSchema = checkIdentifier('metaSchema', options.metaSchema ?? DEFAULT_META_SCHEMA);
  const versionColumn = checkIdentifier('versionColumn', options.versionColumn ?? DEFAULT_VERSION_COLUMN);
  const chunk = options.backfillChunkRows ?? DEFAULT_BACKFILL_CHUNK;
  if (!Number.isSafeInteger(chunk) || chunk < 1) throw new InvalidOptionsError('backfillChunkRows must be a positive integer');
  const explicit = checkTableSelection(options.tables, options.schema);
  if (options.schema === metaSchema) throw new InvalidOptionsError(`schema ${metaSchema} is the metadata schema; it is not replicated`);
  const log = options.logger ?? silentLogger;

  return withSession(options, async (conn) => {
    // Everything is checked before the first change.
    const recorded = await recordedNodeId(conn, metaSchema);
    if (recorded !== undefined && recorded !== nodeId) throw new NodeIdConflictError(recorded, nodeId);
    const refs = explicit ?? (await baseTablesOf(conn, options.schema!));
    if (refs.length === 0) throw new InvalidOptionsError(`schema ${options.schema} has no tables`);
    const registry = await registeredTables(conn, metaSchema);
    const inspections: TableInspection[] = [];
    const problems: Error[] = [];
    for (const ref of refs) {
      try {
        if (ref.schema === metaSchema) throw new InvalidOptionsError(`${formatTableRef(ref)} is in the metadata schema; it is not replicated`);
        const reg = registry.get(formatTableRef(ref));
        if (reg && reg.versionColumn !== versionColumn) {
          throw new UnsupportedTableError(
            ref.schema,
            ref.table,
            `it is installed with version column ${reg.versionColumn}, not ${versionColumn}; uninstall it first to change the column`,
          );
        }
        inspections.push(await inspectTable(conn, ref.schema, ref.table, versionColumn));
      } catch (e) {
        if (!(e instanceof LwwError)) throw e;
        problems.push(e);
      }
    }
    // A foreign key whose ON DELETE / ON UPDATE action changes this table when a parent that is not
    // installed changes: no trigger sees those changes (MariaDB does not even log them), so the
    // peers keep the old child rows without a word. The parent's triggers are what carry them.
    const installing = new Set(refs.map(formatTableRef));
    for (const inspection of inspections) {
      for (const fk of inspection.cascadingForeignKeys) {
        const parent = formatTableRef({ schema: fk.parentSchema, table: fk.parent });
        if (installing.has(parent) || registry.has(parent)) continue;
        problems.push(
          new UnsupportedTableError(
            inspection.schema,
            inspection.table,
            `its foreign key ${fk.name} (ON DELETE ${fk.onDelete}, ON UPDATE ${fk.onUpdate}) changes its rows when ${parent} changes, and ${parent} is not installed: ` +
              `those changes fire no trigger and get no tombstone or version, so the other nodes would keep the old rows; install ${parent} too (in the same run or before), or make the foreign key RESTRICT / NO ACTION`,
          ),
        );
      }
    }
    // One refusal is thrown as it is; several are listed together, so one run shows them all.
    if (problems.length === 1) throw problems[0];
    if (problems.length > 1) throw new InstallRefusedError(problems);

    const warnings: string[] = [];
    const [[server]] = await conn.query<RowDataPacket[]>(VERSION_SQL);
    const invisible = supportsInvisibleColumns(String(server!.version));
    // A REPLACE that writes a parent's referenced values back leaves its children (sql/triggers.sql).
    const [nativeForeignKeys] = await conn.query<RowDataPacket[]>(NATIVE_FOREIGN_KEYS_SQL);
    const replaceKeepsReferences = nativeForeignKeys.some((r) => String(r.Value).toUpperCase() === 'OFF');
    await ensureMetaSchema(conn, metaSchema);
    // Install's own writes (backfill) keep the version they set.
    await enterApplySession(conn, metaSchema);
    const [[secretRow]] = await conn.query<RowDataPacket[]>(readApplySecretSql(metaSchema));
    const applySecret = String(secretRow!.secret);
    if (recorded === undefined) {
      try {
        await conn.query(insertNodeIdSql(metaSchema), [nodeId]);
      } catch (e) {
        // Another install recorded a node id in the meantime.
        const now = await recordedNodeId(conn, metaSchema);
        if (now !== undefined && now !== nodeId) throw new NodeIdConflictError(now, nodeId);
        if (now === undefined) throw e;
      }
      log.info('recorded node id', { nodeId, metaSchema });
    }

    // All or nothing: when a statement fails part-way (a privilege, an ALTER), what this run added
    // for tables it registered is taken back, so no table stays registered half-installed.
    const added: Added[] = [];
    let current = '';
    try {
      return await installTables();
    } catch (err) {
      const leftovers = await undo(conn, metaSchema, added, log);
      // Installed parents may have got a cascade trigger naming a child that is gone again.
      for (const parent of added.flatMap((a) => a.parents)) {
        try {
          const reg = (await registeredTables(conn, metaSchema)).get(formatTableRef(parent));
          if (!reg) continue;
          const meta = await installedMeta(conn, metaSchema, parent, reg.versionColumn, reg.tombstoneTable);
          const cascades = await cascadeChildren(conn, parent, await registeredTables(conn, metaSchema));
          await ensureTriggers(conn, parent.schema, parent.table, triggerDefinitions({ ...meta, metaSchema, nodeId, applySecret, cascades, replaceKeepsReferences }));
        } catch (e) {
          leftovers.push(`the cascade trigger of ${formatTableRef(parent)}: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
      if (added.length === 0 && leftovers.length === 0) throw err;
      const detail = explainPrivilegeError(err) ?? (err instanceof Error ? err.message : String(err));
      const undone = new InstallUndoneError(current || '(start)', detail, err, leftovers);
      log.error(undone.message);
      throw undone;
    }

    async function installTables(): Promise<InstallResult> {
      // Pass 1: registry rows, version columns and tombstone tables of every table (a parent's
      // cascade trigger writes into its children's tombstone tables).
      const steps: Array<{ inspection: TableInspection; ref: TableRef; name: string; reg?: RegistryRow; columnMissing: boolean; tombstoneTable: string }> = [];
      for (const inspection of inspections) {
        const ref = { schema: inspection.schema, table: inspection.table };
        const name = formatTableRef(ref);
        const reg = registry.get(name);
        const columnMissing = inspection.versionColumnType === undefined;
        const tombstoneTable = reg?.tombstoneTable ?? tombstoneTableName(ref.schema, ref.table);
        current = name;
        const undoable: Added | undefined = reg ? undefined : { ref, tombstoneTable, versionColumn, addedVersionColumn: false, createdTombstoneTable: false, parents: [] };
        if (!reg) {
          await conn.query(registerTableSql(metaSchema), [ref.schema, ref.table, tombstoneTable, versionColumn, columnMissing ? 1 : 0]);
          added.push(undoable!);
        } else if (columnMissing && !reg.addedVersionColumn) {
          await conn.query(markVersionColumnAddedSql(metaSchema), [ref.schema, ref.table]);
        }
        if (columnMissing) {
          await conn.query(addVersionColumnSql(ref.schema, ref.table, versionColumn, invisible));
          if (undoable) undoable.addedVersionColumn = true;
          log.info('added version column', { table: name, versionColumn, invisible });
        } else if (invisible && reg?.addedVersionColumn && !inspection.versionColumnInvisible) {
          // Added visible by an older install: applications' SELECT * and INSERT … VALUES see it until hidden.
          await conn.query(hideVersionColumnSql(ref.schema, ref.table, versionColumn));
          log.info('made version column invisible', { table: name, versionColumn });
        }
        const meta = { ...(await loadTableMeta(conn, ref.schema, ref.table, versionColumn)), tombstoneTable };
        const tomb = await ensureTombstoneTable(conn, metaSchema, meta, { rebuild: true });
        if (undoable && tomb === 'created') undoable.createdTombstoneTable = true;
        const claims = await ensureClaimTables(conn, metaSchema, meta);
        if (undoable) undoable.claimTables = claims.map((c) => c.table);
        if (tomb === 'rebuilt') {
          const warning = `${name}: its primary key changed; the tombstone table ${metaSchema}.${tombstoneTable} was rebuilt for the new key and its old tombstones dropped (run sync between the nodes)`;
          warnings.push(warning);
          log.warn(warning);
        } else if (tomb === 'altered') log.info('aligned tombstone table with the primary key', { table: name });
        steps.push({ inspection, ref, name, reg, columnMissing, tombstoneTable });
      }

      // Pass 2: triggers, each table's in one atomic step, then the backfill.
      const installed = await registeredTables(conn, metaSchema);
      const inRun = new Set(steps.map((st) => st.name));
      const parents = new Map<string, TableRef>();
      const tables: InstalledTable[] = [];
      for (const { inspection, ref, name, reg, columnMissing, tombstoneTable } of steps) {
        current = name;
        const meta = await installedMeta(conn, metaSchema, ref, versionColumn, tombstoneTable);
        const cascades = await cascadeChildren(conn, ref, installed);
        const triggers = await ensureTriggers(conn, ref.schema, ref.table, triggerDefinitions({ ...meta, metaSchema, nodeId, applySecret, cascades, replaceKeepsReferences }));
        if (triggers.length > 0) log.info('created triggers', { table: name, triggers });
        const backfilledRows = await backfill(conn, ref, versionColumn, nodeId, chunk);
        if (backfilledRows > 0) log.info('backfilled versions', { table: name, rows: backfilledRows });
        for (const fk of inspection.cascadingForeignKeys) {
          const parent = { schema: fk.parentSchema, table: fk.parent };
          const parentInstalled = installed.has(formatTableRef(parent));
          if (parentInstalled && !inRun.has(formatTableRef(parent))) {
            parents.set(formatTableRef(parent), parent);
            added.find((a) => a.ref === ref)?.parents.push(parent);
          }
          // ON DELETE CASCADE / SET NULL from an installed parent is covered by the parent's BEFORE DELETE trigger.
          if ((fk.onDelete === 'CASCADE' || fk.onDelete === 'SET NULL') && parentInstalled && !/CASCADE|SET/.test(fk.onUpdate)) continue;
          const warning =
            `${name}: foreign key ${fk.name} (ON DELETE ${fk.onDelete}, ON UPDATE ${fk.onUpdate}) changes rows when ${fk.parentSchema}.${fk.parent} changes, ` +
            'and such cascaded changes fire no triggers: they get no new version' +
            (fk.onDelete === 'CASCADE' ? ` (deletes get tombstones only when ${fk.parent} is installed too)` : '') +
            '. Use RESTRICT / NO ACTION and change child rows explicitly, or expect divergence on this table.';
          warnings.push(warning);
          log.warn(warning);
        }
        tables.push({
          schema: ref.schema,
          table: ref.table,
          tombstoneTable,
          versionColumn,
          versionColumnAddedByInstall: columnMissing || (reg?.addedVersionColumn ?? false),
          changes: { registered: !reg, addedVersionColumn: columnMissing, triggers, backfilledRows },
        });
      }
      // Installed parents of newly installed children get their cascade trigger now.
      for (const parent of parents.values()) {
        current = formatTableRef(parent);
        const reg = installed.get(formatTableRef(parent))!;
        const meta = await installedMeta(conn, metaSchema, parent, reg.versionColumn, reg.tombstoneTable);
        const cascades = await cascadeChildren(conn, parent, installed);
        const triggers = await ensureTriggers(conn, parent.schema, parent.table, triggerDefinitions({ ...meta, metaSchema, nodeId, applySecret, cascades, replaceKeepsReferences }));
        if (triggers.length > 0) log.info('updated cascade triggers', { table: formatTableRef(parent), triggers });
      }
      return { nodeId, metaSchema, recordedNodeId: recorded === undefined, tables, warnings };
    }
  });
}

/** A registered table's metadata with its tombstone table and claim tables (created when missing), as its triggers need it. */
async function installedMeta(conn: Connection, metaSchema: string, ref: TableRef, versionColumn: string, tombstoneTable: string): Promise<TableMeta> {
  const meta = { ...(await loadTableMeta(conn, ref.schema, ref.table, versionColumn)), tombstoneTable };
  meta.claims = await ensureClaimTables(conn, metaSchema, meta);
  return meta;
}

/** What an install run added for a table it registered (see undo). */
interface Added {
  ref: TableRef;
  tombstoneTable: string;
  versionColumn: string;
  addedVersionColumn: boolean;
  createdTombstoneTable: boolean;
  /** Claim tables of its UNIQUE keys (CREATE TABLE IF NOT EXISTS: dropped on undo whether new or not; they only hold this table's claims). */
  claimTables?: string[];
  /** Installed parents whose cascade trigger this run changed to cover the table. */
  parents: TableRef[];
}

/**
 * Takes back what a failed install run added, newest first: the tables' triggers, the version
 * columns and tombstone tables it created, their registry rows. Returns what could not be undone.
 */
async function undo(conn: Connection, metaSchema: string, added: readonly Added[], log: Logger): Promise<string[]> {
  const leftovers: string[] = [];
  const attempt = async (what: string, sql: string, params: unknown[] = []) => {
    try {
      await conn.query(sql, params);
    } catch (e) {
      leftovers.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  await conn.query(UNLOCK_TABLES_SQL).catch(() => undefined);
  for (const a of [...added].reverse()) {
    const name = formatTableRef(a.ref);
    const existing = await triggersOn(conn, a.ref.schema, a.ref.table).catch(() => new Map<string, unknown>());
    for (const kind of TRIGGER_KINDS) {
      const trigger = triggerName(a.ref.table, kind);
      if (existing.has(trigger)) await attempt(`trigger ${trigger} of ${name}`, dropTriggerSql(a.ref.schema, trigger));
    }
    if (a.addedVersionColumn) await attempt(`version column of ${name}`, dropVersionColumnSql(a.ref.schema, a.ref.table, a.versionColumn));
    if (a.createdTombstoneTable) await attempt(`tombstone table of ${name}`, dropTableSql(metaSchema, a.tombstoneTable));
    for (const t of a.claimTables ?? []) await attempt(`claim table ${t} of ${name}`, dropTableSql(metaSchema, t));
    await attempt(`registry row of ${name}`, unregisterTableSql(metaSchema), [a.ref.schema, a.ref.table]);
    log.warn('install undone for a table after a failure', { table: name });
  }
  return leftovers;
}

/** Removes exactly what install added; drops the metadata schema when no table remains registered. */
export async function uninstall(options: UninstallOptions): Promise<UninstallResult> {
  checkTarget(options);
  const metaSchema = checkIdentifier('metaSchema', options.metaSchema ?? DEFAULT_META_SCHEMA);
  const explicit = checkTableSelection(options.tables, options.schema);
  const log = options.logger ?? silentLogger;

  return withSession(options, async (conn) => {
    const registry = await registeredTables(conn, metaSchema);
    const refs =
      explicit ??
      [...registry.values()].filter((r) => r.schemaName === options.schema).map((r) => ({ schema: r.schemaName, table: r.tableName }));
    const warnings: string[] = [];
    const tables: UninstalledTable[] = [];
    for (const ref of refs) {
      const name = formatTableRef(ref);
      const reg = registry.get(name);
      const existing = await triggersOn(conn, ref.schema, ref.table);
      const droppedTriggers: string[] = [];
      for (const kind of TRIGGER_KINDS) {
        const trigger = triggerName(ref.table, kind);
        if (!existing.has(trigger)) continue;
        await conn.query(dropTriggerSql(ref.schema, trigger));
        droppedTriggers.push(trigger);
      }
      let droppedVersionColumn = false;
      let droppedTombstoneTable: string | undefined;
      if (reg) {
        if (reg.addedVersionColumn && (await hasColumn(conn, ref.schema, ref.table, reg.versionColumn))) {
          await conn.query(dropVersionColumnSql(ref.schema, ref.table, reg.versionColumn));
          droppedVersionColumn = true;
        }
        await conn.query(dropTableSql(metaSchema, reg.tombstoneTable));
        droppedTombstoneTable = reg.tombstoneTable;
        for (const t of await claimTablesOf(conn, metaSchema, ref)) await conn.query(dropTableSql(metaSchema, t));
        await conn.query(unregisterTableSql(metaSchema), [ref.schema, ref.table]);
        log.info('uninstalled table', { table: name, droppedTriggers, droppedVersionColumn });
      } else {
        const warning = `${name} is not installed (not registered in ${metaSchema}.tables)${droppedTriggers.length > 0 ? '; dropped its leftover lww triggers' : ''}`;
        warnings.push(warning);
        log.warn(warning);
      }
      tables.push({ schema: ref.schema, table: ref.table, wasInstalled: reg !== undefined, droppedTriggers, droppedVersionColumn, droppedTombstoneTable });
    }
    // The schema goes with the last installed table. One that install never touched (a sink
    // created it, no node id is recorded) keeps its checkpoints.
    let droppedMetaSchema = false;
    const installedHere = tables.some((t) => t.wasInstalled) || (await recordedNodeId(conn, metaSchema)) !== undefined;
    if (installedHere && (await remainingRegistered(conn, metaSchema)) === 0) {
      await conn.query(dropSchemaSql(metaSchema));
      droppedMetaSchema = true;
      log.info('dropped metadata schema', { metaSchema });
    }
    return { metaSchema, tables, droppedMetaSchema, warnings };
  });
}

async function remainingRegistered(conn: Connection, metaSchema: string): Promise<number> {
  if ((await count(conn, META_TABLE_EXISTS_SQL, [metaSchema, 'tables'])) === 0) return 0;
  return count(conn, countRegisteredTablesSql(metaSchema));
}
