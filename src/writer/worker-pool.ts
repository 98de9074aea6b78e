// Parallel apply: the sink's apply workers, each with its own target connection and its own
// checkpoint row per source. A window (the sink's batch) is split by unique-key hashes
// (partition-keys.ts), each worker coalesces and applies its share with its checkpoint advance in
// one target transaction, retrying deadlocks and lost connections on its own; the next window starts
// only when every worker committed (a barrier). Why this converges: see partition.ts.
//
// Checkpoints: a worker advances its row to the window's last position of each source it applied
// changes of. A worker without changes of a source skips that row until it is idleCheckpointMs old
// (so a light load does not cost a commit per worker per window), which only moves the stream's
// resume point — the lowest worker row (worker-checkpoints.ts) — back: replay is harmless; and a
// graceful close brings every row to the last position (settle), so a clean restart replays nothing
// (which matters where replay is not harmless: the REPLACE failpoint).
// One worker is the sink as before: one transaction per window advancing every source.
import type { Connection } from 'mysql2/promise';
import { backoffDelay, isConnectionLost, isRetryable, serverMessage, sleep } from '../db/retry.ts';
import { ApplyError, OwnershipLostError, SinkClosedError } from '../errors.ts';
import { recordedNodeId } from '../install/install.ts';
import type { Logger } from '../log/logger.ts';
import type { Dialect } from '../sql/dialect.ts';
import { type ApplyContext, applyBatch, type BatchOutcome, type CheckpointAdvance, runForeignKeyFollowUps, StatementError } from './apply.ts';
import { coalesce } from './coalesce.ts';
import { type ForeignKeyFollowUp, ForeignKeyFollowUpNeeded } from './foreign-keys.ts';
import { splitOps } from './partition-keys.ts';
import type { KeyOp } from './prepare.ts';

/**
 * The most statements one target transaction of `rows` changes can legitimately take: a few per
 * table and chunk, a handful more per row on the slow paths (UNIQUE clashes replayed one row at a
 * time, foreign keys, the conflict log). A transaction past it is looping, not working.
 */
export function statementBudget(rows: number): number {
  return 256 + 64 * rows;
}

/**
 * What the apply workers are doing, for the progress watchdog: statements completed (within their
 * transaction's budget: a loop of statements is no progress), the ones running now, and each
 * worker's current transaction attempt.
 */
export class ApplyProgress {
  statements = 0;
  lastStatementAtMs: number | undefined;
  /** Per worker, the statement it runs now. */
  readonly inFlight = new Map<number, { what: string; since: number; connectionId: number | undefined }>();
  /** Per worker, its transaction attempt now: statements completed in it, its rows, its last statement. */
  readonly attempts = new Map<number, { statements: number; rows: number; since: number; last: string | undefined; connectionId: number | undefined }>();
}

/**
 * Starts one transaction attempt of `worker` on `progress`; returns the `track` hook its statements
 * report to. Statements past the attempt's budget are counted in the attempt, not as progress.
 */
export function trackAttempt(progress: ApplyProgress, worker: number, connectionId: number | undefined, rows: number): (what: string) => (ok: boolean) => void {
  const attempt = { statements: 0, rows, since: Date.now(), last: undefined as string | undefined, connectionId };
  const budget = statementBudget(rows);
  progress.attempts.set(worker, attempt);
  return (what) => {
    progress.inFlight.set(worker, { what, since: Date.now(), connectionId });
    attempt.last = what;
    return (ok) => {
      progress.inFlight.delete(worker);
      if (!ok) return;
      if (++attempt.statements > budget) return;
      progress.statements++;
      progress.lastStatementAtMs = Date.now();
    };
  };
}

/** A source's progress in a window: where its last transaction ends. */
export type WindowAdvance = Omit<CheckpointAdvance, 'worker'>;

export interface WorkerPoolOptions {
  workers: number;
  /** Opens an apply session (versions kept, autocommit off). */
  connect(): Promise<Connection>;
  metaSchema: string;
  queryTimeoutMs: number;
  retry: { maxAttempts: number; baseMs: number; maxMs: number };
  logger: Logger;
  signal: AbortSignal;
  /** Told of each retried attempt (for the sink's counters). */
  onRetry(): void;
  /** A worker without changes of a source advances its row at least this often; default 1000. */
  idleCheckpointMs?: number;
  /** Told of every statement's start and end (the progress watchdog). */
  progress?: ApplyProgress;
}

export interface WindowContext {
  dialect: Dialect;
  bypass: boolean;
  maxPacketBytes: number;
  /** Called around each worker's commit of changes (the commit-point failpoints). */
  hooks?: { beforeCommit?: (c: WorkerCommit) => void; commitSent?: (c: WorkerCommit) => void; afterCommit?: (c: WorkerCommit) => void };
}

