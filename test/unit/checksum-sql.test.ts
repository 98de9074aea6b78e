import { jsonTypeSignatureSql } from '../../src/sql/json-types.ts';
import { describe, expect, it } from 'vitest';
import {
  chunkBoundarySql,
  chunkChecksumSql,
  chunkRowsSql,
  checksumTermSql,
  coveredRowsSql,
  fractionDigits,
  keyPlaceholder,
  keyRangeParams,
  keyRangeWhere,
  readTermSql,
  registeredTablesSql,
  rowsByKeySql,
  rowTextSql,
  termRowsByKeySql,
  termRowsForEachKeySql,
} from '../../src/sql/checksum.ts';

const col = (name: string, dataType: string, columnType = dataType, json = false) => ({ name, dataType, columnType, json });
const single = { schema: 'db', table: 't', key: [{ name: 'id', dataType: 'int', columnType: 'int' }] };
const composite = {
  schema: 'db',
  table: 't',
  key: [
    { name: 'a', dataType: 'int', columnType: 'int' },
    { name: 'b', dataType: 'varchar', columnType: 'varchar(10)' },
    { name: 'c', dataType: 'decimal', columnType: 'decimal(10,2)' },
  ],
};

describe('column terms of the checksum', () => {
  it('integers and dates are the server text; FLOAT its exact double, DOUBLE its own shortest text', () => {
    expect(checksumTermSql(col('n', 'bigint', 'bigint unsigned'))).toBe('`n`');
    expect(checksumTermSql(col('d', 'date'))).toBe('`d`');
    expect(checksumTermSql(col('y', 'year', 'year(4)'))).toBe('`y`');
    expect(checksumTermSql(col('f', 'float'))).toBe('CAST(`f` AS DOUBLE)');
    expect(checksumTermSql(col('f', 'double'))).toBe('`f`');
  });
  it('DECIMAL and fractional temporals lose trailing fraction zeros, only when they have a fraction', () => {
    expect(checksumTermSql(col('m', 'decimal', 'decimal(10,2)'))).toBe("TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM `m`))");
    expect(checksumTermSql(col('m', 'decimal', 'decimal(10,0)'))).toBe('`m`');
    expect(checksumTermSql(col('t', 'datetime', 'datetime(6)'))).toBe("TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM `t`))");
    expect(checksumTermSql(col('t', 'timestamp', 'timestamp'))).toBe('`t`');
  });
  it('strings are utf8mb4 with their length in front; binary is hex; BIT is its integer', () => {
    expect(checksumTermSql(col('s', 'varchar', 'varchar(20)'))).toBe("CONCAT(CHAR_LENGTH(`s`), ':', CONVERT(`s` USING utf8mb4))");
    // ENUM index 0 (the error value a non-strict session stores) reads as '' like a member '' would.
    expect(checksumTermSql(col('e', 'enum', "enum('a','b')"))).toBe("IF(`e` + 0 = 0, '!', CONCAT(CHAR_LENGTH(`e`), ':', CONVERT(`e` USING utf8mb4)))");
    expect(checksumTermSql(col('b', 'varbinary', 'varbinary(8)'))).toBe('HEX(`b`)');
    expect(checksumTermSql(col('x', 'bit', 'bit(64)'))).toBe('CAST(`x` AS UNSIGNED)');
  });
  it('large values are hashed one by one: BLOB and spatial bytes as stored, TEXT and JSON as utf8mb4 text', () => {
    expect(checksumTermSql(col('b', 'longblob'))).toBe('SHA2(`b`, 256)');
    expect(checksumTermSql(col('g', 'geometry'))).toBe('SHA2(`g`, 256)');
    expect(checksumTermSql(col('t', 'mediumtext'))).toBe('SHA2(CONVERT(`t` USING utf8mb4), 256)');
    // MySQL JSON: its text plus the scalars whose type the text loses (the walk itself: json-types.ts).
    expect(checksumTermSql(col('j', 'json', 'json', true))).toBe(`SHA2(CONCAT(CONVERT(\`j\` USING utf8mb4), IFNULL(CONCAT(' /* ', ${jsonTypeSignatureSql('j')}, ' */'), '')), 256)`);
    expect(jsonTypeSignatureSql('j')).toContain("WHERE JSON_TYPE(_lww_jv) NOT IN ('OBJECT', 'ARRAY', 'BOOLEAN', 'NULL', 'INTEGER', 'DOUBLE', 'STRING')");
    expect(checksumTermSql(col('j', 'longtext', 'longtext', true))).toBe('SHA2(CONVERT(`j` USING utf8mb4), 256)');
  });
  it('a row is one term per column, NULL as N, joined by # with CONCAT so a failed term makes the digest NULL', () => {
    expect(rowTextSql([col('id', 'int'), col('s', 'text')])).toBe(
      "CONCAT(IF(`id` IS NULL, 'N', `id`), '#', IF(`s` IS NULL, 'N', SHA2(CONVERT(`s` USING utf8mb4), 256)))",
    );
  });
  it('a row read shows each column as exact text: large values whole up to 4 KiB, else their digest; spatial values with SRID', () => {
    expect(readTermSql(col('f', 'float'))).toBe('CAST(CAST(`f` AS DOUBLE) AS CHAR)');
    expect(readTermSql(col('d', 'double'))).toBe('CAST(`d` AS CHAR)');
    expect(readTermSql(col('s', 'varchar', 'varchar(20)'))).toBe('CONVERT(`s` USING utf8mb4)');
    expect(readTermSql(col('b', 'varbinary', 'varbinary(8)'))).toBe("CONCAT('0x', HEX(`b`))");
    expect(readTermSql(col('b', 'blob'))).toBe(
      "IF(LENGTH(`b`) <= 4096, CONCAT('0x', HEX(`b`)), CONCAT('sha256:', SHA2(`b`, 256), ' (', LENGTH(`b`), ' bytes)'))",
    );
    expect(readTermSql(col('g', 'point'))).toBe(
      "IF(LENGTH(`g`) <= 4096, CONCAT('SRID ', ST_SRID(`g`), ' 0x', HEX(SUBSTRING(`g`, 5))), CONCAT('sha256:', SHA2(`g`, 256), ' (', LENGTH(`g`), ' bytes)'))",
    );
  });
  it('reads the fraction digits of decimal and temporal types', () => {
    expect(fractionDigits('decimal(10,2)')).toBe(2);
    expect(fractionDigits('decimal(10,2) unsigned')).toBe(2);
    expect(fractionDigits('datetime(6)')).toBe(6);
    expect(fractionDigits('time')).toBe(0);
    expect(fractionDigits('decimal(10,0)')).toBe(0);
  });
});

