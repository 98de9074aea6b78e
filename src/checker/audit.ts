// The history audit (DESIGN §8): did replication keep the LWW rules while it ran? Reads each node's
// binlog over a window with the capture code, sink-applied transactions included and marked, turns
// every row change and tombstone write into per-key writes with canonical values, looks up the
// current version of keys whose writes seem lost, and hands the rest to audit-classify.ts.
//
// The window of each node is (from, until]: `from` given per node, or found from a time (`since`:
// the newest binlog file opened at or before it, transactions committed before it left out);
// `until` defaults to each node's binlog head when the audit starts. Run it after replication has
// caught up: a write still in flight at the end of the window would look lost, and a window starting
// while writes were in flight sees their replicated copies without their origin (those are counted
// as outside the window when their version is older than the origin's first write in it).
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { ConflictWrite, TransactionDetails } from '../capture/assembler.ts';
import { type BinlogPosition, comparePositions, parsePosition } from '../capture/position.ts';
import { binlogFileStartTime, startCapture } from '../capture/reader.ts';
import { binlogFiles, currentPosition } from '../capture/source.ts';
import { connect, redactUrl } from '../db/connection.ts';
import { InvalidOptionsError, LwwError, UnknownTableError } from '../errors.ts';
import type { Row, SourceTransaction } from '../model/change.ts';
import { tombstoneTableName } from '../model/names.ts';
import { parseVersion } from '../model/version.ts';
import { MARIADB_JSON_CHECKS_SQL, rowsByKeySql } from '../sql/checksum.ts';
import { VERSION_SQL } from '../sql/introspect.ts';
import { readNodeIdSql } from '../sql/replicator.ts';
import { type Logger, silentLogger } from '../writer/options.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { classifyHistory, type HistoryTransaction, type KeyWrite, keyIdOf, lostCandidates, type NodeHistory, withoutTransientInserts } from './audit-classify.ts';
import type { AuditNodeSummary, AuditReport } from './audit-report.ts';
import { canonicalValue, keyParam, type ValueColumn } from './compare-values.ts';
import { collatedIdentities, type KeyCollation, keyCollations } from './key-identity.ts';
import { type RegisteredTable, readRegisteredTables } from './registry.ts';
import { nodeLabel } from './report.ts';
import { CheckerNodeError, parseTableName } from './state-check.ts';

export interface AuditOptions {
  /** mysql:// URLs of the nodes, at least two. */
  nodes: string[];
  /** Window start per node: the binlog position after which reading starts. Or give `since`. */
  from?: string[];
  /** Window start as a time: see positionAtTime. */
  since?: Date;
  /** Window end per node (inclusive position after a transaction); default each node's head now. */
  until?: string[];
  /** `schema.table` names; default every table registered in `<metaSchema>.tables` on the first node. */
  tables?: string[];
  metaSchema?: string;
  versionColumn?: string;
  /** Findings kept (all are counted). Default 10,000. */
  maxFindings?: number;
  connectTimeoutMs?: number;
  /** Reading a node fails when its binlog position does not advance for this long before the window end. Default 30 s. */
  stallTimeoutMs?: number;
  logger?: Logger;
}

interface TableInfo {
  schema: string;
  table: string;
  /** `schema.table` */
  name: string;
  tombstoneTable: string;
  key: ValueColumn[];
  /** Per key column: its collation when it holds characters (the server decides which spellings are one key). */
  keyCollation: Array<KeyCollation | undefined>;
  /** Writable columns other than key and version. */
  values: ValueColumn[];
}

interface NodeSession {
  index: number;
  url: string;
  shown: string;
  conn: Connection;
  nodeId: number;
  mariadb: boolean;
  tables: Map<string, TableInfo>;
  /** Tombstone table name → its data table. */
  byTombstone: Map<string, TableInfo>;
}

interface KeyImage {
  text: string;
  key: Record<string, string | null>;
  /** Values as captured, to find the key again. */
  raw: unknown[];
}

interface TableEntry {
  schema: string;
  table: string;
  tombstoneTable: string;
}

const LOOKUP_BATCH = 500;

function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: string }).code;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message || code || String(err);
  }
  return String(err);
}

