import { describe, expect, it } from 'vitest';
import {
  chunkBoundarySql,
  chunkChecksumSql,
  chunkRowsSql,
  fractionDigits,
  keyPlaceholder,
  keyRangeParams,
  keyRangeWhere,
  normalizedColumnSql,
  registeredTablesSql,
  rowsByKeySql,
  rowTextSql,
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
const plain = { jsonNormalize: false };

describe('normalized column text', () => {
  it('integers, floats and dates are the server text', () => {
    expect(normalizedColumnSql(col('n', 'bigint', 'bigint unsigned'), plain)).toBe('`n`');
    expect(normalizedColumnSql(col('f', 'double'), plain)).toBe('`f`');
    expect(normalizedColumnSql(col('d', 'date'), plain)).toBe('`d`');
    expect(normalizedColumnSql(col('y', 'year', 'year(4)'), plain)).toBe('`y`');
  });
  it('DECIMAL and fractional temporals lose trailing fraction zeros, only when they have a fraction', () => {
    expect(normalizedColumnSql(col('m', 'decimal', 'decimal(10,2)'), plain)).toBe("TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM `m`))");
    expect(normalizedColumnSql(col('m', 'decimal', 'decimal(10,0)'), plain)).toBe('`m`');
    expect(normalizedColumnSql(col('t', 'datetime', 'datetime(6)'), plain)).toBe("TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM `t`))");
    expect(normalizedColumnSql(col('t', 'timestamp', 'timestamp'), plain)).toBe('`t`');
  });
  it('strings are utf8mb4 with their length in front; binary is hex; BIT is its integer', () => {
    expect(normalizedColumnSql(col('s', 'varchar', 'varchar(20)'), plain)).toBe("CONCAT(CHAR_LENGTH(`s`), ':', CONVERT(`s` USING utf8mb4))");
    expect(normalizedColumnSql(col('e', 'enum', "enum('a','b')"), plain)).toBe("CONCAT(CHAR_LENGTH(`e`), ':', CONVERT(`e` USING utf8mb4))");
    expect(normalizedColumnSql(col('b', 'varbinary', 'varbinary(8)'), plain)).toBe('HEX(`b`)');
    expect(normalizedColumnSql(col('g', 'geometry'), plain)).toBe('HEX(`g`)');
    expect(normalizedColumnSql(col('x', 'bit', 'bit(64)'), plain)).toBe('CAST(`x` AS UNSIGNED)');
  });
  it('JSON is the stored text on MySQL and JSON_NORMALIZE on MariaDB', () => {
    expect(normalizedColumnSql(col('j', 'json', 'json', true), plain)).toBe("CONCAT(CHAR_LENGTH(`j`), ':', CONVERT(`j` USING utf8mb4))");
    expect(normalizedColumnSql(col('j', 'longtext', 'longtext', true), { jsonNormalize: true })).toBe(
      "CONCAT(CHAR_LENGTH(JSON_NORMALIZE(`j`)), ':', JSON_NORMALIZE(`j`))",
    );
  });
  it('a row is one term per column, NULL as N, joined by #', () => {
    expect(rowTextSql([col('id', 'int'), col('s', 'text')], plain)).toBe(
      "CONCAT_WS('#', COALESCE(`id`, 'N'), COALESCE(CONCAT(CHAR_LENGTH(`s`), ':', CONVERT(`s` USING utf8mb4)), 'N'))",
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
    expect(chunkBoundarySql(single, { lower: true, upper: false })).toBe('SELECT `id` FROM `db`.`t` FORCE INDEX (PRIMARY) WHERE `id` > ? ORDER BY `id` LIMIT 1 OFFSET ?');
    expect(chunkBoundarySql(single, { lower: false, upper: false })).toBe('SELECT `id` FROM `db`.`t` FORCE INDEX (PRIMARY) ORDER BY `id` LIMIT 1 OFFSET ?');
  });
  it('the checksum is COUNT(*) and the XOR of two 64-bit words of each row digest', () => {
    const text = "CONCAT_WS('#', COALESCE(`id`, 'N'), COALESCE(`_lww_ts`, 'N'))";
    expect(chunkChecksumSql(single, [col('id', 'int'), col('_lww_ts', 'bigint')], { lower: true, upper: true }, plain)).toBe(
      'SELECT /*+ NO_MERGE(_lww_digests) */ COUNT(*) AS row_count, BIT_XOR(CAST(CONV(SUBSTRING(_lww_digest, 1, 16), 16, 10) AS UNSIGNED)) AS hash_hi,' +
        ' BIT_XOR(CAST(CONV(SUBSTRING(_lww_digest, 17, 16), 16, 10) AS UNSIGNED)) AS hash_lo' +
        ` FROM (SELECT SHA2(${text}, 256) AS _lww_digest FROM \`db\`.\`t\` FORCE INDEX (PRIMARY) WHERE \`id\` > ? AND \`id\` <= ?) AS _lww_digests`,
    );
  });
  it('rows are read by range in key order, or by key', () => {
    expect(chunkRowsSql(single, ['id', 'v'], { lower: false, upper: true })).toBe('SELECT `id`, `v` FROM `db`.`t` FORCE INDEX (PRIMARY) WHERE `id` <= ? ORDER BY `id`');
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
