// Where nodes and options come from besides the command line, so no password has to be in argv
// (visible in `ps`): a config file (`--config FILE`, validated with zod; errors name the field) and
// environment variables (LWW_NODES for --node, LWW_URL for --url). Flags given on the command line
// win; the file's values become the command's flags before its own parsing and checks run.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { formatUrl, registerSecret } from '../db/url.ts';
import { InvalidOptionsError } from '../errors.ts';

const port = z.number().int().min(1).max(65535);
const nodeObject = z
  .object({
    /** A whole URL; or host/port/user/password (the password may instead come from the variable passwordEnv names). */
    url: z.string().min(1).optional(),
    host: z.string().min(1).optional(),
    port: port.optional(),
    user: z.string().min(1).optional(),
    password: z.string().optional(),
    passwordEnv: z.string().min(1).optional(),
    /** This node's id (install: `--node-id N` picks the node with id N). */
    nodeId: z.number().int().min(0).max(1023).optional(),
  })
  .strict()
  .refine((n) => (n.url === undefined) !== (n.host === undefined), { message: 'give exactly one of url and host' })
  .refine((n) => n.url === undefined || (n.port ?? n.user ?? n.password ?? n.passwordEnv) === undefined, {
    message: 'with url, give no port, user, password or passwordEnv (they are part of the url)',
  });
const flagValue = z.union([z.string(), z.number(), z.boolean(), z.array(z.string())]);

export const configSchema = z
  .object({
    nodes: z.array(z.union([z.string().min(1), nodeObject])).min(1).optional(),
    tables: z.array(z.string().min(1)).min(1).optional(),
    schema: z.string().min(1).optional(),
    metaSchema: z.string().min(1).optional(),
    versionColumn: z.string().min(1).optional(),
    /** Per command, flags by their long name without dashes: { "replicate": { "batch-rows": 512 } }. */
    options: z.record(z.string(), z.record(z.string(), flagValue)).optional(),
  })
  .strict();
export type ConfigFile = z.infer<typeof configSchema>;
type NodeEntry = NonNullable<ConfigFile['nodes']>[number];

/** What each command takes from the file (and the environment). */
const ACCEPTS: Record<string, { nodes?: 'node' | 'url'; flags: Array<'tables' | 'schema' | 'metaSchema' | 'versionColumn'> }> = {
  check: { nodes: 'node', flags: ['tables', 'metaSchema', 'versionColumn'] },
  audit: { nodes: 'node', flags: ['tables', 'metaSchema', 'versionColumn'] },
  replicate: { nodes: 'node', flags: ['tables', 'schema', 'metaSchema'] },
  sync: { nodes: 'node', flags: ['tables', 'metaSchema', 'versionColumn'] },
  gc: { nodes: 'node', flags: ['metaSchema'] },
  install: { nodes: 'url', flags: ['tables', 'schema', 'metaSchema', 'versionColumn'] },
  uninstall: { nodes: 'url', flags: ['tables', 'schema', 'metaSchema'] },
};
const FLAG_OF = { tables: 'tables', schema: 'schema', metaSchema: 'meta-schema', versionColumn: 'version-column' } as const;

function problemText(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[] = []): string {
  return issues
    .map((i) => {
      const path = [...prefix, ...i.path];
      // A node is a URL string or an object: report the object's own problems, not "invalid input".
      if (i.code === 'invalid_union') {
        const branch = i.errors.find((b) => b.some((e) => e.path.length > 0));
        if (branch) return problemText(branch, path);
      }
      const where = path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '');
      return `${where || '(top level)'}: ${i.message}`;
    })
    .join('; ');
}

