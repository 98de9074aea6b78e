import { TypedJson } from '../../src/model/json.ts';
import { describe, expect, it } from 'vitest';
import { InvalidChangeError } from '../../src/errors.ts';
import { Failpoints, parseFailpointSpec, parseTerms } from '../../src/failpoints/failpoints.ts';
import { parseSourceTransaction } from '../../src/model/change.ts';
import { tombstoneTableName } from '../../src/model/names.ts';
import type { TableMeta } from '../../src/model/table.ts';
import { MAX_VERSION, makeVersion, nextVersion, nodeIdOf, parseVersion } from '../../src/model/version.ts';
import type { Connection } from 'mysql2/promise';
import { type ApplyContext, chunks, LARGE_KEPT, run, select, STATEMENT_ROW_STEP, STEP_FROM_ROWS, UNPREPARE_ABOVE_VALUES } from '../../src/writer/apply.ts';
import { coalesce, parentsFirst, type TablePlan } from '../../src/writer/coalesce.ts';
import { prepareTransaction } from '../../src/writer/prepare.ts';
import { ColumnDefault } from '../../src/sql/dml.ts';
import { sameMetadata } from '../../src/writer/sink.ts';
import { upsertOutcome } from '../../src/writer/stats.ts';
import { toSqlValue } from '../../src/writer/values.ts';

const meta: TableMeta = {
  schema: 'db',
  table: 't',
  columns: [
    { name: 'id', dataType: 'int', columnType: 'int', nullable: false, generated: false, charset: null, collation: null },
    { name: 'v', dataType: 'varchar', columnType: 'varchar(10)', nullable: true, generated: false, charset: 'utf8mb4', collation: 'utf8mb4_bin' },
    { name: 'g', dataType: 'int', columnType: 'int', nullable: true, generated: true, charset: null, collation: null },
    { name: '_lww_ts', dataType: 'bigint', columnType: 'bigint unsigned', nullable: false, generated: false, charset: null, collation: null },
  ],
  primaryKey: ['id'],
  uniqueKeys: {},
  versionColumn: '_lww_ts',
  writableColumns: ['id', 'v', '_lww_ts'],
  tombstoneTable: 'tomb__db__t',
};

function txn(changes: unknown[], position = 'p') {
  return parseSourceTransaction({ sourceId: 's', position, changes });
}

