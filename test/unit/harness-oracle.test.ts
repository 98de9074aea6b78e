// The generated-session oracle's allowance for ON DELETE SET NULL: only those columns, only to NULL,
// only at the written version.
import { describe, expect, it } from 'vitest';
import { clearedBySetNull, type OracleTable } from '../../src/harness/session-gen.ts';

const col = (name: string) => ({ name, dataType: 'varchar', columnType: 'varchar(10)', json: false, collation: 'utf8mb4_bin' });
const table: OracleTable = { name: 'c', key: [col('id')], columns: [col('id'), col('v'), col('p')], tombstoneTable: 'tomb__g__c', setNullColumns: ['p'] };
const m = (expected: string, actual: string, version = '5') => ({ node: 'n1', key: 'c/1', expected: { version: '5', row: expected }, actual: { version, row: actual } });

describe('a row whose SET NULL reference the parent delete cleared', () => {
  it('is the written row when only those columns became NULL at the same version', () => {
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#1:a#N'))).toBe(true);
  });
  it('is a mismatch for any other difference, another version, or a split the separator makes ambiguous', () => {
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#1:b#N'))).toBe(false);
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#1:a#2:08'))).toBe(false);
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#N#2:09'))).toBe(false);
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#1:a#N', '6'))).toBe(false);
    expect(clearedBySetNull(table, m('1:1#3:a#b#2:09', '1:1#3:a#b#N'))).toBe(false);
    expect(clearedBySetNull({ ...table, setNullColumns: [] }, m('1:1#1:a#2:09', '1:1#1:a#N'))).toBe(false);
  });
});
