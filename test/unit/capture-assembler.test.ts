import { ENUM_ERROR_VALUE } from '../../src/model/enum-error.ts';
import { describe, expect, it } from 'vitest';
import { type AssembledItem, type CaptureEvent, TransactionAssembler } from '../../src/capture/assembler.ts';
import { tableFilter } from '../../src/capture/filter.ts';
import { decimalText, formatDouble, mysqlJsonToText, mysqlJsonValue } from '../../src/capture/mysql-json.ts';
import { TypedJson } from '../../src/model/json.ts';
import { normalizeRow } from '../../src/capture/values.ts';
import { CaptureRefusedError, MissingTombstoneError, UnsupportedTableError } from '../../src/errors.ts';

const V1 = '1844674407370955161'; // above 2^53: zongji hands it over as a decimal string

function assembler(tables: string[] = ['app']): TransactionAssembler {
  const a = new TransactionAssembler({ sourceId: 'A', tables: tableFilter(tables), metaSchema: 'lww_meta', versionColumn: '_lww_ts' });
  a.resumeFrom({ file: 'binlog.000001', offset: 100 });
  return a;
}

function feed(a: TransactionAssembler, events: CaptureEvent[]): AssembledItem[] {
  return events.flatMap((e) => a.push(e));
}

const insert = (schema: string, table: string, ...rows: Array<Record<string, unknown>>): CaptureEvent => ({ type: 'rows', schema, table, op: 'insert', rows, bytes: 10 });
const del = (schema: string, table: string, ...rows: Array<Record<string, unknown>>): CaptureEvent => ({ type: 'rows', schema, table, op: 'delete', rows, bytes: 10 });
const update = (schema: string, table: string, before: Record<string, unknown>, after: Record<string, unknown>): CaptureEvent => ({
  type: 'rows',
  schema,
  table,
  op: 'update',
  rows: [{ before, after }],
  bytes: 10,
});