describe('versions', () => {
  it('parses uint64 exactly from bigint and decimal strings and refuses the rest', () => {
    expect(parseVersion('18446744073709551615')).toBe(MAX_VERSION);
    expect(parseVersion(12n)).toBe(12n);
    expect(() => parseVersion('18446744073709551616')).toThrow(/64-bit/);
    expect(() => parseVersion(-1n)).toThrow(/64-bit/);
    expect(() => parseVersion(2 ** 60)).toThrow(/exact/);
    expect(() => parseVersion('1e5')).toThrow();
    for (const bad of ['-1', ' 5', '0x10']) expect(() => parseVersion(bad)).toThrow(new RegExp(`version "${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}" is not 1 to 20 decimal digits`));
    expect(() => parseVersion(undefined)).toThrow(/version is missing/);
    expect(() => parseVersion(1.5)).toThrow(/exact non-negative integer/);
    expect(() => txn([{ schema: 'db', table: 't', op: 'insert', after: { id: 1 } }])).toThrow(/change #0 \(db\.t\): version: version is missing/);
  });
  it('a local write always beats the version it has seen, even with a clock behind', () => {
    const prev = makeVersion(5_000_000n, 7);
    const next = nextVersion(prev, 1_000_000n, 3);
    expect(next > prev).toBe(true);
    expect(nodeIdOf(next)).toBe(3);
    expect(nextVersion(undefined, 42n, 1)).toBe(makeVersion(42n, 1));
  });
  it('makeVersion refuses node ids outside 0..1023 and physical times that would wrap', () => {
    expect(() => makeVersion(1n, 1024)).toThrow(/node id/);
    expect(() => makeVersion(1n, -1)).toThrow(/node id/);
    expect(() => makeVersion(1n, 1.5)).toThrow(/node id/);
    expect(() => makeVersion(1n << 54n, 1)).toThrow(/does not fit/);
    expect(makeVersion((1n << 54n) - 1n, 1023)).toBe(MAX_VERSION);
  });
});

describe('change validation', () => {
  it('names the change and field of a bad op/image combination', () => {
    expect(() => txn([{ schema: 'db', table: 't', op: 'delete', after: { id: 1 }, version: '1' }])).toThrow(/change #0 .*delete.*before/);
    expect(() => txn([{ schema: 'db', table: 't', op: 'insert', before: { id: 1 }, after: { id: 1 }, version: '1' }])).toThrow(/insert has no before/);
    expect(() => txn([{ schema: 'db', table: 't', op: 'upsert', after: { id: 1 }, version: '1' }])).toThrow(/change #0: op/);
    expect(() => txn([{ schema: 'db', table: 't', op: 'insert', after: { id: 1 }, version: 1.5 }])).toThrow(InvalidChangeError);
  });
  it('refuses unknown columns, missing key values and incomplete images against table metadata', () => {
    const prep = (changes: unknown[]) => prepareTransaction(txn(changes), () => meta);
    expect(() => prep([{ schema: 'db', table: 't', op: 'insert', after: { id: 1, v: 'a', zz: 1 }, version: '1' }])).toThrow(/column zz does not exist/);
    expect(() => prep([{ schema: 'db', table: 't', op: 'insert', after: { v: 'a' }, version: '1' }])).toThrow(/lacks primary-key column id/);
    expect(() => prep([{ schema: 'db', table: 't', op: 'insert', after: { id: 1 }, version: '1' }])).toThrow(/lacks column v/);
    expect(() => prep([{ schema: 'db', table: 't', op: 'insert', after: { id: 'x', v: 'a' }, version: '1' }])).toThrow(/after.id.*integer/);
    // The version column in the image must be the change's version (the sink writes that one).
    expect(() => prep([{ schema: 'db', table: 't', op: 'insert', after: { id: 1, v: 'a', _lww_ts: '7' }, version: '1' }])).toThrow(/change #0 .*after\._lww_ts is 7 but the change's version is 1/);
    expect(() => prep([{ schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'a', _lww_ts: 'x' }, version: '1' }])).toThrow(/after\._lww_ts is x/);
    // A version read into a JS number past 2^53 is not exact: said so, not taken for a different version.
    expect(() => prep([{ schema: 'db', table: 't', op: 'insert', after: { id: 1, v: 'a', _lww_ts: 1815000000000000000 }, version: '1815000000000000001' }])).toThrow(/is the JS number .* cannot hold a 64-bit version exactly/);
    for (const same of ['1', 1, 1n, null]) expect(prep([{ schema: 'db', table: 't', op: 'insert', after: { id: 1, v: 'a', _lww_ts: same }, version: '1' }]).ops).toHaveLength(1);
  });
  it('a column the source table did not have yet takes its DEFAULT; anything else missing is refused', () => {
    const col = (name: string, nullable: boolean, hasDefault?: boolean) => ({ name, dataType: 'int', columnType: 'int', nullable, generated: false, charset: null, collation: null, ...(hasDefault === undefined ? {} : { hasDefault }) });
    const altered: TableMeta = {
      ...meta,
      columns: [...meta.columns.slice(0, 3), col('d', false, true), col('n', true, true), col('r', false, false), col('u', true, true), col('x', false), meta.columns[3]!],
      uniqueKeys: { uk: ['u'] },
      writableColumns: ['id', 'v', 'd', 'n', 'r', 'u', 'x', '_lww_ts'],
    };
    const prep = (after: Record<string, unknown>, sourceColumns?: string[], op = 'insert') =>
      prepareTransaction(
        txn([{ schema: 'db', table: 't', op, ...(op === 'update' ? { before: { id: 1, v: 'a' } } : {}), after, version: '7', ...(sourceColumns ? { sourceColumns } : {}) }]),
        () => altered,
      );
    const full = { r: 3, u: 4, x: 5 };
    // The source table had neither d nor n: both take their default (update and insert alike).
    for (const op of ['insert', 'update']) {
      const p = prep({ id: 1, v: 'a', ...full }, ['id', 'v', 'r', 'u', 'x', '_lww_ts'], op);
      expect(p.ops.at(-1)!.row).toEqual(['1', 'a', ColumnDefault.value, ColumnDefault.value, '3', '4', '5', '7']);
    }
    // Columns matched by name: the source's order does not matter.
    expect(prep({ id: 1, v: 'a', ...full }, ['x', 'u', 'r', '_lww_ts', 'v', 'id']).ops[0]!.row![2]).toBe(ColumnDefault.value);
    // The source had d, the image lacks it: incomplete, refused as before; no source columns (a library user): the same.
    expect(() => prep({ id: 1, v: 'a', n: 1, ...full }, ['id', 'v', 'd', 'n', 'r', 'u', 'x', '_lww_ts'])).toThrow(/after image lacks column d; the sink needs full row images/);
    expect(() => prep({ id: 1, v: 'a', n: 1, ...full })).toThrow(/after image lacks column d; the sink needs full row images/);
    // NOT NULL without a default (r), unknown default (x), a UNIQUE column (u): stop, naming table and column.
    const src = ['id', 'v', 'd', 'n', '_lww_ts'];
    expect(() => prep({ id: 1, v: 'a', d: 1, n: 1, u: 4, x: 5 }, [...src, 'u', 'x'])).toThrow(/db\.t, insert\): the source table had no column r .*NOT NULL without a default/);
    expect(() => prep({ id: 1, v: 'a', d: 1, n: 1, r: 3, u: 4 }, [...src, 'r', 'u'])).toThrow(/no column x .*NOT NULL without a default/);
    expect(() => prep({ id: 1, v: 'a', d: 1, n: 1, r: 3, x: 5 }, [...src, 'r', 'x'])).toThrow(/no column u .*primary or UNIQUE key/);
    // A key column never: the image lacks it whatever the source had.
    expect(() => prep({ v: 'a', d: 1, n: 1, ...full }, ['v'])).toThrow(/lacks primary-key column id/);
    // The list travels through validation; a bad one is refused.
    expect(() => txn([{ schema: 'db', table: 't', op: 'insert', after: { id: 1 }, version: '1', sourceColumns: [1] }])).toThrow(/sourceColumns/);
  });
  it('a batch takes one metadata object per table: a transaction prepared after a refresh waits for the next batch', () => {
    const refreshed: TableMeta = { ...meta, columns: [...meta.columns] };
    const other: TableMeta = { ...meta, table: 'u' };
    const ops = (m: TableMeta) => prepareTransaction(txn([{ schema: 'db', table: m.table, op: 'insert', after: { id: 1, v: 'a' }, version: '1' }]), () => m).ops;
    const metas = new Map<string, TableMeta>();
    expect(sameMetadata(metas, ops(meta))).toBe(true);
    expect(sameMetadata(metas, [...ops(other), ...ops(meta)])).toBe(true);
    expect(sameMetadata(metas, [...ops(other), ...ops(refreshed)])).toBe(false);
    expect([...metas.values()]).toEqual([meta, other]);
    expect(sameMetadata(new Map(), [...ops(meta), ...ops(refreshed)])).toBe(false);
  });
  it('a primary-key change becomes delete of the old key and upsert of the new one with the same version', () => {
    const p = prepareTransaction(txn([{ schema: 'db', table: 't', op: 'update', before: { id: 1, v: 'a' }, after: { id: 2, v: 'a', g: 9 }, version: '5' }]), () => meta);
    expect(p.ops.map((o) => [o.kind, o.key, o.version])).toEqual([
      ['delete', ['1'], 5n],
      ['upsert', ['2'], 5n],
    ]);
    expect(p.ops[1]!.row).toEqual(['2', 'a', '5']);
  });
});

describe('coalescing', () => {
  const ops = (changes: unknown[]) => prepareTransaction(txn(changes), () => meta).ops;
  it('keeps the highest upsert and the highest delete per key, whatever the order', () => {
    const changes = [
      { schema: 'db', table: 't', op: 'insert', after: { id: 1, v: 'a' }, version: '10' },
      { schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'c' }, version: '30' },
      { schema: 'db', table: 't', op: 'delete', before: { id: 1 }, version: '20' },
      { schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'b' }, version: '25' },
    ];
    for (const order of [changes, [...changes].reverse()]) {
      const [plan] = coalesce(ops(order));
      const k = plan!.keys.get('s1')!;
      expect(k.upsert!.version).toBe(30n);
      expect(k.upsert!.row[1]).toBe('c');
      expect(k.deleteVersion).toBe(20n);
      // Forward order: 10 then 30 replace each other (coalesced), 25 arrives after 30 (stale).
      expect(plan!.staleInBatch + plan!.coalesced).toBe(2);
    }
  });
  it('an older change arriving after a newer one in the same batch is stale; one arriving before is coalesced', () => {
    const older = { schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'old' }, version: '10' };
    const newer = { schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'new' }, version: '20' };
    const [inOrder] = coalesce(ops([older, newer]));
    expect([inOrder!.staleInBatch, inOrder!.coalesced]).toEqual([0, 1]);
    const [late] = coalesce(ops([newer, older]));
    expect([late!.staleInBatch, late!.coalesced]).toEqual([1, 0]);
  });
  it('in arrival order (the bypass) the last operation wins whatever its version', () => {
    const [plan] = coalesce(
      ops([
        { schema: 'db', table: 't', op: 'insert', after: { id: 1, v: 'new' }, version: '30' },
        { schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'old' }, version: '10' },
      ]),
      'arrival',
    );
    expect(plan!.keys.get('s1')!.upsert!.row[1]).toBe('old');
  });
  it('keeps every upsert of a key in source order, for replaying unique swaps', () => {
    const [plan] = coalesce(
      ops([
        { schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'b' }, version: '20' },
        { schema: 'db', table: 't', op: 'update', after: { id: 2, v: 'x' }, version: '15' },
        { schema: 'db', table: 't', op: 'update', after: { id: 1, v: 'a' }, version: '10' },
      ]),
    );
    expect(plan!.keys.get('s1')!.history.map((h) => [h.seq, h.version])).toEqual([
      [1, 20n],
      [3, 10n],
    ]);
  });
  it('a key change remembers the new key, so the server can tell a change of spelling from a move', () => {
    const [del, up] = ops([{ schema: 'db', table: 't', op: 'update', before: { id: 1, v: 'a' }, after: { id: 2, v: 'a' }, version: '5' }]);
    expect([del!.kind, del!.movedTo, up!.movedTo]).toEqual(['delete', ['2'], undefined]);
  });
  it('an update that kept its key marks its upsert as of a row the source held; a moved key, an insert and a batch that inserted the key do not', () => {
    const [same, del, moved, ins] = ops([
      { schema: 'db', table: 't', op: 'update', before: { id: 1, v: 'a' }, after: { id: 1, v: 'b' }, version: '5' },
      { schema: 'db', table: 't', op: 'update', before: { id: 2, v: 'a' }, after: { id: 3, v: 'a' }, version: '6' },
      { schema: 'db', table: 't', op: 'insert', after: { id: 4, v: 'a' }, version: '7' },
    ]);
    expect([same!.heldRow, del!.kind, moved!.heldRow, ins!.heldRow]).toEqual([true, 'delete', undefined, undefined]);
    const [plan] = coalesce(
      ops([
        { schema: 'db', table: 't', op: 'insert', after: { id: 1, v: 'a' }, version: '5' },
        { schema: 'db', table: 't', op: 'update', before: { id: 1, v: 'a' }, after: { id: 1, v: 'b' }, version: '6' },
      ]),
    );
    const k = plan!.keys.get('s1')!;
    expect([k.upsert!.heldRow, k.history.map((h) => h.heldRow)]).toEqual([true, [undefined, true]]);
  });
});

