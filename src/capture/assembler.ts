// Groups decoded binlog events into committed transactions, in commit order, and turns their rows
// into the change model: versions from the version column (deletes: from the tombstone the delete
// trigger wrote in the same transaction), metadata-schema rows never emitted, transactions applied
// by a sink (they write <meta>.checkpoints) dropped whole. Pure: no I/O, fed by reader.ts.
// The history audit reads with `includeApplied`: sink-applied transactions are emitted too, marked,
// with their tombstone writes, and a delete without a tombstone is reported instead of refused.
//
// Fail closed (every event on a captured table becomes exactly the source's change, or capture stops):
// - Large transactions are emitted in chunks (chunkRows / chunkBytes) that carry the transaction's
//   *start* position; only the last chunk carries its end, so a crash mid-way replays it whole.
// - Row images without every column (binlog_row_image MINIMAL/NOBLOB in a session) are marked for
//   repair (reader.ts re-reads the row by key, repair.ts), never applied with the missing columns.
// - Statement-logged DML and TRUNCATE of a captured table stop capture (CaptureRefusedError).
// - XA: a prepared group is held until its XA COMMIT (and dropped at XA ROLLBACK); positions stay at
//   the oldest open XA PREPARE's start, so a restart reads the group again.
import { CaptureError, CaptureRefusedError, MissingTombstoneError, UnsupportedTableError } from '../errors.ts';
import type { Row, RowChange, SourceTransaction } from '../model/change.ts';
import { compositeKeyText } from '../model/key-text.ts';
import { isClaimTable, tombstoneTableName } from '../model/names.ts';
import { parseVersion, VersionFormatError } from '../model/version.ts';
import { type DdlKind, parseDdl, parseDml } from './ddl.ts';
import type { TableFilter } from './filter.ts';
import { type BinlogPosition, comparePositions, formatPosition } from './position.ts';

/** The table every sink transaction writes its checkpoint to (see src/sql/checkpoint.ts). */
export const CHECKPOINT_TABLE = 'checkpoints';
/** The sink's conflict log (the audit reads which rows a UNIQUE clash removed). */
export const CONFLICT_TABLE = 'conflicts';

/** Binlog events reduced to what grouping needs (reader.ts builds them from zongji's events). */
export type CaptureEvent =
  /** A binlog file starts being read at `offset` (dump start, FLUSH LOGS, server restart). */
  | { type: 'rotate'; file: string; offset: number }
  /** A transaction opens: a BEGIN query, or a MariaDB GTID event that is not standalone. */
  | { type: 'begin' }
  /**
   * `partial`: the after images (inserts, updates) lack columns the binlog did not log (session
   * binlog_row_image MINIMAL or NOBLOB); absent columns are left out of the rows, never null.
   * `sourceColumns`: the table's columns as the binlog names them for these rows (binlog_row_metadata
   * =FULL), carried to the sink on each change (RowChange.sourceColumns).
   */
  | { type: 'rows'; schema: string; table: string; op: 'insert' | 'delete'; rows: Row[]; bytes: number; partial?: boolean; sourceColumns?: readonly string[] }
  | { type: 'rows'; schema: string; table: string; op: 'update'; rows: Array<{ before: Row; after: Row }>; bytes: number; partial?: boolean; sourceColumns?: readonly string[] }
  /**
   * A commit marker (XID event, or a COMMIT query); `nextPosition` is the offset after it,
   * `timestamp` the event header's time in ms (second resolution) when known.
   */
  | { type: 'commit'; nextPosition: number; timestamp?: number }
  /** Any other QUERY event (DDL, XA, GRANT...). */
  | { type: 'query'; query: string; schema: string; nextPosition: number; timestamp?: number }
  /**
   * XA PREPARE ends an event group without committing it (`onePhase`: XA COMMIT ... ONE PHASE, which
   * commits it). `xid` in the form XA COMMIT/ROLLBACK statements print it: X'gtrid',X'bqual',formatId.
   */
  | { type: 'xa_prepare'; nextPosition: number; xid: string; onePhase: boolean }
  /** A TABLE_MAP event: the transaction touches this table (its row events follow). */
  | { type: 'table'; schema: string; table: string }
  /** The server is idle at `file:nextPosition`. */
  | { type: 'heartbeat'; file: string; nextPosition: number };

export interface SchemaChange {
  schema: string;
  /** Undefined for schema-level DDL (CREATE/ALTER/DROP DATABASE). */
  table?: string;
  kind: DdlKind;
  query: string;
  /** Resume position after the statement. */
  position: string;
}

/** A tombstone row a transaction inserted or updated in the metadata schema. */
export interface TombstoneWrite {
  /** Tombstone table name (in the metadata schema). */
  table: string;
  /** The key columns of the tombstone row (all columns but the version). */
  key: Row;
  version: bigint;
}

/** A conflict-log row: which table, why, and the version of the row it names. */
export interface ConflictWrite {
  schema: string;
  table: string;
  reason: string;
  version: bigint;
}

