// The LWW sink: accepts source transactions in order, validates them before anything is written,
// packs them into target transactions bounded by rows, bytes and delay, and applies each batch
// with its checkpoint in one transaction, retrying deadlocks and lost connections. A batch that
// cannot be applied stops the sink: the stream never moves past it. With applyWorkers > 1 a batch
// is split over parallel workers, each committing its share with its own checkpoint row
// (worker-pool.ts); a source then resumes from its lowest worker row (worker-checkpoints.ts).
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { ConnectionOptions } from 'mysql2/promise';
import { InvalidChangeError, SinkClosedError } from '../errors.ts';
import { connect, type Target } from '../db/connection.ts';
import { ensureClaimTables, ensureMetaSchema, ensureTombstoneTable, enterApplySession } from '../install/provision.ts';
import { parseSourceTransaction, type RowChange, type SourceTransactionInput } from '../model/change.ts';
import type { TableMeta } from '../model/table.ts';
import { TypedJson } from '../model/json.ts';
import { physicalMicrosOf } from '../model/version.ts';
import { tableKey } from '../model/table.ts';
import { claimCheckpointSql, claimWorkerRowsSql, readCheckpointSql } from '../sql/checkpoint.ts';
import { type Dialect, dialectFromVersion } from '../sql/dialect.ts';
import { VERSION_SQL } from '../sql/introspect.ts';
import { PACKET_OVERHEAD_BYTES, rowWireBytesAtMost, wireBytes } from './apply.ts';
import { dropUnmovedKeyDeletes, keyMovesToCheck } from './key-moves.ts';
import { parseSinkOptions, type SinkOptions, type SinkOptionsInput } from './options.ts';
import { type KeyOp, type PreparedTransaction, prepareTransaction } from './prepare.ts';
import { emptyCounters, emptyStats, mergeBatch, type SinkStats, type TableCounters } from './stats.ts';
import { loadTableMeta, TableMetadataCache } from './table-metadata.ts';
import { ColumnDefault } from '../sql/dml.ts';
import type { SqlValue } from './values.ts';
import { setPartitionKeys } from './partition-keys.ts';
import { alignWorkerRows, readWorkerRows, resumePoint } from './worker-checkpoints.ts';
import { ApplyProgress, statementBudget, type WindowAdvance, type WorkerCommit, WorkerPool } from './worker-pool.ts';
import { killProcessAt } from '../failpoints/failpoints.ts';

/** sinkKillCommitInFlight: how long the thread holds still after sending COMMIT, so the server commits while its reply stays unread. */
const COMMIT_IN_FLIGHT_HOLD_MS = 300;

export interface Checkpoint {
  sourceId: string;
  position: string;
  lastVersion: bigint;
  ownerEpoch: bigint;
  owner: string;
  /** Source time (µs, the source's clock) reached at `position`, when recorded. */
  sourceTimeUs?: bigint;
}

/** What the sink is doing now (the replicator's progress watchdog reads it). */
export interface SinkProgress {
  /** Apply statements completed since the sink was created (every worker, every statement, COMMIT included). */
  statements: number;
  lastStatementAtMs: number | undefined;
  /** Statements running now: worker, what (verb and table, or COMMIT), for how long, on which target connection id. */
  inFlight: Array<{ worker: number; what: string; forMs: number; connectionId: number | undefined }>;
  /** Workers whose target transaction ran past its statement budget (worker-pool.ts statementBudget): a loop, not progress. */
  looping: Array<{ worker: number; statements: number; rows: number; forMs: number; last: string | undefined; connectionId: number | undefined }>;
  /** Source transactions accepted and not committed, and their rows. */
  pendingTransactions: number;
  pendingRows: number;
  /** A batch is being applied (or retried) now. */
  applying: boolean;
}

