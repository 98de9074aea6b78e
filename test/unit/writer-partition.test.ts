import { describe, expect, it } from 'vitest';
import { randomInt, seededRandom } from '../../src/harness/random.ts';
import { keyHashes, type PartitionRow, partitionRows } from '../../src/writer/partition.ts';

const KEYS = [['id'], ['u']] as const;

function row(before: Record<string, unknown> | null, after: Record<string, unknown> | null, table = 'db.t'): PartitionRow {
  return { table, uniqueKeys: KEYS, before, after };
}

/** Rows 0..n-1 inserting distinct ids and distinct unique values. */
function inserts(n: number, from = 1): PartitionRow[] {
  return Array.from({ length: n }, (_, i) => row(null, { id: from + i, u: `u${from + i}` }));
}

describe('partitionRows', () => {
  it('spreads rows with unrelated keys over the workers, every row exactly once', () => {
    const p = partitionRows(inserts(200), 4);
    expect(p.rowsOf.filter((r) => r.length > 0).length).toBe(4);
    expect(p.rowsOf.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    for (const [w, idx] of p.rowsOf.entries()) for (const i of idx) expect(p.workerOf[i]).toBe(w);
  });

  it('keeps changes of one primary key in one worker, in source order', () => {
    const rows = [...inserts(50), row({ id: 7, u: 'u7' }, { id: 7, u: 'u7', x: 1 }), ...inserts(50, 100), row({ id: 7, u: 'u7' }, null)];
    const p = partitionRows(rows, 8);
    const w = p.workerOf[6]!;
    expect(p.workerOf[50]).toBe(w);
    expect(p.workerOf[101]).toBe(w);
    const mine = p.rowsOf[w]!.filter((i) => i === 6 || i === 50 || i === 101);
    expect(mine).toEqual([6, 50, 101]);
  });

  it('keeps a swap of secondary unique values together through before and after images', () => {
    // id 1 frees 'a' (a→x), id 2 takes it (b→a), id 1 takes 'b' (x→b): a chain over three values.
    const rows = [
      ...inserts(30, 100),
      row({ id: 1, u: 'a' }, { id: 1, u: 'x' }),
      row({ id: 2, u: 'b' }, { id: 2, u: 'a' }),
      row({ id: 1, u: 'x' }, { id: 1, u: 'b' }),
    ];
    for (const workers of [2, 4, 8, 16]) {
      const p = partitionRows(rows, workers);
      const w = p.workerOf[30]!;
      expect([p.workerOf[31], p.workerOf[32]]).toEqual([w, w]);
      expect(p.rowsOf[w]!.filter((i) => i >= 30)).toEqual([30, 31, 32]);
    }
  });

  it('joins rows clashing only through a third row (union of clashing keys)', () => {
    // Row 0 and row 2 share nothing; row 1 shares id with row 0 and u with row 2.
    const rows = [row(null, { id: 1, u: 'p' }), row(null, { id: 1, u: 'q' }), row(null, { id: 2, u: 'q' })];
    const spread = [2, 3, 4, 5, 6, 7, 8].map((w) => partitionRows([rows[0]!, rows[2]!], w));
    // Without row 1 they land apart for some worker count; with it, always together.
    expect(spread.some((p) => p.workerOf[0] !== p.workerOf[1])).toBe(true);
    for (const w of [2, 3, 4, 5, 6, 7, 8]) {
      const p = partitionRows(rows, w);
      expect(new Set(p.workerOf).size).toBe(1);
    }
  });

  it('hashes text at least as coarsely as a case- and accent-insensitive PAD SPACE collation', () => {
    expect(keyHashes(row(null, { id: 1, u: 'Ä b ' }))).toEqual(keyHashes(row(null, { id: 1, u: 'a b' })));
    expect(keyHashes(row(null, { id: 1, u: 'ab' }))).not.toEqual(keyHashes(row(null, { id: 1, u: 'a b' })));
  });

  it('leaves out keys with a NULL column and separates tables', () => {
    expect(keyHashes(row(null, { id: 1, u: null }))).toHaveLength(1);
    const a = keyHashes(row(null, { id: 1, u: null }));
    const b = keyHashes(row(null, { id: 1, u: null }, 'db.other'));
    expect(a).not.toEqual(b);
    // Many rows with a NULL unique value do not collapse into one worker.
    const p = partitionRows(Array.from({ length: 100 }, (_, i) => row(null, { id: i, u: null })), 4);
    expect(p.rowsOf.filter((r) => r.length > 0).length).toBe(4);
  });

  it('one worker takes everything in order; zero workers is refused', () => {
    expect(partitionRows(inserts(10), 1).rowsOf).toEqual([Array.from({ length: 10 }, (_, i) => i)]);
    expect(() => partitionRows(inserts(1), 0)).toThrow(RangeError);
  });

  it('property: rows sharing any key hash share a worker, and each worker keeps source order', () => {
    for (let seed = 1; seed <= 30; seed++) {
      const random = seededRandom(seed);
      const n = randomInt(random, 1, 120);
      const rows = Array.from({ length: n }, () => {
        const img = () => ({ id: randomInt(random, 1, 60), u: random() < 0.2 ? null : `v${randomInt(random, 1, 60)}` });
        const op = random();
        return row(op < 0.3 ? null : img(), op > 0.8 ? null : img(), random() < 0.5 ? 'db.t' : 'db.s');
      });
      const workers = randomInt(random, 1, 9);
      const p = partitionRows(rows, workers);
      const owner = new Map<number, number>();
      rows.forEach((r, i) => {
        for (const h of keyHashes(r)) {
          const w = owner.get(h);
          if (w === undefined) owner.set(h, p.workerOf[i]!);
          else expect(p.workerOf[i]).toBe(w);
        }
      });
      for (const idx of p.rowsOf) expect(idx).toEqual([...idx].sort((a, b) => a - b));
      expect(p.rowsOf.flat()).toHaveLength(n);
    }
  });
});
