// Initial-copy throughput: the same rows copied from one server to an empty table on another
//   1. by the initial copy (src/sync/initial-copy.ts: keyset chunks through the LWW sink),
//   2. by a plain copy: the same keyset reads, written with multi-row REPLACE INTO (no LWW),
//   3. by the initial copy again into the now full table (every row stale: the merge case).
// Prints rows/s and the ratio copy / REPLACE measured in this run (machines here are noisy).
//   npx tsx scripts/bench-copy.ts [--engine mysql|mariadb] [--rows 200000] [--chunk-rows 2000] [--apply-workers 1,4]
import { parseArgs } from 'node:util';
import type { Connection } from 'mysql2/promise';
import { connect } from '../src/db/connection.ts';
import { install } from '../src/install/install.ts';
import { startServers } from '../src/servers/index.ts';
import { replaceRows } from '../src/sql/dml.ts';
import { quoteIdent } from '../src/sql/quote.ts';
import { copyTables } from '../src/sync/initial-copy.ts';
import { readChunks } from '../src/sync/table-reader.ts';
import { createSink } from '../src/writer/sink.ts';
import { enterApplySessionSql } from '../src/sql/install.ts';

const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'mysql' },
    rows: { type: 'string', default: '200000' },
    'chunk-rows': { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    /** The sink's apply workers; a list runs the first two copies once per count. */
    'apply-workers': { type: 'string', default: '1' },
  },
});
const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const ROWS = Number(values.rows);
const CHUNK = Number(values['chunk-rows']);
const ROUNDS = Math.max(1, Number(values.rounds));
const APPLY_WORKERS = values['apply-workers'].split(',').map(Number);
const DB = 'bench_copy';
const COLUMNS = ['id', 'a', 'b', 'c', 'd', '_lww_ts'];
const DDL = `CREATE TABLE ${quoteIdent(DB)}.t (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, b VARCHAR(64) NOT NULL, c DOUBLE NOT NULL, d DATETIME(6) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)`;

async function freshTable(conn: Connection): Promise<void> {
  await conn.query(`DROP DATABASE IF EXISTS ${quoteIdent(DB)}`);
  await conn.query('DROP DATABASE IF EXISTS lww_meta');
  await conn.query(`CREATE DATABASE ${quoteIdent(DB)}`);
  await conn.query(DDL);
}

/** 1..max as a derived table of cross-joined digits (no temporary table, no recursion limit). */
function numbers(max: number): string {
  const digits = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
  const places = Math.max(1, Math.ceil(Math.log10(max + 1)));
  const terms = Array.from({ length: places }, (_, i) => `${10 ** i} * p${i}.d`);
  const from = Array.from({ length: places }, (_, i) => `${digits} p${i}`);
  return `(SELECT 1 + ${terms.join(' + ')} AS n FROM ${from.join(', ')}) s WHERE n <= ${Math.floor(max)}`;
}

/** Fills the source server-side with explicit versions; @lww_apply keeps the triggers from restamping them. */
async function fill(conn: Connection, rows: number): Promise<void> {
  await conn.query(enterApplySessionSql('lww_meta'));
  await conn.query(
    `INSERT INTO ${quoteIdent(DB)}.t (${COLUMNS.join(', ')})
     SELECT n, (n * 7919) % 1000003, CONCAT('value-', n, '-', HEX((n * 2654435761) % 4294967296)), n / 7, TIMESTAMP('2024-05-06 07:08:09.123456') + INTERVAL n SECOND,
            ((1700000000000000 + n) << 10) | 1
     FROM ${numbers(rows)}`,
  );
  await conn.query('SET @lww_apply = NULL');
}

