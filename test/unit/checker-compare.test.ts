import { describe, expect, it } from 'vitest';
import { type ColumnSchema, schemaDifferences, type TableSchema } from '../../src/checker/schema-compare.ts';
import { canonicalJson, canonicalValue, classify, compareKeys, effectiveState, isFinding, keyParam, lwwWinner, sameState } from '../../src/checker/compare-values.ts';
import { formatStateReport, type NodeState, type StateReport, stateReportToJson } from '../../src/checker/report.ts';

const col = (dataType: string, columnType = dataType, json = false) => ({ name: 'c', dataType, columnType, json });
const row = (version: bigint, values: Record<string, string | null> = { v: 'x' }): NodeState => ({ kind: 'row', version, values });
const tomb = (version: bigint): NodeState => ({ kind: 'tombstone', version });
const absent: NodeState = { kind: 'absent' };

describe('canonical values', () => {
  it('NULL and the empty string stay distinct', () => {
    expect(canonicalValue(col('varchar'), null)).toBeNull();
    expect(canonicalValue(col('varchar'), '')).toBe('');
  });
  it('decimals compare by value whatever their scale', () => {
    expect(canonicalValue(col('decimal', 'decimal(10,2)'), '1.50')).toBe(canonicalValue(col('decimal', 'decimal(10,1)'), '1.5'));
    expect(canonicalValue(col('decimal'), '-0.00')).toBe('0');
    expect(canonicalValue(col('decimal'), '10.00')).toBe('10');
    expect(canonicalValue(col('decimal'), '12345678901234567890123456789012345.123456789012345678901234567891')).toBe(
      '12345678901234567890123456789012345.123456789012345678901234567891',
    );
    expect(canonicalValue(col('decimal'), '1.51')).not.toBe(canonicalValue(col('decimal'), '1.5'));
  });
  it('integers are exact beyond 2^53, whether read as number or string', () => {
    expect(canonicalValue(col('bigint'), '18446744073709551615')).toBe('18446744073709551615');
    expect(canonicalValue(col('int'), 42)).toBe('42');
    expect(canonicalValue(col('bigint'), '9007199254740993')).not.toBe(canonicalValue(col('bigint'), '9007199254740992'));
  });
  it('fractional seconds compare by value whatever their precision', () => {
    expect(canonicalValue(col('datetime', 'datetime(6)'), '2024-01-01 10:00:00.500000')).toBe('2024-01-01 10:00:00.5');
    expect(canonicalValue(col('datetime', 'datetime(3)'), '2024-01-01 10:00:00.000')).toBe('2024-01-01 10:00:00');
    expect(canonicalValue(col('datetime'), '2024-01-01 10:00:00')).toBe('2024-01-01 10:00:00');
    expect(canonicalValue(col('time', 'time(6)'), '-838:59:59.000000')).toBe('-838:59:59');
  });
  it('binary values are hex, BIT values their integer, floats their shortest text', () => {
    expect(canonicalValue(col('varbinary'), Buffer.from([0, 255, 16]))).toBe('0x00FF10');
    expect(canonicalValue(col('bit', 'bit(64)'), Buffer.from('ffffffffffffffff', 'hex'))).toBe('18446744073709551615');
    expect(canonicalValue(col('bit', 'bit(1)'), Buffer.from([0]))).toBe('0');
    expect(canonicalValue(col('double'), 0.1)).toBe('0.1');
    expect(canonicalValue(col('float'), '1e20')).toBe('100000000000000000000');
  });
  it('JSON compares by content: key order, whitespace and number spelling do not matter', () => {
    const a = canonicalJson('{"b": [1, 2.50, "x"], "a": {"z": null, "y": true}}');
    expect(a).toBe('{"a":{"y":true,"z":null},"b":[1,2.5,"x"]}');
    expect(canonicalJson('{"a":{"y":true,"z":null},"b":[1.0,25e-1,"x"]}')).toBe(a);
    expect(canonicalJson('{"a": 1, "a": 2}')).toBe('{"a":2}');
    expect(canonicalJson('"\\u00e9\\n"')).toBe(JSON.stringify('é\n'));
    expect(canonicalJson('{"k": 12345678901234567890123}')).toBe('{"k":12345678901234567890123}');
    expect(canonicalJson('{"k": 12345678901234567890123}')).not.toBe(canonicalJson('{"k": 12345678901234567890124}'));
    expect(canonicalJson('not json')).toBe('not json');
    expect(canonicalJson('[1,]')).toBe('[1,]');
    expect(canonicalValue(col('json', 'json', true), { b: 1, a: [true] })).toBe('{"a":[true],"b":1}');
  });
  it('findings are ordered by key: numbers by value, text by code unit, NULL first', () => {
    const keys = [['10'], ['-5'], ['9.5'], ['2']].sort(compareKeys);
    expect(keys).toEqual([['-5'], ['2'], ['9.5'], ['10']]);
    expect(compareKeys(['1', 'b'], ['1', 'a'])).toBeGreaterThan(0);
    expect(compareKeys(['18446744073709551615'], ['18446744073709551614'])).toBeGreaterThan(0);
    expect(compareKeys([null], ['a'])).toBeLessThan(0);
  });
  it('integer keys are bound as bigint so they stay exact', () => {
    expect(keyParam(col('bigint'), '18446744073709551615')).toBe(18446744073709551615n);
    expect(keyParam(col('varchar'), '12')).toBe('12');
  });
});