/** Which worker's transaction a hook is called for: its checkpoint advances and its rows. */
export interface WorkerCommit {
  worker: number;
  advances: readonly CheckpointAdvance[];
  rows: number;
}

/**
 * Values in server messages (duplicate entries, bad values) are replaced before they reach logs; the
 * names of what refused them stay: `for column 'price'`, `for key 't.email'`, `constraint 'chk'`,
 * `type 'json'` (a name is no row data, and without it the refusal names nothing).
 */
export function redact(message: string): string {
  return message.replace(/(\b(?:column|key|constraint|type|function|table|trigger) )?'(?:[^'\\]|\\.|'')*'/gi, (whole, named: string | undefined) => (named ? whole : "'?'"));
}

/** Rounds of foreign-key follow-ups one batch may take before its parent deletes get the server's action instead. */
const MAX_FOLLOW_UP_ROUNDS = 4;

class ApplyWorker {
  private conn: Connection | null = null;
  /** The target's node id for foreign-key follow-ups; null: not installed, so none are written (read once). */
  private nodeId: number | null | undefined;
  /** Per source: when this worker last committed its checkpoint row, and to which apply_seq. */
  readonly advanced = new Map<string, { at: number; seq: bigint }>();

  constructor(
    readonly index: number,
    private readonly o: WorkerPoolOptions,
  ) {}

  /** Applies a share with its advances in one transaction, retrying transient failures. */
  async apply(ctx: WindowContext, ops: KeyOp[], advances: CheckpointAdvance[]): Promise<BatchOutcome> {
    const plans = coalesce(ops, ctx.bypass ? 'arrival' : 'version');
    const { retry } = this.o;
    const commit: WorkerCommit = { worker: this.index, advances, rows: ops.length };
    const { beforeCommit, commitSent, afterCommit } = ctx.hooks ?? {};
    const progress = this.o.progress;
    // Foreign-key follow-ups (apply.ts runForeignKeyFollowUps) to run before the next attempt, and how many rounds ran.
    let followUps: ForeignKeyFollowUp[] | undefined;
    let followUpRounds = 0;
    for (let attempt = 1; ; attempt++) {
      // After abort() nothing commits: no new attempt, no reconnect.
      if (this.o.signal.aborted) throw new SinkClosedError();
      try {
        if (!this.conn) {
          const conn = await this.o.connect();
          conn.on('error', () => {
            if (this.conn === conn) this.conn = null;
          });
          this.conn = conn;
        }
        const applyCtx: ApplyContext = {
          conn: this.conn,
          dialect: ctx.dialect,
          metaSchema: this.o.metaSchema,
          bypass: ctx.bypass,
          queryTimeoutMs: this.o.queryTimeoutMs,
          implicitBegin: true,
          maxPacketBytes: ctx.maxPacketBytes,
          // Children keep appearing (an application adding them as fast): the server's action, as before, after a few rounds.
          foreignKeyFollowUps: followUpRounds < MAX_FOLLOW_UP_ROUNDS && this.nodeId !== null,
          ...(beforeCommit ? { beforeCommit: () => beforeCommit(commit) } : {}),
          ...(commitSent ? { commitSent: () => commitSent(commit) } : {}),
          ...(progress ? { track: trackAttempt(progress, this.index, this.conn.threadId ?? undefined, ops.length) } : {}),
        };
        if (followUps && this.nodeId === undefined) {
          this.nodeId = (await recordedNodeId(applyCtx.conn, applyCtx.metaSchema)) ?? null;
          if (this.nodeId === null) {
            this.o.logger.warn('foreign-key follow-ups off: the target has no node id (not installed); child rows get the server’s ON DELETE action and tombstones at their own versions', { worker: this.index });
            followUps = undefined;
            attempt--;
            continue;
          }
        }
        if (followUps) {
          const changed = await runForeignKeyFollowUps(applyCtx, this.nodeId!, followUps, [...new Set(advances.map((a) => a.sourceId))].join(','));
          this.o.logger.info('foreign-key follow-up: child rows of a replicated parent delete changed as this node’s own writes', {
            worker: this.index,
            found: followUps.length,
            changed,
            tables: [...new Set(followUps.map((f) => `${f.child.schema}.${f.child.table}`))],
          });
          followUps = undefined;
        }
        const outcome = await applyBatch(applyCtx, plans, advances);
        progress?.attempts.delete(this.index);
        afterCommit?.(commit);
        const now = Date.now();
        for (const a of advances) this.advanced.set(a.sourceId, { at: now, seq: a.seq });
        return outcome;
      } catch (err) {
        progress?.attempts.delete(this.index);
        if (err instanceof ForeignKeyFollowUpNeeded) {
          // Not a failure: the follow-ups run, then the batch again (the same attempt).
          followUps = err.followUps;
          followUpRounds++;
          if (followUpRounds === MAX_FOLLOW_UP_ROUNDS) {
            this.o.logger.warn('foreign-key follow-up: children keep appearing; this batch leaves the rest to the server’s ON DELETE action (no version of their own)', {
              worker: this.index,
              rounds: followUpRounds,
            });
          }
          attempt--;
          continue;
        }
        if (err instanceof OwnershipLostError) throw err;
        const cause = err instanceof StatementError ? err.cause : err;
        if (isConnectionLost(cause) && this.conn) {
          // The commit outcome is unknown: drop the connection and replay; LWW makes it harmless.
          this.conn.destroy();
          this.conn = null;
        }
        if (isRetryable(cause) && attempt < retry.maxAttempts) {
          this.o.onRetry();
          const delay = backoffDelay(attempt, retry);
          this.o.logger.warn('sink batch failed, retrying', { worker: this.index, attempt, delayMs: delay, error: serverMessage(cause).message });
          await sleep(delay, this.o.signal);
          continue;
        }
        const table = err instanceof StatementError ? err.table : undefined;
        const { code, message } = serverMessage(cause, ctx.dialect);
        throw new ApplyError(
          `applying a batch failed${table ? ` on ${table}` : ''}${isRetryable(cause) ? ` after ${attempt} attempts` : ''}: ${code ? `${code}: ` : ''}${redact(message)}`,
          table,
          code,
          { cause },
        );
      }
    }
  }

