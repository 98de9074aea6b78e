import { describe, expect, it } from 'vitest';
import { childAtVersion, childRowsAtVersions, countRespellable, lockCascadedChildren, respellReferenced, tombstoneCascadedChildren } from '../../src/sql/foreign-keys.ts';

const CI = 'CAST(? AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_general_ci';
const INT = 'CAST(? AS SIGNED)';
const V = 'CAST(? AS DECIMAL(20,0))';
const parent = { schema: 'db', table: 'p', columns: ['id', 'name', '_lww_ts'], primaryKey: ['id'], versionColumn: '_lww_ts', keyPlaceholders: [CI] };
const refs = { columns: ['id'], placeholders: [CI] };

describe('a collated referenced key respelled', () => {
  const derived = `(SELECT ${CI} AS \`_lww_k0\`, ${CI} AS \`_lww_r0\`, ${V} AS \`_lww_v\` UNION ALL SELECT ${CI}, ${CI}, ${V}) AS \`_lww_n\``;
  const where = '`db`.`p`.`_lww_ts` < `_lww_n`.`_lww_v` AND `db`.`p`.`id` = `_lww_n`.`_lww_r0` AND (CAST(`db`.`p`.`id` AS BINARY) <> CAST(`_lww_n`.`_lww_r0` AS BINARY))';
  const rows = [
    ['ABC', 'ABC', '20'],
    ['x', 'x', '30'],
  ];
  it('touches only older rows whose referenced columns are equal under the collation and differ in bytes', () => {
    expect(respellReferenced(parent, refs, rows)).toEqual({
      sql: `UPDATE \`db\`.\`p\` JOIN ${derived} ON \`db\`.\`p\`.\`id\` = \`_lww_n\`.\`_lww_k0\` SET \`db\`.\`p\`.\`id\` = \`_lww_n\`.\`_lww_r0\` WHERE ${where}`,
      values: ['ABC', 'ABC', '20', 'x', 'x', '30'],
    });
    expect(countRespellable(parent, refs, rows).sql).toBe(`SELECT COUNT(*) AS \`n\` FROM \`db\`.\`p\` JOIN ${derived} ON \`db\`.\`p\`.\`id\` = \`_lww_n\`.\`_lww_k0\` WHERE ${where} FOR UPDATE`);
  });
  it('refuses rows of the wrong width', () => {
    expect(() => respellReferenced(parent, refs, [['a', '1']])).toThrow(/binds 3/);
  });
});

describe('the children a parent delete cascades', () => {
  const child = { schema: 'db', table: 'c', primaryKey: ['id'], versionColumn: '_lww_ts', columns: [{ child: 'pid', parent: 'id' }] };
  const from =
    `FROM (SELECT ${CI} AS \`_lww_k0\`, ${V} AS \`_lww_v\`) AS \`_lww_n\` JOIN \`db\`.\`p\` ON \`db\`.\`p\`.\`id\` = \`_lww_n\`.\`_lww_k0\`` +
    ' JOIN `db`.`c` ON `db`.`c`.`pid` = `db`.`p`.`id` WHERE `db`.`p`.`_lww_ts` < `_lww_n`.`_lww_v`';
  it('are read with a lock, with their versions', () => {
    expect(lockCascadedChildren(parent, child, [['abc', '99']])).toEqual({ sql: `SELECT \`db\`.\`c\`.\`id\`, \`db\`.\`c\`.\`_lww_ts\` AS \`_lww_v\` ${from} FOR UPDATE`, values: ['abc', '99'] });
  });
  it('get tombstones at their own versions, never lowered', () => {
    const into = 'INSERT INTO `lww_meta`.`tomb__db__c` (`id`, `_lww_ts`) SELECT * FROM (SELECT `db`.`c`.`id`, `db`.`c`.`_lww_ts` AS `_lww_ts` ';
    expect(tombstoneCascadedChildren(parent, child, { metaSchema: 'lww_meta', tombstoneTable: 'tomb__db__c' }, [['abc', '99']], 'mysql')).toEqual({
      sql:
        `${into}${from}) AS \`_lww_h\` ON DUPLICATE KEY UPDATE \`id\` = IF(\`_lww_h\`.\`_lww_ts\` > \`lww_meta\`.\`tomb__db__c\`.\`_lww_ts\`, \`_lww_h\`.\`id\`, \`lww_meta\`.\`tomb__db__c\`.\`id\`),` +
        ' `_lww_ts` = GREATEST(`lww_meta`.`tomb__db__c`.`_lww_ts`, `_lww_h`.`_lww_ts`)',
      values: ['abc', '99'],
    });
    expect(tombstoneCascadedChildren(parent, child, { metaSchema: 'lww_meta', tombstoneTable: 'tomb__db__c' }, [['abc', '99']], 'mariadb').sql).toContain('GREATEST(`lww_meta`.`tomb__db__c`.`_lww_ts`, VALUES(`_lww_ts`))');
  });
  it('bind one key per parent row', () => {
    expect(lockCascadedChildren({ ...parent, keyPlaceholders: [INT] }, child, [['1', '5'], ['2', '6']]).values).toEqual(['1', '5', '2', '6']);
  });
});

