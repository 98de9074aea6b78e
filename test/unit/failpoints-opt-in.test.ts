// Failpoints break replication on purpose: they are on only when asked for explicitly.
import { describe, expect, it } from 'vitest';
import { Failpoints } from '../../src/failpoints/failpoints.ts';
import { parseSinkOptions } from '../../src/writer/options.ts';

describe('failpoints from the environment', () => {
  it('ignores LWW_FAILPOINTS and GO_FAILPOINTS without LWW_FAILPOINTS_ENABLE=1', () => {
    for (const env of [{ LWW_FAILPOINTS: 'sinkDropMessage=return(true)' }, { GO_FAILPOINTS: 'sinkDropMessage=return(true)' }, { GO_FAILPOINTS: 'github.com/x/y=return(1)' }, { LWW_FAILPOINTS: 'sinkDropMessage=return(true)', LWW_FAILPOINTS_ENABLE: 'yes' }]) {
      const fp = Failpoints.fromEnv(env);
      expect(fp.enabled, JSON.stringify(env)).toBe(false);
      expect(fp.on('sinkDropMessage')).toBe(false);
    }
  });

  it('reads them with the opt-in', () => {
    const fp = Failpoints.fromEnv({ LWW_FAILPOINTS_ENABLE: '1', LWW_FAILPOINTS: 'sinkDropMessage=return(true);sinkMutateValue=3*return(true)' });
    expect(fp.on('sinkDropMessage')).toBe(true);
    expect(fp.list()).toEqual([
      { name: 'sinkDropMessage', spec: 'return(true)' },
      { name: 'sinkMutateValue', spec: '3*return(true)' },
    ]);
  });

  it('a sink built without the failpoints option warns for none; with them it warns at start naming them', () => {
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, error() {}, warn: (m: string, f?: Record<string, unknown>) => warnings.push(`${m} ${JSON.stringify(f)}`) };
    const saved = { ...process.env };
    try {
      process.env.LWW_FAILPOINTS = 'sinkDropMessage=return(true)';
      delete process.env.LWW_FAILPOINTS_ENABLE;
      expect(parseSinkOptions({ target: 'mysql://root@127.0.0.1:1/', logger }).failpoints.enabled).toBe(false);
      expect(warnings).toEqual([]);
      expect(parseSinkOptions({ target: 'mysql://root@127.0.0.1:1/', logger, failpoints: 'mysqlSinkBypassLWW=return(true)' }).failpoints.enabled).toBe(true);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain('mysqlSinkBypassLWW=return(true)');
    } finally {
      process.env = saved;
    }
  });
});