export interface Sink {
  /** Validates and queues one source transaction; rejects it whole (nothing written) when invalid. */
  write(txn: SourceTransactionInput): Promise<void>;
  /** Resolves when everything written so far is committed. */
  flush(): Promise<void>;
  /** The last committed position of a source, or undefined when nothing was committed for it. */
  checkpoint(sourceId: string): Promise<Checkpoint | undefined>;
  stats(): SinkStats;
  /** What it is doing now: statements completed and in flight, work queued. */
  progress(): SinkProgress;
  /** The SQL dialect in use (detected from the server unless set). */
  dialect(): Promise<Dialect>;
  /**
   * Takes ownership of a source's checkpoint row (bumping its owner epoch) and returns the epoch;
   * an epoch given in options.claims is reused without a bump.
   * Done on first write anyway; call it at start so an older writer of the same source stops now.
   */
  claim(sourceId: string): Promise<bigint>;
  /** Rejects with the error that stopped the sink, if one ever does (for supervisors). */
  readonly failed: Promise<never>;
  /** Forgets cached table metadata (after DDL on the target). */
  refreshMetadata(schema?: string, table?: string): void;
  readonly options: SinkOptions;
  /** Flushes and closes the connections. */
  close(): Promise<void>;
  /** Closes at once, dropping what is not committed (as a crash would). */
  abort(): Promise<void>;
}

interface Queued {
  seq: number;
  /** The transaction's ordinal in its source's stream (stored with the checkpoint as apply_seq). */
  applySeq: bigint;
  txn: PreparedTransaction;
  /** What it holds in memory, as limits.maxQueueBytes counts it (see queueWeight). */
  weight: number;
}

/** Memory a queued operation takes beyond its values' bytes (its objects, arrays and key text). */
const OP_MEMORY_BYTES = 320;

/** A transaction's weight in the queue: values plus per-operation objects, so many small rows count too. */
function queueWeight(txn: PreparedTransaction): number {
  return txn.bytes + txn.ops.length * OP_MEMORY_BYTES;
}

interface Waiter {
  seq: number;
  resolve(): void;
  reject(err: unknown): void;
}

class LwwSink implements Sink {
  readonly options: SinkOptions;
  private admin: Promise<Connection> | null = null;
  private readonly pool: WorkerPool;
  /** Per source: the last apply_seq handed out (numbering starts at the stream's resume point). */
  private readonly streams = new Map<string, { last: bigint }>();
  private dialectP: Promise<Dialect> | null = null;
  private maxPacketP: Promise<number> | null = null;
  private maxPacketBytes: number | undefined;
  private readonly metadata: TableMetadataCache;
  private readonly epochs = new Map<string, Promise<bigint>>();
  private readonly claimed = new Set<string>();
  private dialectKnown = false;
  private readonly pending: Queued[] = [];
  private pendingRows = 0;
  private pendingBytes = 0;
  /** The part of pendingRows/pendingBytes taken by the batch being applied (back-pressure leaves it out). */
  private takenRows = 0;
  private takenBytes = 0;
  private writeChain: Promise<void> = Promise.resolve();
  private seq = 0;
  private committedSeq = 0;
  /** Per source, the position of the last commit this process saw confirmed (what the commit-point failpoints report). */
  private readonly acked = new Map<string, string>();
  private waiters: Waiter[] = [];
  private drainWaiters: Array<() => void> = [];
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private flushRequested = false;
  private failure: unknown = null;
  private closed = false;
  private readonly counters = emptyStats();
  private rejectFailed: (err: unknown) => void = () => undefined;
  private readonly aborted = new AbortController();
  private readonly applyProgress = new ApplyProgress();
  readonly failed: Promise<never> = new Promise<never>((_, reject) => {
    this.rejectFailed = reject;
  });

  constructor(options: SinkOptions) {
    this.options = options;
    this.failed.catch(() => undefined);
    this.pool = new WorkerPool({
      workers: options.applyWorkers,
      connect: () => this.connectApply(),
      metaSchema: options.metaSchema,
      queryTimeoutMs: options.timeouts.queryMs,
      retry: options.retry,
      logger: options.logger,
      signal: this.aborted.signal,
      progress: this.applyProgress,
      onRetry: () => {
        this.counters.retries++;
      },
    });
    this.metadata = new TableMetadataCache(async (schema, table) => {
      const conn = await this.adminConn();
      const meta = await loadTableMeta(conn, schema, table, this.options.versionColumn);
      await ensureTombstoneTable(conn, this.options.metaSchema, meta);
      meta.claims = await ensureClaimTables(conn, this.options.metaSchema, meta);
      return meta;
    });
  }

