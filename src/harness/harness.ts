// The bidirectional harness: two real servers, concurrent writers on both, replication both ways
// through a replicator child process reached over TCP proxies (the writers reach their node through
// proxies of their own, so faults can cut either), faults during the run; then a finish
// mark on each side, the state check, the history audit, and a comparison with the state the
// writers' acknowledged writes imply (commits with an unknown outcome decided by their markers; one
// left undecided fails the run). Composes the other parts; decides nothing of its own.

import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { RowDataPacket } from 'mysql2/promise';
import { currentPosition } from '../capture/source.ts';
import type { StateReport } from '../checker/report.ts';
import { checkState } from '../checker/state-check.ts';
import { connect } from '../db/connection.ts';
import { InvalidOptionsError } from '../errors.ts';
import { install } from '../install/install.ts';
import { type Engine, type RunningServer, startServers } from '../servers/index.ts';
import { createDatabaseSql, createMarksSql, dropDatabaseSql, readMarkSql, writeMarkSql } from '../sql/workload.ts';
import type { Logger } from '../writer/options.ts';
import { silentLogger } from '../writer/options.ts';
import { compareWithExpected, type ExpectationMismatch } from './expected.ts';
import type { FailpointName } from '../failpoints/failpoints.ts';
import { readWorkerCheckpointSql } from '../sql/checkpoint.ts';
import { type CommitPoint, type Fault, type FaultEffect, type KillOutcome, type NetTarget, runFaults } from './faults.ts';
import { addTallies, type OutcomeTally } from './outcomes.ts';
import { type DirectionReport, type ReplicatorExit, ReplicatorExitError, ReplicatorProcess } from './replicator-process.ts';
import { generatedShapes } from './schema-gen.ts';
import { followUpVersions, type GenericMismatch, genericMismatches, startGenericOracle } from './session-gen.ts';
import { type DdlOutcome, oracleWithDdlColumn, planSessions, type RefusalPlan, runDdl, runRefusal, type SessionPlan } from './session-shapes.ts';
import { type SkewCost, skewCost } from './skew-cost.ts';
import { TcpProxy } from './tcp-proxy.ts';
import {
  ClockSkew,
  expectedState,
  generatedTables,
  HARNESS_SCHEMA,
  prepareWorkloadTables,
  runWriters,
  usesGeneratedSessions,
  type WorkloadOptions,
  type WriterControl,
  type WriterStats,
  workloadTables,
} from './workload.ts';

export type HarnessMode = 'lww' | 'replace';

export interface HarnessOptions {
  engine: Engine;
  /** Reuse running servers (two); otherwise two local servers are started and destroyed. */
  servers?: RunningServer[];
  workload: Omit<WorkloadOptions, 'durationMs'> & { durationMs: number };
  faults?: Fault[];
  mode?: HarnessMode;
  /** Extra failpoints for the replicator's sinks (e.g. sinkDropMessage=5%return(true)). */
  failpoints?: string;
  /** More flags for the replicator child (e.g. GC: --gc-interval 30s --gc-margin 1m; --gc-interval 0 turns GC off). */
  replicatorArgs?: readonly string[];
  /** Called with each status line of the replicator child (directions, GC). */
  onReplicatorStatus?: (status: unknown) => void;
  /** How long to wait for the finish marks to cross. */
  finishTimeoutMs?: number;
  /** The replicator's progress watchdog (its --stall-timeout); default 20 s, well inside the finish wait. 0: off. */
  stallTimeoutMs?: number;
  /** Optional history audit over the run's binlog window (positions per node at start). */
  audit?: (args: { nodes: string[]; from: string[]; tables: string[] }) => Promise<AuditSummary>;
  logger?: Logger;
}

export interface AuditSummary {
  counts: Record<string, number>;
  findings: number;
  details?: unknown;
}