describe('grouping binlog events into transactions', () => {
  it('a transaction with inserts, updates and deletes on two tables becomes one SourceTransaction', () => {
    const a = assembler();
    const items = feed(a, [
      { type: 'begin' },
      insert('app', 't1', { id: 1, v: 'a', _lww_ts: V1 }),
      update('app', 't2', { k: 'x', n: 1, _lww_ts: 5 }, { k: 'x', n: 2, _lww_ts: 9 }),
      del('app', 't1', { id: 7, v: 'old', _lww_ts: 3 }),
      insert('lww_meta', 'tomb__app__t1', { id: 7, _lww_ts: 11 }),
      { type: 'commit', nextPosition: 500 },
    ]);
    expect(items).toHaveLength(1);
    const item = items[0]!;
    expect(item.kind).toBe('transaction');
    if (item.kind !== 'transaction') return;
    expect(item.txn.sourceId).toBe('A');
    expect(item.txn.position).toBe('binlog.000001:500');
    expect(item.txn.changes).toEqual([
      { schema: 'app', table: 't1', op: 'insert', after: { id: 1, v: 'a', _lww_ts: V1 }, version: BigInt(V1) },
      { schema: 'app', table: 't2', op: 'update', before: { k: 'x', n: 1, _lww_ts: 5 }, after: { k: 'x', n: 2, _lww_ts: 9 }, version: 9n },
      { schema: 'app', table: 't1', op: 'delete', before: { id: 7, v: 'old', _lww_ts: 3 }, version: 11n },
    ]);
    expect(a.position).toBe('binlog.000001:500');
  });

  it('a delete takes the highest tombstone version written for its key, also when the tombstone was updated', () => {
    const a = assembler();
    const items = feed(a, [
      { type: 'begin' },
      del('app', 't', { a: 1, b: Buffer.from([0, 255]), _lww_ts: 3 }, { a: 2, b: Buffer.from([1]), _lww_ts: 3 }),
      update('lww_meta', 'tomb__app__t', { a: 1, b: Buffer.from([0, 255]), _lww_ts: 4 }, { a: 1, b: Buffer.from([0, 255]), _lww_ts: 40 }),
      insert('lww_meta', 'tomb__app__t', { a: 2, b: Buffer.from([1]), _lww_ts: 41 }),
      { type: 'commit', nextPosition: 900 },
    ]);
    const txn = items[0]!.kind === 'transaction' ? items[0]!.txn : undefined;
    expect(txn?.changes.map((c) => c.version)).toEqual([40n, 41n]);
  });

  it('a key deleted twice in one transaction (a multi-row REPLACE naming it twice) gives each delete its own tombstone', () => {
    const a = assembler();
    const k = '2042-09-03 05:06:07.000000';
    const items = feed(a, [
      { type: 'begin' },
      del('app', 't', { k, n: 1, _lww_ts: 3 }),
      insert('lww_meta', 'tomb__app__t', { k, _lww_ts: 10 }),
      insert('app', 't', { k, n: 2, _lww_ts: 11 }),
      del('app', 't', { k, n: 2, _lww_ts: 11 }),
      update('lww_meta', 'tomb__app__t', { k, _lww_ts: 10 }, { k, _lww_ts: 12 }),
      insert('app', 't', { k, n: 3, _lww_ts: 13 }),
      { type: 'commit', nextPosition: 900 },
    ]);
    const txn = items[0]!.kind === 'transaction' ? items[0]!.txn : undefined;
    expect(txn?.changes.map((c) => [c.op, c.version])).toEqual([
      ['delete', 10n],
      ['insert', 11n],
      ['delete', 12n],
      ['insert', 13n],
    ]);
  });

  it("a tombstone written before a delete of its key (a parent's cascade, a sink) is the delete's when none follows it", () => {
    const a = assembler(['app.c', 'app.p']);
    const items = feed(a, [
      { type: 'begin' },
      insert('lww_meta', 'tomb__app__c', { id: 10, _lww_ts: 50 }),
      del('app', 'p', { id: 1, _lww_ts: 3 }),
      del('app', 'c', { id: 10, _lww_ts: 4 }),
      insert('lww_meta', 'tomb__app__p', { id: 1, _lww_ts: 50 }),
      { type: 'commit', nextPosition: 900 },
    ]);
    const txn = items[0]!.kind === 'transaction' ? items[0]!.txn : undefined;
    expect(txn?.changes.map((c) => [c.table, c.op, c.version])).toEqual([
      ['p', 'delete', 50n],
      ['c', 'delete', 50n],
    ]);
  });

  it('a tombstone of an earlier delete of the key never stands in for a later delete that wrote none', () => {
    const a = assembler();
    expect(() =>
      feed(a, [
        { type: 'begin' },
        del('app', 't', { id: 1, _lww_ts: 3 }),
        insert('lww_meta', 'tomb__app__t', { id: 1, _lww_ts: 10 }),
        insert('app', 't', { id: 1, _lww_ts: 11 }),
        del('app', 't', { id: 1, _lww_ts: 11 }),
        { type: 'commit', nextPosition: 900 },
      ]),
    ).toThrow(MissingTombstoneError);
  });

  it('a delete without a tombstone in its transaction is refused, naming the table', () => {
    const a = assembler();
    const run = () => feed(a, [{ type: 'begin' }, del('app', 't', { id: 1, _lww_ts: 3 }), { type: 'commit', nextPosition: 200 }]);
    expect(run).toThrow(MissingTombstoneError);
    expect(run).toThrow(/app\.t .*lww_meta\.tomb__app__t.*triggers/);
  });

  it('a delete whose key has no tombstone row (another key has one) is refused', () => {
    const a = assembler();
    expect(() =>
      feed(a, [
        { type: 'begin' },
        del('app', 't', { id: 1, _lww_ts: 3 }),
        insert('lww_meta', 'tomb__app__t', { id: 2, _lww_ts: 9 }),
        { type: 'commit', nextPosition: 200 },
      ]),
    ).toThrow(MissingTombstoneError);
  });

  it('a row without the version column is refused, naming the table', () => {
    const a = assembler();
    expect(() => feed(a, [{ type: 'begin' }, insert('app', 'plain', { id: 1 })])).toThrow(UnsupportedTableError);
  });

  it('a transaction that touched the checkpoint table is dropped whole', () => {
    const a = assembler();
    const items = feed(a, [
      { type: 'begin' },
      insert('app', 't', { id: 1, _lww_ts: 5 }),
      update('lww_meta', 'checkpoints', { source_id: 'B', position: 'x' }, { source_id: 'B', position: 'y' }),
      { type: 'commit', nextPosition: 300 },
    ]);
    expect(items).toEqual([{ kind: 'dropped', position: 'binlog.000001:300' }]);
  });

  it('metadata rows are never emitted and transactions with nothing captured are skipped', () => {
    const a = assembler(['app.t']);
    const items = feed(a, [
      { type: 'begin' },
      insert('other', 't', { id: 1, _lww_ts: 5 }),
      insert('app', 'not_captured', { id: 1, _lww_ts: 5 }),
      insert('lww_meta', 'tomb__app__t', { id: 1, _lww_ts: 5 }),
      { type: 'commit', nextPosition: 300 },
    ]);
    expect(items).toEqual([{ kind: 'skipped', position: 'binlog.000001:300' }]);
  });

  it('a COMMIT query ends a transaction like an XID event, and positions follow rotations', () => {
    const a = assembler();
    const items = feed(a, [
      { type: 'rotate', file: 'binlog.000002', offset: 4 },
      { type: 'query', query: 'BEGIN', schema: 'app', nextPosition: 150 },
      insert('app', 't', { id: 1, _lww_ts: 5 }),
      { type: 'query', query: 'COMMIT', schema: 'app', nextPosition: 250 },
    ]);
    expect(items.map((i) => (i.kind === 'transaction' ? i.txn.position : i.kind))).toEqual(['binlog.000002:250']);
  });

  it('DDL on a captured table is reported with the position after it; DDL elsewhere is skipped', () => {
    const a = assembler(['app.t']);
    const items = feed(a, [
      { type: 'query', query: 'ALTER TABLE `t` ADD COLUMN c INT', schema: 'app', nextPosition: 400 },
      { type: 'query', query: 'ALTER TABLE other.t ADD COLUMN c INT', schema: 'app', nextPosition: 500 },
      { type: 'query', query: 'RENAME TABLE app.t TO app.t_old, app.t_new TO app.t', schema: '', nextPosition: 600 },
    ]);
    expect(items).toEqual([
      { kind: 'schema', change: { schema: 'app', table: 't', kind: 'alter_table', query: 'ALTER TABLE `t` ADD COLUMN c INT', position: 'binlog.000001:400' } },
      { kind: 'skipped', position: 'binlog.000001:500' },
      {
        kind: 'schema',
        change: { schema: 'app', table: 't', kind: 'rename_table', query: 'RENAME TABLE app.t TO app.t_old, app.t_new TO app.t', position: 'binlog.000001:600' },
      },
    ]);
  });

  it('a heartbeat between transactions is a keepalive; inside one it is ignored', () => {
    const a = assembler();
    expect(feed(a, [{ type: 'heartbeat', file: 'binlog.000001', nextPosition: 100 }])).toEqual([{ kind: 'keepalive', position: 'binlog.000001:100' }]);
    expect(feed(a, [{ type: 'begin' }, { type: 'heartbeat', file: 'binlog.000001', nextPosition: 100 }])).toEqual([]);
  });

  it('an XA transaction is applied at its XA COMMIT, at that position; until then positions stay at its start', () => {
    const a = assembler();
    const xid = "X'7831',X'',1";
    expect(
      feed(a, [
        { type: 'query', query: "XA START X'7831',X'',1", schema: '', nextPosition: 0 },
        insert('app', 't', { id: 1, _lww_ts: 5 }),
        { type: 'query', query: "XA END X'7831',X'',1", schema: '', nextPosition: 0 },
        { type: 'xa_prepare', nextPosition: 700, xid, onePhase: false },
      ]),
    ).toEqual([]);
    expect(a.position).toBe('binlog.000001:100');
    // A transaction committed meanwhile is emitted at the held-back position: a restart must read the XA group again.
    const other = feed(a, [{ type: 'begin' }, insert('app', 't', { id: 2, _lww_ts: 6 }), { type: 'commit', nextPosition: 800 }]);
    expect(other[0]!.kind === 'transaction' && other[0]!.txn.position).toBe('binlog.000001:100');
    const committed = feed(a, [{ type: 'query', query: "XA COMMIT X'7831',X'',1", schema: '', nextPosition: 900 }]);
    expect(committed).toHaveLength(1);
    const item = committed[0]!;
    expect(item.kind === 'transaction' && item.txn).toEqual({ sourceId: 'A', position: 'binlog.000001:900', changes: [{ schema: 'app', table: 't', op: 'insert', after: { id: 1, _lww_ts: 5 }, version: 5n }] });
    expect(a.position).toBe('binlog.000001:900');
  });

  it('an XA ROLLBACK drops the prepared group; a one-phase XA COMMIT commits at its prepare event', () => {
    const a = assembler();
    const xid = "X'7832',X'',1";
    feed(a, [{ type: 'begin' }, insert('app', 't', { id: 1, _lww_ts: 5 }), { type: 'xa_prepare', nextPosition: 700, xid, onePhase: false }]);
    expect(feed(a, [{ type: 'query', query: "XA ROLLBACK X'7832', X'', 1", schema: '', nextPosition: 750 }])).toEqual([{ kind: 'skipped', position: 'binlog.000001:750' }]);
    const one = feed(a, [{ type: 'begin' }, insert('app', 't', { id: 3, _lww_ts: 7 }), { type: 'xa_prepare', nextPosition: 800, xid: "X'33',X'',1", onePhase: true }]);
    expect(one[0]!.kind === 'transaction' && one[0]!.txn.position).toBe('binlog.000001:800');
  });

  it('an XA COMMIT of a transaction prepared before the start position stops capture', () => {
    const a = assembler();
    expect(() => feed(a, [{ type: 'query', query: "XA COMMIT X'01',X'',1", schema: '', nextPosition: 200 }])).toThrow(CaptureRefusedError);
  });

  it('a group that ends in ROLLBACK is never applied: with changes of a captured table capture stops', () => {
    const a = assembler();
    expect(feed(a, [{ type: 'begin' }, insert('other', 't', { id: 1, _lww_ts: 5 }), { type: 'query', query: 'ROLLBACK', schema: '', nextPosition: 200 }])).toEqual([
      { kind: 'skipped', position: 'binlog.000001:200' },
    ]);
    expect(() => feed(a, [{ type: 'begin' }, insert('app', 't', { id: 1, _lww_ts: 5 }), { type: 'query', query: 'ROLLBACK', schema: '', nextPosition: 300 }])).toThrow(/ends in ROLLBACK/);
  });

  it('rows after a savepoint that was rolled back to are dropped', () => {
    const a = assembler();
    const items = feed(a, [
      { type: 'begin' },
      insert('app', 't', { id: 1, _lww_ts: 5 }),
      { type: 'query', query: 'SAVEPOINT `s1`', schema: '', nextPosition: 0 },
      insert('app', 't', { id: 2, _lww_ts: 6 }),
      { type: 'query', query: 'ROLLBACK TO `s1`', schema: '', nextPosition: 0 },
      { type: 'commit', nextPosition: 400 },
    ]);
    expect(items[0]!.kind === 'transaction' && items[0]!.txn.changes.map((c) => c.after!.id)).toEqual([1]);
  });

  it('tombstones written after a savepoint that was rolled back to are dropped with its rows (no delete is made of them)', () => {
    const a = assembler(['app.t']);
    const items = feed(a, [
      { type: 'table', schema: 'app', table: 't' },
      { type: 'begin' },
      insert('app', 't', { id: 1, _lww_ts: 5 }),
      { type: 'query', query: 'SAVEPOINT `s1`', schema: '', nextPosition: 0 },
      del('app', 't', { id: 2, _lww_ts: 3 }),
      insert('lww_meta', 'tomb__app__t', { id: 2, _lww_ts: 7 }),
      { type: 'query', query: 'ROLLBACK TO `s1`', schema: '', nextPosition: 0 },
      { type: 'commit', nextPosition: 400 },
    ]);
    expect(items[0]!.kind === 'transaction' && items[0]!.txn.changes.map((c) => [c.op, c.version])).toEqual([['insert', 5n]]);
  });

  it('statement-logged DML and TRUNCATE of a captured table stop capture, naming the table and the session setting', () => {
    const a = assembler(['app.t']);
    expect(feed(a, [{ type: 'begin' }, { type: 'query', query: 'UPDATE other.t SET a = 1', schema: 'app', nextPosition: 0 }, { type: 'commit', nextPosition: 200 }])).toEqual([
      { kind: 'skipped', position: 'binlog.000001:200' },
    ]);
    for (const query of ['UPDATE t SET a = 7 WHERE id = 1', 'DELETE FROM `app`.`t`', 'insert into app.t values (1)', 'WITH x AS (SELECT 1) UPDATE t SET a = 1']) {
      const b = assembler(['app.t']);
      expect(() => feed(b, [{ type: 'begin' }, { type: 'query', query, schema: 'app', nextPosition: 0 }]), query).toThrow(/app\.t.*binlog_format=STATEMENT/s);
    }
    const c = assembler(['app.t']);
    expect(() => feed(c, [{ type: 'query', query: 'TRUNCATE TABLE t', schema: 'app', nextPosition: 300 }])).toThrow(CaptureRefusedError);
    expect(() => feed(c, [{ type: 'query', query: 'TRUNCATE TABLE t', schema: 'app', nextPosition: 300 }])).toThrow(/TRUNCATE.*app\.t/s);
  });

  it('a large transaction is emitted in chunks that carry its start position; the last one carries its end', () => {
    const a = new TransactionAssembler({ sourceId: 'A', tables: tableFilter(['app']), metaSchema: 'lww_meta', versionColumn: '_lww_ts', chunkRows: 3 });
    a.resumeFrom({ file: 'binlog.000001', offset: 100 });
    const events: CaptureEvent[] = [{ type: 'begin' }];
    for (let i = 1; i <= 7; i++) events.push(insert('app', 't', { id: i, _lww_ts: i }));
    // A delete waits in the open chunk until its tombstone has been read.
    events.push(del('app', 't', { id: 1, _lww_ts: 1 }), insert('app', 't', { id: 9, _lww_ts: 9 }), insert('lww_meta', 'tomb__app__t', { id: 1, _lww_ts: 10 }));
    events.push({ type: 'commit', nextPosition: 900 });
    const items = feed(a, events);
    const txns = items.flatMap((i) => (i.kind === 'transaction' ? [i] : []));
    expect(txns.map((t) => [t.txn.position, t.continues === true, t.txn.changes.length])).toEqual([
      ['binlog.000001:100', true, 3],
      ['binlog.000001:100', true, 3],
      ['binlog.000001:100', true, 1],
      ['binlog.000001:900', false, 2],
    ]);
    expect(txns[3]!.txn.changes.map((c) => [c.op, c.version])).toEqual([
      ['delete', 10n],
      ['insert', 9n],
    ]);
  });

  it('tombstones written for rows the transaction did not delete itself (cascades MariaDB does not log) become deletes', () => {
    const a = assembler(['app.p', 'app.c']);
    const items = feed(a, [
      { type: 'table', schema: 'app', table: 'c' },
      { type: 'table', schema: 'app', table: 'p' },
      { type: 'begin' },
      insert('lww_meta', 'tomb__app__c', { id: 10, _lww_ts: 50 }, { id: 11, _lww_ts: 50 }),
      del('app', 'p', { id: 1, n: 1, _lww_ts: 3 }),
      insert('lww_meta', 'tomb__app__p', { id: 1, _lww_ts: 50 }),
      // A tombstone of a table this capture does not read stays unemitted.
      insert('lww_meta', 'tomb__app__other', { id: 5, _lww_ts: 50 }),
      { type: 'commit', nextPosition: 400 },
    ]);
    const item = items[0]!;
    expect(item.kind === 'transaction' && item.txn.changes).toEqual([
      { schema: 'app', table: 'p', op: 'delete', before: { id: 1, n: 1, _lww_ts: 3 }, version: 50n },
      { schema: 'app', table: 'c', op: 'delete', before: { id: 10 }, version: 50n },
      { schema: 'app', table: 'c', op: 'delete', before: { id: 11 }, version: 50n },
    ]);
  });

  it('an incomplete after image is marked for repair and its absent columns are left out, never null', () => {
    const a = assembler();
    const items = feed(a, [
      { type: 'begin' },
      { type: 'rows', schema: 'app', table: 't', op: 'update', rows: [{ before: { id: 1 }, after: { a: 5, _lww_ts: 9 } }], bytes: 10, partial: true },
      insert('app', 't', { id: 2, a: 1, _lww_ts: 3 }),
      { type: 'commit', nextPosition: 300 },
    ]);
    const item = items[0]!;
    expect(item.kind === 'transaction' && item.repairs).toEqual([0]);
    expect(normalizeRow({ id: 1, a: null, b: null }, undefined, new Set(['b']))).toEqual({ id: 1, a: null });
  });

  it('a half-read transaction is forgotten on reset, and the position stays at the last boundary', () => {
    const a = assembler();
    feed(a, [{ type: 'begin' }, insert('app', 't', { id: 1, _lww_ts: 5 }), { type: 'commit', nextPosition: 300 }]);
    feed(a, [{ type: 'begin' }, insert('app', 't', { id: 2, _lww_ts: 6 })]);
    a.reset();
    expect(a.position).toBe('binlog.000001:300');
    expect(a.inTransaction).toBe(false);
    const items = feed(a, [{ type: 'rotate', file: 'binlog.000001', offset: 300 }, { type: 'begin' }, insert('app', 't', { id: 2, _lww_ts: 6 }), { type: 'commit', nextPosition: 400 }]);
    expect(items).toHaveLength(1);
  });
});

