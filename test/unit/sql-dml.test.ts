import { describe, expect, it } from 'vitest';
import { TypedJson } from '../../src/model/json.ts';
import { advanceCheckpointSql, claimCheckpointSql } from '../../src/sql/checkpoint.ts';
import { dialectFromVersion } from '../../src/sql/dialect.ts';
import { CONFLICT_REASON_CHARS, ColumnDefault, columnPlaceholder, deleteTombstoned, fitConflictReason, guardedDelete, keyPlaceholder, lockTombstones, lwwUpsert, plainDelete, readBackVersions, replaceRows, sameKeys, tombstonedKeys, typedJsonExpr, upsertTombstones } from '../../src/sql/dml.ts';
import { quoteIdent } from '../../src/sql/quote.ts';
import { metaSchemaDdl, tombstoneTableDdl } from '../../src/sql/templates.ts';

const INT = 'CAST(? AS SIGNED)';
const shape = { schema: 'db', table: 't', columns: ['id', 'name', '_lww_ts'], primaryKey: ['id'], versionColumn: '_lww_ts', keyPlaceholders: [INT] };
const DT = 'CAST(? AS DATETIME(6))';
const CI = 'CAST(? AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_general_ci';
const composite = { schema: 'db', table: 't', columns: ['a', 'b', 'v', '_lww_ts'], primaryKey: ['a', 'b'], versionColumn: '_lww_ts', keyPlaceholders: [DT, CI] };
const tomb = { metaSchema: 'lww_meta', tombstoneTable: 'tomb__db__t', primaryKey: ['id'], versionColumn: '_lww_ts', keyPlaceholders: [INT] };
const ctomb = { ...tomb, primaryKey: ['a', 'b'], keyPlaceholders: [DT, CI] };

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

describe('typed key placeholders', () => {
  const col = (dataType: string, columnType: string, charset: string | null = null, collation: string | null = null) => ({ dataType, columnType, charset, collation });
  it('cast each key value to its column type and collation, so the server compares as the index does', () => {
    expect(keyPlaceholder(col('int', 'int'))).toBe('CAST(? AS SIGNED)');
    expect(keyPlaceholder(col('bigint', 'bigint unsigned'))).toBe('CAST(? AS DECIMAL(20,0))');
    expect(keyPlaceholder(col('decimal', 'decimal(10,2)'))).toBe('CAST(? AS DECIMAL(10,2))');
    expect(keyPlaceholder(col('datetime', 'datetime(6)'))).toBe('CAST(? AS DATETIME(6))');
    expect(keyPlaceholder(col('timestamp', 'timestamp(3)'))).toBe('CAST(? AS DATETIME(3))');
    expect(keyPlaceholder(col('date', 'date'))).toBe('CAST(? AS DATE)');
    // A string first: MySQL 9.7 reads a string bound to a prepared CAST(? AS TIME) as a date when it can.
    expect(keyPlaceholder(col('time', 'time(3)'))).toBe('CAST(CAST(? AS CHAR) AS TIME(3))');
    expect(keyPlaceholder(col('time', 'time'))).toBe('CAST(CAST(? AS CHAR) AS TIME)');
    expect(keyPlaceholder(col('binary', 'binary(4)'))).toBe('CAST(? AS BINARY(4))');
    expect(keyPlaceholder(col('varchar', 'varchar(10)', 'utf8mb4', 'utf8mb4_general_ci'))).toBe(CI);
    expect(keyPlaceholder(col('varchar', 'varchar(10)', 'utf8mb4', 'bad`name'))).toBe('?');
  });
});

