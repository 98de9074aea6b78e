import { describe, expect, it } from 'vitest';
import { routesFromEnv } from '../../src/cli/commands/replicate.ts';
import { allFaults } from '../../src/cli/workload-flags.ts';
import { type FaultActions, linkOf, modeOf, occurrences, parseDuration, parseFault, runFaults, skewOf } from '../../src/harness/faults.ts';
import { ClockSkew } from '../../src/harness/workload.ts';

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
  it('cut one direction, or one end of it: its reading of the source (capture) or its writing into the target (sink)', () => {
    expect(parseFault('net:n1>n2@1s/2s')).toEqual({ kind: 'net', node: 'n1', to: 'n2', atMs: 1000, durationMs: 2000 });
    expect(parseFault('net:n2>n1.sink@1s/2s:blackhole')).toEqual({ kind: 'net', node: 'n2', to: 'n1', role: 'sink', atMs: 1000, durationMs: 2000, mode: 'blackhole' });
    expect(linkOf(parseFault('net:n1>n2.capture@1s'))).toBe('n1>n2.capture');
    expect(linkOf(parseFault('net:n2@1s'))).toBe('n2');
    expect(() => parseFault('net:n1>n1@1s')).toThrow(/two different nodes/);
    expect(() => parseFault('restart:n1>n2@1s')).toThrow(/not a node/);
    expect(() => parseFault('net:n1>n2.reader@1s')).toThrow(/not a node or a direction/);
  });
  it('a slow link takes a latency, a bandwidth or both', () => {
    expect(parseFault('net:n1@20s/30s:slow=50ms,1mbit')).toMatchObject({ mode: 'slow', slow: { latencyMs: 50, bytesPerSecond: 125_000 }, durationMs: 30_000 });
    expect(parseFault('net:n1>n2.sink@1s:slow=200ms').slow).toEqual({ latencyMs: 200 });
    expect(parseFault('net:n1@1s:slow=512kbit').slow).toEqual({ latencyMs: 0, bytesPerSecond: 64_000 });
    expect(() => parseFault('net:n1@1s:slow')).toThrow(/needs =<latency>,<bandwidth>/);
    expect(() => parseFault('net:n1@1s:drop=5ms')).toThrow(/only a slow link/);
    // Never part of the alternation.
    expect([0, 1, 2, 3].map((i) => modeOf(parseFault('net:n1@1s/1s~2s'), i))).not.toContain('slow');
  });
  it('a kill takes a commit point; twin starts a second replicator', () => {
    expect(parseFault('kill:after-commit@20s')).toEqual({ kind: 'kill', point: 'after-commit', atMs: 20_000, durationMs: 1000 });
    expect(parseFault('kill:commit-in-flight@2s/3s').point).toBe('commit-in-flight');
    expect(parseFault('kill:after-statements@2s').point).toBe('after-statements');
    expect(() => parseFault('kill:before-begin@2s')).toThrow(/commit point is one of after-statements, commit-in-flight, after-commit/);
    expect(parseFault('twin@3s/5s')).toEqual({ kind: 'twin', atMs: 3000, durationMs: 5000 });
    expect(() => parseFault('twin:n1@3s')).toThrow(/not a node/);
  });
  it('a skew changes during the run: a list of offsets in turn, or one offset alternating its sign, each held until the next', () => {
    const list = parseFault('skew:n2@0s~10s=3s,-2s,+1s');
    expect(list).toMatchObject({ node: 'n2', everyMs: 10_000, durationMs: 10_000, skewsMs: [3000, -2000, 1000] });
    expect([0, 1, 2, 3].map((i) => skewOf(list, i))).toEqual([3000, -2000, 1000, 3000]);
    const flip = parseFault('skew:n1@5s~20s=-4s');
    expect([0, 1, 2].map((i) => skewOf(flip, i))).toEqual([-4000, 4000, -4000]);
    expect(skewOf(parseFault('skew:n1@0s=-5s'), 0)).toBe(-5000);
    expect(() => parseFault('skew:n1@0s/30s~10s=1s')).toThrow(/period must be longer/);
  });
  it('a clock ahead is every other clock behind (the triggers refuse SET TIMESTAMP ahead of the server)', () => {
    const skew = new ClockSkew();
    skew.set('n1', -5000);
    expect([skew.get('n1'), skew.get('n2')]).toEqual([-5000, 0]);
    skew.set('n2', 3000);
    expect([skew.get('n1'), skew.get('n2')]).toEqual([-8000, 0]);
    skew.set('n1', 4000);
    expect([skew.get('n1'), skew.get('n2')]).toEqual([0, -1000]);
  });
  it('long and short runs with --all-faults skew both nodes, both signs, changing', () => {
    for (const ms of [120_000, 20_000]) {
      const skews = allFaults(ms).filter((f) => f.kind === 'skew');
      expect(new Set(skews.map((f) => f.node))).toEqual(new Set(['n1', 'n2']));
      const offsets = skews.flatMap((f) => occurrences(f, ms).map((_, i) => skewOf(f, i)));
      expect(offsets.some((o) => o > 0) && offsets.some((o) => o < 0)).toBe(true);
      for (const f of skews) expect(occurrences(f, ms).length).toBeGreaterThan(1);
    }
  });
  it('LWW_ROUTES lists per-direction URLs', () => {
    expect(routesFromEnv('n1>n2.capture=mysql://root:a,b@127.0.0.1:1/ n1>n2.sink=mysql://root@127.0.0.1:2/,n2>n1.sink=mysql://x@h:3/')).toEqual({
      'n1>n2.capture': 'mysql://root:a,b@127.0.0.1:1/',
      'n1>n2.sink': 'mysql://root@127.0.0.1:2/',
      'n2>n1.sink': 'mysql://x@h:3/',
    });
    expect(routesFromEnv(' ')).toBeUndefined();
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
    // Far apart (100 ms and more): the order holds on a loaded machine, where timers run late.
    const effects = await runFaults([parseFault('net:n1@0ms/400ms~1s'), parseFault('kill@200ms/200ms'), parseFault('restart:n2@100ms/200ms:abrupt')], 1600, recorder(log));
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
  it('a changing skew hands over from one offset to the next without resetting in between; the last holds to the end', async () => {
    const log: string[] = [];
    const effects = await runFaults([parseFault('skew:n2@0ms~30ms=3s,-2s')], 80, recorder(log));
    expect(log).toEqual(['skew n2 3000', 'skew n2 -2000', 'skew n2 3000']);
    expect(effects.map((e) => e.skewMs)).toEqual([3000, -2000, 3000]);
    expect(effects.at(-1)!.note).toMatch(/run's end/);
  });
  it('a slow link and a one-direction cut reach the actions by their link', async () => {
    const log: string[] = [];
    const effects = await runFaults([parseFault('net:n1>n2.sink@0ms/10ms:slow=5ms,1mbit'), parseFault('net:n2>n1@0ms/10ms:reset')], 50, {
      ...recorder(log),
      cutNetwork: (link, mode, _target, slow) => {
        log.push(`cut ${link} ${mode}${slow ? ` ${slow.latencyMs}/${slow.bytesPerSecond}` : ''}`);
        return 1;
      },
    });
    expect(log.filter((l) => l.startsWith('cut')).sort()).toEqual(['cut n1>n2.sink slow 5/125000', 'cut n2>n1 reset']);
    expect(log.filter((l) => l.startsWith('heal')).length).toBe(2);
    expect(effects.map((e) => e.node).sort()).toEqual(['n1>n2.sink', 'n2>n1']);
  });
  it('a commit-point kill that no batch reached took no effect; one that landed reports what was seen and heals from the death', async () => {
    const log: string[] = [];
    const effects = await runFaults([parseFault('kill:after-commit@0ms/10ms'), parseFault('kill:after-statements@20ms/10ms')], 60, {
      ...recorder(log),
      killReplicator: async (point) =>
        point === 'after-commit' ? { killed: true, detail: { committed: true } } : { killed: false, note: 'no target transaction reached it' },
    });
    expect(effects.map((e) => [e.point, e.tookEffect])).toEqual([
      ['after-commit', true],
      ['after-statements', false],
    ]);
    expect(effects[0]!.detail).toEqual({ committed: true });
    expect(effects[1]!.note).toMatch(/reached/);
    expect(log.filter((l) => l === 'restart').length).toBe(1);
  });

  it('cuts and heals the proxies of the target it names, and reports the target', async () => {
    const log: string[] = [];
    const effects = await runFaults([parseFault('net:n1:writers@0ms/100ms:reset'), parseFault('net:n2@300ms/100ms:drop')], 600, recorder(log));
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
