import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from '../../src/errors.ts';
import { autoIncrementRangesCollide, autoIncrementWarnings } from '../../src/install/auto-increment.ts';
import { checkTableSelection, parseTableRef } from '../../src/install/table-list.ts';
import { isUnguardedAppTrigger } from '../../src/install/inspect.ts';
import { backfillVersionSql } from '../../src/sql/install.ts';
import { unsupportedCharsetColumn } from '../../src/model/charsets.ts';
import { applicationPeriods, unsupportedTableType } from '../../src/model/table.ts';

describe('table names given to install', () => {
  it('splits schema.table at the first dot', () => {
    expect(parseTableRef('shop.items')).toEqual({ schema: 'shop', table: 'items' });
    expect(parseTableRef('shop.a.b')).toEqual({ schema: 'shop', table: 'a.b' });
  });

  it('reads backtick-quoted names with dots and doubled backticks', () => {
    expect(parseTableRef('`my.db`.`we``ird tâble`')).toEqual({ schema: 'my.db', table: 'we`ird tâble' });
    expect(parseTableRef('`my.db`.items')).toEqual({ schema: 'my.db', table: 'items' });
    expect(parseTableRef('db.`a.b`')).toEqual({ schema: 'db', table: 'a.b' });
  });

  it('refuses names without a schema or a table', () => {
    for (const bad of ['items', '.items', 'shop.', '`shop`', '`shop`.', '`shop`.`t`x', '`unclosed.t']) {
      expect(() => parseTableRef(bad), bad).toThrow(InvalidOptionsError);
    }
  });

  it('needs exactly one of tables and schema, and drops duplicates', () => {
    expect(() => checkTableSelection(undefined, undefined)).toThrow(/either tables/);
    expect(() => checkTableSelection(['a.b'], 'a')).toThrow(/either tables/);
    expect(() => checkTableSelection([], undefined)).toThrow(/at least one/);
    expect(checkTableSelection(undefined, 'shop')).toBeUndefined();
    expect(checkTableSelection(['a.b', { schema: 'a', table: 'b' }, 'a.c'], undefined)).toEqual([
      { schema: 'a', table: 'b' },
      { schema: 'a', table: 'c' },
    ]);
  });
});

