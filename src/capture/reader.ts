// The binlog reader: streams a source's row-based binlog through @vlasky/zongji, groups events into
// committed transactions (assembler.ts) and hands them, in commit order, to a CaptureHandler.
//
// - Resume: positions are `<file>:<offset>` after a transaction; a lost connection (server restart,
//   network cut, read timeout) reconnects from the last complete transaction read, so the handler
//   sees every transaction once, in order.
// - Back-pressure: completed transactions wait in a bounded queue; `regulate()` is the one place
//   that pauses the socket when the queue is full and resumes it when it has drained.
// - Safety: the source's binlog settings are checked before every (re)connect; what would lose
//   changes stops the capture with an error instead of being skipped.
import { permanentServerError } from '../db/retry.ts';
import ZongJi, { type AnyBinlogEvent } from '@vlasky/zongji';
import type { ConnectionOptions } from 'mysql2';
import { type Target, connect, describeTarget, parseUrl } from '../db/connection.ts';
import { BinlogPositionError, CaptureError, CaptureRefusedError, InvalidOptionsError, UnsafeSourceError } from '../errors.ts';
import type { Row, SourceTransaction } from '../model/change.ts';
import { DUMP_SESSION_SQL } from '../sql/binlog.ts';
import type { Logger } from '../writer/options.ts';
import { type AssembledItem, type CaptureEvent, type SchemaChange, TransactionAssembler, type TransactionDetails } from './assembler.ts';
import { type TableFilter, type TableSelector, tableFilter } from './filter.ts';
import { parsePosition } from './position.ts';
import { RowImageRepairer } from './repair.ts';
import { binlogFiles, capturedTables, checkPositionAvailable, collationCharsets, currentPosition, sourceSettings, unsafeSettings } from './source.ts';
import { type ColumnShape, normalizeRow, TYPE_BLOB, TYPE_JSON } from './values.ts';
import { unsupportedCharsetColumn } from '../model/charsets.ts';

/** What capture hands to the apply side. Each call is awaited before the next one is made. */
export interface CaptureHandler {
  /**
   * A committed transaction with changes of the captured tables. `details` only with
   * `includeApplied` (the history audit): whether a sink applied it, its tombstone writes.
   */
  onTransaction(txn: SourceTransaction, details?: TransactionDetails): void | Promise<void>;
  /** DDL on a captured table or schema: refresh metadata before the next transaction. */
  onSchemaChange?(change: SchemaChange): void | Promise<void>;
  /**
   * Everything up to `position` was read and nothing in it is for this handler (the server is idle,
   * or only sink-applied / unrelated transactions were read). A sink may store it as its checkpoint.
   * `sourceTimeMs`: the time reached at `position` (SourceTransaction.sourceTimeMs), when known: the
   * commit time of the skipped transaction, or for an idle server the time its heartbeat arrived.
   */
  onKeepalive?(position: string, sourceTimeMs?: number): void | Promise<void>;
}

export interface CaptureOptions {
  /** The source server: a mysql:// URL or mysql2 connection options. */
  source: Target;
  /** Identifies this stream; put into every SourceTransaction. */
  sourceId: string;
  /** Tables to emit: `db.table`, or whole schemas as `db` / `db.*`. */
  tables: readonly TableSelector[];
  handler: CaptureHandler;
  /** Resume position (exclusive: the first transaction read is the one after it). Default: the binlog head now. */
  from?: string;
  /** Default `lww_meta`. */
  metaSchema?: string;
  /** Default `_lww_ts`. */
  versionColumn?: string;
  /** Server id this reader announces to the source; must be unique among its replicas. Default: random. */
  replicaServerId?: number;
  /** The source sends a heartbeat after this much idle time. Default 5000 ms. */
  heartbeatMs?: number;
  /** Reconnect when nothing (not even a heartbeat) arrived for this long. Default 4 × heartbeatMs. */
  readTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Pause reading when this many items wait for the handler. Default 256. */
  maxQueuedTransactions?: number;
  /** ... or when their binlog bytes reach this. Default 16 MiB. */
  maxQueuedBytes?: number;
  /** ... or when they hold this many row changes (chunks of a large transaction are many rows in few items). Default 10,000. */
  maxQueuedRows?: number;
  /** A larger source transaction is handed over in chunks of this many row changes. Default 2,000. */
  chunkRows?: number;
  /** ... or of this many binlog bytes. Default 16 MiB. */
  chunkBytes?: number;
  /** Minimum time between keepalives for skipped/dropped transactions. Default 1000 ms. */
  keepaliveIntervalMs?: number;
  reconnect?: { maxAttempts?: number; initialDelayMs?: number; maxDelayMs?: number };
  /**
   * For the history audit only (default false): also hand over transactions applied by a sink,
   * with `details` saying so, and deletes without a tombstone (see TransactionDetails). Never for
   * replication: emitting sink-applied transactions would loop them back.
   */
  includeApplied?: boolean;
  logger?: Logger;
}

