// The replicator as a child process (`lww-sink replicate`), so the harness can SIGKILL it.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LwwError } from '../errors.ts';
import type { FailpointName } from '../failpoints/failpoints.ts';
import { builtIsCurrent } from './built-cli.ts';

// The CLI beside this module: compiled JS in the package, the TypeScript source (through tsx) in a checkout.
const SOURCE = import.meta.url.endsWith('.ts');
const MAIN = fileURLToPath(new URL(`../cli/main.${SOURCE ? 'ts' : 'js'}`, import.meta.url));
/** Node arguments that run `lww-sink` from the same tree as this module. */
export const CLI_NODE_ARGS: readonly string[] = SOURCE ? sourceCliArgs() : [MAIN];

/**
 * In a checkout, the compiled CLI when `npm run build` wrote it after the last change to any source file
 * (it starts in 0.3 s instead of tsx's 2 s: the tests and the harness spawn it hundreds of times); tsx
 * otherwise, so an edit is never run stale.
 */
function sourceCliArgs(): string[] {
  const built = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
  const srcRoot = fileURLToPath(new URL('..', import.meta.url));
  return builtIsCurrent(built, srcRoot) ? [built] : ['--import', 'tsx', MAIN];
}

export interface ReplicatorProcessOptions {
  nodes: string[];
  tables?: string[];
  /** Per-direction URLs (replicate's LWW_ROUTES), e.g. { 'n1>n2.sink': url }: one direction through its own proxies. */
  routes?: Readonly<Record<string, string>>;
  /** Failpoints for the replicator's sinks (`name=term;…`), passed as --failpoints. */
  failpoints?: string;
  batchRows?: number;
  /** More `replicate` flags (e.g. --gc-interval 30s --gc-margin 1m). */
  extraArgs?: readonly string[];
  /** Called with each JSON status line the replicator prints. */
  onStatus?: (status: unknown) => void;
  onLog?: (line: string) => void;
  /** Open an IPC channel and pass --failpoints-ipc, so failpoints can be armed while it runs (killAt). */
  ipc?: boolean;
  /** Called once, when the child exits without kill() or stop() (it crashed or gave up). */
  onUnexpectedExit?: (exit: ReplicatorExit) => void;
}

/** An exit the harness did not cause (no kill fault, no stop): the run has failed. */
export interface ReplicatorExit {
  code: number | null;
  signal: string | null;
  /** The replicator's last logged error (or, without one, its last line on stderr). */
  lastError?: string;
  /** Its last lines on stderr. */
  logTail: string[];
}

/** A direction's restarts (summed over the replicator's lives) and its last error. */
export interface DirectionReport {
  name: string;
  restarts: number;
  lastError?: string;
}

export class ReplicatorExitError extends LwwError {
  constructor(
    readonly exit: ReplicatorExit,
    readonly directions: DirectionReport[],
    readonly atMs?: number,
  ) {
    super(
      `the replicator exited unexpectedly ${exit.signal ? `on ${exit.signal}` : `with code ${exit.code}`}${atMs === undefined ? '' : ` at ${(atMs / 1000).toFixed(1)}s`}` +
        `${exit.lastError ? `; last error: ${exit.lastError}` : ''}`,
    );
  }
}

interface DirectionStatusLine {
  name: string;
  restarts?: number;
  lastError?: string;
}

// Enough for a usage error's line and the command's whole help text printed after it.
const TAIL_LINES = 40;

export class ReplicatorProcess {
  private child: ChildProcess | null = null;
  private exit: Promise<number | null> = Promise.resolve(null);
  /** Set while kill() or stop() ends the child on purpose. */
  private ending = false;
  private readonly tail: string[] = [];
  private lastErrorLine: string | undefined;
  private lastUsageLine: string | undefined;
  /** Directions' restarts and last errors of earlier lives of the child. */
  private readonly earlier = new Map<string, DirectionReport>();
  private lastExit: { code: number | null; signal: string | null } | undefined;
  /** The line a sinkKill* failpoint wrote before it killed the child (see killProcessAt). */
  private failpointHit: Record<string, unknown> | undefined;
  /** A commit-point kill is armed and awaited. */
  arming = false;
  kills = 0;
  starts = 0;
  lastStatus: unknown;
  /** The first exit the harness did not cause, if any. */
  unexpectedExit: ReplicatorExit | undefined;

  constructor(private readonly options: ReplicatorProcessOptions) {}

