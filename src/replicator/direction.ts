// One direction of replication, source → target: capture of the source's binlog feeding an LWW sink
// on the target, resuming from the checkpoint stored on the target. Supervises both: when either
// fails, everything not committed is dropped and the direction restarts from the checkpoint (the
// stream never moves past a transaction that failed). classify.ts decides: transient failures
// restart with exponential backoff (capped, jittered); permanent ones fail the direction for good.
// Ownership of the target's checkpoint is claimed once per Direction; restarts reuse the claim.
import { backoffDelay } from '../db/retry.ts';
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { startCapture, type BinlogCapture } from '../capture/reader.ts';
import type { TableSelector } from '../capture/filter.ts';
import { binlogLag, currentPosition } from '../capture/source.ts';
import { connect, redactUrl } from '../db/connection.ts';
import { checkSourceIdentity, readSourceIdentity, recordSourceIdentity } from './source-identity.ts';
import { checkStreamHorizon } from '../gc/guard.ts';
import { sourceClockMs } from '../gc/state.ts';
import { DirectionFailedError, DirectionStalledError, UnknownColumnError, UnknownTableError } from '../errors.ts';
import { COLUMNS_SQL } from '../sql/introspect.ts';
import { blockersSql, innodbTrxSql, KILL_CONNECTION_SQL, lockHoldersSql, processlistSql } from '../sql/watchdog.ts';
import { describeStall, type ProgressSample, redactLiterals, StallClock, type StallReport, stallIsRepeated } from './watchdog.ts';
import { type Classified, classifyFailure, failureMessage } from './classify.ts';
import type { Logger, SinkOptionsInput } from '../writer/options.ts';
import { createSink, type Sink } from '../writer/sink.ts';
import { type SinkStats, sumStats } from '../writer/stats.ts';
import { LagRecorder } from './lag.ts';
import type { CopyReport } from '../sync/initial-copy.ts';

/** A run that streamed this long counts as healthy: the next failure starts the backoff over. */
const STABLE_RUN_MS = 10_000;

export interface NodeRef {
  name: string;
  url: string;
  nodeId: number;
}

export type DirectionState = 'starting' | 'copying' | 'streaming' | 'restarting' | 'stopped' | 'failed';

export interface DirectionOptions {
  source: NodeRef;
  target: NodeRef;
  tables: readonly TableSelector[];
  metaSchema: string;
  versionColumn: string;
  sink?: Partial<SinkOptionsInput>;
  capture?: { heartbeatMs?: number; readTimeoutMs?: number; connectTimeoutMs?: number; maxQueuedTransactions?: number };
  /** Copies existing rows on the first start of this direction (see initial-copy.ts). */
  initialCopy?: (ctx: { sink: Sink; sourceId: string; direction: Direction }) => Promise<void>;
  /** First restart delay after a transient failure (doubles per consecutive failure, with jitter); default 500. */
  restartDelayMs?: number;
  /** Cap of the restart delay; default 30 000. */
  maxRestartDelayMs?: number;
  /** Store idle positions as the checkpoint at most this often. */
  keepaliveCheckpointMs?: number;
  /**
   * The progress watchdog: a streaming direction with work pending and no progress (no binlog read,
   * no apply statement completed, no checkpoint) for this long stops with a diagnosis (watchdog.ts);
   * 0 turns it off. Default DEFAULT_STALL_TIMEOUT_MS.
   */
  stallTimeoutMs?: number;
  logger: Logger;
}

/** The watchdog's default: longer than the sink's lock wait and query timeouts' usual retries take to show progress. */
export const DEFAULT_STALL_TIMEOUT_MS = 60_000;
/** How long one look at the source's head or the target's sessions may take. */
const PROBE_TIMEOUT_MS = 5_000;

/** `p`, or undefined when it takes longer than `ms` (or fails); `onTimeout` cleans up. */
async function within<T>(p: Promise<T>, ms: number, onTimeout?: () => void): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => {
      onTimeout?.();
      resolve(undefined);
    }, ms);
  });
  try {
    return await Promise.race([p.catch(() => undefined), late]);
  } finally {
    clearTimeout(timer);
  }
}

