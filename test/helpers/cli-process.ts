// Runs the lww-sink CLI as a child process (for kill -9 tests and the harness).
import { type ChildProcess, spawn } from 'node:child_process';
import { CLI_NODE_ARGS } from '../../src/harness/replicator-process.ts';

export interface CliProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

/** `env` is added to this process's environment. */
export function spawnCli(args: string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, [...CLI_NODE_ARGS, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}