/** What the history audit needs beyond the changes; only emitted with `includeApplied`. */
export interface TransactionDetails {
  /** The transaction wrote <meta>.checkpoints: a sink applied it (not a local write). */
  applied: boolean;
  /**
   * Indexes into `txn.changes` of deletes without a tombstone in their transaction (a non-LWW
   * sink's plain DELETE, or the delete half of its REPLACE INTO). Their delete version is unknown:
   * `version` holds the deleted row's own version (from the before image) instead.
   */
  untombstoned: number[];
  /** Every tombstone row written, also those without a row delete (the row was absent or newer). */
  tombstones: TombstoneWrite[];
  /** Conflict-log rows the transaction wrote (a sink resolving a UNIQUE clash). */
  conflicts?: ConflictWrite[];
  /** Commit time from the binlog event header (ms, second resolution), when the event carried one. */
  timestamp?: number;
}

export type AssembledItem =
  /**
   * `details` only with `includeApplied`. `repairs`: indexes of changes whose after image is
   * incomplete (re-read them from the source by key before applying). `continues`: a chunk of a
   * larger source transaction; its position is the transaction's start, and more chunks follow.
   */
  | { kind: 'transaction'; txn: SourceTransaction; bytes: number; details?: TransactionDetails; repairs?: number[]; continues?: boolean }
  /** A committed transaction written by a sink (touched the checkpoint table): never emitted. `timestamp` as in TransactionDetails. */
  | { kind: 'dropped'; position: string; timestamp?: number }
  /** A committed transaction or statement with nothing for the captured tables. */
  | { kind: 'skipped'; position: string; timestamp?: number }
  | { kind: 'schema'; change: SchemaChange }
  /** The server is idle: everything up to `position` has been read. */
  | { kind: 'keepalive'; position: string };

export interface AssemblerOptions {
  sourceId: string;
  tables: TableFilter;
  metaSchema: string;
  versionColumn: string;
  /**
   * For the history audit, default false. Emit sink-applied transactions too (marked in the item's
   * `details`, with the tombstones written), also ones that only wrote tombstones, and emit a
   * delete without a tombstone (see TransactionDetails.untombstoned) instead of throwing
   * MissingTombstoneError. Never for replication: applied transactions would loop.
   */
  includeApplied?: boolean;
  /** Emit an open transaction in chunks of this many row changes. Default 2,000. */
  chunkRows?: number;
  /** ... or of this many binlog bytes. Default 16 MiB. */
  chunkBytes?: number;
  /**
   * Row events of a captured table whose full image has no version column were written before the
   * table was installed (the event names its own columns): with this callback they are skipped and
   * reported (install's backfill and the initial copy carry those rows), until the table's first
   * event with the version column; without it, or after that, they stop capture (UnsupportedTableError).
   */
  onUnversioned?: (schema: string, table: string) => void;
}

/** Default chunk bounds of a large source transaction (bounded memory in capture and sink). */
export const DEFAULT_CHUNK_ROWS = 2000;
export const DEFAULT_CHUNK_BYTES = 16 << 20;

interface PendingChange {
  schema: string;
  table: string;
  op: RowChange['op'];
  before?: Row;
  after?: Row;
  /** Undefined for deletes until commit, when the tombstone is known. */
  version?: bigint;
  /** The after image lacks columns: re-read the row by key (see AssembledItem.repairs). */
  partial?: boolean;
  /** See RowChange.sourceColumns. */
  sourceColumns?: readonly string[];
}

/**
 * One entry of a transaction's binlog order as far as deletes need it: a captured-table row change,
 * or a tombstone row written. `serial` grows in push order (savepoints cut by it); `event` numbers
 * the rows event the entry came from.
 */
type OrderEntry =
  | { kind: 'row'; change: PendingChange; serial: number; event: number }
  | {
      kind: 'tomb';
      /** Tombstone table name (in the metadata schema). */
      table: string;
      key: Row;
      /** keyText of `key`. */
      text: string;
      version: bigint;
      serial: number;
      event: number;
      /** A row change of its key that came after it was emitted in a chunk: no delete can take it any more. */
      closed?: boolean;
    };
type TombEntry = Extract<OrderEntry, { kind: 'tomb' }>;

/**
 * The tombstone writes a delete may take its version from. `after`: those written after the delete
 * and before the next row change of its key (the delete's own AFTER DELETE trigger). `before`: those
 * written since the previous row change of its key (a parent's BEFORE DELETE trigger ahead of a
 * cascaded delete; a sink writes its tombstone before it deletes). `settled`: a later rows event
 * was read (a trigger's tombstone would have come by now).
 */
interface DeleteTombstones {
  after: TombEntry[];
  before: TombEntry[];
  settled: boolean;
}

interface OpenTransaction {
  changes: PendingChange[];
  appliedBySink: boolean;
  /**
   * Row changes of captured tables and tombstone writes in binlog order. A delete's version is the
   * tombstone written for its key in its own window (see DeleteTombstones), so a key deleted twice
   * in one transaction (a multi-row REPLACE naming it twice, delete + re-insert + delete) gives each
   * delete its own tombstone. Entries leave with the chunk that used them.
   */
  order: OrderEntry[];
  serial: number;
  /** Rows events read. */
  events: number;
  /** chunk() found nothing ready: it tries again once the order is this long (no rescan per event). */
  chunkRetryAt?: number;
  /** Tombstone table → its key columns (all columns of a tombstone row but the version). */
  keyColumns: Map<string, string[]>;
  /** Tombstone rows in write order (kept with includeApplied only). */
  tombstoneWrites: TombstoneWrite[];
  conflictWrites?: ConflictWrite[];
  /** Binlog bytes of the changes not emitted yet. */
  bytes: number;
  /** Chunks of it were emitted already, and how many changes they held. */
  chunked: boolean;
  emitted: number;
  /** SAVEPOINT name (lower case) → changes count (emitted included) and order serial when it was set. */
  savepoints?: Map<string, { changes: number; serial: number }>;
}