describe('auto-increment collisions', () => {
  it('default settings on two nodes collide', () => {
    expect(autoIncrementRangesCollide({ increment: 1, offset: 1 }, { increment: 1, offset: 1 })).toBe(true);
  });

  it('interleaved ranges do not collide', () => {
    expect(autoIncrementRangesCollide({ increment: 2, offset: 1 }, { increment: 2, offset: 2 })).toBe(false);
    expect(autoIncrementRangesCollide({ increment: 3, offset: 1 }, { increment: 3, offset: 3 })).toBe(false);
  });

  it('same offset, or increments whose gcd divides the offset difference, collide', () => {
    expect(autoIncrementRangesCollide({ increment: 2, offset: 1 }, { increment: 2, offset: 1 })).toBe(true);
    // 1, 5, 9, ... and 3, 9, 15, ...: 9 is in both
    expect(autoIncrementRangesCollide({ increment: 4, offset: 1 }, { increment: 6, offset: 3 })).toBe(true);
    // 1, 5, 9, ... (odd) and 2, 8, 14, ... (even)
    expect(autoIncrementRangesCollide({ increment: 4, offset: 1 }, { increment: 6, offset: 2 })).toBe(false);
  });

  it('an offset above the increment is ignored, as the server does', () => {
    expect(autoIncrementRangesCollide({ increment: 2, offset: 3 }, { increment: 2, offset: 1 })).toBe(true);
  });

  it('warns once per colliding pair, naming the shared tables and what to set', () => {
    const node = (label: string, increment: number, offset: number, tables: string[]) => ({
      label,
      increment,
      offset,
      tables: tables.map((t) => parseTableRef(t)),
    });
    const warnings = autoIncrementWarnings([
      node('a:3306', 1, 1, ['shop.orders', 'shop.items']),
      node('b:3306', 1, 1, ['shop.orders']),
      node('c:3306', 1, 1, []),
    ]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('a:3306 (auto_increment_increment=1, auto_increment_offset=1)');
    expect(warnings[0]).toContain('for shop.orders:');
    expect(warnings[0]).toContain('at least the number of nodes (3)');
    expect(autoIncrementWarnings([node('a', 2, 1, ['s.t']), node('b', 2, 2, ['s.t'])])).toEqual([]);
  });
});

describe('backfill statement', () => {
  it('stamps only unversioned rows, in bounded chunks, with the triggers’ integer math', () => {
    expect(backfillVersionSql('shop', 'items', '_lww_ts', 500)).toBe(
      "UPDATE `shop`.`items` SET `_lww_ts` = (CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS UNSIGNED) << 10) | CAST(? AS UNSIGNED) WHERE `_lww_ts` = 0 LIMIT 500",
    );
    expect(() => backfillVersionSql('shop', 'items', '_lww_ts', 0)).toThrow(RangeError);
  });
});

describe('application triggers', () => {
  it('take a body only when all of it is skipped in the sink sessions', () => {
    const guarded = [
      'BEGIN IF @lww_apply IS NULL THEN SET NEW.touched = NOW(6); END IF; END',
      'if @lww_apply is null then set new.touched = now(6); end if',
      'BEGIN\n  -- the sink writes replicated rows\n  IF @lww_apply IS NULL THEN\n    SET NEW.a = 1;\n    SET NEW.b = 2;\n  END IF;\nEND',
    ];
    for (const body of guarded) expect(isUnguardedAppTrigger('t', 'touch', body), body).toBe(false);
    const unguarded = [
      'SET NEW.touched = NOW(6)',
      'BEGIN /* TODO: skip when @lww_apply is set */ SET NEW.touched = NOW(6); END',
      'BEGIN IF @lww_apply IS NULL THEN SET NEW.a = 1; END IF; SET NEW.b = 2; END',
      'BEGIN IF @lww_apply IS NOT NULL THEN SET NEW.a = 1; END IF; END',
    ];
    for (const body of unguarded) expect(isUnguardedAppTrigger('t', 'touch', body), body).toBe(true);
    // The project's own triggers are not the application's.
    expect(isUnguardedAppTrigger('t', 'lww_bi__t', 'SET NEW._lww_ts = 1')).toBe(false);
  });
});

describe('charsets capture carries byte for byte (model/charsets.ts)', () => {
  it('takes the Unicode charsets, latin1 and the probed single- and double-byte ones, and columns without a charset', () => {
    for (const charset of ['utf8mb4', 'utf8mb3', 'UTF8MB4', 'utf16', 'latin1', 'cp1251', 'gbk', 'euckr', null, undefined]) {
      expect(unsupportedCharsetColumn({ name: 'c', charset })).toBeUndefined();
    }
  });
  it('refuses the charsets whose decoded text the server writes back as other bytes, naming the column and the remedy', () => {
    for (const charset of ['big5', 'sjis', 'cp932', 'ujis', 'eucjpms', 'tis620', 'gb18030', 'gb2312', 'ucs2', 'utf32', 'swe7', 'macroman']) {
      expect(unsupportedCharsetColumn({ name: 'note', charset })).toMatch(new RegExp(`^its column note is in character set ${charset}, .*CHARACTER SET utf8mb4`));
    }
  });
});

describe('temporal tables (MariaDB, model/table.ts)', () => {
  it('finds application-time periods in SHOW CREATE TABLE, not SYSTEM_TIME nor a column or comment that names one', () => {
    const created = [
      'CREATE TABLE `h2` (',
      '  `id` int(11) NOT NULL,',
      "  `period for` varchar(9) DEFAULT NULL COMMENT 'x\\n  PERIOD FOR `q` (`s`, `e`)',",
      '  `rs` timestamp(6) GENERATED ALWAYS AS ROW START,',
      '  `re` timestamp(6) GENERATED ALWAYS AS ROW END,',
      '  `s` date NOT NULL,',
      '  `e` date NOT NULL,',
      '  PERIOD FOR `app``x` (`s`, `e`),',
      '  PRIMARY KEY (`id`,`re`),',
      '  PERIOD FOR SYSTEM_TIME (`rs`, `re`)',
      ') ENGINE=InnoDB WITH SYSTEM VERSIONING',
    ].join('\n');
    expect(applicationPeriods(created)).toEqual(['app`x']);
    expect(applicationPeriods('CREATE TABLE t (\n  id int(11) NOT NULL,\n  PERIOD FOR p (s, e),\n  PRIMARY KEY (id)\n)')).toEqual(['p']);
    expect(applicationPeriods('CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  PRIMARY KEY (`id`)\n)')).toEqual([]);
  });

  it('refuses a system-versioned table with the reason and the remedy; takes a base table', () => {
    expect(unsupportedTableType('BASE TABLE')).toBeUndefined();
    expect(unsupportedTableType('SYSTEM VERSIONED')).toMatch(/^it is system-versioned .*history row.*DROP SYSTEM VERSIONING/);
    expect(unsupportedTableType('VIEW')).toBe('it is a VIEW, not a base table');
  });
});