export interface HarnessResult {
  mode: HarnessMode;
  engine: Engine;
  seed: number;
  durationMs: number;
  /** When the writers started (ms since the epoch): the faults' `atMs` count from it. */
  startedAt: number;
  transactions: number;
  operations: number;
  writerRetries: number;
  throughput: number;
  /** Faults that took effect (see `faults`). */
  faultsInjected: number;
  /** Each fault occurrence as it happened: kind, node, mode, when, measured downtime. */
  faults: FaultEffect[];
  replicatorKills: number;
  replicatorStarts: number;
  /**
   * The harness process's own event-loop delay while writing (ms, max and p99): writers, proxies and
   * fault timers share it, so a large delay means late faults and slowed writers, not a slow replicator.
   */
  harnessLoopDelayMs: { max: number; p99: number };
  /** Each direction's restarts inside the replicator (summed over its lives) and last error. */
  directions: DirectionReport[];
  converged: boolean;
  replication: { applied: number; staleSkipped: number; skippedByTombstone: number; conflicts: number; lagMs: number | undefined };
  state: StateReport;
  divergedKeys: number;
  expectationMismatches: Array<ExpectationMismatch | GenericMismatch>;
  audit?: AuditSummary;
  /**
   * Writer commits whose reply never came (lost connection, failed COMMIT), decided by their markers:
   * committed (their writes are in the expected state), not committed, or unresolved (fails the run).
   */
  unknownOutcomes: OutcomeTally;
  /** Generated schemas and sessions: which shapes ran and how often (tables, key types, statements, transactions). */
  shapes?: Record<string, number>;
  /** LWW's accepted cost: writes that began after a newer-versioned write of their key had committed, so lost to an earlier write (skew-cost.ts). */
  skewCost: SkewCost;
  /** Directions whose finish mark never arrived within the finish wait, with the replicator's last word on each. */
  stuck: StuckDirection[];
  /** Generated sessions: the run's planned extra shapes (large transactions, DDL, a refused setting), from the seed. */
  plan?: SessionPlan;
  /** The DDL shape: each statement run, on which node and when (and an error that ended it). */
  ddl?: DdlOutcome;
  /**
   * The refused-setting shape: a session wrote with a setting the replicator must refuse, so the
   * expected outcome is a loud stop of that node's direction naming the cause (then nothing else is
   * judged: the nodes are expected to differ). asExpected false fails the run.
   */
  expectedStop?: ExpectedStop;
}

export interface ExpectedStop {
  setting: RefusalPlan['setting'];
  node: string;
  table: string;
  /** When the session wrote (ms from the writers' start); undefined: it never wrote (error says why). */
  wroteAtMs?: number;
  error?: string;
  /** The replicator stopped (exit code and its last error). */
  stopped: boolean;
  exitCode?: number | null;
  cause?: string;
  /** Stopped with exit 4, naming the direction from that node, `capture refused`, the setting and the table. */
  asExpected: boolean;
}

/** Whether the replicator's exit is the loud stop the refused setting must cause: exit 4, the direction, the cause, the setting, the table. */
export function isExpectedStop(plan: RefusalPlan, schema: string, exit: ReplicatorExit): boolean {
  const text = [exit.lastError ?? '', ...exit.logTail].join('\n');
  return (
    exit.code === 4 &&
    text.includes(`${plan.node}→`) &&
    /stopped \(capture refused\)/.test(text) &&
    text.includes(plan.setting) &&
    text.includes(`${schema}.${plan.table}`)
  );
}

/** A direction the finish wait gave up on: which mark is missing where, and the direction's status then. */
export interface StuckDirection {
  direction: string;
  /** The replicator's status of the direction when the wait gave up (state, positions, last error, watchdog clock). */
  status: Record<string, unknown> | undefined;
  waitedMs: number;
}

/** One line on a stuck direction: its state, positions, what the watchdog saw, its last error. */
export function describeStuck(s: StuckDirection): string {
  const d = s.status;
  if (!d) return `${s.direction}: its finish mark did not arrive within ${Math.round(s.waitedMs / 1000)} s and the replicator reported no status for it`;
  const applying = d.applying as { pendingTransactions?: number; inFlight?: Array<{ what: string; forMs: number }> } | undefined;
  const fields = [
    `state ${String(d.state)}`,
    `read ${String(d.readPosition ?? '?')}`,
    `applied ${String(d.checkpoint ?? '?')}`,
    `source head ${String(d.sourceHead ?? '?')}`,
    `lag ${d.lagBytes === undefined ? '?' : `${String(d.lagBytes)} bytes`}`,
    `no progress for ${Math.round(Number(d.stuckForMs ?? 0) / 1000)} s`,
    `stalls ${String(d.stalls ?? 0)}`,
    `restarts ${String(d.restarts ?? 0)}`,
    ...(applying ? [`sink pending ${applying.pendingTransactions ?? 0}${(applying.inFlight ?? []).map((f) => `, ${f.what} in flight ${Math.round(f.forMs / 1000)} s`).join('')}`] : []),
    ...(d.lastError ? [`last error (${String(d.lastErrorCause ?? '?')}): ${String(d.lastError)}`] : ['no error']),
  ];
  return `${s.direction}: its finish mark did not arrive within ${Math.round(s.waitedMs / 1000)} s; ${fields.join(', ')}`;
}

const MARK_SCHEMA = HARNESS_SCHEMA;

