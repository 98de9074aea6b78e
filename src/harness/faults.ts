// Faults the harness schedules during a run, and the term syntax to ask for them:
//   kill@20s                  SIGKILL the replicator at 20 s, restart it 1 s later
//   kill:after-commit@20s/2s  … at a commit point of the sink's next target transaction (failpoint):
//                             after-statements (data sent, no COMMIT), commit-in-flight (COMMIT sent,
//                             reply unread), after-commit (committed, checkpoint callback not run)
//   twin@20s/5s               start a second replicator while the first still runs (a restart that
//                             overlapped the old instance): once both stream, the old one must stop on
//                             its own (owner epoch lost) within 5 s, or it is killed; the second carries on
//   net:n1@30s/10s~30s        cut the network between replicator and node n1 at 30 s for 10 s, every 30 s
//   net:n1>n2@30s/10s         … only the n1→n2 direction's connections (both ends); n1>n2.capture only its
//                             reading of n1, n1>n2.sink only its writing into n2 (quote '>' in a shell)
//   net:n1@30s/25s:blackhole  … in one mode: drop (FIN), reset (RST) or blackhole (no FIN, no RST, no byte
//                             through until healed; held connections then resume, as TCP retransmits)
//   net:n1:writers@30s/5s     cut the writers' connections to n1 instead (a COMMIT in flight then has an
//                             unknown outcome, decided by its marker); net:n1:replicator@… is the default
//   net:n1@20s/30s:slow=50ms,1mbit  a slow link instead of a cut: each byte 50 ms late, at most 1 Mbit/s
//                             each way (either part may be left out; rates in kbit, mbit, gbit)
//   restart:n2@45s/3s         stop node n2's server at 45 s, start it 3 s later (or once it has stopped, if later)
//   restart:n2@45s/3s:abrupt  … in one mode: clean (SIGTERM shutdown) or abrupt (SIGKILL, crash recovery)
//   skew:n1@0s=-5s            n1's writers' clocks run 5 s behind from 0 s on (a positive offset: ahead)
//   skew:n2@0s~10s=3s,-2s     changing during the run: each occurrence takes the next offset of the list
//                             and holds until the next one; a single offset with ~ alternates its sign
// Without a mode, the occurrences of a net term alternate drop, reset, blackhole, and those of a restart
// term clean, abrupt; the first is always the gentle one (drop, clean). A fault that starts late (a busy
// event loop) still lasts its full duration from when it took effect; the report shows when that was.
import { InvalidOptionsError } from '../errors.ts';

export type FaultKind = 'kill' | 'net' | 'restart' | 'skew' | 'twin';
export type NetMode = 'drop' | 'reset' | 'blackhole' | 'slow';
export type RestartMode = 'clean' | 'abrupt';
export type FaultMode = NetMode | RestartMode;
/** Where a kill fault's failpoint kills the replicator (see the header). */
export type CommitPoint = 'after-statements' | 'commit-in-flight' | 'after-commit';
/** Which of a direction's connections a one-direction cut breaks: its reading of the source, its sink's writing into the target. */
export type LinkRole = 'capture' | 'sink';
/** Whose connections to the node a net fault cuts. */
export type NetTarget = 'replicator' | 'writers';

/** The modes net occurrences alternate through; slow is only ever asked for. */
export const NET_MODES: readonly NetMode[] = ['drop', 'reset', 'blackhole'];
export const RESTART_MODES: readonly RestartMode[] = ['clean', 'abrupt'];
export const COMMIT_POINTS: readonly CommitPoint[] = ['after-statements', 'commit-in-flight', 'after-commit'];

/** A slow link: every byte `latencyMs` late; at most `bytesPerSecond` each way (undefined: no limit). */
export interface SlowLink {
  latencyMs: number;
  bytesPerSecond?: number;
}

