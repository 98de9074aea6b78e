// lww-sink harness: one bidirectional run with writers on both nodes, faults, and the checks.
import { harnessAudit } from '../../harness/audit-step.ts';
import { failureReasons, type HarnessResult, runHarness } from '../../harness/harness.ts';
import { ReplicatorExitError } from '../../harness/replicator-process.ts';
import { parseCommandArgs, usageProblems } from '../args.ts';
import { consoleLogger, toJson } from '../logger.ts';
import { WORKLOAD_HELP, workloadFlagOptions, workloadFlagsOrProblem } from '../workload-flags.ts';

export const summary = 'run writers on two fresh servers with replication both ways, inject faults, then check convergence';

const HELP = `usage: lww-sink harness [options]

${WORKLOAD_HELP}
  --mode lww|replace            replicate with LWW (default) or the REPLACE bypass
  --failpoints SPEC             extra sink failpoints, e.g. sinkDropMessage=1%return(true)
`;

export function describeResult(r: HarnessResult): string {
  const audit = r.audit ? Object.entries(r.audit.counts).map(([k, v]) => `${k}=${v}`).join(' ') : 'not run';
  return [
    `mode ${r.mode} on ${r.engine}, seed ${r.seed}: ${r.transactions} transactions in ${(r.durationMs / 1000).toFixed(1)}s (${r.throughput.toFixed(0)}/s), ${r.faultsInjected} faults`,
    `converged: ${r.converged ? 'yes' : 'NO'}; diverged keys: ${r.divergedKeys}; keys differing from the writers' expected state: ${new Set(r.expectationMismatches.map((m) => m.key)).size}`,
    `unknown commit outcomes (decided by their markers): committed ${r.unknownOutcomes.committed}, not committed ${r.unknownOutcomes.notCommitted}, unresolved ${r.unknownOutcomes.unresolved.length}`,
    `replication: applied ${r.replication.applied}, stale skipped ${r.replication.staleSkipped}, skipped by tombstone ${r.replication.skippedByTombstone}`,
    `audit: ${audit}`,
    `LWW's cost under clock skew: ${r.skewCost.lostToEarlier} of ${r.skewCost.authored} writes began after a newer-versioned write of their key had committed and lost to it (${r.skewCost.keys} keys)`,
    `harness event loop delay: max ${r.harnessLoopDelayMs.max} ms, p99 ${r.harnessLoopDelayMs.p99} ms`,
    `replicator: started ${r.replicatorStarts}×, killed ${r.replicatorKills}×; directions: ${r.directions.map((d) => `${d.name} restarts=${d.restarts}${d.lastError ? ` last-error="${d.lastError}"` : ''}`).join(', ') || 'none reported'}`,
    ...r.faults.map(
      (f) =>
        `fault ${f.kind}${f.node ? ` ${f.node}` : ''}${f.target ? ` ${f.target}` : ''}${f.mode ? ` ${f.mode}` : ''} at ${(f.atMs / 1000).toFixed(1)}s: ` +
        (f.tookEffect ? `down ${(f.downtimeMs / 1000).toFixed(1)}s` : 'no effect') +
        `${f.stopMs === undefined ? '' : ` (stopping took ${(f.stopMs / 1000).toFixed(1)}s)`}${f.connections === undefined ? '' : `, ${f.connections} connections`}${f.note ? `, ${f.note}` : ''}`,
    ),
    ...(r.plan?.large ?? []).map((l) => `large transaction: ${l.rows} rows into ${l.table} on ${l.node} (writer ${l.thread}) at ${(l.atMs / 1000).toFixed(1)}s${l.largeValues ? `, ${l.largeValues.bytes.length} values of ${l.largeValues.bytes.map((b) => `${(b / 2 ** 20).toFixed(1)} MiB`).join(', ')} in ${l.largeValues.column}` : ''}`),
    ...(r.ddl?.statements ?? []).map((st) => `ddl on ${st.node} at ${(st.atMs / 1000).toFixed(1)}s: ${st.sql}`),
    ...(r.expectedStop
      ? [
          `refused setting: ${r.expectedStop.setting} written on ${r.expectedStop.node} (${r.expectedStop.table})${r.expectedStop.wroteAtMs === undefined ? ' never' : ` at ${(r.expectedStop.wroteAtMs / 1000).toFixed(1)}s`}; ` +
            (r.expectedStop.stopped ? `the replicator stopped (exit ${r.expectedStop.exitCode}): ${r.expectedStop.cause ?? ''}` : 'the replicator did not stop') +
            (r.expectedStop.asExpected ? ' — the expected outcome' : ''),
        ]
      : []),
    ...failureReasons(r).map((reason) => `FAILED: ${reason}`),
    ...(r.shapes ? [`generated shapes (seed ${r.seed}): ${Object.entries(r.shapes).map(([k, v]) => `${k}=${v}`).join(' ')}`] : []),
  ].join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('harness', HELP, argv, { ...workloadFlagOptions, mode: { type: 'string', default: 'lww' }, failpoints: { type: 'string' } });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const flags = workloadFlagsOrProblem('harness', values);
  if (typeof flags === 'number') return flags;
  const bad = usageProblems('harness', [values.mode !== 'lww' && values.mode !== 'replace' && '--mode must be lww or replace'], HELP);
  if (bad !== undefined) return bad;
  let result: HarnessResult;
  try {
    result = await runHarness({
      engine: flags.engine,
      workload: flags.workload,
      faults: flags.faults,
      mode: values.mode as 'lww' | 'replace',
      failpoints: values.failpoints,
      audit: harnessAudit,
      logger: consoleLogger(),
    });
  } catch (e) {
    if (e instanceof ReplicatorExitError) {
      // The run failed: show what the replicator said last, then fail the command with the error.
      for (const d of e.directions) console.error(`direction ${d.name}: restarts=${d.restarts}${d.lastError ? ` last-error="${d.lastError}"` : ''}`);
      for (const line of e.exit.logTail) console.error(`replicator: ${line}`);
    }
    throw e;
  }
  console.log(values.json ? toJson(result, 2) : describeResult(result));
  return failureReasons(result).length === 0 ? 0 : 1;
}