async function lwwCopy(source: string, target: string, compareTarget: boolean, applyWorkers = 1): Promise<number> {
  const sink = createSink({ target, batch: { maxDelayMs: 5 }, owner: 'bench', applyWorkers });
  const start = process.hrtime.bigint();
  const report = await copyTables({
    sourceUrl: source,
    tables: [`${DB}.t`],
    sink,
    sourceId: `bench-${Date.now()}`,
    metaSchema: 'lww_meta',
    versionColumn: '_lww_ts',
    chunkRows: CHUNK,
    compareTarget,
  });
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  await sink.close();
  if (report.rowsCopied !== ROWS) throw new Error(`copied ${report.rowsCopied} rows, expected ${ROWS}`);
  return ROWS / secs;
}

async function replaceCopy(source: string, target: string): Promise<number> {
  const src = await connect(source);
  const dst = await connect(target);
  await dst.query(enterApplySessionSql('lww_meta'));
  const shape = { schema: DB, table: 't', columns: COLUMNS, primaryKey: ['id'], versionColumn: '_lww_ts', keyPlaceholders: ['?'] };
  const perStatement = 1000;
  let n = 0;
  const start = process.hrtime.bigint();
  for await (const rows of readChunks(src, { schema: DB, table: 't', columns: COLUMNS, key: ['id'] }, { chunkRows: CHUNK })) {
    for (let i = 0; i < rows.length; i += perStatement) {
      const part = rows.slice(i, i + perStatement);
      const stmt = replaceRows(
        shape,
        part.map((r) => COLUMNS.map((c) => r[c] as string | number)),
      );
      await dst.execute(stmt.sql, stmt.values);
    }
    n += rows.length;
  }
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  await src.end();
  await dst.end();
  if (n !== ROWS) throw new Error(`REPLACE copied ${n} rows, expected ${ROWS}`);
  return ROWS / secs;
}

const [a, b] = await startServers({ engine, count: 2 });
const conns: Connection[] = [];
try {
  for (const [i, s] of [a!, b!].entries()) {
    const c = await connect(s.url);
    conns.push(c);
    await freshTable(c);
    await install({ url: s.url, nodeId: i + 1, tables: [`${DB}.t`] });
  }
  const t0 = Date.now();
  await fill(conns[0]!, ROWS);
  console.log(`bench:copy on ${engine}: ${ROWS} rows generated in ${((Date.now() - t0) / 1000).toFixed(1)}s, chunks of ${CHUNK}, ${ROUNDS} rounds`);
  const truncate = () => conns[1]!.query(`TRUNCATE TABLE ${quoteIdent(DB)}.t`);
  const runs: Record<string, number[]> = {};
  const record = (run: string, rate: number) => {
    runs[run] ??= [];
    runs[run].push(rate);
  };
  // Rounds interleave the variants so a noisy neighbour hurts them alike; the median is reported.
  for (let round = 0; round < ROUNDS; round++) {
    await truncate();
    record('plain copy, multi-row REPLACE INTO', await replaceCopy(a!.url, b!.url));
    for (const n of APPLY_WORKERS) {
      const workers = APPLY_WORKERS.length > 1 ? `, ${n} apply worker(s)` : '';
      await truncate();
      record(`initial copy into an empty table${workers}`, await lwwCopy(a!.url, b!.url, true, n));
      record(`initial copy into a table holding every row${workers}`, await lwwCopy(a!.url, b!.url, true, n));
    }
    await truncate();
    record('same, without target lookups: into an empty table', await lwwCopy(a!.url, b!.url, false));
    record('same, without target lookups: every row stale', await lwwCopy(a!.url, b!.url, false));
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const replace = median(runs['plain copy, multi-row REPLACE INTO']!);
  console.table(
    Object.entries(runs).map(([run, rates]) => ({
      run,
      'rows/s (median)': Math.round(median(rates)),
      'vs REPLACE': Number((median(rates) / replace).toFixed(2)),
      'all runs': rates.map((r) => Math.round(r)).join(' '),
    })),
  );
} finally {
  for (const c of conns) await c.end();
  await Promise.all([a, b].map((s) => s?.destroy()));
}
