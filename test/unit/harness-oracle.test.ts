// The generated-session oracle's allowance for ON DELETE SET NULL: only those columns, only to NULL,
// only at the written version.
import { describe, expect, it } from 'vitest';
import { clearedBySetNull, type LoggedFollowUp, type OracleTable, parseFollowUp, removedBySink, seenTexts, tombstoneVersionOf, writtenByFollowUp } from '../../src/harness/session-gen.ts';
import { FOLLOW_UP_CASCADE_REASON, FOLLOW_UP_SET_NULL_MARK } from '../../src/writer/foreign-keys.ts';

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
  it('is at a newer version only where a node cleared it as its own write (a follow-up logged at the written version)', () => {
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#1:a#N', '6'), true)).toBe(true);
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#1:a#N', '4'), true)).toBe(false);
    expect(clearedBySetNull(table, m('1:1#1:a#2:09', '1:1#1:b#N', '6'), true)).toBe(false);
  });
});

// A row the writers expect present, absent on a node: the sink removed it at its written version,
// as the node's conflict log says (a UNIQUE clash; a CASCADE parent deleted on another node, where
// the key's own tombstone must hold exactly that version).
describe('an expected row the sink removed', () => {
  const gone = (version = '5') => ({ node: 'n1', key: 'c/1', expected: { version, row: '1:1#1:a#2:09' }, actual: null });
  const cascade = ['foreign key cascade: removed with its parent g.p, deleted on another node'];
  it('is gone with a CASCADE parent when the conflict log says so at its version and its key has a tombstone at that version', () => {
    expect(removedBySink(gone(), { reasons: cascade, tombstoneVersion: 5n })).toBe(true);
    expect(removedBySink(gone(), { reasons: ['foreign key cascade: fk (p) named a deleted parent; the row goes with it'], tombstoneVersion: 5n })).toBe(true);
  });
  it('is a mismatch when the key has no tombstone at that version, or nothing was logged', () => {
    expect(removedBySink(gone(), { reasons: cascade, tombstoneVersion: undefined })).toBe(false);
    expect(removedBySink(gone(), { reasons: cascade, tombstoneVersion: 6n })).toBe(false);
    expect(removedBySink(gone(), { reasons: cascade, tombstoneVersion: 4n })).toBe(false);
    expect(removedBySink(gone(), { reasons: [], tombstoneVersion: 5n })).toBe(false);
    expect(removedBySink(gone(), { reasons: ['foreign key set null: p named a deleted parent'], tombstoneVersion: 5n })).toBe(false);
  });
  it('is deleted by a node as its own write (a follow-up logged at its version) when its tombstone is newer', () => {
    const own = ['foreign key cascade: removed by this node as its own delete before the delete of its parent g.p (fk), from another node, which did not know the row'];
    expect(removedBySink(gone(), { reasons: own, tombstoneVersion: 9n })).toBe(true);
    expect(removedBySink(gone(), { reasons: own, tombstoneVersion: 4n })).toBe(false);
    expect(removedBySink(gone(), { reasons: own, tombstoneVersion: undefined })).toBe(false);
    expect(removedBySink(gone(), { reasons: cascade, tombstoneVersion: 9n })).toBe(false);
  });
  it('is removed by a UNIQUE clash logged at its version', () => {
    expect(removedBySink(gone(), { reasons: ['unique key clash: removed by newer row (id=2) (version 7)'], tombstoneVersion: undefined })).toBe(true);
  });
  it('is never a row present on the node, nor one expected deleted', () => {
    expect(removedBySink({ ...gone(), actual: { version: '5', row: '1:1#1:a#N' } }, { reasons: cascade, tombstoneVersion: 5n })).toBe(false);
    expect(removedBySink({ ...gone(), expected: { version: '5', row: null } }, { reasons: cascade, tombstoneVersion: 5n })).toBe(false);
  });
});

// The tombstone lookup by identity may return other spellings the server's comparison folds together.
describe('the tombstone of an identity', () => {
  it('is the one with exactly that identity, not another spelling of a binary key', () => {
    const rows = [
      { i: '2083-08-08 04:48:45.190104|00|4:BETA', v: '1839329139389507586' },
      { i: '2083-08-08 04:48:45.190104|00|4:beta', v: '1839329135870976001' },
    ];
    expect(tombstoneVersionOf(rows, '2083-08-08 04:48:45.190104|00|4:beta')).toBe(1839329135870976001n);
    expect(tombstoneVersionOf(rows, '2083-08-08 04:48:45.190104|00|4:BETA')).toBe(1839329139389507586n);
    expect(tombstoneVersionOf(rows, '2083-08-08 04:48:45.190104|00|4:Beta')).toBeUndefined();
    expect(tombstoneVersionOf([], 'x')).toBeUndefined();
  });
});

