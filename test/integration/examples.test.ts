import { expect, it } from 'vitest';
import { main as customSource } from '../../examples/custom-source.ts';
import { describeEachEngine } from '../helpers/engines.ts';

describeEachEngine('examples', 1, (ctx) => {
  it('custom-source: a late older change is skipped and the checkpoint is the last position', async () => {
    const result = await customSource(ctx.servers[0]!.url);
    expect(result.rows).toEqual([{ sku: 'A1', name: 'Desk lamp', price: '24.90', _lww_ts: '3000' }]);
    expect(result.position).toBe('offset-3');
    expect(result.skippedStale).toBe(1);
  });
});