export interface DirectionStatus {
  name: string;
  sourceId: string;
  state: DirectionState;
  restarts: number;
  lastError?: string;
  /** How the last error was classified: transient (retried) or permanent (the direction failed). */
  lastErrorKind?: Classified['kind'];
  lastErrorCause?: string;
  /** While restarting: milliseconds until the next attempt. */
  retryInMs?: number;
  checkpoint?: string;
  lagBytes?: number;
  lagMs?: number;
  /** Position after the last complete transaction read from the source's binlog (while streaming). */
  readPosition?: string;
  /** The source's binlog head when status was taken (undefined when it could not be read). */
  sourceHead?: string;
  /** How long work has been pending without progress (the watchdog's clock; 0 when nothing is stuck). */
  stuckForMs?: number;
  /** Stalls the watchdog caught (each restarted the direction, or failed it when repeated). */
  stalls: number;
  /** The sink now: transactions accepted and not committed, statements in flight. */
  applying?: { pendingTransactions: number; statements: number; inFlight: Array<{ worker: number; what: string; forMs: number; connectionId: number | undefined }> };
  sink: SinkStats;
  captured: { transactions: number; rows: number; dropped: number; reconnects: number; maxQueued: number };
}

export class Direction {
  readonly name: string;
  readonly sourceId: string;
  readonly lag = new LagRecorder();
  state: DirectionState = 'starting';
  restarts = 0;
  lastError: string | undefined;
  lastFailure: Classified | undefined;
  private retryAt: number | undefined;
  private streamingSince: number | undefined;
  /** Owner epochs this direction claimed on the target, shared by all its sinks: one claim per start, not per retry. */
  private readonly claims = new Map<string, bigint>();
  private stopped = false;
  private wake: (() => void) | null = null;
  private sink: Sink | null = null;
  private capture: BinlogCapture | null = null;
  private lagConn: Connection | null = null;
  private lastKeepalive = 0;
  private readonly totals: SinkStats[] = [];
  private readonly capturedTotals = { transactions: 0, rows: 0, dropped: 0, reconnects: 0, maxQueued: 0 };
  private checkpointPosition: string | undefined;
  private running: Promise<void> | null = null;
  private stallClock: StallClock | undefined;
  /** Stalls caught, and the target commits counted at the last one (a second stall with none since is permanent). */
  stalls = 0;
  private commitsAtLastStall: number | undefined;
  /** Target transactions committed for this direction (every run). */
  private commits = 0;
  private markStreaming: () => void = () => undefined;
  /** Resolves the first time this direction streams (after its first start and initial copy). */
  readonly streaming: Promise<void> = new Promise((resolve) => {
    this.markStreaming = resolve;
  });
  /** The report of the last initial copy this direction ran (for status and tests). */
  lastCopy: CopyReport | undefined;

  /** Set by setTables: the current run ends gracefully and the next one reads the new list. */
  private reloading = false;

  constructor(private options: DirectionOptions) {
    this.name = `${options.source.name}→${options.target.name}`;
    this.sourceId = `node-${options.source.nodeId}`;
  }

  get sourceUrl(): string {
    return this.options.source.url;
  }

  get tables(): readonly TableSelector[] {
    return this.options.tables;
  }

  start(): Promise<void> {
    this.running ??= this.loop();
    return this.running;
  }

  /**
   * Replicates another list of tables (install ran for more tables, or uninstall for some, while
   * replicating): the current run commits what it read and ends, and the next one starts from the
   * checkpoint with the new list, copying a table it has not copied before (initial copy) first.
   */
  setTables(tables: readonly TableSelector[]): void {
    this.options = { ...this.options, tables };
    this.reloading = true;
    this.wake?.();
  }