function openTransaction(): OpenTransaction {
  return { changes: [], appliedBySink: false, order: [], serial: 0, events: 0, keyColumns: new Map(), tombstoneWrites: [], bytes: 0, chunked: false, emitted: 0 };
}

/** An XA transaction between its XA PREPARE and its XA COMMIT / ROLLBACK. */
interface PreparedXa {
  txn: OpenTransaction;
  /** Where its group starts: the resume position while it is open. */
  start: BinlogPosition;
}

/** The name of an XA transaction as XA COMMIT / XA ROLLBACK statements print it (spaces and case aside). */
export function normalizeXid(text: string): string {
  return text.replace(/\s+/g, '').toUpperCase();
}

/** The highest version of some tombstone writes (at least one). */
function highest(entries: readonly TombEntry[]): bigint {
  let v = entries[0]!.version;
  for (const e of entries) if (e.version > v) v = e.version;
  return v;
}

/** Stable text of key values: buffers by bytes, everything else by its string form. */
function keyText(row: Row, columns: readonly string[]): string {
  return compositeKeyText(
    columns.map((c) => {
      const v = row[c];
      if (v === null || v === undefined) return '\u0000null';
      if (Buffer.isBuffer(v)) return `x${v.toString('hex')}`;
      return `s${String(v)}`;
    }),
  );
}

export class TransactionAssembler {
  private file: string | undefined;
  private boundary: BinlogPosition | undefined;
  private open: OpenTransaction | undefined;
  /** Where the open transaction started (the boundary before it). */
  private openStart: BinlogPosition | undefined;
  private readonly prepared = new Map<string, PreparedXa>();
  /** Tombstone table → the captured table it belongs to (from table maps read). */
  private readonly tombstoneOwners = new Map<string, { schema: string; table: string }>();
  private readonly seenTables = new Set<string>();
  /** Captured tables whose row events have carried the version column since capture started. */
  private readonly versionedTables = new Set<string>();
  private readonly chunkRows: number;
  private readonly chunkBytes: number;

  constructor(private readonly options: AssemblerOptions) {
    this.chunkRows = options.chunkRows ?? DEFAULT_CHUNK_ROWS;
    this.chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  }

  /**
   * Where reading resumes so nothing is lost: after the last complete transaction or statement read,
   * or the start of the oldest XA transaction prepared but not yet committed (its rows are only in
   * memory until then).
   */
  get position(): string | undefined {
    const p = this.resumePoint();
    return p ? formatPosition(p) : undefined;
  }

  private resumePoint(): BinlogPosition | undefined {
    let p = this.boundary;
    for (const xa of this.prepared.values()) if (!p || comparePositions(xa.start, p) < 0) p = xa.start;
    return p;
  }

  get inTransaction(): boolean {
    return this.open !== undefined;
  }

  /** Reading starts at `p`, a transaction boundary. */
  resumeFrom(p: BinlogPosition): void {
    this.boundary = { ...p };
    this.file = p.file;
    this.open = undefined;
    this.prepared.clear();
  }

  /**
   * Forgets a half-read transaction and prepared XA groups (the connection dropped); reading
   * restarts at `position`, which reads them again.
   */
  reset(): void {
    const p = this.resumePoint();
    this.open = undefined;
    this.prepared.clear();
    if (p) this.boundary = { ...p };
    this.file = undefined;
  }

  private begin(): void {
    this.open = openTransaction();
    this.openStart = this.boundary ? { ...this.boundary } : undefined;
  }

  /**
   * The open transaction is a sink's (it wrote the checkpoint row) and will be dropped whole: its
   * further row events need not be decoded (reader.ts has the decoder skip them). Never for the audit.
   */
  droppingOpenTransaction(): boolean {
    return this.open?.appliedBySink === true && this.options.includeApplied !== true;
  }

  /** Feeds one event; returns what it completes (usually nothing until a commit). */
  push(event: CaptureEvent): AssembledItem[] {
    switch (event.type) {
      case 'rotate':
        this.file = event.file;
        // The rotate that opens a dump names the start position: a boundary by construction.
        if (!this.open && !this.boundary) this.boundary = { file: event.file, offset: event.offset };
        return [];
      case 'begin':
        if (this.open && (this.open.changes.length > 0 || this.open.appliedBySink || this.open.chunked)) {
          throw new CaptureError(`a transaction began before the previous one committed (after ${this.position ?? 'the start'})`, this.position);
        }
        this.begin();
        return [];
      case 'rows':
        return this.rows(event);
      case 'table':
        this.noteTable(event.schema, event.table);
        return [];
      case 'commit':
        return this.commit(event.nextPosition, event.timestamp);
      case 'xa_prepare':
        return this.xaPrepare(event);
      case 'query':
        return this.query(event);
      case 'heartbeat':
        if (this.open || event.nextPosition < 4) return [];
        this.boundary = { file: event.file, offset: event.nextPosition };
        this.file = event.file;
        return [{ kind: 'keepalive', position: formatPosition(this.boundary) }];
    }
  }

