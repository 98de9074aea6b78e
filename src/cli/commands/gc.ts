// `lww-sink gc`: one garbage-collection pass over every node (src/gc/). Exit 0 done (also when GC is
// paused for lack of progress: that is the safe answer, reported); 3 when a node was not reached.
import { collectGarbage, DEFAULT_GC_BATCH_ROWS, formatGcReport } from '../../gc/collector.ts';
import { durationFlag, integerFlag, nodeProblems, parseCommandArgs, usageProblems } from '../args.ts';
import { describeError, EXIT, exitCodeOf } from '../exit-codes.ts';
import { toJson } from '../logger.ts';

export const summary = 'remove tombstones every peer has applied, and old conflict-log/progress rows (--dry-run reports)';

const HELP = `usage:
  lww-sink gc --node URL --node URL [--node URL...] [--dry-run] [--json] [--gc-margin 10m]
              [--gc-retention 7d] [--batch-rows 1000] [--meta-schema lww_meta]

  Removes tombstones below each node's GC horizon: the oldest source time every node has applied
  from every other node (read from their checkpoints), and the node's own clock, minus the margin.
  Give every node of the mesh: a node that cannot be reached, or one named in a checkpoint but not
  given, pauses GC (reported; nothing is guessed). Conflict-log rows and idle copy/sync progress
  rows older than the retention are removed too. Deletes go in short transactions of --batch-rows.

  --dry-run        report the horizon per node and direction and what would be removed; write nothing
  --gc-margin D    safety margin for long transactions and clock skew (default 10m)
  --gc-retention D conflict-log and progress-row retention (default 7d)
  --json           the report as JSON
  Durations: 500ms, 30s, 10m, 2h, 7d (a bare number is seconds).`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('gc', HELP, argv, {
    node: { type: 'string', multiple: true },
    'dry-run': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    'gc-margin': { type: 'string' },
    'gc-retention': { type: 'string' },
    'batch-rows': { type: 'string' },
    'meta-schema': { type: 'string' },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const nodes = values.node ?? [];
  const margin = values['gc-margin'] === undefined ? undefined : durationFlag('gc-margin', values['gc-margin']);
  const retention = values['gc-retention'] === undefined ? undefined : durationFlag('gc-retention', values['gc-retention']);
  const batchRows = values['batch-rows'] === undefined ? DEFAULT_GC_BATCH_ROWS : integerFlag('batch-rows', values['batch-rows'], 1);
  const bad = usageProblems(
    'gc',
    [...nodeProblems(nodes), typeof margin === 'string' && margin, typeof retention === 'string' && retention, typeof batchRows === 'string' && batchRows],
    HELP,
  );
  if (bad !== undefined) return bad;
  try {
    const report = await collectGarbage({
      nodes,
      metaSchema: values['meta-schema'],
      dryRun: values['dry-run'],
      marginMs: margin as number | undefined,
      retentionMs: retention as number | undefined,
      batchRows: batchRows as number,
    });
    console.log(values.json ? toJson(report, 2) : formatGcReport(report));
    // A node not reached pauses GC (reported above) and is a connection problem; a pass that failed on a node is 4.
    if (report.nodes.some((n) => !n.reachable)) return EXIT.connection;
    return report.nodes.some((n) => n.error) ? EXIT.failed : EXIT.ok;
  } catch (e) {
    console.error(`lww-sink gc: ${describeError(e)}`);
    return exitCodeOf(e);
  }
}