describe('LWW upsert', () => {
  it('MySQL: typed keys and version, key guard, keys assigned under the guard, version assigned last', () => {
    const newer = '`_lww_new`.`_lww_ts` > `db`.`t`.`_lww_ts` AND `_lww_new`.`id` = `db`.`t`.`id`';
    expect(lwwUpsert(shape, [[1, 'a', '10'], ['2', null, '11']], 'mysql')).toEqual({
      sql:
        'INSERT INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (CAST(? AS SIGNED), ?, CAST(? AS DECIMAL(20,0))), (CAST(? AS SIGNED), ?, CAST(? AS DECIMAL(20,0)))' +
        ' AS `_lww_new` ON DUPLICATE KEY UPDATE ' +
        `\`id\` = IF(${newer}, \`_lww_new\`.\`id\`, \`db\`.\`t\`.\`id\`), ` +
        `\`name\` = IF(${newer}, \`_lww_new\`.\`name\`, \`db\`.\`t\`.\`name\`), ` +
        `\`_lww_ts\` = IF(${newer}, \`_lww_new\`.\`_lww_ts\`, \`db\`.\`t\`.\`_lww_ts\`)`,
      values: [1, 'a', '10', '2', null, '11'],
    });
  });
  it('MariaDB and TiDB read the incoming row with VALUES()', () => {
    const newer = 'VALUES(`_lww_ts`) > `db`.`t`.`_lww_ts` AND VALUES(`id`) = `db`.`t`.`id`';
    const expected =
      'INSERT INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (CAST(? AS SIGNED), ?, CAST(? AS DECIMAL(20,0))) ON DUPLICATE KEY UPDATE ' +
      `\`id\` = IF(${newer}, VALUES(\`id\`), \`db\`.\`t\`.\`id\`), ` +
      `\`name\` = IF(${newer}, VALUES(\`name\`), \`db\`.\`t\`.\`name\`), ` +
      `\`_lww_ts\` = IF(${newer}, VALUES(\`_lww_ts\`), \`db\`.\`t\`.\`_lww_ts\`)`;
    expect(lwwUpsert(shape, [[1, 'a', '10']], 'mariadb').sql).toBe(expected);
    expect(lwwUpsert(shape, [[1, 'a', '10']], 'tidb').sql).toBe(expected);
  });
  it('a typed JSON document is written as its text with each typed scalar cast back, in that row only', () => {
    const doc = new TypedJson('{"d": 1.50, "a": ["2024-01-02"]}', [
      { path: '$."d"', type: 'decimal', value: '1.50', precision: 3, scale: 2 },
      { path: '$."a"[0]', type: 'date', value: '2024-01-02' },
    ]);
    const { sql, values } = lwwUpsert(shape, [[1, doc, '10'], [2, 'b', '11']], 'mysql');
    expect(sql).toContain(
      'VALUES (CAST(? AS SIGNED), JSON_SET(CAST(? AS JSON), ?, CAST(? AS DECIMAL(3,2)), ?, CAST(? AS DATE)), CAST(? AS DECIMAL(20,0))), (CAST(? AS SIGNED), ?, CAST(? AS DECIMAL(20,0)))',
    );
    expect(values).toEqual([1, doc.text, '$."d"', '1.50', '$."a"[0]', '2024-01-02', '10', 2, 'b', '11']);
    expect(replaceRows(shape, [[1, doc, '10']]).sql).toBe(
      'REPLACE INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (?, JSON_SET(CAST(? AS JSON), ?, CAST(? AS DECIMAL(3,2)), ?, CAST(? AS DATE)), ?)',
    );
    expect(typedJsonExpr(new TypedJson('[5]', [{ path: '$[0]', type: 'unsigned', value: '5' }])).sql).toBe('JSON_SET(CAST(? AS JSON), ?, CAST(CAST(? AS CHAR) AS UNSIGNED))');
    expect(() => typedJsonExpr(new TypedJson('1', [{ path: '$', type: 'decimal', value: '1', precision: 66, scale: 0 }]))).toThrow(/DECIMAL\(66,0\)/);
    expect(() => lockTombstones(tomb, [[doc]])).toThrow(/typed JSON/);
  });
  it('a composite key is typed and guarded on every column', () => {
    const { sql } = lwwUpsert(composite, [['2024-01-01 10:00:00', 'A', 'x', '5']], 'mysql');
    expect(sql).toContain(`VALUES (${DT}, ${CI}, ?, CAST(? AS DECIMAL(20,0)))`);
    expect(sql).toContain('`_lww_new`.`a` = `db`.`t`.`a` AND `_lww_new`.`b` = `db`.`t`.`b`');
    expect(sql.endsWith('`db`.`t`.`_lww_ts`)')).toBe(true);
  });
  it('the tombstones of a batch are first locked through a plain key list', () => {
    expect(lockTombstones(ctomb, [['d1', 'A'], ['d2', 'b']])).toEqual({
      sql: `SELECT \`_lww_ts\` FROM \`lww_meta\`.\`tomb__db__t\` WHERE (\`a\` = ${DT} AND \`b\` = ?) OR (\`a\` = ${DT} AND \`b\` = ?) LOCK IN SHARE MODE`,
      values: ['d1', 'A', 'd2', 'b'],
    });
    expect(lockTombstones(tomb, [['1'], ['2']]).sql).toBe('SELECT `_lww_ts` FROM `lww_meta`.`tomb__db__t` WHERE `id` = CAST(? AS SIGNED) OR `id` = CAST(? AS SIGNED) LOCK IN SHARE MODE');
  });
  it('tombstones of the batch keys are read with a shared lock, matched by the server', () => {
    expect(tombstonedKeys(composite, ctomb, [['d1', 'A', '5']])).toEqual({
      sql:
        `SELECT \`_lww_new\`.\`_lww_i\` AS \`_lww_i\` FROM (SELECT CAST(? AS SIGNED) AS \`_lww_i\`, ${DT} AS \`_lww_k0\`, ${CI} AS \`_lww_k1\`, CAST(? AS DECIMAL(20,0)) AS \`_lww_v\`) AS \`_lww_new\`` +
        ' JOIN `lww_meta`.`tomb__db__t` ON `lww_meta`.`tomb__db__t`.`a` = `_lww_new`.`_lww_k0` AND `lww_meta`.`tomb__db__t`.`b` = `_lww_new`.`_lww_k1`' +
        ' WHERE `lww_meta`.`tomb__db__t`.`_lww_ts` >= `_lww_new`.`_lww_v` LOCK IN SHARE MODE',
      values: ['0', 'd1', 'A', '5'],
    });
  });
  it("a column given its DEFAULT is the keyword in that row's tuple, nothing bound, and the guarded assignment reads it", () => {
    const mysql = lwwUpsert(shape, [[1, ColumnDefault.value, '10'], [2, 'b', '11']], 'mysql');
    expect(mysql.sql).toContain('VALUES (CAST(? AS SIGNED), DEFAULT, CAST(? AS DECIMAL(20,0))), (CAST(? AS SIGNED), ?, CAST(? AS DECIMAL(20,0))) AS `_lww_new`');
    expect(mysql.sql).toContain('`name` = IF(`_lww_new`.`_lww_ts` > `db`.`t`.`_lww_ts` AND `_lww_new`.`id` = `db`.`t`.`id`, `_lww_new`.`name`, `db`.`t`.`name`)');
    expect(mysql.values).toEqual([1, '10', 2, 'b', '11']);
    const maria = lwwUpsert(shape, [[1, ColumnDefault.value, '10']], 'mariadb');
    expect(maria.sql).toContain('VALUES (CAST(? AS SIGNED), DEFAULT, CAST(? AS DECIMAL(20,0))) ON DUPLICATE KEY UPDATE');
    expect(maria.sql).toContain('`name` = IF(VALUES(`_lww_ts`) > `db`.`t`.`_lww_ts` AND VALUES(`id`) = `db`.`t`.`id`, VALUES(`name`), `db`.`t`.`name`)');
    expect(maria.values).toEqual([1, '10']);
    expect(replaceRows(shape, [[1, ColumnDefault.value, '10']])).toEqual({ sql: 'REPLACE INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (?, DEFAULT, ?)', values: [1, '10'] });
    // Never a key, version or compared value.
    expect(() => lockTombstones(tomb, [[ColumnDefault.value]])).toThrow(/DEFAULT/);
  });
  it('refuses a column list whose last column is not the version, and rows of the wrong width', () => {
    expect(() => lwwUpsert({ ...shape, columns: ['id', '_lww_ts', 'name'] }, [[1, '1', 'a']], 'mysql')).toThrow(/last/);
    expect(() => lwwUpsert(shape, [[1, '1']], 'mysql')).toThrow(/2 values/);
  });
});

