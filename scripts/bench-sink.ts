// Sink throughput: the same generated change set applied to a fresh table by the LWW sink, by the
// same sink in bypass mode (REPLACE INTO), and naively one autocommitted statement per row.
// Prints rows/s and ratios measured in this run (machines here are noisy: compare ratios).
//   npm run bench:sink -- [--engine mysql|mariadb] [--rows 20000]
import { parseArgs } from 'node:util';
import { connect } from '../src/db/connection.ts';
import { seededRandom } from '../src/harness/random.ts';
import { createSink, type SourceTransactionInput } from '../src/index.ts';
import { startServers } from '../src/servers/index.ts';
import { lwwUpsert } from '../src/sql/dml.ts';
import { shapesOf } from '../src/writer/apply.ts';
import { loadTableMeta } from '../src/writer/table-metadata.ts';
import { quoteIdent } from '../src/sql/quote.ts';

const { values } = parseArgs({ options: { engine: { type: 'string', default: 'mysql' }, rows: { type: 'string', default: '20000' } } });
const engine = values.engine === 'mariadb' ? 'mariadb' : 'mysql';
const ROWS = Number(values.rows);
const BATCH_SIZES = [1, 32, 256, 1024];

type Change = SourceTransactionInput['changes'][number];

function changeSet(db: string, n: number): Change[] {
  const random = seededRandom(42);
  const out: Change[] = [];
  let next = 1;
  for (let i = 0; i < n; i++) {
    const update = next > 100 && random() < 0.3;
    const id = update ? 1 + Math.floor(random() * (next - 1)) : next++;
    const after = { id, a: Math.floor(random() * 1e6), b: `value-${i}-${random().toString(36).slice(2)}`, c: random() * 1000, d: '2024-05-06 07:08:09.123456' };
    out.push({ schema: db, table: 't', op: update ? 'update' : 'insert', after, version: BigInt(1_000_000 + i) << 10n });
  }
  return out;
}

const [server] = await startServers({ engine, count: 1 });
const url = server!.url;
const admin = await connect(url);
let dbSeq = 0;
async function freshTable(): Promise<string> {
  const db = `bench_${++dbSeq}`;
  await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(db)}`);
  await admin.query(`CREATE DATABASE ${quoteIdent(db)}`);
  await admin.query(
    `CREATE TABLE ${quoteIdent(db)}.t (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, b VARCHAR(64) NOT NULL, c DOUBLE NOT NULL, d DATETIME(6) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)`,
  );
  return db;
}

async function viaSink(batch: number, bypass: boolean, n: number): Promise<number> {
  const db = await freshTable();
  const changes = changeSet(db, n);
  const sink = createSink({ target: url, batch: { maxRows: batch, maxDelayMs: 5 }, failpoints: bypass ? 'mysqlSinkBypassLWW=return(true)' : '' });
  // Warm-up outside the timing: metadata, tombstone table, checkpoint claim.
  await sink.write({ sourceId: 'bench', position: '0', changes: [] });
  await sink.flush();
  const start = process.hrtime.bigint();
  for (let i = 0; i < changes.length; i += 1) {
    await sink.write({ sourceId: 'bench', position: String(i + 1), changes: [changes[i]!] });
  }
  await sink.flush();
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  await sink.close();
  return n / secs;
}

async function naive(n: number): Promise<number> {
  const db = await freshTable();
  const changes = changeSet(db, n);
  const conn = await connect(url);
  const dialect = engine === 'mysql' ? 'mysql' : 'mariadb';
  const s = shapesOf(await loadTableMeta(conn, db, 't', '_lww_ts'), 'lww_meta');
  const start = process.hrtime.bigint();
  for (const c of changes) {
    const a = c.after as { id: number; a: number; b: string; c: number; d: string };
    const stmt = lwwUpsert(s.table, [[a.id, a.a, a.b, a.c, a.d, c.version.toString()]], dialect);
    await conn.execute(stmt.sql, stmt.values);
  }
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  await conn.end();
  return n / secs;
}

try {
  console.log(`bench:sink on ${engine} (${ROWS} changes per run, 30% updates)`);
  const naiveRate = await naive(Math.min(ROWS, 5000));
  const rows: Array<Record<string, string | number>> = [];
  for (const batch of BATCH_SIZES) {
    const n = batch === 1 ? Math.min(ROWS, 5000) : ROWS;
    const lww = await viaSink(batch, false, n);
    const replace = await viaSink(batch, true, n);
    rows.push({
      batch,
      'LWW rows/s': Math.round(lww),
      'REPLACE rows/s': Math.round(replace),
      'naive rows/s': Math.round(naiveRate),
      'LWW/REPLACE': Number((lww / replace).toFixed(2)),
      'LWW/naive': Number((lww / naiveRate).toFixed(2)),
    });
  }
  console.table(rows);
} finally {
  await admin.end();
  await server!.destroy();
}