describe('failpoints', () => {
  it('parses pingcap/failpoint terms', () => {
    expect(parseTerms('x', 'return(true)')).toEqual([{ probability: 1, count: Infinity, action: 'return', value: true }]);
    expect(parseTerms('x', '50%3*return(7)')).toEqual([{ probability: 0.5, count: 3, action: 'return', value: 7 }]);
    expect(parseTerms('x', '2*return("a")->off')[1]!.action).toBe('off');
    expect(() => parseTerms('x', 'explode')).toThrow(/cannot parse/);
    expect(() => parseFailpointSpec('nope=return(true)')).toThrow(/unknown failpoint "nope"/);
  });
  it('counts, probabilities and the off state behave as specified', () => {
    const fp = new Failpoints('sinkDropMessage=2*return(true);sinkMutateValue=50%return(true)', () => 0.7);
    expect([fp.on('sinkDropMessage'), fp.on('sinkDropMessage'), fp.on('sinkDropMessage')]).toEqual([true, true, false]);
    expect(fp.on('sinkMutateValue')).toBe(false); // 0.7 >= 0.5
    expect(fp.on('mysqlSinkBypassLWW')).toBe(false);
    const none = new Failpoints('');
    expect(none.enabled).toBe(false);
    expect(Failpoints.fromEnv({ LWW_FAILPOINTS_ENABLE: '1', LWW_FAILPOINTS: 'mysqlSinkBypassLWW=return(true)' }).on('mysqlSinkBypassLWW')).toBe(true);
  });
});