  /** Starts the child; does nothing while one runs (so overlapping kill faults never orphan one). */
  start(): void {
    if (this.running) return;
    const o = this.options;
    // Node URLs (with their passwords) go through the environment, never argv (visible in `ps`).
    const args = [...CLI_NODE_ARGS, 'replicate', '--json', '--progress-interval', '1'];
    if (o.tables?.length) args.push('--tables', o.tables.join(','));
    if (o.batchRows) args.push('--batch-rows', String(o.batchRows));
    if (o.failpoints) args.push('--failpoints', o.failpoints);
    if (o.ipc) args.push('--failpoints-ipc');
    args.push(...(o.extraArgs ?? []));
    const env: NodeJS.ProcessEnv = { ...process.env, LWW_NODES: o.nodes.join(',') };
    if (o.routes && Object.keys(o.routes).length > 0) env.LWW_ROUTES = Object.entries(o.routes).map(([k, url]) => `${k}=${url}`).join(' ');
    else delete env.LWW_ROUTES;
    for (const name of ['LWW_FAILPOINTS', 'GO_FAILPOINTS', 'LWW_FAILPOINTS_ENABLE']) delete env[name];
    const child = spawn(process.execPath, args, { stdio: o.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'], env });
    this.child = child;
    this.starts++;
    this.lastStatus = undefined;
    let buffered = '';
    child.stdout!.on('data', (d: Buffer) => {
      buffered += d.toString();
      let nl = buffered.indexOf('\n');
      while (nl >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        try {
          this.lastStatus = JSON.parse(line);
          o.onStatus?.(this.lastStatus);
        } catch {
          o.onLog?.(line);
        }
        nl = buffered.indexOf('\n');
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) {
        if (!line.trim()) continue;
        this.remember(line);
        o.onLog?.(line);
      }
    });
    this.exit = new Promise((resolve) =>
      // 'close', not 'exit': its last lines on stderr (an error, a failpoint's) are read by then.
      child.once('close', (code, signal) => {
        this.keepDirections();
        this.lastExit = { code, signal };
        if (!this.ending) this.unexpected({ code, signal, lastError: this.lastError, logTail: [...this.tail] });
        resolve(code);
      }),
    );
  }

  private unexpected(exit: ReplicatorExit): void {
    if (this.unexpectedExit) return;
    this.unexpectedExit = exit;
    this.options.onUnexpectedExit?.(exit);
  }

  private remember(line: string): void {
    // A usage problem is one plain line, and the help text after it can push it out of the tail.
    if (/^lww-sink\b/.test(line)) this.lastUsageLine = line;
    this.tail.push(line);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    try {
      const entry = JSON.parse(line) as { level?: number | string; msg?: string; error?: unknown; err?: { message?: string }; failpoint?: string };
      if (typeof entry.failpoint === 'string') this.failpointHit = entry as Record<string, unknown>;
      if (entry.level === 'error' || (typeof entry.level === 'number' && entry.level >= 50)) {
        const detail = typeof entry.error === 'string' ? entry.error : (entry.err?.message ?? (entry.error === undefined ? undefined : JSON.stringify(entry.error)));
        this.lastErrorLine = [entry.msg, detail].filter(Boolean).join(': ');
      }
    } catch {
      // a plain line (usage errors are printed as text)
    }
  }

  /** The last logged error, or the last plain line naming the command or an error (a usage problem), or the last line. */
  get lastError(): string | undefined {
    return this.lastErrorLine ?? this.lastUsageLine ?? [...this.tail].reverse().find((l) => /^lww-sink\b|error/i.test(l)) ?? this.tail.at(-1);
  }

  private keepDirections(): void {
    const dirs = (this.lastStatus as { directions?: DirectionStatusLine[] } | undefined)?.directions ?? [];
    for (const d of dirs) {
      const prior = this.earlier.get(d.name) ?? { name: d.name, restarts: 0 };
      prior.restarts += d.restarts ?? 0;
      if (d.lastError) prior.lastError = d.lastError;
      this.earlier.set(d.name, prior);
    }
    this.lastStatus = undefined;
  }

  /** Every direction's restarts over all lives of the child, and its last error. */
  directions(): DirectionReport[] {
    const out = new Map([...this.earlier].map(([k, v]) => [k, { ...v }]));
    for (const d of (this.lastStatus as { directions?: DirectionStatusLine[] } | undefined)?.directions ?? []) {
      const r = out.get(d.name) ?? { name: d.name, restarts: 0 };
      r.restarts += d.restarts ?? 0;
      if (d.lastError) r.lastError = d.lastError;
      out.set(d.name, r);
    }
    return [...out.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** kill -9: nothing is flushed; the next start resumes from the checkpoints. false when none ran. */
  async kill(): Promise<boolean> {
    if (!this.running) return false;
    this.kills++;
    this.ending = true;
    this.child!.kill('SIGKILL');
    await this.exit;
    this.ending = false;
    this.child = null;
    return true;
  }

  /**
   * Arms a sinkKill* failpoint in the running child (over IPC) and waits until it killed the child at
   * that point: the line it wrote then is `hit`. If no target transaction got there within
   * `timeoutMs`, it is disarmed and killed is false. Any other end of the child is an unexpected exit.
   */
  async killAt(failpoint: FailpointName, timeoutMs: number, afterArm?: () => Promise<void>): Promise<{ killed: boolean; hit?: Record<string, unknown>; note?: string }> {
    if (!this.options.ipc) throw new Error('killAt needs a replicator started with { ipc: true }');
    const deadline = Date.now() + timeoutMs;
    // After an earlier commit-point kill (and its restart), on a child that streams: its first status
    // line comes after it listens for failpoints, and a message sent earlier would be lost.
    while ((this.arming || !this.running || this.lastStatus === undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (this.arming || !this.running || this.lastStatus === undefined) return { killed: false, note: `the replicator did not stream within ${timeoutMs}ms` };
    const child = this.child!;
    this.arming = true;
    try {
      return await this.armAndWait(child, failpoint, Math.max(0, deadline - Date.now()), afterArm);
    } finally {
      this.arming = false;
    }
  }

  private async armAndWait(
    child: ChildProcess,
    failpoint: FailpointName,
    timeoutMs: number,
    afterArm?: () => Promise<void>,
  ): Promise<{ killed: boolean; hit?: Record<string, unknown>; note?: string }> {
    this.ending = true;
    this.failpointHit = undefined;
    await new Promise<void>((resolve, reject) => child.send({ failpoints: `${failpoint}=1*return(true)` }, (e) => (e ? reject(e) : resolve())));
    await afterArm?.().catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([this.exit.then(() => 'exit' as const), new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)))]);
    clearTimeout(timer);
    if (outcome === 'timeout' && this.running) {
      child.send({ failpoints: `${failpoint}=off` });
      this.ending = false;
      return { killed: false, note: `no target transaction with data reached ${failpoint} within ${timeoutMs}ms` };
    }
    await this.exit;
    this.ending = false;
    this.child = null;
    const hit = this.failpointHit as Record<string, unknown> | undefined;
    if (this.lastExit?.signal !== 'SIGKILL' || hit?.failpoint !== failpoint) {
      this.unexpected({ code: this.lastExit?.code ?? null, signal: this.lastExit?.signal ?? null, lastError: this.lastError, logTail: [...this.tail] });
      return { killed: false, note: `the replicator ended otherwise while ${failpoint} was armed` };
    }
    this.kills++;
    return { killed: true, hit };
  }

  /**
   * From now on the child may end on its own, as `expected` says it should (e.g. a replicator that
   * loses its checkpoints' ownership to a second instance); once `meanwhile` resolves, waits up to
   * `withinMs` for that end and kills it after that. An end `expected` refuses is an unexpected exit.
   */
  async awaitOwnEnd(
    withinMs: number,
    expected: (exit: ReplicatorExit) => boolean,
    meanwhile: () => Promise<unknown> = async () => undefined,
  ): Promise<{ ended: boolean; exit?: ReplicatorExit; ms: number }> {
    if (!this.running) return { ended: false, ms: 0 };
    this.ending = true;
    await meanwhile();
    const t0 = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([this.exit.then(() => 'exit' as const), new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), withinMs)))]);
    clearTimeout(timer);
    if (outcome === 'timeout') this.child?.kill('SIGKILL');
    await this.exit;
    this.ending = false;
    this.child = null;
    if (outcome === 'timeout') return { ended: false, ms: Date.now() - t0 };
    const exit: ReplicatorExit = { code: this.lastExit?.code ?? null, signal: this.lastExit?.signal ?? null, lastError: this.lastError, logTail: [...this.tail] };
    if (!expected(exit)) this.unexpected(exit);
    return { ended: true, exit, ms: Date.now() - t0 };
  }

  /** Resolves once this life of the child has printed a status line (it streams), or `timeoutMs` passed. */
  async ready(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while ((this.lastStatus === undefined || this.arming) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    return this.running && this.lastStatus !== undefined && !this.arming;
  }

  /** Graceful stop (SIGTERM); resolves with the exit code (null: it had to be killed, or none ran). */
  async stop(): Promise<number | null> {
    if (!this.child) return null;
    if (!this.running) {
      this.child = null;
      return null;
    }
    this.ending = true;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 15_000);
    const code = await this.exit;
    clearTimeout(timer);
    this.ending = false;
    this.child = null;
    return code;
  }
}