  private rows(event: Extract<CaptureEvent, { type: 'rows' }>): AssembledItem[] {
    // Row events always sit inside BEGIN..COMMIT; this only guards against a stream resumed mid-group.
    if (!this.open) this.begin();
    const txn = this.open!;
    txn.bytes += event.bytes;
    txn.events++;
    const { metaSchema } = this.options;
    if (event.schema === metaSchema) {
      if (event.table === CHECKPOINT_TABLE) {
        if (txn.chunked && !this.options.includeApplied) {
          // Chunks of it were handed on as local changes: applying them back would loop.
          throw new CaptureRefusedError(
            `a transaction already handed on in chunks turned out to be written by a sink (it wrote ${metaSchema}.${CHECKPOINT_TABLE} late)`,
            undefined,
            this.position,
            'the peer runs a sink that writes its checkpoint last; upgrade every replicator of this cluster to one version',
          );
        }
        txn.appliedBySink = true;
      } else if (event.table === CONFLICT_TABLE) {
        if (this.options.includeApplied && event.op === 'insert') this.recordConflicts(txn, event);
      } else if (!isClaimTable(event.table)) this.recordTombstones(txn, event);
      // Claim tables travel in the data's before images instead (writer/claims.ts).
      return [];
    }
    if (!this.options.tables.includes(event.schema, event.table)) return [];
    if (this.options.onUnversioned && this.unversioned(event)) {
      // Only before the table's first versioned event: after it, an image without the version column
      // is not a pre-install write (the column was dropped, or the triggers removed while capture
      // ran) and stops capture in versionOf, naming the table.
      if (!this.versionedTables.has(`${event.schema}\u0000${event.table}`)) {
        this.options.onUnversioned(event.schema, event.table);
        return [];
      }
    } else if (!event.partial) this.versionedTables.add(`${event.schema}\u0000${event.table}`);
    // A row event as large as a chunk travels alone: the changes read before it go first.
    const first = event.bytes >= this.chunkBytes && txn.changes.length > 0 && !this.options.includeApplied && !txn.appliedBySink ? this.chunk(txn, event.bytes) : [];
    const base = event.sourceColumns ? { schema: event.schema, table: event.table, op: event.op, sourceColumns: event.sourceColumns } : { schema: event.schema, table: event.table, op: event.op };
    const partial = event.partial === true && event.op !== 'delete';
    const add = (change: PendingChange) => {
      txn.changes.push(change);
      txn.order.push({ kind: 'row', change, serial: txn.serial++, event: txn.events });
    };
    if (event.op === 'update') {
      for (const { before, after } of event.rows) add({ ...base, before, after, version: this.versionOf(event, after, partial), ...(partial ? { partial } : {}) });
    } else if (event.op === 'insert') {
      for (const after of event.rows) add({ ...base, after, version: this.versionOf(event, after, partial), ...(partial ? { partial } : {}) });
    } else {
      for (const before of event.rows) add({ ...base, before });
    }
    if (this.options.includeApplied || txn.appliedBySink) return first;
    if (txn.changes.length < this.chunkRows && txn.bytes < this.chunkBytes) return first;
    return [...first, ...this.chunk(txn)];
  }

  /**
   * Emits the changes of an open transaction that are complete: everything before its first delete
   * whose tombstone has not been read yet (its trigger writes it right after the row). The chunk
   * carries the position where the transaction started: the checkpoint reaches its end only with
   * the commit. A crash replays it from the start; LWW makes that harmless.
   */
  private chunk(txn: OpenTransaction, keepBytes = 0): AssembledItem[] {
    const start = this.openStart ?? this.boundary;
    if (!start) return [];
    if (txn.chunkRetryAt !== undefined && txn.order.length < txn.chunkRetryAt) return [];
    let ready = 0;
    const versions: bigint[] = [];
    const windows = this.deleteWindows(txn);
    const used = new Set<TombEntry>();
    for (; ready < txn.changes.length; ready++) {
      const p = txn.changes[ready]!;
      if (p.version !== undefined) {
        versions.push(p.version);
        continue;
      }
      // Only once its own tombstone was read (or, taking one written before it, once the next rows event was).
      const w = windows.get(p);
      const entries = w && (w.after.length > 0 ? w.after : w.settled ? w.before : []);
      if (!entries || entries.length === 0) break;
      versions.push(highest(entries));
      for (const e of entries) used.add(e);
    }
    if (ready === 0) {
      // A delete waits for its tombstone (normally the next rows event). Scanning the order again for
      // every event would be quadratic where none comes (a table without triggers): back off.
      txn.chunkRetryAt = txn.order.length + Math.max(1, txn.order.length >> 3);
      return [];
    }
    txn.chunkRetryAt = undefined;
    const taken = txn.changes.splice(0, ready);
    this.trimOrder(txn, new Set(taken), used);
    const position = formatPosition(this.resumePointBefore(start));
    const item = this.transactionItem(taken, versions, position, txn.bytes - keepBytes);
    item.continues = true;
    // `keepBytes`: the event being read now, counted already, stays with the changes after this chunk.
    txn.bytes = keepBytes;
    txn.chunked = true;
    txn.emitted += taken.length;
    return [item];
  }

  /** A position at or before `p` that also keeps every open XA group readable. */
  private resumePointBefore(p: BinlogPosition): BinlogPosition {
    let out = p;
    for (const xa of this.prepared.values()) if (comparePositions(xa.start, out) < 0) out = xa.start;
    return out;
  }