describe('key states and their classification', () => {
  it('a row is the state whatever tombstone sits beside it; an equal or newer tombstone is kept with it', () => {
    const r = { version: 10n, values: {} };
    expect(effectiveState(r, 5n)).toEqual({ kind: 'row', version: 10n, values: {} });
    expect(effectiveState(r, 12n)).toEqual({ kind: 'row', version: 10n, values: {}, tombstone: 12n });
    expect(effectiveState(r, 10n)).toEqual({ kind: 'row', version: 10n, values: {}, tombstone: 10n });
    expect(effectiveState(undefined, 10n)).toEqual({ kind: 'tombstone', version: 10n });
    expect(effectiveState(undefined, undefined)).toEqual({ kind: 'absent' });
  });
  it('a row under a tombstone is a finding even when both nodes show the same, and LWW says the tombstone wins', () => {
    const under: NodeState = { kind: 'row', version: 5n, values: { v: 'x' }, tombstone: 7n };
    expect(isFinding(under, under)).toBe(true);
    expect(classify(under, under)).toBe('row_under_tombstone');
    expect(lwwWinner(under, under)).toBeNull();
    expect(classify(tomb(7n), under)).toBe('row_under_tombstone');
    expect(lwwWinner(tomb(7n), under)).toBe('a');
    expect(lwwWinner(under, tomb(7n))).toBe('b');
    expect(lwwWinner(under, row(8n))).toBe('b');
    expect(lwwWinner(under, row(6n))).toBe('a');
    expect(isFinding(row(5n), row(5n))).toBe(false);
  });
  it('classifies every pair of differing states from the reference node', () => {
    expect(classify(row(5n), absent)).toBe('missing_row');
    expect(classify(absent, row(5n))).toBe('extra_row');
    expect(classify(row(5n, { v: 'a' }), row(5n, { v: 'b' }))).toBe('value_mismatch');
    expect(classify(row(5n), row(7n))).toBe('version_mismatch');
    expect(classify(row(5n), tomb(7n))).toBe('tombstone_vs_row');
    expect(classify(tomb(7n), row(5n))).toBe('tombstone_vs_row');
    expect(classify(tomb(7n), tomb(9n))).toBe('tombstone_mismatch');
    expect(classify(tomb(7n), absent)).toBe('tombstone_mismatch');
  });
  it('LWW picks the higher version, absent loses, and a same-version value mismatch has no winner', () => {
    expect(lwwWinner(row(5n), absent)).toBe('a');
    expect(lwwWinner(absent, tomb(1n))).toBe('b');
    expect(lwwWinner(row(5n), row(7n))).toBe('b');
    expect(lwwWinner(row(9n), tomb(7n))).toBe('a');
    expect(lwwWinner(row(7n), tomb(7n))).toBe('b');
    expect(lwwWinner(row(5n, { v: 'a' }), row(5n, { v: 'b' }))).toBeNull();
    expect(lwwWinner(row(1n << 63n), row((1n << 63n) + 1n))).toBe('b');
  });
  it('states are equal only with the same kind, version and values', () => {
    expect(sameState(row(5n), row(5n))).toBe(true);
    expect(sameState(row(5n, { v: null }), row(5n, { v: '' }))).toBe(false);
    expect(sameState(tomb(5n), tomb(5n))).toBe(true);
    expect(sameState(tomb(5n), row(5n))).toBe(false);
    expect(sameState(absent, absent)).toBe(true);
  });
});