  private connect(): Promise<Connection> {
    const { timeouts } = this.options;
    return connect(this.options.target as Target | ConnectionOptions, {
      connectTimeoutMs: timeouts.connectMs,
      traceCallers: false,
      init: [
        'SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ',
        "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO,ERROR_FOR_DIVISION_BY_ZERO'",
        `SET SESSION innodb_lock_wait_timeout = ${Number(timeouts.lockWaitSeconds)}`,
      ],
    });
  }

  /** A connection whose writes keep the versions they carry (the triggers check the node's secret). */
  private async connectApply(): Promise<Connection> {
    await this.adminConn();
    const conn = await this.connect();
    try {
      await enterApplySession(conn, this.options.metaSchema);
      // Every statement then runs inside a transaction that COMMIT or ROLLBACK ends: no BEGIN round trip.
      await conn.query('SET autocommit = 0');
    } catch (err) {
      conn.destroy();
      throw err;
    }
    return conn;
  }

  private adminConn(): Promise<Connection> {
    if (!this.admin) {
      const p = this.connect().then(async (conn) => {
        await ensureMetaSchema(conn, this.options.metaSchema);
        await enterApplySession(conn, this.options.metaSchema);
        conn.on('error', () => {
          if (this.admin === p) this.admin = null;
        });
        return conn;
      });
      p.catch(() => {
        if (this.admin === p) this.admin = null;
      });
      this.admin = p;
    }
    return this.admin;
  }

  dialect(): Promise<Dialect> {
    if (!this.dialectP) {
      const forced = this.options.dialect;
      this.dialectP =
        forced !== 'auto'
          ? Promise.resolve(forced)
          : this.adminConn().then(async (c) => {
              const [rows] = await c.query<RowDataPacket[]>(VERSION_SQL);
              return dialectFromVersion(String(rows[0]!.version));
            });
      this.dialectP.catch(() => {
        this.dialectP = null;
      });
    }
    return this.dialectP;
  }

  /** The target's max_allowed_packet (as the sink's sessions get it): the largest statement it takes. */
  private maxPacket(): Promise<number> {
    if (!this.maxPacketP) {
      this.maxPacketP = this.adminConn().then(async (c) => {
        const [rows] = await c.query<RowDataPacket[]>('SELECT @@max_allowed_packet AS p');
        this.maxPacketBytes = Number(rows[0]!.p);
        return this.maxPacketBytes;
      });
      this.maxPacketP.catch(() => {
        this.maxPacketP = null;
      });
    }
    return this.maxPacketP;
  }

  /** A row no statement can carry to this target: refused by name instead of failing (or looping) on the server's packet limit. */
  private checkRowSizes(txn: PreparedTransaction, maxPacket: number): void {
    const budget = maxPacket - PACKET_OVERHEAD_BYTES;
    for (let i = 0; i < txn.ops.length; i++) {
      const op = txn.ops[i]!;
      if (!op.row || rowWireBytesAtMost(op.row) <= budget) continue;
      let bytes = 0;
      for (const v of op.row) bytes += wireBytes(v);
      if (bytes <= budget) continue;
      const table = `${op.meta.schema}.${op.meta.table}`;
      const needed = Math.ceil((bytes + PACKET_OVERHEAD_BYTES) / (1024 * 1024)) * 1024 * 1024;
      throw new InvalidChangeError(
        `${table}: a row of change #${i} at ${txn.position} is ${bytes} bytes, more than the target's max_allowed_packet (${maxPacket}) lets one statement carry; ` +
          `raise max_allowed_packet on the target to at least ${needed} (SET GLOBAL max_allowed_packet = ${needed}, and in its option file), then restart replicate`,
        i,
      );
    }
  }

