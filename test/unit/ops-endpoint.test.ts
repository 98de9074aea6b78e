// The ops endpoint before a replicator is attached: it is up (bound before replication starts),
// unhealthy until then, and shows enabled failpoints in /status and /metrics.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Failpoints } from '../../src/failpoints/failpoints.ts';
import { type OpsServer, parseListenAddress, serveOps } from '../../src/replicator/metrics.ts';

describe('the ops endpoint', () => {
  let ops: OpsServer;
  let base = '';
  beforeAll(async () => {
    ops = await serveOps({ host: '127.0.0.1', port: 0, failpoints: new Failpoints('sinkDropMessage=1%return(true)') });
    base = `http://127.0.0.1:${ops.address.port}`;
  });
  afterAll(() => ops?.close());

  it('answers /healthz 503 and /status "starting" until the replicator is attached, with its failpoints', async () => {
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ ok: false, reason: 'starting' });
    expect(await (await fetch(`${base}/status`)).json()).toEqual({ state: 'starting', failpoints: [{ name: 'sinkDropMessage', spec: '1%return(true)' }] });
  });

  it('serves failpoint and process metrics, and 404 elsewhere', async () => {
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^lww_failpoint_enabled\{name="sinkDropMessage"\} 1$/m);
    expect(metrics).toMatch(/^# TYPE lww_applied_rows_total counter$/m);
    expect(metrics).toMatch(/^# TYPE lww_replication_lag_seconds histogram$/m);
    expect(metrics).toMatch(/^process_resident_memory_bytes \d+/m);
    expect((await fetch(`${base}/nope`)).status).toBe(404);
  });

  it('parses --metrics-addr as [host:]port', () => {
    expect(parseListenAddress('9464')).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(parseListenAddress('0.0.0.0:9464')).toEqual({ host: '0.0.0.0', port: 9464 });
    expect(parseListenAddress('[::1]:9464')).toEqual({ host: '::1', port: 9464 });
    expect(parseListenAddress('host:')).toMatch(/--metrics-addr must be/);
    expect(parseListenAddress('70000')).toMatch(/--metrics-addr must be/);
  });
});
