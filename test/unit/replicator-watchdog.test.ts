import { describe, expect, it } from 'vitest';
import { describeStuck, failureReasons, type HarnessResult } from '../../src/harness/harness.ts';
import { ApplyProgress, statementBudget, trackAttempt } from '../../src/writer/worker-pool.ts';
import { ApplyError, DirectionStalledError } from '../../src/errors.ts';
import { classifyFailure } from '../../src/replicator/classify.ts';
import { describeStall, type ProgressSample, redactLiterals, StallClock, type StallReport, stallIsRepeated, waitingOn } from '../../src/replicator/watchdog.ts';

const base: ProgressSample = {
  atMs: 0,
  streaming: true,
  readPosition: 'binlog.000001:1000',
  checkpoint: 'binlog.000001:900',
  statements: 10,
  eventsRead: 50,
  sourceBehindBytes: 0,
  captureQueued: 0,
  sinkPending: 0,
};

/** Feeds samples every second from t=0 to t=`untilS` s; returns the first second the clock says stalled, or undefined. */
function firstStall(clock: StallClock, at: (s: number) => Partial<ProgressSample>, untilS: number): number | undefined {
  for (let s = 0; s <= untilS; s++) {
    if (clock.observe({ ...base, ...at(s), atMs: s * 1000 }).stalled) return s;
  }
  return undefined;
}