function validate(o: AuditOptions): void {
  if (!Array.isArray(o.nodes) || o.nodes.length < 2) throw new InvalidOptionsError('the history audit needs at least two nodes');
  if ((o.from === undefined) === (o.since === undefined)) throw new InvalidOptionsError('give the window start as from (a binlog position per node) or since (a time), not both');
  if (o.from && o.from.length !== o.nodes.length) {
    throw new InvalidOptionsError(`from needs one binlog position per node (${o.nodes.length}), got ${o.from.length}`);
  }
  if (o.until && o.until.length !== o.nodes.length) {
    throw new InvalidOptionsError(`until needs one binlog position per node (${o.nodes.length}), got ${o.until.length}`);
  }
  if (o.since && Number.isNaN(o.since.getTime())) throw new InvalidOptionsError('since is not a valid time');
  for (const p of [...(o.from ?? []), ...(o.until ?? [])]) parsePosition(p);
  for (const t of o.tables ?? []) parseTableName(t);
}

/**
 * The position to start reading a node's binlog at to cover everything committed at or after
 * `time`: the start of the newest binlog file the server opened at or before it (its first event's
 * time). When every retained file is newer, the oldest one, with a note saying so.
 */
export async function positionAtTime(url: string, time: Date, options: { connectTimeoutMs?: number } = {}): Promise<{ position: string; note?: string }> {
  const conn = await connect(url, { connectTimeoutMs: options.connectTimeoutMs });
  let files: Array<{ name: string; size: number }>;
  try {
    files = await binlogFiles(conn);
  } finally {
    await conn.end();
  }
  if (files.length === 0) throw new InvalidOptionsError(`${redactUrl(url)} has no binary logs (is log_bin on?)`);
  let started = 0;
  for (let i = files.length - 1; i >= 0; i--) {
    started = await binlogFileStartTime(url, files[i]!.name, options);
    if (started <= time.getTime()) return { position: `${files[i]!.name}:4` };
  }
  return {
    position: `${files[0]!.name}:4`,
    note: `${redactUrl(url)}: its oldest binlog ${files[0]!.name} started at ${new Date(started).toISOString()}, after the requested start; the window starts there`,
  };
}

async function openNode(index: number, url: string, o: AuditOptions, metaSchema: string): Promise<NodeSession> {
  const shown = redactUrl(url);
  let conn: Connection;
  try {
    conn = await connect(url, { connectTimeoutMs: o.connectTimeoutMs ?? 10_000 });
  } catch (err) {
    throw new CheckerNodeError(index, shown, `cannot connect: ${describeError(err)}`, { cause: err });
  }
  try {
    const [version] = await conn.query<RowDataPacket[]>(VERSION_SQL);
    const mariadb = /mariadb/i.test(String(version[0]?.version));
    const [rows] = await conn.query<RowDataPacket[]>(readNodeIdSql(metaSchema));
    if (rows.length === 0) throw new CheckerNodeError(index, shown, `no node id in ${metaSchema}.node: run install on it first`);
    return { index, url, shown, conn, nodeId: Number(rows[0]!.node_id), mariadb, tables: new Map(), byTombstone: new Map() };
  } catch (err) {
    conn.destroy();
    if (err instanceof CheckerNodeError) throw err;
    throw new CheckerNodeError(index, shown, `cannot read its node id from ${metaSchema}.node (is it installed?): ${describeError(err)}`, { cause: err });
  }
}

async function resolveTables(first: NodeSession, names: string[] | undefined, metaSchema: string, versionColumn: string): Promise<TableEntry[]> {
  let registered: RegisteredTable[] = [];
  try {
    registered = (await readRegisteredTables(first.conn, metaSchema)) ?? [];
  } catch (err) {
    throw new CheckerNodeError(0, first.shown, describeError(err), { cause: err });
  }
  const entries =
    names === undefined
      ? registered
      : names.map((name) => {
          const { schema, table } = parseTableName(name);
          return registered.find((r) => r.schema === schema && r.table === table) ?? { schema, table, tombstoneTable: tombstoneTableName(schema, table), versionColumn };
        });
  if (entries.length === 0) {
    throw new InvalidOptionsError(`no tables are registered in ${metaSchema}.tables on node A (run install, or name the tables with --tables schema.table,...)`);
  }
  const other = entries.find((e) => e.versionColumn !== versionColumn);
  if (other) {
    throw new InvalidOptionsError(
      `${other.schema}.${other.table} uses version column ${other.versionColumn}, not ${versionColumn}: audit tables of one version column at a time (--version-column)`,
    );
  }
  return entries.map(({ schema, table, tombstoneTable }) => ({ schema, table, tombstoneTable }));
}