  private transactionItem(pending: PendingChange[], versions: readonly bigint[], position: string, bytes: number): Extract<AssembledItem, { kind: 'transaction' }> {
    const repairs: number[] = [];
    const changes: RowChange[] = pending.map((p, i) => {
      const change: RowChange = { schema: p.schema, table: p.table, op: p.op, version: versions[i]! };
      if (p.before) change.before = p.before;
      if (p.after) change.after = p.after;
      if (p.sourceColumns && p.op !== 'delete') change.sourceColumns = p.sourceColumns;
      if (p.partial) repairs.push(i);
      return change;
    });
    const item: Extract<AssembledItem, { kind: 'transaction' }> = { kind: 'transaction', txn: { sourceId: this.options.sourceId, position, changes }, bytes };
    if (repairs.length > 0) item.repairs = repairs;
    return item;
  }

  private recordConflicts(txn: OpenTransaction, event: Extract<CaptureEvent, { type: 'rows' }>): void {
    for (const row of event.rows as Row[]) {
      const version = row.version;
      if (version === null || version === undefined) continue;
      txn.conflictWrites ??= [];
      txn.conflictWrites.push({ schema: String(row.schema_name), table: String(row.table_name), reason: String(row.reason), version: BigInt(String(version)) });
    }
  }

  /** Tombstone rows (any metadata table but the checkpoints): key columns are all but the version. */
  private recordTombstones(txn: OpenTransaction, event: Extract<CaptureEvent, { type: 'rows' }>): void {
    if (event.op === 'delete') return; // tombstone garbage collection
    const images = event.op === 'update' ? event.rows.map((r) => r.after) : event.rows;
    for (const row of images) {
      if (!(this.options.versionColumn in row)) return; // not a tombstone table
      let keyColumns = txn.keyColumns.get(event.table);
      if (!keyColumns) {
        keyColumns = Object.keys(row).filter((c) => c !== this.options.versionColumn);
        txn.keyColumns.set(event.table, keyColumns);
      }
      const version = this.versionOf(event, row);
      const keyRow: Row = {};
      for (const c of keyColumns) keyRow[c] = row[c];
      txn.order.push({ kind: 'tomb', table: event.table, key: keyRow, text: keyText(row, keyColumns), version, serial: txn.serial++, event: txn.events });
      if (this.options.includeApplied) txn.tombstoneWrites.push({ table: event.table, key: keyRow, version });
    }
  }

  /** A complete row image without the version column: written while the table was not installed. */
  private unversioned(event: Extract<CaptureEvent, { type: 'rows' }>): boolean {
    if (event.partial) return false;
    const first = event.rows[0];
    if (!first) return false;
    const image = event.op === 'update' ? (first as { after: Row }).after : (first as Row);
    return !(this.options.versionColumn in image);
  }

  /** The row's version; 0 for an incomplete image without it (repair reads the row's own version). */
  private versionOf(event: { schema: string; table: string }, row: Row, partial = false): bigint {
    const column = this.options.versionColumn;
    if (partial && !(column in row)) return 0n;
    if (!(column in row)) {
      throw new UnsupportedTableError(event.schema, event.table, `its row images have no version column ${column}; run install for this table`);
    }
    try {
      return parseVersion(typeof row[column] === 'number' ? row[column] : String(row[column]));
    } catch (err) {
      if (err instanceof VersionFormatError) {
        throw new UnsupportedTableError(event.schema, event.table, `version column ${column} holds ${String(row[column])}: ${err.message}`);
      }
      throw err;
    }
  }

  /** Moves the boundary past an event group; returns the position to emit with it (held back by open XA groups). */
  private emitAt(nextPosition: number): string {
    this.boundaryAt(nextPosition);
    return formatPosition(this.resumePoint()!);
  }

  private boundaryAt(nextPosition: number): string {
    if (this.file === undefined || nextPosition < 4) {
      throw new CaptureError(`cannot tell the binlog position after a commit (file ${this.file ?? 'unknown'}, offset ${nextPosition})`, this.position);
    }
    this.boundary = { file: this.file, offset: nextPosition };
    return formatPosition(this.boundary);
  }

  private commit(nextPosition: number, timestamp?: number): AssembledItem[] {
    const txn = this.open;
    this.open = undefined;
    return this.finish(txn, this.emitAt(nextPosition), timestamp);
  }

  /** The items a committed transaction becomes, at `position`. */
  private finish(txn: OpenTransaction | undefined, position: string, timestamp?: number): AssembledItem[] {
    const audit = this.options.includeApplied === true;
    const at = timestamp === undefined ? {} : { timestamp };
    if (txn?.appliedBySink && !audit) return [{ kind: 'dropped', position, ...at }];
    const untombstoned: number[] = [];
    const windows = txn ? this.deleteWindows(txn) : new Map<PendingChange, DeleteTombstones>();
    const used = new Set<TombEntry>();
    const versions = (txn?.changes ?? []).map((p, index) => {
      if (p.version !== undefined) return p.version;
      const version = this.deleteVersion(windows.get(p), p, position, audit, txn!.appliedBySink, used);
      if (version !== undefined) return version;
      untombstoned.push(index);
      return this.versionOf(p, p.before!);
    });
    if (txn && !audit) this.tombstonedOnly(txn, versions, used);
    const empty = !txn || (txn.changes.length === 0 && !txn.chunked && !(audit && txn.tombstoneWrites.length > 0));
    if (empty) return txn?.appliedBySink ? [{ kind: 'dropped', position, ...at }] : [{ kind: 'skipped', position, ...at }];
    // The last chunk of a chunked transaction may be empty: it still moves the checkpoint to the end.
    const item = this.transactionItem(txn.changes, versions, position, txn.bytes);
    // Only the end carries the commit time (SourceTransaction.sourceTimeMs): earlier chunks keep the start position.
    if (timestamp !== undefined) item.txn.sourceTimeMs = timestamp;
    if (audit) {
      item.details = { applied: txn.appliedBySink, untombstoned, tombstones: txn.tombstoneWrites };
      if (txn.conflictWrites) item.details.conflicts = txn.conflictWrites;
      if (timestamp !== undefined) item.details.timestamp = timestamp;
    }
    return [item];
  }

