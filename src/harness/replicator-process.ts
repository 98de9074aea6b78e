// The replicator as a child process (`lww-sink replicate`), so the harness can SIGKILL it.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LwwError } from '../errors.ts';

// The CLI beside this module: compiled JS in the package, the TypeScript source (through tsx) in a checkout.
const SOURCE = import.meta.url.endsWith('.ts');
const MAIN = fileURLToPath(new URL(`../cli/main.${SOURCE ? 'ts' : 'js'}`, import.meta.url));
/** Node arguments that run `lww-sink` from the same tree as this module. */
export const CLI_NODE_ARGS: readonly string[] = SOURCE ? ['--import', 'tsx', MAIN] : [MAIN];

export interface ReplicatorProcessOptions {
  nodes: string[];
  tables?: string[];
  /** Failpoints for the replicator's sinks (`name=term;…`), passed as --failpoints. */
  failpoints?: string;
  batchRows?: number;
  /** More `replicate` flags (e.g. --gc-interval 30s --gc-margin 1m). */
  extraArgs?: readonly string[];
  /** Called with each JSON status line the replicator prints. */
  onStatus?: (status: unknown) => void;
  onLog?: (line: string) => void;
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
  /** Directions' restarts and last errors of earlier lives of the child. */
  private readonly earlier = new Map<string, DirectionReport>();
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
    args.push(...(o.extraArgs ?? []));
    const env: NodeJS.ProcessEnv = { ...process.env, LWW_NODES: o.nodes.join(',') };
    for (const name of ['LWW_FAILPOINTS', 'GO_FAILPOINTS', 'LWW_FAILPOINTS_ENABLE']) delete env[name];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
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
      child.once('exit', (code, signal) => {
        this.keepDirections();
        if (!this.ending && !this.unexpectedExit) {
          this.unexpectedExit = { code, signal, lastError: this.lastError, logTail: [...this.tail] };
          o.onUnexpectedExit?.(this.unexpectedExit);
        }
        resolve(code);
      }),
    );
  }

  private remember(line: string): void {
    this.tail.push(line);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    try {
      const entry = JSON.parse(line) as { level?: number | string; msg?: string; error?: unknown; err?: { message?: string } };
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
    return this.lastErrorLine ?? [...this.tail].reverse().find((l) => /^lww-sink\b|error/i.test(l)) ?? this.tail.at(-1);
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