// The sink's follow-ups of a replicated parent delete (writer/foreign-keys.ts): one child row, only
// while it holds the version it was found at.
describe('a follow-up of a replicated parent delete', () => {
  const child = { schema: 'db', table: 'c', primaryKey: ['k', 'id'], versionColumn: '_lww_ts', columns: [{ child: 'pid', parent: 'id' }, { child: 'pk2', parent: 'k2' }], keyPlaceholders: [CI, INT] };
  const where = `\`db\`.\`c\`.\`k\` = ${CI} AND \`db\`.\`c\`.\`id\` = ${INT} AND \`db\`.\`c\`.\`_lww_ts\` = ${V}`;
  it('locks and deletes the row (CASCADE) or clears the foreign key columns at a new version (SET NULL), by key and version', () => {
    expect(childAtVersion(child, ['a', '7'], 42n, 'lock')).toEqual({ sql: `SELECT 1 AS \`found\` FROM \`db\`.\`c\` WHERE ${where} FOR UPDATE`, values: ['a', '7', '42'] });
    expect(childAtVersion(child, ['a', '7'], 42n, 'delete')).toEqual({ sql: `DELETE FROM \`db\`.\`c\` WHERE ${where}`, values: ['a', '7', '42'] });
    expect(childAtVersion(child, ['a', '7'], 42n, { nullAt: 2049n })).toEqual({
      sql: `UPDATE \`db\`.\`c\` SET \`pid\` = NULL, \`pk2\` = NULL, \`_lww_ts\` = ${V} WHERE ${where}`,
      values: ['2049', 'a', '7', '42'],
    });
    expect(() => childAtVersion(child, ['a'], 42n, 'delete')).toThrow(/primary key 2/);
  });
  it('reads which rows still hold their versions, by position', () => {
    expect(
      childRowsAtVersions(child, [
        ['a', '7', '42'],
        ['b', '8', '43'],
      ]),
    ).toEqual({
      sql:
        `SELECT \`_lww_n\`.\`_lww_i\` FROM (SELECT CAST(? AS UNSIGNED) AS \`_lww_i\`, ${CI} AS \`_lww_k0\`, ${INT} AS \`_lww_k1\`, ${V} AS \`_lww_v\` UNION ALL SELECT CAST(? AS UNSIGNED), ${CI}, ${INT}, ${V}) AS \`_lww_n\`` +
        ' JOIN `db`.`c` ON `db`.`c`.`k` = `_lww_n`.`_lww_k0` AND `db`.`c`.`id` = `_lww_n`.`_lww_k1` AND `db`.`c`.`_lww_ts` = `_lww_n`.`_lww_v`',
      values: [0, 'a', '7', '42', 1, 'b', '8', '43'],
    });
    expect(() => childRowsAtVersions(child, [['a', '42']])).toThrow(/binds 3/);
  });
});