  destroy(): void {
    this.conn?.destroy();
    this.conn = null;
  }
}

/** Waits for every run; rejects with the first failure once all settled. */
async function settleAll<T>(runs: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(runs);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

export class WorkerPool {
  private readonly workers: ApplyWorker[];
  /** The last committed window's advance per source, and that window's context (for settle). */
  private readonly latest = new Map<string, WindowAdvance>();
  private lastContext: WindowContext | undefined;

  constructor(private readonly o: WorkerPoolOptions) {
    this.workers = Array.from({ length: o.workers }, (_, i) => new ApplyWorker(i, o));
  }

  get size(): number {
    return this.workers.length;
  }

  /**
   * Applies a window's operations (source order) and advances checkpoints; resolves with each
   * committed transaction's outcome once every worker committed, or rejects with the first failure
   * after every worker settled (what committed stays committed: it is replayed harmlessly).
   */
  async apply(ctx: WindowContext, ops: KeyOp[], advances: readonly WindowAdvance[]): Promise<BatchOutcome[]> {
    if (this.workers.length === 1) {
      return [await this.workers[0]!.apply(ctx, ops, advances.map((a) => ({ ...a, worker: 0 })))];
    }
    const shares = splitOps(ops, this.workers.length);
    const idleMs = this.o.idleCheckpointMs ?? 1000;
    const now = Date.now();
    const runs: Promise<BatchOutcome>[] = [];
    this.workers.forEach((w, i) => {
      const share = shares[i]!;
      const sources = new Set(share.map((op) => op.sourceId));
      const own = advances
        .filter((a) => sources.has(a.sourceId) || now - (w.advanced.get(a.sourceId)?.at ?? Number.NEGATIVE_INFINITY) >= idleMs)
        .map((a) => ({ ...a, worker: i }));
      if (share.length === 0 && own.length === 0) return;
      // A checkpoint-only transaction is not a commit point of the window's changes.
      runs.push(w.apply(share.length > 0 ? ctx : { ...ctx, hooks: undefined }, share, own));
    });
    const outcomes = await settleAll(runs);
    this.lastContext = ctx;
    for (const a of advances) this.latest.set(a.sourceId, a);
    return outcomes;
  }

  /** Advances every worker row left behind (idle workers) to the last committed window's position. */
  async settle(): Promise<void> {
    const ctx = this.lastContext;
    if (!ctx || this.workers.length === 1) return;
    const runs: Promise<BatchOutcome>[] = [];
    this.workers.forEach((w, i) => {
      const behind = [...this.latest.values()].filter((a) => w.advanced.get(a.sourceId)?.seq !== a.seq).map((a) => ({ ...a, worker: i }));
      if (behind.length > 0) runs.push(w.apply(ctx, [], behind));
    });
    await settleAll(runs);
  }

  destroy(): void {
    for (const w of this.workers) w.destroy();
  }
}
