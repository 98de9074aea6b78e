// lww-sink demo (npm run demo): two local servers, LWW installed on a sample schema, a short
// hot-key workload both ways with one network-loss fault; prints the convergence result and the
// LWW-vs-REPLACE table, then stops the servers.
import { harnessAudit } from '../../harness/audit-step.ts';
import { compareModes, formatComparison } from '../../harness/compare.ts';
import { parseDuration, parseFault } from '../../harness/faults.ts';
import { failureReasons } from '../../harness/harness.ts';
import { parseCommandArgs, usageProblems } from '../args.ts';
import { consoleLogger } from '../logger.ts';

export const summary = 'a short LWW vs REPLACE run on two local servers (what `npm run demo` runs)';

const HELP = 'usage: lww-sink demo [--engine mysql|mariadb] [--duration 20s] [--seed N]';

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('demo', HELP, argv, {
    engine: { type: 'string', default: 'mysql' },
    duration: { type: 'string', default: '20s' },
    seed: { type: 'string', default: '42' },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const bad = usageProblems('demo', [values.engine !== 'mysql' && values.engine !== 'mariadb' && '--engine must be mysql or mariadb', !/^\d+$/.test(values.seed) && '--seed must be an integer'], HELP);
  if (bad !== undefined) return bad;
  const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
  const durationMs = parseDuration(values.duration);
  const loss = parseFault(`net:n1@${Math.round((durationMs * 0.4) / 1000)}s/${Math.max(1, Math.round((durationMs * 0.2) / 1000))}s`);
  const log = consoleLogger();
  console.log(
    `demo: two local ${engine} servers, sample schema (2 tables × 100 rows), hot keys fought over by 4 writers per node for ${durationMs / 1000}s,\n` +
      `      network loss between the replicator and n1 for ${loss.durationMs / 1000}s; first with LWW, then with REPLACE INTO.\n`,
  );
  const c = await compareModes(
    {
      engine,
      workload: { kind: 'hot_keys', schema: 'demo_shop', tables: 2, rowsPerTable: 100, threads: 4, durationMs, seed: Number(values.seed), hotKeys: 12 },
      faults: [loss],
      audit: harnessAudit,
    },
    log,
  );
  const lwwOk = failureReasons(c.lww).length === 0;
  console.log(
    `\nLWW: ${lwwOk ? 'converged — both nodes identical and equal to what the writers acknowledged' : 'DID NOT CONVERGE'} (${c.lww.transactions} transactions, ${c.lww.replication.conflicts} conflicting changes resolved, audit: ${c.lww.audit?.findings ?? '?'} findings)`,
  );
  console.log(`REPLACE: ${c.replace.divergedKeys} diverged keys, ${c.replace.audit?.counts.lww_violation ?? '?'} LWW violations in the binlog history\n`);
  console.log(formatComparison(c.rows));
  return lwwOk ? 0 : 1;
}