/** The table's key and value columns on one node, JSON columns marked (MariaDB: by their json_valid check). */
async function describeTable(session: NodeSession, entry: TableEntry, versionColumn: string): Promise<TableInfo> {
  const name = `${entry.schema}.${entry.table}`;
  try {
    const meta = await loadTableMeta(session.conn, entry.schema, entry.table, versionColumn);
    const jsonColumns = new Set<string>();
    if (session.mariadb) {
      const [checks] = await session.conn.query<RowDataPacket[]>(MARIADB_JSON_CHECKS_SQL, [entry.schema, entry.table]);
      for (const r of checks) if (/^json_valid\(`.*`\)$/i.test(String(r.clause))) jsonColumns.add(String(r.name));
    }
    const column = (n: string): ValueColumn => {
      const c = meta.columns.find((x) => x.name === n)!;
      return { name: c.name, dataType: c.dataType, columnType: c.columnType, json: c.dataType === 'json' || jsonColumns.has(c.name) };
    };
    return {
      schema: entry.schema,
      table: entry.table,
      name,
      tombstoneTable: entry.tombstoneTable,
      key: meta.primaryKey.map(column),
      keyCollation: await keyCollations(session.conn, meta.primaryKey.map((k) => meta.columns.find((c) => c.name === k)!)),
      values: meta.writableColumns.filter((c) => c !== versionColumn && !meta.primaryKey.includes(c)).map(column),
    };
  } catch (err) {
    if (err instanceof UnknownTableError) throw new CheckerNodeError(session.index, session.shown, `table ${name} does not exist there`, { cause: err });
    if (err instanceof LwwError) throw new CheckerNodeError(session.index, session.shown, err.message, { cause: err });
    throw new CheckerNodeError(session.index, session.shown, describeError(err), { cause: err });
  }
}

function keyImage(info: TableInfo, row: Row): KeyImage {
  const canonical = info.key.map((c) => canonicalValue(c, row[c.name]));
  const key: Record<string, string | null> = {};
  info.key.forEach((c, i) => {
    key[c.name] = canonical[i] ?? null;
  });
  return { text: JSON.stringify(canonical), key, raw: info.key.map((c) => row[c.name]) };
}

/**
 * A key's text with case, accents and (PAD SPACE) trailing spaces folded away in the columns whose
 * collation ignores them: an approximation of the server's key equality, used only to pair a
 * delete with a tombstone of the same transaction written under another spelling.
 */
function foldedKeyText(info: TableInfo, image: KeyImage): string {
  return JSON.stringify(
    info.key.map((c, i) => {
      const v = image.key[c.name] ?? null;
      const coll = info.keyCollation[i];
      if (v === null || !coll) return v;
      let text = coll.padSpace ? v.replace(/ +$/, '') : v;
      if (/_ci(_|$)|_ai(_|$)/.test(coll.collation)) text = text.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
      return text;
    }),
  );
}

function valuesOf(info: TableInfo, row: Row): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const c of info.values) if (c.name in row) out[c.name] = canonicalValue(c, row[c.name]);
  return out;
}

function rowVersion(row: Row | undefined, versionColumn: string): bigint | undefined {
  if (!row || !(versionColumn in row)) return undefined;
  try {
    return parseVersion(typeof row[versionColumn] === 'number' ? row[versionColumn] : String(row[versionColumn]));
  } catch {
    return undefined;
  }
}

/**
 * Writes the sink logged as resolved in one transaction (apply.ts, foreign-keys.ts): rows a UNIQUE
 * clash removed, rows written with a SET NULL foreign key cleared, child rows gone with a CASCADE
 * parent; every reason by table and version. Rows of one multi-row source write share a version, so
 * one row's removal and another's cleared reference can both be logged at it (before, the last
 * reason hid the others: harness --schema-gen 105 on MySQL, a removal reported `inconsistent`).
 */
