// `lww-sink install`: prepares tables of one server for LWW replication (version column, tombstone
// table, triggers stamping local writes with this node's versions). Safe to run again.
import { connect, redactUrl } from '../../db/connection.ts';
import { redactSecrets } from '../../db/url.ts';
import { formatPlan, type PlannedStatement, recordingConnection } from '../../install/dry-run.ts';
import { type InstallResult, install } from '../../install/install.ts';
import { formatTableRef } from '../../install/table-list.ts';
import { parseCommandArgs, urlProblem, usageProblems } from '../args.ts';
import { describeError, EXIT, exitCodeOf } from '../exit-codes.ts';
import { announceInterrupt } from '../interrupt.ts';
import { splitTableList } from './table-flags.ts';

export const summary = 'prepare tables for LWW replication: version column, tombstones, triggers (idempotent)';

const HELP = `usage:
  lww-sink install --url mysql://user:pass@host:port/ --node-id N (--tables db.t1,db.t2 | --schema db)
                   [--version-column _lww_ts] [--meta-schema lww_meta] [--json] [--dry-run]

  --node-id         0..1023, different on every node; stamped into the low 10 bits of every version
  --tables          schema.table names, comma-separated (quote names holding dots or commas: \`my.db\`.\`t,1\`)
  --schema          every base table of this schema
  --version-column  the version column, added as BIGINT UNSIGNED NOT NULL DEFAULT 0 where missing
  --meta-schema     where the node id, table registry and tombstones live
  --json            print the result as JSON
  --dry-run         print the exact statements (DDL, triggers, registry writes) install would run; change nothing
  The version column is added INVISIBLE (MySQL >= 8.0.23, MariaDB >= 10.3): SELECT * and INSERT … VALUES
  without a column list keep working; one an older install added visible is made invisible.`;

function describe(result: InstallResult): string {
  const lines = [`node id ${result.nodeId} ${result.recordedNodeId ? 'recorded' : 'already recorded'} in ${result.metaSchema}`];
  for (const t of result.tables) {
    const done = [
      t.changes.addedVersionColumn ? `added column ${t.versionColumn}` : '',
      t.changes.backfilledRows > 0 ? `backfilled ${t.changes.backfilledRows} rows` : '',
      t.changes.triggers.length > 0 ? `created triggers ${t.changes.triggers.join(', ')}` : '',
      t.changes.registered ? `tombstones in ${result.metaSchema}.${t.tombstoneTable}` : '',
    ].filter(Boolean);
    lines.push(`${formatTableRef(t)}: ${done.length > 0 ? `installed (${done.join('; ')})` : 'already installed, nothing changed'}`);
  }
  for (const w of result.warnings) lines.push(`warning: ${w}`);
  return lines.join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('install', HELP, argv, {
    url: { type: 'string' },
    'node-id': { type: 'string' },
    tables: { type: 'string' },
    schema: { type: 'string' },
    'version-column': { type: 'string' },
    'meta-schema': { type: 'string' },
    json: { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const nodeId = values['node-id'] === undefined ? Number.NaN : Number(values['node-id']);
  const bad = usageProblems(
    'install',
    [
      values.url ? urlProblem('url', values.url) : '--url is required',
      values['node-id'] === undefined && '--node-id is required',
      values['node-id'] !== undefined && (!/^\d+$/.test(values['node-id']) || nodeId > 1023) && `--node-id must be an integer in 0..1023 (got "${values['node-id']}")`,
      (values.tables === undefined) === (values.schema === undefined) && 'give exactly one of --tables and --schema',
    ],
    HELP,
  );
  if (bad !== undefined) return bad;
  const dryRun = values['dry-run'];
  const planned: PlannedStatement[] = [];
  const conn = await connect(values.url!).catch((e: unknown) => {
    console.error(`lww-sink install: cannot connect to ${redactUrl(values.url!)}: ${redactSecrets((e as Error).message)}`);
    return exitCodeOf(e);
  });
  if (typeof conn === 'number') return conn;
  const release = dryRun ? () => {} : announceInterrupt('install', 'each step already done stays (install is idempotent)');
  let result: InstallResult;
  try {
    result = await install({
      connection: dryRun ? recordingConnection(conn, planned) : conn,
      nodeId,
      tables: values.tables === undefined ? undefined : splitTableList(values.tables),
      schema: values.schema,
      versionColumn: values['version-column'],
      metaSchema: values['meta-schema'],
    });
  } catch (e) {
    console.error(`lww-sink install: ${describeError(e)}`);
    return exitCodeOf(e);
  } finally {
    release();
    await conn.end().catch(() => conn.destroy());
  }
  if (dryRun) console.log(values.json ? JSON.stringify({ dryRun: true, statements: planned }, null, 2) : formatPlan(conn, planned));
  else console.log(values.json ? JSON.stringify(result, null, 2) : describe(result));
  return EXIT.ok;
}