export interface CaptureStats {
  /** Position after the last complete transaction read from the binlog. */
  readPosition: string | undefined;
  /** Position after the last item the handler finished with. */
  deliveredPosition: string | undefined;
  /** Transactions handed to onTransaction, and their row changes. */
  transactions: number;
  rows: number;
  /** Chunks of large transactions handed over before their last one (counted in `transactions` too). */
  chunks: number;
  /** Changes with an incomplete row image replaced by the source's current row (or tombstone). */
  repairedRows: number;
  /** Transactions applied by a sink (they wrote <meta>.checkpoints): not emitted, loop prevention. */
  dropped: number;
  /** Table maps of sink-applied transactions skipped with their row events, undecoded (after the checkpoint row: the transaction is dropped whole). */
  skippedEvents: number;
  /** Row events of captured tables written before the table was installed (no version column): skipped. */
  unversioned: number;
  /** Transactions and statements with nothing for the captured tables. */
  skipped: number;
  schemaChanges: number;
  keepalives: number;
  reconnects: number;
  /** Ends of binlog files left with a partial event by a killed server, skipped (see skipTruncatedTail). */
  truncatedTailsSkipped: number;
  /** Items waiting for the handler now, and the most ever waiting (bounded by maxQueuedTransactions). */
  queued: number;
  maxQueued: number;
  queuedBytes: number;
  maxQueuedBytes: number;
  /** Times the reader paused the socket because the handler fell behind. */
  pauses: number;
  paused: boolean;
  events: number;
  /** How long the handler call in flight has been running (undefined when none is). */
  handlerBusyMs: number | undefined;
  /** Since the last binlog event or heartbeat arrived. */
  msSinceLastEvent: number;
}

type QueueItem =
  | { kind: 'transaction'; txn: SourceTransaction; bytes: number; details?: TransactionDetails; repairs?: number[]; continues?: boolean }
  | { kind: 'schema'; change: SchemaChange; bytes: number }
  | { kind: 'keepalive'; position: string; bytes: number; sourceTimeMs?: number };

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Connection-level failures worth a reconnect; anything else stops the capture. */
const RETRYABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_SERVER_SHUTDOWN',
  'ER_CONNECTION_KILLED',
  'ER_QUERY_INTERRUPTED',
  'ER_CON_COUNT_ERROR',
  'ER_NET_READ_INTERRUPTED',
  'ER_NET_WRITE_INTERRUPTED',
  'ER_SERVER_SHUTDOWN_IN_PROGRESS',
]);

/** A silent stream: transient (the code tells src/db/retry.ts so). */
class ReadTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';
}

function isRetryable(err: unknown): boolean {
  if (err instanceof ReadTimeoutError) return true;
  if (!(err instanceof Error)) return false;
  const e = err as Error & { code?: string; fatal?: boolean; errno?: number };
  if (permanentServerError(err) !== undefined) return false; // purged binlog, missing privilege, login refused
  if (e.code && RETRYABLE_CODES.has(e.code)) return true;
  if (e.fatal === true) return true;
  return /Control connection unavailable|Connection lost|connect ETIMEDOUT|Can't add new command when connection is in closed state/i.test(e.message);
}

function sleep(ms: number, signal: { wake?: () => void }): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.wake = () => {
      clearTimeout(t);
      resolve();
    };
  });
}

/** A running capture. Create with startCapture(). */
export class BinlogCapture {
  private readonly assembler: TransactionAssembler;
  private readonly filter: TableFilter;
  private readonly log: Logger;
  private readonly dsn: ConnectionOptions;
  private readonly serverId: number;
  private readonly heartbeatMs: number;
  private readonly readTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly maxQueued: number;
  private readonly maxBytes: number;
  private readonly maxRows: number;
  private readonly keepaliveIntervalMs: number;
  private readonly metaSchema: string;
  private readonly repairer: RowImageRepairer;

  private zongji: ZongJi | undefined;
  /** Bumped per stream; events and errors of an older stream are ignored. */
  private generation = 0;
  /** The source's character set per collation id (collationCharsets), read when the stream opens. */
  private collations: ReadonlyMap<number, string> = new Map();
  private readonly queue: QueueItem[] = [];
  private queuedBytes = 0;
  private queuedRows = 0;
  private readerPaused = false;
  private resumeWaiters: Array<() => void> = [];
  private wakeConsumer: (() => void) | undefined;
  private lastEventAt = Date.now();
  private lastKeepaliveAt = 0;
  private watchdog: NodeJS.Timeout | undefined;
  private stopping = false;
  private reconnecting = false;
  private readonly sleeper: { wake?: () => void } = {};
  private reconnectToken = 0;
  private consumer: Promise<void> = Promise.resolve();
  private settle!: { resolve: () => void; reject: (e: unknown) => void };
  private failure: unknown;
  /** When the handler call in flight started. */
  private deliveringSince: number | undefined;
  private readonly warnedUnversioned = new Set<string>();
  private readonly counters: Omit<CaptureStats, 'readPosition' | 'queued' | 'queuedBytes' | 'paused' | 'handlerBusyMs' | 'msSinceLastEvent'> = {
    deliveredPosition: undefined,
    transactions: 0,
    rows: 0,
    chunks: 0,
    repairedRows: 0,
    dropped: 0,
    skippedEvents: 0,
    unversioned: 0,
    skipped: 0,
    schemaChanges: 0,
    keepalives: 0,
    reconnects: 0,
    truncatedTailsSkipped: 0,
    maxQueued: 0,
    maxQueuedBytes: 0,
    pauses: 0,
    events: 0,
  };

  /** Resolves when stop() finished, rejects with the error that stopped the capture. */
  readonly done: Promise<void>;