describe('bypass, tombstone, delete and read-back statements', () => {
  it('REPLACE INTO and plain DELETE for the bypass', () => {
    expect(replaceRows(shape, [[1, 'a', '1'], [2, 'b', '2']])).toEqual({
      sql: 'REPLACE INTO `db`.`t` (`id`, `name`, `_lww_ts`) VALUES (?, ?, ?), (?, ?, ?)',
      values: [1, 'a', '1', 2, 'b', '2'],
    });
    expect(plainDelete(composite, [['d1', 'x'], ['d2', 'y']])).toEqual({
      sql: `DELETE FROM \`db\`.\`t\` WHERE (\`a\` = ${DT} AND \`b\` = ?) OR (\`a\` = ${DT} AND \`b\` = ?)`,
      values: ['d1', 'x', 'd2', 'y'],
    });
  });
  it('tombstones are only ever raised; a newer one takes the incoming key spelling', () => {
    const newer = '`_lww_new`.`_lww_ts` > `lww_meta`.`tomb__db__t`.`_lww_ts`';
    expect(upsertTombstones(tomb, [['1', '9']], 'mysql')).toEqual({
      sql:
        'INSERT INTO `lww_meta`.`tomb__db__t` (`id`, `_lww_ts`) VALUES (CAST(? AS SIGNED), CAST(? AS DECIMAL(20,0))) AS `_lww_new` ON DUPLICATE KEY UPDATE ' +
        `\`id\` = IF(${newer}, \`_lww_new\`.\`id\`, \`lww_meta\`.\`tomb__db__t\`.\`id\`), ` +
        '`_lww_ts` = GREATEST(`lww_meta`.`tomb__db__t`.`_lww_ts`, `_lww_new`.`_lww_ts`)',
      values: ['1', '9'],
    });
    expect(upsertTombstones(tomb, [['1', '9']], 'mariadb').sql).toBe(
      'INSERT INTO `lww_meta`.`tomb__db__t` (`id`, `_lww_ts`) VALUES (CAST(? AS SIGNED), CAST(? AS DECIMAL(20,0))) ON DUPLICATE KEY UPDATE ' +
        '`id` = IF(VALUES(`_lww_ts`) > `lww_meta`.`tomb__db__t`.`_lww_ts`, VALUES(`id`), `lww_meta`.`tomb__db__t`.`id`), ' +
        '`_lww_ts` = GREATEST(`lww_meta`.`tomb__db__t`.`_lww_ts`, VALUES(`_lww_ts`))',
    );
  });
  it('a delete removes the row only where its version is older, keys typed', () => {
    expect(guardedDelete(composite, [['d1', 'x', '5'], ['d2', 'y', '6']])).toEqual({
      sql:
        `DELETE FROM \`db\`.\`t\` WHERE (\`a\` = ${DT} AND \`b\` = ? AND \`_lww_ts\` < CAST(? AS DECIMAL(20,0)))` +
        ` OR (\`a\` = ${DT} AND \`b\` = ? AND \`_lww_ts\` < CAST(? AS DECIMAL(20,0)))`,
      values: ['d1', 'x', '5', 'd2', 'y', '6'],
    });
  });
  it('after an upsert, rows a tombstone as new covers are deleted by joined key columns, the keys typed as derived rows', () => {
    const t = '`db`.`t`';
    const tt = '`lww_meta`.`tomb__db__t`';
    const n = '`_lww_new`';
    expect(deleteTombstoned(composite, ctomb, [['d1', 'x'], ['d2', 'y']])).toEqual({
      sql:
        `DELETE ${t} FROM (SELECT ${DT} AS \`_lww_k0\`, ${CI} AS \`_lww_k1\` UNION ALL SELECT ${DT}, ${CI}) AS ${n}` +
        ` JOIN ${t} ON ${t}.\`a\` = ${n}.\`_lww_k0\` AND ${t}.\`b\` = ${n}.\`_lww_k1\`` +
        ` JOIN ${tt} ON ${tt}.\`a\` = ${t}.\`a\` AND ${tt}.\`b\` = ${t}.\`b\`` +
        ` WHERE ${tt}.\`_lww_ts\` >= ${t}.\`_lww_ts\``,
      values: ['d1', 'x', 'd2', 'y'],
    });
    // One collated key column keeps the derived rows (an OR or IN of collated values misses keys
    // that differ only in letter case under a binary collation).
    const ci = { ...shape, keyPlaceholders: [CI] };
    expect(deleteTombstoned(ci, { ...tomb, keyPlaceholders: [CI] }, [['7']]).sql).toBe(
      `DELETE ${t} FROM (SELECT ${CI} AS \`_lww_k0\`) AS ${n} JOIN ${t} ON ${t}.\`id\` = ${n}.\`_lww_k0\`` +
        ` JOIN ${tt} ON ${tt}.\`id\` = ${t}.\`id\` WHERE ${tt}.\`_lww_ts\` >= ${t}.\`_lww_ts\``,
    );
  });
  it('covers a single integer key with an IN-list on the table, typed like the column', () => {
    const t = '`db`.`t`';
    const tt = '`lww_meta`.`tomb__db__t`';
    expect(deleteTombstoned(shape, tomb, [['7'], ['8'], ['9']])).toEqual({
      sql: `DELETE ${t} FROM ${t} JOIN ${tt} ON ${tt}.\`id\` = ${t}.\`id\` WHERE ${t}.\`id\` IN (${INT}, ${INT}, ${INT}) AND ${tt}.\`_lww_ts\` >= ${t}.\`_lww_ts\``,
      values: ['7', '8', '9'],
    });
    const U = 'CAST(? AS DECIMAL(20,0))';
    expect(deleteTombstoned({ ...shape, keyPlaceholders: [U] }, { ...tomb, keyPlaceholders: [U] }, [['18446744073709551615']])).toEqual({
      sql: `DELETE ${t} FROM ${t} JOIN ${tt} ON ${tt}.\`id\` = ${t}.\`id\` WHERE ${t}.\`id\` IN (${U}) AND ${tt}.\`_lww_ts\` >= ${t}.\`_lww_ts\``,
      values: ['18446744073709551615'],
    });
    expect(() => deleteTombstoned(shape, tomb, [['7', '8']])).toThrow(/a row has 2 values/);
  });
  it('reads back row and tombstone versions per key position, with a locking read (latest committed, not the snapshot)', () => {
    expect(readBackVersions(shape, tomb, [['7'], ['8']])).toEqual({
      sql:
        'SELECT `_lww_new`.`_lww_i` AS `_lww_i`, `db`.`t`.`_lww_ts` AS row_version, `lww_meta`.`tomb__db__t`.`_lww_ts` AS tomb_version' +
        ' FROM (SELECT CAST(? AS SIGNED) AS `_lww_i`, CAST(? AS SIGNED) AS `_lww_k0` UNION ALL SELECT CAST(? AS SIGNED), CAST(? AS SIGNED)) AS `_lww_new`' +
        ' LEFT JOIN `db`.`t` ON `db`.`t`.`id` = `_lww_new`.`_lww_k0` LEFT JOIN `lww_meta`.`tomb__db__t` ON `lww_meta`.`tomb__db__t`.`id` = `_lww_new`.`_lww_k0`' +
        ' LOCK IN SHARE MODE',
      values: ['0', '7', '1', '8'],
    });
  });
  it('asks the server whether old and new key values are the same key', () => {
    expect(sameKeys(composite, [['d1', 'A', 'd1', 'a']])).toEqual({
      sql: `SELECT (${DT} = ${DT} AND ${CI} = ${CI}) AS \`same0\``,
      values: ['d1', 'd1', 'A', 'a'],
    });
  });
});