  /** The key texts a row change touches (before and after image), in its table's tombstone spelling. */
  private changeKeys(txn: OpenTransaction, change: PendingChange): { tombTable: string; texts: string[] } | undefined {
    const tombTable = tombstoneTableName(change.schema, change.table);
    const keyColumns = txn.keyColumns.get(tombTable);
    if (!keyColumns) return undefined; // no tombstone of this table in the transaction
    const texts = [change.before, change.after].flatMap((r) => (r ? [keyText(r, keyColumns)] : []));
    return { tombTable, texts: [...new Set(texts)] };
  }

  /** Walks the transaction's order: the tombstone writes each delete (not emitted yet) may take its version from. */
  private deleteWindows(txn: OpenTransaction): Map<PendingChange, DeleteTombstones> {
    const out = new Map<PendingChange, DeleteTombstones>();
    if (txn.keyColumns.size === 0) {
      // No tombstone written in the transaction (tombstone entries set keyColumns): a delete has none
      // to take, and no key needs following. The common single-row update takes this path.
      for (const e of txn.order) {
        if (e.kind === 'row' && e.change.op === 'delete') out.set(e.change, { after: [], before: [], settled: txn.events > e.event });
      }
      return out;
    }
    const keys = new Map<string, { awaiting?: DeleteTombstones; since: TombEntry[] }>();
    const stateOf = (tombTable: string, text: string) => {
      const id = `${tombTable}\u0002${text}`;
      let st = keys.get(id);
      if (!st) {
        st = { since: [] };
        keys.set(id, st);
      }
      return st;
    };
    for (const e of txn.order) {
      if (e.kind === 'tomb') {
        if (e.closed) continue;
        const st = stateOf(e.table, e.text);
        if (st.awaiting) st.awaiting.after.push(e);
        else st.since.push(e);
        continue;
      }
      const c = e.change;
      const touched = this.changeKeys(txn, c);
      let window: DeleteTombstones | undefined;
      if (c.op === 'delete') {
        const own = touched && stateOf(touched.tombTable, touched.texts[0]!);
        window = { after: [], before: own ? own.since : [], settled: txn.events > e.event };
        out.set(c, window);
      }
      for (const text of touched?.texts ?? []) keys.set(`${touched!.tombTable}\u0002${text}`, { since: [] });
      if (window && touched) stateOf(touched.tombTable, touched.texts[0]!).awaiting = window;
    }
    return out;
  }

  /**
   * Drops from the order the row changes a chunk emitted and the tombstones their deletes took.
   * Tombstones left before an emitted change of their key are closed: no later delete can take them.
   */
  private trimOrder(txn: OpenTransaction, emitted: ReadonlySet<PendingChange>, used: ReadonlySet<TombEntry>): void {
    const open = new Map<string, TombEntry[]>();
    const kept: OrderEntry[] = [];
    for (const e of txn.order) {
      if (e.kind === 'tomb') {
        if (used.has(e)) continue;
        kept.push(e);
        if (e.closed) continue;
        const id = `${e.table}\u0002${e.text}`;
        const list = open.get(id);
        if (list) list.push(e);
        else open.set(id, [e]);
        continue;
      }
      const touched = this.changeKeys(txn, e.change);
      for (const text of touched?.texts ?? []) {
        const id = `${touched!.tombTable}\u0002${text}`;
        if (emitted.has(e.change)) for (const t of open.get(id) ?? []) t.closed = true;
        open.delete(id);
      }
      if (!emitted.has(e.change)) kept.push(e);
    }
    txn.order = kept;
  }

  /**
   * Tombstones a transaction wrote for keys of a captured table it did not delete itself become
   * deletes too: rows removed by a foreign key's ON DELETE CASCADE, which MariaDB does not log (the
   * parent's trigger wrote their tombstones). The peer then holds the tombstones as well, so a
   * late older write of such a row stays deleted there.
   */
  private tombstonedOnly(txn: OpenTransaction, versions: bigint[], used: ReadonlySet<TombEntry>): void {
    // The highest unused tombstone of each key, in the order keys were first written.
    const highestOf = new Map<string, TombEntry>();
    for (const e of txn.order) {
      if (e.kind !== 'tomb' || used.has(e)) continue;
      const id = `${e.table}\u0002${e.text}`;
      const prev = highestOf.get(id);
      if (!prev || e.version > prev.version) highestOf.set(id, e);
    }
    for (const e of highestOf.values()) {
      const owner = this.tombstoneOwners.get(e.table);
      if (!owner) continue;
      txn.changes.push({ schema: owner.schema, table: owner.table, op: 'delete', before: e.key, version: e.version });
      versions.push(e.version);
    }
    txn.order = [];
  }