describe('the progress watchdog decides when a direction is stalled', () => {
  it('an idle source (nothing behind, nothing queued) never trips it, however long nothing moves', () => {
    expect(firstStall(new StallClock(5000), () => ({}), 600)).toBeUndefined();
    // The head unknown (source unreachable) is no pending work of its own.
    expect(firstStall(new StallClock(5000), () => ({ sourceBehindBytes: undefined }), 600)).toBeUndefined();
  });

  it('a sink holding transactions with no statement and no commit trips it after the timeout', () => {
    expect(firstStall(new StallClock(5000), () => ({ sinkPending: 3 }), 60)).toBe(5);
    // Work waiting in capture's queue (or one hand-over in flight) counts too.
    expect(firstStall(new StallClock(5000), () => ({ captureQueued: 1 }), 60)).toBe(5);
  });

  it('the clock starts when the work becomes pending, not at the last progress long before', () => {
    expect(firstStall(new StallClock(5000), (s) => ({ sinkPending: s >= 100 ? 1 : 0 }), 200)).toBe(105);
  });

  it('a large transaction applied statement by statement is progress, without any commit', () => {
    expect(firstStall(new StallClock(5000), (s) => ({ sinkPending: 1, captureQueued: 5, statements: 10 + s }), 600)).toBeUndefined();
    // One statement every 4 s with a 5 s timeout: still progress.
    expect(firstStall(new StallClock(5000), (s) => ({ sinkPending: 1, statements: 10 + Math.floor(s / 4) }), 600)).toBeUndefined();
    // Statements stop completing (a lock wait): it trips 5 s after the last one.
    expect(firstStall(new StallClock(5000), (s) => ({ sinkPending: 1, statements: 10 + Math.min(s, 30) }), 600)).toBe(35);
  });

  it('a reader that keeps reading does not hide a stuck sink', () => {
    expect(firstStall(new StallClock(5000), (s) => ({ sinkPending: 2 + s, readPosition: `binlog.000001:${1000 + s * 100}`, eventsRead: 50 + s }), 60)).toBe(5);
  });

  it("the source's binlog past the read position with nothing read trips it; a reader held back by a busy sink does not", () => {
    expect(firstStall(new StallClock(5000), () => ({ sourceBehindBytes: 4096 }), 60)).toBe(5);
    // Events arriving (a long transaction of other tables) are progress of the reader.
    expect(firstStall(new StallClock(5000), (s) => ({ sourceBehindBytes: 4096, eventsRead: 50 + s }), 60)).toBeUndefined();
    // Reader paused, the sink applying: the reader is waiting, not stuck.
    expect(firstStall(new StallClock(5000), (s) => ({ sourceBehindBytes: 1 << 20, statements: 10 + s }), 60)).toBeUndefined();
  });

  it('a direction that is not streaming (starting, copying, restarting) is not timed, and its clock starts over', () => {
    const clock = new StallClock(5000);
    expect(firstStall(clock, (s) => ({ sinkPending: 1, streaming: s < 4 || s > 50 }), 53)).toBeUndefined();
    expect(clock.stuckForMs(53_000)).toBe(2000);
    expect(firstStall(new StallClock(5000), (s) => ({ sinkPending: 1, streaming: s < 4 || s > 50 }), 60)).toBe(56);
  });

  it('a stall is restarted once; a second one with no commit since is permanent', () => {
    expect(stallIsRepeated(undefined, 7)).toBe(false);
    expect(stallIsRepeated(7, 7)).toBe(true);
    // A commit since the previous stall: the restart helped, this is a new stall.
    expect(stallIsRepeated(7, 8)).toBe(false);
    const first = new DirectionStalledError('n1→n2', 'n1→n2 stalled', false, {});
    const again = new DirectionStalledError('n1→n2', 'n1→n2 stalled', true, {});
    expect(classifyFailure(first)).toEqual({ kind: 'transient', cause: 'stalled (no progress)' });
    expect(classifyFailure(again)).toEqual({ kind: 'permanent', cause: 'stalled again without progress' });
    // Wrapped (e.g. by the sink), the stall still decides.
    expect(classifyFailure(new ApplyError('applying a batch failed', 'db.t', undefined, { cause: again })).kind).toBe('permanent');
    expect(again.message).toMatch(/stalled again at the same checkpoint/);
  });

  it('the diagnosis names the direction, state, positions, head and what it waited on', () => {
    const report: StallReport = {
      direction: 'n1→n2',
      state: 'streaming',
      stuckForMs: 6200,
      timeoutMs: 5000,
      pending: ['1 source transactions queued in the sink, not committed'],
      readPosition: 'binlog.000001:2000',
      deliveredPosition: 'binlog.000001:2000',
      checkpoint: 'binlog.000001:900',
      sourceHead: 'binlog.000001:2000',
      statements: 12,
      capture: { queued: 0, paused: false, handlerBusyMs: undefined, msSinceLastEvent: 800 },
      sink: { pendingTransactions: 1, pendingRows: 1, applying: true, msSinceLastStatement: 6100, inFlight: [{ worker: 2, what: 'INSERT db.t', forMs: 6100, connectionId: 41 }] },
      target: ['connection 41: InnoDB transaction LOCK WAIT for 6 s, 1 rows locked', 'connection 41 waits for a lock held by connection 17 (transaction RUNNING, idle in its transaction)'],
    };
    const text = describeStall(report);
    for (const part of ['n1→n2 stalled', 'no progress for 6.2 s', 'state streaming', 'read position binlog.000001:2000', 'applied checkpoint binlog.000001:900', 'source binlog head binlog.000001:2000', 'apply worker 2 statement INSERT db.t in flight for 6.1 s (target connection 41)', 'held by connection 17']) {
      expect(text).toContain(part);
    }
    // Without a statement in flight, the wait is named from the other signs.
    expect(waitingOn({ ...report, sink: { ...report.sink!, inFlight: [], applying: false } })).toMatch(/no batch is being applied/);
    expect(waitingOn({ ...report, sink: { ...report.sink!, inFlight: [], pendingTransactions: 0 }, capture: { ...report.capture!, handlerBusyMs: 7000 } })).toMatch(/hand-over to the sink blocked for 7.0 s/);
    expect(waitingOn({ ...report, sink: undefined, capture: { ...report.capture!, msSinceLastEvent: 30_000 } })).toMatch(/no event read for 30.0 s/);
  });
});

