// `lww-sink servers up|down`: throwaway servers for trying the sink by hand.
// `up` runs in the foreground until SIGINT/SIGTERM, then destroys its servers; a state file lets
// `down` (from another shell) find and signal it.
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import {
  type Engine,
  type ServerEndpoint,
  endpointOf,
  isProcessRunning,
  isProviderName,
  processStartTime,
  reapStaleInstances,
  startServers,
} from '../../servers/index.ts';

export const summary = 'start throwaway MySQL 9.7 / MariaDB 10.11 servers (up) or stop them (down)';

const HELP = `usage:
  lww-sink servers up [--engine mysql|mariadb] [--count 2] [--provider local|testcontainers|external] [--json]
      Starts the servers, prints their URLs (or a JSON array of endpoints with --json) and runs
      until Ctrl-C / SIGTERM or \`lww-sink servers down\`, then removes them.
  lww-sink servers down
      Stops the servers a \`servers up\` started and waits until they are gone.`;

interface UpState {
  pid: number;
  /** Guards against signalling an unrelated process that reused the pid. */
  startTime: string | undefined;
  servers: ServerEndpoint[];
}

function stateFile(): string {
  return process.env.LWW_SERVERS_STATE_FILE || join(tmpdir(), 'mysql-lww-sink', 'servers-up.json');
}

async function readState(): Promise<UpState | undefined> {
  const text = await readFile(stateFile(), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as UpState;
  } catch {
    return undefined;
  }
}

function isAlive(state: UpState): boolean {
  return isProcessRunning(state.pid) && (!state.startTime || processStartTime(state.pid) === state.startTime);
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'up') return up(rest);
  if (sub === 'down') return down(rest);
  if (sub === '--help' || sub === '-h') {
    console.log(HELP);
    return 0;
  }
  console.error(sub === undefined ? HELP : `lww-sink servers: unknown subcommand "${sub}"\n\n${HELP}`);
  return 2;
}

async function up(argv: string[]): Promise<number> {
  let values: { engine: string; count: string; provider?: string; json: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        engine: { type: 'string', default: 'mysql' },
        count: { type: 'string', default: '2' },
        provider: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    console.error(`lww-sink servers up: ${(e as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const count = Number(values.count);
  const problems = [
    values.engine !== 'mysql' && values.engine !== 'mariadb' ? `--engine must be mysql or mariadb (got "${values.engine}")` : '',
    !Number.isInteger(count) || count < 1 ? `--count must be a positive integer (got "${values.count}")` : '',
    values.provider !== undefined && !isProviderName(values.provider)
      ? `--provider must be local, testcontainers or external (got "${values.provider}")`
      : '',
  ].filter(Boolean);
  if (problems.length > 0) {
    console.error(`lww-sink servers up: ${problems.join('; ')}`);
    return 2;
  }

  const previous = await readState();
  if (previous && isAlive(previous)) {
    console.error(`lww-sink servers up: servers are already up (pid ${previous.pid}); run \`lww-sink servers down\` first`);
    return 1;
  }

  // Listening before the servers exist, so a Ctrl-C during startup still cleans up. The listeners
  // stay until the servers are destroyed: while they exist, the provider's own handler stands back.
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  let onSignal: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => {
    onSignal = () => resolve();
  });
  for (const s of signals) process.on(s, onSignal);
  const keepAlive = setInterval(() => undefined, 1 << 30);
  try {
    const servers = await startServers({
      engine: values.engine as Engine,
      count,
      provider: values.provider !== undefined && isProviderName(values.provider) ? values.provider : undefined,
    });
    try {
      const endpoints = servers.map(endpointOf);
      const state: UpState = { pid: process.pid, startTime: processStartTime(process.pid), servers: endpoints };
      await mkdir(dirname(stateFile()), { recursive: true });
      await writeFile(stateFile(), `${JSON.stringify(state, null, 2)}\n`);
      console.log(values.json ? JSON.stringify(endpoints, null, 2) : endpoints.map((e) => e.url).join('\n'));
      console.error(`${count} ${values.engine} server(s) up; stop with Ctrl-C or \`lww-sink servers down\``);
      await stopped;
    } finally {
      await Promise.allSettled(servers.map((s) => s.destroy()));
      const current = await readState();
      if (current?.pid === process.pid) await rm(stateFile(), { force: true });
    }
  } finally {
    for (const s of signals) process.removeListener(s, onSignal);
    clearInterval(keepAlive);
  }
  return 0;
}

async function down(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(HELP);
    return 0;
  }
  if (argv.length > 0) {
    console.error(`lww-sink servers down: takes no arguments\n\n${HELP}`);
    return 2;
  }
  const state = await readState();
  if (!state) {
    console.error(`no servers are up (no state file at ${stateFile()})`);
    return 0;
  }
  if (isAlive(state)) {
    process.kill(state.pid, 'SIGTERM');
    for (let i = 0; i < 1200 && isProcessRunning(state.pid); i++) await sleep(50);
    if (isProcessRunning(state.pid)) {
      console.error(`lww-sink servers down: process ${state.pid} is still running after 60 s`);
      return 1;
    }
  } else {
    // Its owner died without cleaning up: remove what it left.
    await reapStaleInstances();
  }
  await rm(stateFile(), { force: true });
  console.error(`stopped ${state.servers.length} server(s)`);
  return 0;
}