  refreshMetadata(schema?: string, table?: string): void {
    this.metadata.refresh(schema, table);
  }

  claim(sourceId: string): Promise<bigint> {
    return this.epoch(sourceId);
  }

  stats(): SinkStats {
    return structuredClone(this.counters);
  }

  progress(): SinkProgress {
    const p = this.applyProgress;
    const now = Date.now();
    return {
      statements: p.statements,
      lastStatementAtMs: p.lastStatementAtMs,
      inFlight: [...p.inFlight].map(([worker, f]) => ({ worker, what: f.what, forMs: now - f.since, connectionId: f.connectionId })),
      looping: [...p.attempts]
        .filter(([, a]) => a.statements > statementBudget(a.rows))
        .map(([worker, a]) => ({ worker, statements: a.statements, rows: a.rows, forMs: now - a.since, last: a.last, connectionId: a.connectionId })),
      pendingTransactions: this.pending.length,
      pendingRows: this.pendingRows,
      applying: this.running !== null,
    };
  }

  private assertUsable(): void {
    if (this.failure) throw this.failure;
    if (this.closed) throw new SinkClosedError();
  }

  write(input: SourceTransactionInput): Promise<void> {
    // Writes are validated and queued strictly in call order, even when callers do not await. A
    // refused transaction stops the sink: a later position must never commit past it.
    const run = this.writeChain.then(() =>
      this.accept(input).catch((err: unknown) => {
        if (!this.failure && !this.closed) this.fail(err);
        throw err;
      }),
    );
    this.writeChain = run.catch(() => undefined);
    return run;
  }

  private async accept(input: SourceTransactionInput): Promise<void> {
    this.assertUsable();
    const txn = parseSourceTransaction(input);
    const { limits } = this.options;
    // A version from the future would win every conflict until the clocks catch up: refuse it, named.
    const latest = this.latestVersion(Date.now() + limits.maxFutureMs);
    for (let i = 0; i < txn.changes.length; i++) {
      const c = txn.changes[i]!;
      if (c.version > latest) {
        throw new InvalidChangeError(
          `change #${i} (${c.schema}.${c.table}, ${c.op}) at ${txn.position}: version ${c.version} is ${(physicalMicrosOf(c.version) / 1000n - BigInt(Date.now())).toString()} ms ahead of this sink's clock, more than limits.maxFutureMs (${limits.maxFutureMs})`,
          i,
          'version',
        );
      }
    }
    if (txn.changes.length > limits.maxTransactionRows) {
      throw new InvalidChangeError(
        `transaction at ${txn.position} has ${txn.changes.length} changes, more than limits.maxTransactionRows (${limits.maxTransactionRows})`,
      );
    }
    // Awaits only until dialect, metadata and ownership are known: the steady state runs synchronously.
    if (!this.dialectKnown) {
      await this.dialect();
      this.dialectKnown = true;
    }
    // Each change's table metadata, held for the whole transaction; consecutive changes of one table share a lookup.
    const metas: TableMeta[] = new Array(txn.changes.length);
    let seen: Map<string, TableMeta> | undefined;
    for (let i = 0; i < txn.changes.length; i++) {
      const c = txn.changes[i]!;
      if (i === 0) {
        metas[0] = this.metadata.peek(c.schema, c.table) ?? (await this.metadata.get(c.schema, c.table));
        continue;
      }
      const prev = txn.changes[i - 1]!;
      if (prev.schema === c.schema && prev.table === c.table) {
        metas[i] = metas[i - 1]!;
        continue;
      }
      const first = txn.changes[0]!;
      seen ??= new Map([[tableKey(first.schema, first.table), metas[0]!]]);
      const k = tableKey(c.schema, c.table);
      let meta = seen.get(k);
      if (!meta) {
        meta = this.metadata.peek(c.schema, c.table) ?? (await this.metadata.get(c.schema, c.table));
        seen.set(k, meta);
      }
      metas[i] = meta;
    }
    const prepared = prepareTransaction(txn, (_c: RowChange, i: number) => metas[i]!);
    const moves = keyMovesToCheck(prepared);
    if (moves.length > 0) await dropUnmovedKeyDeletes(await this.adminConn(), this.options.metaSchema, prepared, moves);
    // One row alone is never refused for its size here: the target's packet limit decides (checkRowSizes).
    if (prepared.bytes > limits.maxTransactionBytes && prepared.ops.length > 1) {
      throw new InvalidChangeError(
        `transaction at ${txn.position} is about ${prepared.bytes} bytes, more than limits.maxTransactionBytes (${limits.maxTransactionBytes})`,
      );
    }
    this.checkRowSizes(prepared, this.maxPacketBytes ?? (await this.maxPacket()));
    if (!this.claimed.has(txn.sourceId)) {
      const epoch = await this.epoch(txn.sourceId);
      // The stream's worker rows agree on its resume point before this sink numbers anything after it.
      const last = await alignWorkerRows(await this.adminConn(), {
        metaSchema: this.options.metaSchema,
        sourceId: txn.sourceId,
        epoch,
        owner: this.options.owner,
        workers: this.options.applyWorkers,
      });
      this.streams.set(txn.sourceId, { last });
      this.claimed.add(txn.sourceId);
    }
    if (this.options.applyWorkers > 1) setPartitionKeys(txn, prepared);
    this.assertUsable();
    const weight = queueWeight(prepared);
    const stream = this.streams.get(txn.sourceId)!;
    this.pending.push({ seq: ++this.seq, applySeq: ++stream.last, txn: prepared, weight });
    this.pendingRows += prepared.ops.length;
    this.pendingBytes += weight;
    this.kick();
    // Back-pressure, the one place that decides it: the caller waits while the queue holds more than
    // two windows besides the one being applied, or more than its byte budget.
    while (this.overQueue() && !this.failure && !this.closed) {
      await new Promise<void>((r) => this.drainWaiters.push(r));
    }
    this.assertUsable();
  }

