// The replicator as a child process (`lww-sink replicate`), so the harness can SIGKILL it.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

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
}

export class ReplicatorProcess {
  private child: ChildProcess | null = null;
  private exit: Promise<number | null> = Promise.resolve(null);
  kills = 0;
  starts = 0;
  lastStatus: unknown;

  constructor(private readonly options: ReplicatorProcessOptions) {}

  start(): void {
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
      for (const line of d.toString().split('\n')) if (line.trim()) o.onLog?.(line);
    });
    this.exit = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** kill -9: nothing is flushed; the next start resumes from the checkpoints. */
  async kill(): Promise<void> {
    if (!this.child) return;
    this.kills++;
    this.child.kill('SIGKILL');
    await this.exit;
    this.child = null;
  }

  /** Graceful stop (SIGTERM); resolves with the exit code. */
  async stop(): Promise<number | null> {
    if (!this.child) return null;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 15_000);
    const code = await this.exit;
    clearTimeout(timer);
    this.child = null;
    return code;
  }
}
