import { describe, expect, it } from 'vitest';
import { streamCheckpoints } from '../../src/gc/state.ts';
import { parseSourceTransaction, type SourceTransactionInput } from '../../src/model/change.ts';
import type { TableMeta } from '../../src/model/table.ts';
import { tableKey } from '../../src/model/table.ts';
import { setPartitionKeys, splitOps } from '../../src/writer/partition-keys.ts';
import { prepareTransaction } from '../../src/writer/prepare.ts';
import { aligned, resumePoint, type WorkerRow } from '../../src/writer/worker-checkpoints.ts';
import { redact } from '../../src/writer/worker-pool.ts';

function meta(table: string, extra: Partial<TableMeta> = {}): TableMeta {
  const columns = ['id', 'email', 'n', '_lww_ts'].map((name) => ({
    name,
    dataType: name === 'email' ? 'varchar' : 'bigint',
    columnType: name === 'email' ? 'varchar(64)' : 'bigint',
    nullable: name === 'email',
    generated: false,
    charset: name === 'email' ? 'utf8mb4' : null,
    collation: name === 'email' ? 'utf8mb4_general_ci' : null,
  }));
  return {
    schema: 'db',
    table,
    columns,
    primaryKey: ['id'],
    uniqueKeys: { uq_email: ['email'] },
    versionColumn: '_lww_ts',
    writableColumns: ['id', 'email', 'n', '_lww_ts'],
    tombstoneTable: `t_${table}`,
    ...extra,
  };
}

let position = 0;
/** Prepared operations of one source transaction, with partition keys set as the parallel sink sets them. */
function ops(metas: Record<string, TableMeta>, changes: SourceTransactionInput['changes']) {
  const txn = parseSourceTransaction({ sourceId: 's', position: String(++position), changes });
  const prepared = prepareTransaction(txn, (c) => metas[c.table]!);
  setPartitionKeys(txn, prepared);
  return prepared.ops;
}

const v = (i: number) => (1n << 60n) + BigInt(i) * 1024n + 1n;

describe('splitting a window over apply workers', () => {
  const t = meta('t');

  it('spreads unrelated rows, keeps source order within a worker and puts every operation in exactly one worker', () => {
    const window = ops(
      { t },
      Array.from({ length: 200 }, (_, i) => ({ schema: 'db', table: 't', op: 'insert' as const, after: { id: i, email: `e${i}`, n: i }, version: v(i) })),
    );
    const shares = splitOps(window, 8);
    expect(shares.filter((s) => s.length > 0).length).toBe(8);
    expect(shares.flat().length).toBe(200);
    for (const s of shares) {
      const ids = s.map((o) => Number(o.key[0]));
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
    }
  });

  it('keeps a unique value handed from one row to another in one worker (update and delete before images)', () => {
    for (let seed = 0; seed < 20; seed++) {
      const window = ops({ t }, [
        // Row 1 leaves 'x@a' for 'y@a'; row 2 takes 'x@a' (spelled in other case: one value under _ci).
        { schema: 'db', table: 't', op: 'update', before: { id: 1 + seed * 10, email: 'x@a', n: 0 }, after: { id: 1 + seed * 10, email: 'y@a', n: 1 }, version: v(1) },
        { schema: 'db', table: 't', op: 'insert', after: { id: 2 + seed * 10, email: 'X@A', n: 2 }, version: v(2) },
        // Row 3 is deleted and frees 'z@a'; row 4 takes it.
        { schema: 'db', table: 't', op: 'delete', before: { id: 3 + seed * 10, email: 'z@a', n: 0 }, version: v(3) },
        { schema: 'db', table: 't', op: 'insert', after: { id: 4 + seed * 10, email: 'z@a', n: 4 }, version: v(4) },
      ]);
      const shares = splitOps(window, 8);
      const workerOf = (id: number) => shares.findIndex((s) => s.some((o) => Number(o.key[0]) === id));
      expect(workerOf(2 + seed * 10)).toBe(workerOf(1 + seed * 10));
      expect(workerOf(4 + seed * 10)).toBe(workerOf(3 + seed * 10));
      const share = shares[workerOf(3 + seed * 10)]!.map((o) => `${o.kind}${Number(o.key[0]) - seed * 10}`);
      expect(share.indexOf('delete3')).toBeLessThan(share.indexOf('upsert4'));
    }
  });

  it('keeps both halves of a primary-key change together', () => {
    const window = ops({ t }, [
      ...Array.from({ length: 50 }, (_, i) => ({ schema: 'db', table: 't', op: 'insert' as const, after: { id: 100 + i, email: null, n: i }, version: v(i) })),
      { schema: 'db', table: 't', op: 'update', before: { id: 5, email: null, n: 0 }, after: { id: 6, email: null, n: 1 }, version: v(99) },
    ]);
    const shares = splitOps(window, 8);
    const share = shares.find((s) => s.some((o) => Number(o.key[0]) === 5))!;
    expect(share.map((o) => `${o.kind}${o.key[0]}`).filter((x) => x === 'delete5' || x === 'upsert6')).toEqual(['delete5', 'upsert6']);
  });

  it('keeps the rows of a parent table and its child table in one worker when both are in the window', () => {
    const parent = meta('orders', { uniqueKeys: {} });
    const child = meta('order_items', { uniqueKeys: {}, parents: [tableKey('db', 'orders')] });
    const other = meta('other', { uniqueKeys: {} });
    const window = ops({ orders: parent, order_items: child, other }, [
      ...Array.from({ length: 30 }, (_, i) => ({ schema: 'db', table: 'orders', op: 'insert' as const, after: { id: i, email: null, n: 0 }, version: v(i) })),
      ...Array.from({ length: 30 }, (_, i) => ({ schema: 'db', table: 'order_items', op: 'insert' as const, after: { id: i, email: null, n: i }, version: v(100 + i) })),
      ...Array.from({ length: 60 }, (_, i) => ({ schema: 'db', table: 'other', op: 'insert' as const, after: { id: i, email: null, n: i }, version: v(200 + i) })),
    ]);
    const shares = splitOps(window, 4);
    const linked = shares.filter((s) => s.some((o) => o.meta.table !== 'other'));
    expect(linked.length).toBe(1);
    expect(linked[0]!.filter((o) => o.meta.table !== 'other').length).toBe(60);
    expect(shares.filter((s) => s.some((o) => o.meta.table === 'other')).length).toBeGreaterThan(1);
  });

  it('one worker takes the window as it is', () => {
    const window = ops({ t }, [{ schema: 'db', table: 't', op: 'insert', after: { id: 1, email: 'a', n: 1 }, version: v(1) }]);
    expect(splitOps(window, 1)).toEqual([window]);
  });
});

