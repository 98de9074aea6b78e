import { describe, expect, it } from 'vitest';
import { occurrences, parseDuration, parseFault, runFaults } from '../../src/harness/faults.ts';

describe('fault terms', () => {
  it('parse into schedules', () => {
    expect(parseFault('kill@20s')).toEqual({ kind: 'kill', atMs: 20_000, durationMs: 1000 });
    expect(parseFault('net:n1@30s/10s~30s')).toEqual({ kind: 'net', node: 'n1', atMs: 30_000, durationMs: 10_000, everyMs: 30_000 });
    expect(parseFault('restart:n2@45s/3s')).toMatchObject({ kind: 'restart', node: 'n2', atMs: 45_000, durationMs: 3000 });
    expect(parseFault('skew:n1@0s=-5s')).toMatchObject({ kind: 'skew', node: 'n1', skewMs: -5000 });
    expect(parseDuration('1.5m')).toBe(90_000);
  });
  it('explain what is wrong', () => {
    expect(() => parseFault('explode@1s')).toThrow(/cannot parse fault/);
    expect(() => parseFault('net@1s/2s')).toThrow(/needs a node/);
    expect(() => parseFault('skew:n1@0s')).toThrow(/needs =<offset>/);
    expect(() => parseFault('net:n1@1s/10s~5s')).toThrow(/period must be longer/);
  });
  it('the seed scenario, 10 s of loss every 30 s, happens at 30, 60 and 90 s of a 2-minute run', () => {
    expect(occurrences(parseFault('net:n1@30s/10s~30s'), 120_000)).toEqual([30_000, 60_000, 90_000]);
  });
  it('runs each action in order and heals what it broke', async () => {
    const log: string[] = [];
    const n = await runFaults([parseFault('net:n1@0ms/20ms~50ms'), parseFault('kill@10ms/10ms')], 100, {
      killReplicator: async () => void log.push('kill'),
      restartReplicator: async () => void log.push('restart'),
      cutNetwork: (node) => void log.push(`cut ${node}`),
      healNetwork: (node) => void log.push(`heal ${node}`),
      stopServer: async () => undefined,
      startServer: async () => undefined,
      setSkew: () => undefined,
      log: () => undefined,
    });
    expect(n).toBe(3);
    expect(log.filter((l) => l.startsWith('cut')).length).toBe(2);
    expect(log.filter((l) => l.startsWith('heal')).length).toBe(2);
    expect(log.indexOf('restart')).toBeGreaterThan(log.indexOf('kill'));
  });
});
