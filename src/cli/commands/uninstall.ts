// `lww-sink uninstall`: removes what install added to tables of one server — triggers, tombstone
// tables, registry rows, the version column where install added it, and the metadata schema when
// no table remains installed.
import { InvalidOptionsError } from '../../errors.ts';
import { type UninstallResult, uninstall } from '../../install/install.ts';
import { formatTableRef } from '../../install/table-list.ts';
import { parseCommandArgs, urlProblem, usageProblems } from '../args.ts';
import { splitTableList } from './table-flags.ts';

export const summary = 'remove what install added (triggers, tombstones, the version column it added)';

const HELP = `usage:
  lww-sink uninstall --url mysql://user:pass@host:port/ (--tables db.t1,db.t2 | --schema db) [--meta-schema lww_meta] [--json]

  --tables       schema.table names, comma-separated (quote names holding dots or commas: \`my.db\`.\`t,1\`)
  --schema       every installed table of this schema
  --meta-schema  where install keeps its registry (dropped when no table remains installed)
  --json         print the result as JSON`;

function describe(result: UninstallResult): string {
  const lines = result.tables.map((t) => {
    if (!t.wasInstalled) return `${formatTableRef(t)}: not installed${t.droppedTriggers.length > 0 ? ' (dropped leftover triggers)' : ''}`;
    const done = [
      t.droppedTriggers.length > 0 ? `dropped triggers ${t.droppedTriggers.join(', ')}` : '',
      t.droppedVersionColumn ? 'dropped the version column install had added' : 'kept the version column (it was there before install)',
      t.droppedTombstoneTable ? `dropped ${result.metaSchema}.${t.droppedTombstoneTable}` : '',
    ].filter(Boolean);
    return `${formatTableRef(t)}: uninstalled (${done.join('; ')})`;
  });
  if (result.tables.length === 0) lines.push('no installed table matched');
  if (result.droppedMetaSchema) lines.push(`dropped the metadata schema ${result.metaSchema} (no table remains installed)`);
  return lines.join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('uninstall', HELP, argv, {
    url: { type: 'string' },
    tables: { type: 'string' },
    schema: { type: 'string' },
    'meta-schema': { type: 'string' },
    json: { type: 'boolean', default: false },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const bad = usageProblems(
    'uninstall',
    [
      values.url ? urlProblem('url', values.url) : '--url is required',
      (values.tables === undefined) === (values.schema === undefined) && 'give exactly one of --tables and --schema',
    ],
    HELP,
  );
  if (bad !== undefined) return bad;
  let result: UninstallResult;
  try {
    result = await uninstall({
      url: values.url!,
      tables: values.tables === undefined ? undefined : splitTableList(values.tables),
      schema: values.schema,
      metaSchema: values['meta-schema'],
    });
  } catch (e) {
    if (e instanceof InvalidOptionsError) {
      console.error(`lww-sink uninstall: ${e.message}`);
      return 2;
    }
    throw e;
  }
  console.log(values.json ? JSON.stringify(result, null, 2) : describe(result));
  return 0;
}
