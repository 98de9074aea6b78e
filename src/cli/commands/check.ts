// `lww-sink check`: the state check between two or more nodes. Exit 0 identical, 1 differences,
// 2 when the check could not run (bad flags, a node unreachable, a table that cannot be checked).
import { parseArgs } from 'node:util';
import { checkState, formatStateReport, stateReportToJson } from '../../checker/index.ts';
import { LwwError } from '../../errors.ts';

export const summary = 'compare the current data of two or more nodes (state check)';

const HELP = `usage:
  lww-sink check --node URL --node URL [--node URL...] [--tables db.t1,db.t2] [--meta-schema lww_meta]
                 [--version-column _lww_ts] [--chunk-size 10000] [--max-findings 10000] [--json]
      Compares every node with the first, table by table in primary-key order, by chunk checksums
      computed on the servers; rows are read only where a chunk differs. Each differing key is shown
      with its state on both nodes (row, tombstone or absent), a class and the node LWW says wins.
      Tables: --tables, else every table registered in <meta-schema>.tables on the first node.
      Exit code: 0 identical, 1 differences found, 2 the check could not run.`;

function positiveInt(flag: string, text: string, min: number): number | string {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min) return `--${flag} must be an integer >= ${min} (got "${text}")`;
  return n;
}

export async function run(argv: string[]): Promise<number> {
  let values: {
    node?: string[];
    tables?: string;
    'meta-schema'?: string;
    'version-column'?: string;
    'chunk-size'?: string;
    'max-findings'?: string;
    json?: boolean;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        node: { type: 'string', multiple: true },
        tables: { type: 'string' },
        'meta-schema': { type: 'string' },
        'version-column': { type: 'string' },
        'chunk-size': { type: 'string' },
        'max-findings': { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: false,
    }));
  } catch (e) {
    console.error(`lww-sink check: ${(e as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const nodes = values.node ?? [];
  const chunkSize = values['chunk-size'] === undefined ? 10_000 : positiveInt('chunk-size', values['chunk-size'], 1);
  const maxFindings = values['max-findings'] === undefined ? 10_000 : positiveInt('max-findings', values['max-findings'], 0);
  const tables = values.tables
    ?.split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const problems = [
    nodes.length < 2 ? `give at least two --node URLs (got ${nodes.length})` : '',
    ...nodes.map((u) => (/^(mysql|mariadb):\/\//.test(u) ? '' : `--node must be a mysql:// URL (got "${u.replace(/:[^:@/]*@/, ':***@')}")`)),
    typeof chunkSize === 'string' ? chunkSize : '',
    typeof maxFindings === 'string' ? maxFindings : '',
    ...(tables ?? []).map((t) => (/^[^.]+\..+$/.test(t) ? '' : `--tables entries must be schema.table (got "${t}")`)),
    tables !== undefined && tables.length === 0 ? '--tables is empty' : '',
  ].filter(Boolean);
  if (problems.length > 0) {
    console.error(`lww-sink check: ${problems.join('; ')}`);
    return 2;
  }
  try {
    const report = await checkState({
      nodes,
      tables,
      metaSchema: values['meta-schema'],
      versionColumn: values['version-column'],
      chunkSize: chunkSize as number,
      maxFindings: maxFindings as number,
    });
    console.log(values.json ? stateReportToJson(report) : formatStateReport(report));
    return report.identical ? 0 : 1;
  } catch (e) {
    const message = e instanceof LwwError || e instanceof Error ? e.message : String(e);
    console.error(`lww-sink check: ${message}`);
    return 2;
  }
}