describe('upsert outcome from the server info string', () => {
  it('derives inserted, updated and skipped-as-stale', () => {
    expect(upsertOutcome(3, 3, 'Records: 3  Duplicates: 1  Warnings: 0')).toEqual({ inserted: 1, updated: 1, skipped: 1 });
    expect(upsertOutcome(3, 0, 'Records: 3  Duplicates: 0  Warnings: 0')).toEqual({ inserted: 0, updated: 0, skipped: 3 });
    expect(upsertOutcome(1, 2, '')).toEqual({ inserted: 0, updated: 1, skipped: 0 });
    expect(upsertOutcome(1, 0, '')).toEqual({ inserted: 0, updated: 0, skipped: 1 });
  });
});

describe('values and names', () => {
  const col = (dataType: string, columnType = dataType, nullable = true) => ({ name: 'c', dataType, columnType, nullable, generated: false, charset: null, collation: null });
  it('converts values exactly per column type', () => {
    expect(toSqlValue(col('bigint', 'bigint unsigned'), 18446744073709551615n)).toBe('18446744073709551615');
    expect(toSqlValue(col('bit', 'bit(64)'), 2n ** 64n - 1n)).toEqual(Buffer.alloc(8, 0xff));
    expect(toSqlValue(col('json'), { b: 1, a: [1] })).toBe('{"b":1,"a":[1]}');
    // BigInts inside a document keep every digit; the rest is what JSON.stringify writes.
    expect(toSqlValue(col('json'), { u: 2n ** 64n - 1n, a: [-(2n ** 63n), undefined, 0.5], d: new Date(0), skip: undefined })).toBe(
      '{"u":18446744073709551615,"a":[-9223372036854775808,null,0.5],"d":"1970-01-01T00:00:00.000Z"}',
    );
    // A typed document keeps its scalars on a MySQL JSON column, is its text on MariaDB's LONGTEXT.
    const doc = new TypedJson('{"d": "2024-01-02"}', [{ path: '$."d"', type: 'date', value: '2024-01-02' }]);
    expect(toSqlValue(col('json'), doc)).toBe(doc);
    expect(toSqlValue({ ...col('longtext'), json: true }, doc)).toBe('{"d": "2024-01-02"}');
    expect(() => toSqlValue(col('json'), new TypedJson('{"d": 1}', [{ path: '$."d"', type: 'date', value: '1); DROP' }]))).toThrow(/not a DATE/);
    // Each scalar must type the document's own value there, and be one the server's CAST takes.
    const typed = (text: string, scalar: Record<string, unknown>) => () => toSqlValue(col('json'), new TypedJson(text, [scalar as never]));
    expect(typed('{"a": 1}', { path: '$."a"', type: 'unsigned', value: '18446744073709551615' })).toThrow(/does not match the document's value there \(1\)/);
    expect(typed('{"a": 1}', { path: '$."b"', type: 'unsigned', value: '1' })).toThrow(/does not match.*\(nothing\)/);
    expect(typed('{"d": "2024-02-30"}', { path: '$."d"', type: 'date', value: '2024-02-30' })).toThrow(/not a valid date/);
    expect(typed('{"t": "10:61:00"}', { path: '$."t"', type: 'time', value: '10:61:00' })).toThrow(/not a valid TIME/);
    expect(typed('[1.50]', { path: '$[0]', type: 'decimal', value: '1.50' })).toThrow(/needs a precision/);
    expect(typed('[123.50]', { path: '$[0]', type: 'decimal', value: '123.50', precision: 4, scale: 2 })).toThrow(/does not fit DECIMAL\(4,2\)/);
    const ok = new TypedJson('{"k\\"x": [0, {"n": 1.50}], "u": 18446744073709551615, "t": "-838:59:59.000000"}', [
      { path: '$."k\\"x"[1]."n"', type: 'decimal', value: '1.50', precision: 3, scale: 2 },
      { path: '$."u"', type: 'unsigned', value: '18446744073709551615' },
      { path: '$."t"', type: 'time', value: '-838:59:59.000000' },
    ]);
    expect(toSqlValue(col('json'), ok)).toBe(ok);
    expect(toSqlValue(col('datetime', 'datetime(3)'), new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)))).toBe('2024-01-02 03:04:05.006');
    // Milliseconds a DATETIME(0) cannot keep are refused (MySQL rounds, MariaDB truncates); zeros pass.
    expect(() => toSqlValue(col('datetime'), new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6)))).toThrow(/more fractional-second digits than DATETIME/);
    expect(toSqlValue(col('datetime'), new Date(Date.UTC(2024, 0, 2, 3, 4, 5)))).toBe('2024-01-02 03:04:05.000');
    expect(toSqlValue(col('set', "set('a','b')"), ['a', 'b'])).toBe('a,b');
    expect(() => toSqlValue(col('int', 'int', false), null)).toThrow(/NOT NULL/);
    expect(() => toSqlValue(col('decimal'), 'abc')).toThrow(/DECIMAL/);
  });
  it('refuses TIME, YEAR, SET, ENUM, DECIMAL, float and text values the server would refuse or change', () => {
    const cs = (dataType: string, columnType: string, charset: string | null, collation: string | null) => ({ ...col(dataType, columnType), charset, collation });
    expect(toSqlValue(col('time', 'time(6)'), '-838:59:59.000000')).toBe('-838:59:59.000000');
    for (const bad of ['12:61:00', '839:00:00', '838:59:59.5', '1 10:00:00', '100000', 'abc']) expect(() => toSqlValue(col('time', 'time(6)'), bad), bad).toThrow(/TIME/);
    expect(() => toSqlValue(col('time'), '10:00:00.6')).toThrow(/fractional-second/);
    for (const good of [0, 1901, 2155, '0000', '2024']) expect(toSqlValue(col('year'), good)).toBe(good);
    for (const bad of [5, 70, 1900, 2156, '0', '05', '1999.5', 1999.5]) expect(() => toSqlValue(col('year'), bad), String(bad)).toThrow(/not a YEAR/);
    // MariaDB's YEAR(2): what row reads of it give back (24 for 2024) is stored as given.
    for (const good of [24, 0, 99, '05', 1970, 2069]) expect(toSqlValue(col('year', 'year(2)'), good)).toBe(good);
    for (const bad of [100, 1969, 2070, 'x']) expect(() => toSqlValue(col('year', 'year(2)'), bad), String(bad)).toThrow(/not a YEAR\(2\)/);
    const set = col('set', "set('a','b','c')");
    for (const good of ['', 'b,a', 'a,a', 'A', 'a ', '3', 7n]) expect(() => toSqlValue(set, good), String(good)).not.toThrow();
    for (const bad of ['a,d', '8', ' a', 'a,', ',a']) expect(() => toSqlValue(set, bad), bad).toThrow(/not a member/);
    expect(() => toSqlValue(cs('set', "set('a','b','c')", 'utf8mb4', 'utf8mb4_bin'), 'A')).toThrow(/letter case/);
    expect(toSqlValue(cs('enum', "enum('x','Y')", 'utf8mb4', 'utf8mb4_0900_ai_ci'), 'y')).toBe('y');
    expect(toSqlValue(col('enum', "enum('x','Y')"), 'x ')).toBe('x ');
    expect(() => toSqlValue(cs('enum', "enum('x','Y')", 'utf8mb4', 'utf8mb4_bin'), 'y')).toThrow(/letter case/);
    expect(() => toSqlValue(col('enum', "enum('x','Y')"), '0')).toThrow(/not one of/);
    // Fraction digits past the scale would be rounded away (1.005 stored as 1.01): refused unless zeros.
    for (const bad of ['9.995', '-9.995', '0.9995e1', '9.994', '1.005', 1.005, '1e-3']) expect(() => toSqlValue(col('decimal', 'decimal(3,2)'), bad), String(bad)).toThrow(/more than 2 fraction digits/);
    for (const good of ['9.99', '9.990', '0.999e1', '-9.99', 1.25]) expect(() => toSqlValue(col('decimal', 'decimal(3,2)'), good), String(good)).not.toThrow();
    expect(() => toSqlValue(col('decimal', 'decimal(3,2)'), '10.00')).toThrow(/out of range/);
    // A number names ENUM members by position and SET members by bits (as text it names the member spelled so).
    const digits = col('enum', "enum('a','b','2','1')");
    expect([toSqlValue(digits, 1), toSqlValue(digits, 4n), toSqlValue(digits, '1'), toSqlValue(digits, '2')]).toEqual(['a', '1', '1', '2']);
    for (const bad of [0, 5, 1.5, -1]) expect(() => toSqlValue(digits, bad), String(bad)).toThrow(/not a member position/);
    // Members as COLUMN_TYPE quotes them: a backslash doubled, a quote doubled, a newline escaped.
    const quoted = col('enum', "enum('a\\\\b','it''s','x\\ny')");
    expect([toSqlValue(quoted, 'a\\b'), toSqlValue(quoted, 1), toSqlValue(quoted, "it's"), toSqlValue(quoted, 3)]).toEqual(['a\\b', 'a\\b', "it's", 'x\ny']);
    expect(() => toSqlValue(quoted, 'a\\\\b')).toThrow(/is not one of/);
    expect(toSqlValue(col('set', "set('a','b','c')"), 5)).toBe('a,c');
    expect(toSqlValue(col('set', "set('a','b','c')"), 0)).toBe('');
    expect(() => toSqlValue(col('set', "set('a','b','c')"), 8)).toThrow(/not a set of members/);
    // BIT: bits past the width are refused whatever the byte count; leading zero bytes are no bits.
    expect(() => toSqlValue(col('bit', 'bit(3)'), Buffer.from([8]))).toThrow(/4 significant bits/);
    expect(() => toSqlValue(col('bit', 'bit(64)'), Buffer.alloc(9, 1))).toThrow(/65 significant bits/);
    expect(toSqlValue(col('bit', 'bit(3)'), Buffer.from([0, 7]))).toEqual(Buffer.from([0, 7]));
    // FLOAT(M,D) / DOUBLE(M,D): D decimals kept, fewer than 10^(M-D) before the point.
    expect(() => toSqlValue(col('float', 'float(7,4)'), 1000.5)).toThrow(/out of range for float\(7,4\)/);
    expect(() => toSqlValue(col('double', 'double(6,2)'), 1.235)).toThrow(/more than 2 decimals/);
    for (const good of [999.9999, 0.1, -5]) expect(toSqlValue(col('float', 'float(7,4)'), good)).toBe(Math.fround(good));
    // A FLOAT is bound as the single-precision value it stores (so a key matches its row); a DOUBLE as given.
    expect(toSqlValue(col('float'), 0.1)).toBe(0.10000000149011612);
    expect(toSqlValue(col('float'), '0.1')).toBe(0.10000000149011612);
    expect(toSqlValue(col('double'), 0.1)).toBe(0.1);
    // What capture reads of a stored FLOAT(7,4) 1.2346: the single-precision value, taken as it is.
    expect(toSqlValue(col('float', 'float(7,4)'), Math.fround(1.2346))).toBe(1.2345999479293823);
    expect(() => toSqlValue(col('float', 'float(7,4)'), Math.fround(1.23456))).toThrow(/more than 4 decimals/);
    // DOUBLE(M,D) stores the whole part plus the rounded fraction, not always the nearest double:
    // 6.69 is stored as 6.6899999999999995, which is what is bound (a key must find its row) and what
    // capture reads back (taken, not refused as a value with more decimals).
    for (const given of [6.69, '6.69', 6.6899999999999995]) expect(toSqlValue(col('double', 'double(5,2)'), given), String(given)).toBe(6.6899999999999995);
    for (const given of [1.14, 1.36, 1.39, 1.57, -6.69, 999.99]) expect(toSqlValue(col('double', 'double(5,2)'), given), String(given)).toBeCloseTo(given, 12);
    expect(() => toSqlValue(col('double', 'double(5,2)'), 1000)).toThrow(/out of range/);
    expect(() => toSqlValue(col('double', 'double(5,2)'), 0.125)).toThrow(/more than 2 decimals; double\(5,2\) would store 0.12/);
    expect(() => toSqlValue(col('decimal', 'decimal(3,2) unsigned'), '-0.01')).toThrow(/negative/);
    expect(toSqlValue(col('decimal', 'decimal(3,2) unsigned'), '-0.00')).toBe('-0.00');
    for (const bad of ['0x10', '0b1', '0o7', '1_0', 'Infinity']) expect(() => toSqlValue(col('double'), bad), bad).toThrow(/floating-point/);
    expect(toSqlValue(col('double'), ' 1.5 ')).toBe(' 1.5 ');
    for (const bad of ['a\ud800b', '\udc00']) {
      expect(() => toSqlValue(col('varchar', 'varchar(10)'), bad)).toThrow(/lone UTF-16 surrogate/);
      expect(() => toSqlValue(col('varbinary', 'varbinary(10)'), bad)).toThrow(/lone UTF-16 surrogate/);
      expect(() => toSqlValue(col('json'), { [bad]: 1 })).toThrow(/lone UTF-16 surrogate/);
      expect(() => toSqlValue(col('json'), [bad])).toThrow(/lone UTF-16 surrogate/);
    }
    expect(() => toSqlValue(col('json'), '["a\\ud800"]')).toThrow(/lone UTF-16 surrogate/);
    expect(toSqlValue(col('json'), '["\\ud83d\\ude00"]')).toBe('["\\ud83d\\ude00"]');
    expect(() => toSqlValue(col('json'), '[1e400]')).toThrow(/beyond the range of a double/);
    // MySQL's JSON holds integers beyond 64 bits as doubles; MariaDB keeps the text.
    for (const bad of ['[18446744073709551616]', '{"a":-9223372036854775809}', '123456789012345678901234']) expect(() => toSqlValue(col('json'), bad), bad).toThrow(/beyond 64 bits/);
    expect(() => toSqlValue(col('json'), { big: 12345678901234567890123n })).toThrow(/beyond 64 bits/);
    for (const good of ['[18446744073709551615,-9223372036854775808]', '["123456789012345678901234"]', '[1.2345678901234567890123e5]', '{"k\\"123456789012345678901234":1}']) expect(toSqlValue(col('json'), good)).toBe(good);
    expect(toSqlValue(col('json'), { big: (1n << 64n) - 1n })).toBe('{"big":18446744073709551615}');
    expect(toSqlValue({ ...col('longtext'), json: true }, '[18446744073709551616]')).toBe('[18446744073709551616]');
    expect(() => toSqlValue(col('json'), `${'['.repeat(101)}${']'.repeat(101)}`)).toThrow(/deeper than 100/);
    expect(toSqlValue(col('json'), `${'['.repeat(100)}1${']'.repeat(100)}`)).toBe(`${'['.repeat(100)}1${']'.repeat(100)}`);
    // MariaDB's JSON_VALID refuses 32 levels, and keeps a number's text as given.
    const mariaJson = { ...col('longtext'), json: true };
    expect(() => toSqlValue(mariaJson, `${'['.repeat(31)}{}${']'.repeat(31)}`)).toThrow(/deeper than 31/);
    expect(toSqlValue(mariaJson, '[1e400]')).toBe('[1e400]');
    expect(() => toSqlValue(col('json'), Buffer.from([0x22, 0xff, 0x22]))).toThrow(/not valid UTF-8/);
    expect(toSqlValue(col('char', 'char(3)'), 'abc  ')).toBe('abc  ');
    expect(() => toSqlValue(col('char', 'char(3)'), 'abc\t')).toThrow(/4 characters/);
    expect(() => toSqlValue(col('varchar', 'varchar(3)'), 'abc  ')).toThrow(/5 characters/);
    expect(toSqlValue(cs('varchar', 'varchar(10)', 'latin1', 'latin1_swedish_ci'), 'café €™')).toBe('café €™');
    expect(() => toSqlValue(cs('varchar', 'varchar(10)', 'latin1', 'latin1_swedish_ci'), 'žł')).toThrow(/U\+0142 does not exist in the latin1/);
    expect(() => toSqlValue(cs('varchar', 'varchar(10)', 'latin1', 'latin1_swedish_ci'), '\u0080')).toThrow(/U\+0080/);
    expect(() => toSqlValue(cs('varchar', 'varchar(10)', 'ascii', 'ascii_general_ci'), 'é')).toThrow(/U\+00E9 does not exist in the ascii/);
    expect(() => toSqlValue(cs('varchar', 'varchar(10)', 'utf8mb3', 'utf8mb3_general_ci'), '😀')).toThrow(/U\+1F600 does not exist in the utf8mb3/);
  });
  it('refuses what the server would refuse, so it cannot poison a batch', () => {
    expect(() => toSqlValue(col('tinyint', 'tinyint'), 128)).toThrow(/out of range/);
    expect(toSqlValue(col('tinyint', 'tinyint unsigned'), '255')).toBe('255');
    expect(() => toSqlValue(col('int', 'int unsigned'), -1)).toThrow(/out of range/);
    expect(() => toSqlValue(col('bigint', 'bigint'), 2n ** 63n)).toThrow(/out of range/);
    expect(() => toSqlValue(col('double'), Number.NaN)).toThrow(/NaN/);
    expect(() => toSqlValue(col('float'), 1e39)).toThrow(/FLOAT/);
    expect(() => toSqlValue(col('decimal', 'decimal(5,2)'), '1234.5')).toThrow(/out of range/);
    expect(() => toSqlValue(col('decimal', 'decimal(5,2)'), '123.456')).toThrow(/more than 2 fraction digits/);
    expect(() => toSqlValue(col('varchar', 'varchar(2)'), 'a😀b')).toThrow(/3 characters/);
    expect(toSqlValue(col('varchar', 'varchar(2)'), '😀😀')).toBe('😀😀');
    expect(() => toSqlValue(col('varbinary', 'varbinary(2)'), Buffer.alloc(3))).toThrow(/3 bytes/);
    expect(() => toSqlValue(col('json'), '{"a":')).toThrow(/JSON/);
    expect(() => toSqlValue(col('json'), { a: [Number.NaN] })).toThrow(/NaN is not a JSON number/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => toSqlValue(col('json'), cyclic)).toThrow(/contains itself/);
    expect(() => toSqlValue({ ...col('longtext'), json: true }, 'nope')).toThrow(/JSON/);
    expect(() => toSqlValue(col('date'), '2023-02-29')).toThrow(/valid date/);
    expect(toSqlValue(col('date'), '2024-02-29')).toBe('2024-02-29');
    expect(() => toSqlValue(col('timestamp', 'timestamp(3)'), '2040-01-01 00:00:00')).toThrow(/TIMESTAMP range/);
    // The ISO 'T' separator is compared as the space it stands for.
    expect(toSqlValue(col('timestamp', 'timestamp(3)'), '2038-01-19T03:14:07')).toBe('2038-01-19T03:14:07');
    expect(() => toSqlValue(col('timestamp', 'timestamp(3)'), '1970-01-01T00:00:00')).toThrow(/TIMESTAMP range/);
    expect(() => toSqlValue(col('timestamp', 'timestamp(3)'), '2038-01-19T03:14:08')).toThrow(/TIMESTAMP range/);
    expect(() => toSqlValue(col('enum', "enum('a','b')"), 'c')).toThrow(/not one of/);
    expect(toSqlValue(col('enum', "enum('a','b')"), 'B')).toBe('B');
  });
  it('checks every value of one column object alike (type facts worked out once per column)', () => {
    const big = col('bigint', 'bigint unsigned');
    expect(toSqlValue(big, '000018446744073709551615')).toBe('18446744073709551615');
    expect(() => toSqlValue(big, '18446744073709551616')).toThrow(/out of range for bigint unsigned \(0\.\.18446744073709551615\)/);
    expect(() => toSqlValue(big, -1)).toThrow(/out of range/);
    const int = col('int');
    expect(toSqlValue(int, -2147483648)).toBe('-2147483648');
    expect(() => toSqlValue(int, 2147483648)).toThrow(/2147483648 is out of range for int \(-2147483648\.\.2147483647\)/);
    expect(() => toSqlValue(int, '1234567890123456')).toThrow(/out of range/);
    const v3 = col('varchar', 'varchar(3)');
    expect(toSqlValue(v3, 'abc')).toBe('abc');
    expect(() => toSqlValue(v3, 'abcd')).toThrow(/4 characters do not fit varchar\(3\)/);
    const tiny = col('tinytext');
    expect(toSqlValue(tiny, '€'.repeat(85))).toBe('€'.repeat(85));
    expect(() => toSqlValue(tiny, '€'.repeat(86))).toThrow(/258 bytes do not fit TINYTEXT/);
    const e = col('enum', "enum('a','b')");
    expect(toSqlValue(e, '2')).toBe('2');
    expect(() => toSqlValue(e, '3')).toThrow(/not one of/);
    const d = col('datetime', 'datetime(6)');
    expect(toSqlValue(d, '2000-02-29 23:59:59.999999')).toBe('2000-02-29 23:59:59.999999');
    expect(() => toSqlValue(d, '1900-02-29 00:00:00')).toThrow(/valid date/);
    expect(() => toSqlValue(d, '2024-04-31')).toThrow(/valid date/);
    expect(() => toSqlValue(d, '2024-01-01 24:00:00')).toThrow(/valid time of day/);
    expect(toSqlValue(d, '0000-00-00 00:00:00')).toBe('0000-00-00 00:00:00');
    const u = col('double', 'double unsigned');
    expect(() => toSqlValue(u, -1.5)).toThrow(/negative in an unsigned column/);
    expect(() => toSqlValue(col('decimal', 'decimal(4,1) unsigned'), '-1')).toThrow(/negative/);
  });
  it('tombstone names are readable when they fit and hashed when they do not', () => {
    expect(tombstoneTableName('shop', 'orders')).toBe('tomb__shop__orders');
    const long = tombstoneTableName('s'.repeat(40), 't'.repeat(40));
    expect(long.length).toBeLessThanOrEqual(64);
    expect(tombstoneTableName('a__b', 'c')).not.toBe(tombstoneTableName('a', 'b__c'));
    expect(tombstoneTableName('db', 'emoji😀')).toMatch(/^tomb_db_emoji_[0-9a-f]{12}$/);
  });
});