describe('checkpoint and DDL text', () => {
  it("advances only the worker's own row, only while the owner epoch holds", () => {
    expect(advanceCheckpointSql('lww_meta')).toContain('WHERE `source_id` = ? AND `worker` = ? AND `owner_epoch` = ?');
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

describe('placeholders compared with a column', () => {
  it('bind a character value plain (the column collation decides) and keep every other type cast', () => {
    expect(columnPlaceholder('CAST(? AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_bin')).toBe('?');
    expect(columnPlaceholder('CAST(? AS DATETIME(6))')).toBe('CAST(? AS DATETIME(6))');
    expect(columnPlaceholder('CAST(? AS BINARY(4))')).toBe('CAST(? AS BINARY(4))');
    expect(columnPlaceholder('CAST(? AS DECIMAL(10,2))')).toBe('CAST(? AS DECIMAL(10,2))');
  });
});

// A follow-up's reason names the parent, the child and the foreign key: with 64-character names it is
// longer than the conflict log's VARCHAR(255), and a strict-mode insert of it would fail the sink's
// transaction on every retry.
describe('a conflict-log reason', () => {
  it('is kept whole up to the column width and cut with an ellipsis beyond it, counting characters, not UTF-16 units', () => {
    expect(fitConflictReason('short')).toBe('short');
    const exact = 'r'.repeat(CONFLICT_REASON_CHARS);
    expect(fitConflictReason(exact)).toBe(exact);
    const long = `foreign key cascade: removed by this node as its own delete (version 1) before the delete of its parent ${'p'.repeat(129)} (${'c'.repeat(129)})`;
    const cut = fitConflictReason(long);
    expect(Array.from(cut)).toHaveLength(CONFLICT_REASON_CHARS);
    expect(cut.startsWith('foreign key cascade: removed by this node as its own delete (version 1)')).toBe(true);
    expect(cut.endsWith('…')).toBe(true);
    // Astral characters (two UTF-16 units each) are never split into a lone surrogate.
    const astral = fitConflictReason('😀'.repeat(300));
    expect(Array.from(astral)).toHaveLength(CONFLICT_REASON_CHARS);
    expect(astral.slice(0, -1)).toBe('😀'.repeat(CONFLICT_REASON_CHARS - 1));
  });
});
