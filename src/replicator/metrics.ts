// The operations endpoint of a running replicator (prom-client over node:http):
//   /metrics  Prometheus: lww_*_total counters per direction, a lag histogram, gauges for the
//             current lag and state, enabled failpoints, tombstone GC (runs, removed, horizon, paused),
//             and the default process metrics
//   /healthz  200 while every direction is starting, copying or streaming; 503 (with the reasons) otherwise
//   /status   JSON of every direction and of GC (node URLs redacted)
// It listens before replication starts, so a bad address stops the command before anything runs.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { redactSecrets } from '../db/url.ts';
import type { Failpoints } from '../failpoints/failpoints.ts';
import type { Replicator, ReplicatorStatus } from './replicator.ts';

export interface OpsServerOptions {
  host: string;
  port: number;
  /** Shown in /status and as lww_failpoint_enabled. */
  failpoints?: Failpoints;
}

export interface OpsServer {
  /** The bound address (port 0 picks a free one). */
  address: AddressInfo;
  /** Serve this replicator (before: /healthz answers 503 and /status { state: 'starting' }). */
  attach(replicator: Replicator): void;
  close(): Promise<void>;
}

const HEALTHY = new Set(['starting', 'copying', 'streaming', 'restarting']);

/** The status JSON served at /status and printed by `replicate --json`. */
export function statusDocument(status: ReplicatorStatus, failpoints?: Failpoints): Record<string, unknown> {
  return {
    time: new Date().toISOString(),
    ...status,
    directions: status.directions.map((d) => ({ ...d, ...(d.lastError ? { lastError: redactSecrets(d.lastError) } : {}) })),
    failpoints: failpoints?.list() ?? [],
  };
}

/** Parses `--metrics-addr` ([host:]port; host defaults to 127.0.0.1), or returns the problem. */
export function parseListenAddress(text: string): { host: string; port: number } | string {
  const m = /^(?:(\[[^\]]+\]|[^:]+):)?(\d+)$/.exec(text.trim());
  const port = m ? Number(m[2]) : Number.NaN;
  if (!m || !Number.isInteger(port) || port < 0 || port > 65535) return `--metrics-addr must be [host:]port (got "${text}")`;
  return { host: (m[1] ?? '127.0.0.1').replace(/^\[|\]$/g, ''), port };
}