describe('error classification', () => {
  it('deadlocks, lock waits and lost connections are retried; other errors are not', async () => {
    const { isConnectionLost, isRetryable, serverMessage } = await import('../../src/db/retry.ts');
    // mysql2 names MariaDB's own numbers (1900 on) from MySQL's list: 4025 is CONSTRAINT failed there.
    const constraint = Object.assign(new Error('CONSTRAINT `t.js` failed'), { errno: 4025, code: 'ER_INNODB_AUTOEXTEND_SIZE_OUT_OF_RANGE', sqlMessage: 'CONSTRAINT `t.js` failed' });
    expect(serverMessage(constraint, 'mariadb')).toEqual({ code: 'MariaDB error 4025', message: 'CONSTRAINT `t.js` failed' });
    expect(serverMessage(constraint, 'mysql').code).toBe('ER_INNODB_AUTOEXTEND_SIZE_OUT_OF_RANGE');
    expect(serverMessage(Object.assign(new Error('x'), { errno: 1062, code: 'ER_DUP_ENTRY' }), 'mariadb').code).toBe('ER_DUP_ENTRY');
    expect(serverMessage(Object.assign(new Error('x'), { errno: 2013, code: 'PROTOCOL_CONNECTION_LOST' }), 'mariadb').code).toBe('PROTOCOL_CONNECTION_LOST');
    const closed = Object.assign(new Error("Can't add new command when connection is in closed state"), { fatal: true });
    expect(isConnectionLost(closed)).toBe(true);
    expect(isRetryable(closed)).toBe(true);
    expect(isRetryable(Object.assign(new Error('Deadlock found'), { errno: 1213, code: 'ER_LOCK_DEADLOCK' }))).toBe(true);
    expect(isRetryable(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))).toBe(true);
    // DDL on a table (an operator's ALTER while replication runs) that committed after the transaction's snapshot.
    expect(isRetryable(Object.assign(new Error('Table definition has changed, please retry transaction'), { errno: 1412, code: 'ER_TABLE_DEF_CHANGED' }))).toBe(true);
    const tooLong = Object.assign(new Error('Data too long'), { errno: 1406, code: 'ER_DATA_TOO_LONG' });
    expect(isRetryable(tooLong)).toBe(false);
    expect(isConnectionLost(tooLong)).toBe(false);
  });
});

