// The LWW-vs-REPLACE comparison from code: the same seeded hot-key workload with a network-loss
// fault, run on fresh local servers once with LWW and once with REPLACE INTO.
//   npx tsx examples/compare-programmatically.ts [mysql|mariadb] [seconds]
import { compareModes, formatComparison, parseFault } from '../src/index.ts';

export async function main(engine: 'mysql' | 'mariadb', seconds: number) {
  const comparison = await compareModes({
    engine,
    workload: { kind: 'hot_keys', schema: 'example_cmp', tables: 1, rowsPerTable: 50, threads: 4, durationMs: seconds * 1000, seed: 3, hotKeys: 8 },
    faults: [parseFault(`net:n1@${Math.max(1, Math.floor(seconds / 3))}s/1s`)],
  });
  return comparison;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const engine = process.argv[2] === 'mariadb' ? 'mariadb' : 'mysql';
  const c = await main(engine, Number(process.argv[3] ?? 10));
  console.log(formatComparison(c.rows));
}