// A follow-up is a node's own write at the least version of that node above the row's: a writer's
// write on the other node from the same row state in the same microsecond is concurrent with it and
// loses by node id (MySQL seed 107: expected the writer's 833, both nodes held the follow-up's 834).
describe('a key whose winning write was a follow-up', () => {
  const setNull = `foreign key set null: g.c (p) ${FOLLOW_UP_SET_NULL_MARK} (version 834) before the delete of its parent g.p from another node, which did not know the row`;
  const cascade = `${FOLLOW_UP_CASCADE_REASON} (version 834) before the delete of its parent g.p (fk), from another node, which did not know the row`;
  // The writers saw the row at 700 (p set) and the other node's write at 833; the follow-up corrected 700.
  const seen = new Map<bigint, string | null>([
    [700n, '1:1#1:a#2:09'],
    [833n, '1:1#1:b#N'],
  ]);
  const at = (v: bigint) => seen.get(v);
  const held = (row: string | null, version = '834') => ({ node: 'n1', key: 'c/1', expected: { version: '833', row: '1:1#1:b#N' }, actual: row === null ? null : { version, row } });
  const f = (action: LoggedFollowUp['action'], logged = 700n, to = 834n): LoggedFollowUp => ({ action, logged, to });

  it('reads the corrected version and the written one from the conflict log', () => {
    expect(parseFollowUp(setNull, '700')).toEqual(f('SET NULL'));
    expect(parseFollowUp(cascade, '700')).toEqual(f('CASCADE'));
    expect(parseFollowUp('foreign key set null: fk (p) named a deleted parent; landed with the reference cleared', '700')).toBeUndefined();
    expect(parseFollowUp('foreign key cascade: removed with its parent g.p, deleted on another node', '700')).toBeUndefined();
  });
  it('is the corrected row with its SET NULL columns cleared, at the follow-up\'s version, newer than the writers\' last', () => {
    expect(writtenByFollowUp(table, held('1:1#1:a#N'), [f('SET NULL')], at)).toBe(true);
  });
  it('is a mismatch for any other row, version, corrected version, action, or a follow-up older than the writers\' last', () => {
    expect(writtenByFollowUp(table, held('1:1#1:b#N'), [f('SET NULL')], at)).toBe(false);
    expect(writtenByFollowUp(table, held('1:1#1:a#N', '835'), [f('SET NULL')], at)).toBe(false);
    expect(writtenByFollowUp(table, held('1:1#1:a#N'), [f('SET NULL', 699n)], at)).toBe(false);
    expect(writtenByFollowUp(table, held('1:1#1:a#N'), [f('CASCADE')], at)).toBe(false);
    expect(writtenByFollowUp(table, { ...held('1:1#1:a#N', '832'), expected: { version: '833', row: '1:1#1:b#N' } }, [f('SET NULL', 700n, 832n)], at)).toBe(false);
    expect(writtenByFollowUp({ ...table, setNullColumns: [] }, held('1:1#1:a#N'), [f('SET NULL')], at)).toBe(false);
  });
  it('is a key deleted by a CASCADE follow-up only when its tombstone holds the follow-up\'s version and the corrected row was seen', () => {
    expect(writtenByFollowUp(table, held(null), [f('CASCADE')], at, 834n)).toBe(true);
    expect(writtenByFollowUp(table, held(null), [f('CASCADE')], at, 835n)).toBe(false);
    expect(writtenByFollowUp(table, held(null), [f('CASCADE')], at, undefined)).toBe(false);
    expect(writtenByFollowUp(table, held(null), [f('CASCADE', 699n)], at, 834n)).toBe(false);
    expect(writtenByFollowUp(table, held(null), [f('SET NULL')], at, 834n)).toBe(false);
  });
});

describe('the texts the writers saw per key and version', () => {
  it('keeps a row seen at a version when the key\'s tombstone at that same version is seen too (in either order)', () => {
    const at = (writes: Array<{ text: string | null }>) => seenTexts(new Map(), writes.map((x) => ({ node: 'n1', table: 'c', id: '1', version: 700n, text: x.text }))).get('c/1')?.get(700n);
    expect(at([{ text: '1:1#1:a#2:09' }, { text: null }])).toBe('1:1#1:a#2:09');
    expect(at([{ text: null }, { text: '1:1#1:a#2:09' }])).toBe('1:1#1:a#2:09');
    expect(at([{ text: null }])).toBeNull();
  });
});