export function resolvedReasons(conflicts: readonly ConflictWrite[]): (table: string, version: bigint) => readonly string[] {
  const byWrite = new Map<string, string[]>();
  for (const c of conflicts) {
    const id = `${c.schema}.${c.table}\u0000${c.version}`;
    const list = byWrite.get(id);
    if (list) list.push(c.reason);
    else byWrite.set(id, [c.reason]);
  }
  return (table, version) => byWrite.get(`${table}\u0000${version}`) ?? [];
}

/** Turns a captured transaction into per-key writes; remembers each key's captured values for lookups. */
function toHistory(
  session: NodeSession,
  txn: SourceTransaction,
  details: TransactionDetails | undefined,
  versionColumn: string,
  keys: Map<string, { info: TableInfo; raw: unknown[] }>,
): HistoryTransaction {
  const writes: KeyWrite[] = [];
  const untombstoned = new Set(details?.untombstoned ?? []);
  const reasons = resolvedReasons(details?.conflicts ?? []);
  const markResolved = (w: KeyWrite) => {
    const logged = w.version === undefined ? [] : reasons(w.table, w.version);
    if (w.op === 'delete' && logged.some((r) => r.startsWith('unique key clash: removed'))) w.uniqueClash = true;
    if (w.op === 'delete' && logged.some((r) => r.startsWith('foreign key cascade'))) w.cascaded = true;
    if (w.op === 'upsert' && logged.some((r) => r.startsWith('foreign key set null'))) w.setNull = true;
    return w;
  };
  // Tombstone writes of each key in order: the n-th delete of a key in the transaction wrote the n-th.
  const tombstones = new Map<string, Array<{ info: TableInfo; image: KeyImage; version: bigint; used: boolean }>>();
  for (const t of details?.tombstones ?? []) {
    const info = session.byTombstone.get(t.table);
    if (!info) continue;
    const image = keyImage(info, t.key);
    const id = keyIdOf(info.name, image.text);
    const list = tombstones.get(id) ?? [];
    list.push({ info, image, version: t.version, used: false });
    tombstones.set(id, list);
  }
  // The same tombstones by a folded spelling of the key: the sink writes a tombstone with the
  // incoming change's spelling ('beta') and deletes the stored row of that key ('BETA'), so a
  // delete whose own spelling has no tombstone at or above the removed row takes one of another
  // spelling first (collateKeys later asks the server which spellings really are one key).
  // Only tombstones of a spelling no row delete of this transaction has: those belong to their own deletes.
  const deletedSpellings = new Set<string>();
  for (const c of txn.changes) {
    const info = session.tables.get(`${c.schema}.${c.table}`);
    if (!info || !c.before || c.op === 'insert') continue;
    if (c.op === 'update' && keyImage(info, c.before).text === keyImage(info, c.after!).text) continue;
    deletedSpellings.add(keyIdOf(info.name, keyImage(info, c.before).text));
  }
  // Every tombstone write of the transaction by folded spelling, whoever's it is (`covering`): a delete
  // whose own tombstones are all below the removed row may have been covered by one of another
  // spelling that a later delete of that spelling also takes (two spellings of one key deleted in one
  // batch, the sink's tombstone statement leaving the newer; harness --schema-gen 115 and 116).
  const folded = new Map<string, Array<{ info: TableInfo; image: KeyImage; version: bigint; used: boolean }>>();
  const covering = new Map<string, Array<{ version: bigint }>>();
  for (const [spelling, list] of tombstones) {
    for (const t of list) {
      const id = keyIdOf(t.info.name, foldedKeyText(t.info, t.image));
      if (!covering.has(id)) covering.set(id, []);
      covering.get(id)!.push(t);
      if (deletedSpellings.has(spelling)) continue;
      if (!folded.has(id)) folded.set(id, []);
      folded.get(id)!.push(t);
    }
  }
  const remember = (info: TableInfo, image: KeyImage) => {
    const id = keyIdOf(info.name, image.text);
    if (!keys.has(id)) keys.set(id, { info, raw: image.raw });
  };
  const deleteOf = (info: TableInfo, image: KeyImage, version: bigint | undefined, before: bigint | undefined, keyChange = false): KeyWrite => {
    const list = tombstones.get(keyIdOf(info.name, image.text));
    // A key change's delete half has the update's version: it takes that tombstone, or none (a sink
    // respelling a collated key writes none). A delete removes a row older than its tombstone (or,
    // a UNIQUE clash's removal, as old): a tombstone below the removed row's version was written by
    // a delete that found the row newer.
    const next = keyChange
      ? list?.find((t) => !t.used && t.version === version)
      : (list?.find((t) => !t.used && (before === undefined || t.version >= before)) ??
        (before === undefined ? undefined : folded.get(keyIdOf(info.name, foldedKeyText(info, image)))?.find((t) => !t.used && t.version >= before)) ??
        list?.find((t) => !t.used));
    if (keyChange && next === undefined) {
      const w: KeyWrite = { table: info.name, keyText: image.text, key: image.key, op: 'delete', version };
      if (before !== undefined) w.before = before;
      remember(info, image);
      return w;
    }
    // No tombstone of its own at or above the removed row, but one of another spelling of the key is:
    // that one removed it (shared, not taken from the delete it belongs to).
    const shared =
      !keyChange && version !== undefined && before !== undefined && (next === undefined || next.version < before)
        ? covering.get(keyIdOf(info.name, foldedKeyText(info, image)))?.find((t) => t.version >= before)
        : undefined;
    if (next && version !== undefined && !shared) next.used = true;
    // Every tombstone write of the key in this transaction already belongs to an earlier delete: this
    // one wrote none (capture's lenient lookup gave it the same tombstone's version again).
    const own = shared ? shared.version : version === undefined || (list !== undefined && next === undefined) ? undefined : (next?.version ?? version);
    const w: KeyWrite = { table: info.name, keyText: image.text, key: image.key, op: 'delete', version: own };
    if (before !== undefined) w.before = before;
    remember(info, image);
    return markResolved(w);
  };
  const upsertOf = (info: TableInfo, row: Row, version: bigint, before: bigint | undefined): KeyWrite => {
    const image = keyImage(info, row);
    const w: KeyWrite = { table: info.name, keyText: image.text, key: image.key, op: 'upsert', version, values: valuesOf(info, row) };
    if (before !== undefined) w.before = before;
    remember(info, image);
    return markResolved(w);
  };
  txn.changes.forEach((c, i) => {
    const info = session.tables.get(`${c.schema}.${c.table}`);
    if (!info) return;
    const before = rowVersion(c.before, versionColumn);
    if (c.op === 'insert') {
      writes.push(upsertOf(info, c.after!, c.version, undefined));
    } else if (c.op === 'update') {
      const oldKey = keyImage(info, c.before!);
      const newKey = keyImage(info, c.after!);
      if (oldKey.text === newKey.text) {
        writes.push(upsertOf(info, c.after!, c.version, before));
      } else {
        // A primary-key change: a delete of the old key and an upsert of the new one, same version.
        writes.push(deleteOf(info, oldKey, c.version, before, true));
        writes.push(upsertOf(info, c.after!, c.version, undefined));
      }
    } else {
      writes.push(deleteOf(info, keyImage(info, c.before!), untombstoned.has(i) ? undefined : c.version, before));
    }
  });
  // Tombstones written without a row delete: a replicated delete whose row was absent or newer.
  for (const list of tombstones.values()) {
    for (const t of list) {
      if (t.used) continue;
      writes.push(markResolved({ table: t.info.name, keyText: t.image.text, key: t.image.key, op: 'delete', version: t.version }));
      remember(t.info, t.image);
    }
  }
  return { position: txn.position, applied: details?.applied ?? false, writes };
}

