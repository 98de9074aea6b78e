// Claims of secondary UNIQUE values: which changes release a value (read from before images), and
// the statements over a claim table.
import { describe, expect, it } from 'vitest';
import { InvalidChangeError } from '../../src/errors.ts';
import { parseSourceTransaction } from '../../src/model/change.ts';
import type { TableMeta } from '../../src/model/table.ts';
import { beatenByClaims, heldBelowClaims, upsertClaims } from '../../src/sql/claims.ts';
import { coalesce } from '../../src/writer/coalesce.ts';
import { prepareTransaction } from '../../src/writer/prepare.ts';

const meta: TableMeta = {
  schema: 'db',
  table: 't',
  columns: [
    { name: 'id', dataType: 'int', columnType: 'int', nullable: false, generated: false, charset: null, collation: null },
    { name: 'u', dataType: 'varchar', columnType: 'varchar(10)', nullable: true, generated: false, charset: 'utf8mb4', collation: 'utf8mb4_general_ci' },
    { name: 'n', dataType: 'int', columnType: 'int', nullable: true, generated: false, charset: null, collation: null },
    { name: '_lww_ts', dataType: 'bigint', columnType: 'bigint unsigned', nullable: false, generated: false, charset: null, collation: null },
  ],
  primaryKey: ['id'],
  uniqueKeys: { uq: ['u'] },
  versionColumn: '_lww_ts',
  writableColumns: ['id', 'u', 'n', '_lww_ts'],
  tombstoneTable: 'tomb__db__t',
  claims: [{ index: 'uq', table: 'claim__db__t__uq', columns: ['u'] }],
};

const releases = (changes: unknown[]) =>
  prepareTransaction(parseSourceTransaction({ sourceId: 's', position: 'p', changes }), () => meta).ops.flatMap((op) => (op.releases ?? []).map((r) => ({ values: r.values, owner: r.owner, version: r.version })));

describe('values a change gives up', () => {
  const before = { id: 1, u: 'x', n: 1, _lww_ts: '1000' };
  it('an update off the value and a delete release it at the before image version; keeping the value releases nothing', () => {
    expect(releases([{ schema: 'db', table: 't', op: 'update', before, after: { id: 1, u: 'y', n: 1 }, version: '2000' }])).toEqual([{ values: ['x'], owner: ['1'], version: 1000n }]);
    expect(releases([{ schema: 'db', table: 't', op: 'delete', before, version: '2000' }])).toEqual([{ values: ['x'], owner: ['1'], version: 1000n }]);
    expect(releases([{ schema: 'db', table: 't', op: 'update', before, after: { id: 1, u: 'x', n: 2 }, version: '2000' }])).toEqual([]);
    // A case-only change is still the same value for the index: the row keeps holding it, and its
    // own claim displaces nothing (owner), so recording it is harmless and needs no server round trip.
    expect(releases([{ schema: 'db', table: 't', op: 'update', before, after: { id: 1, u: 'X', n: 1 }, version: '2000' }])).toHaveLength(1);
  });
  it('a NULL value, an insert, or a before image without the version releases nothing', () => {
    expect(releases([{ schema: 'db', table: 't', op: 'delete', before: { ...before, u: null }, version: '2000' }])).toEqual([]);
    expect(releases([{ schema: 'db', table: 't', op: 'insert', after: { id: 1, u: 'x', n: 1 }, version: '2000' }])).toEqual([]);
    expect(releases([{ schema: 'db', table: 't', op: 'delete', before: { id: 1, u: 'x' }, version: '2000' }])).toEqual([]);
    expect(releases([{ schema: 'db', table: 't', op: 'update', after: { id: 1, u: 'y', n: 1 }, version: '2000' }])).toEqual([]);
  });
  it('a before image version that is not a version is refused, naming the field', () => {
    expect(() => releases([{ schema: 'db', table: 't', op: 'delete', before: { ...before, _lww_ts: 'soon' }, version: '2000' }])).toThrow(InvalidChangeError);
    expect(() => releases([{ schema: 'db', table: 't', op: 'delete', before: { ...before, _lww_ts: 'soon' }, version: '2000' }])).toThrow(/before\._lww_ts/);
  });
  it('coalescing keeps every release of the batch, also when the key itself coalesces to its last write', () => {
    const prepared = prepareTransaction(
      parseSourceTransaction({
        sourceId: 's',
        position: 'p',
        changes: [
          { schema: 'db', table: 't', op: 'insert', after: { id: 1, u: 'x', n: 1 }, version: '1000' },
          { schema: 'db', table: 't', op: 'update', before, after: { id: 1, u: 'y', n: 1 }, version: '2000' },
          { schema: 'db', table: 't', op: 'update', before: { id: 1, u: 'y', n: 1, _lww_ts: '2000' }, after: { id: 1, u: 'z', n: 1 }, version: '3000' },
        ],
      }),
      () => meta,
    );
    const [plan] = coalesce(prepared.ops);
    expect(plan!.keys.size).toBe(1);
    expect(plan!.releases.map((r) => [r.values[0], r.version])).toEqual([
      ['x', 1000n],
      ['y', 2000n],
    ]);
  });
});