export interface Fault {
  kind: FaultKind;
  /** net, restart, skew: the node (net: the node whose connections are cut, or the direction's source). */
  node?: string;
  /** net: only the connections of the direction node → `to` (its `role` ones, or both kinds). */
  to?: string;
  role?: LinkRole;
  /** kill: at a commit point of the sink (a failpoint) instead of at once. */
  point?: CommitPoint;
  atMs: number;
  durationMs: number;
  everyMs?: number;
  skewMs?: number;
  /** skew: offsets the occurrences take in turn (a single one with a period alternates its sign). */
  skewsMs?: number[];
  /** net and restart: one mode for every occurrence; absent, occurrences alternate (see the header). */
  mode?: FaultMode;
  /** net in slow mode: latency and bandwidth. */
  slow?: SlowLink;
  /** net: whose connections (default the replicator's). */
  target?: NetTarget;
}

/** What one occurrence of a fault did, as measured (not as scheduled). */
export interface FaultEffect {
  kind: FaultKind;
  /** The node, or for a one-direction cut the link (`n1>n2`, `n1>n2.capture`). */
  node?: string;
  mode?: FaultMode;
  /** kill at a commit point: where. */
  point?: CommitPoint;
  /** skew: the offset this occurrence set. */
  skewMs?: number;
  target?: NetTarget;
  /** When it took effect, ms from the run's start. */
  atMs: number;
  /**
   * How long the broken state lasted, measured: kill until the replicator was started again, net until
   * the proxy healed, restart from the stop signal until the server accepted connections again, skew
   * until it was reset or changed (a skew for the rest of the run: until the run's scheduled end), twin
   * until the old instance had stopped.
   */
  downtimeMs: number;
  /** false when nothing was broken (e.g. a kill while the replicator was not running). */
  tookEffect: boolean;
  /** restart: how long the server took to stop; net: connections cut; why a fault had no effect. */
  stopMs?: number;
  connections?: number;
  note?: string;
  /** kill at a commit point, twin: what the harness observed (see FaultActions). */
  detail?: Record<string, unknown>;
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m)?$/;

export function parseDuration(text: string): number {
  const neg = text.startsWith('-');
  const m = DURATION.exec(neg || text.startsWith('+') ? text.slice(1) : text);
  if (!m) throw new InvalidOptionsError(`"${text}" is not a duration (e.g. 500ms, 10s, 2m)`);
  const n = Number(m[1]) * (m[2] === 'ms' ? 1 : m[2] === 'm' ? 60_000 : 1000);
  return neg ? -n : n;
}

const RATE = /^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$/;

/** `50ms`, `1mbit`, `50ms,1mbit`: a slow link's latency and bandwidth (bytes per second). */
export function parseSlowLink(text: string): SlowLink {
  const link: SlowLink = { latencyMs: 0 };
  for (const part of text.split(',').map((p) => p.trim())) {
    const rate = RATE.exec(part);
    if (rate) link.bytesPerSecond = (Number(rate[1]) * (rate[2] === 'kbit' ? 1e3 : rate[2] === 'mbit' ? 1e6 : 1e9)) / 8;
    else link.latencyMs = parseDuration(part);
  }
  if (link.latencyMs < 0 || link.bytesPerSecond === 0) throw new InvalidOptionsError(`slow link "${text}": latency and bandwidth must be positive`);
  return link;
}

const FAULT = /^(kill|net|restart|skew|twin)(?::([A-Za-z0-9_.>-]+(?::writers|:replicator)?))?@([^/~=:]+)(?:\/([^~=:]+))?(?:~([^=:]+))?(?:=([^:]+))?(?::([a-z]+)(?:=(.+))?)?$/;
const LINK = /^([A-Za-z0-9_-]+)(?:>([A-Za-z0-9_-]+)(?:\.(capture|sink))?)?$/;

