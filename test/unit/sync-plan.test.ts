import { describe, expect, it } from 'vitest';
import { afterRowsMerged, changeCount, classifyRow, classifyTombstone, emptyMergeCounts } from '../../src/sync/plan.ts';
import { decodeKey, encodeKey, keyIdOf } from '../../src/sync/table-reader.ts';

describe('merging a source row into a target', () => {
  it('inserts a key the target lacks', () => {
    expect(classifyRow(10n, undefined, undefined)).toBe('insert');
  });
  it('inserts a key whose target tombstone is older', () => {
    expect(classifyRow(10n, undefined, 9n)).toBe('insert');
  });
  it('updates an older target row', () => {
    expect(classifyRow(10n, 9n, undefined)).toBe('update');
  });
  it('skips when the target holds the same or a newer row', () => {
    expect(classifyRow(10n, 10n, undefined)).toBe('skip');
    expect(classifyRow(10n, 11n, undefined)).toBe('skip');
  });
  it('skips when the target holds a tombstone of the same or a newer version', () => {
    expect(classifyRow(10n, undefined, 10n)).toBe('skip');
    expect(classifyRow(10n, 5n, 12n)).toBe('skip');
  });
});

describe('merging a source tombstone into a target', () => {
  it('deletes an older target row', () => {
    expect(classifyTombstone(10n, 9n, undefined)).toBe('delete');
    expect(classifyTombstone(10n, 9n, 10n)).toBe('delete');
  });
  it('records the tombstone when the target has no row and no newer tombstone', () => {
    expect(classifyTombstone(10n, undefined, undefined)).toBe('tombstone');
    expect(classifyTombstone(10n, undefined, 9n)).toBe('tombstone');
  });
  it('records the tombstone under a newer row, which survives', () => {
    expect(classifyTombstone(10n, 11n, undefined)).toBe('tombstone');
  });
  it('skips when the target already holds the tombstone or a newer one, and no older row', () => {
    expect(classifyTombstone(10n, undefined, 10n)).toBe('skip');
    expect(classifyTombstone(10n, 12n, 11n)).toBe('skip');
  });
  it('versions above 2^53 compare exactly', () => {
    const v = (1n << 62n) + 1n;
    expect(classifyRow(v, v - 1n, undefined)).toBe('update');
    expect(classifyTombstone(v, v - 1n, undefined)).toBe('delete');
  });
});

describe('merge counts', () => {
  it('count changes apart from skips', () => {
    const c = { ...emptyMergeCounts(), insert: 1, update: 2, delete: 3, tombstone: 4, skip: 100 };
    expect(changeCount(c)).toBe(10);
  });
});

describe('keys of the merge', () => {
  it('survive storage as text, binary parts included', () => {
    const key = [1, 'a"b', Buffer.from([0, 255, 16])];
    const back = decodeKey(encodeKey(key));
    expect(back[0]).toBe(1);
    expect(back[1]).toBe('a"b');
    expect(Buffer.isBuffer(back[2]) && (back[2] as Buffer).equals(Buffer.from([0, 255, 16]))).toBe(true);
  });
  it('match across nodes whether a number comes back as a number or as text', () => {
    expect(keyIdOf([5, '7'])).toBe(keyIdOf(['5', 7]));
    expect(keyIdOf([Buffer.from('ab')])).not.toBe(keyIdOf(['ab']));
    // A value holding what once was the separator does not make two keys one.
    expect(keyIdOf(['a\u0001sb', 'c'])).not.toBe(keyIdOf(['a', 'b\u0001sc']));
  });
});

describe('a dry run of tombstones after rows', () => {
  it('sees the target row the rows stream would have written', () => {
    // Target row 5, source row 8 and source tombstone 6: the row is merged first, the tombstone deletes nothing.
    expect(classifyTombstone(6n, afterRowsMerged(8n, 5n, undefined), undefined)).toBe('tombstone');
    expect(classifyTombstone(6n, afterRowsMerged(undefined, 5n, undefined), undefined)).toBe('delete');
    // A source row a target tombstone blocks is not merged.
    expect(afterRowsMerged(8n, undefined, 9n)).toBeUndefined();
  });
});
