// Flag parsing every command shares: --help, usage errors (exit 2), URL and node checks.
import { type ParseArgsConfig, parseArgs } from 'node:util';

type Parsed<O extends Options> = ReturnType<typeof parseArgs<{ options: O & { help: { type: 'boolean'; short: 'h' } }; strict: true; allowPositionals: false }>>['values'];
import { parseUrl, redactUrl } from '../db/connection.ts';
import { parseTableRef } from '../install/table-list.ts';
import { splitTableList } from './commands/table-flags.ts';
import { Failpoints } from '../failpoints/failpoints.ts';
import { EXIT_CODE_HELP, GLOBAL_HELP } from './exit-codes.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parses a command's flags; prints help (exit 0) or the problem with the usage (exit 2) itself. */
export function parseCommandArgs<const O extends Options>(
  command: string,
  help: string,
  argv: string[],
  options: O,
): { ok: true; values: Parsed<O> } | { ok: false; exit: number } {
  try {
    const { values } = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } } as O, allowPositionals: false, strict: true });
    if ((values as { help?: boolean }).help) {
      console.log(`${help.trimEnd()}\n\n${GLOBAL_HELP}\n\n${EXIT_CODE_HELP}`);
      return { ok: false as const, exit: 0 };
    }
    return { ok: true as const, values };
  } catch (e) {
    console.error(`lww-sink ${command}: ${(e as Error).message}\n\n${help}`);
    return { ok: false as const, exit: 2 };
  }
}

/** Prints the problems of a command line (if any) and returns 2, else undefined. */
export function usageProblems(command: string, problems: ReadonlyArray<string | false | undefined>, help?: string): number | undefined {
  const real = problems.filter((p): p is string => typeof p === 'string' && p !== '');
  if (real.length === 0) return undefined;
  console.error(`lww-sink ${command}: ${real.join('; ')}${help ? `\n\n${help}` : ''}`);
  return 2;
}

/** '' when the URL parses, else what is wrong with it (password redacted). */
export function urlProblem(flag: string, url: string): string {
  try {
    parseUrl(url);
    return '';
  } catch (e) {
    return `--${flag} ${redactUrl(url)}: ${(e as Error).message}`;
  }
}

/** Problems with a list of --node URLs: at least `min`, each a mysql:// URL. */
export function nodeProblems(nodes: readonly string[], min = 2): string[] {
  return [nodes.length < min ? `give at least ${min === 2 ? 'two' : min} --node URLs (got ${nodes.length})` : '', ...nodes.map((u) => urlProblem('node', u))];
}

/** An integer flag ≥ min, or the problem with it. */
export function integerFlag(flag: string, text: string, min: number): number | string {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min) return `--${flag} must be an integer >= ${min} (got "${text}")`;
  return n;
}

/** Problems with a --tables list of schema.table names. */
export function tableListProblems(tables: readonly string[] | undefined): string[] {
  if (tables === undefined) return [];
  if (tables.length === 0) return ['--tables is empty'];
  return tables.map((t) => {
    try {
      parseTableRef(t);
      return '';
    } catch (e) {
      return `--tables: ${(e as Error).message}`;
    }
  });
}

/** --tables split at commas outside backticks (`` `my.db`.`t,1` ``), or the problem with it. */
export function tableListFlag(text: string | undefined): string[] | string | undefined {
  if (text === undefined) return undefined;
  try {
    return splitTableList(text);
  } catch (e) {
    return (e as Error).message;
  }
}

/** A renamed flag's value: the new name, else the old one (kept for old scripts) with a warning on stderr. */
export function renamedFlag(command: string, values: Record<string, unknown>, name: string, oldName: string): string | undefined {
  const old = values[oldName];
  if (old === undefined) return values[name] as string | undefined;
  console.error(`lww-sink ${command}: --${oldName} is deprecated; use --${name}`);
  return (values[name] as string | undefined) ?? (old as string);
}

/** Failpoints from --failpoints, or the problem with the spec. */
export function failpointsFlag(spec: string | undefined): Failpoints | string | undefined {
  if (spec === undefined) return undefined;
  try {
    return new Failpoints(spec);
  } catch (e) {
    return `--failpoints: ${(e as Error).message}`;
  }
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration flag (`500ms`, `30s`, `10m`, `2h`, `7d`; a bare number is seconds) in ms, or the problem with it. */
export function durationFlag(flag: string, text: string, minMs = 0): number | string {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  const ms = m ? Math.round(Number(m[1]) * DURATION_UNITS[m[2] ?? 's']!) : Number.NaN;
  if (!Number.isSafeInteger(ms) || ms < minMs) return `--${flag} must be a duration such as 30s, 10m, 7d${minMs > 0 ? ` (at least ${minMs} ms)` : ''} (got "${text}")`;
  return ms;
}