describe('the diagnosis keeps row values out of logs', () => {
  it("replaces a statement's literals", () => {
    expect(redactLiterals("INSERT INTO `s`.`t` (`id`, `v`) VALUES (CAST('1' AS SIGNED), 'it''s \\' x')")).toBe("INSERT INTO `s`.`t` (`id`, `v`) VALUES (CAST('?' AS SIGNED), '?')");
  });
});

describe('the harness names a stuck direction instead of timing out silently', () => {
  const status = {
    name: 'n1→n2',
    state: 'streaming',
    readPosition: 'binlog.000002:5000',
    checkpoint: 'binlog.000002:4100',
    sourceHead: 'binlog.000002:5000',
    lagBytes: 900,
    stuckForMs: 41_000,
    stalls: 1,
    restarts: 1,
    lastError: 'n1→n2 stalled: no progress for 20.0 s',
    lastErrorCause: 'stalled (no progress)',
    applying: { pendingTransactions: 3, inFlight: [{ what: 'COMMIT', forMs: 19_000 }] },
  };

  it('a finish wait that gave up fails the run with the direction, its state, positions, watchdog clock and last error', () => {
    const result = { converged: false, divergedKeys: 2, expectationMismatches: [], unknownOutcomes: { committed: 0, notCommitted: 0, unresolved: [] }, stuck: [{ direction: 'n1→n2', status, waitedMs: 60_000 }] };
    const reasons = failureReasons(result as unknown as HarnessResult);
    expect(reasons[0]).toBe(
      'replication stalled: n1→n2: its finish mark did not arrive within 60 s; state streaming, read binlog.000002:5000, applied binlog.000002:4100, source head binlog.000002:5000, lag 900 bytes, no progress for 41 s, stalls 1, restarts 1, sink pending 3, COMMIT in flight 19 s, last error (stalled (no progress)): n1→n2 stalled: no progress for 20.0 s',
    );
    expect(reasons[1]).toMatch(/did not converge/);
  });

  it('a direction the replicator reported nothing on is still named', () => {
    expect(describeStuck({ direction: 'n2→n1', status: undefined, waitedMs: 60_000 })).toBe('n2→n1: its finish mark did not arrive within 60 s and the replicator reported no status for it');
  });
});

describe('apply statements as the watchdog counts them', () => {
  it('statements of a transaction count as progress up to its budget; a looping transaction stops counting and is named', () => {
    const progress = new ApplyProgress();
    const track = trackAttempt(progress, 3, 41, 2);
    const budget = statementBudget(2);
    for (let i = 0; i < budget + 500; i++) {
      const end = track(i % 2 ? 'SET db.parent' : 'INSERT db.parent');
      expect(progress.inFlight.get(3)).toMatchObject({ connectionId: 41 });
      end(true);
    }
    // A failed statement is no progress either.
    track('COMMIT')(false);
    expect(progress.statements).toBe(budget);
    expect(progress.inFlight.size).toBe(0);
    expect(progress.attempts.get(3)).toMatchObject({ statements: budget + 500, rows: 2, last: 'COMMIT', connectionId: 41 });
    // A new attempt (a retry, the next batch) starts its own count.
    trackAttempt(progress, 3, 41, 2)('INSERT db.parent')(true);
    expect(progress.statements).toBe(budget + 1);
  });

  it('the diagnosis names a loop as one', () => {
    const text = waitingOn({
      direction: 'n1→n2',
      state: 'streaming',
      stuckForMs: 20_000,
      timeoutMs: 20_000,
      pending: [],
      readPosition: undefined,
      deliveredPosition: undefined,
      checkpoint: undefined,
      sourceHead: undefined,
      statements: 1000,
      sink: { pendingTransactions: 300, pendingRows: 400, applying: true, msSinceLastStatement: 20_500, inFlight: [], looping: [{ worker: 3, statements: 14_305, rows: 12, forMs: 61_000, last: 'SET lwwbench.g1', connectionId: 23 }] },
      target: [],
    });
    expect(text).toBe('apply worker 3 loops: 14305 statements in one target transaction of 12 rows over 61.0 s without committing (the last: SET lwwbench.g1; target connection 23)');
  });
});
