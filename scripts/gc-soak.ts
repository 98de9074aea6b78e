// Tombstone GC under a delete-heavy harness run (issue #14): two servers, writers on both sides
// (oltp_write_only: every transaction deletes a key and inserts it again; keys are drawn with a skew
// (--key-skew 3: a tenth of the picks land on the 0.1 % hottest keys, which both sides fight over)
// from a large table, so most deletes leave a tombstone of their own), every fault kind, replication
// through the replicator child with GC every --gc-interval; then the same run with GC off. Prints the
// tombstone count of each node over time against the bound 2 × (deletes per margin + interval
// window), the growth per minute of each run, and whether each run converged with a clean audit.
// Why margin + interval: a tombstone becomes collectable a margin after its delete (plus the lag
// until every checkpoint passes it) and goes at the next pass, up to one interval later; so even a
// GC that never pauses holds up to (margin + interval) × deletes/s just before a pass. The factor 2
// leaves room for faults that hold the horizon back (a stopped replicator, a cut link, a restart)
// and for the lag that follows them; without GC the count grows without bound.
// The margin is shorter than the 10-minute default so that GC gets to work within the run.
//   npm run gc:soak -- [--engine mariadb|mysql] [--duration 4m] [--gc-interval 30s] [--gc-margin 1m]
//                      [--rows 100000] [--threads 2] [--key-skew 3] [--seed 7] [--no-baseline]
import { parseArgs } from 'node:util';
import type { RowDataPacket } from 'mysql2/promise';
import { allFaults } from '../src/cli/workload-flags.ts';
import { connect } from '../src/db/connection.ts';
import { harnessAudit } from '../src/harness/audit-step.ts';
import { parseDuration } from '../src/harness/faults.ts';
import { runHarness } from '../src/harness/harness.ts';
import { tombstoneTableName } from '../src/model/names.ts';
import { startServers } from '../src/servers/index.ts';
import { quoteTable } from '../src/sql/quote.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mariadb' },
    duration: { type: 'string', default: '4m' },
    'gc-interval': { type: 'string', default: '30s' },
    'gc-margin': { type: 'string', default: '1m' },
    rows: { type: 'string', default: '100000' },
    threads: { type: 'string', default: '2' },
    'key-skew': { type: 'string', default: '3' },
    seed: { type: 'string', default: '7' },
    'no-baseline': { type: 'boolean', default: false },
  },
});
const engine = values.engine === 'mysql' ? 'mysql' : 'mariadb';
const durationMs = parseDuration(values.duration!);
const marginMs = parseDuration(values['gc-margin']!);
const intervalMs = parseDuration(values['gc-interval']!);
const schema = 'soak';
const tables = 2;
const SAMPLE_MS = 10_000;

interface Sample {
  atS: number;
  tombstones: number[];
}

