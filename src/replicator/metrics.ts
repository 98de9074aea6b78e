// Prometheus metrics for a running replicator (prom-client), served on an optional port.
import { createServer, type Server } from 'node:http';
import { Gauge, Registry } from 'prom-client';
import type { Replicator } from './replicator.ts';

export async function serveMetrics(replicator: Replicator, port: number): Promise<Server> {
  const registry = new Registry();
  const labelNames = ['direction'] as const;
  const gauge = (name: string, help: string) => new Gauge({ name, help, labelNames, registers: [registry] });
  const applied = gauge('lww_applied_rows', 'Rows inserted, updated or deleted on the target');
  const stale = gauge('lww_skipped_stale_rows', 'Changes skipped because the target held the same or a newer version (LWW conflicts)');
  const tombstoned = gauge('lww_skipped_by_tombstone_rows', 'Changes skipped because a newer delete exists');
  const clashes = gauge('lww_unique_clashes', 'Rows written to the conflict log (secondary UNIQUE clashes)');
  const lagBytes = gauge('lww_lag_bytes', 'Source binlog bytes not yet applied on the target');
  const lagSeconds = gauge('lww_lag_seconds', 'Time from the source write to its apply on the target (last batch)');
  const restarts = gauge('lww_direction_restarts', 'Times the direction restarted from its checkpoint');

  const server = createServer(async (req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    const status = await replicator.status();
    for (const d of status.directions) {
      const l = { direction: d.name };
      const t = d.sink.totals;
      applied.set(l, t.inserted + t.updated + t.deleted);
      stale.set(l, t.skippedStale);
      tombstoned.set(l, t.skippedByTombstone);
      clashes.set(l, t.uniqueClashes);
      if (d.lagBytes !== undefined) lagBytes.set(l, d.lagBytes);
      if (d.lagMs !== undefined) lagSeconds.set(l, d.lagMs / 1000);
      restarts.set(l, d.restarts);
    }
    res.writeHead(200, { 'content-type': registry.contentType }).end(await registry.metrics());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return server;
}
