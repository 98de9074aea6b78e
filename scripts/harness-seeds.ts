// The long acceptance run: 2 × 8 writers on hot keys (inserts, updates, deletes) with every fault
// kind (seed scenario: 10 s of network loss every 30 s, plus replicator kill -9, server restart and
// a 5 s clock skew), for many seeds; each must converge with no finding but lww_skipped.
//   npx tsx scripts/harness-seeds.ts [--engine mysql|mariadb] [--seeds 20] [--duration 2m] [--first-seed 100]
//     [--isolation read-committed|repeatable-read|mixed] [--explicit-tx] [--schema-gen]
import { parseArgs } from 'node:util';
import { allFaults } from '../src/cli/workload-flags.ts';
import { harnessAudit } from '../src/harness/audit-step.ts';
import { parseDuration } from '../src/harness/faults.ts';
import { describeStuck, type HarnessResult, runHarness } from '../src/harness/harness.ts';
import { ReplicatorExitError } from '../src/harness/replicator-process.ts';
import { startServers } from '../src/servers/index.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mysql' },
    seeds: { type: 'string', default: '20' },
    duration: { type: 'string', default: '2m' },
    'first-seed': { type: 'string', default: '100' },
    isolation: { type: 'string', default: 'repeatable-read' },
    'explicit-tx': { type: 'boolean', default: false },
    /** Each seed also generates its schema (schema-gen.ts). */
    'schema-gen': { type: 'boolean', default: false },
  },
});
/** What a failed seed's result says about the cause: stuck directions, last errors, the first findings of each oracle. */
function whyFailed(r: HarnessResult): string[] {
  const text = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? String(x) : x));
  const out: string[] = [];
  for (const s of r.stuck) out.push(`stuck ${describeStuck(s)}`);
  for (const d of r.directions) if (d.lastError) out.push(`direction ${d.name} last error: ${d.lastError}`);
  for (const t of r.state.tables) {
    for (const f of t.findings.slice(0, 3)) out.push(`state ${t.table}: ${text(f)}`);
    for (const d of t.schemaDifferences) out.push(`schema ${t.table}: ${d}`);
  }
  for (const m of r.expectationMismatches.slice(0, 3)) out.push(`expected state: ${text(m)}`);
  if (r.audit && r.audit.findings > 0) out.push(`audit: ${text(r.audit.details).slice(0, 1500)}`);
  for (const u of r.unknownOutcomes.unresolved.slice(0, 3)) out.push(`unresolved commit: ${text(u)}`);
  return out;
}

const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const durationMs = parseDuration(values.duration!);
const servers = await startServers({ engine, count: 2 });
let failed = 0;
try {
  for (let i = 0; i < Number(values.seeds); i++) {
    const seed = Number(values['first-seed']) + i;
    const started = Date.now();
    // An unexpected replicator exit fails the seed (runHarness cleaned up): report it and go on with the next one.
    const r = await runHarness({
      engine,
      servers,
      workload: {
        kind: 'hot_keys',
        schema: 'seeds',
        tables: 2,
        rowsPerTable: 200,
        threads: 8,
        durationMs,
        seed,
        hotKeys: 16,
        isolation: values.isolation as 'read-committed' | 'repeatable-read' | 'mixed',
        ...(values['explicit-tx'] ? { explicitTx: true } : {}),
        ...(values['schema-gen'] ? { schemaGen: seed } : {}),
      },
      faults: allFaults(durationMs),
      audit: harnessAudit,
    }).catch((err: unknown) => {
      if (!(err instanceof ReplicatorExitError)) throw err;
      failed++;
      console.log(`seed ${seed}: FAILED — ${err.message}, ${((Date.now() - started) / 1000).toFixed(0)}s`);
      for (const line of err.exit.logTail.slice(-12)) console.log(`  why (seed ${seed}): replicator log: ${line.slice(0, 600)}`);
      return undefined;
    });
    if (!r) continue;
    const ok = r.converged && r.expectationMismatches.length === 0 && (r.audit?.findings ?? 1) === 0 && r.unknownOutcomes.unresolved.length === 0;
    if (!ok) failed++;
    const counts = r.audit ? Object.entries(r.audit.counts).map(([k, v]) => `${k}=${v}`).join(' ') : 'no audit';
    console.log(
      `seed ${seed}: ${ok ? 'ok' : 'FAILED'} — ${r.transactions} txns (${r.throughput.toFixed(0)}/s), faults ${r.faultsInjected}, diverged ${r.divergedKeys}, ` +
        `expected-state mismatches ${r.expectationMismatches.length}, unknown commit outcomes ${r.unknownOutcomes.committed} committed / ${r.unknownOutcomes.notCommitted} not / ${r.unknownOutcomes.unresolved.length} unresolved, audit ${counts}, ` +
        `skew cost ${r.skewCost.lostToEarlier}/${r.skewCost.authored} writes lost to an earlier one, ${((Date.now() - started) / 1000).toFixed(0)}s`,
    );
    console.log(
      `  faults: ${r.faults.map((f) => `${f.kind}${f.node ? `:${f.node}` : ''}${f.target ? `:${f.target}` : ''}${f.mode ? `:${f.mode}` : ''}@${(f.atMs / 1000).toFixed(0)}s ${f.tookEffect ? `down ${(f.downtimeMs / 1000).toFixed(1)}s` : 'no effect'}`).join(', ')}; ` +
        `direction restarts: ${r.directions.map((d) => `${d.name}=${d.restarts}`).join(' ')}; harness event loop delay max ${r.harnessLoopDelayMs.max} ms`,
    );
    if (r.shapes) console.log(`  shapes (seed ${seed}): ${Object.entries(r.shapes).map(([k, v]) => `${k}=${v}`).join(' ')}`);
    if (!ok) for (const line of whyFailed(r)) console.log(`  why (seed ${seed}): ${line}`);
  }
} finally {
  await Promise.all(servers.map((s) => s.destroy()));
}
console.log(`${Number(values.seeds) - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