describe('table order of a batch', () => {
  const plan = (table: string, parents: string[] = []): TablePlan => ({
    meta: { ...meta, table, tombstoneTable: `tomb__db__${table}`, ...(parents.length > 0 ? { parents: parents.map((p) => `db\u0000${p}`) } : {}) },
    keys: new Map(),
    releases: [],
    staleInBatch: 0,
    coalesced: 0,
  });
  const names = (plans: TablePlan[]) => plans.map((p) => p.meta.table);
  it('puts every referenced table before the tables that reference it, else keeps the given order', () => {
    // order_items < orders by name, but it references orders (and products, not in the batch).
    expect(names(parentsFirst([plan('a'), plan('order_items', ['orders', 'products']), plan('orders', ['customers']), plan('customers'), plan('z')]))).toEqual([
      'a',
      'customers',
      'orders',
      'order_items',
      'z',
    ]);
  });
  it('gives tables on a reference cycle a fixed order', () => {
    expect(names(parentsFirst([plan('x', ['y']), plan('y', ['x']), plan('s')]))).toEqual(['y', 'x', 's']);
  });
});

describe('prepared statements of the apply session', () => {
  function session(fail = false) {
    const closed: string[] = [];
    const conn = {
      execute: async () => {
        if (fail) throw Object.assign(new Error('Deadlock found'), { errno: 1213 });
        return [{ affectedRows: 1 }, []];
      },
      unprepare: (sql: string) => {
        closed.push(sql);
      },
    } as unknown as Connection;
    const ctx: ApplyContext = { conn, dialect: 'mysql', metaSchema: 'lww_meta', bypass: false, queryTimeoutMs: 1000 };
    return { ctx, closed };
  }
  const values = (n: number) => Array.from({ length: n }, (_, i) => String(i));
  it('keeps small statements cached and only the most recently used large ones prepared', async () => {
    const { ctx, closed } = session();
    await run(ctx, 'db.t', { sql: 'SMALL', values: values(UNPREPARE_ABOVE_VALUES) });
    await select(ctx, 'db.t', { sql: 'SMALL SELECT', values: values(3) });
    await run(ctx, 'db.t', { sql: 'LARGE 0', values: values(UNPREPARE_ABOVE_VALUES + 1) });
    await select(ctx, 'db.t', { sql: 'LARGE SELECT', values: values(2048) });
    for (let i = 1; i < LARGE_KEPT - 1; i++) await run(ctx, 'db.t', { sql: `LARGE ${i}`, values: values(1500) });
    expect(closed).toEqual([]);
    // Using LARGE 0 again makes LARGE SELECT the least recently used: it is the one closed next.
    await run(ctx, 'db.t', { sql: 'LARGE 0', values: values(1500) });
    await run(ctx, 'db.t', { sql: 'LARGE NEW', values: values(1500) });
    expect(closed).toEqual(['LARGE SELECT']);
    await run(ctx, 'db.t', { sql: 'LARGE NEWER', values: values(1500) });
    expect(closed).toEqual(['LARGE SELECT', 'LARGE 1']);
  });
  it('keeps apart the large statements of two connections', async () => {
    const a = session();
    const b = session();
    for (let i = 0; i < LARGE_KEPT; i++) await run(a.ctx, 'db.t', { sql: `LARGE ${i}`, values: values(1500) });
    await run(b.ctx, 'db.t', { sql: 'LARGE B', values: values(1500) });
    expect(a.closed).toEqual([]);
    expect(b.closed).toEqual([]);
  });
  it('closes a large statement that failed too, and still reports the failure', async () => {
    const { ctx, closed } = session(true);
    await expect(run(ctx, 'db.t', { sql: 'LARGE', values: values(1500) })).rejects.toThrow(/db\.t/);
    expect(closed).toEqual(['LARGE']);
  });
});

describe('statement parts', () => {
  const items = (n: number) => Array.from({ length: n }, (_, i) => i);
  const sizes = (parts: number[][]) => parts.map((p) => p.length);
  it('cuts a large part at a multiple of the row step so that its text repeats across batches', () => {
    expect(STATEMENT_ROW_STEP).toBe(16);
    expect(sizes(chunks(items(1000), 1024))).toEqual([992, 8]);
    expect(sizes(chunks(items(1010), 1024))).toEqual([1008, 2]);
    expect(sizes(chunks(items(2100), 1024))).toEqual([1024, 1024, 52]);
    expect(sizes(chunks(items(500), 256))).toEqual([256, 240, 4]);
  });
  it('leaves small parts and exact multiples whole, and keeps every item once in order', () => {
    expect(sizes(chunks(items(STEP_FROM_ROWS), 1024))).toEqual([STEP_FROM_ROWS]);
    expect(sizes(chunks(items(7), 1024))).toEqual([7]);
    expect(sizes(chunks(items(96), 1024))).toEqual([96]);
    expect(chunks(items(0), 1024)).toEqual([]);
    expect(chunks(items(1234), 1024).flat()).toEqual(items(1234));
  });
});