/** Parses one fault term (see the header); throws naming what is wrong. */
export function parseFault(text: string): Fault {
  const m = FAULT.exec(text.trim());
  if (!m) {
    throw new InvalidOptionsError(
      `cannot parse fault "${text}" (e.g. kill@20s, kill:after-commit@20s, twin@20s/5s, net:n1@30s/10s~30s, net:n1>n2.sink@30s/10s:blackhole, net:n1:writers@30s/5s, net:n1@20s/30s:slow=50ms,1mbit, restart:n2@45s/3s:abrupt, skew:n1@0s=-5s)`,
    );
  }
  const kind = m[1] as FaultKind;
  const defaultMs = kind === 'kill' ? 1000 : kind === 'skew' ? Number.POSITIVE_INFINITY : 5000;
  const fault: Fault = { kind, atMs: parseDuration(m[3]!), durationMs: m[4] ? parseDuration(m[4]) : defaultMs };
  if (m[2] && kind === 'kill') {
    if (!(COMMIT_POINTS as readonly string[]).includes(m[2])) throw new InvalidOptionsError(`fault "${text}": a kill's commit point is one of ${COMMIT_POINTS.join(', ')} (got ${m[2]})`);
    fault.point = m[2] as CommitPoint;
  } else if (m[2]) {
    const [where, target] = m[2].split(':');
    const link = LINK.exec(where!);
    if (!link || (link[2] && kind !== 'net')) throw new InvalidOptionsError(`fault "${text}": "${where}" is not a node${kind === 'net' ? ' or a direction (n1>n2, n1>n2.capture, n1>n2.sink)' : ''}`);
    fault.node = link[1]!;
    if (link[2]) fault.to = link[2];
    if (link[3]) fault.role = link[3] as LinkRole;
    if (target) {
      if (kind !== 'net') throw new InvalidOptionsError(`fault "${text}": only a net fault takes a target (writers or replicator)`);
      if (link[2] && target === 'writers') throw new InvalidOptionsError(`fault "${text}": a direction's connections are the replicator's, not the writers'`);
      fault.target = target as NetTarget;
    }
  }
  if (m[5]) fault.everyMs = parseDuration(m[5]);
  if (kind === 'skew') {
    if (!m[6]) throw new InvalidOptionsError(`fault "${text}": a clock skew needs =<offset>, e.g. skew:n1@0s=-5s`);
    const offsets = m[6].split(',').map((o) => parseDuration(o.trim()));
    fault.skewMs = offsets[0]!;
    if (offsets.length > 1 || fault.everyMs !== undefined) fault.skewsMs = offsets.length > 1 ? offsets : [offsets[0]!, -offsets[0]!];
    // A changing skew holds each offset until the next occurrence sets its own.
    if (fault.everyMs !== undefined && !m[4]) fault.durationMs = fault.everyMs;
  } else if (m[6]) throw new InvalidOptionsError(`fault "${text}": only a clock skew takes =<offset>`);
  if (m[7]) {
    const modes: readonly string[] = kind === 'net' ? [...NET_MODES, 'slow'] : kind === 'restart' ? RESTART_MODES : [];
    if (!modes.includes(m[7])) {
      throw new InvalidOptionsError(`fault "${text}": ${modes.length ? `a ${kind} fault's mode is one of ${modes.join(', ')}` : `a ${kind} fault takes no mode`} (got ${m[7]})`);
    }
    fault.mode = m[7] as FaultMode;
  }
  if (fault.mode === 'slow') {
    if (!m[8]) throw new InvalidOptionsError(`fault "${text}": a slow link needs =<latency>,<bandwidth>, e.g. :slow=50ms,1mbit`);
    fault.slow = parseSlowLink(m[8]);
  } else if (m[8]) throw new InvalidOptionsError(`fault "${text}": only a slow link takes =<latency>,<bandwidth> after its mode`);
  if ((kind === 'net' || kind === 'restart' || kind === 'skew') && !fault.node) throw new InvalidOptionsError(`fault "${text}" needs a node, e.g. ${kind}:n1@...`);
  if ((kind === 'twin' || kind === 'kill') && fault.node) throw new InvalidOptionsError(`fault "${text}": a ${kind} fault acts on the replicator, not a node`);
  if (fault.to !== undefined && fault.to === fault.node) throw new InvalidOptionsError(`fault "${text}": a direction joins two different nodes`);
  const contiguousSkew = kind === 'skew' && fault.everyMs === fault.durationMs;
  if (fault.everyMs !== undefined && fault.everyMs <= fault.durationMs && !contiguousSkew) throw new InvalidOptionsError(`fault "${text}": the period must be longer than the duration`);
  return fault;
}

/** The link a net fault cuts, as written: `n1`, `n1>n2`, `n1>n2.sink`. */
export function linkOf(fault: Fault): string {
  return `${fault.node ?? ''}${fault.to ? `>${fault.to}` : ''}${fault.role ? `.${fault.role}` : ''}`;
}

/** Start times (ms from the run's start) of a fault within a run of `runMs`. */
export function occurrences(fault: Fault, runMs: number): number[] {
  const out: number[] = [];
  for (let t = fault.atMs; t < runMs; t += fault.everyMs ?? Number.POSITIVE_INFINITY) {
    out.push(t);
    if (fault.everyMs === undefined) break;
  }
  return out;
}

/** The clock offset a skew fault's `index`th occurrence sets. */
export function skewOf(fault: Fault, index: number): number {
  return fault.skewsMs ? fault.skewsMs[index % fault.skewsMs.length]! : (fault.skewMs ?? 0);
}

/** The mode of a fault's `index`th occurrence (0-based): its own, or the alternation. */
export function modeOf(fault: Fault, index: number): FaultMode | undefined {
  if (fault.mode) return fault.mode;
  if (fault.kind === 'net') return NET_MODES[index % NET_MODES.length];
  if (fault.kind === 'restart') return RESTART_MODES[index % RESTART_MODES.length];
  return undefined;
}

/** What a kill did: whether a replicator died, and for a commit-point kill what was observed. */
export interface KillOutcome {
  killed: boolean;
  note?: string;
  detail?: Record<string, unknown>;
}

export interface FaultActions {
  /**
   * Kills the replicator: at once, or at `point` of its sink's next target transaction (it kills
   * itself there). false / killed false when there was no replicator to kill or the point was not reached.
   */
  killReplicator(point?: CommitPoint): Promise<boolean | KillOutcome>;
  restartReplicator(): Promise<void>;
  /**
   * The number of connections the cut broke, froze or slowed on `link`: a node's (of the replicator or
   * of its writers, as `target` says), or a direction's (`n1>n2`, `n1>n2.sink`).
   */
  cutNetwork(link: string, mode: NetMode, target: NetTarget, slow?: SlowLink): number;
  healNetwork(link: string, target: NetTarget): void;
  stopServer(node: string, mode: RestartMode): Promise<void>;
  startServer(node: string): Promise<void>;
  setSkew(node: string, ms: number): void;
  /** Starts a second replicator beside the running one; resolves once the old one has stopped (or was killed after `withinMs`). */
  startTwin?(withinMs: number): Promise<KillOutcome>;
  log(message: string): void;
}

/**
 * Runs the schedule against a run of `runMs`; resolves when every fault has healed, with what each
 * occurrence did. Aborting `signal` heals what is broken now and skips what has not started.
 */
export async function runFaults(
  faults: readonly Fault[],
  runMs: number,
  actions: FaultActions,
  started = Date.now(),
  signal?: AbortSignal,
): Promise<FaultEffect[]> {
  const effects: FaultEffect[] = [];
  const now = () => Date.now() - started;
  // One abort listener for the whole schedule (a 2-minute seed waits on a dozen occurrences at
  // once; a listener each passed Node's limit of 10 and it warned of a leak): it ends every wait.
  const waiting = new Map<NodeJS.Timeout, () => void>();
  const abortAll = () => {
    for (const [timer, resolve] of waiting) {
      clearTimeout(timer);
      resolve();
    }
    waiting.clear();
  };
  signal?.addEventListener('abort', abortAll, { once: true });
  const at = (ms: number) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = setTimeout(() => {
        waiting.delete(timer);
        resolve();
      }, Math.max(0, started + ms - Date.now()));
      waiting.set(timer, resolve);
    });
  const tasks: Array<Promise<void>> = [];
  for (const f of faults) {
    for (const [index, t] of occurrences(f, runMs).entries()) {
      tasks.push(
        (async () => {
          await at(t);
          if (signal?.aborted) return;
          const node = f.node ?? '';
          const mode = modeOf(f, index);
          const begin = now();
          const effect: FaultEffect = {
            kind: f.kind,
            ...(f.node ? { node } : {}),
            ...(mode ? { mode } : {}),
            ...(f.point ? { point: f.point } : {}),
            ...(f.target ? { target: f.target } : {}),
            atMs: begin,
            downtimeMs: 0,
            tookEffect: true,
          };
          effects.push(effect);
          switch (f.kind) {
            case 'kill': {
              actions.log(`fault: SIGKILL replicator${f.point ? ` at its next ${f.point} point` : ''} at ${begin}ms`);
              const out = await actions.killReplicator(f.point);
              const outcome: KillOutcome = typeof out === 'boolean' ? { killed: out } : out;
              if (outcome.detail) effect.detail = outcome.detail;
              if (!outcome.killed) {
                effect.tookEffect = false;
                effect.note = outcome.note ?? 'the replicator was not running';
                return;
              }
              // A commit-point kill lands when a batch gets there: the downtime runs from the death.
              const died = now();
              await at(died + f.durationMs);
              await actions.restartReplicator();
              effect.downtimeMs = now() - died;
              actions.log(`fault: kill${f.point ? ` (${f.point})` : ''} healed after ${effect.downtimeMs}ms`);
              return;
            }
            case 'twin': {
              actions.log(`fault: a second replicator at ${begin}ms; the first must stop within ${f.durationMs}ms`);
              if (!actions.startTwin) throw new Error('this harness cannot start a second replicator');
              const outcome = await actions.startTwin(f.durationMs);
              effect.tookEffect = outcome.killed;
              if (outcome.note) effect.note = outcome.note;
              if (outcome.detail) effect.detail = outcome.detail;
              break;
            }
            case 'net': {
              const link = linkOf(f);
              const target = f.target ?? 'replicator';
              effect.node = link;
              const what = mode === 'slow' ? `slowed (${f.slow!.latencyMs}ms, ${f.slow!.bytesPerSecond ?? '∞'} B/s)` : `loss (${mode})`;
              actions.log(`fault: network ${what} on ${link}${target === 'writers' ? "'s writers" : ''} at ${begin}ms for ${f.durationMs}ms`);
              effect.connections = actions.cutNetwork(link, mode as NetMode, target, f.slow);
              await at(begin + f.durationMs);
              actions.healNetwork(link, target);
              break;
            }
            case 'restart': {
              actions.log(`fault: server ${node} stopped (${mode}) at ${begin}ms for ${f.durationMs}ms`);
              await actions.stopServer(node, mode as RestartMode);
              effect.stopMs = now() - begin;
              await at(begin + f.durationMs);
              await actions.startServer(node);
              break;
            }
            case 'skew': {
              const skewMs = skewOf(f, index);
              effect.skewMs = skewMs;
              actions.log(`fault: ${node} writers' clock ${skewMs}ms off at ${begin}ms`);
              actions.setSkew(node, skewMs);
              const last = f.everyMs === undefined || t + f.everyMs >= runMs;
              // A changing skew hands over to the next occurrence instead of resetting in between.
              if (!Number.isFinite(f.durationMs) || (f.durationMs === f.everyMs && last)) {
                effect.downtimeMs = Math.max(0, runMs - begin);
                effect.note = "until the run's end";
                return;
              }
              if (f.durationMs === f.everyMs) {
                effect.downtimeMs = f.everyMs;
                return;
              }
              await at(begin + f.durationMs);
              actions.setSkew(node, 0);
              break;
            }
          }
          effect.downtimeMs = now() - begin;
          actions.log(`fault: ${f.kind}${f.node ? ` ${node}` : ''}${mode ? ` (${mode})` : ''} healed after ${effect.downtimeMs}ms`);
        })(),
      );
    }
  }
  await Promise.all(tasks);
  signal?.removeEventListener('abort', abortAll);
  return effects.sort((a, b) => a.atMs - b.atMs);
}
