// Named fault switches in the pingcap/failpoint term syntax: `name=term;name2=term`, where
// term := [P%][N*]action[(arg)][->term], action ∈ off | return. Off by default; when no
// failpoint is enabled `eval` is one boolean check. They construct data loss, so they are on only
// when asked for explicitly: an option / --failpoints, or the environment with LWW_FAILPOINTS_ENABLE=1
// (a stray LWW_FAILPOINTS or GO_FAILPOINTS alone does nothing).
// The sinkKill* failpoints kill the process (SIGKILL: nothing flushed, no handler runs) at a commit
// point of a target transaction that carries data: after its data statements before COMMIT
// (sinkKillAfterStatements), with COMMIT sent and its reply unread (sinkKillCommitInFlight), after
// COMMIT returned before the checkpoint callback (sinkKillAfterCommit).
import { writeSync } from 'node:fs';
import { InvalidOptionsError } from '../errors.ts';

export const FAILPOINT_NAMES = ['mysqlSinkBypassLWW', 'sinkDropMessage', 'sinkMutateValue', 'sinkKillAfterStatements', 'sinkKillCommitInFlight', 'sinkKillAfterCommit'] as const;
export type FailpointName = (typeof FAILPOINT_NAMES)[number];

export type FailpointValue = boolean | number | string;

export interface FailpointTerm {
  /** Probability in 0..1 that the term fires on an evaluation. */
  probability: number;
  /** How many times the term may fire; Infinity when not bounded. */
  count: number;
  action: 'off' | 'return';
  value: FailpointValue;
}

const TERM_RE = /^(?:(\d+(?:\.\d+)?)%)?(?:(\d+)\*)?(off|return)(?:\((.*)\))?$/;

function parseValue(raw: string | undefined): FailpointValue {
  if (raw === undefined || raw === '') return true;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  if (/^-?\d+(\.\d+)?$/.test(raw)) return Number(raw);
  const quoted = /^"(.*)"$/.exec(raw);
  return quoted ? quoted[1]! : raw;
}

/** Parses one failpoint's term chain, e.g. `50%3*return(true)->off`. */
export function parseTerms(name: string, text: string): FailpointTerm[] {
  return text.split('->').map((part) => {
    const m = TERM_RE.exec(part.trim());
    if (!m) throw new InvalidOptionsError(`failpoint ${name}: cannot parse term "${part}" (expected e.g. return(true), 50%return(true), 3*return(true))`);
    const probability = m[1] === undefined ? 1 : Number(m[1]) / 100;
    if (probability < 0 || probability > 1) throw new InvalidOptionsError(`failpoint ${name}: percentage ${m[1]}% is outside 0..100`);
    const count = m[2] === undefined ? Number.POSITIVE_INFINITY : Number(m[2]);
    return { probability, count, action: m[3] as FailpointTerm['action'], value: parseValue(m[4]) };
  });
}

/** The term text of one failpoint in a `name=term;…` spec. */
function specOf(spec: string, name: string): string {
  const entry = spec.split(';').find((e) => e.slice(0, e.indexOf('=')).trim() === name)!;
  return entry.slice(entry.indexOf('=') + 1).trim();
}

/** Parses `name=term;name2=term` (the GO_FAILPOINTS format). */
export function parseFailpointSpec(spec: string): Map<FailpointName, FailpointTerm[]> {
  const result = new Map<FailpointName, FailpointTerm[]>();
  for (const entry of spec.split(';').map((s) => s.trim()).filter(Boolean)) {
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new InvalidOptionsError(`failpoints: "${entry}" is not name=term`);
    const name = entry.slice(0, eq).trim();
    if (!(FAILPOINT_NAMES as readonly string[]).includes(name)) {
      throw new InvalidOptionsError(`failpoints: unknown failpoint "${name}" (known: ${FAILPOINT_NAMES.join(', ')})`);
    }
    result.set(name as FailpointName, parseTerms(name, entry.slice(eq + 1)));
  }
  return result;
}

interface ActiveFailpoint {
  terms: FailpointTerm[];
  fired: number[];
  /** The term text as given (for status, metrics and the start-up warning). */
  spec: string;
}