/**
 * Gives every write of a key with character columns the key's identity under the columns'
 * collations (key-identity.ts), so spellings the primary key treats as one ('Beta'/'BETA', 'a'/'a ')
 * are judged as one key; returns the key lookup map under the same identities.
 */
async function collateKeys(
  conn: Connection,
  tables: ReadonlyMap<string, TableInfo>,
  histories: readonly NodeHistory[],
  keys: Map<string, { info: TableInfo; raw: unknown[] }>,
): Promise<Map<string, { info: TableInfo; raw: unknown[] }>> {
  const collated = new Map([...tables].filter(([, t]) => t.keyCollation.some((c) => c !== undefined)));
  if (collated.size === 0) return keys;
  const writes = histories.flatMap((h) => h.transactions.flatMap((t) => t.writes)).filter((w) => collated.has(w.table));
  const identities = new Map<string, Map<string, string>>();
  for (const [name, t] of collated) {
    for (const [i, c] of t.key.entries()) {
      const coll = t.keyCollation[i];
      if (!coll) continue;
      const values = writes.filter((w) => w.table === name).flatMap((w) => (w.key[c.name] == null ? [] : [w.key[c.name]!]));
      identities.set(`${name}\u0000${i}`, await collatedIdentities(conn, coll, values));
    }
  }
  const renamed = new Map<string, string>();
  for (const w of writes) {
    const t = collated.get(w.table)!;
    const before = keyIdOf(w.table, w.keyText);
    w.keyText = JSON.stringify(
      t.key.map((c, i) => {
        const v = w.key[c.name] ?? null;
        return t.keyCollation[i] && v !== null ? `weight:${identities.get(`${w.table}\u0000${i}`)!.get(v)}` : v;
      }),
    );
    renamed.set(before, keyIdOf(w.table, w.keyText));
  }
  // An update that changed only the spelling was split into a delete of the old spelling and an
  // upsert of the new one (toHistory): under one identity it is one update again.
  for (const h of histories) {
    for (const t of h.transactions) {
      if (!t.writes.some((w) => collated.has(w.table))) continue;
      const merged: KeyWrite[] = [];
      for (const w of t.writes) {
        const prev = merged[merged.length - 1];
        if (prev && prev.op === 'delete' && w.op === 'upsert' && w.before === undefined && prev.version === w.version && prev.table === w.table && prev.keyText === w.keyText) {
          merged[merged.length - 1] = prev.before === undefined ? w : { ...w, before: prev.before };
        } else merged.push(w);
      }
      t.writes = merged;
    }
  }
  const out = new Map<string, { info: TableInfo; raw: unknown[] }>();
  for (const [id, k] of keys) {
    const to = renamed.get(id) ?? id;
    if (!out.has(to)) out.set(to, k);
  }
  return out;
}

