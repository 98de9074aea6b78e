// Faults the harness schedules during a run, and the term syntax to ask for them:
//   kill@20s                  SIGKILL the replicator at 20 s, restart it 1 s later
//   net:n1@30s/10s~30s        cut the network between replicator and node n1 at 30 s for 10 s, every 30 s
//   net:n1@30s/25s:blackhole  … in one mode: drop (FIN), reset (RST) or blackhole (no FIN, no RST, no byte
//                             through until healed; held connections then resume, as TCP retransmits)
//   net:n1:writers@30s/5s     cut the writers' connections to n1 instead (a COMMIT in flight then has an
//                             unknown outcome, decided by its marker); net:n1:replicator@… is the default
//   restart:n2@45s/3s         stop node n2's server at 45 s, start it 3 s later (or once it has stopped, if later)
//   restart:n2@45s/3s:abrupt  … in one mode: clean (SIGTERM shutdown) or abrupt (SIGKILL, crash recovery)
//   skew:n1@0s=-5s            n1's writers' clocks run 5 s behind from 0 s on
// Without a mode, the occurrences of a net term alternate drop, reset, blackhole, and those of a restart
// term clean, abrupt; the first is always the gentle one (drop, clean). A fault that starts late (a busy
// event loop) still lasts its full duration from when it took effect; the report shows when that was.
import { InvalidOptionsError } from '../errors.ts';

export type FaultKind = 'kill' | 'net' | 'restart' | 'skew';
export type NetMode = 'drop' | 'reset' | 'blackhole';
export type RestartMode = 'clean' | 'abrupt';
export type FaultMode = NetMode | RestartMode;
/** Whose connections to the node a net fault cuts. */
export type NetTarget = 'replicator' | 'writers';

export const NET_MODES: readonly NetMode[] = ['drop', 'reset', 'blackhole'];
export const RESTART_MODES: readonly RestartMode[] = ['clean', 'abrupt'];

export interface Fault {
  kind: FaultKind;
  node?: string;
  atMs: number;
  durationMs: number;
  everyMs?: number;
  skewMs?: number;
  /** net and restart: one mode for every occurrence; absent, occurrences alternate (see the header). */
  mode?: FaultMode;
  /** net: whose connections (default the replicator's). */
  target?: NetTarget;
}

/** What one occurrence of a fault did, as measured (not as scheduled). */
export interface FaultEffect {
  kind: FaultKind;
  node?: string;
  mode?: FaultMode;
  target?: NetTarget;
  /** When it took effect, ms from the run's start. */
  atMs: number;
  /**
   * How long the broken state lasted, measured: kill until the replicator was started again, net until
   * the proxy healed, restart from the stop signal until the server accepted connections again, skew
   * until it was reset (a skew for the rest of the run: until the run's scheduled end).
   */
  downtimeMs: number;
  /** false when nothing was broken (e.g. a kill while the replicator was not running). */
  tookEffect: boolean;
  /** restart: how long the server took to stop; net: connections cut; why a fault had no effect. */
  stopMs?: number;
  connections?: number;
  note?: string;
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m)?$/;

export function parseDuration(text: string): number {
  const neg = text.startsWith('-');
  const m = DURATION.exec(neg ? text.slice(1) : text);
  if (!m) throw new InvalidOptionsError(`"${text}" is not a duration (e.g. 500ms, 10s, 2m)`);
  const n = Number(m[1]) * (m[2] === 'ms' ? 1 : m[2] === 'm' ? 60_000 : 1000);
  return neg ? -n : n;
}

const FAULT = /^(kill|net|restart|skew)(?::([A-Za-z0-9_-]+(?::writers|:replicator)?))?@([^/~=:]+)(?:\/([^~=:]+))?(?:~([^=:]+))?(?:=([^:]+))?(?::([a-z]+))?$/;

