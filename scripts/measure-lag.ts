// Replication lag under load: 2 nodes × --threads writers each (default 4) doing single-row updates (oltp_update_non_index),
// replicated both ways. Lag of a change = commit time of the target transaction that applied it −
// the physical time of its version (stamped by the source's trigger at write time). That includes the
// source's own time from the write to its COMMIT answered, printed per node beside it ("source commit
// after version"): the part of the lag spent before the binlog holds the change. The writers share
// this process with the replicator (in worker threads of their own they wrote ~15 % more on this
// 2-core machine and the lag doubled: the replicator's share of the CPU is what bounds it here).
//   npm run measure:lag -- [--engine mysql|mariadb] [--seconds 20] [--threads 4] [--apply-workers N]   (--threads 16: 2 × 16 writers)
import { parseArgs } from 'node:util';
import { prepareWorkloadTables, runWriters, type WorkloadOptions, workloadTables } from '../src/harness/workload.ts';
import { install } from '../src/install/install.ts';
import { physicalMicrosOf } from '../src/model/version.ts';
import { quantile } from '../src/replicator/lag.ts';
import { DEFAULT_APPLY_WORKERS, Replicator } from '../src/replicator/replicator.ts';
import { startServers } from '../src/servers/index.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mysql' },
    seconds: { type: 'string', default: '20' },
    threads: { type: 'string', default: '4' },
    'apply-workers': { type: 'string', default: String(DEFAULT_APPLY_WORKERS) },
  },
});
const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const threads = Number(values.threads);
if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`--threads must be a positive integer (got ${values.threads})`);
const applyWorkers = Number(values['apply-workers']);
if (!Number.isInteger(applyWorkers) || applyWorkers < 1) throw new RangeError(`--apply-workers must be a positive integer (got ${values['apply-workers']})`);
const servers = await startServers({ engine, count: 2 });
try {
  const urls = servers.map((s) => s.url);
  const opts: WorkloadOptions = {
    kind: 'oltp_update_non_index',
    schema: 'lagdb',
    tables: 4,
    rowsPerTable: 10_000,
    threads,
    durationMs: Number(values.seconds) * 1000,
    seed: 7,
  };
  for (const [i, url] of urls.entries()) {
    await prepareWorkloadTables(url, opts);
    await install({ url, nodeId: i + 1, tables: workloadTables(opts) });
  }
  const replicator = new Replicator({ nodes: urls, applyWorkers, sink: { batch: { maxDelayMs: 2 } }, capture: { heartbeatMs: 1000 } });
  await replicator.start();
  await replicator.whenStreaming();
  for (const d of replicator.directions) d.lag.reset();
  const started = Date.now();
  const results = await Promise.all(urls.map((url, i) => runWriters({ name: `n${i + 1}`, url }, opts)));
  await new Promise((r) => setTimeout(r, 2000));
  const seconds = (Date.now() - started) / 1000;
  const status = await replicator.status();
  await replicator.stop();
  console.log(`measure-lag on ${engine}: 2 nodes × ${threads} writers (${2 * threads} in all), single-row updates, ${values.seconds}s, ${applyWorkers} apply worker(s) per direction`);
  const quantileOf = (xs: number[], q: number) => quantile(xs, q) ?? Number.NaN;
  for (const [i, r] of results.entries()) {
    // The writer's clock (harnessClockMs) and the trigger's are this machine's one clock.
    const delays = r.acked.filter((w) => w.committedAt !== undefined).map((w) => w.committedAt! - Number(physicalMicrosOf(w.version)) / 1000);
    console.log(
      `  n${i + 1}: ${r.transactions} transactions (${Math.round(r.transactions / seconds)}/s), ${r.retries} deadlock retries; source commit after version p50 ${quantileOf(delays, 0.5).toFixed(1)} ms, p99 ${quantileOf(delays, 0.99).toFixed(1)} ms over ${delays.length} writes`,
    );
  }
  for (const d of replicator.directions) {
    const s = status.directions.find((x) => x.name === d.name)!;
    const q = (p: number) => (d.lag.quantile(p) ?? Number.NaN).toFixed(1);
    console.log(
      `  ${d.name}: lag p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms over ${d.lag.count} samples; applied ${s.sink.totals.updated}, stale-skipped ${s.sink.totals.skippedStale}, batches ${s.sink.batches}`,
    );
  }
} finally {
  await Promise.all(servers.map((s) => s.destroy()));
}
