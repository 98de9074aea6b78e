// State-check speed: two fresh servers with the same N rows, then one timed checkState between them.
// Prints the seconds, the chunks compared and the rows fetched (0 when the servers are identical).
//   npx tsx scripts/bench-check.ts [--engine mysql|mariadb] [--rows 1000000] [--chunk-size 10000]
import { parseArgs } from 'node:util';
import { checkState } from '../src/checker/index.ts';
import { connect } from '../src/db/connection.ts';
import { startServers } from '../src/servers/index.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mysql' },
    rows: { type: 'string', default: '1000000' },
    'chunk-size': { type: 'string', default: '10000' },
  },
});
const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const ROWS = Number(values.rows);
const CHUNK = Number(values['chunk-size']);
if (!Number.isSafeInteger(ROWS) || ROWS < 1 || !Number.isSafeInteger(CHUNK) || CHUNK < 1) {
  console.error('--rows and --chunk-size must be positive integers');
  process.exit(2);
}

const DDL =
  'CREATE TABLE bench_check.t (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, b VARCHAR(64) NOT NULL, c DOUBLE NULL,' +
  ' d DATETIME(6) NOT NULL, e DECIMAL(12,3) NULL, j JSON NULL, _lww_ts BIGINT UNSIGNED NOT NULL)';

/** Rows 1..n generated on the server from a cross join of digits (no client round trips). */
function fillSql(n: number): string {
  const digits = Math.max(1, Math.ceil(Math.log10(n + 1)));
  const from = Array.from({ length: digits }, (_, i) => `d d${i}`).join(', ');
  const id = Array.from({ length: digits }, (_, i) => `${10 ** i} * d${i}.x`).join(' + ');
  return (
    'INSERT INTO bench_check.t WITH d AS (SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4' +
    ' UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9),' +
    ` n AS (SELECT 1 + ${id} AS id FROM ${from})` +
    " SELECT id, id * 7 % 1000, CONCAT('value-', id), id / 3, '2024-05-06 07:08:09.123456' + INTERVAL id SECOND, IF(id % 10 = 0, NULL, id / 8)," +
    ` IF(id % 3 = 0, JSON_OBJECT('id', id, 'tag', 'bench'), NULL), (id << 10) | 1 FROM n WHERE id <= ${n}`
  );
}

const servers = await startServers({ engine, count: 2 });
try {
  const fillStart = Date.now();
  await Promise.all(
    servers.map(async (s) => {
      const conn = await connect(s.url);
      try {
        await conn.query('DROP DATABASE IF EXISTS bench_check');
        await conn.query('CREATE DATABASE bench_check CHARACTER SET utf8mb4');
        await conn.query(DDL);
        await conn.query(fillSql(ROWS));
      } finally {
        await conn.end();
      }
    }),
  );
  console.log(`bench:check on ${engine}: ${ROWS} identical rows on 2 servers (filled in ${((Date.now() - fillStart) / 1000).toFixed(1)} s)`);
  const start = process.hrtime.bigint();
  const report = await checkState({ nodes: servers.map((s) => s.url), tables: ['bench_check.t'], chunkSize: CHUNK });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const t = report.tables[0]!;
  console.table([
    {
      rows: ROWS,
      'chunk size': CHUNK,
      seconds: Number(seconds.toFixed(2)),
      'rows/s': Math.round(ROWS / seconds),
      chunks: t.chunks,
      'chunks differing': t.chunksDiffering,
      'rows fetched': report.totals.rowsFetched,
      identical: report.identical,
    },
  ]);
} finally {
  await Promise.allSettled(servers.map((s) => s.destroy()));
}