  private constructor(private readonly options: CaptureOptions) {
    this.filter = tableFilter(options.tables);
    this.metaSchema = options.metaSchema ?? 'lww_meta';
    this.assembler = new TransactionAssembler({
      sourceId: options.sourceId,
      tables: this.filter,
      metaSchema: this.metaSchema,
      versionColumn: options.versionColumn ?? '_lww_ts',
      includeApplied: options.includeApplied === true,
      ...(options.chunkRows !== undefined ? { chunkRows: options.chunkRows } : {}),
      ...(options.chunkBytes !== undefined ? { chunkBytes: options.chunkBytes } : {}),
      ...(options.includeApplied ? {} : { onUnversioned: (schema: string, table: string) => this.unversioned(schema, table) }),
    });
    this.repairer = new RowImageRepairer({
      source: options.source,
      metaSchema: this.metaSchema,
      versionColumn: options.versionColumn ?? '_lww_ts',
      connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
    });
    this.log = options.logger ?? silent;
    this.dsn = typeof options.source === 'string' ? parseUrl(options.source) : (options.source as ConnectionOptions);
    this.serverId = options.replicaServerId ?? 1_000_000_000 + Math.floor(Math.random() * 1_000_000_000);
    this.heartbeatMs = options.heartbeatMs ?? 5000;
    this.readTimeoutMs = options.readTimeoutMs ?? 4 * this.heartbeatMs;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.maxQueued = options.maxQueuedTransactions ?? 256;
    // Decoded rows take several times their binlog bytes in memory: this bounds the reader's share.
    this.maxBytes = options.maxQueuedBytes ?? 16 * 1024 * 1024;
    this.maxRows = options.maxQueuedRows ?? 10_000;
    this.keepaliveIntervalMs = options.keepaliveIntervalMs ?? 1000;
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // Callers that never await `done` must not crash the process with an unhandled rejection.
    this.done.catch(() => {});
  }

  /** Row events written before a table was installed: skipped, and said once per table and run. */
  private unversioned(schema: string, table: string): void {
    this.counters.unversioned++;
    const name = `${schema}.${table}`;
    if (this.warnedUnversioned.has(name)) return;
    this.warnedUnversioned.add(name);
    this.log.warn(
      `capture skips row events of ${name} written before it was installed (no version column in the binlog); install's backfill and the initial copy carry those rows`,
      { table: name, position: this.assembler.position },
    );
  }

  /** Checks the source, then streams from options.from (or the current head). */
  static async start(options: CaptureOptions): Promise<BinlogCapture> {
    validate(options);
    const capture = new BinlogCapture(options);
    await capture.firstStream();
    return capture;
  }

  /** Position after the last complete transaction read (where a reconnect resumes). */
  get position(): string | undefined {
    return this.assembler.position;
  }

  stats(): CaptureStats {
    const now = Date.now();
    return {
      ...this.counters,
      readPosition: this.assembler.position,
      queued: this.queue.length,
      queuedBytes: this.queuedBytes,
      paused: this.readerPaused,
      handlerBusyMs: this.deliveringSince === undefined ? undefined : now - this.deliveringSince,
      msSinceLastEvent: now - this.lastEventAt,
    };
  }