  /** Graceful stop: stop reading, commit what was handed to the sink. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running?.catch(() => undefined);
    this.lagConn?.destroy();
    this.lagConn = null;
  }

  private async loop(): Promise<void> {
    const log = this.options.logger;
    let failures = 0;
    while (!this.stopped) {
      this.streamingSince = undefined;
      try {
        await this.runOnce();
      } catch (err) {
        if (this.stopped) break;
        let failure = classifyFailure(err);
        this.lastError = failureMessage(err);
        // Waiting for DDL to reach the target only helps while the source still has what is missing.
        const gone = failure.kind === 'transient' ? await this.goneFromSource(err) : undefined;
        if (gone) {
          failure = { kind: 'permanent', cause: 'table or column gone from the source too' };
          this.lastError = `${this.lastError}; ${gone}`;
        }
        this.lastFailure = failure;
        if (failure.kind === 'permanent') {
          // Restarting cannot fix it: stop loudly instead of looping.
          this.state = 'failed';
          const failed = new DirectionFailedError(this.name, failure.cause, this.lastError, err);
          log.error(failed.message);
          throw failed;
        }
        // A run that streamed for a while resets the backoff; quick repeated failures grow it.
        if (this.streamingSince !== undefined && Date.now() - this.streamingSince > STABLE_RUN_MS) failures = 0;
        failures++;
        this.restarts++;
        const delay = backoffDelay(failures, { baseMs: this.options.restartDelayMs ?? 500, maxMs: this.options.maxRestartDelayMs ?? 30_000 });
        this.state = 'restarting';
        this.retryAt = Date.now() + delay;
        log.warn(`${this.name}: ${failure.cause}; restarting from the checkpoint in ${delay} ms (restart ${this.restarts}) after: ${this.lastError}`);
        await this.pause(delay);
        this.retryAt = undefined;
      }
    }
    this.state = 'stopped';
  }

  /**
   * For a target lacking a table or column the stream still writes: why waiting cannot help when
   * the source lacks it now too (renamed or dropped on every node, so no DDL is on its way), or
   * undefined (it is there: the target is behind, or the source cannot be asked now).
   */
  private async goneFromSource(err: unknown): Promise<string | undefined> {
    let missing: UnknownTableError | UnknownColumnError | undefined;
    for (let e: unknown = err, depth = 0; e && depth < 6 && !missing; e = (e as { cause?: unknown }).cause, depth++) {
      if (e instanceof UnknownTableError || e instanceof UnknownColumnError) missing = e;
    }
    if (!missing) return undefined;
    const has = async (url: string): Promise<boolean> => {
      const conn = await connect(url, { connectTimeoutMs: 5000 });
      try {
        const [cols] = await conn.query<RowDataPacket[]>(COLUMNS_SQL, [missing.schema, missing.table]);
        return missing instanceof UnknownColumnError ? cols.some((c) => c.name === missing.column) : cols.length > 0;
      } finally {
        conn.destroy();
      }
    };
    const what = missing instanceof UnknownColumnError ? `column ${missing.column} of ${missing.schema}.${missing.table}` : `table ${missing.schema}.${missing.table}`;
    try {
      if (await has(this.options.source.url)) return undefined;
      // The target has it: the source never had it (installed on one node only), nothing was renamed.
      if (await has(this.options.target.url)) {
        return `it is the source that has no ${what}, while the target has it (installed on one node only?): create and install it on every node, or leave it out with --tables`;
      }
      return (
        `the source has no ${what} now either (renamed or dropped on every node), so no DDL is on its way: the binlog still holds changes to it that no node can take. ` +
        'Resume from a position after its RENAME/DROP/ALTER (set the checkpoint), or restore it on the target'
      );
    } catch {
      return undefined;
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  private async runOnce(): Promise<void> {
    this.reloading = false;
    const { source, target } = this.options;
    this.state = 'starting';
    const sinkOptions = {
      target: target.url,
      metaSchema: this.options.metaSchema,
      versionColumn: this.options.versionColumn,
      logger: this.options.logger,
      owner: `replicator:${process.pid}:${this.name}`,
      ...this.options.sink,
      claims: this.claims,
    };
    const sink = createSink({
      ...sinkOptions,
      onCommit: (info) => {
        this.commits++;
        for (const t of info.transactions) {
          if (t.sourceId !== this.sourceId) continue;
          if (t.changes > 0) this.lag.record(t.maxVersion, info.committedAtMs);
          this.checkpointPosition = t.position;
        }
      },
    });
    this.sink = sink;
    let capture: BinlogCapture | null = null;
    try {
      const epoch = await sink.claim(this.sourceId);
      const stored = await sink.checkpoint(this.sourceId);
      let checkpoint = stored?.position;
      if (stored) {
        // Resuming: refuse when the target collected tombstones past what this stream delivered (src/gc/guard.ts).
        const conn = await connect(target.url);
        try {
          await checkStreamHorizon({
            target: conn,
            metaSchema: this.options.metaSchema,
            sourceTimeUs: stored.sourceTimeUs,
            source: `node ${source.name} (node-${source.nodeId})`,
            targetName: `node ${target.name}`,
            sourceId: this.sourceId,
          });
        } finally {
          await conn.end();
        }
      }
      if (checkpoint === undefined) {
        // First start: record where the source is now before anything else, so changes made
        // while this replicator is later stopped are never lost; existing rows are merged next.
        const conn = await connect(source.url);
        let sourceTimeMs: number;
        try {
          // The source's clock before its position: every transaction after the position commits later (GC horizon).
          sourceTimeMs = await sourceClockMs(conn);
          checkpoint = await currentPosition(conn);
        } finally {
          await conn.end();
        }
        await sink.write({ sourceId: this.sourceId, position: checkpoint, changes: [], sourceTimeMs });
        await sink.flush();
        this.options.logger.info(`${this.name}: first start, recorded source position ${checkpoint}`);
      }
      // Checkpoints identify their server: no resume on another one or after a binlog reset (source-identity.ts).
      await this.checkSourceIdentity(epoch, stored ? checkpoint : undefined);
      this.checkpointPosition = checkpoint;
      if (this.options.initialCopy) {
        this.state = 'copying';
        // Its own sink, so copy counts (mostly rows already equal) stay out of the stream's counters.
        const copySink = createSink(sinkOptions);
        try {
          await this.options.initialCopy({ sink: copySink, sourceId: this.sourceId, direction: this });
          await copySink.close();
        } finally {
          await copySink.abort();
        }
      }
      if (this.stopped) return;
      capture = await startCapture({
        source: source.url,
        sourceId: this.sourceId,
        tables: this.options.tables,
        from: checkpoint,
        metaSchema: this.options.metaSchema,
        versionColumn: this.options.versionColumn,
        logger: this.options.logger,
        ...this.options.capture,
        handler: {
          onTransaction: (txn) => sink.write(txn),
          onSchemaChange: (change) => {
            sink.refreshMetadata(change.schema, change.table);
          },
          onKeepalive: async (position, sourceTimeMs) => {
            const now = Date.now();
            if (now - this.lastKeepalive < (this.options.keepaliveCheckpointMs ?? 10_000)) return;
            this.lastKeepalive = now;
            await sink.write({ sourceId: this.sourceId, position, changes: [], ...(sourceTimeMs === undefined ? {} : { sourceTimeMs }) });
          },
        },
      });
      this.capture = capture;
      this.state = 'streaming';
      this.streamingSince = Date.now();
      this.markStreaming();
      const stopRequested = new Promise<void>((resolve) => {
        this.wake = resolve;
        if (this.stopped || this.reloading) resolve();
      });
      const watchdog = this.watch(sink, capture);
      try {
        await Promise.race([capture.done, sink.failed, stopRequested, watchdog.stalled]);
      } finally {
        watchdog.stop();
      }
      if (this.stopped || this.reloading) {
        await capture.stop();
        await sink.close();
      }
    } finally {
      this.accumulate(sink, capture);
      // Whatever was not committed is dropped here and replayed from the checkpoint (after a graceful
      // close, abort does nothing more). The sink first: a capture whose hand-over waits on a stuck
      // sink (back-pressure) stops only once the sink lets go.
      const aborted = sink.abort();
      await capture?.stop().catch(() => undefined);
      await aborted;
      this.sink = null;
      this.capture = null;
    }
  }

  /**
   * The progress watchdog of one run: samples capture, sink and the source's head every few seconds;
   * `stalled` rejects with the diagnosis when work was pending without progress for stallTimeoutMs.
   */
  private watch(sink: Sink, capture: BinlogCapture): { stalled: Promise<never>; stop(): void } {
    const timeoutMs = this.options.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    let trip: (err: unknown) => void = () => undefined;
    const stalled = new Promise<never>((_, reject) => {
      trip = reject;
    });
    stalled.catch(() => undefined);
    if (timeoutMs <= 0) return { stalled, stop: () => undefined };
    const clock = new StallClock(timeoutMs);
    this.stallClock = clock;
    let busy = false;
    let done = false;
    const tick = async () => {
      if (busy || done) return;
      busy = true;
      try {
        const sample = await this.sample(sink, capture);
        const verdict = clock.observe(sample);
        if (!verdict.stalled || done) return;
        done = true;
        const report = await this.stallReport(sink, capture, verdict.stuckForMs, verdict.pending, timeoutMs);
        // The stuck sessions go, with their locks (the checkpoint rows among them): else the restart waits on them.
        const ids = [...new Set([...(report.sink?.inFlight ?? []), ...(report.sink?.looping ?? [])].map((f) => f.connectionId).filter((id): id is number => id !== undefined))];
        if (ids.length > 0) report.target.push((await within(this.endSessions(ids), PROBE_TIMEOUT_MS)) ?? `ending connections ${ids.join(', ')} timed out`);
        const repeated = stallIsRepeated(this.commitsAtLastStall, this.commits);
        this.stalls++;
        this.commitsAtLastStall = this.commits;
        const err = new DirectionStalledError(this.name, describeStall(report), repeated, report);
        this.options.logger.error(err.message);
        trip(err);
      } catch (err) {
        this.options.logger.warn(`${this.name}: the progress watchdog could not take a sample: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(() => void tick(), Math.max(100, Math.min(5000, Math.floor(timeoutMs / 4))));
    timer.unref();
    return {
      stalled,
      stop: () => {
        done = true;
        clearInterval(timer);
        if (this.stallClock === clock) this.stallClock = undefined;
      },
    };
  }

  private async sample(sink: Sink, capture: BinlogCapture): Promise<ProgressSample> {
    const c = capture.stats();
    const p = sink.progress();
    const captureQueued = c.queued + (c.handlerBusyMs === undefined ? 0 : 1);
    // The source's head only matters when nothing read waits to be applied (else that work is pending already).
    let sourceBehindBytes: number | undefined;
    if (captureQueued === 0 && p.pendingTransactions === 0 && c.readPosition !== undefined) {
      sourceBehindBytes = (await this.sourceLag(c.readPosition))?.bytesBehind;
    }
    return {
      atMs: Date.now(),
      streaming: this.state === 'streaming',
      readPosition: c.readPosition,
      checkpoint: this.checkpointPosition,
      statements: p.statements,
      eventsRead: c.events,
      sourceBehindBytes,
      captureQueued,
      sinkPending: p.pendingTransactions,
    };
  }

  /** How far `position` is behind the source's head, on the status connection; undefined when the source does not answer in time. */
  private async sourceLag(position: string): Promise<{ head: string; bytesBehind: number } | undefined> {
    try {
      this.lagConn ??= await connect(this.options.source.url, { connectTimeoutMs: 2000 });
    } catch {
      return undefined;
    }
    const conn = this.lagConn;
    const lag = await within(binlogLag(conn, position), PROBE_TIMEOUT_MS, () => conn.destroy());
    if (lag === undefined && this.lagConn === conn) {
      conn.destroy();
      this.lagConn = null;
    }
    return lag;
  }

  private async stallReport(sink: Sink, capture: BinlogCapture, stuckForMs: number, pending: string[], timeoutMs: number): Promise<StallReport> {
    const c = capture.stats();
    const p = sink.progress();
    const lag = c.readPosition === undefined ? undefined : await this.sourceLag(c.readPosition);
    const ids = p.inFlight.map((f) => f.connectionId).filter((id): id is number => id !== undefined);
    return {
      direction: this.name,
      state: this.state,
      stuckForMs,
      timeoutMs,
      pending,
      readPosition: c.readPosition,
      deliveredPosition: c.deliveredPosition,
      checkpoint: this.checkpointPosition,
      sourceHead: lag?.head,
      statements: p.statements,
      capture: { queued: c.queued, paused: c.paused, handlerBusyMs: c.handlerBusyMs, msSinceLastEvent: c.msSinceLastEvent },
      sink: {
        pendingTransactions: p.pendingTransactions,
        pendingRows: p.pendingRows,
        applying: p.applying,
        msSinceLastStatement: p.lastStatementAtMs === undefined ? undefined : Date.now() - p.lastStatementAtMs,
        inFlight: p.inFlight,
        looping: p.looping,
      },
      target: ids.length === 0 ? [] : ((await within(this.targetSessions(ids), PROBE_TIMEOUT_MS)) ?? ['its sessions could not be read']),
    };
  }

  /** KILLs the target's apply sessions `ids`; says what it did. */
  private async endSessions(ids: number[]): Promise<string> {
    const conn = await connect(this.options.target.url, { connectTimeoutMs: 2000 });
    const failed: string[] = [];
    try {
      for (const id of ids) {
        await conn.query({ sql: KILL_CONNECTION_SQL, timeout: PROBE_TIMEOUT_MS }, [id]).catch((e: unknown) => failed.push(`${id}: ${e instanceof Error ? e.message : String(e)}`));
      }
    } finally {
      conn.destroy();
    }
    return failed.length === 0 ? `killed connection${ids.length > 1 ? 's' : ''} ${ids.join(', ')} (their locks go with them)` : `could not kill ${failed.join('; ')}`;
  }

  /** The target's view of the apply sessions `ids`: processlist, InnoDB transaction state, the sessions blocking them. */
  private async targetSessions(ids: number[]): Promise<string[]> {
    const conn = await connect(this.options.target.url, { connectTimeoutMs: 2000 });
    const out: string[] = [];
    try {
      const q = async (sql: string, values: unknown[]) => (await conn.query<RowDataPacket[]>({ sql, timeout: PROBE_TIMEOUT_MS }, values))[0];
      for (const r of await q(processlistSql(ids.length), ids)) {
        out.push(`connection ${r.ID}: ${r.COMMAND} for ${r.TIME} s${r.STATE ? `, state "${r.STATE}"` : ''}${r.INFO ? `, running "${redactLiterals(String(r.INFO))}"` : ''}`);
      }
      const trx = await q(innodbTrxSql(ids.length), ids).catch(() => []);
      for (const r of trx) out.push(`connection ${r.id}: InnoDB transaction ${r.state}${r.waited === null ? '' : ` for ${r.waited} s`}, ${r.locked} rows locked`);
      if (trx.some((r) => String(r.state) === 'LOCK WAIT')) {
        const blockers = await q(blockersSql('mariadb', ids.length), ids).catch(() => q(blockersSql('mysql', ids.length), ids).catch(() => undefined));
        for (const b of blockers ?? []) {
          out.push(`connection ${b.waiting} waits for a lock held by connection ${b.blocking} (transaction ${b.state}${b.query ? `, running "${redactLiterals(String(b.query))}"` : ', idle in its transaction'})`);
        }
        if (!blockers?.length) {
          // No lock-wait table answered (MySQL without performance_schema): the transactions holding row locks are the suspects.
          const holders = await q(lockHoldersSql(ids.length), ids).catch(() => undefined);
          if (!holders?.length) out.push('who holds the lock could not be read');
          for (const h of holders ?? []) {
            out.push(
              `connection ${h.id} holds ${h.locked} row locks in a transaction open ${h.age} s (${h.state}${h.query ? `, running "${redactLiterals(String(h.query))}"` : ', idle in its transaction'})`,
            );
          }
        }
      }
    } finally {
      conn.destroy();
    }
    return out;
  }

  /** Refuses to resume `checkpoint` when the source is another server or its binlog was reset; records who the source is. */
  private async checkSourceIdentity(epoch: bigint, checkpoint: string | undefined): Promise<void> {
    const { source, target, metaSchema } = this.options;
    const src = await connect(source.url);
    let tgt: Connection | undefined;
    try {
      tgt = await connect(target.url);
      const identity =
        checkpoint === undefined
          ? await readSourceIdentity(src)
          : await checkSourceIdentity({
              source: src,
              target: tgt,
              metaSchema,
              sourceId: this.sourceId,
              checkpoint,
              direction: this.name,
              sourceName: `node ${source.name} (${redactUrl(source.url)})`,
              targetName: `node ${target.name}`,
            });
      await recordSourceIdentity(tgt, metaSchema, this.sourceId, epoch, identity);
    } finally {
      await src.end().catch(() => src.destroy());
      await tgt?.end().catch(() => tgt?.destroy());
    }
  }

  private accumulate(sink: Sink, capture: BinlogCapture | null): void {
    this.totals.push(sink.stats());
    if (capture) {
      const c = capture.stats();
      this.capturedTotals.transactions += c.transactions;
      this.capturedTotals.rows += c.rows;
      this.capturedTotals.dropped += c.dropped;
      this.capturedTotals.reconnects += c.reconnects;
      this.capturedTotals.maxQueued = Math.max(this.capturedTotals.maxQueued, c.maxQueued);
    }
  }

  /** Counters over every run of this direction, including the current one. */
  sinkStats(): SinkStats {
    return sumStats([...this.totals, ...(this.sink ? [this.sink.stats()] : [])]);
  }

  async status(): Promise<DirectionStatus> {
    const c = this.capture?.stats();
    const p = this.sink?.progress();
    let lagBytes: number | undefined;
    let sourceHead: string | undefined;
    if (this.checkpointPosition) {
      const lag = await this.sourceLag(this.checkpointPosition);
      lagBytes = lag?.bytesBehind;
      sourceHead = lag?.head;
    }
    return {
      name: this.name,
      sourceId: this.sourceId,
      state: this.state,
      restarts: this.restarts,
      lastError: this.lastError,
      lastErrorKind: this.lastFailure?.kind,
      lastErrorCause: this.lastFailure?.cause,
      retryInMs: this.retryAt === undefined ? undefined : Math.max(0, this.retryAt - Date.now()),
      checkpoint: this.checkpointPosition,
      lagBytes,
      lagMs: this.lag.last,
      ...(c?.readPosition === undefined ? {} : { readPosition: c.readPosition }),
      ...(sourceHead === undefined ? {} : { sourceHead }),
      stuckForMs: this.stallClock?.stuckForMs(Date.now()) ?? 0,
      stalls: this.stalls,
      ...(p ? { applying: { pendingTransactions: p.pendingTransactions, statements: p.statements, inFlight: p.inFlight } } : {}),
      sink: this.sinkStats(),
      captured: {
        transactions: this.capturedTotals.transactions + (c?.transactions ?? 0),
        rows: this.capturedTotals.rows + (c?.rows ?? 0),
        dropped: this.capturedTotals.dropped + (c?.dropped ?? 0),
        reconnects: this.capturedTotals.reconnects + (c?.reconnects ?? 0),
        maxQueued: Math.max(this.capturedTotals.maxQueued, c?.maxQueued ?? 0),
      },
    };
  }
}