  /**
   * The captured tables at stream start: a transaction that writes only tombstones of a table (MariaDB's
   * unlogged ON DELETE CASCADE) may come before any table map of it since capture started, and its
   * deletes must not be lost for want of the owner's name.
   */
  knowTables(tables: ReadonlyArray<{ schema: string; table: string }>): void {
    for (const t of tables) this.noteTable(t.schema, t.table);
  }

  /** A table map was read: remember which captured table a tombstone table belongs to. */
  private noteTable(schema: string, table: string): void {
    const id = `${schema}\u0000${table}`;
    if (this.seenTables.has(id)) return;
    this.seenTables.add(id);
    if (schema === this.options.metaSchema || !this.options.tables.includes(schema, table)) return;
    this.tombstoneOwners.set(tombstoneTableName(schema, table), { schema, table });
  }

  /**
   * The delete's version from its tombstone (see DeleteTombstones): the one its trigger wrote after
   * it, else one written before it; in a sink's transaction the other way round (the sink writes the
   * tombstone first, and may write the key's tombstone again later without a row). Undefined without
   * one when `lenient`, else MissingTombstoneError.
   */
  private deleteVersion(
    window: DeleteTombstones | undefined,
    change: PendingChange,
    position: string,
    lenient: boolean,
    appliedBySink: boolean,
    used: Set<TombEntry>,
  ): bigint | undefined {
    const [first, second] = appliedBySink ? [window?.before, window?.after] : [window?.after, window?.before];
    const entries = first && first.length > 0 ? first : second && second.length > 0 ? second : undefined;
    if (entries) for (const e of entries) used.add(e);
    const version = entries ? highest(entries) : undefined;
    if (version === undefined && !lenient) {
      throw new MissingTombstoneError(change.schema, change.table, `${this.options.metaSchema}.${tombstoneTableName(change.schema, change.table)}`, position);
    }
    return version;
  }

  /**
   * XA PREPARE: a one-phase commit commits here; otherwise the group waits for its XA COMMIT (or is
   * dropped by its XA ROLLBACK). Until then the resume position stays at the group's start.
   */
  private xaPrepare(event: Extract<CaptureEvent, { type: 'xa_prepare' }>): AssembledItem[] {
    if (event.onePhase) return this.commit(event.nextPosition);
    const txn = this.open;
    const start = this.openStart ?? this.boundary;
    this.open = undefined;
    const position = this.boundaryAt(event.nextPosition);
    if (txn?.chunked) {
      throw new CaptureRefusedError(
        `XA transaction ${event.xid} is larger than one chunk (${this.chunkRows} rows / ${this.chunkBytes} bytes) and was prepared without a commit`,
        undefined,
        position,
        'commit it (XA COMMIT) or split it; capture holds prepared XA transactions in memory and cannot stream one of this size',
      );
    }
    // Also an XA without captured changes: its XA COMMIT must be recognized after a restart.
    if (start) this.prepared.set(normalizeXid(event.xid), { txn: txn ?? openTransaction(), start });
    return [];
  }

  /** XA COMMIT / XA ROLLBACK of a prepared group (a group of its own). */
  private xaEnd(xid: string, commit: boolean, nextPosition: number, timestamp?: number): AssembledItem[] {
    const key = normalizeXid(xid.replace(/\s+ONE\s+PHASE\s*$/i, ''));
    const xa = this.prepared.get(key);
    this.prepared.delete(key);
    const position = this.emitAt(nextPosition);
    if (!xa) {
      if (!commit) return [{ kind: 'skipped', position }];
      // Prepared before the position capture started from: its rows were never read.
      throw new CaptureRefusedError(
        `XA COMMIT ${xid} commits a transaction prepared before the position capture started from, so its changes were never read`,
        undefined,
        position,
        'run lww-sink sync for the tables it changed, then resume from a position after this XA COMMIT',
      );
    }
    if (!commit) return [{ kind: xa.txn.appliedBySink ? 'dropped' : 'skipped', position }];
    return this.finish(xa.txn, position, timestamp);
  }