  /** Stops reading; the handler call in flight completes, queued items are discarded. Idempotent. */
  async stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      clearInterval(this.watchdog);
      this.teardownStream();
      this.sleeper.wake?.();
      this.wakeConsumer?.();
      for (const w of this.resumeWaiters.splice(0)) w();
      await this.consumer.catch(() => {});
      this.queue.length = 0;
      this.queuedBytes = 0;
      this.queuedRows = 0;
      await this.repairer.close();
      if (this.failure === undefined) this.settle.resolve();
    }
    await this.done.catch(() => {});
  }

  private async firstStream(): Promise<void> {
    let from = this.options.from;
    if (from === undefined) {
      const conn = await connect(this.options.source, { connectTimeoutMs: this.connectTimeoutMs });
      try {
        from = await currentPosition(conn);
      } finally {
        conn.destroy();
      }
    }
    this.assembler.resumeFrom(parsePosition(from));
    this.consumer = this.consume();
    try {
      try {
        await this.openStream();
      } catch (err) {
        if (!isTruncatedTail(err) || !(await this.skipTruncatedTail())) throw err;
        await this.openStream();
      }
    } catch (err) {
      this.stopping = true;
      this.teardownStream();
      this.wakeConsumer?.();
      await this.consumer.catch(() => {});
      this.failure = explain(err, this.assembler.position);
      this.settle.reject(this.failure);
      throw this.failure;
    }
    this.watchdog = setInterval(() => this.checkIdle(), Math.max(50, Math.min(1000, this.readTimeoutMs / 4)));
    this.watchdog.unref();
  }

  /** Checks the source and starts a binlog dump at the assembler's position. */
  private async openStream(): Promise<void> {
    const position = this.assembler.position!;
    const conn = await connect(this.options.source, { connectTimeoutMs: this.connectTimeoutMs });
    try {
      const settings = await sourceSettings(conn);
      const problems = unsafeSettings(settings);
      if (problems.length > 0) throw new UnsafeSourceError(describeTarget(this.options.source), problems);
      await checkPositionAvailable(conn, position);
      this.collations = await collationCharsets(conn);
      this.assembler.knowTables(await capturedTables(conn, this.filter.zongjiIncludeSchema([]), this.metaSchema));
    } finally {
      conn.destroy();
    }
    if (this.stopping) return;
    const { file, offset } = parsePosition(position);
    const generation = ++this.generation;
    this.assembler.reset();
    const z = new ZongJi({
      ...this.dsn,
      // Exact values: see values.ts. TIMESTAMP is formatted in UTC, as the sink writes it.
      dateStrings: true,
      timezone: 'Z',
      jsonStrings: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
      decimalNumbers: false,
      charset: 'UTF8MB4_GENERAL_CI',
      connectTimeout: this.connectTimeoutMs,
    });
    this.zongji = z;
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new ReadTimeoutError(`binlog connection not ready within ${this.connectTimeoutMs} ms`)), this.connectTimeoutMs);
      z.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
      z.on('error', (err: Error) => {
        clearTimeout(timer);
        if (generation !== this.generation) return;
        if (!z.ready) reject(err);
        else this.onStreamError(generation, err);
      });
    });
    this.skipDroppedRows(z as unknown as SkippableZongji);
    z.on('binlog', (event: AnyBinlogEvent) => this.onEvent(generation, event));
    z.start({
      serverId: this.serverId,
      filename: file,
      position: offset,
      includeEvents: ['rotate', 'query', 'xid', 'tablemap', 'writerows', 'updaterows', 'deleterows', 'heartbeat', 'mariadbgtid', 'xaprepare'],
      includeSchema: this.filter.zongjiIncludeSchema([this.metaSchema]),
    });
    // Queued on the dump connection now, so it runs before the dump command zongji sends later.
    const ns = this.heartbeatMs * 1_000_000;
    const netWriteTimeout = Math.max(60, Math.ceil((10 * this.readTimeoutMs) / 1000));
    z.connection?.query(DUMP_SESSION_SQL, [ns, ns, netWriteTimeout], (err: Error | null) => {
      if (err && generation === this.generation) z.emit('error', err);
    });
    try {
      await ready;
    } catch (err) {
      this.teardownStream();
      throw err;
    }
    this.lastEventAt = Date.now();
    this.log.info('capture streaming', { source: describeTarget(this.options.source), position });
  }

  /**
   * Loop prevention as early as it can be: a sink writes its checkpoint row first in each transaction
   * (writer/apply.ts), so once the assembler has read that row, the transaction is known to be
   * dropped and zongji skips the rest of its row events undecoded (its table maps filtered, so their
   * rows are never parsed). The metadata schema stays decoded (the checkpoint row itself; the audit
   * never skips). A filtered table map deletes zongji's cached entry for its table id; it is put back
   * at the next event outside the transaction, so the next transaction finds the cache as before.
   */
  private skipDroppedRows(z: SkippableZongji): void {
    const own = z._skipSchema.bind(z);
    const stashed = new Map<string, unknown>();
    z._skipSchema = (schema: string, table: string) => {
      if (own(schema, table)) return true;
      if (schema === this.metaSchema || !this.assembler.droppingOpenTransaction()) {
        if (stashed.size > 0) this.restoreTableMaps(z, stashed);
        return false;
      }
      for (const [id, entry] of Object.entries(z.tableMap)) {
        if (entry.parentSchema === schema && entry.tableName === table && !stashed.has(id)) stashed.set(id, entry);
      }
      this.counters.skippedEvents++;
      return true;
    };
    this.restoreStashed = () => {
      if (stashed.size > 0 && !this.assembler.droppingOpenTransaction()) this.restoreTableMaps(z, stashed);
    };
  }

  private restoreStashed: () => void = () => undefined;

  private restoreTableMaps(z: SkippableZongji, stashed: Map<string, unknown>): void {
    for (const [id, entry] of stashed) if (z.tableMap[id] === undefined) z.tableMap[id] = entry as ZongjiTableMap;
    stashed.clear();
  }

  private teardownStream(): void {
    const z = this.zongji;
    this.zongji = undefined;
    this.generation++;
    if (!z) return;
    z.removeAllListeners('binlog');
    z.removeAllListeners('error');
    // Late errors of a stopped instance are noise; without a listener zongji would throw them.
    z.on('error', () => {});
    z.stop();
  }

  private onEvent(generation: number, event: AnyBinlogEvent): void {
    if (generation !== this.generation || this.stopping) return;
    this.lastEventAt = Date.now();
    this.counters.events++;
    let items: AssembledItem[];
    try {
      if (event.getTypeName() === 'TableMap') {
        const map = event as unknown as TableMapEventShape;
        inspectTableMap(map, this.assembler.position, this.collations);
        items = this.assembler.push({ type: 'table', schema: map.schemaName, table: map.tableName });
      }
      const e = toCaptureEvent(event);
      if (!e) return;
      items = this.assembler.push(e);
      if (e.type === 'commit' || e.type === 'begin' || e.type === 'xa_prepare') this.restoreStashed();
    } catch (err) {
      this.fail(err);
      return;
    }
    for (const item of items) this.route(item);
  }

  private route(item: AssembledItem): void {
    switch (item.kind) {
      case 'transaction':
        this.enqueue(item);
        return;
      case 'schema':
        if (this.options.handler.onSchemaChange) this.enqueue({ kind: 'schema', change: item.change, bytes: item.change.query.length });
        return;
      case 'dropped':
        this.counters.dropped++;
        this.keepalive(item.position, false, item.timestamp);
        return;
      case 'skipped':
        this.counters.skipped++;
        this.keepalive(item.position, false, item.timestamp);
        return;
      case 'keepalive':
        // A heartbeat: the server had nothing after this position when it sent it (its header has no time).
        this.keepalive(item.position, true, Date.now());
        return;
    }
  }

  /** Reports a position with nothing to emit; coalesces with a keepalive already waiting at the tail. */
  private keepalive(position: string, force: boolean, sourceTimeMs?: number): void {
    if (!this.options.handler.onKeepalive) return;
    const tail = this.queue[this.queue.length - 1];
    if (tail?.kind === 'keepalive') {
      tail.position = position;
      if (sourceTimeMs !== undefined) tail.sourceTimeMs = sourceTimeMs;
      return;
    }
    const now = Date.now();
    if (!force && now - this.lastKeepaliveAt < this.keepaliveIntervalMs) return;
    this.lastKeepaliveAt = now;
    this.enqueue({ kind: 'keepalive', position, bytes: 0, ...(sourceTimeMs === undefined ? {} : { sourceTimeMs }) });
  }

  private enqueue(item: QueueItem): void {
    this.queue.push(item);
    this.queuedBytes += item.bytes;
    this.queuedRows += rowsOf(item);
    if (this.queue.length > this.counters.maxQueued) this.counters.maxQueued = this.queue.length;
    if (this.queuedBytes > this.counters.maxQueuedBytes) this.counters.maxQueuedBytes = this.queuedBytes;
    this.regulate();
    this.wakeConsumer?.();
  }

  /**
   * Back-pressure, decided here and nowhere else. When the items waiting for the handler reach
   * maxQueuedTransactions or maxQueuedBytes, the dump socket is paused (mysql2 stops reading it and
   * parks the rest of the current chunk as raw packets; the server then blocks on TCP); when the
   * queue has drained to half of both limits, it resumes. Nothing is enqueued while paused, so
   * the queue never holds more than the limit (one transaction may exceed the byte limit alone).
   */
  private regulate(): void {
    const full = this.queue.length >= this.maxQueued || this.queuedBytes >= this.maxBytes || this.queuedRows >= this.maxRows;
    const drained = this.queue.length <= this.maxQueued / 2 && this.queuedBytes <= this.maxBytes / 2 && this.queuedRows <= this.maxRows / 2;
    if (!this.readerPaused && full) {
      this.readerPaused = true;
      this.counters.pauses++;
      this.zongji?.connection?.pause();
    } else if (this.readerPaused && drained) {
      this.readerPaused = false;
      this.lastEventAt = Date.now();
      for (const w of this.resumeWaiters.splice(0)) w();
      this.zongji?.connection?.resume();
    }
  }

  private async consume(): Promise<void> {
    for (;;) {
      if (this.stopping) return;
      const item = this.queue.shift();
      if (!item) {
        await new Promise<void>((resolve) => {
          this.wakeConsumer = resolve;
        });
        this.wakeConsumer = undefined;
        continue;
      }
      this.queuedBytes -= item.bytes;
      this.queuedRows -= rowsOf(item);
      this.regulate();
      this.deliveringSince = Date.now();
      try {
        await this.deliver(item);
      } catch (err) {
        this.fail(err);
        return;
      } finally {
        this.deliveringSince = undefined;
      }
    }
  }

  private async deliver(item: QueueItem): Promise<void> {
    const h = this.options.handler;
    switch (item.kind) {
      case 'transaction': {
        let txn = item.txn;
        if (item.repairs && !this.options.includeApplied) {
          txn = await this.repairer.repair(txn, item.repairs);
          this.counters.repairedRows += item.repairs.length;
          this.log.info('capture re-read rows whose binlog image was incomplete', { rows: item.repairs.length, position: txn.position });
        }
        if (item.details) await h.onTransaction(txn, item.details);
        else await h.onTransaction(txn);
        this.counters.transactions++;
        if (item.continues) this.counters.chunks++;
        this.counters.rows += txn.changes.length;
        this.counters.deliveredPosition = txn.position;
        return;
      }
      case 'schema':
        if (item.change.table !== undefined) this.repairer.refresh(item.change.schema, item.change.table);
        else this.repairer.refresh(item.change.schema);
        await h.onSchemaChange?.(item.change);
        this.counters.schemaChanges++;
        if (item.change.position) this.counters.deliveredPosition = item.change.position;
        return;
      case 'keepalive':
        await h.onKeepalive?.(item.position, item.sourceTimeMs);
        this.counters.keepalives++;
        this.counters.deliveredPosition = item.position;
        return;
    }
  }

  private checkIdle(): void {
    if (this.stopping || this.reconnecting || this.readerPaused || !this.zongji?.ready) return;
    const idle = Date.now() - this.lastEventAt;
    if (idle > this.readTimeoutMs) {
      this.onStreamError(this.generation, new ReadTimeoutError(`no binlog event or heartbeat for ${idle} ms`));
    }
  }

  private onStreamError(generation: number, err: unknown): void {
    if (generation !== this.generation || this.stopping) return;
    this.teardownStream();
    if (isTruncatedTail(err)) {
      this.skipTruncatedTail().then(
        (skipped) => (skipped ? void this.reconnect() : this.fail(err)),
        () => this.fail(err),
      );
      return;
    }
    if (!isRetryable(err)) {
      this.fail(err);
      return;
    }
    this.log.warn('capture lost its binlog connection; reconnecting', { position: this.assembler.position, error: String(err) });
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    const token = ++this.reconnectToken;
    this.reconnecting = true;
    const maxAttempts = this.options.reconnect?.maxAttempts ?? Number.POSITIVE_INFINITY;
    const maxDelay = this.options.reconnect?.maxDelayMs ?? 5000;
    let delay = this.options.reconnect?.initialDelayMs ?? 200;
    try {
      for (let attempt = 1; !this.stopping; attempt++) {
        // A full queue is drained first: a new stream must not start paused mid-handshake.
        if (this.readerPaused) await new Promise<void>((resolve) => this.resumeWaiters.push(resolve));
        await sleep(delay, this.sleeper);
        if (this.stopping) return;
        try {
          await this.openStream();
          this.counters.reconnects++;
          return;
        } catch (err) {
          this.teardownStream();
          if (isTruncatedTail(err) && (await this.skipTruncatedTail().catch(() => false))) continue;
          if (!isRetryable(err)) {
            this.fail(err);
            return;
          }
          if (attempt >= maxAttempts) {
            this.fail(new CaptureError(`gave up reconnecting to the source after ${attempt} attempts: ${String(err)}`, this.assembler.position, { cause: err }));
            return;
          }
          this.log.debug('capture reconnect failed', { attempt, error: String(err) });
          delay = Math.min(delay * 2, maxDelay);
        }
      }
    } finally {
      if (token === this.reconnectToken) this.reconnecting = false;
    }
  }

  /**
   * The position's binlog file ends in a partial event and the server has moved on to a newer file:
   * it was killed while writing that event, and MariaDB keeps the file as it was (MySQL cuts it on
   * recovery). Everything from the position (a transaction boundary) to the end of that file is a
   * transaction that never committed (its commit event was never written, so crash recovery rolled
   * it back): reading resumes at the next file. False when the file is the newest (a partial event
   * there is one being written) or gone; the error then stands.
   */
  private async skipTruncatedTail(): Promise<boolean> {
    const position = this.assembler.position;
    if (position === undefined) return false;
    const p = parsePosition(position);
    const conn = await connect(this.options.source, { connectTimeoutMs: this.connectTimeoutMs });
    let files: Array<{ name: string; size: number }>;
    try {
      files = await binlogFiles(conn);
    } finally {
      conn.destroy();
    }
    const i = files.findIndex((f) => f.name === p.file);
    if (i < 0 || i === files.length - 1 || p.offset >= files[i]!.size) return false;
    const next = files[i + 1]!.name;
    this.log.warn('capture skips the end of a binlog file left with a partial event by a killed server (a transaction that never committed)', {
      position,
      fileSize: files[i]!.size,
      resumeAt: `${next}:4`,
    });
    this.counters.truncatedTailsSkipped++;
    this.assembler.resumeFrom({ file: next, offset: 4 });
    return true;
  }

  /** Stops the capture for good with `err` (rejects `done`). */
  private fail(err: unknown): void {
    if (this.failure !== undefined || this.stopping) return;
    this.failure = explain(err, this.assembler.position);
    this.log.error('capture stopped', { error: String(this.failure) });
    this.settle.reject(this.failure);
    void this.stop();
  }
}

