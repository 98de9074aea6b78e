import { expect, it } from 'vitest';
import { main as compareExample } from '../../examples/compare-programmatically.ts';
import { main as customSource } from '../../examples/custom-source.ts';
import { main as replicateExample } from '../../examples/replicate-two-urls.ts';
import { describeEachEngine } from '../helpers/engines.ts';

describeEachEngine('examples', 2, (ctx) => {
  it('custom-source: a late older change is skipped and the checkpoint is the last position', async () => {
    const result = await customSource(ctx.servers[0]!.url);
    expect(result.rows).toEqual([{ sku: 'A1', name: 'Desk lamp', price: '24.90', _lww_ts: '3000' }]);
    expect(result.position).toBe('offset-3');
    expect(result.skippedStale).toBe(1);
  });

  it('replicate-two-urls: both sides converge, the later edit wins', async () => {
    const result = await replicateExample(ctx.servers[0]!.url, ctx.servers[1]!.url);
    expect(result.identical).toBe(true);
    expect(result.rows).toEqual([
      { id: 1, body: 'edited on B, later' },
      { id: 2, body: 'written on B' },
    ]);
  });

  it('compare-programmatically: LWW converges, REPLACE does not', async () => {
    const c = await compareExample(ctx.engine, 6);
    expect(c.lww.converged).toBe(true);
    expect(c.lww.expectationMismatches).toEqual([]);
    expect(c.replace.converged && c.replace.expectationMismatches.length === 0).toBe(false);
    expect(c.rows.find((r) => r.metric.startsWith('converged'))).toMatchObject({ lww: 'yes', replace: 'NO' });
  });
});