  private query(event: Extract<CaptureEvent, { type: 'query' }>): AssembledItem[] {
    const q = event.query;
    const head = q.replace(/^(\s|\/\*.*?\*\/)+/s, '');
    if (/^(BEGIN|START\s+TRANSACTION|XA\s+START)\b/i.test(head)) return this.push({ type: 'begin' });
    if (/^COMMIT\s*$/i.test(head)) return this.commit(event.nextPosition, event.timestamp);
    if (/^ROLLBACK\s*$/i.test(head)) return this.rollback(event.nextPosition);
    const xa = /^XA\s+(COMMIT|ROLLBACK)\s+(.*)$/is.exec(head);
    if (xa) return this.xaEnd(xa[2]!, xa[1]!.toUpperCase() === 'COMMIT', event.nextPosition, event.timestamp);
    const savepoint = /^(SAVEPOINT|ROLLBACK\s+(?:WORK\s+)?TO\s+(?:SAVEPOINT\s+)?)\s*(\S+)/i.exec(head);
    if (savepoint) {
      this.savepoint(savepoint[1]!.toUpperCase().startsWith('SAVEPOINT') ? 'set' : 'rollback', savepoint[2]!);
      return [];
    }
    if (/^(RELEASE\s+SAVEPOINT|XA\s+END)\b/i.test(head)) return [];
    this.refuseStatementDml(q, event.schema, event.nextPosition);
    const ddl = parseDdl(q, event.schema);
    const items: AssembledItem[] = [];
    // DDL normally is its own group; inside an open transaction it cannot be a resume point.
    const position = this.open ? (this.position ?? '') : this.emitAt(event.nextPosition);
    if (ddl) {
      const { tables } = this.options;
      const seen = new Set<string>();
      if (ddl.schema !== undefined && tables.touchesSchema(ddl.schema)) {
        items.push({ kind: 'schema', change: { schema: ddl.schema, kind: ddl.kind, query: q, position } });
      }
      for (const t of ddl.tables) {
        const key = `${t.schema}\u0000${t.table}`;
        if (seen.has(key) || !tables.includes(t.schema, t.table)) continue;
        seen.add(key);
        if (ddl.kind === 'truncate_table' && !this.options.includeApplied) {
          throw new CaptureRefusedError(
            'TRUNCATE TABLE removes rows without row events, tombstones or versions, so the peers cannot tell which of their rows it removed',
            `${t.schema}.${t.table}`,
            position,
            `delete rows with DELETE (which replicates with tombstones) instead of TRUNCATE; to go on, truncate ${t.schema}.${t.table} on every node too, then resume from a position after this statement`,
          );
        }
        if (ddl.removesRows && !this.options.includeApplied) {
          throw new CaptureRefusedError(
            `ALTER TABLE … ${ddl.removesRows} removes, swaps or brings in rows without row events, tombstones or versions, so the peers cannot tell which of their rows it changed`,
            `${t.schema}.${t.table}`,
            position,
            `delete rows with DELETE (which replicates with tombstones) instead; to go on, run the same statement on every node too, then resume from a position after this statement (lww-sink sync repairs what differs)`,
          );
        }
        // A table created (or renamed in) after the stream opened: its tombstones' owner (knowTables).
        this.noteTable(t.schema, t.table);
        items.push({ kind: 'schema', change: { schema: t.schema, table: t.table, kind: ddl.kind, query: q, position } });
      }
    }
    if (items.length === 0 && !this.open) items.push({ kind: 'skipped', position, ...(event.timestamp === undefined ? {} : { timestamp: event.timestamp }) });
    return items;
  }

  /**
   * A row change logged as a statement cannot be turned into exact row changes: stop, naming the
   * session setting. Also when it names the metadata schema (a trigger of a captured table wrote
   * its tombstones from a statement).
   */
  private refuseStatementDml(query: string, schema: string, nextPosition: number): void {
    const dml = parseDml(query, schema);
    if (!dml) return;
    const hit = dml.names.find((n) => this.options.tables.includes(n.schema, n.table) || n.schema === this.options.metaSchema);
    if (!hit) return;
    const table = hit.schema === this.options.metaSchema ? undefined : `${hit.schema}.${hit.table}`;
    throw new CaptureRefusedError(
      `a ${dml.verb} was logged as a statement, not as row events (the writing session had binlog_format=STATEMENT or MIXED), so its row changes and versions are unknown`,
      table,
      `${this.position ?? ''} (event ending at ${this.file ?? '?'}:${nextPosition})`,
      "never set binlog_format other than ROW in sessions writing replicated tables (SET SESSION binlog_format = 'ROW'); to go on, run lww-sink sync for the table, then resume from a position after this event",
    );
  }

  /** A group that ends in ROLLBACK: only non-transactional changes are in it (they stayed); captured tables must not be among them. */
  private rollback(nextPosition: number): AssembledItem[] {
    const txn = this.open;
    this.open = undefined;
    const position = this.emitAt(nextPosition);
    if (txn && (txn.changes.length > 0 || txn.chunked) && !this.options.includeApplied) {
      const c = txn.changes[0];
      throw new CaptureRefusedError(
        'an event group that ends in ROLLBACK changed a captured table (a non-transactional table: its changes stayed although the transaction rolled back)',
        c ? `${c.schema}.${c.table}` : undefined,
        position,
        'replicated tables must use a transactional engine (ALTER TABLE ... ENGINE=InnoDB); then run lww-sink sync for the table and resume from a position after this group',
      );
    }
    return txn?.appliedBySink ? [{ kind: 'dropped', position }] : [{ kind: 'skipped', position }];
  }

  /**
   * SAVEPOINT / ROLLBACK TO in the binlog (written when a transaction also changed a
   * non-transactional table): the transactional rows after the savepoint were undone, so their
   * changes are dropped.
   */
  private savepoint(action: 'set' | 'rollback', rawName: string): void {
    const txn = this.open;
    if (!txn) return;
    const name = rawName.replace(/^`|`$/g, '').toLowerCase();
    txn.savepoints ??= new Map();
    if (action === 'set') {
      txn.savepoints.set(name, { changes: txn.emitted + txn.changes.length, serial: txn.serial });
      return;
    }
    const saved = txn.savepoints.get(name);
    if (saved === undefined) return;
    const mark = saved.changes;
    if (mark < txn.emitted) {
      throw new CaptureRefusedError(
        `ROLLBACK TO SAVEPOINT ${rawName} undoes changes already handed on in a chunk of a large transaction`,
        undefined,
        this.position,
        'keep transactions that roll back to savepoints smaller than one chunk, or raise the chunk size',
      );
    }
    txn.changes.length = mark - txn.emitted;
    // The tombstones its triggers wrote were undone too.
    txn.order = txn.order.filter((e) => e.serial < saved.serial);
  }
}
