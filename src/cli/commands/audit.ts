// `lww-sink audit`: the history audit over a binlog window of two or more nodes. Exit 0 no finding,
// 1 findings, else the common table (2 usage, 3 connection, 4 the audit could not run).
import { auditHistory, auditReportToJson, formatAuditReport } from '../../checker/index.ts';
import { describeError, exitCodeOf } from '../exit-codes.ts';
import { integerFlag, nodeProblems, parseCommandArgs, tableListFlag, tableListProblems, usageProblems } from '../args.ts';

export const summary = 'check from the binlogs that replication kept the LWW rules over a window (history audit)';

const HELP = `usage:
  lww-sink audit --node URL --node URL [--node URL...] (--from POS[,POS...] | --since TIME)
                 [--until POS[,POS...]] [--tables db.t1,db.t2] [--meta-schema lww_meta]
                 [--version-column _lww_ts] [--max-findings 10000] [--json]
      Reads each node's binlog over the window, sink-applied transactions included, and classifies
      every key's writes: lww_violation (a node stored an older version after a newer one), lost (a
      local write never reached a peer that never held a newer version), redundant (a replicated
      write no peer wrote), inconsistent (a replicated write with its origin's version but other
      values). Writes a peer skipped because it held a newer version are counted as lww_skipped (ok).
      --from      binlog position per node (file:offset, in --node order): the window starts after it.
      --since     a time (ISO 8601, e.g. 2025-01-31T12:00:00Z, or epoch seconds): per node, reading
                  starts at the newest binlog file opened at or before it (SHOW BINARY LOGS, then the
                  time of each file's first event) and transactions committed before it are left out.
      --until     window end per node; default: each node's binlog head when the audit starts.
      Run it after replication has caught up, over a window that started with replication caught up.
      Tables: --tables, else every table registered in <meta-schema>.tables on the first node.
      Exit code: 0 no finding, 1 findings (other codes below).`;

function positions(flag: string, text: string | undefined, count: number): string[] | undefined | string {
  if (text === undefined) return undefined;
  const list = text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (list.length !== count) return `--${flag} needs one position per --node (${count}), got ${list.length}`;
  const bad = list.find((p) => !/^.+:\d+$/.test(p));
  return bad ? `--${flag} entries must be binlog positions file:offset (got "${bad}")` : list;
}

function parseTime(text: string): Date | undefined {
  const d = /^\d{9,11}(\.\d+)?$/.test(text) ? new Date(Number(text) * 1000) : new Date(text);
  return Number.isNaN(d.getTime()) ? undefined : d;
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('audit', HELP, argv, {
    node: { type: 'string', multiple: true },
    from: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    tables: { type: 'string' },
    'meta-schema': { type: 'string' },
    'version-column': { type: 'string' },
    'max-findings': { type: 'string' },
    json: { type: 'boolean', default: false },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const nodes = values.node ?? [];
  const from = positions('from', values.from, nodes.length);
  const until = positions('until', values.until, nodes.length);
  const since = values.since === undefined ? undefined : parseTime(values.since);
  const maxFindings = values['max-findings'] === undefined ? 10_000 : integerFlag('max-findings', values['max-findings'], 0);
  const tableFlag = tableListFlag(values.tables);
  const tables = typeof tableFlag === 'string' ? undefined : tableFlag;
  const bad = usageProblems('audit', [
    ...nodeProblems(nodes),
    (values.from === undefined) === (values.since === undefined) && 'give the window start with --from or --since (one of them)',
    typeof from === 'string' && from,
    typeof until === 'string' && until,
    values.since !== undefined && !since && `--since must be a time such as 2025-01-31T12:00:00Z or epoch seconds (got "${values.since}")`,
    typeof maxFindings === 'string' && maxFindings,
    typeof tableFlag === 'string' && `--tables: ${tableFlag}`,
    ...tableListProblems(tables),
  ]);
  if (bad !== undefined) return bad;
  try {
    const report = await auditHistory({
      nodes,
      from: from as string[] | undefined,
      since,
      until: until as string[] | undefined,
      tables,
      metaSchema: values['meta-schema'],
      versionColumn: values['version-column'],
      maxFindings: maxFindings as number,
    });
    console.log(values.json ? auditReportToJson(report) : formatAuditReport(report));
    return report.ok ? 0 : 1;
  } catch (e) {
    console.error(`lww-sink audit: ${describeError(e)}`);
    return exitCodeOf(e);
  }
}