/** The source's refusal to read on past a partial event at the end of a binlog file (ER_MASTER_FATAL_ERROR_READING_BINLOG). */
function isTruncatedTail(err: unknown): boolean {
  const e = err as { errno?: number; message?: unknown } | undefined;
  return e?.errno === 1236 && /truncated in the middle of event/i.test(String(e.message));
}

/** Turns zongji's errors into the project's named errors where the cause is known. */
function explain(err: unknown, position: string | undefined): unknown {
  if (!(err instanceof Error)) return new CaptureError(String(err), position);
  const e = err as Error & { errno?: number };
  if (e.errno === 1236) return new BinlogPositionError(position ?? '', `the source cannot serve it: ${e.message}`);
  // The start checks the global settings; a session can still set these for its own transactions.
  if (/PARTIAL_UPDATE_ROWS_EVENT/.test(e.message)) {
    return new CaptureRefusedError(
      'a transaction logged an UPDATE with partial JSON (a session with binlog_row_value_options=PARTIAL_JSON): the binlog holds only the changed part of the JSON document, so the row it left is unknown here',
      undefined,
      position,
      "clear binlog_row_value_options in the sessions that set it (SET SESSION binlog_row_value_options = ''), run `lww-sink sync` for the tables that transaction updated, then resume after it",
      { cause: err },
    );
  }
  if (/TRANSACTION_PAYLOAD_EVENT/.test(e.message)) {
    return new CaptureRefusedError(
      'a transaction was logged compressed (a session with binlog_transaction_compression=ON): its row events cannot be decoded',
      undefined,
      position,
      'set binlog_transaction_compression = OFF in the sessions that set it, run `lww-sink sync` for the tables that transaction wrote, then resume after it',
      { cause: err },
    );
  }
  if (/Unsupported type|Insufficient permissions|schema drift/i.test(e.message)) {
    return new CaptureError(`binlog rows cannot be decoded: ${e.message}`, position, { cause: err });
  }
  if (err instanceof ReadTimeoutError) return new CaptureError(err.message, position, { cause: err });
  return err;
}

