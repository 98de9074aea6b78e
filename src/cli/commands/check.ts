// `lww-sink check`: the state check between two or more nodes. Exit 0 identical, 1 differences,
// else the common table (2 usage, 3 connection, 4 the check could not run).
import { checkState, formatStateReport, stateReportToJson } from '../../checker/index.ts';
import { integerFlag, nodeProblems, parseCommandArgs, renamedFlag, tableListFlag, tableListProblems, usageProblems } from '../args.ts';
import { describeError, exitCodeOf } from '../exit-codes.ts';

export const summary = 'compare the current data of two or more nodes (state check)';

const HELP = `usage:
  lww-sink check --node URL --node URL [--node URL...] [--tables db.t1,db.t2] [--meta-schema lww_meta]
                 [--version-column _lww_ts] [--chunk-rows 10000] [--max-findings 10000] [--json]
      Compares every node with the first, table by table in primary-key order, by chunk checksums
      computed on the servers; rows are read only where a chunk differs. Each differing key is shown
      with its state on both nodes (row, tombstone or absent), a class and the node LWW says wins;
      a differing chunk whose rows compare equal is reported as unexplained_chunk.
      Tables: --tables, else every table registered in <meta-schema>.tables on any node.
      --chunk-size is a deprecated name of --chunk-rows.`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('check', HELP, argv, {
    node: { type: 'string', multiple: true },
    tables: { type: 'string' },
    'meta-schema': { type: 'string' },
    'version-column': { type: 'string' },
    'chunk-rows': { type: 'string' },
    'chunk-size': { type: 'string' },
    'max-findings': { type: 'string' },
    json: { type: 'boolean', default: false },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const nodes = values.node ?? [];
  const chunkText = renamedFlag('check', values, 'chunk-rows', 'chunk-size');
  const chunkSize = chunkText === undefined ? 10_000 : integerFlag('chunk-rows', chunkText, 1);
  const maxFindings = values['max-findings'] === undefined ? 10_000 : integerFlag('max-findings', values['max-findings'], 0);
  const tableFlag = tableListFlag(values.tables);
  const tables = typeof tableFlag === 'string' ? undefined : tableFlag;
  const bad = usageProblems('check', [
    ...nodeProblems(nodes),
    typeof chunkSize === 'string' && chunkSize,
    typeof maxFindings === 'string' && maxFindings,
    typeof tableFlag === 'string' && `--tables: ${tableFlag}`,
    ...tableListProblems(tables),
  ]);
  if (bad !== undefined) return bad;
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
    console.error(`lww-sink check: ${describeError(e)}`);
    return exitCodeOf(e);
  }
}
