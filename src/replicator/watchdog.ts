// The progress watchdog of a direction: the pure decisions (is work pending, did anything move, how
// long has it been stuck, is a stall worth a restart) and the text of the diagnosis. direction.ts
// samples the live state into a ProgressSample and acts on what StallClock says.
//
// Progress is anything that moves: the position read from the source's binlog, the checkpoint the
// target committed, or an apply statement completing (a large transaction being applied commits
// rarely but completes statements all the time) — within its transaction's statement budget: a
// transaction that runs statement after statement far past what its rows need is looping, and
// those statements are no progress (the sink's progress() leaves them out). Work is pending when the source's binlog head is
// past what was read, or capture or the sink hold read-but-unapplied work. An idle source has no
// pending work, so it never trips the watchdog however long nothing moves.

/** What the watchdog samples of a direction at one moment. */
export interface ProgressSample {
  atMs: number;
  /** Only a streaming direction is watched (starting, copying and restarting have their own timeouts). */
  streaming: boolean;
  /** Position after the last complete transaction read from the source's binlog. */
  readPosition: string | undefined;
  /** The checkpoint the target committed last (data and progress together). */
  checkpoint: string | undefined;
  /** Apply statements completed by the sink since it was created (any worker, any statement). */
  statements: number;
  /** Binlog events the reader received (a long transaction of unreplicated tables moves only this). */
  eventsRead: number;
  /** Binlog bytes between the read position and the source's head; undefined when unknown. */
  sourceBehindBytes: number | undefined;
  /** Items read but not yet handed to the sink (capture's queue, plus one whose hand-over is in flight). */
  captureQueued: number;
  /** Source transactions the sink accepted and has not committed yet. */
  sinkPending: number;
}

/** The work a sample shows waiting; empty when there is none (an idle, caught-up direction). */
export function pendingWork(s: ProgressSample): string[] {
  const out: string[] = [];
  if (s.sourceBehindBytes !== undefined && s.sourceBehindBytes > 0) out.push(`the source's binlog is ${s.sourceBehindBytes} bytes past the read position`);
  if (s.captureQueued > 0) out.push(`${s.captureQueued} items read and not handed to the sink`);
  if (s.sinkPending > 0) out.push(`${s.sinkPending} source transactions queued in the sink, not committed`);
  return out;
}

export type StallVerdict = { stalled: false } | { stalled: true; stuckForMs: number; pending: string[] };

/**
 * Measures how long a direction has had work pending without progress, on two clocks:
 * - apply: the sink or capture's queue holds read-but-unapplied work, and no apply statement
 *   completed and no checkpoint committed (a source that keeps being read does not hide a sink that
 *   is stuck);
 * - read: the source's binlog head is past the read position, and nothing moved at all (no event
 *   read, no position, no statement: a reader held back by a busy sink is not stuck).
 * A clock starts at the later of its last progress and the moment its work became pending; it
 * stops when that work is gone, and both stop while the direction is not streaming.
 */
export class StallClock {
  private applyFp: string | undefined;
  private allFp: string | undefined;
  private applySince: number | undefined;
  private readSince: number | undefined;

  constructor(readonly timeoutMs: number) {}

  observe(s: ProgressSample): StallVerdict {
    if (!s.streaming) {
      this.applySince = this.readSince = this.applyFp = this.allFp = undefined;
      return { stalled: false };
    }
    const applyFp = `${s.checkpoint ?? ''}|${s.statements}`;
    const allFp = `${applyFp}|${s.readPosition ?? ''}|${s.eventsRead}`;
    const applyPending = s.sinkPending > 0 || s.captureQueued > 0;
    const readPending = s.sourceBehindBytes !== undefined && s.sourceBehindBytes > 0;
    this.applySince = !applyPending ? undefined : applyFp !== this.applyFp || this.applySince === undefined ? s.atMs : this.applySince;
    this.readSince = !readPending ? undefined : allFp !== this.allFp || this.readSince === undefined ? s.atMs : this.readSince;
    this.applyFp = applyFp;
    this.allFp = allFp;
    const stuckForMs = this.stuckForMs(s.atMs);
    return stuckForMs >= this.timeoutMs ? { stalled: true, stuckForMs, pending: pendingWork(s) } : { stalled: false };
  }

  /** Milliseconds the longer of the two clocks has run at `nowMs` (0 when neither runs). */
  stuckForMs(nowMs: number): number {
    const since = Math.min(this.applySince ?? Number.POSITIVE_INFINITY, this.readSince ?? Number.POSITIVE_INFINITY);
    return Number.isFinite(since) ? Math.max(0, nowMs - since) : 0;
  }
}