function validate(o: CaptureOptions): void {
  const fail = (msg: string) => {
    throw new InvalidOptionsError(`invalid capture option ${msg}`);
  };
  if (!o.sourceId) fail('sourceId: required');
  if (!o.handler || typeof o.handler.onTransaction !== 'function') fail('handler: needs an onTransaction function');
  if (o.from !== undefined) parsePosition(o.from);
  const positive = (name: keyof CaptureOptions) => {
    const v = o[name];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) fail(`${name}: must be a positive number`);
  };
  for (const n of ['heartbeatMs', 'readTimeoutMs', 'connectTimeoutMs', 'maxQueuedTransactions', 'maxQueuedBytes', 'maxQueuedRows'] as const) positive(n);
  if (o.replicaServerId !== undefined && !(Number.isInteger(o.replicaServerId) && o.replicaServerId > 0 && o.replicaServerId < 2 ** 32)) {
    fail('replicaServerId: must be an integer in 1..4294967295');
  }
}

interface ZongjiColumn {
  name: string;
  type: number;
  charset: string | null;
  /** Set by inspectTableMap: a MySQL JSON column zongji reads as a BLOB. */
  lwwJson?: boolean;
  /** Set by inspectTableMap: a latin1 column zongji decodes as ISO-8859-1. */
  lwwLatin1?: boolean;
}

interface ZongjiTableMap {
  parentSchema: string;
  tableName: string;
  columns?: ZongjiColumn[];
  /**
   * Set by inspectTableMap: the table's columns as the TABLE_MAP event names them (binlog_row_metadata
   * =FULL), i.e. as the source table had them when the rows were written; absent when the event does
   * not name them. One array per event, shared by its changes (RowChange.sourceColumns).
   */
  lwwSourceColumns?: readonly string[];
}