describe('worker checkpoints', () => {
  const row = (worker: number, applySeq: bigint, position: string, sourceTimeUs?: bigint): WorkerRow => ({
    worker,
    position,
    applySeq,
    lastVersion: 0n,
    ownerEpoch: 1n,
    owner: 'o',
    ...(sourceTimeUs === undefined ? {} : { sourceTimeUs }),
  });

  it('a stream resumes from its lowest worker row, with the lowest source time', () => {
    const rows = [row(0, 40n, 'b:400', 4000n), row(1, 37n, 'b:370', 3700n), row(2, 40n, 'b:400', 4000n)];
    expect(resumePoint(rows)).toEqual({ position: 'b:370', applySeq: 37n, lastVersion: 0n, sourceTimeUs: 3700n });
    expect(aligned(rows, 3)).toBe(false);
  });

  it('an unknown source time on any row leaves the stream time unknown', () => {
    expect(resumePoint([row(0, 5n, 'p5', 10n), row(1, 5n, 'p5')])!.sourceTimeUs).toBeUndefined();
  });

  it('a checkpoint from before parallel apply (one row, apply_seq 0) is its own resume point and aligned for one worker', () => {
    const legacy = [row(0, 0n, 'binlog.000003:1534', 99n)];
    expect(resumePoint(legacy)).toEqual({ position: 'binlog.000003:1534', applySeq: 0n, lastVersion: 0n, sourceTimeUs: 99n });
    expect(aligned(legacy, 1)).toBe(true);
    expect(aligned(legacy, 4)).toBe(false);
  });

  it('rows of workers a smaller pool no longer has are not aligned', () => {
    expect(aligned([row(0, 5n, 'p'), row(1, 5n, 'p')], 1)).toBe(false);
    expect(aligned([row(0, 5n, 'p'), row(1, 5n, 'p')], 2)).toBe(true);
  });

  it('the GC horizon takes the lowest source time of a stream’s worker rows', () => {
    const rows = [
      { sourceId: 'node-2', position: 'p', sourceTimeUs: 500n, idleSeconds: 0 },
      { sourceId: 'node-2', position: 'p', sourceTimeUs: 300n, idleSeconds: 0 },
      { sourceId: 'node-3', position: 'p', sourceTimeUs: 700n, idleSeconds: 0 },
      { sourceId: 'node-3', position: 'p', idleSeconds: 0 },
    ];
    expect(streamCheckpoints(rows)).toEqual([{ sourceNodeId: 2, sourceTimeUs: 300n }, { sourceNodeId: 3 }]);
  });
});

describe('server messages in apply errors', () => {
  it('hide the values and keep the names of what refused them', () => {
    expect(redact("Duplicate entry 'bob@x' for key 't.email'")).toBe("Duplicate entry '?' for key 't.email'");
    expect(redact("Out of range value for column 'price' at row 6")).toBe("Out of range value for column 'price' at row 6");
    expect(redact("Check constraint 'chk_qty' is violated.")).toBe("Check constraint 'chk_qty' is violated.");
    expect(redact("Incorrect string value: '\\xF0\\x9F' for column 'note' at row 1")).toBe("Incorrect string value: '?' for column 'note' at row 1");
    expect(redact("Truncated incorrect DOUBLE value: 'it''s'")).toBe("Truncated incorrect DOUBLE value: '?'");
  });
});
