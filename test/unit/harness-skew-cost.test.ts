// LWW's accepted cost under skew, counted from the writers' observations: the author of a version is
// the transaction that read it back first, and a write lost to an earlier one began after a write of
// the same key with a higher version had committed.
import { describe, expect, it } from 'vitest';
import { skewCost, type TimedWrite } from '../../src/harness/skew-cost.ts';

const w = (version: bigint, begunAt: number, readAt: number, committedAt: number | undefined, id = 1): TimedWrite => ({ table: 't', id, version, begunAt, readAt, committedAt });

describe('the skew cost of a run', () => {
  it('counts a write that began after a higher-versioned write of its key committed', () => {
    // 20 committed at 12; 10 began at 15 (its node's clock behind) and got a lower version: lost to the earlier write.
    expect(skewCost([w(20n, 10, 11, 12), w(10n, 15, 16, 17)])).toEqual({ authored: 2, lostToEarlier: 1, keys: 1 });
  });
  it('does not count concurrent writes, nor a later write with the higher version', () => {
    // Overlapping in real time: whichever version wins, neither was later.
    expect(skewCost([w(20n, 10, 11, 15), w(10n, 12, 13, 14)]).lostToEarlier).toBe(0);
    // Began exactly when the other's COMMIT answered: not strictly after.
    expect(skewCost([w(20n, 10, 11, 12), w(10n, 12, 13, 14)]).lostToEarlier).toBe(0);
    expect(skewCost([w(10n, 10, 11, 12), w(20n, 15, 16, 17)]).lostToEarlier).toBe(0);
    // Another key's write says nothing.
    expect(skewCost([w(20n, 10, 11, 12, 1), w(10n, 15, 16, 17, 2)]).lostToEarlier).toBe(0);
  });
  it('takes each version once, from its author: the transaction that read it back first', () => {
    // A later transaction read version 20 back (it did not write it): its times are not 20's.
    const author = w(20n, 30, 31, 32);
    const reader = { ...w(20n, 5, 40, 41) };
    expect(skewCost([reader, author, w(10n, 35, 36, 37)])).toEqual({ authored: 2, lostToEarlier: 1, keys: 1 });
    // Were the reader taken as the author (begun at 5, committed at 41), 10 would not count.
    expect(skewCost([{ ...reader, readAt: 1 }, author, w(10n, 35, 36, 37)]).lostToEarlier).toBe(0);
  });
  it('uses only known commit times: an outcome decided later by its marker cannot make a write lost', () => {
    expect(skewCost([w(20n, 10, 11, undefined), w(10n, 15, 16, 17)])).toEqual({ authored: 2, lostToEarlier: 0, keys: 0 });
    // ... but such a write can itself be the one lost.
    expect(skewCost([w(20n, 10, 11, 12), w(10n, 15, 16, undefined)]).lostToEarlier).toBe(1);
  });
  it('counts against the highest version committed before the write began, not only the last one', () => {
    const writes = [w(30n, 1, 2, 3), w(5n, 4, 5, 6), w(20n, 7, 8, 9), w(25n, 10, 11, 12)];
    // 5 (after 30), 20 (after 30), 25 (after 30): three lost, all to 30.
    expect(skewCost(writes)).toEqual({ authored: 4, lostToEarlier: 3, keys: 1 });
  });
  it('leaves out versions no writer made: a reader of one would pass for its author', () => {
    // The initial row (1 << 10) read back unchanged on a lagging node after another node's write of the key committed.
    const initial = w(1n << 10n, 15, 16, 17);
    expect(skewCost([w(20n << 10n, 10, 11, 12), initial]).lostToEarlier).toBe(1);
    expect(skewCost([w(20n << 10n, 10, 11, 12), initial], { physicalBeforeUs: 2n })).toEqual({ authored: 1, lostToEarlier: 0, keys: 0 });
    // A sink's follow-up version, likewise.
    expect(skewCost([w(20n << 10n, 10, 11, 12), w(7n << 10n, 15, 16, 17)], { versions: new Set([7n << 10n]) })).toEqual({ authored: 1, lostToEarlier: 0, keys: 0 });
  });
  it('skips observations without times (a write recorded outside the writers loop)', () => {
    expect(skewCost([{ table: 't', id: 1, version: 20n }, w(10n, 15, 16, 17)])).toEqual({ authored: 1, lostToEarlier: 0, keys: 0 });
  });
});
