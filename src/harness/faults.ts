// Faults the harness schedules during a run, and the term syntax to ask for them:
//   kill@20s            SIGKILL the replicator at 20 s, restart it 1 s later
//   net:n1@30s/10s~30s  cut the network between replicator and node n1 at 30 s for 10 s, every 30 s
//   restart:n2@45s/3s   stop node n2's server at 45 s, start it 3 s later
//   skew:n1@0s=-5s      n1's writers' clocks run 5 s behind from 0 s on
import { InvalidOptionsError } from '../errors.ts';

export type FaultKind = 'kill' | 'net' | 'restart' | 'skew';

export interface Fault {
  kind: FaultKind;
  node?: string;
  atMs: number;
  durationMs: number;
  everyMs?: number;
  skewMs?: number;
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m)?$/;

export function parseDuration(text: string): number {
  const neg = text.startsWith('-');
  const m = DURATION.exec(neg ? text.slice(1) : text);
  if (!m) throw new InvalidOptionsError(`"${text}" is not a duration (e.g. 500ms, 10s, 2m)`);
  const n = Number(m[1]) * (m[2] === 'ms' ? 1 : m[2] === 'm' ? 60_000 : 1000);
  return neg ? -n : n;
}

const FAULT = /^(kill|net|restart|skew)(?::([A-Za-z0-9_-]+))?@([^/~=]+)(?:\/([^~=]+))?(?:~([^=]+))?(?:=(.+))?$/;

/** Parses one fault term (see the header); throws naming what is wrong. */
export function parseFault(text: string): Fault {
  const m = FAULT.exec(text.trim());
  if (!m) throw new InvalidOptionsError(`cannot parse fault "${text}" (e.g. kill@20s, net:n1@30s/10s~30s, restart:n2@45s/3s, skew:n1@0s=-5s)`);
  const kind = m[1] as FaultKind;
  const fault: Fault = { kind, atMs: parseDuration(m[3]!), durationMs: m[4] ? parseDuration(m[4]) : kind === 'kill' ? 1000 : kind === 'skew' ? Number.POSITIVE_INFINITY : 5000 };
  if (m[2]) fault.node = m[2];
  if (m[5]) fault.everyMs = parseDuration(m[5]);
  if (kind === 'skew') {
    if (!m[6]) throw new InvalidOptionsError(`fault "${text}": a clock skew needs =<offset>, e.g. skew:n1@0s=-5s`);
    fault.skewMs = parseDuration(m[6]);
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

export interface FaultActions {
  killReplicator(): Promise<void>;
  restartReplicator(): Promise<void>;
  cutNetwork(node: string): void;
  healNetwork(node: string): void;
  stopServer(node: string): Promise<void>;
  startServer(node: string): Promise<void>;
  setSkew(node: string, ms: number): void;
  log(message: string): void;
}

/** Runs the schedule against a run of `runMs`; resolves when every fault has healed. */
export async function runFaults(faults: readonly Fault[], runMs: number, actions: FaultActions, started = Date.now()): Promise<number> {
  const tasks: Array<Promise<void>> = [];
  let injected = 0;
  const at = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, started + ms - Date.now())));
  for (const f of faults) {
    for (const t of occurrences(f, runMs)) {
      injected++;
      tasks.push(
        (async () => {
          await at(t);
          const node = f.node ?? '';
          switch (f.kind) {
            case 'kill':
              actions.log(`fault: SIGKILL replicator at ${t}ms`);
              await actions.killReplicator();
              await at(t + f.durationMs);
              await actions.restartReplicator();
              break;
            case 'net':
              actions.log(`fault: network loss to ${node} at ${t}ms for ${f.durationMs}ms`);
              actions.cutNetwork(node);
              await at(t + f.durationMs);
              actions.healNetwork(node);
              break;
            case 'restart':
              actions.log(`fault: server ${node} stopped at ${t}ms for ${f.durationMs}ms`);
              await actions.stopServer(node);
              await at(t + f.durationMs);
              await actions.startServer(node);
              break;
            case 'skew':
              actions.log(`fault: ${node} writers' clock ${f.skewMs}ms off at ${t}ms`);
              actions.setSkew(node, f.skewMs ?? 0);
              if (Number.isFinite(f.durationMs)) {
                await at(t + f.durationMs);
                actions.setSkew(node, 0);
              }
              break;
          }
        })(),
      );
    }
  }
  await Promise.all(tasks);
  return injected;
}