/** The parts of a zongji instance the skip of dropped transactions uses (skipDroppedRows). */
interface SkippableZongji {
  _skipSchema(schema: string, table: string): boolean;
  tableMap: Record<string, ZongjiTableMap>;
}

interface TableMapEventShape {
  tableId: number;
  columnCount: number;
  schemaName: string;
  tableName: string;
  tableMap?: unknown;
  /** The column names the event carries (binlog_row_metadata=FULL), as of when it was written. */
  columnNames?: string[];
  /** Zongji's parse of the event's collation id per column (FULL metadata; undefined for non-text columns). */
  _columnCharsetIds?: Array<number | undefined>;
}

/** The binary pseudo-collation: bytes, no character set. */
const BINARY_COLLATION_ID = 63;

/**
 * Checks and adjusts zongji's column list for a table, on every TABLE_MAP event (zongji rebuilds the
 * list from it before emitting it, ahead of the table's row events):
 * - Columns are named by the event's own metadata (binlog_row_metadata=FULL, required at start),
 *   never by the table's definition now. Zongji does so itself except on MariaDB for tables with
 *   temporal columns, where it reads information_schema; when that disagrees with the event (the
 *   table changed since), the columns are put back in the event's order when only the order
 *   changed, and capture stops otherwise.
 * - An event without column names (written before FULL was set) of a table whose column count
 *   changed since stops capture.
 * - Zongji renders MySQL JSON through JS values, which loses doubles holding integers, -0.0 and
 *   typed scalars; marked as binary BLOBs, the JSON columns arrive as raw documents that values.ts
 *   renders exactly.
 */
function inspectTableMap(event: TableMapEventShape, position: string | undefined, collations: ReadonlyMap<number, string>): void {
  const entry = (event.tableMap as Record<number, ZongjiTableMap & { columnSchemas?: Array<{ COLUMN_NAME: string }> }> | undefined)?.[event.tableId];
  if (!entry) return;
  const table = `${event.schemaName}.${event.tableName}`;
  const names = event.columnNames;
  const known = entry.columnSchemas?.length ?? entry.columns?.length;
  if (!names && known !== undefined && known !== event.columnCount) {
    throw new CaptureRefusedError(
      `the table has ${known} columns now but ${event.columnCount} in the binlog being read, and the binlog does not name its columns (written before binlog_row_metadata=FULL was set)`,
      table,
      position,
      'resume from a position written after binlog_row_metadata=FULL was set and the table changed, and run lww-sink sync for the table',
    );
  }
  if (names && entry.columns?.some((c, i) => c.name !== names[i])) alignToEvent(entry, names, table, position);
  if (names && names.length === event.columnCount) entry.lwwSourceColumns = [...names];
  else delete entry.lwwSourceColumns;
  const ids = event._columnCharsetIds;
  for (const [i, col] of (entry.columns ?? []).entries()) {
    // The column's character set by the source's own collation table (collationCharsets), not zongji's guess.
    const id = ids?.[i];
    if (id !== undefined && id !== BINARY_COLLATION_ID && col.type !== TYPE_JSON && !col.lwwJson) {
      const charset = collations.get(id);
      if (charset === undefined) {
        throw new CaptureRefusedError(`the column ${col.name} has collation id ${id}, which the source does not list`, table, position, 'convert the column to a collation of utf8mb4 on every node, run lww-sink sync for the table, then resume after the ALTER TABLE');
      }
      col.charset = charset;
    }
    // A column altered after install to a charset capture cannot carry byte for byte (model/charsets.ts).
    const why = col.lwwLatin1 || col.lwwJson ? undefined : unsupportedCharsetColumn({ name: col.name, charset: col.charset });
    if (why) {
      throw new CaptureRefusedError(why.replace(/^its column/, 'the column'), table, position, 'convert the column on every node, run lww-sink sync for the table, then resume from a position after the ALTER TABLE');
    }
    if (col.type === TYPE_JSON) {
      col.type = TYPE_BLOB;
      col.charset = null;
      col.lwwJson = true;
    }
    // Zongji decodes latin1 as Windows-1252 without MySQL's five extra bytes: byte for byte instead (values.ts latin1Text).
    if (col.charset === 'latin1') {
      col.charset = 'iso-8859-1';
      col.lwwLatin1 = true;
    }
  }
}

/** Puts information_schema's column details in the event's column order, or refuses when they are not the same columns. */
function alignToEvent(entry: ZongjiTableMap & { columnSchemas?: Array<{ COLUMN_NAME: string }> }, names: readonly string[], table: string, position: string | undefined): void {
  const schemas = entry.columnSchemas ?? [];
  const byName = new Map(schemas.map((c) => [c.COLUMN_NAME, c]));
  const columns = entry.columns!;
  if (schemas.length !== names.length || names.some((n) => !byName.has(n))) {
    throw new CaptureRefusedError(
      `the binlog names the columns ${names.join(', ')} but the table now has ${schemas.map((c) => c.COLUMN_NAME).join(', ')}: columns were renamed, added or dropped since these events were written, and this engine's decoder needs the current definition`,
      table,
      position,
      'apply the same schema change on every node, run lww-sink sync for the table, then resume from a position after the ALTER TABLE',
    );
  }
  entry.columnSchemas = names.map((n) => byName.get(n)!);
  const charsets = new Map(schemas.map((c) => [c.COLUMN_NAME, (c as { CHARACTER_SET_NAME?: string | null }).CHARACTER_SET_NAME ?? null]));
  columns.forEach((c, i) => {
    c.name = names[i]!;
    c.charset = charsets.get(c.name) ?? null;
  });
}