/** Reads one node's binlog over (from, until] into its history. */
async function readWindow(
  session: NodeSession,
  from: string,
  until: BinlogPosition,
  o: AuditOptions,
  metaSchema: string,
  versionColumn: string,
  keys: Map<string, { info: TableInfo; raw: unknown[] }>,
): Promise<NodeHistory> {
  const history: NodeHistory = { nodeId: session.nodeId, transactions: [] };
  if (comparePositions(parsePosition(from), until) >= 0) return history;
  const sinceMs = o.since ? Math.floor(o.since.getTime() / 1000) * 1000 : undefined;
  const stallMs = o.stallTimeoutMs ?? 30_000;
  let reached = false;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  let lastPosition = from;
  let lastProgressAt = Date.now();
  const progress = (position: string): boolean => {
    if (position !== lastPosition) {
      lastPosition = position;
      lastProgressAt = Date.now();
    }
    const c = comparePositions(parsePosition(position), until);
    if (c >= 0) {
      reached = true;
      finish();
    }
    return c <= 0;
  };
  const capture = await startCapture({
    source: session.url,
    sourceId: `audit-${nodeLabel(session.index)}`,
    tables: [...session.tables.values()].map((t) => ({ schema: t.schema, table: t.table })),
    from,
    metaSchema,
    versionColumn,
    includeApplied: true,
    heartbeatMs: 500,
    keepaliveIntervalMs: 1,
    connectTimeoutMs: o.connectTimeoutMs,
    reconnect: { maxAttempts: 5 },
    logger: o.logger,
    handler: {
      onTransaction: (txn, details) => {
        if (reached || !progress(txn.position)) return;
        if (sinceMs !== undefined && details?.timestamp !== undefined && details.timestamp < sinceMs) return;
        history.transactions.push(toHistory(session, txn, details, versionColumn, keys));
      },
      onKeepalive: (position) => {
        if (!reached) progress(position);
      },
    },
  }).catch((err: unknown) => {
    throw new CheckerNodeError(session.index, session.shown, `cannot read its binlog from ${from}: ${describeError(err)}`, { cause: err });
  });
  let watchdog: NodeJS.Timeout | undefined;
  try {
    const stalled = new Promise<never>((_, reject) => {
      watchdog = setInterval(() => {
        if (Date.now() - lastProgressAt > stallMs) {
          reject(new CheckerNodeError(session.index, session.shown, `its binlog stopped at ${lastPosition} for ${stallMs} ms before the window end ${until.file}:${until.offset}`));
        }
      }, 250);
    });
    const stopped = capture.done.then(() => {
      if (!reached) throw new CheckerNodeError(session.index, session.shown, `binlog reading stopped at ${lastPosition} before the window end`);
    });
    // Settles after the race too (stop() below resolves `done`); never an unhandled rejection.
    stopped.catch(() => undefined);
    stalled.catch(() => undefined);
    await Promise.race([finished, stopped, stalled]).catch((err: unknown) => {
      if (err instanceof CheckerNodeError) throw err;
      throw new CheckerNodeError(session.index, session.shown, `reading its binlog failed at ${lastPosition}: ${describeError(err)}`, { cause: err });
    });
  } finally {
    clearInterval(watchdog);
    await capture.stop();
  }
  return history;
}

