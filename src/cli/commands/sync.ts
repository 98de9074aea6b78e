// `lww-sink sync`: one-shot full-table LWW merge between nodes (repair). Exit 0 done (or dry run
// done), else the common table (4: failed part-way; what committed stays: every write is an LWW merge).
import { parseTableSelectorText } from '../../install/table-list.ts';
import { parseCommandArgs, tableListFlag, urlProblem } from '../args.ts';
import { describeError, exitCodeOf } from '../exit-codes.ts';
import { announceInterrupt } from '../interrupt.ts';
import { formatSyncReport, type SyncProgress, syncNodes, syncReportToJson } from '../../sync/repair.ts';

export const summary = 'merge tables between nodes with last-write-wins, both ways (repair; --dry-run counts)';

const HELP = `usage:
  lww-sink sync --node URL --node URL [--node URL...] [--tables db.t1,db.t2] [--dry-run] [--json]
                [--chunk-rows 2000] [--meta-schema lww_meta] [--version-column _lww_ts]
                [--progress-interval 2] [--quiet]

  Merges every table both ways (A→B, then B→A; with more nodes every pair), rows and tombstones, in
  primary-key chunks through the LWW sink: afterwards each key holds its LWW winner on every node
  (the newest row, or no row when a newer tombstone exists). Only keys whose version differs are
  written. Safe while the replicator runs; its checkpoints are not touched.

  --dry-run            read both sides and report what would change, per table and direction:
                       insert (target lacks the key), update (target row older), delete (newer
                       tombstone removes the target's row), tombstone (newer tombstone, no row to
                       delete), skip (target holds the same or a newer version); writes nothing
  --tables             schema.table names (or a schema), comma-separated; default: every table
                       install registered in <meta-schema>.tables on any node
  --chunk-rows N       rows per read and lookup (1..50000, default 2000)
  --json               print the report as JSON on stdout (progress stays on stderr)
  --progress-interval  seconds between progress lines on stderr (default 2; 0 = none)
  --quiet              no progress lines
  Exit code: 0 done (other codes below).`;

function intFlag(flag: string, text: string | undefined, fallback: number, min: number, max: number): number | string {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) return `--${flag} must be an integer in ${min}..${max} (got "${text}")`;
  return n;
}

function formatProgress(p: SyncProgress): string {
  const pct = p.total > 0 ? Math.min(100, Math.round((100 * p.read) / p.total)) : 100;
  const eta = p.done ? 'done' : p.etaSeconds === undefined ? 'eta ?' : `eta ${Math.ceil(p.etaSeconds)}s`;
  return `${p.direction} ${p.table} ${p.kind}: ${p.read}/${p.estimated ? '~' : ''}${p.total} (${pct}%) ${Math.round(p.rowsPerSecond)} rows/s ${eta}`;
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('sync', HELP, argv, {
    node: { type: 'string', multiple: true },
    tables: { type: 'string' },
    'dry-run': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    'chunk-rows': { type: 'string' },
    'meta-schema': { type: 'string' },
    'version-column': { type: 'string' },
    'progress-interval': { type: 'string' },
    quiet: { type: 'boolean', default: false },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const nodes = values.node ?? [];
  const chunkRows = intFlag('chunk-rows', values['chunk-rows'], 2000, 1, 50_000);
  const interval = intFlag('progress-interval', values['progress-interval'], 2, 0, 86_400);
  const tableFlag = tableListFlag(values.tables);
  const tables = typeof tableFlag === 'string' ? undefined : tableFlag;
  const problems = [
    nodes.length < 2 ? `give at least two --node URLs (got ${nodes.length})` : '',
    ...nodes.map((u) => urlProblem('node', u)),
    new Set(nodes).size !== nodes.length ? 'the same --node is given twice' : '',
    typeof chunkRows === 'string' ? chunkRows : '',
    typeof interval === 'string' ? interval : '',
    typeof tableFlag === 'string' ? `--tables: ${tableFlag}` : '',
    ...(tables ?? []).map(selectorProblem),
  ].filter(Boolean);
  if (problems.length > 0) {
    console.error(`lww-sink sync: ${problems.join('; ')}`);
    return 2;
  }
  const showProgress = !values.quiet && interval !== 0;
  const release = values['dry-run'] ? () => {} : announceInterrupt('sync', 'every chunk merged so far is committed (LWW merges, safe to repeat)');
  try {
    const report = await syncNodes({
      nodes,
      tables,
      dryRun: values['dry-run'],
      chunkRows: chunkRows as number,
      metaSchema: values['meta-schema'],
      versionColumn: values['version-column'],
      progressIntervalMs: (interval as number) * 1000,
      onProgress: showProgress ? (p) => console.error(formatProgress(p)) : undefined,
    });
    console.log(values.json ? syncReportToJson(report) : formatSyncReport(report));
    return 0;
  } catch (e) {
    console.error(`lww-sink sync: ${describeError(e)}`);
    return exitCodeOf(e);
  } finally {
    release();
  }
}

/** A --tables entry of sync may be a table or a whole schema. */
function selectorProblem(text: string): string {
  try {
    parseTableSelectorText(text);
    return '';
  } catch (e) {
    return `--tables: ${(e as Error).message}`;
  }
}