/** Why a run failed, one reason a line; empty when it passed (converged, as expected, no audit finding, every outcome decided). */
export function failureReasons(r: HarnessResult): string[] {
  const out: string[] = [];
  const stop = r.expectedStop;
  if (stop) {
    // The refused setting decides the run: the loud stop with its cause, and nothing else.
    if (stop.asExpected) return [];
    if (stop.wroteAtMs === undefined) return [`the refused-setting session (${stop.setting} on ${stop.node}) did not write: ${stop.error ?? 'the run ended first'}`];
    if (!stop.stopped) {
      return [`the replicator did not stop although ${stop.node} wrote ${r.expectedStop!.table} with ${stop.setting} (${r.converged ? 'it converged anyway' : 'it kept running'}): expected a loud stop naming the cause`];
    }
    return [`the replicator stopped for another reason than ${stop.setting} on ${stop.node} (exit ${stop.exitCode}): ${stop.cause ?? 'no error logged'}`];
  }
  for (const s of r.stuck ?? []) out.push(`replication stalled: ${describeStuck(s)}`);
  if (r.ddl?.error) out.push(`the DDL shape failed: ${r.ddl.error}`);
  if (!r.converged) out.push(`the nodes did not converge (${r.divergedKeys} diverged keys)`);
  const keys = new Set(r.expectationMismatches.map((m) => m.key)).size;
  if (keys > 0) out.push(`${keys} keys differ from the state the writers' committed transactions imply`);
  if ((r.audit?.findings ?? 0) > 0) out.push(`the history audit found ${r.audit!.findings} findings`);
  const u = r.unknownOutcomes.unresolved;
  if (u.length > 0) {
    out.push(
      `${u.length} writer commits with an unknown outcome stayed unresolved (their markers could not be read), so the expected state is not known: ` +
        u.slice(0, 3).map((o) => `${o.node} marker ${o.marker} (${o.writes} writes; COMMIT: ${o.error}; last look: ${o.lastCheck})`).join('; ') + (u.length > 3 ? '; …' : ''),
    );
  }
  return out;
}

/** The failpoint behind each commit point of a kill fault. */
const KILL_FAILPOINTS: Record<CommitPoint, FailpointName> = {
  'after-statements': 'sinkKillAfterStatements',
  'commit-in-flight': 'sinkKillCommitInFlight',
  'after-commit': 'sinkKillAfterCommit',
};
/** How long the harness waits, once the refused-setting session wrote and the writers are done, for the replicator's stop. */
const REFUSAL_STOP_WAIT_MS = 30_000;
/** How long a commit-point kill waits for a target transaction with data to get there. */
const COMMIT_POINT_WAIT_MS = 20_000;

interface Link {
  /** `n1` (the node's proxy), `n1>n2.capture` or `n1>n2.sink`. */
  key: string;
  /** The node behind the proxy. */
  node: string;
  proxy: TcpProxy;
}

interface DirectionTotals {
  inserted: number;
  updated: number;
  deleted: number;
  skippedStale: number;
  skippedByTombstone: number;
  coalesced: number;
}

function statusTotals(status: unknown): { totals: DirectionTotals; lagMs: number | undefined } {
  const sum: DirectionTotals = { inserted: 0, updated: 0, deleted: 0, skippedStale: 0, skippedByTombstone: 0, coalesced: 0 };
  let lag: number | undefined;
  const dirs = (status as { directions?: Array<{ sink: { totals: DirectionTotals }; lagMs?: number }> } | undefined)?.directions ?? [];
  for (const d of dirs) {
    for (const k of Object.keys(sum) as Array<keyof DirectionTotals>) sum[k] += d.sink.totals[k] ?? 0;
    if (d.lagMs !== undefined) lag = Math.max(lag ?? 0, d.lagMs);
  }
  return { totals: sum, lagMs: lag };
}