describe('captured values', () => {
  it('YEAR 0000 comes back as 0, the invalid ENUM value (index 0) as its marker, not as the member \'\', buffers are copied, other values stay', () => {
    const packet = Buffer.from([1, 2, 3, 4]);
    const row = normalizeRow({ y: 1900, y2: 2155, b: packet.subarray(1, 3), s: 'x', n: null, e: undefined }, [
      { name: 'e', type: 247 },
      { name: 'y', type: 13 },
      { name: 'y2', type: 13 },
      { name: 'b', type: 252 },
      { name: 's', type: 15 },
      { name: 'n', type: 3 },
    ]);
    expect(row).toEqual({ y: 0, y2: 2155, b: Buffer.from([2, 3]), s: 'x', n: null, e: ENUM_ERROR_VALUE });
    expect(row.e).toBe(ENUM_ERROR_VALUE);
    packet[1] = 99;
    expect(row.b).toEqual(Buffer.from([2, 3]));
  });
});

describe('MySQL binary JSON as text', () => {
  const f64 = (d: number) => {
    const b = Buffer.alloc(8);
    b.writeDoubleLE(d);
    return [...b];
  };

  it('renders objects with inlined scalars and keys in stored order', () => {
    // {"a": 1}: count, size, key entry (offset, length), value entry (INT16 inlined), key bytes.
    const doc = Buffer.from([0x00, 1, 0, 12, 0, 11, 0, 1, 0, 0x05, 1, 0, 0x61]);
    expect(mysqlJsonToText(doc)).toBe('{"a": 1}');
  });

  it('keeps doubles recognizable as doubles, including -0.0 and integral values', () => {
    const arr = (d: number) => Buffer.from([0x02, 1, 0, 15, 0, 0x0b, 7, 0, ...f64(d)]);
    expect(mysqlJsonToText(arr(3))).toBe('[3.0]');
    expect(mysqlJsonToText(arr(-0))).toBe('[-0.0]');
    expect(mysqlJsonToText(arr(1.5e-7))).toBe('[0.00000015]');
    expect(mysqlJsonToText(Buffer.alloc(0))).toBe('null');
  });

  it('prints doubles the way MySQL 9.7 does', () => {
    const cases: Array<[number, string]> = [
      [0.1, '0.1'],
      [1e14, '100000000000000.0'],
      [1e15, '1e15'],
      [1234567890123456.8, '1234567890123456.8'],
      [1.2345678901234568e17, '1.2345678901234568e17'],
      [1e-14 * 1.5, '0.000000000000015'],
      [1e-15, '0.000000000000001'],
      [1e-16, '1e-16'],
      [5e-324, '5e-324'],
      [-2.5, '-2.5'],
    ];
    for (const [d, text] of cases) expect(formatDouble(d)).toBe(text);
  });

  it('lists the scalars its text cannot type, with their paths', () => {
    // {"k y": [DECIMAL(3,2) 1.50, UINT16 7]}. Array: count, size, entries (opaque at offset 10,
    // UINT16 inlined), then the opaque: field type, length, precision, scale, digits.
    const array = [2, 0, 16, 0, 0x0f, 10, 0, 0x06, 7, 0, 246, 4, 3, 2, 0x81, 0x32];
    // Object: count, size, key entry (offset 11, length 3), value entry (array at offset 14), key.
    const doc = Buffer.from([0x00, 1, 0, 30, 0, 11, 0, 3, 0, 0x02, 14, 0, ...Buffer.from('k y'), ...array]);
    const value = mysqlJsonValue(doc);
    expect(value).toBeInstanceOf(TypedJson);
    expect(value).toEqual(
      new TypedJson('{"k y": [1.50, 7]}', [
        { path: '$."k y"[0]', type: 'decimal', value: '1.50', precision: 3, scale: 2 },
        { path: '$."k y"[1]', type: 'unsigned', value: '7' },
      ]),
    );
    expect(mysqlJsonToText(doc)).toBe('{"k y": [1.50, 7]}');
    expect(mysqlJsonValue(Buffer.from([0x02, 1, 0, 7, 0, 0x05, 7, 0]))).toBe('[7]');
  });

  it('reads binary DECIMAL values with their scale', () => {
    expect(decimalText(Buffer.from([3, 2, 0x81, 0x32]))).toBe('1.50');
    expect(decimalText(Buffer.from([3, 2, 0x7e, 0xcd]))).toBe('-1.50');
  });
});