export async function serveOps(options: OpsServerOptions): Promise<OpsServer> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const labelNames = ['direction'] as const;
  const counter = (name: string, help: string) => new Counter({ name, help, labelNames, registers: [registry] });
  const gauge = (name: string, help: string, labels: readonly string[] = labelNames) => new Gauge({ name, help, labelNames: labels, registers: [registry] });
  const counters = {
    applied: counter('lww_applied_rows_total', 'Rows inserted, updated or deleted on the target'),
    stale: counter('lww_skipped_stale_total', 'Changes skipped because the target held the same or a newer version (LWW conflicts)'),
    tombstoned: counter('lww_skipped_by_tombstone_total', 'Changes skipped because a newer delete exists'),
    clashes: counter('lww_unique_clashes_total', 'Rows written to the conflict log (secondary UNIQUE clashes)'),
    restarts: counter('lww_direction_restarts_total', 'Times the direction restarted from its checkpoint'),
    transactions: counter('lww_captured_transactions_total', 'Source transactions read from the binlog'),
  };
  const lagHistogram = new Histogram({
    name: 'lww_replication_lag_seconds',
    help: 'Time from a source write (its version) to the commit that applied it on the target, per source transaction',
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [registry],
  });
  const lagBytes = gauge('lww_lag_bytes', 'Source binlog bytes not yet applied on the target');
  const lagSeconds = gauge('lww_lag_seconds', 'Lag of the last applied source transaction');
  const up = gauge('lww_direction_up', '1 while the direction is starting, copying or streaming; 0 when it stopped or failed');
  const gcHorizon = gauge('lww_gc_horizon_seconds', 'Tombstones below this time (unix seconds) may be removed on the node; absent while GC is paused', ['node']);
  const gcPaused = new Gauge({ name: 'lww_gc_paused', help: '1 while tombstone GC is paused (a peer unreachable or without progress); 0 when it runs', registers: [registry] });
  const gcTombstones = gauge('lww_gc_tombstones', 'Tombstones on the node at the last GC pass', ['node']);
  const gcCollected = new Counter({ name: 'lww_gc_tombstones_collected_total', help: 'Tombstones removed by GC', labelNames: ['node'], registers: [registry] });
  const gcConflicts = new Counter({ name: 'lww_gc_conflicts_removed_total', help: 'Conflict-log rows removed by the retention', labelNames: ['node'], registers: [registry] });
  const gcRuns = new Counter({ name: 'lww_gc_runs_total', help: 'GC passes completed', registers: [registry] });
  const failpointGauge = gauge('lww_failpoint_enabled', '1 for each failpoint enabled in this process (they break replication on purpose)', ['name']);
  for (const f of options.failpoints?.list() ?? []) failpointGauge.set({ name: f.name }, 1);

  let replicator: Replicator | undefined;
  // Counters grow by what the sink totals grew since the last scrape; a restarted direction's new sink starts at 0.
  const seen = new Map<string, number>();
  const gcSeen: { runs: number; byNode: Record<string, { collected: number; conflictsRemoved: number }> } = { runs: 0, byNode: {} };
  const advance = (c: Counter<'direction'>, direction: string, key: string, total: number) => {
    const before = seen.get(`${direction}/${key}`) ?? 0;
    const delta = total >= before ? total - before : total;
    if (delta > 0) c.inc({ direction }, delta);
    seen.set(`${direction}/${key}`, total);
  };
  const refresh = async (): Promise<ReplicatorStatus | undefined> => {
    if (!replicator) return undefined;
    const status = await replicator.status();
    for (const d of status.directions) {
      const l = { direction: d.name };
      const t = d.sink.totals;
      advance(counters.applied, d.name, 'applied', t.inserted + t.updated + t.deleted);
      advance(counters.stale, d.name, 'stale', t.skippedStale);
      advance(counters.tombstoned, d.name, 'tombstoned', t.skippedByTombstone);
      advance(counters.clashes, d.name, 'clashes', t.uniqueClashes);
      advance(counters.restarts, d.name, 'restarts', d.restarts);
      advance(counters.transactions, d.name, 'transactions', d.captured.transactions);
      if (d.lagBytes !== undefined) lagBytes.set(l, d.lagBytes);
      if (d.lagMs !== undefined) lagSeconds.set(l, d.lagMs / 1000);
      up.set(l, HEALTHY.has(d.state) ? 1 : 0);
    }
    const gc = status.gc;
    if (gc?.last && gc.runs !== gcSeen.runs) {
      // Counters grow by what the totals grew since the last scrape.
      gcRuns.inc(gc.runs - gcSeen.runs);
      gcSeen.runs = gc.runs;
      gcPaused.set(gc.last.paused.length > 0 ? 1 : 0);
      gcHorizon.reset();
      for (const n of gc.last.nodes) {
        if (n.horizonTime) gcHorizon.set({ node: n.name }, Date.parse(n.horizonTime) / 1000);
        gcTombstones.set({ node: n.name }, n.tombstones);
      }
      for (const [node, t] of Object.entries(gc.byNode)) {
        const before = gcSeen.byNode[node] ?? { collected: 0, conflictsRemoved: 0 };
        if (t.collected > before.collected) gcCollected.inc({ node }, t.collected - before.collected);
        if (t.conflictsRemoved > before.conflictsRemoved) gcConflicts.inc({ node }, t.conflictsRemoved - before.conflictsRemoved);
        gcSeen.byNode[node] = { ...t };
      }
    }
    return status;
  };

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = async () => {
      if (path === '/metrics') {
        await refresh();
        res.writeHead(200, { 'content-type': registry.contentType }).end(await registry.metrics());
      } else if (path === '/status') {
        const status = await refresh();
        const body = status ? statusDocument(status, options.failpoints) : { state: 'starting', failpoints: options.failpoints?.list() ?? [] };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body, bigintSafe));
      } else if (path === '/healthz') {
        const status = await refresh();
        const bad = status ? status.directions.filter((d) => !HEALTHY.has(d.state)) : [];
        const healthy = status !== undefined && bad.length === 0;
        const body = { ok: healthy, ...(status ? {} : { reason: 'starting' }), problems: bad.map((d) => ({ direction: d.name, state: d.state, lastError: redactSecrets(d.lastError ?? '') })) };
        res.writeHead(healthy ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics, /healthz or /status\n');
      }
    };
    answer().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(redactSecrets(err instanceof Error ? err.message : String(err)));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: server.address() as AddressInfo,
    attach(r) {
      replicator = r;
      for (const d of r.directions) d.lag.onSample = (ms) => lagHistogram.observe({ direction: d.name }, Math.max(0, ms) / 1000);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function bigintSafe(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}
