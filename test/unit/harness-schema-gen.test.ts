import { describe, expect, it } from 'vitest';
import { generatedShapes, generateSchema, randomValue } from '../../src/harness/schema-gen.ts';
import { seededRandom } from '../../src/harness/random.ts';
import { createGeneratedTableSql } from '../../src/sql/generated.ts';

describe('generated schemas', () => {
  it('the same seed gives the same tables, another seed other ones', () => {
    const text = (seed: number) => generateSchema(seed).tables.map((t) => createGeneratedTableSql('s', t.name, t, '_lww_ts')).join('\n');
    expect(text(7)).toBe(text(7));
    expect(new Set([1, 2, 3, 4, 5].map(text)).size).toBeGreaterThan(3);
  });

  it('twenty seeds cover the grammar: temporal, decimal, collated and composite keys, UNIQUE, FKs, generated columns', () => {
    const shapes = Object.keys(generatedShapes(undefined, []));
    expect(shapes).toEqual([]);
    const all = new Set<string>();
    for (let seed = 100; seed < 120; seed++) for (const k of Object.keys(generatedShapes(seed, []))) all.add(k.replace(/\(.*\)/, ''));
    for (const shape of ['key:composite', 'key:int', 'key:bigint_u', 'key:varchar-ci', 'key:varchar-bin', 'key:datetime', 'key:timestamp', 'key:date', 'key:decimal', 'key:varbinary']) {
      expect(all).toContain(shape);
    }
    expect([...all].some((s) => s.startsWith('unique:'))).toBe(true);
    expect([...all].some((s) => s.startsWith('fk:on-delete-cascade'))).toBe(true);
    expect([...all].some((s) => s.startsWith('column:generated'))).toBe(true);
    expect([...all].some((s) => s.startsWith('column:json'))).toBe(true);
  });

  it('key pools hold spellings the collation or type holds equal (case, zero fraction, DECIMAL scale)', () => {
    const pools = [];
    for (let seed = 1; seed < 40; seed++) for (const t of generateSchema(seed).tables) pools.push(...t.keyPool.flat());
    expect(pools).toContain('alpha');
    expect(pools).toContain('ALPHA');
    expect(pools.some((v) => typeof v === 'string' && /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.0+$/.test(v))).toBe(true);
    expect(pools.some((v) => typeof v === 'string' && /^-?\d+\.50$/.test(v))).toBe(true);
    expect(pools.some((v) => typeof v === 'number' && !Number.isInteger(v))).toBe(true);
  });

  it('values fit their column types', () => {
    const random = seededRandom(3);
    for (let seed = 1; seed < 30; seed++) {
      for (const t of generateSchema(seed).tables) {
        for (const c of t.columns.filter((x) => !x.generated)) {
          for (let i = 0; i < 20; i++) {
            const v = randomValue(c, random);
            if (v === null) {
              expect(c.nullable).toBe(true);
              continue;
            }
            if (c.kind === 'varchar' || c.kind === 'char') expect([...String(v)].length).toBeLessThanOrEqual(c.length!);
            if (c.kind === 'json') expect(() => JSON.parse(String(v))).not.toThrow();
            if (c.kind === 'enum') expect(c.members).toContain(v);
            if (c.kind === 'bit') expect(Number(v)).toBeLessThan(2 ** c.bits!);
            if (c.kind === 'timestamp') expect(String(v).slice(0, 4) >= '2001' && String(v).slice(0, 4) <= '2030').toBe(true);
          }
        }
      }
    }
  });
});