  /**
   * The queue is past its bound: two windows of rows (a window: one batch per apply worker) or
   * limits.maxQueueBytes, not counting the window being applied. The caller prepares the next
   * windows while the server runs this one (counted in, the caller waited while the server worked
   * and the server while the caller prepared).
   */
  private overQueue(): boolean {
    const { batch, applyWorkers, limits } = this.options;
    return this.pendingRows - this.takenRows > 2 * batch.maxRows * applyWorkers || this.pendingBytes - this.takenBytes > limits.maxQueueBytes;
  }

  private latestAtMs = Number.NaN;
  private latest = 0n;

  /** The highest version a change may carry at this time (ms): computed once per millisecond, not per transaction. */
  private latestVersion(ms: number): bigint {
    if (ms !== this.latestAtMs) {
      this.latestAtMs = ms;
      this.latest = ((BigInt(ms) * 1000n) << 10n) | 1023n;
    }
    return this.latest;
  }

  /** Claims the checkpoint row of a source once per sink: later writers of the same source win. */
  private epoch(sourceId: string): Promise<bigint> {
    let p = this.epochs.get(sourceId);
    const known = this.options.claims?.get(sourceId);
    if (!p && known !== undefined) {
      // Claimed earlier by this supervisor: a stolen claim shows as OwnershipLostError on the first advance.
      p = Promise.resolve(known);
      this.epochs.set(sourceId, p);
    }
    if (!p) {
      p = (async () => {
        const conn = await this.adminConn();
        const meta = this.options.metaSchema;
        await conn.query('BEGIN');
        try {
          await conn.execute(claimCheckpointSql(meta), [sourceId, this.options.owner, this.options.owner]);
          const [rows] = await conn.execute<RowDataPacket[]>(readCheckpointSql(meta), [sourceId]);
          const epoch = BigInt(rows[0]!.owner_epoch as string);
          // Other workers' rows follow worker 0's claim: an older writer's workers stop too.
          await conn.execute(claimWorkerRowsSql(meta), [epoch.toString(), this.options.owner, sourceId]);
          await conn.query('COMMIT');
          this.options.claims?.set(sourceId, epoch);
          return epoch;
        } catch (err) {
          await conn.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      })();
      p.catch(() => this.epochs.delete(sourceId));
      this.epochs.set(sourceId, p);
    }
    return p;
  }

  private kick(): void {
    if (this.running || this.pending.length === 0 || this.failure) return;
    const { batch } = this.options;
    const full = this.pendingRows >= batch.maxRows || this.pendingBytes >= batch.maxBytes;
    if (!full && !this.flushRequested) {
      if (!this.timer) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.flushRequested = true;
          this.kick();
        }, batch.maxDelayMs);
      }
      return;
    }
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.running = this.drain().finally(() => {
      this.running = null;
      this.kick();
    });
  }

  /**
   * A batch: about batch.maxRows rows (and maxBytes) per apply worker. One metadata object per table:
   * a transaction prepared after a refresh (DDL) does not join one prepared before it, whose rows
   * have the old columns (a statement is built from one table's metadata for all its rows).
   */
  private takeBatch(): Queued[] {
    const { batch, applyWorkers } = this.options;
    const maxRows = batch.maxRows * applyWorkers;
    const maxBytes = batch.maxBytes * applyWorkers;
    const out: Queued[] = [];
    let rows = 0;
    let bytes = 0;
    const metas = new Map<string, TableMeta>();
    for (const q of this.pending) {
      if (out.length > 0 && (rows + q.txn.ops.length > maxRows || bytes + q.txn.bytes > maxBytes)) break;
      if (!sameMetadata(metas, q.txn.ops)) break;
      out.push(q);
      rows += q.txn.ops.length;
      bytes += q.txn.bytes;
    }
    return out;
  }

  private async drain(): Promise<void> {
    while (this.pending.length > 0 && !this.failure && !this.closed) {
      const { batch } = this.options;
      const full = this.pendingRows >= batch.maxRows || this.pendingBytes >= batch.maxBytes;
      if (!full && !this.flushRequested) return;
      const taken = this.takeBatch();
      for (const q of taken) {
        this.takenRows += q.txn.ops.length;
        this.takenBytes += q.weight;
      }
      this.wakeWriters();
      try {
        await this.applyBatch(taken);
      } catch (err) {
        // After abort() a batch cut short is no failure of its own (abort settled every waiter).
        if (!this.closed) this.fail(err);
        return;
      }
      this.pending.splice(0, taken.length);
      for (const q of taken) {
        this.pendingRows -= q.txn.ops.length;
        this.pendingBytes -= q.weight;
      }
      this.takenRows = 0;
      this.takenBytes = 0;
      this.committedSeq = taken[taken.length - 1]!.seq;
      if (this.pending.length === 0) this.flushRequested = false;
      this.settleWaiters();
      // One event-loop turn between windows: timers (the watchdog, batch delays) and the source's
      // reads run even while a backlog keeps this loop busy.
      if (this.pending.length > 0) await new Promise<void>((r) => setImmediate(r));
    }
  }

  private settleWaiters(): void {
    const done = this.waiters.filter((w) => w.seq <= this.committedSeq);
    this.waiters = this.waiters.filter((w) => w.seq > this.committedSeq);
    for (const w of done) w.resolve();
    this.wakeWriters();
  }

  /** Lets waiting writers go on once the queue is back within its bound. */
  private wakeWriters(): void {
    if (this.overQueue()) return;
    const d = this.drainWaiters;
    this.drainWaiters = [];
    for (const r of d) r();
  }

  private fail(err: unknown): void {
    this.failure = err;
    this.rejectFailed(err);
    this.options.logger.error('sink stopped: a transaction was refused or a batch could not be applied', { error: err instanceof Error ? err.message : String(err) });
    for (const w of this.waiters) w.reject(err);
    this.waiters = [];
    for (const r of this.drainWaiters) r();
    this.drainWaiters = [];
  }

  /** Failpoints act on a copy of the batch's operations, once per batch (not per retry). */
  private injectFaults(ops: KeyOp[], faults: Map<string, TableCounters>): KeyOp[] {
    const fp = this.options.failpoints;
    if (!fp.enabled) return ops;
    const out: KeyOp[] = [];
    for (const op of ops) {
      const name = `${op.meta.schema}.${op.meta.table}`;
      const counts = faults.get(name) ?? emptyCounters();
      faults.set(name, counts);
      if (fp.on('sinkDropMessage')) {
        counts.dropped++;
        continue;
      }
      if (op.kind === 'upsert' && fp.on('sinkMutateValue')) {
        const idx = mutableColumnIndex(op.meta);
        if (idx >= 0) {
          const row = [...op.row!];
          row[idx] = mutate(row[idx]!);
          out.push({ ...op, row });
          counts.mutated++;
          continue;
        }
      }
      out.push(op);
    }
    return out;
  }

  private async applyBatch(batch: Queued[]): Promise<void> {
    const dialect = await this.dialect();
    const maxPacketBytes = this.maxPacketBytes ?? (await this.maxPacket());
    const faults = new Map<string, TableCounters>();
    const ops = this.injectFaults(
      batch.flatMap((q) => q.txn.ops),
      faults,
    );
    const bypass = this.options.failpoints.on('mysqlSinkBypassLWW');
    const advances = new Map<string, WindowAdvance>();
    for (const q of batch) {
      const prev = advances.get(q.txn.sourceId);
      // The time of the last transaction whose position is stored (an unknown one keeps the previous).
      // Never past this clock: a session's SET TIMESTAMP in the future stamps the binlog events of
      // tables without triggers too, and a time ahead would let GC pass this stream's real progress.
      // Never back within the window (nor in the stored row, advanceCheckpointSql): see there.
      const given = q.txn.sourceTimeMs !== undefined ? BigInt(Math.min(q.txn.sourceTimeMs, Date.now())) * 1000n : undefined;
      const sourceTimeUs = given === undefined || (prev?.sourceTimeUs !== undefined && prev.sourceTimeUs > given) ? prev?.sourceTimeUs : given;
      if (prev) {
        // One advance per source, updated in place: no await nor object per transaction.
        if (q.txn.maxVersion > prev.version) prev.version = q.txn.maxVersion;
        prev.position = q.txn.position;
        prev.sourceTimeUs = sourceTimeUs;
        prev.seq = q.applySeq;
        continue;
      }
      const epoch = await this.epoch(q.txn.sourceId);
      advances.set(q.txn.sourceId, { sourceId: q.txn.sourceId, position: q.txn.position, version: q.txn.maxVersion, epoch, sourceTimeUs, seq: q.applySeq });
    }
    // After abort() nothing commits.
    if (this.closed) throw new SinkClosedError();
    const where = (c: WorkerCommit) => ({
      owner: this.options.owner,
      worker: c.worker,
      positions: Object.fromEntries(c.advances.map((a) => [a.sourceId, a.position])),
      acked: Object.fromEntries(this.acked),
      rows: c.rows,
    });
    const fp = this.options.failpoints;
    // The commit-point failpoints, in whichever worker's transaction meets them first.
    const hooks =
      fp.enabled && ops.length > 0
        ? {
            beforeCommit: (c: WorkerCommit) => fp.on('sinkKillAfterStatements') && killProcessAt('sinkKillAfterStatements', where(c)),
            commitSent: (c: WorkerCommit) => fp.on('sinkKillCommitInFlight') && killProcessAt('sinkKillCommitInFlight', where(c), COMMIT_IN_FLIGHT_HOLD_MS),
            afterCommit: (c: WorkerCommit) => fp.on('sinkKillAfterCommit') && killProcessAt('sinkKillAfterCommit', where(c)),
          }
        : undefined;
    const outcomes = await this.pool.apply({ dialect, bypass, maxPacketBytes, ...(hooks ? { hooks } : {}) }, ops, [...advances.values()]);
    for (const outcome of outcomes) mergeBatch(this.counters, outcome.tables);
    mergeBatch(this.counters, faults);
    this.counters.batches += outcomes.length;
    this.counters.transactions += batch.length;
    this.counters.rows += ops.length;
    for (const a of advances.values()) this.acked.set(a.sourceId, a.position);
    this.options.onCommit?.({
      committedAtMs: Date.now(),
      transactions: batch.map((q) => ({ sourceId: q.txn.sourceId, position: q.txn.position, maxVersion: q.txn.maxVersion, changes: q.txn.ops.length })),
    });
  }

  async flush(): Promise<void> {
    await this.writeChain;
    this.assertUsable();
    const target = this.seq;
    if (this.committedSeq >= target) return;
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ seq: target, resolve, reject }));
    this.flushRequested = true;
    this.kick();
    await done;
  }

  async checkpoint(sourceId: string): Promise<Checkpoint | undefined> {
    const conn = await this.adminConn();
    const rows = await readWorkerRows(conn, this.options.metaSchema, sourceId);
    const head = rows.find((r) => r.worker === 0);
    // Where the stream resumes: its lowest worker row (the only row with one worker).
    const point = resumePoint(rows);
    if (!head || !point || point.position === '') return undefined;
    return {
      sourceId,
      position: point.position,
      lastVersion: point.lastVersion,
      ownerEpoch: head.ownerEpoch,
      owner: head.owner,
      ...(point.sourceTimeUs === undefined ? {} : { sourceTimeUs: point.sourceTimeUs }),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      if (!this.failure) {
        await this.flush();
        // Idle workers' rows catch up: a clean restart resumes where this sink ended.
        await this.pool.settle();
      }
    } finally {
      await this.abort();
    }
  }

  async abort(): Promise<void> {
    this.closed = true;
    this.aborted.abort();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pending.length = 0;
    const err = this.failure ?? new SinkClosedError();
    for (const w of this.waiters) w.reject(err);
    this.waiters = [];
    // A writer held by back-pressure is let go (it then fails: the sink is closed).
    for (const r of this.drainWaiters.splice(0)) r();
    this.pool.destroy();
    const admin = this.admin;
    this.admin = null;
    if (admin) await admin.then((c) => c.destroy()).catch(() => undefined);
  }
}