export async function runHarness(o: HarnessOptions): Promise<HarnessResult> {
  const log = o.logger ?? silentLogger;
  const mode = o.mode ?? 'lww';
  const servers = o.servers ?? (await startServers({ engine: o.engine, count: 2 }));
  const owned = !o.servers;
  const names = servers.map((_, i) => `n${i + 1}`);
  const proxies = servers.map((s) => new TcpProxy(s.host, s.port));
  const writerProxies = servers.map((s) => new TcpProxy(s.host, s.port));
  // Besides each node's proxy, one per direction and end: a one-direction cut breaks only those.
  const links: Link[] = names.map((node, i) => ({ key: node, node, proxy: proxies[i]! }));
  for (const [i, from] of names.entries()) {
    for (const [j, to] of names.entries()) {
      if (i === j) continue;
      links.push({ key: `${from}>${to}.capture`, node: from, proxy: new TcpProxy(servers[i]!.host, servers[i]!.port) });
      links.push({ key: `${from}>${to}.sink`, node: to, proxy: new TcpProxy(servers[j]!.host, servers[j]!.port) });
    }
  }
  const linksOf = (link: string, target: NetTarget) =>
    target === 'writers'
      ? [writerProxies[names.indexOf(link)]!]
      : links.filter((l) => (link.includes('>') ? l.key === link || l.key.startsWith(`${link}.`) : l.node === link)).map((l) => l.proxy);
  for (const f of o.faults ?? []) {
    for (const node of [f.node, f.to]) {
      if (node !== undefined && !names.includes(node)) throw new InvalidOptionsError(`fault ${f.kind}:${node}: no such node (nodes: ${names.join(', ')})`);
    }
  }
  let replicator: ReplicatorProcess | null = null;
  /** Set once the writers run: turns the replicator's exit after a refused-setting write into the run's result. */
  let stoppedAsPlanned: ((exit: ReplicatorExit) => Promise<HarnessResult | undefined>) | undefined;
  /** Instances replaced by a twin (their kills and starts count). */
  const retired: ReplicatorProcess[] = [];
  let started = Date.now();
  // Versions with a physical part this far before the run are the initial rows' (1 << 10), no writer's.
  const runStartUs = BigInt(started - 86_400_000) * 1000n;
  let exited: (exit: ReplicatorExit) => void = () => undefined;
  const died = new Promise<ReplicatorExit>((resolve) => (exited = resolve));
  const failed = (exit: ReplicatorExit) => new ReplicatorExitError(exit, replicator?.directions() ?? [], Date.now() - started);
  try {
    const wl = o.workload;
    const tables = [...workloadTables(wl), `${MARK_SCHEMA}.harness_marks`];
    log.info(`harness[${mode}]: preparing ${wl.tables} tables × ${wl.rowsPerTable} rows on ${servers.length} ${o.engine} servers`);
    // Every server at once: each is prepared and installed on its own.
    const t0 = Date.now();
    await Promise.all(
      servers.map(async (s, i) => {
        const c = await connect(s.url);
        for (const db of [wl.schema, MARK_SCHEMA, wl.metaSchema ?? 'lww_meta']) await c.query(dropDatabaseSql(db));
        await c.end();
        await prepareWorkloadTables(s.url, wl);
        const m = await connect(s.url);
        await m.query(createDatabaseSql(MARK_SCHEMA));
        await m.query(createMarksSql(MARK_SCHEMA, wl.versionColumn ?? '_lww_ts'));
        await m.end();
        await install({ url: s.url, nodeId: i + 1, tables });
      }),
    );
    log.info(`harness[${mode}]: prepared in ${Date.now() - t0} ms`);
    const from: string[] = [];
    for (const s of servers) {
      const c = await connect(s.url);
      from.push(await currentPosition(c));
      await c.end();
    }
    for (const p of [...links.map((l) => l.proxy), ...writerProxies]) await p.start();
    const failpoints = [mode === 'replace' ? 'mysqlSinkBypassLWW=return(true)' : '', o.failpoints ?? ''].filter(Boolean).join(';');
    const accumulated: DirectionTotals[] = [];
    const newReplicator = () =>
      new ReplicatorProcess({
        nodes: servers.map((s, i) => proxies[i]!.rewrite(s.url)),
        routes: Object.fromEntries(links.filter((l) => l.key.includes('>')).map((l) => [l.key, l.proxy.rewrite(servers[names.indexOf(l.node)]!.url)])),
        tables,
        failpoints,
        ipc: true,
        extraArgs: [
          ...(o.replicatorArgs?.includes('--stall-timeout') ? [] : ['--stall-timeout', `${o.stallTimeoutMs ?? 20_000}ms`]),
          ...(o.replicatorArgs ?? []),
        ],
        onStatus: o.onReplicatorStatus,
        onLog: (line) => {
          // The watchdog's diagnosis is worth seeing without debug logging.
          if (/stalled/.test(line)) log.warn(`replicator: ${line}`);
          else log.debug(`replicator: ${line}`);
        },
        onUnexpectedExit: (exit) => {
          log.error(`harness[${mode}]: the replicator exited unexpectedly (code ${exit.code}, signal ${exit.signal}): ${exit.lastError ?? 'no error logged'}`);
          exited(exit);
        },
      });
    replicator = newReplicator();
    replicator.start();
    // Where a commit-point kill landed: the batch's checkpoint positions (data and checkpoint commit
    // together) against what the target stores now in the row of the apply worker whose transaction
    // it was, read directly, before the replicator restarts.
    const commitPointDetail = async (hit: Record<string, unknown>): Promise<Record<string, unknown>> => {
      const direction = String(hit.owner ?? '').split(':').at(-1) ?? '';
      const target = servers[names.indexOf(direction.split('→')[1] ?? '')];
      const positions = (hit.positions ?? {}) as Record<string, string>;
      const stored: Record<string, string | null> = {};
      if (target) {
        const c = await connect(target.url);
        try {
          for (const sourceId of Object.keys(positions)) {
            const [rows] = await c.execute<RowDataPacket[]>(readWorkerCheckpointSql(wl.metaSchema ?? 'lww_meta'), [sourceId, Number(hit.worker ?? 0)]);
            stored[sourceId] = rows[0] ? String(rows[0].position) : null;
          }
        } finally {
          await c.end();
        }
      }
      const committed = Object.keys(positions).length > 0 && Object.entries(positions).every(([id, p]) => stored[id] === p);
      return { failpoint: hit.failpoint, direction, rows: hit.rows, positions, acked: hit.acked ?? {}, stored, committed };
    };
    const streaming = () =>
      ((replicator!.lastStatus as { directions?: Array<{ state: string }> } | undefined)?.directions ?? []).every((d) => d.state === 'streaming') &&
      (replicator!.lastStatus as { directions?: unknown[] } | undefined)?.directions?.length === servers.length * (servers.length - 1);
    const t1 = Date.now();
    for (let waited = 0; !streaming(); waited += 100) {
      if (replicator.unexpectedExit) throw failed(replicator.unexpectedExit);
      if (waited > 60_000) throw new Error('replicator did not start streaming within 60 s');
      await new Promise((r) => setTimeout(r, 100));
    }

    log.info(`harness[${mode}]: replicator streaming after ${Date.now() - t1} ms`);
    const oracle = usesGeneratedSessions(wl) ? await startGenericOracle(servers[0]!.url, wl.schema, workloadTables(wl).map((t) => t.slice(wl.schema.length + 1)), wl.versionColumn ?? '_lww_ts', wl.metaSchema ?? 'lww_meta') : undefined;
    const skew = new ClockSkew();
    // The run's extra session shapes, from the seed (and the schema's seed): large transactions, DDL, a refused setting.
    const plan = oracle ? planSessions(wl.seed * 7_919 + (wl.schemaGen ?? 0), generatedTables(wl).tables, names, wl.threads, wl.durationMs, wl) : undefined;
    const control: WriterControl = { stopped: false, skew, ...(plan ? { plan } : {}) };
    const loopDelay = monitorEventLoopDelay({ resolution: 20 });
    loopDelay.enable();
    started = Date.now();
    log.info(`harness[${mode}]: ${wl.kind} for ${wl.durationMs / 1000}s, ${wl.threads} writers per node, seed ${wl.seed}, faults: ${(o.faults ?? []).length}`);
    const writers = Promise.all(servers.map((s, i) => runWriters({ name: names[i]!, url: writerProxies[i]!.rewrite(s.url) }, wl, control)));
    const abort = new AbortController();
    const ddlRun = plan?.ddl
      ? runDdl(plan.ddl, wl.schema, new Map(names.map((n, i) => [n, servers[i]!.url])), started, abort.signal, () => {
          control.ddlAdded = plan.ddl;
          log.info(`harness[${mode}]: every node has ${wl.schema}.${plan.ddl!.table}.${plan.ddl!.column}; the writers write it from now on`);
        })
      : Promise.resolve(undefined);
    const refusalRun = plan?.refusal ? runRefusal(plan.refusal, wl.schema, servers[names.indexOf(plan.refusal.node)]!.url, started, abort.signal) : Promise.resolve(undefined);
    /** The run's verdict on the refused setting, given how the replicator ended (undefined: it did not). */
    const expectedStopOf = async (exit: ReplicatorExit | undefined): Promise<ExpectedStop | undefined> => {
      if (!plan?.refusal) return undefined;
      const wrote = await refusalRun;
      const base = { setting: plan.refusal.setting, node: plan.refusal.node, table: plan.refusal.table };
      if (!wrote || 'error' in wrote) return { ...base, stopped: exit !== undefined, error: wrote?.error ?? 'the run ended before it', asExpected: false };
      if (!exit) return { ...base, wroteAtMs: wrote.atMs, stopped: false, asExpected: false };
      // The stopped direction's own error names the cause (the process's last error may be a later one, e.g. its sink closing).
      const from = `${plan.refusal.node}→`;
      const own = replicator?.directions().find((d) => d.name.startsWith(from))?.lastError;
      const seen: ReplicatorExit = { ...exit, logTail: [...(own ? [own] : []), ...exit.logTail] };
      return { ...base, wroteAtMs: wrote.atMs, stopped: true, exitCode: exit.code, cause: own ?? exit.lastError, asExpected: isExpectedStop(plan.refusal, wl.schema, seen) };
    };
    /** A write on every node: the replicator has a batch with data to apply, whether writers still run or not. */
    const writeMarks = async () => {
      const token = randomUUID();
      for (const [i, s] of servers.entries()) {
        const c = await connect(s.url);
        await c.execute(writeMarkSql(MARK_SCHEMA), [names[i]!, token, token]).finally(() => c.end());
      }
    };
    let turn: Promise<void> = Promise.resolve();
    /** Waits for the previous commit-point kill or twin to finish; call the result when done. */
    const takeTurn = async (): Promise<() => void> => {
      const previous = turn;
      let done!: () => void;
      turn = new Promise((resolve) => (done = resolve));
      // An aborted run waits for no one (what is broken is being healed).
      await Promise.race([previous, new Promise((resolve) => (abort.signal.aborted ? resolve(undefined) : abort.signal.addEventListener('abort', resolve, { once: true })))]);
      return done;
    };
    let releaseTurn: (() => void) | undefined;
    /** Seed 001's shape: a second replicator beside one that streams (not one still starting). */
    const startTwin = async (withinMs: number): Promise<KillOutcome> => {
      while (!(await replicator!.ready(1000))) {
        if (abort.signal.aborted) return { killed: false, note: 'the run ended first' };
      }
      const old = replicator!;
      const totals = statusTotals(old.lastStatus).totals;
      const twin = newReplicator();
      twin.start();
      // Both stream at once; then the old instance must find out on its next write that the twin owns
      // the checkpoints, and stop.
      let twinStreams = false;
      const end = await old.awaitOwnEnd(
        withinMs,
        (exit) => /lost ownership/.test(exit.lastError ?? ''),
        async () => {
          twinStreams = await twin.ready(60_000);
          await writeMarks();
        },
      );
      accumulated.push(totals);
      retired.push(old);
      replicator = twin;
      return {
        killed: true,
        ...(end.ended ? {} : { note: `the old instance was still running after ${withinMs}ms: killed` }),
        detail: { twinStreamed: twinStreams, oldStopped: end.ended, oldStopMs: end.ms, oldExit: end.exit && { code: end.exit.code, signal: end.exit.signal, lastError: end.exit.lastError } },
      };
    };
    const faults = runFaults(
      o.faults ?? [],
      wl.durationMs,
      {
        killReplicator: async (point) => {
          if (!point && !replicator!.running) return false;
          const totals = statusTotals(replicator!.lastStatus).totals;
          if (!point) {
            accumulated.push(totals);
            return replicator!.kill();
          }
          // Commit-point kills and twins take turns, each until its replicator streams again.
          const done = await takeTurn();
          if (abort.signal.aborted) {
            done();
            return { killed: false, note: 'the run ended first' };
          }
          const r = await replicator!.killAt(KILL_FAILPOINTS[point], COMMIT_POINT_WAIT_MS, writeMarks);
          if (!r.killed) {
            done();
            return { killed: false, ...(r.note ? { note: r.note } : {}) };
          }
          accumulated.push(totals);
          releaseTurn = done;
          return { killed: true, detail: await commitPointDetail(r.hit!) };
        },
        restartReplicator: async () => {
          replicator!.start();
          const done = releaseTurn;
          releaseTurn = undefined;
          if (done) void replicator!.ready(60_000).finally(done);
        },
        cutNetwork: (link, how, target, slow) => linksOf(link, target).reduce((n, p) => n + (how === 'slow' ? p.slow(slow ?? { latencyMs: 0 }) : p.cut(how)), 0),
        healNetwork: (link, target) => {
          for (const p of linksOf(link, target)) p.restore();
        },
        startTwin: async (withinMs) => {
          const done = await takeTurn();
          try {
            return await startTwin(withinMs);
          } finally {
            done();
          }
        },
        stopServer: async (node, how) => servers[names.indexOf(node)]!.halt({ abrupt: how === 'abrupt' }),
        startServer: async (node) => servers[names.indexOf(node)]!.start(),
        setSkew: (node, ms) => skew.set(node, ms),
        log: (m) => log.info(`harness[${mode}]: ${m}`),
      },
      started,
      abort.signal,
    );
    const progress = setInterval(() => {
      const { totals, lagMs } = statusTotals(replicator!.lastStatus);
      log.info(
        `harness[${mode}]: ${Math.round((Date.now() - started) / 1000)}s applied=${totals.inserted + totals.updated + totals.deleted} stale=${totals.skippedStale} lag=${lagMs === undefined ? '?' : Math.round(lagMs)}ms`,
      );
    }, 5000);
    let results: WriterStats[] = [];
    let effects: FaultEffect[] = [];
    /** The run's shapes: the schema's, the writers' and the harness's own (DDL, refused setting). */
    const shapesOf = (ddl: DdlOutcome | undefined, stop: ExpectedStop | undefined) => {
      const own: Record<string, number> = {};
      for (const st of ddl?.statements ?? []) {
        const k = /MODIFY COLUMN/.test(st.sql) ? 'ddl:reorder-column' : 'ddl:add-column';
        own[k] = (own[k] ?? 0) + 1;
      }
      if (stop?.wroteAtMs !== undefined) own[`session:refused-setting:${stop.setting}`] = 1;
      return generatedShapes(wl.schemaGen, [...results.map((r) => r.shapes), own], { hotKeys: wl.hotKeys });
    };
    /** What every verdict reports of the run itself: its writes, faults, replicator lives and applied totals. */
    const runFacts = (writeMs: number, last: ReplicatorProcess, totals: DirectionTotals, lagMs: number | undefined) => {
      const transactions = results.reduce((n, r) => n + r.transactions, 0);
      return {
        mode,
        engine: o.engine,
        seed: wl.seed,
        durationMs: writeMs,
        startedAt: started,
        transactions,
        operations: results.reduce((n, r) => n + r.acked.length, 0),
        writerRetries: results.reduce((n, r) => n + r.retries, 0),
        throughput: transactions / (writeMs / 1000),
        faultsInjected: effects.filter((e) => e.tookEffect).length,
        faults: effects,
        replicatorKills: [...retired, last].reduce((n, r) => n + r.kills, 0),
        replicatorStarts: [...retired, last].reduce((n, r) => n + r.starts, 0),
        harnessLoopDelayMs: { max: Math.round(loopDelay.max / 1e6), p99: Math.round(loopDelay.percentile(99) / 1e6) },
        replication: {
          applied: totals.inserted + totals.updated + totals.deleted,
          staleSkipped: totals.skippedStale,
          skippedByTombstone: totals.skippedByTombstone,
          conflicts: totals.skippedStale + totals.skippedByTombstone,
          lagMs,
        },
        unknownOutcomes: addTallies(results.map((r) => r.outcomes)),
        skewCost: skewCost(results.flatMap((r) => r.acked), { physicalBeforeUs: runStartUs }),
      };
    };
    /** The refused setting's loud stop ends the run here: the verdict, and the state for the record (not judged). */
    stoppedAsPlanned = async (exit: ReplicatorExit): Promise<HarnessResult | undefined> => {
      const expectedStop = await expectedStopOf(exit);
      if (!expectedStop || expectedStop.wroteAtMs === undefined) return undefined;
      control.stopped = true;
      abort.abort();
      const ddl = await ddlRun;
      const state = await checkState({ nodes: servers.map((s) => s.url), tables: workloadTables(wl) });
      const { totals, lagMs } = statusTotals(replicator!.lastStatus);
      const writeMs = Date.now() - started;
      log.info(`harness[${mode}]: the replicator stopped ${expectedStop.asExpected ? 'as expected' : 'OTHERWISE than expected'} after the ${expectedStop.setting} write: ${exit.lastError ?? ''}`);
      return {
        ...runFacts(writeMs, replicator!, totals, lagMs),
        directions: replicator!.directions(),
        converged: false,
        state,
        divergedKeys: state.totals.findings,
        expectationMismatches: [],
        stuck: [],
        shapes: shapesOf(ddl, expectedStop),
        ...(plan ? { plan } : {}),
        ...(ddl ? { ddl } : {}),
        expectedStop,
      };
    };
    try {
      const outcome = await Promise.race([Promise.all([writers, faults]), died]);
      if (!Array.isArray(outcome)) {
        // An exit no fault caused fails the run (unless it is the refused setting's stop): stop the
        // writers, heal what is broken, report it.
        control.stopped = true;
        abort.abort();
        const [w, f] = await Promise.allSettled([writers, faults]);
        results = w.status === 'fulfilled' ? w.value : [];
        effects = f.status === 'fulfilled' ? f.value : [];
        throw failed(outcome);
      }
      [results, effects] = outcome;
      // The refused setting was written: its stop should come promptly, writers or not.
      const wrote = plan?.refusal ? await refusalRun : undefined;
      if (wrote && 'atMs' in wrote && !replicator.unexpectedExit) await Promise.race([died, new Promise((r) => setTimeout(r, REFUSAL_STOP_WAIT_MS))]);
    } finally {
      clearInterval(progress);
      loopDelay.disable();
    }
    const writeMs = Date.now() - started;
    if (replicator.unexpectedExit) throw failed(replicator.unexpectedExit);
    const ddl = await ddlRun;
    if (!replicator.running) replicator.start();

    // Finish: each side writes a mark; once the peer holds it, everything written before it crossed.
    const token = randomUUID();
    log.info(`harness[${mode}]: workload done, waiting for the finish marks to cross`);
    const conns = await Promise.all(servers.map((s) => connect(s.url)));
    for (const [i, c] of conns.entries()) await c.execute(writeMarkSql(MARK_SCHEMA), [names[i]!, token, token]);
    const waitStart = Date.now();
    const deadline = waitStart + (o.finishTimeoutMs ?? 60_000);
    let converged = false;
    /** Directions (`n1→n2`) whose mark has not arrived yet. */
    let missing: string[] = [];
    while (Date.now() < deadline) {
      if (replicator.unexpectedExit) throw failed(replicator.unexpectedExit);
      missing = [];
      for (const [i, c] of conns.entries()) {
        for (const n of names) {
          const [rows] = await c.execute<RowDataPacket[]>(readMarkSql(MARK_SCHEMA), [n]);
          if (rows[0]?.token !== token) missing.push(`${n}→${names[i]!}`);
        }
      }
      if (missing.length === 0) {
        converged = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    // A wait that gave up names the stuck directions with the replicator's word on each, never a bare timeout.
    const stuck: StuckDirection[] = converged
      ? []
      : missing.map((direction) => ({
          direction,
          status: ((replicator!.lastStatus as { directions?: Array<Record<string, unknown>> } | undefined)?.directions ?? []).find((d) => d.name === direction),
          waitedMs: Date.now() - waitStart,
        }));
    for (const s of stuck) log.error(`harness[${mode}]: replication stalled: ${describeStuck(s)}`);
    await new Promise((r) => setTimeout(r, 1500));
    const finalStatus = statusTotals(replicator.lastStatus);
    const directions = replicator.directions();
    if (replicator.unexpectedExit) throw failed(replicator.unexpectedExit);
    const stopCode = await replicator.stop();
    if (stopCode !== null && stopCode !== 0) {
      // A graceful stop that ends in failure is as unexpected as a crash: it hit an error it did not report otherwise.
      throw failed({ code: stopCode, signal: null, lastError: replicator.lastError, logTail: [] });
    }
    accumulated.push(finalStatus.totals);

    log.info(`harness[${mode}]: checking state${o.audit ? ' and auditing history' : ''}`);
    const urls = servers.map((s) => s.url);
    const state = await checkState({ nodes: urls, tables: workloadTables(wl) });
    const acked = results.flatMap((r) => r.acked);
    const expected = expectedState(wl, acked);
    const mismatches: Array<ExpectationMismatch | GenericMismatch> = [];
    const tableNames = workloadTables(wl).map((t) => t.slice(t.indexOf('.') + 1));
    // Once every node had the added column, the writers wrote it: the oracle compares it too.
    const finalOracle = oracle && control.ddlAdded ? { ...oracle, oracle: oracleWithDdlColumn(oracle.oracle, control.ddlAdded) } : oracle;
    // The sinks' own follow-up writes have no author among the writers: left out of the skew cost.
    const followUps = finalOracle ? await followUpVersions(conns, finalOracle.metaSchema, wl.schema, tableNames) : undefined;
    if (finalOracle) mismatches.push(...(await genericMismatches(conns, names, wl.schema, wl.versionColumn ?? '_lww_ts', finalOracle, acked)));
    else {
      for (const [i, c] of conns.entries()) {
        mismatches.push(...(await compareWithExpected(c, names[i]!, wl.schema, tableNames, wl.versionColumn ?? '_lww_ts', expected)));
      }
    }
    for (const c of conns) await c.end();
    const audit = o.audit ? await o.audit({ nodes: urls, from, tables: workloadTables(wl) }) : undefined;
    const sum = accumulated.reduce(
      (a, t) => {
        for (const k of Object.keys(a) as Array<keyof DirectionTotals>) a[k] += t[k];
        return a;
      },
      { inserted: 0, updated: 0, deleted: 0, skippedStale: 0, skippedByTombstone: 0, coalesced: 0 },
    );
    return {
      ...runFacts(writeMs, replicator, sum, finalStatus.lagMs),
      directions,
      converged: converged && state.identical,
      state,
      divergedKeys: state.totals.findings,
      expectationMismatches: mismatches,
      audit,
      skewCost: skewCost(acked, { physicalBeforeUs: runStartUs, ...(followUps ? { versions: followUps } : {}) }),
      ...(oracle ? { shapes: shapesOf(ddl, undefined) } : {}),
      ...(plan ? { plan } : {}),
      ...(ddl ? { ddl } : {}),
      ...(plan?.refusal ? { expectedStop: await expectedStopOf(undefined) } : {}),
      stuck,
    };
  } catch (err) {
    // The replicator's exit after the refused-setting session wrote is that shape's outcome, judged.
    if (err instanceof ReplicatorExitError && stoppedAsPlanned) {
      const judged = await stoppedAsPlanned(err.exit);
      if (judged) return judged;
    }
    throw err;
  } finally {
    await replicator?.stop().catch(() => undefined);
    for (const r of retired) await r.stop().catch(() => undefined);
    for (const p of [...links.map((l) => l.proxy), ...writerProxies]) await p.stop();
    if (owned) await Promise.all(servers.map((s) => s.destroy()));
  }
}
