import { describe, expect, it } from 'vitest';
import { countRowsSql, keyBoundParams, lookupVersionsSql, rangeVersionsSql, selectChunkSql } from '../../src/sql/copy.ts';

describe('keyset reads of the merge', () => {
  it('read the first chunk of a table in key order with the columns asked for', () => {
    expect(selectChunkSql('db', 't', ['id', 'v', '_lww_ts'], ['id'], 500, true)).toBe('SELECT `id`, `v`, `_lww_ts` FROM `db`.`t` ORDER BY `db`.`t`.`id` LIMIT 500');
  });
  it('continue after a single-column key', () => {
    expect(selectChunkSql('db', 't', ['id'], ['id'], 10, false)).toBe('SELECT `id` FROM `db`.`t` WHERE `id` > ? ORDER BY `db`.`t`.`id` LIMIT 10');
    expect(keyBoundParams([7])).toEqual([7]);
  });
  it('continue after a composite key with a range both engines use (no row constructor)', () => {
    expect(selectChunkSql('db', 't', ['a', 'b', 'c'], ['a', 'b', 'c'], 10, false)).toBe(
      'SELECT `a`, `b`, `c` FROM `db`.`t` WHERE `a` >= ? AND (`a` > ? OR (`a` = ? AND `b` > ?) OR (`a` = ? AND `b` = ? AND `c` > ?)) ORDER BY `db`.`t`.`a`, `db`.`t`.`b`, `db`.`t`.`c` LIMIT 10',
    );
    expect(keyBoundParams([1, 2, 3])).toEqual([1, 1, 1, 2, 1, 2, 3]);
  });
  it('refuse a chunk size that is not a positive integer', () => {
    expect(() => selectChunkSql('db', 't', ['id'], ['id'], 0, true)).toThrow(/positive integer/);
    expect(() => selectChunkSql('db', 't', ['id'], ['id'], 1.5, true)).toThrow(/positive integer/);
  });
  it('count the rows left after a resume key', () => {
    expect(countRowsSql('db', 't')).toBe('SELECT COUNT(*) AS `n` FROM `db`.`t`');
    expect(countRowsSql('db', 't', ['a', 'b'], true)).toBe('SELECT COUNT(*) AS `n` FROM `db`.`t` WHERE `a` >= ? AND (`a` > ? OR (`a` = ? AND `b` > ?))');
  });
  it('look up versions on the target by key range and by key list, without locks', () => {
    expect(rangeVersionsSql('m', 'tomb__db__t', ['a', 'b'], '_lww_ts', 99)).toBe(
      'SELECT `a`, `b`, `_lww_ts` FROM `m`.`tomb__db__t` WHERE `a` >= ? AND (`a` > ? OR (`a` = ? AND `b` >= ?)) AND `a` <= ? AND (`a` < ? OR (`a` = ? AND `b` <= ?)) ORDER BY `m`.`tomb__db__t`.`a`, `m`.`tomb__db__t`.`b` LIMIT 99',
    );
    expect(lookupVersionsSql('db', 't', ['id'], '_lww_ts', 3)).toBe('SELECT `id`, `_lww_ts` FROM `db`.`t` WHERE `id` IN (?, ?, ?)');
    expect(lookupVersionsSql('db', 't', ['a', 'b'], 'v', 2)).toBe('SELECT `a`, `b`, `v` FROM `db`.`t` WHERE (`a`, `b`) IN ((?, ?), (?, ?))');
    expect(rangeVersionsSql('db', 't', ['id'], 'v', 5)).not.toMatch(/FOR UPDATE|LOCK/);
  });
  it('read FLOAT, DOUBLE and spatial columns exactly, sort by the column (not its alias) and compare typed keys against their own type', () => {
    const f = { name: 'f', dataType: 'float', columnType: 'float' };
    const d = { name: 'd', dataType: 'decimal', columnType: 'decimal(65,30)' };
    const g = { name: 'g', dataType: 'geometry', columnType: 'geometry' };
    const x = { name: 'x', dataType: 'double', columnType: 'double' };
    expect(selectChunkSql('db', 't', [f, d, g, x], [f, d], 10, false)).toBe(
      'SELECT CAST(CAST(`f` AS DOUBLE) AS CHAR) AS `f`, `d`, CAST(`g` AS BINARY) AS `g`, CAST(`x` AS CHAR) AS `x` FROM `db`.`t`' +
        ' WHERE `f` >= CAST(? AS FLOAT) AND (`f` > CAST(? AS FLOAT) OR (`f` = CAST(? AS FLOAT) AND `d` > CAST(? AS DECIMAL(65,30))))' +
        ' ORDER BY `db`.`t`.`f`, `db`.`t`.`d` LIMIT 10',
    );
    expect(lookupVersionsSql('db', 't', [f], 'v', 2)).toBe('SELECT CAST(CAST(`f` AS DOUBLE) AS CHAR) AS `f`, `v` FROM `db`.`t` WHERE `f` IN (CAST(? AS FLOAT), CAST(? AS FLOAT))');
  });
  it('quote identifiers that hold backticks', () => {
    expect(selectChunkSql('d`b', 't', ['i`d'], ['i`d'], 1, true)).toBe('SELECT `i``d` FROM `d``b`.`t` ORDER BY `d``b`.`t`.`i``d` LIMIT 1');
  });
});
