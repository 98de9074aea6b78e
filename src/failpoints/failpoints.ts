// Named fault switches in the pingcap/failpoint term syntax: `name=term;name2=term`, where
// term := [P%][N*]action[(arg)][->term], action ∈ off | return. Off by default; when no
// failpoint is enabled `eval` is one boolean check.
import { InvalidOptionsError } from '../errors.ts';

export const FAILPOINT_NAMES = ['mysqlSinkBypassLWW', 'sinkDropMessage', 'sinkMutateValue'] as const;
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
}

export class Failpoints {
  private readonly active = new Map<FailpointName, ActiveFailpoint>();
  private anyActive = false;

  constructor(
    spec: string | Partial<Record<FailpointName, string>> = '',
    private readonly random: () => number = Math.random,
  ) {
    const entries = typeof spec === 'string' ? [...parseFailpointSpec(spec)] : Object.entries(spec).map(([n, t]) => [n, t] as const);
    for (const [name, terms] of entries) {
      if (terms === undefined) continue;
      if (typeof terms === 'string') this.enable(name as FailpointName, terms);
      else this.set(name as FailpointName, terms);
    }
  }

  /** Failpoints from LWW_FAILPOINTS (or GO_FAILPOINTS) in the environment. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, random?: () => number): Failpoints {
    return new Failpoints(env.LWW_FAILPOINTS ?? env.GO_FAILPOINTS ?? '', random);
  }

  enable(name: FailpointName, term: string): void {
    if (!(FAILPOINT_NAMES as readonly string[]).includes(name)) {
      throw new InvalidOptionsError(`failpoints: unknown failpoint "${name}" (known: ${FAILPOINT_NAMES.join(', ')})`);
    }
    this.set(name, parseTerms(name, term));
  }

  disable(name: FailpointName): void {
    this.active.delete(name);
    this.anyActive = this.active.size > 0;
  }

  private set(name: FailpointName, terms: FailpointTerm[]): void {
    this.active.set(name, { terms, fired: terms.map(() => 0) });
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