/** The variable that must be 1 before LWW_FAILPOINTS / GO_FAILPOINTS are read. */
export const FAILPOINTS_ENV_OPT_IN = 'LWW_FAILPOINTS_ENABLE';

export class Failpoints {
  private readonly active = new Map<FailpointName, ActiveFailpoint>();
  private anyActive = false;

  constructor(
    spec: string | Partial<Record<FailpointName, string>> = '',
    private readonly random: () => number = Math.random,
  ) {
    const entries = typeof spec === 'string' ? [...parseFailpointSpec(spec)].map(([n]) => [n, specOf(spec, n)] as const) : Object.entries(spec);
    for (const [name, terms] of entries) if (terms !== undefined) this.enable(name as FailpointName, terms);
  }

  /**
   * Failpoints from LWW_FAILPOINTS (or GO_FAILPOINTS) — only when LWW_FAILPOINTS_ENABLE=1 is also set;
   * otherwise none, whatever those variables hold.
   */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, random?: () => number): Failpoints {
    if (env[FAILPOINTS_ENV_OPT_IN] !== '1') return new Failpoints('', random);
    return new Failpoints(env.LWW_FAILPOINTS ?? env.GO_FAILPOINTS ?? '', random);
  }

  /** Enabled failpoints and their terms, e.g. [{ name: 'sinkDropMessage', spec: '1%return(true)' }]. */
  list(): Array<{ name: FailpointName; spec: string }> {
    return [...this.active].map(([name, fp]) => ({ name, spec: fp.spec }));
  }

  /** `name=term;…` of the enabled failpoints ('' when none). */
  toString(): string {
    return this.list()
      .map((f) => `${f.name}=${f.spec}`)
      .join(';');
  }

  enable(name: FailpointName, term: string): void {
    if (!(FAILPOINT_NAMES as readonly string[]).includes(name)) {
      throw new InvalidOptionsError(`failpoints: unknown failpoint "${name}" (known: ${FAILPOINT_NAMES.join(', ')})`);
    }
    this.set(name, parseTerms(name, term), term.trim());
  }

  disable(name: FailpointName): void {
    this.active.delete(name);
    this.anyActive = this.active.size > 0;
  }

  private set(name: FailpointName, terms: FailpointTerm[], spec: string): void {
    this.active.set(name, { terms, fired: terms.map(() => 0), spec });
    this.anyActive = true;
  }

  get enabled(): boolean {
    return this.anyActive;
  }

  /** The value a failpoint returns on this evaluation, or undefined when it does not fire. */
  eval(name: FailpointName): FailpointValue | undefined {
    if (!this.anyActive) return undefined;
    const fp = this.active.get(name);
    if (!fp) return undefined;
    for (let i = 0; i < fp.terms.length; i++) {
      const term = fp.terms[i]!;
      if (fp.fired[i]! >= term.count) continue;
      if (term.action === 'off') return undefined;
      if (term.probability < 1 && this.random() >= term.probability) return undefined;
      fp.fired[i]!++;
      return term.value;
    }
    return undefined;
  }

  /** True when the failpoint fires with a truthy value. */
  on(name: FailpointName): boolean {
    const v = this.eval(name);
    return v !== undefined && v !== false && v !== 0;
  }
}

/**
 * Dies at once as kill -9 would, after one JSON line on stderr saying where (`{"failpoint": name, …detail}`),
 * written synchronously. `holdMs` first blocks the thread without running the event loop: bytes already
 * sent reach the server and its reply waits unread in the socket.
 */
export function killProcessAt(name: FailpointName, detail: Record<string, unknown>, holdMs = 0): never {
  const line = Buffer.from(`${JSON.stringify({ failpoint: name, pid: process.pid, ...detail }, (_, v) => (typeof v === 'bigint' ? v.toString() : v))}\n`);
  // stderr may be a non-blocking pipe: a full one says EAGAIN until the reader catches up.
  for (let off = 0, tries = 0; off < line.length && tries < 1000; tries++) {
    try {
      off += writeSync(2, line, off);
    } catch {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
  if (holdMs > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, holdMs);
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL to oneself is delivered before kill() returns; this is never reached.
  throw new Error('unreachable');
}