/** Reads and validates a config file; errors name the file and the field. */
export function loadConfig(file: string): ConfigFile {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new InvalidOptionsError(`--config ${file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new InvalidOptionsError(`--config ${file}: not valid JSON (${(e as Error).message})`);
  }
  const r = configSchema.safeParse(data);
  if (!r.success) throw new InvalidOptionsError(`--config ${file}: ${problemText(r.error.issues)}`);
  return r.data;
}

function nodeUrl(node: NodeEntry, index: number, env: NodeJS.ProcessEnv): string {
  if (typeof node === 'string') return node;
  if (node.url !== undefined) return node.url;
  let password = node.password;
  if (node.passwordEnv !== undefined) {
    password = env[node.passwordEnv];
    if (password === undefined) throw new InvalidOptionsError(`config nodes[${index}].passwordEnv: variable ${node.passwordEnv} is not set`);
  }
  if (password) registerSecret(password);
  return formatUrl({ host: node.host!, port: node.port, user: node.user, password });
}

/** URLs in LWW_NODES: separated by commas or white space before each mysql:// (commas inside passwords are kept). */
export function splitNodeList(text: string): string[] {
  return text
    .trim()
    .split(/[\s,]+(?=(?:mysql|mariadb):\/\/)/)
    .map((s) => s.trim().replace(/,$/, ''))
    .filter(Boolean);
}

/** Removes `--name V` / `--name=V` from argv; the last value wins. */
export function takeFlag(argv: string[], name: string): { value: string | undefined; rest: string[] } {
  const rest: string[] = [];
  let value: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === `--${name}`) {
      value = argv[i + 1];
      if (value === undefined) throw new InvalidOptionsError(`--${name} needs a value`);
      i++;
    } else if (a.startsWith(`--${name}=`)) value = a.slice(name.length + 3);
    else rest.push(a);
  }
  return { value, rest };
}

const has = (argv: readonly string[], flag: string) => argv.some((a) => a === `--${flag}` || a.startsWith(`--${flag}=`));

function flagArgs(name: string, value: z.infer<typeof flagValue>): string[] {
  if (value === true) return [`--${name}`];
  if (value === false) return [];
  if (Array.isArray(value)) return value.flatMap((v) => [`--${name}`, v]);
  return [`--${name}`, String(value)];
}

/**
 * The command's argv with what `--config FILE` and the environment supply added (command-line flags win).
 * Throws InvalidOptionsError (exit 2) naming the field when the file is wrong.
 */
export function applyConfig(command: string, argv: string[], env: NodeJS.ProcessEnv = process.env): string[] {
  const { value: file, rest } = takeFlag(argv, 'config');
  const accepts = ACCEPTS[command];
  const config = file === undefined ? undefined : loadConfig(file);
  const added: string[] = [];
  if (accepts?.nodes === 'node' && !has(rest, 'node')) {
    const nodes = config?.nodes?.map((n, i) => nodeUrl(n, i, env)) ?? (env.LWW_NODES ? splitNodeList(env.LWW_NODES) : []);
    for (const url of nodes) added.push('--node', url);
  }
  if (accepts?.nodes === 'url' && !has(rest, 'url')) {
    const url = config?.nodes ? pickInstallNode(config.nodes, rest, env) : env.LWW_URL;
    if (url !== undefined) added.push('--url', url);
  }
  if (config && accepts) {
    for (const key of accepts.flags) {
      const v = config[key];
      if (v === undefined || has(rest, FLAG_OF[key])) continue;
      if (key === 'tables' && (has(rest, 'schema') || has(rest, 'tables'))) continue;
      if (key === 'schema' && (has(rest, 'tables') || config.tables !== undefined)) continue;
      added.push(`--${FLAG_OF[key]}`, Array.isArray(v) ? v.join(',') : v);
    }
  }
  for (const [name, value] of Object.entries(config?.options?.[command] ?? {})) {
    if (!has(rest, name)) added.push(...flagArgs(name, value));
  }
  return [...added, ...rest];
}

/** install/uninstall act on one node: the file's only node, or the one whose nodeId is --node-id. */
function pickInstallNode(nodes: NonNullable<ConfigFile['nodes']>, argv: string[], env: NodeJS.ProcessEnv): string {
  if (nodes.length === 1) return nodeUrl(nodes[0]!, 0, env);
  const { value } = takeFlag(argv, 'node-id');
  const index = nodes.findIndex((n) => typeof n !== 'string' && n.nodeId !== undefined && String(n.nodeId) === value);
  if (index < 0) {
    throw new InvalidOptionsError(
      `--config: the file has ${nodes.length} nodes; give --url, or --node-id N matching one node's "nodeId"${value === undefined ? '' : ` (none has nodeId ${value})`}`,
    );
  }
  return nodeUrl(nodes[index]!, index, env);
}