describe('claim statements', () => {
  const shape = { schema: 'db', table: 't', columns: meta.writableColumns, primaryKey: ['id'], versionColumn: '_lww_ts', keyPlaceholders: ['CAST(? AS SIGNED)'] };
  const claim = { metaSchema: 'lww_meta', claimTable: 'claim__db__t__uq', columns: ['u'], placeholders: ['CAST(? AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_general_ci'] };
  const rows = [
    { values: ['x'], owner: [1], version: 1000n },
    { values: ['y'], owner: [2], version: 18446744073709551615n },
  ];
  it('records claims keeping the highest version and its owner (owner assigned before the version)', () => {
    const st = upsertClaims(shape, claim, rows, 'mysql');
    expect(st.sql).toContain('INSERT INTO `lww_meta`.`claim__db__t__uq` (`u`, `_lww_owner0`, `_lww_claimed_at`) VALUES');
    expect(st.sql.indexOf('`_lww_owner0` = IF(')).toBeLessThan(st.sql.indexOf('`_lww_claimed_at` = GREATEST('));
    expect(st.values).toEqual(['x', 1, '1000', 'y', 2, '18446744073709551615']);
    expect(upsertClaims(shape, claim, rows, 'mariadb').sql).toContain('VALUES(`_lww_claimed_at`)');
  });
  it('selects holders below a claim other than its owner, and incoming rows a claim beats, by server comparison', () => {
    const where = heldBelowClaims(shape, claim, rows);
    expect(where.sql.split(' OR ')).toHaveLength(2);
    expect(where.sql).toContain('`u` = ? AND `_lww_ts` < CAST(? AS DECIMAL(20,0)) AND NOT (`id` = CAST(? AS SIGNED))');
    expect(where.values).toEqual(['x', '1000', 1, 'y', '18446744073709551615', 2]);
    const beaten = beatenByClaims(shape, claim, rows);
    expect(beaten.sql).toContain('> `_lww_new`.`_lww_v` AND NOT (`lww_meta`.`claim__db__t__uq`.`_lww_owner0` = `_lww_new`.`_lww_k0`) LOCK IN SHARE MODE');
    expect(beaten.values).toEqual(['0', 'x', 1, '1000', '1', 'y', 2, '18446744073709551615']);
    expect(() => heldBelowClaims(shape, claim, [{ values: ['x', 'y'], owner: [1], version: 1n }])).toThrow(/binds 1 and 1/);
  });
  it('leaves spared keys out of the holders (rows the batch writes again newer)', () => {
    const where = heldBelowClaims(shape, claim, rows, [[7], [8]]);
    expect(where.sql).toMatch(/^\(.+ OR .+\) AND NOT \(\(`id` = CAST\(\? AS SIGNED\)\) OR \(`id` = CAST\(\? AS SIGNED\)\)\)$/);
    expect(where.values).toEqual(['x', '1000', 1, 'y', '18446744073709551615', 2, 7, 8]);
    expect(() => heldBelowClaims(shape, claim, rows, [[7, 8]])).toThrow(/spared key has 2 values/);
  });
});