/** The current version (the higher of row and tombstone) of each key asked for, on one node. */
async function currentVersions(session: NodeSession, ids: Set<string>, keys: Map<string, { info: TableInfo; raw: unknown[] }>, metaSchema: string, versionColumn: string): Promise<Map<string, bigint>> {
  const found = new Map<string, bigint>();
  const byTable = new Map<string, Array<{ id: string; raw: unknown[] }>>();
  for (const id of ids) {
    const k = keys.get(id);
    if (!k) continue;
    const list = byTable.get(k.info.name) ?? [];
    list.push({ id, raw: k.raw });
    byTable.set(k.info.name, list);
  }
  for (const [name, list] of byTable) {
    const info = session.tables.get(name);
    if (!info) continue;
    const columns = [...info.key.map((c) => c.name), versionColumn];
    for (const target of [
      { schema: info.schema, table: info.table, key: info.key },
      { schema: metaSchema, table: info.tombstoneTable, key: info.key },
    ]) {
      for (let i = 0; i < list.length; i += LOOKUP_BATCH) {
        const batch = list.slice(i, i + LOOKUP_BATCH);
        const params = batch.flatMap((k) => info.key.map((c, j) => keyParam(c, k.raw[j])));
        let rows: RowDataPacket[];
        try {
          [rows] = await session.conn.query<RowDataPacket[]>(rowsByKeySql(target, columns, batch.length), params);
        } catch (err) {
          throw new CheckerNodeError(session.index, session.shown, `reading the current versions of ${target.schema}.${target.table}: ${describeError(err)}`, { cause: err });
        }
        for (const r of rows) {
          const id = keyIdOf(name, keyImage(info, r).text);
          const v = rowVersion(r, versionColumn);
          if (v === undefined) continue;
          const prev = found.get(id);
          if (prev === undefined || v > prev) found.set(id, v);
        }
      }
    }
  }
  return found;
}

