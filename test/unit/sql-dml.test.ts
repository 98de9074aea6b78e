import { describe, expect, it } from 'vitest';
import { advanceCheckpointSql, claimCheckpointSql } from '../../src/sql/checkpoint.ts';
import { dialectFromVersion } from '../../src/sql/dialect.ts';
import {
  deleteRowsUnderTombstoneSql,
  guardedDeleteSql,
  lwwUpsertSql,
  plainDeleteSql,
  replaceSql,
  selectTombstonesForUpdateSql,
  upsertTombstonesSql,
} from '../../src/sql/dml.ts';
import { quoteIdent } from '../../src/sql/quote.ts';
import { metaSchemaDdl, tombstoneTableDdl } from '../../src/sql/templates.ts';

const shape = { schema: 'db', table: 't', columns: ['id', 'name', '_lww_ts'], primaryKey: ['id'], versionColumn: '_lww_ts' };
const composite = { schema: 'db', table: 't', columns: ['a', 'b', 'v', '_lww_ts'], primaryKey: ['a', 'b'], versionColumn: '_lww_ts' };
const tomb = { metaSchema: 'lww_meta', tombstoneTable: 'tomb__db__t', primaryKey: ['id'], versionColumn: '_lww_ts' };

describe('identifier quoting', () => {
  it('doubles backticks and keeps spaces and unicode', () => {
    expect(quoteIdent('we`ird tâble')).toBe('`we``ird tâble`');
  });
  it('refuses identifiers the server cannot hold', () => {
    expect(() => quoteIdent('')).toThrow(/empty/);
    expect(() => quoteIdent('x'.repeat(65))).toThrow(/64/);
    expect(() => quoteIdent('a😀')).toThrow(/4-byte/);
    expect(() => quoteIdent('a\u0000b')).toThrow(/NUL/);
  });
});

describe('dialect detection', () => {
  it('picks the statement form from the server version', () => {
    expect(dialectFromVersion('10.11.19-MariaDB-0+deb12u1-log')).toBe('mariadb');
    expect(dialectFromVersion('9.7.4-2')).toBe('mysql');
    expect(dialectFromVersion('8.0.19')).toBe('mysql');
    expect(dialectFromVersion('8.0.18-log')).toBe('mariadb');
    expect(dialectFromVersion('5.7.25-TiDB-v7.5.0')).toBe('tidb');
  });
});

describe('LWW upsert text', () => {
  it('MySQL uses the row alias, qualifies both sides and assigns the version last', () => {
    expect(lwwUpsertSql(shape, 2, 'mysql')).toBe(
      'INSERT INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (?, ?, ?), (?, ?, ?) AS `_lww_new` ON DUPLICATE KEY UPDATE ' +
        '`name` = IF(`_lww_new`.`_lww_ts` > `db`.`t`.`_lww_ts` AND `_lww_new`.`id` = `db`.`t`.`id`, `_lww_new`.`name`, `db`.`t`.`name`), ' +
        '`_lww_ts` = IF(`_lww_new`.`_lww_ts` > `db`.`t`.`_lww_ts` AND `_lww_new`.`id` = `db`.`t`.`id`, `_lww_new`.`_lww_ts`, `db`.`t`.`_lww_ts`)',
    );
  });
  it('MariaDB and TiDB use VALUES()', () => {
    const expected =
      'INSERT INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE ' +
      '`name` = IF(VALUES(`_lww_ts`) > `db`.`t`.`_lww_ts` AND VALUES(`id`) = `db`.`t`.`id`, VALUES(`name`), `db`.`t`.`name`), ' +
      '`_lww_ts` = IF(VALUES(`_lww_ts`) > `db`.`t`.`_lww_ts` AND VALUES(`id`) = `db`.`t`.`id`, VALUES(`_lww_ts`), `db`.`t`.`_lww_ts`)';
    expect(lwwUpsertSql(shape, 1, 'mariadb')).toBe(expected);
    expect(lwwUpsertSql(shape, 1, 'tidb')).toBe(expected);
  });
  it('guards on every primary-key column of a composite key and never assigns key columns', () => {
    const sql = lwwUpsertSql(composite, 1, 'mysql');
    expect(sql).toContain('`_lww_new`.`a` = `db`.`t`.`a` AND `_lww_new`.`b` = `db`.`t`.`b`');
    expect(sql).not.toMatch(/UPDATE `a` =|, `b` =/);
    expect(sql.endsWith('`db`.`t`.`_lww_ts`)')).toBe(true);
  });
  it('refuses a column list whose last column is not the version', () => {
    expect(() => lwwUpsertSql({ ...shape, columns: ['id', '_lww_ts', 'name'] }, 1, 'mysql')).toThrow(/last/);
  });
});

