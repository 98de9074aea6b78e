// Groups decoded binlog events into committed transactions, in commit order, and turns their rows
// into the change model: versions from the version column (deletes: from the tombstone the delete
// trigger wrote in the same transaction), metadata-schema rows never emitted, transactions applied
// by a sink (they write <meta>.checkpoints) dropped whole. Pure: no I/O, fed by reader.ts.
// The history audit reads with `includeApplied`: sink-applied transactions are emitted too, marked,
// with their tombstone writes, and a delete without a tombstone is reported instead of refused.
import { CaptureError, MissingTombstoneError, UnsupportedTableError } from '../errors.ts';
import type { Row, RowChange, SourceTransaction } from '../model/change.ts';
import { tombstoneTableName } from '../model/names.ts';
import { parseVersion, VersionFormatError } from '../model/version.ts';
import { type DdlKind, parseDdl } from './ddl.ts';
import type { TableFilter } from './filter.ts';
import { type BinlogPosition, formatPosition } from './position.ts';

/** The table every sink transaction writes its checkpoint to (see src/sql/checkpoint.ts). */
export const CHECKPOINT_TABLE = 'checkpoints';

/** Binlog events reduced to what grouping needs (reader.ts builds them from zongji's events). */
export type CaptureEvent =
  /** A binlog file starts being read at `offset` (dump start, FLUSH LOGS, server restart). */
  | { type: 'rotate'; file: string; offset: number }
  /** A transaction opens: a BEGIN query, or a MariaDB GTID event that is not standalone. */
  | { type: 'begin' }
  | { type: 'rows'; schema: string; table: string; op: 'insert' | 'delete'; rows: Row[]; bytes: number }
  | { type: 'rows'; schema: string; table: string; op: 'update'; rows: Array<{ before: Row; after: Row }>; bytes: number }
  /**
   * A commit marker (XID event, or a COMMIT query); `nextPosition` is the offset after it,
   * `timestamp` the event header's time in ms (second resolution) when known.
   */
  | { type: 'commit'; nextPosition: number; timestamp?: number }
  /** Any other QUERY event (DDL, XA, GRANT...). */
  | { type: 'query'; query: string; schema: string; nextPosition: number; timestamp?: number }
  /** XA PREPARE ends an event group without committing it. */
  | { type: 'xa_prepare'; nextPosition: number }
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
  /** Commit time from the binlog event header (ms, second resolution), when the event carried one. */
  timestamp?: number;
}

export type AssembledItem =
  /** `details` only with `includeApplied`. */
  | { kind: 'transaction'; txn: SourceTransaction; bytes: number; details?: TransactionDetails }
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
}

interface PendingChange {
  schema: string;
  table: string;
  op: RowChange['op'];
  before?: Row;
  after?: Row;
  /** Undefined for deletes until commit, when the tombstone is known. */
  version?: bigint;
}

interface OpenTransaction {
  changes: PendingChange[];
  appliedBySink: boolean;
  /** Tombstone table → (key text → highest version written in this transaction). */
  tombstones: Map<string, { keyColumns: string[]; versions: Map<string, bigint> }>;
  /** Tombstone rows in write order (kept with includeApplied only). */
  tombstoneWrites: TombstoneWrite[];
  bytes: number;
}

function openTransaction(): OpenTransaction {
  return { changes: [], appliedBySink: false, tombstones: new Map(), tombstoneWrites: [], bytes: 0 };
}

/** Stable text of key values: buffers by bytes, everything else by its string form. */
function keyText(row: Row, columns: readonly string[]): string {
  return columns
    .map((c) => {
      const v = row[c];
      if (v === null || v === undefined) return '\u0000null';
      if (Buffer.isBuffer(v)) return `x${v.toString('hex')}`;
      return `s${String(v)}`;
    })
    .join('\u0001');
}

function startsWithKeyword(query: string, re: RegExp): boolean {
  return re.test(query.replace(/^(\s|\/\*.*?\*\/)+/s, ''));
}