/**
 * Whether a stall ends the direction for good: a stall is restarted once (the restart drops the
 * connections and reads again from the checkpoint, which clears a lost wake-up, a dead socket
 * nobody noticed, a lock holder that went away); a second stall with no commit since the previous
 * one means restarting does not help, and restarting again would only loop.
 */
export function stallIsRepeated(commitsAtPreviousStall: number | undefined, commitsNow: number): boolean {
  return commitsAtPreviousStall !== undefined && commitsAtPreviousStall === commitsNow;
}

/** An apply statement running now, as the sink reports it. */
export interface InFlightStatement {
  worker: number;
  /** What it is: `upsert shop.t`, `COMMIT`, ... */
  what: string;
  forMs: number;
  /** The target's connection (thread) id running it. */
  connectionId: number | undefined;
}

/** What the diagnosis says about a stalled direction. */
export interface StallReport {
  direction: string;
  state: string;
  stuckForMs: number;
  timeoutMs: number;
  pending: string[];
  readPosition: string | undefined;
  deliveredPosition: string | undefined;
  checkpoint: string | undefined;
  sourceHead: string | undefined;
  statements: number;
  capture?: { queued: number; paused: boolean; handlerBusyMs: number | undefined; msSinceLastEvent: number | undefined };
  sink?: {
    pendingTransactions: number;
    pendingRows: number;
    applying: boolean;
    msSinceLastStatement: number | undefined;
    inFlight: InFlightStatement[];
    /** Workers running statement after statement in one transaction past its budget. */
    looping?: Array<{ worker: number; statements: number; rows: number; forMs: number; last: string | undefined; connectionId?: number | undefined }>;
  };
  /** The target's view of the in-flight statements' sessions (processlist, lock waits), one line each. */
  target: string[];
}

/** A statement's text with its literals replaced (row values stay out of logs), as the sink's error messages are. */
export function redactLiterals(sql: string): string {
  return sql.replace(/'(?:[^'\\]|\\.|'')*'/g, "'?'");
}

const secs = (ms: number | undefined) => (ms === undefined ? '?' : `${(ms / 1000).toFixed(1)} s`);

/** What the stall waited on, as far as the sample tells. */
export function waitingOn(r: StallReport): string {
  const looping = r.sink?.looping ?? [];
  if (looping.length > 0) {
    return looping
      .map((l) => `apply worker ${l.worker} loops: ${l.statements} statements in one target transaction of ${l.rows} rows over ${secs(l.forMs)} without committing (the last: ${l.last ?? '?'}; target connection ${l.connectionId ?? '?'})`)
      .join('; ');
  }
  const inFlight = r.sink?.inFlight ?? [];
  if (inFlight.length > 0) {
    return inFlight.map((f) => `apply worker ${f.worker} statement ${f.what} in flight for ${secs(f.forMs)} (target connection ${f.connectionId ?? '?'})`).join('; ');
  }
  if (r.sink && r.sink.pendingTransactions > 0 && !r.sink.applying) return 'the sink holds transactions but no batch is being applied (nothing woke it)';
  if (r.capture?.handlerBusyMs !== undefined) return `capture's hand-over to the sink blocked for ${secs(r.capture.handlerBusyMs)} (sink back-pressure)`;
  if (r.capture?.paused) return 'capture paused (its queue is full) and the queue does not drain';
  return `the binlog reader: no event read for ${secs(r.capture?.msSinceLastEvent)} though the source's head is ahead`;
}

/** The one-paragraph diagnosis a stalled direction fails with. */
export function describeStall(r: StallReport): string {
  const parts = [
    `${r.direction} stalled: no progress for ${secs(r.stuckForMs)} (watchdog ${secs(r.timeoutMs)}) with work pending (${r.pending.join('; ')})`,
    `state ${r.state}`,
    `read position ${r.readPosition ?? '?'} (delivered ${r.deliveredPosition ?? '?'})`,
    `applied checkpoint ${r.checkpoint ?? '?'}`,
    `source binlog head ${r.sourceHead ?? '?'}`,
    `${r.statements} apply statements completed`,
  ];
  if (r.capture) parts.push(`capture queue ${r.capture.queued}${r.capture.paused ? ' (paused)' : ''}, last binlog event ${secs(r.capture.msSinceLastEvent)} ago`);
  if (r.sink) parts.push(`sink pending ${r.sink.pendingTransactions} transactions / ${r.sink.pendingRows} rows, ${r.sink.applying ? 'a batch applying' : 'no batch applying'}, last statement ${secs(r.sink.msSinceLastStatement)} ago`);
  parts.push(`waiting on: ${waitingOn(r)}`);
  if (r.target.length > 0) parts.push(`target: ${r.target.join('; ')}`);
  return parts.join('; ');
}
