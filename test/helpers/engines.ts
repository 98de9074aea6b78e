// Runs a describe block once per engine with real servers started for it.
//
//   describeEachEngine('applies an upsert', 2, (ctx) => {
//     it('...', async () => { const [a, b] = ctx.servers; ... });
//   });
//
// LWW_ENGINES=mysql (or mariadb) restricts the engines; servers are destroyed even when tests fail.
import { afterAll, beforeAll, describe } from 'vitest';
import { type Engine, type RunningServer, type StartOptions, startServers } from '../../src/servers/index.ts';

export interface EngineContext {
  engine: Engine;
  /** Filled in beforeAll: read it inside tests and hooks, not while the describe body runs. */
  servers: RunningServer[];
}

const ALL_ENGINES: Engine[] = ['mysql', 'mariadb'];

export function enginesUnderTest(): Engine[] {
  const wanted = (process.env.LWW_ENGINES ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (wanted.length === 0) return ALL_ENGINES;
  const unknown = wanted.filter((e) => !(ALL_ENGINES as string[]).includes(e));
  if (unknown.length > 0) throw new Error(`LWW_ENGINES may name ${ALL_ENGINES.join(', ')} (got ${unknown.join(', ')})`);
  return ALL_ENGINES.filter((e) => wanted.includes(e));
}

export function describeEachEngine(
  title: string,
  servers: number | Omit<StartOptions, 'engine'>,
  fn: (ctx: EngineContext) => void,
): void {
  const options = typeof servers === 'number' ? { count: servers } : servers;
  for (const engine of enginesUnderTest()) {
    describe(`${title} [${engine}]`, () => {
      const ctx: EngineContext = { engine, servers: [] };
      beforeAll(async () => {
        ctx.servers.push(...(await startServers({ ...options, engine })));
      });
      afterAll(async () => {
        await Promise.all(ctx.servers.map((s) => s.destroy()));
      });
      fn(ctx);
    });
  }
}