describe('report rendering', () => {
  const report: StateReport = {
    nodes: ['mysql://root:***@h1:3306/', 'mysql://root:***@h2:3306/'],
    identical: false,
    durationMs: 1200,
    totals: { chunks: 3, chunksDiffering: 1, rowsFetched: 4, findings: 1 },
    tables: [
      {
        table: 'db.t',
        tombstoneTable: 'lww_meta.tomb__db__t',
        chunks: 2,
        chunksDiffering: 1,
        tombstoneChunks: 1,
        tombstoneChunksDiffering: 0,
        rowsFetched: 4,
        counts: { missing_row: 0, extra_row: 0, value_mismatch: 1, version_mismatch: 0, tombstone_vs_row: 0, tombstone_mismatch: 0, row_under_tombstone: 0, unexplained_chunk: 0 },
        findings: [
          {
            table: 'db.t',
            key: { id: '7' },
            nodes: [0, 1],
            states: [row(18446744073709551615n, { v: null, w: 'same' }), row(18446744073709551615n, { v: '', w: 'same' })],
            class: 'value_mismatch',
            winner: null,
          },
        ],
        findingsTruncated: false,
        schemaDifferences: [],
        notes: [],
      },
    ],
  };
  it('the human table shows the key, both states (differing columns only), the class and the winner', () => {
    const text = formatStateReport(report);
    expect(text).toContain('A = mysql://root:***@h1:3306/');
    expect(text).toMatch(/id=7 +row @18446744073709551615 v=NULL +B: row @18446744073709551615 v="" +value_mismatch +none \(same version\)/);
    expect(text).not.toContain('w="same"');
    expect(text).toMatch(/DIFFERENT: 1 finding/);
  });
  it('JSON keeps 64-bit versions exact as strings', () => {
    const json = JSON.parse(stateReportToJson(report));
    expect(json.tables[0].findings[0].states[0]).toEqual({ kind: 'row', version: '18446744073709551615', values: { v: null, w: 'same' } });
  });
});

describe('schema differences', () => {
  const column = (over: Partial<ColumnSchema> = {}): ColumnSchema => ({
    name: 'c',
    columnType: 'varchar(10)',
    nullable: true,
    extra: '',
    generation: '',
    charset: 'utf8mb4',
    collation: 'utf8mb4_general_ci',
    columnDefault: null,
    ...over,
  });
  const label = (i: number) => 'ABC'[i]!;
  it('names each attribute that differs from node A, per node, and UNIQUE keys present on one side only', () => {
    const a: TableSchema = { columns: [column(), column({ name: 'n', columnType: 'int(11)' })], uniqueKeys: [['c'], ['n', 'c']] };
    const b: TableSchema = { columns: [column({ collation: 'utf8mb4_bin', nullable: false, columnDefault: 'x' }), column({ name: 'n', columnType: 'int' })], uniqueKeys: [['n', 'c']] };
    const c: TableSchema = { columns: [column({ extra: 'INVISIBLE' })], uniqueKeys: [['c'], ['n', 'c'], ['n']] };
    expect(schemaDifferences([a, b, c], label)).toEqual([
      'column c: collation utf8mb4_general_ci on node A, utf8mb4_bin on node B',
      'column c: nullable NULL on node A, NOT NULL on node B',
      'column c: default none on node A, "x" on node B',
      'UNIQUE key (c) on node A only, not on node B',
      'column c: extra none on node A, invisible on node C',
      'UNIQUE key (n) on node C only, not on node A',
    ]);
  });
  it('equal definitions (integer display widths and the creating session\'s charset introducers aside) have none', () => {
    const a: TableSchema = { columns: [column({ columnType: 'int(11)', columnDefault: "concat(_utf8mb3\\'n\\',_utf8mb3\\'1\\')", generation: "concat(_latin1'x')" })], uniqueKeys: [['c']] };
    const b: TableSchema = { columns: [column({ columnType: 'int', columnDefault: "concat(_utf8mb4\\'n\\',_utf8mb4\\'1\\')", generation: "concat(_utf8mb4'x')" })], uniqueKeys: [['c']] };
    expect(schemaDifferences([a, b], label)).toEqual([]);
    const other = schemaDifferences([a, { ...b, columns: [column({ columnType: 'int', columnDefault: "concat(_utf8mb4\\'n\\',_utf8mb4\\'2\\')", generation: "concat(_latin1'x')" })] }], label);
    expect(other).toHaveLength(1);
    expect(other[0]).toMatch(/^column c: default .*'1.* on node A, .*'2.* on node B$/);
  });
});