interface RowsEventShape {
  tableId: number;
  tableMap: Record<number, ZongjiTableMap>;
  rows: unknown[];
  size: number;
  /** Which columns the (before) image holds, one bit per column; the after image's for updates in the second. */
  columns_present_bitmap?: Buffer;
  columns_present_bitmap2?: Buffer;
}

/** Names of the columns a row image does not hold (binlog_row_image MINIMAL/NOBLOB), or undefined when it holds all. */
function absentColumns(map: ZongjiTableMap, bitmap: Buffer | undefined): ReadonlySet<string> | undefined {
  if (!bitmap || !map.columns) return undefined;
  const absent = new Set<string>();
  map.columns.forEach((c, i) => {
    if ((bitmap[i >> 3]! & (1 << (i & 7))) === 0) absent.add(c.name);
  });
  return absent.size > 0 ? absent : undefined;
}

/** zongji's event → the assembler's event; undefined for events grouping does not need. */
function toCaptureEvent(event: AnyBinlogEvent): CaptureEvent | undefined {
  switch (event.getTypeName()) {
    case 'Rotate': {
      const e = event as Extract<AnyBinlogEvent, { binlogName: string; position: number }>;
      return { type: 'rotate', file: e.binlogName, offset: e.position };
    }
    case 'Query': {
      const e = event as Extract<AnyBinlogEvent, { query: string }>;
      return { type: 'query', query: e.query, schema: e.schema, nextPosition: e.nextPosition, timestamp: e.timestamp };
    }
    case 'Xid':
      return { type: 'commit', nextPosition: event.nextPosition, timestamp: event.timestamp };
    case 'MariadbGtid':
      return (event as Extract<AnyBinlogEvent, { standalone: boolean }>).standalone ? undefined : { type: 'begin' };
    case 'XaPrepare': {
      const e = event as unknown as { onePhase: boolean; xidFormatId: number; xidGtrid: Buffer; xidBqual: Buffer };
      const xid = `X'${e.xidGtrid.toString('hex')}',X'${e.xidBqual.toString('hex')}',${e.xidFormatId}`;
      return { type: 'xa_prepare', nextPosition: event.nextPosition, xid, onePhase: e.onePhase };
    }
    case 'Heartbeat': {
      const e = event as Extract<AnyBinlogEvent, { binlogName: string }>;
      return { type: 'heartbeat', file: e.binlogName, nextPosition: event.nextPosition };
    }
    case 'WriteRows':
    case 'DeleteRows':
    case 'UpdateRows': {
      const e = event as unknown as RowsEventShape;
      const map = e.tableMap[e.tableId];
      if (!map) return undefined;
      const columns: ColumnShape[] | undefined = map.columns?.map((c) => ({ name: c.name, type: c.lwwJson ? TYPE_JSON : c.type, ...(c.lwwLatin1 ? { latin1: true } : {}) }));
      const name = event.getTypeName();
      const base = { type: 'rows' as const, schema: map.parentSchema, table: map.tableName, bytes: e.size, ...(map.lwwSourceColumns ? { sourceColumns: map.lwwSourceColumns } : {}) };
      // Zongji reads a column the image does not hold as null: those are left out instead.
      const absentBefore = absentColumns(map, e.columns_present_bitmap);
      if (name === 'UpdateRows') {
        const absentAfter = absentColumns(map, e.columns_present_bitmap2);
        const rows = (e.rows as Array<{ before: Row; after: Row }>).map((r) => ({
          before: normalizeRow(r.before, columns, absentBefore),
          after: normalizeRow(r.after, columns, absentAfter),
        }));
        return { ...base, op: 'update', rows, ...(absentAfter ? { partial: true } : {}) };
      }
      const rows = (e.rows as Row[]).map((r) => normalizeRow(r, columns, absentBefore));
      return { ...base, op: name === 'WriteRows' ? 'insert' : 'delete', rows, ...(absentBefore ? { partial: true } : {}) };
    }
    default:
      return undefined;
  }
}

function rowsOf(item: QueueItem): number {
  return item.kind === 'transaction' ? item.txn.changes.length : 0;
}

/** Starts a capture: checks the source's settings (UnsafeSourceError lists every problem), then streams. */
export function startCapture(options: CaptureOptions): Promise<BinlogCapture> {
  return BinlogCapture.start(options);
}

/**
 * When the server opened a binlog file, in ms since the epoch (second resolution): the header time
 * of the file's FORMAT_DESCRIPTION event, its first real event. Every transaction in the file
 * committed at or after it. Reads only the head of the file. Used to turn a time into a position.
 */
export async function binlogFileStartTime(source: Target, file: string, options: { connectTimeoutMs?: number; replicaServerId?: number } = {}): Promise<number> {
  const dsn = typeof source === 'string' ? parseUrl(source) : (source as ConnectionOptions);
  const timeoutMs = options.connectTimeoutMs ?? 10_000;
  const z = new ZongJi({ ...dsn, connectTimeout: timeoutMs });
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<number>((resolve, reject) => {
      timer = setTimeout(() => reject(new CaptureError(`no FORMAT_DESCRIPTION event read from ${file} within ${timeoutMs} ms`, `${file}:4`)), timeoutMs);
      z.on('binlog', (event: AnyBinlogEvent) => {
        if (event.getTypeName() === 'Format') resolve(event.timestamp);
      });
      z.on('error', (err: Error) => reject(err));
      z.start({
        serverId: options.replicaServerId ?? 1_000_000_000 + Math.floor(Math.random() * 1_000_000_000),
        filename: file,
        position: 4,
        includeEvents: ['format'],
      });
    });
  } finally {
    clearTimeout(timer);
    z.removeAllListeners('binlog');
    z.removeAllListeners('error');
    z.on('error', () => {});
    z.stop();
  }
}
