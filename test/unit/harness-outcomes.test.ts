import { describe, expect, it } from 'vitest';
import { failureReasons, type HarnessResult } from '../../src/harness/harness.ts';
import { addTallies, type InDoubt, OutcomeLedger, settle } from '../../src/harness/outcomes.ts';

const doubt = (marker: string, writes: string[]): InDoubt<string> => ({ marker, node: 'n1', writes, error: 'PROTOCOL_CONNECTION_LOST: lost', at: 0 });

describe('unknown commit outcomes', () => {
  it('a present marker means committed, an absent one not committed', () => {
    const { committed, notCommitted } = settle([doubt('a', ['w1']), doubt('b', ['w2']), doubt('c', [])], new Set(['a', 'c', 'zzz']));
    expect(committed.map((d) => d.marker)).toEqual(['a', 'c']);
    expect(notCommitted.map((d) => d.marker)).toEqual(['b']);
  });

  it("the ledger hands a committed transaction's writes to the expected state, and only those", () => {
    const acked: string[] = [];
    const ledger = new OutcomeLedger<string>((w) => acked.push(...w));
    ledger.add(doubt('a', ['a1', 'a2']));
    ledger.add(doubt('b', ['b1']));
    ledger.decide(new Set(['a']));
    expect(acked).toEqual(['a1', 'a2']);
    expect(ledger.size).toBe(0);
    expect(ledger.tally).toMatchObject({ committed: 1, notCommitted: 1, unresolved: [] });
    expect(ledger.tally.decided.map((d) => [d.marker, d.committed, d.writes])).toEqual([
      ['a', true, 2],
      ['b', false, 1],
    ]);
  });

  it('a failed look keeps outcomes pending; closing reports them unresolved with the last reason, never as committed or not', () => {
    const acked: string[] = [];
    const ledger = new OutcomeLedger<string>((w) => acked.push(...w));
    ledger.add(doubt('a', ['a1']));
    ledger.failedCheck('ECONNREFUSED: connect refused');
    expect(ledger.markers()).toEqual(['a']);
    ledger.close();
    expect(acked).toEqual([]);
    expect(ledger.tally).toMatchObject({ committed: 0, notCommitted: 0 });
    expect(ledger.tally.unresolved).toEqual([{ node: 'n1', marker: 'a', writes: 1, error: 'PROTOCOL_CONNECTION_LOST: lost', lastCheck: 'ECONNREFUSED: connect refused' }]);
  });

  it('tallies add up over writer threads', () => {
    const t = addTallies([
      { committed: 1, notCommitted: 2, unresolved: [], decided: [] },
      { committed: 3, notCommitted: 0, unresolved: [{ node: 'n2', marker: 'x', writes: 1, error: 'e', lastCheck: 'l' }], decided: [] },
    ]);
    expect(t).toMatchObject({ committed: 4, notCommitted: 2 });
    expect(t.unresolved.map((u) => u.marker)).toEqual(['x']);
  });

  it('a harness run with an unresolved outcome fails, naming the marker', () => {
    const passing = {
      converged: true,
      divergedKeys: 0,
      expectationMismatches: [],
      audit: { counts: {}, findings: 0 },
      unknownOutcomes: { committed: 2, notCommitted: 1, unresolved: [], decided: [] },
    } as unknown as HarnessResult;
    expect(failureReasons(passing)).toEqual([]);
    const failing = { ...passing, unknownOutcomes: { ...passing.unknownOutcomes, unresolved: [{ node: 'n1', marker: 'm-1', writes: 3, error: 'ECONNRESET: reset', lastCheck: 'ECONNREFUSED: refused' }] } };
    const reasons = failureReasons(failing);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/1 writer commits with an unknown outcome stayed unresolved/);
    expect(reasons[0]).toMatch(/n1 marker m-1 \(3 writes/);
  });
});
