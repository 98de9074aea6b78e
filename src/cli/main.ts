// `lww-sink <command> [args]`: finds the command and hands it the rest of argv.
// Add a command with one line in `commands`; its module exports `run(argv)` (exit code) and,
// optionally, `summary` (one line for --help).

interface CommandModule {
  run(argv: string[]): Promise<number>;
  summary?: string;
}

const commands: Record<string, () => Promise<CommandModule>> = {
  audit: () => import('./commands/audit.ts'),
  check: () => import('./commands/check.ts'),
  servers: () => import('./commands/servers.ts'),
  replicate: () => import('./commands/replicate.ts'),
  sync: () => import('./commands/sync.ts'),
  harness: () => import('./commands/harness.ts'),
  compare: () => import('./commands/compare.ts'),
  demo: () => import('./commands/demo.ts'),
  install: () => import('./commands/install.ts'),
  uninstall: () => import('./commands/uninstall.ts'),
};

async function usage(): Promise<string> {
  const names = Object.keys(commands).sort();
  const loaded = await Promise.allSettled(names.map((name) => commands[name]!()));
  const width = Math.max(...names.map((n) => n.length));
  const lines = names.map((name, i) => {
    const result = loaded[i];
    const summary = result?.status === 'fulfilled' ? (result.value.summary ?? '') : '';
    return `  ${name.padEnd(width)}  ${summary}`.trimEnd();
  });
  return ['usage: lww-sink <command> [args]', '', 'commands:', ...lines, '', 'lww-sink <command> --help shows its options.'].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    console.log(await usage());
    return name === undefined ? 2 : 0;
  }
  const load = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!load) {
    console.error(`lww-sink: unknown command "${name}"\n\n${await usage()}`);
    return 2;
  }
  try {
    return await (await load()).run(rest);
  } catch (e) {
    console.error(`lww-sink ${name}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

process.exit(await main(process.argv.slice(2)));