describe('key ranges', () => {
  it('a single-column key compares directly', () => {
    expect(keyRangeWhere(single.key, { lower: true, upper: true })).toBe(' WHERE `id` > ? AND `id` <= ?');
    expect(keyRangeWhere(single.key, { lower: false, upper: false })).toBe('');
  });
  it('a composite key expands the row comparison into a disjunction of prefixes, with typed placeholders', () => {
    expect(keyRangeWhere(composite.key, { lower: true, upper: false })).toBe(
      ' WHERE ((`a` > ?) OR (`a` = ? AND `b` > ?) OR (`a` = ? AND `b` = ? AND `c` > CAST(? AS DECIMAL(10,2))))',
    );
    expect(keyRangeWhere(composite.key, { lower: false, upper: true })).toBe(
      ' WHERE ((`a` < ?) OR (`a` = ? AND `b` < ?) OR (`a` = ? AND `b` = ? AND `c` <= CAST(? AS DECIMAL(10,2))))',
    );
    expect(keyRangeParams([1, 'x', '2.5'], [3, 'y', '4.5'])).toEqual([1, 1, 'x', 1, 'x', '2.5', 3, 3, 'y', 3, 'y', '4.5']);
    expect(keyRangeParams(undefined, [7])).toEqual([7]);
  });
  it('floating-point keys compare against their own type', () => {
    expect(keyPlaceholder({ name: 'f', dataType: 'float', columnType: 'float' })).toBe('CAST(? AS FLOAT)');
    expect(keyPlaceholder({ name: 'd', dataType: 'double', columnType: 'double' })).toBe('CAST(? AS DOUBLE)');
    expect(keyPlaceholder({ name: 'i', dataType: 'bigint', columnType: 'bigint unsigned' })).toBe('?');
  });
});

