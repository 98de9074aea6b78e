// `lww-sink <command> [args]`: finds the command and hands it the rest of argv.
// Add a command with one line in `commands` (its module exports `run(argv)`, returning the exit
// code). Summaries live here so `--help` loads no command module (and no driver): it starts fast.
import { readFileSync } from 'node:fs';
import { describeError, EXIT, EXIT_CODE_HELP, exitCodeOf, GLOBAL_HELP } from './exit-codes.ts';
import { InvalidOptionsError } from '../errors.ts';
import { redactSecrets } from '../db/url.ts';

interface CommandModule {
  run(argv: string[]): Promise<number>;
}

const commands: Record<string, { summary: string; load: () => Promise<CommandModule> }> = {
  audit: { summary: 'check from the binlogs that replication kept the LWW rules over a window (history audit)', load: () => import('./commands/audit.ts') },
  check: { summary: 'compare the current data of two or more nodes (state check)', load: () => import('./commands/check.ts') },
  compare: { summary: 'run the same workload with LWW and with REPLACE INTO and show what each did to the data', load: () => import('./commands/compare.ts') },
  demo: { summary: 'a short LWW vs REPLACE run on two local servers (what `npm run demo` runs)', load: () => import('./commands/demo.ts') },
  gc: { summary: 'remove tombstones every peer has applied, and old conflict-log/progress rows (--dry-run reports)', load: () => import('./commands/gc.ts') },
  harness: { summary: 'run writers on two fresh servers with replication both ways, inject faults, then check convergence', load: () => import('./commands/harness.ts') },
  install: { summary: 'prepare tables for LWW replication: version column, tombstones, triggers (idempotent)', load: () => import('./commands/install.ts') },
  replicate: { summary: 'replicate both ways between nodes with last-write-wins (runs until Ctrl-C)', load: () => import('./commands/replicate.ts') },
  servers: { summary: 'start throwaway MySQL 9.7 / MariaDB 10.11 servers (up) or stop them (down)', load: () => import('./commands/servers.ts') },
  sync: { summary: 'merge tables between nodes with last-write-wins, both ways (repair; --dry-run counts)', load: () => import('./commands/sync.ts') },
  uninstall: { summary: 'remove what install added (triggers, tombstones, the version column it added)', load: () => import('./commands/uninstall.ts') },
};

/** The package version (package.json sits two folders up from both src/cli and dist/cli). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function usage(): string {
  const names = Object.keys(commands).sort();
  const width = Math.max(...names.map((n) => n.length));
  const lines = names.map((name) => `  ${name.padEnd(width)}  ${commands[name]!.summary}`);
  return [
    'usage: lww-sink <command> [args]',
    '',
    'commands:',
    ...lines,
    '',
    'lww-sink <command> --help shows its options; lww-sink --version prints the version.',
    '',
    GLOBAL_HELP,
    '',
    EXIT_CODE_HELP,
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    console.log(packageVersion());
    return EXIT.ok;
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    console.error(`lww-sink: unknown command "${name}"\n\n${usage()}`);
    return EXIT.usage;
  }
  let args: string[];
  try {
    // Loaded only when a command runs (pino, zod): --help and --version stay fast.
    const [{ levelFromEnv, LOG_LEVELS }, { applyConfig, takeFlag }] = await Promise.all([import('../log/logger.ts'), import('./config.ts')]);
    const format = takeFlag(rest, 'log-format');
    if (format.value !== undefined && format.value !== 'json' && format.value !== 'text') {
      throw new InvalidOptionsError(`--log-format must be json or text (got "${format.value}")`);
    }
    if (format.value !== undefined) process.env.LWW_LOG_FORMAT = format.value;
    const level = levelFromEnv();
    if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new InvalidOptionsError(level);
    args = applyConfig(name, format.rest);
  } catch (e) {
    console.error(`lww-sink ${name}: ${redactSecrets(e instanceof Error ? e.message : String(e))}`);
    return EXIT.usage;
  }
  try {
    return await (await command.load()).run(args);
  } catch (e) {
    console.error(`lww-sink ${name}: ${describeError(e)}`);
    return exitCodeOf(e);
  }
}

process.exit(await main(process.argv.slice(2)));