/** Audits the nodes' binlogs over the window; see the header comment and audit-classify.ts. */
export async function auditHistory(options: AuditOptions): Promise<AuditReport> {
  validate(options);
  const started = Date.now();
  const metaSchema = options.metaSchema ?? 'lww_meta';
  const versionColumn = options.versionColumn ?? '_lww_ts';
  const log = options.logger ?? silentLogger;
  const opened = await Promise.allSettled(options.nodes.map((url, i) => openNode(i, url, options, metaSchema)));
  const sessions = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  try {
    const failed = opened.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    for (const s of sessions) {
      const clash = sessions.find((o) => o.index < s.index && o.nodeId === s.nodeId);
      if (clash) throw new InvalidOptionsError(`nodes ${nodeLabel(clash.index)} and ${nodeLabel(s.index)} both have node id ${s.nodeId}: their writes cannot be told apart`);
    }
    const entries = await resolveTables(sessions[0]!, options.tables, metaSchema, versionColumn);
    for (const s of sessions) {
      for (const entry of entries) {
        const info = await describeTable(s, entry, versionColumn);
        s.tables.set(info.name, info);
        s.byTombstone.set(info.tombstoneTable, info);
      }
    }
    const notes: string[] = [];
    const from: string[] = [];
    for (const s of sessions) {
      if (options.from) {
        from.push(options.from[s.index]!);
        continue;
      }
      const at = await positionAtTime(s.url, options.since!, { connectTimeoutMs: options.connectTimeoutMs });
      from.push(at.position);
      if (at.note) notes.push(at.note);
    }
    const until = options.until ?? (await Promise.all(sessions.map((s) => currentPosition(s.conn))));
    for (const s of sessions) {
      if (comparePositions(parsePosition(from[s.index]!), parsePosition(until[s.index]!)) > 0) {
        throw new InvalidOptionsError(`node ${nodeLabel(s.index)}: the window start ${from[s.index]} is after its end ${until[s.index]}`);
      }
    }
    log.info('audit: reading binlogs', { from, until });
    const keys = new Map<string, { info: TableInfo; raw: unknown[] }>();
    const histories = await Promise.all(
      sessions.map((s) => readWindow(s, from[s.index]!, parsePosition(until[s.index]!), options, metaSchema, versionColumn, keys)),
    );
    const ids = await collateKeys(sessions[0]!.conn, sessions[0]!.tables, histories, keys);
    for (const h of histories) for (const t of h.transactions) if (t.applied) t.writes = withoutTransientInserts(t.writes);
    const candidates = lostCandidates(histories);
    const current = await Promise.all(sessions.map((s) => currentVersions(s, candidates[s.index]!, ids, metaSchema, versionColumn)));
    const result = classifyHistory(histories, { currentVersions: current, maxFindings: options.maxFindings });
    if (result.outsideWindow > 0) {
      notes.push(
        `${result.outsideWindow} replicated write(s) carry versions older than their origin's first local write in the window: written before the window started, not judged`,
      );
    }
    if (result.unknownVersionDeletes > 0) {
      notes.push(`${result.unknownVersionDeletes} replicated delete(s) wrote no tombstone (a non-LWW sink): their version is unknown, not judged`);
    }
    const nodes: AuditNodeSummary[] = sessions.map((s) => {
      const h = histories[s.index]!;
      const count = (applied: boolean) => h.transactions.filter((t) => t.applied === applied);
      return {
        url: s.shown,
        nodeId: s.nodeId,
        from: from[s.index]!,
        until: until[s.index]!,
        transactions: { local: count(false).length, applied: count(true).length },
        writes: {
          local: count(false).reduce((n, t) => n + t.writes.length, 0),
          applied: count(true).reduce((n, t) => n + t.writes.length, 0),
        },
      };
    });
    const findings = Object.values(result.counts).reduce((a, b) => a + b, 0);
    const report: AuditReport = {
      nodes,
      tables: entries.map((e) => `${e.schema}.${e.table}`),
      counts: result.counts,
      lwwSkipped: result.lwwSkipped,
      delivered: result.delivered,
      outsideWindow: result.outsideWindow,
      unknownVersionDeletes: result.unknownVersionDeletes,
      uniqueClashRemovals: result.uniqueClashRemovals,
      foreignKeySetNull: result.foreignKeySetNull,
      foreignKeyCascades: result.foreignKeyCascades,
      cascadeSideEffects: result.cascadeSideEffects,
      findings: result.findings,
      findingsTruncated: result.findingsTruncated,
      notes,
      ok: findings === 0,
      durationMs: Date.now() - started,
    };
    if (options.since) report.since = options.since.toISOString();
    log.info('audit: done', { findings, lwwSkipped: result.lwwSkipped, durationMs: report.durationMs });
    return report;
  } finally {
    await Promise.allSettled(sessions.map((s) => s.conn.end()));
  }
}