/** Records the ops' metadata per table in `metas`; false (nothing recorded) when one differs from what is there. */
export function sameMetadata(metas: Map<string, TableMeta>, ops: readonly KeyOp[]): boolean {
  let last: TableMeta | undefined;
  const added: Array<[string, TableMeta]> = [];
  for (const op of ops) {
    if (op.meta === last) continue;
    last = op.meta;
    const k = tableKey(op.meta.schema, op.meta.table);
    const known = metas.get(k) ?? added.find(([key]) => key === k)?.[1];
    if (known === undefined) added.push([k, op.meta]);
    else if (known !== op.meta) return false;
  }
  for (const [k, m] of added) metas.set(k, m);
  return true;
}

/** The last non-key, non-version column: what the sinkMutateValue failpoint alters. */
function mutableColumnIndex(meta: TableMeta): number {
  for (let i = meta.writableColumns.length - 2; i >= 0; i--) {
    if (!meta.primaryKey.includes(meta.writableColumns[i]!)) return i;
  }
  return -1;
}

function mutate(v: SqlValue): SqlValue {
  if (v === null || v instanceof ColumnDefault) return v;
  if (typeof v === 'number') return v + 1;
  if (Buffer.isBuffer(v)) return Buffer.concat([v, Buffer.from([0x21])]);
  if (v instanceof TypedJson) return mutate(v.text);
  if (/^-?\d+$/.test(v)) return (BigInt(v) + 1n).toString();
  return `${v}!`;
}

/** Creates a sink; options are validated now, the connection is opened on first use. */
export function createSink(options: SinkOptionsInput): Sink {
  return new LwwSink(parseSinkOptions(options));
}