describe('chunk statements', () => {
  it('a boundary is the n-th key after the lower bound, through the primary key', () => {
    expect(chunkBoundarySql(single, { lower: true, upper: false })).toBe('SELECT `id` AS _lww_p0 FROM `db`.`t` FORCE INDEX (PRIMARY) WHERE `id` > ? ORDER BY `id` LIMIT 1 OFFSET ?');
    expect(chunkBoundarySql(single, { lower: false, upper: false })).toBe('SELECT `id` AS _lww_p0 FROM `db`.`t` FORCE INDEX (PRIMARY) ORDER BY `id` LIMIT 1 OFFSET ?');
  });
  it('rows shown under an equal or newer tombstone come from joining the tombstone range with the table', () => {
    expect(coveredRowsSql(single, { schema: 'db', table: 'x' }, 'v', { lower: true, upper: false })).toBe(
      'SELECT t.`id` AS _lww_p0 FROM `db`.`t` AS t FORCE INDEX (PRIMARY) JOIN `db`.`x` AS d ON d.`id` = t.`id` WHERE t.`id` > ? AND d.`v` <= t.`v`',
    );
  });
  it('the checksum is COUNT(*), the XOR of two 64-bit words of each row digest, and the rows that could not be hashed', () => {
    const text = "CONCAT(IF(`id` IS NULL, 'N', `id`), '#', IF(`_lww_ts` IS NULL, 'N', `_lww_ts`))";
    expect(chunkChecksumSql(single, [col('id', 'int'), col('_lww_ts', 'bigint')], { lower: true, upper: true })).toBe(
      'SELECT /*+ NO_MERGE(_lww_digests) */ COUNT(*) AS row_count, BIT_XOR(CAST(CONV(SUBSTRING(_lww_digest, 1, 16), 16, 10) AS UNSIGNED)) AS hash_hi,' +
        ' BIT_XOR(CAST(CONV(SUBSTRING(_lww_digest, 17, 16), 16, 10) AS UNSIGNED)) AS hash_lo, COUNT(*) - COUNT(_lww_digest) AS unhashable' +
        ` FROM (SELECT SHA2(${text}, 256) AS _lww_digest FROM \`db\`.\`t\` FORCE INDEX (PRIMARY) WHERE \`id\` > ? AND \`id\` <= ?) AS _lww_digests`,
    );
  });
  it('rows are read by range in key order, or by key: the key exactly, each column as its read term, the version', () => {
    const floatKey = { schema: 'db', table: 't', key: [{ name: 'f', dataType: 'float', columnType: 'float' }] };
    expect(chunkRowsSql(floatKey, [col('f', 'float'), col('v', 'varchar')], '_lww_ts', { lower: false, upper: true })).toBe(
      'SELECT CAST(CAST(`f` AS DOUBLE) AS CHAR) AS _lww_p0, CAST(CAST(`f` AS DOUBLE) AS CHAR) AS _lww_t0, CONVERT(`v` USING utf8mb4) AS _lww_t1, `_lww_ts` AS _lww_v' +
        ' FROM `db`.`t` FORCE INDEX (PRIMARY) WHERE `f` <= CAST(? AS FLOAT) ORDER BY `f`',
    );
    expect(termRowsByKeySql(single, [col('id', 'int')], 'v', 2)).toBe('SELECT `id` AS _lww_p0, `id` AS _lww_t0, `v` AS _lww_v FROM `db`.`t` WHERE `id` IN (?, ?)');
    // One SELECT per asked key, tagged with its position: a stored row answers every spelling asked.
    expect(termRowsForEachKeySql(single, [col('id', 'int')], 'v', 2)).toBe(
      'SELECT 0 AS _lww_asked, `id` AS _lww_p0, `id` AS _lww_t0, `v` AS _lww_v FROM `db`.`t` WHERE `id` IN (?)' +
        ' UNION ALL SELECT 1 AS _lww_asked, `id` AS _lww_p0, `id` AS _lww_t0, `v` AS _lww_v FROM `db`.`t` WHERE `id` IN (?)',
    );
    expect(rowsByKeySql(single, ['id', 'v'], 3)).toBe('SELECT `id`, `v` FROM `db`.`t` WHERE `id` IN (?, ?, ?)');
    expect(rowsByKeySql({ ...composite, key: composite.key.slice(0, 2) }, ['a', 'b'], 2)).toBe(
      'SELECT `a`, `b` FROM `db`.`t` WHERE (`a` = ? AND `b` = ?) OR (`a` = ? AND `b` = ?)',
    );
  });
  it('the registered tables come from the metadata schema', () => {
    expect(registeredTablesSql('lww meta')).toBe(
      'SELECT schema_name AS schemaName, table_name AS tableName, tombstone_table AS tombstoneTable, version_column AS versionColumn FROM `lww meta`.`tables` ORDER BY schema_name, table_name',
    );
  });
});