export class TransactionAssembler {
  private file: string | undefined;
  private boundary: BinlogPosition | undefined;
  private open: OpenTransaction | undefined;

  constructor(private readonly options: AssemblerOptions) {}

  /** Position after the last complete transaction or statement read (where a reconnect resumes). */
  get position(): string | undefined {
    return this.boundary ? formatPosition(this.boundary) : undefined;
  }

  get inTransaction(): boolean {
    return this.open !== undefined;
  }

  /** Reading starts at `p`, a transaction boundary. */
  resumeFrom(p: BinlogPosition): void {
    this.boundary = { ...p };
    this.file = p.file;
    this.open = undefined;
  }

  /** Forgets a half-read transaction (the connection dropped); reading restarts at `position`. */
  reset(): void {
    this.open = undefined;
    this.file = undefined;
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
        if (this.open && (this.open.changes.length > 0 || this.open.appliedBySink)) {
          throw new CaptureError(`a transaction began before the previous one committed (after ${this.position ?? 'the start'})`, this.position);
        }
        this.open = openTransaction();
        return [];
      case 'rows':
        this.rows(event);
        return [];
      case 'commit':
        return this.commit(event.nextPosition, event.timestamp);
      case 'xa_prepare':
        return this.xaPrepare(event.nextPosition);
      case 'query':
        return this.query(event);
      case 'heartbeat':
        if (this.open || event.nextPosition < 4) return [];
        this.boundary = { file: event.file, offset: event.nextPosition };
        this.file = event.file;
        return [{ kind: 'keepalive', position: formatPosition(this.boundary) }];
    }
  }

  private rows(event: Extract<CaptureEvent, { type: 'rows' }>): void {
    // Row events always sit inside BEGIN..COMMIT; this only guards against a stream resumed mid-group.
    this.open ??= openTransaction();
    const txn = this.open;
    txn.bytes += event.bytes;
    const { metaSchema } = this.options;
    if (event.schema === metaSchema) {
      if (event.table === CHECKPOINT_TABLE) txn.appliedBySink = true;
      else this.recordTombstones(txn, event);
      return;
    }
    if (!this.options.tables.includes(event.schema, event.table)) return;
    const base = { schema: event.schema, table: event.table, op: event.op };
    if (event.op === 'update') {
      for (const { before, after } of event.rows) txn.changes.push({ ...base, before, after, version: this.versionOf(event, after) });
    } else if (event.op === 'insert') {
      for (const after of event.rows) txn.changes.push({ ...base, after, version: this.versionOf(event, after) });
    } else {
      for (const before of event.rows) txn.changes.push({ ...base, before });
    }
  }

  /** Tombstone rows (any metadata table but the checkpoints): key columns are all but the version. */
  private recordTombstones(txn: OpenTransaction, event: Extract<CaptureEvent, { type: 'rows' }>): void {
    if (event.op === 'delete') return; // tombstone garbage collection
    const images = event.op === 'update' ? event.rows.map((r) => r.after) : event.rows;
    for (const row of images) {
      if (!(this.options.versionColumn in row)) return; // not a tombstone table
      let tomb = txn.tombstones.get(event.table);
      if (!tomb) {
        tomb = { keyColumns: Object.keys(row).filter((c) => c !== this.options.versionColumn), versions: new Map() };
        txn.tombstones.set(event.table, tomb);
      }
      const version = this.versionOf(event, row);
      const key = keyText(row, tomb.keyColumns);
      const prev = tomb.versions.get(key);
      if (prev === undefined || version > prev) tomb.versions.set(key, version);
      if (this.options.includeApplied) {
        const keyRow: Row = {};
        for (const c of tomb.keyColumns) keyRow[c] = row[c];
        txn.tombstoneWrites.push({ table: event.table, key: keyRow, version });
      }
    }
  }

  private versionOf(event: { schema: string; table: string }, row: Row): bigint {
    const column = this.options.versionColumn;
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
    const position = this.boundaryAt(nextPosition);
    const audit = this.options.includeApplied === true;
    const empty = !txn || (txn.changes.length === 0 && !(audit && txn.tombstoneWrites.length > 0));
    const at = timestamp === undefined ? {} : { timestamp };
    if (empty) return txn?.appliedBySink ? [{ kind: 'dropped', position, ...at }] : [{ kind: 'skipped', position, ...at }];
    if (txn.appliedBySink && !audit) return [{ kind: 'dropped', position, ...at }];
    const untombstoned: number[] = [];
    const changes: RowChange[] = txn.changes.map((p, index) => {
      let version = p.version;
      if (version === undefined) {
        version = this.deleteVersion(txn, p, position, audit);
        if (version === undefined) {
          untombstoned.push(index);
          version = this.versionOf(p, p.before!);
        }
      }
      const change: RowChange = { schema: p.schema, table: p.table, op: p.op, version };
      if (p.before) change.before = p.before;
      if (p.after) change.after = p.after;
      return change;
    });
    const item: Extract<AssembledItem, { kind: 'transaction' }> = { kind: 'transaction', txn: { sourceId: this.options.sourceId, position, changes, ...(timestamp === undefined ? {} : { sourceTimeMs: timestamp }) }, bytes: txn.bytes };
    if (audit) {
      item.details = { applied: txn.appliedBySink, untombstoned, tombstones: txn.tombstoneWrites };
      if (timestamp !== undefined) item.details.timestamp = timestamp;
    }
    return [item];
  }

  /** The delete's version from its tombstone; undefined without one when `lenient`, else MissingTombstoneError. */
  private deleteVersion(txn: OpenTransaction, change: PendingChange, position: string, lenient: boolean): bigint | undefined {
    const tombTable = tombstoneTableName(change.schema, change.table);
    const tomb = txn.tombstones.get(tombTable);
    const version = tomb ? tomb.versions.get(keyText(change.before!, tomb.keyColumns)) : undefined;
    if (version === undefined && !lenient) {
      throw new MissingTombstoneError(change.schema, change.table, `${this.options.metaSchema}.${tombTable}`, position);
    }
    return version;
  }

  private xaPrepare(nextPosition: number): AssembledItem[] {
    const txn = this.open;
    this.open = undefined;
    if (txn && (txn.changes.length > 0 || txn.appliedBySink)) {
      throw new CaptureError(
        'an XA transaction changed captured tables; capture cannot order XA PREPARE/COMMIT groups and stops instead of guessing',
        this.position,
      );
    }
    return [{ kind: 'skipped', position: this.boundaryAt(nextPosition) }];
  }

  private query(event: Extract<CaptureEvent, { type: 'query' }>): AssembledItem[] {
    const q = event.query;
    if (startsWithKeyword(q, /^(BEGIN|START\s+TRANSACTION|XA\s+START)\b/i)) return this.push({ type: 'begin' });
    // A ROLLBACK query ends a group whose rows hit non-transactional tables: they stay changed, so
    // the group is treated like a commit.
    if (startsWithKeyword(q, /^(COMMIT|ROLLBACK)\s*$/i)) return this.commit(event.nextPosition, event.timestamp);
    if (startsWithKeyword(q, /^(SAVEPOINT|ROLLBACK\s+TO|RELEASE\s+SAVEPOINT|XA\s+END)\b/i)) return [];
    const ddl = parseDdl(q, event.schema);
    const items: AssembledItem[] = [];
    // DDL normally is its own group; inside an open transaction it cannot be a resume point.
    const position = this.open ? (this.position ?? '') : this.boundaryAt(event.nextPosition);
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
        items.push({ kind: 'schema', change: { schema: t.schema, table: t.table, kind: ddl.kind, query: q, position } });
      }
    }
    if (items.length === 0 && !this.open) items.push({ kind: 'skipped', position, ...(event.timestamp === undefined ? {} : { timestamp: event.timestamp }) });
    return items;
  }
}