async function countTombstones(urls: string[]): Promise<number[]> {
  return Promise.all(
    urls.map(async (url) => {
      const c = await connect(url, { connectTimeoutMs: 3000 }).catch(() => null);
      if (!c) return -1;
      try {
        let n = 0;
        for (let t = 1; t <= tables; t++) {
          const [rows] = await c.query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${quoteTable('lww_meta', tombstoneTableName(schema, `sbtest${t}`))}`).catch(() => [[{ n: 0 }]] as never);
          n += Number(rows[0]?.n ?? 0);
        }
        return n;
      } finally {
        await c.end();
      }
    }),
  );
}

async function soak(label: string, servers: Awaited<ReturnType<typeof startServers>>, replicatorArgs: string[]) {
  const urls = servers.map((s) => s.url);
  const samples: Sample[] = [];
  let started = 0;
  let sampling = true;
  let lastGc: unknown;
  const sampler = (async () => {
    while (sampling) {
      await new Promise((r) => setTimeout(r, 1000));
      if (!started || Date.now() - started < (samples.length + 1) * SAMPLE_MS) continue;
      samples.push({ atS: Math.round((Date.now() - started) / 1000), tombstones: await countTombstones(urls) });
      const s = samples[samples.length - 1]!;
      console.log(`[${label}] t=${s.atS}s tombstones ${s.tombstones.map((n, i) => `n${i + 1}=${n}`).join(' ')}`);
    }
  })();
  const t0 = Date.now();
  const result = await runHarness({
    engine,
    servers,
    workload: { kind: 'oltp_write_only', schema, tables, rowsPerTable: Number(values.rows), threads: Number(values.threads), keySkew: Number(values['key-skew']), durationMs, seed: Number(values.seed) },
    faults: allFaults(durationMs),
    audit: harnessAudit,
    replicatorArgs,
    onReplicatorStatus: (s) => {
      // The writers start once every direction streams: time the samples from there.
      if (!started && (s as { directions?: Array<{ state: string }> }).directions?.every((d) => d.state === 'streaming')) started = Date.now();
      lastGc = (s as { gc?: unknown }).gc ?? lastGc;
    },
    finishTimeoutMs: 120_000,
  });
  sampling = false;
  await sampler;
  const final = await countTombstones(urls);
  const deletesPerSecond = result.transactions / (result.durationMs / 1000);
  const bound = 2 * deletesPerSecond * ((marginMs + intervalMs) / 1000);
  // After the first margin + interval GC has had its chance to run; before that every node only accumulates.
  const steady = samples.filter((s) => s.atS * 1000 >= marginMs + intervalMs + SAMPLE_MS);
  const peak = Math.max(0, ...steady.flatMap((s) => s.tombstones));
  const gc = lastGc as { runs?: number; collected?: number } | undefined;
  return { label, result, samples, final, deletesPerSecond, bound, peak, gc, growth: growthPerMinute(samples), seconds: (Date.now() - t0) / 1000 };
}

/** Tombstones added per minute (max of the nodes) in the first and the second half of the samples: equal for linear growth, ~0 in the second half for a bounded count. */
function growthPerMinute(samples: readonly Sample[]): [number, number] {
  const max = (s: Sample) => Math.max(...s.tombstones);
  const rate = (a: Sample | undefined, b: Sample | undefined) => (a && b && b.atS > a.atS ? ((max(b) - max(a)) * 60) / (b.atS - a.atS) : Number.NaN);
  const mid = Math.floor(samples.length / 2);
  return [rate(samples[0], samples[mid]), rate(samples[mid], samples[samples.length - 1])];
}

const servers = await startServers({ engine, count: 2 });
let ok = true;
try {
  const runs = [await soak('gc', servers, ['--gc-interval', values['gc-interval']!, '--gc-margin', values['gc-margin']!])];
  if (!values['no-baseline']) runs.push(await soak('no-gc', servers, ['--gc-interval', '0']));
  console.log(`\ncommand: npm run gc:soak -- ${process.argv.slice(2).join(' ')}`);
  console.log(`${engine}, ${values.duration} of oltp_write_only on 2 × ${values.rows} rows, ${values.threads} writers per node, every fault kind; GC every ${values['gc-interval']}, margin ${values['gc-margin']}`);
  for (const r of runs) {
    const audit = r.result.audit ? `audit findings ${r.result.audit.findings}` : 'no audit';
    const clean = r.result.converged && r.result.expectationMismatches.length === 0 && (r.result.audit?.findings ?? 1) === 0 && r.result.unknownOutcomes.unresolved.length === 0;
    if (!clean) ok = false;
    console.log(
      `[${r.label}] ${r.result.transactions} transactions = ${r.result.transactions} deletes (${r.deletesPerSecond.toFixed(1)}/s), faults ${r.result.faultsInjected}; ` +
        `converged ${r.result.converged}, expected-state mismatches ${r.result.expectationMismatches.length}, ${audit}; ${r.seconds.toFixed(0)} s`,
    );
    console.log(`[${r.label}] tombstones over time (max of the nodes): ${r.samples.map((s) => `${s.atS}s:${Math.max(...s.tombstones)}`).join(' ')}; after the run: ${r.final.join(', ')}`);
    console.log(`[${r.label}] growth per minute: first half ${r.growth[0].toFixed(0)}, second half ${r.growth[1].toFixed(0)}`);
    console.log(
      `[${r.label}] bound 2 × deletes per (margin + interval) window = ${Math.round(r.bound)} (per margin window alone: ${Math.round((r.bound * marginMs) / (marginMs + intervalMs))}); peak after the first margin + interval: ${r.peak} (${r.peak < r.bound ? 'below' : 'ABOVE'} the bound)` +
        `${r.gc ? `; GC passes ${r.gc.runs ?? 0}, tombstones removed ${r.gc.collected ?? 0}` : ''}`,
    );
  }
  const withGc = runs[0]!;
  if (withGc.peak >= withGc.bound) ok = false;
} finally {
  await Promise.all(servers.map((s) => s.destroy()));
}
process.exit(ok ? 0 : 1);