/** Parses one fault term (see the header); throws naming what is wrong. */
export function parseFault(text: string): Fault {
  const m = FAULT.exec(text.trim());
  if (!m) {
    throw new InvalidOptionsError(
      `cannot parse fault "${text}" (e.g. kill@20s, net:n1@30s/10s~30s, net:n1@30s/10s:blackhole, net:n1:writers@30s/5s, restart:n2@45s/3s:abrupt, skew:n1@0s=-5s)`,
    );
  }
  const kind = m[1] as FaultKind;
  const fault: Fault = { kind, atMs: parseDuration(m[3]!), durationMs: m[4] ? parseDuration(m[4]) : kind === 'kill' ? 1000 : kind === 'skew' ? Number.POSITIVE_INFINITY : 5000 };
  if (m[2]) {
    const [node, target] = m[2].split(':');
    fault.node = node!;
    if (target) {
      if (kind !== 'net') throw new InvalidOptionsError(`fault "${text}": only a net fault takes a target (writers or replicator)`);
      fault.target = target as NetTarget;
    }
  }
  if (m[5]) fault.everyMs = parseDuration(m[5]);
  if (kind === 'skew') {
    if (!m[6]) throw new InvalidOptionsError(`fault "${text}": a clock skew needs =<offset>, e.g. skew:n1@0s=-5s`);
    fault.skewMs = parseDuration(m[6]);
  } else if (m[6]) throw new InvalidOptionsError(`fault "${text}": only a clock skew takes =<offset>`);
  if (m[7]) {
    const modes: readonly string[] = kind === 'net' ? NET_MODES : kind === 'restart' ? RESTART_MODES : [];
    if (!modes.includes(m[7])) {
      throw new InvalidOptionsError(`fault "${text}": ${modes.length ? `a ${kind} fault's mode is one of ${modes.join(', ')}` : `a ${kind} fault takes no mode`} (got ${m[7]})`);
    }
    fault.mode = m[7] as FaultMode;
  }
  if ((kind === 'net' || kind === 'restart' || kind === 'skew') && !fault.node) throw new InvalidOptionsError(`fault "${text}" needs a node, e.g. ${kind}:n1@...`);
  if (fault.everyMs !== undefined && fault.everyMs <= fault.durationMs) throw new InvalidOptionsError(`fault "${text}": the period must be longer than the duration`);
  return fault;
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

/** The mode of a fault's `index`th occurrence (0-based): its own, or the alternation. */
export function modeOf(fault: Fault, index: number): FaultMode | undefined {
  if (fault.mode) return fault.mode;
  if (fault.kind === 'net') return NET_MODES[index % NET_MODES.length];
  if (fault.kind === 'restart') return RESTART_MODES[index % RESTART_MODES.length];
  return undefined;
}

export interface FaultActions {
  /** false when there was no replicator to kill. */
  killReplicator(): Promise<boolean>;
  restartReplicator(): Promise<void>;
  /** The number of connections the cut broke or froze. */
  cutNetwork(node: string, mode: NetMode, target: NetTarget): number;
  healNetwork(node: string, target: NetTarget): void;
  stopServer(node: string, mode: RestartMode): Promise<void>;
  startServer(node: string): Promise<void>;
  setSkew(node: string, ms: number): void;
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
  const at = (ms: number) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = setTimeout(done, Math.max(0, started + ms - Date.now()));
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      }
      signal?.addEventListener('abort', done, { once: true });
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
          const effect: FaultEffect = { kind: f.kind, ...(f.node ? { node } : {}), ...(mode ? { mode } : {}), ...(f.target ? { target: f.target } : {}), atMs: begin, downtimeMs: 0, tookEffect: true };
          effects.push(effect);
          switch (f.kind) {
            case 'kill':
              actions.log(`fault: SIGKILL replicator at ${begin}ms`);
              if (!(await actions.killReplicator())) {
                effect.tookEffect = false;
                effect.note = 'the replicator was not running';
                return;
              }
              await at(begin + f.durationMs);
              await actions.restartReplicator();
              break;
            case 'net':
              actions.log(`fault: network loss (${mode}) to ${node}${f.target === 'writers' ? "'s writers" : ''} at ${begin}ms for ${f.durationMs}ms`);
              effect.connections = actions.cutNetwork(node, mode as NetMode, f.target ?? 'replicator');
              await at(begin + f.durationMs);
              actions.healNetwork(node, f.target ?? 'replicator');
              break;
            case 'restart': {
              actions.log(`fault: server ${node} stopped (${mode}) at ${begin}ms for ${f.durationMs}ms`);
              await actions.stopServer(node, mode as RestartMode);
              effect.stopMs = now() - begin;
              await at(begin + f.durationMs);
              await actions.startServer(node);
              break;
            }
            case 'skew':
              actions.log(`fault: ${node} writers' clock ${f.skewMs}ms off at ${begin}ms`);
              actions.setSkew(node, f.skewMs ?? 0);
              if (!Number.isFinite(f.durationMs)) {
                effect.downtimeMs = Math.max(0, runMs - begin);
                effect.note = "until the run's end";
                return;
              }
              await at(begin + f.durationMs);
              actions.setSkew(node, 0);
              break;
          }
          effect.downtimeMs = now() - begin;
          actions.log(`fault: ${f.kind}${f.node ? ` ${node}` : ''}${mode ? ` (${mode})` : ''} healed after ${effect.downtimeMs}ms`);
        })(),
      );
    }
  }
  await Promise.all(tasks);
  return effects.sort((a, b) => a.atMs - b.atMs);
}
