import { describe, expect, it } from 'vitest';
import { type FaultActions, modeOf, occurrences, parseDuration, parseFault, runFaults } from '../../src/harness/faults.ts';

function recorder(log: string[], over: Partial<FaultActions> = {}): FaultActions {
  return {
    killReplicator: async () => {
      log.push('kill');
      return true;
    },
    restartReplicator: async () => void log.push('restart'),
    cutNetwork: (node, mode, target) => {
      log.push(`cut ${node} ${mode}${target === 'writers' ? ' writers' : ''}`);
      return 2;
    },
    healNetwork: (node, target) => void log.push(`heal ${node}${target === 'writers' ? ' writers' : ''}`),
    stopServer: async (node, mode) => void log.push(`stop ${node} ${mode}`),
    startServer: async (node) => void log.push(`start ${node}`),
    setSkew: (node, ms) => void log.push(`skew ${node} ${ms}`),
    log: () => undefined,
    ...over,
  };
}

describe('fault terms', () => {
  it('parse into schedules', () => {
    expect(parseFault('kill@20s')).toEqual({ kind: 'kill', atMs: 20_000, durationMs: 1000 });
    expect(parseFault('net:n1@30s/10s~30s')).toEqual({ kind: 'net', node: 'n1', atMs: 30_000, durationMs: 10_000, everyMs: 30_000 });
    expect(parseFault('restart:n2@45s/3s')).toMatchObject({ kind: 'restart', node: 'n2', atMs: 45_000, durationMs: 3000 });
    expect(parseFault('skew:n1@0s=-5s')).toMatchObject({ kind: 'skew', node: 'n1', skewMs: -5000 });
    expect(parseDuration('1.5m')).toBe(90_000);
  });
  it('take a mode: drop, reset or blackhole for the network, clean or abrupt for a restart', () => {
    expect(parseFault('net:n1@30s/10s:blackhole')).toEqual({ kind: 'net', node: 'n1', atMs: 30_000, durationMs: 10_000, mode: 'blackhole' });
    expect(parseFault('net:n2@1s/2s~5s:reset')).toEqual({ kind: 'net', node: 'n2', atMs: 1000, durationMs: 2000, everyMs: 5000, mode: 'reset' });
    expect(parseFault('net:n1@1s:drop')).toMatchObject({ mode: 'drop', durationMs: 5000 });
    expect(parseFault('restart:n2@45s/3s:abrupt')).toMatchObject({ kind: 'restart', node: 'n2', durationMs: 3000, mode: 'abrupt' });
    expect(parseFault('restart:n2@45s/3s:clean').mode).toBe('clean');
    expect(parseFault('net:n1@30s/10s').mode).toBeUndefined();
  });
  it("a net fault may cut the writers' connections instead of the replicator's", () => {
    expect(parseFault('net:n1:writers@30s/5s')).toEqual({ kind: 'net', node: 'n1', target: 'writers', atMs: 30_000, durationMs: 5000 });
    expect(parseFault('net:n2:writers@1s/2s~5s:blackhole')).toEqual({ kind: 'net', node: 'n2', target: 'writers', atMs: 1000, durationMs: 2000, everyMs: 5000, mode: 'blackhole' });
    expect(parseFault('net:n1:replicator@1s').target).toBe('replicator');
    expect(parseFault('net:n1@1s').target).toBeUndefined();
    expect(() => parseFault('restart:n1:writers@1s/2s')).toThrow(/only a net fault takes a target/);
    expect(() => parseFault('net:n1:clients@1s')).toThrow(/cannot parse fault/);
  });
  it('explain what is wrong', () => {
    expect(() => parseFault('explode@1s')).toThrow(/cannot parse fault/);
    expect(() => parseFault('net@1s/2s')).toThrow(/needs a node/);
    expect(() => parseFault('skew:n1@0s')).toThrow(/needs =<offset>/);
    expect(() => parseFault('net:n1@1s/10s~5s')).toThrow(/period must be longer/);
    expect(() => parseFault('net:n1@1s/2s:abrupt')).toThrow(/one of drop, reset, blackhole/);
    expect(() => parseFault('restart:n1@1s/2s:blackhole')).toThrow(/one of clean, abrupt/);
    expect(() => parseFault('kill@1s:abrupt')).toThrow(/takes no mode/);
    expect(() => parseFault('net:n1@1s=5s')).toThrow(/only a clock skew/);
  });
  it('the seed scenario, 10 s of loss every 30 s, happens at 30, 60 and 90 s of a 2-minute run', () => {
    expect(occurrences(parseFault('net:n1@30s/10s~30s'), 120_000)).toEqual([30_000, 60_000, 90_000]);
  });
  it('without a mode, occurrences alternate, the gentle mode first', () => {
    const net = parseFault('net:n1@30s/10s~30s');
    expect([0, 1, 2, 3].map((i) => modeOf(net, i))).toEqual(['drop', 'reset', 'blackhole', 'drop']);
    const restart = parseFault('restart:n2@10s/2s~20s');
    expect([0, 1, 2].map((i) => modeOf(restart, i))).toEqual(['clean', 'abrupt', 'clean']);
    expect(modeOf(parseFault('net:n1@30s/10s~30s:blackhole'), 1)).toBe('blackhole');
    expect(modeOf(parseFault('kill@1s'), 0)).toBeUndefined();
  });
  it('runs each action in order, heals what it broke and reports what each occurrence did', async () => {
    const log: string[] = [];
    const effects = await runFaults([parseFault('net:n1@0ms/20ms~50ms'), parseFault('kill@10ms/10ms'), parseFault('restart:n2@5ms/10ms:abrupt')], 100, recorder(log));
    expect(effects.length).toBe(4);
    expect(log.filter((l) => l.startsWith('cut'))).toEqual(['cut n1 drop', 'cut n1 reset']);
    expect(log.filter((l) => l.startsWith('heal')).length).toBe(2);
    expect(log).toContain('stop n2 abrupt');
    expect(log.indexOf('start n2')).toBeGreaterThan(log.indexOf('stop n2 abrupt'));
    expect(log.indexOf('restart')).toBeGreaterThan(log.indexOf('kill'));
    expect(effects.map((e) => [e.kind, e.mode])).toEqual([
      ['net', 'drop'],
      ['restart', 'abrupt'],
      ['kill', undefined],
      ['net', 'reset'],
    ]);
    for (const e of effects) {
      expect(e.tookEffect).toBe(true);
      expect(e.downtimeMs).toBeGreaterThan(0);
    }
    expect(effects[0]).toMatchObject({ node: 'n1', connections: 2 });
    expect(effects[1]!.stopMs).toBeGreaterThanOrEqual(0);
  });
  it('cuts and heals the proxies of the target it names, and reports the target', async () => {
    const log: string[] = [];
    const effects = await runFaults([parseFault('net:n1:writers@0ms/10ms:reset'), parseFault('net:n2@20ms/10ms:drop')], 100, recorder(log));
    expect(log).toEqual(['cut n1 reset writers', 'heal n1 writers', 'cut n2 drop', 'heal n2']);
    expect(effects.map((e) => e.target)).toEqual(['writers', undefined]);
  });
  it('measures downtime as it was, not as scheduled: a slow stop lengthens a restart', async () => {
    const effects = await runFaults([parseFault('restart:n2@0ms/10ms')], 100, recorder([], { stopServer: () => new Promise((r) => setTimeout(r, 60)) }));
    expect(effects[0]!.mode).toBe('clean');
    expect(effects[0]!.stopMs).toBeGreaterThanOrEqual(55);
    expect(effects[0]!.downtimeMs).toBeGreaterThanOrEqual(55);
  });
  it('a fault that starts late still lasts its whole duration', async () => {
    const effects = await runFaults([parseFault('net:n1@0ms/40ms')], 100, recorder([]), Date.now() - 60);
    expect(effects[0]!.atMs).toBeGreaterThanOrEqual(55);
    expect(effects[0]!.downtimeMs).toBeGreaterThanOrEqual(35);
  });
  it('a kill with no replicator running took no effect; overlapping kills are reported so', async () => {
    let alive = true;
    const effects = await runFaults([parseFault('kill@0ms/30ms'), parseFault('kill@10ms/10ms')], 100, {
      ...recorder([]),
      killReplicator: async () => {
        const was = alive;
        alive = false;
        return was;
      },
      restartReplicator: async () => {
        alive = true;
      },
    });
    expect(effects.map((e) => e.tookEffect)).toEqual([true, false]);
    expect(effects[1]!.note).toMatch(/not running/);
  });
  it('an abort heals what is broken at once and skips what has not started', async () => {
    const log: string[] = [];
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 30);
    const t0 = Date.now();
    const effects = await runFaults([parseFault('net:n1@0ms/5s:blackhole'), parseFault('kill@3s')], 10_000, recorder(log), t0, abort.signal);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(log).toEqual(['cut n1 blackhole', 'heal n1']);
    expect(effects.length).toBe(1);
  });
});