describe('bypass, tombstone and delete text', () => {
  it('REPLACE INTO and plain DELETE for the bypass', () => {
    expect(replaceSql(shape, 2)).toBe('REPLACE INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (?, ?, ?), (?, ?, ?)');
    expect(plainDeleteSql(shape, 3)).toBe('DELETE FROM `db`.`t` WHERE `id` IN (?, ?, ?)');
    expect(plainDeleteSql(composite, 2)).toBe('DELETE FROM `db`.`t` WHERE (`a`, `b`) IN ((?, ?), (?, ?))');
  });
  it('tombstones are read with a locking read and only ever raised', () => {
    expect(selectTombstonesForUpdateSql(tomb, 2)).toBe('SELECT `id`, `_lww_ts` FROM `lww_meta`.`tomb__db__t` WHERE `id` IN (?, ?) FOR UPDATE');
    expect(upsertTombstonesSql(tomb, 1, 'mysql')).toBe(
      'INSERT INTO `lww_meta`.`tomb__db__t` (`id`, `_lww_ts`) VALUES (?, ?) AS `_lww_new` ON DUPLICATE KEY UPDATE `_lww_ts` = GREATEST(`lww_meta`.`tomb__db__t`.`_lww_ts`, `_lww_new`.`_lww_ts`)',
    );
    expect(upsertTombstonesSql(tomb, 1, 'mariadb')).toBe(
      'INSERT INTO `lww_meta`.`tomb__db__t` (`id`, `_lww_ts`) VALUES (?, ?) ON DUPLICATE KEY UPDATE `_lww_ts` = GREATEST(`lww_meta`.`tomb__db__t`.`_lww_ts`, VALUES(`_lww_ts`))',
    );
  });
  it('rows the server matches to a newer tombstone are removed by its own key comparison', () => {
    expect(deleteRowsUnderTombstoneSql(shape, tomb, 2)).toBe(
      'DELETE `db`.`t` FROM `db`.`t` JOIN `lww_meta`.`tomb__db__t` ON `lww_meta`.`tomb__db__t`.`id` = `db`.`t`.`id`' +
        ' WHERE `lww_meta`.`tomb__db__t`.`_lww_ts` >= `db`.`t`.`_lww_ts` AND `db`.`t`.`id` IN (?, ?)',
    );
  });
  it('a delete removes the row only where its version is older', () => {
    expect(guardedDeleteSql(composite, 2)).toBe(
      'DELETE FROM `db`.`t` WHERE (`a` = ? AND `b` = ? AND `_lww_ts` < ?) OR (`a` = ? AND `b` = ? AND `_lww_ts` < ?)',
    );
  });
});

describe('checkpoint and DDL text', () => {
  it('advances only while the owner epoch holds', () => {
    expect(advanceCheckpointSql('lww_meta')).toContain('WHERE `source_id` = ? AND `owner_epoch` = ?');
    expect(claimCheckpointSql('m')).toContain('`owner_epoch` = `owner_epoch` + 1');
  });
  it('renders the metadata schema from sql/meta.sql with the quoted schema name', () => {
    const ddl = metaSchemaDdl('my meta');
    expect(ddl[0]).toBe('CREATE DATABASE IF NOT EXISTS `my meta` CHARACTER SET utf8mb4');
    expect(ddl.some((s) => s.startsWith('CREATE TABLE IF NOT EXISTS `my meta`.`checkpoints`'))).toBe(true);
    expect(ddl.every((s) => !s.includes('{{'))).toBe(true);
  });
  it('tombstone tables copy the key column types and collations', () => {
    const ddl = tombstoneTableDdl('lww_meta', 'tomb__db__t', [{ name: 'k', columnType: 'varchar(20)', charset: 'utf8mb4', collation: 'utf8mb4_bin' }], '_lww_ts');
    expect(ddl).toBe(
      'CREATE TABLE IF NOT EXISTS `lww_meta`.`tomb__db__t` (\n  `k` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n  `_lww_ts` BIGINT UNSIGNED NOT NULL,\n  PRIMARY KEY (`k`)\n) ENGINE=InnoDB',
    );
  });
});
