// lww-sink compare: the same seeded workload (same faults) with LWW and with REPLACE, side by side.
import { writeFileSync } from 'node:fs';
import { harnessAudit } from '../../harness/audit-step.ts';
import { compareModes, comparisonMarkdown, formatComparison } from '../../harness/compare.ts';
import { parseCommandArgs } from '../args.ts';
import { consoleLogger, toJson } from '../logger.ts';
import { WORKLOAD_HELP, workloadFlagOptions, workloadFlagsOrProblem } from '../workload-flags.ts';

export const summary = 'run the same workload with LWW and with REPLACE INTO and show what each did to the data';

const HELP = `usage: lww-sink compare [options]

${WORKLOAD_HELP}
  --report FILE                 also write the table as Markdown
`;

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('compare', HELP, argv, { ...workloadFlagOptions, report: { type: 'string' } });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const flags = workloadFlagsOrProblem('compare', values);
  if (typeof flags === 'number') return flags;
  const c = await compareModes({ engine: flags.engine, workload: flags.workload, faults: flags.faults, audit: harnessAudit, logger: consoleLogger() });
  const title = `LWW vs REPLACE: ${flags.workload.kind}, ${flags.workload.threads} writers per node, ${flags.workload.durationMs / 1000}s, seed ${flags.workload.seed}, ${flags.engine}`;
  if (values.report) writeFileSync(values.report, comparisonMarkdown(c, title));
  if (values.json) console.log(toJson({ title, rows: c.rows, lww: c.lww, replace: c.replace }, 2));
  else console.log(`\n${title}\n\n${formatComparison(c.rows)}`);
  // REPLACE is expected to diverge; the LWW run not converging is a finding (exit 1).
  return c.lww.converged && c.lww.unknownOutcomes.unresolved.length === 0 ? 0 : 1;
}
