import { describe, expect, it } from 'vitest';
import { resolvedReasons } from '../../src/checker/audit.ts';

describe('the conflict-log reasons the history audit reads per written version', () => {
  it('keeps every reason logged at one version of a table (rows of one multi-row write share it)', () => {
    const reasons = resolvedReasons([
      { schema: 's', table: 'g2', reason: 'unique key clash: removed (u) by a newer row', version: 7n },
      { schema: 's', table: 'g2', reason: 'foreign key set null: fk_g2_g1 (p) named a deleted parent', version: 7n },
      { schema: 's', table: 'g1', reason: 'foreign key cascade: removed with its parent', version: 7n },
    ]);
    expect(reasons('s.g2', 7n)).toEqual(['unique key clash: removed (u) by a newer row', 'foreign key set null: fk_g2_g1 (p) named a deleted parent']);
    expect(reasons('s.g1', 7n)).toEqual(['foreign key cascade: removed with its parent']);
    expect(reasons('s.g2', 8n)).toEqual([]);
  });
});
