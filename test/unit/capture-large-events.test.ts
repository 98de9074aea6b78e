// Large source transactions and values: chunk bounds hold, a chunk-sized row event travels alone.
import { describe, expect, it } from 'vitest';
import { type AssembledItem, type CaptureEvent, TransactionAssembler } from '../../src/capture/assembler.ts';
import { tableFilter } from '../../src/capture/filter.ts';

function assembler(): TransactionAssembler {
  const a = new TransactionAssembler({ sourceId: 'A', tables: tableFilter(['app']), metaSchema: 'lww_meta', versionColumn: '_lww_ts', chunkRows: 100, chunkBytes: 1000 });
  a.resumeFrom({ file: 'binlog.000001', offset: 100 });
  return a;
}

const insert = (id: number, bytes: number): CaptureEvent => ({ type: 'rows', schema: 'app', table: 't', op: 'insert', rows: [{ id, _lww_ts: 5 }], bytes });

function ids(items: AssembledItem[]): number[][] {
  return items.map((i) => (i.kind === 'transaction' ? i.txn.changes.map((c) => Number(c.after!.id)) : []));
}

describe('chunks of a large source transaction', () => {
  it('a row event as large as a chunk is handed on alone: the changes read before it go in a chunk of their own', () => {
    const a = assembler();
    const items = [{ type: 'begin' } as CaptureEvent, insert(1, 10), insert(2, 10), insert(3, 5000), insert(4, 10), { type: 'commit', nextPosition: 900 } as CaptureEvent].flatMap((e) => a.push(e));
    expect(ids(items)).toEqual([[1, 2], [3], [4]]);
    const txns = items.filter((i) => i.kind === 'transaction');
    expect(txns.map((t) => t.bytes)).toEqual([20, 5000, 10]);
    // Every chunk but the last keeps the transaction's start position: a crash replays it whole.
    expect(txns.map((t) => t.txn.position)).toEqual(['binlog.000001:100', 'binlog.000001:100', 'binlog.000001:900']);
    expect(txns.map((t) => t.continues === true)).toEqual([true, true, false]);
  });

  it('a chunk-sized row event first in its transaction is one chunk, not preceded by an empty one', () => {
    const a = assembler();
    const items = [{ type: 'begin' } as CaptureEvent, insert(1, 5000), { type: 'commit', nextPosition: 900 } as CaptureEvent].flatMap((e) => a.push(e));
    expect(ids(items)).toEqual([[1], []]);
  });
});

describe('row events written before a table was installed', () => {
  it('are skipped and reported when capture is told how (install and the copy carry those rows); deletes too; later versioned rows still cross', () => {
    const seen: string[] = [];
    const a = new TransactionAssembler({ sourceId: 'A', tables: tableFilter(['app']), metaSchema: 'lww_meta', versionColumn: '_lww_ts', onUnversioned: (s, t) => seen.push(`${s}.${t}`) });
    a.resumeFrom({ file: 'binlog.000001', offset: 100 });
    const events: CaptureEvent[] = [
      { type: 'begin' },
      { type: 'rows', schema: 'app', table: 't', op: 'insert', rows: [{ id: 1 }], bytes: 10 },
      { type: 'rows', schema: 'app', table: 't', op: 'update', rows: [{ before: { id: 1 }, after: { id: 1, v: 2 } }], bytes: 10 },
      { type: 'rows', schema: 'app', table: 't', op: 'delete', rows: [{ id: 1 }], bytes: 10 },
      { type: 'commit', nextPosition: 200 },
      { type: 'begin' },
      insert(2, 10),
      { type: 'commit', nextPosition: 300 },
    ];
    const items = events.flatMap((e) => a.push(e));
    expect(seen).toEqual(['app.t', 'app.t', 'app.t']);
    expect(items.map((i) => i.kind)).toEqual(['skipped', 'transaction']);
    expect(ids(items)).toEqual([[], [2]]);
  });

  it('after a versioned event of the table, an image without the version column stops capture instead of being skipped', () => {
    const seen: string[] = [];
    const a = new TransactionAssembler({ sourceId: 'A', tables: tableFilter(['app']), metaSchema: 'lww_meta', versionColumn: '_lww_ts', onUnversioned: (s, t) => seen.push(`${s}.${t}`) });
    a.resumeFrom({ file: 'binlog.000001', offset: 100 });
    const push = (events: CaptureEvent[]) => events.flatMap((e) => a.push(e));
    expect(push([{ type: 'begin' }, insert(2, 10), { type: 'commit', nextPosition: 200 }]).map((i) => i.kind)).toEqual(['transaction']);
    expect(() => push([{ type: 'begin' }, { type: 'rows', schema: 'app', table: 't', op: 'insert', rows: [{ id: 3 }], bytes: 10 }])).toThrow(/app.*t.*no version column _lww_ts/s);
    expect(seen).toEqual([]);
  });

  it('an incomplete image without the version column (binlog_row_image MINIMAL) is not taken for one', () => {
    const seen: string[] = [];
    const a = new TransactionAssembler({ sourceId: 'A', tables: tableFilter(['app']), metaSchema: 'lww_meta', versionColumn: '_lww_ts', onUnversioned: (s, t) => seen.push(`${s}.${t}`) });
    a.resumeFrom({ file: 'binlog.000001', offset: 100 });
    const items = [
      { type: 'begin' },
      { type: 'rows', schema: 'app', table: 't', op: 'update', rows: [{ before: { id: 1 }, after: { id: 1, v: 3 } }], bytes: 10, partial: true },
      { type: 'commit', nextPosition: 200 },
    ].flatMap((e) => a.push(e as CaptureEvent));
    expect(seen).toEqual([]);
    expect(items[0]).toMatchObject({ kind: 'transaction', repairs: [0] });
  });
});
