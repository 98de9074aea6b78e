// Parallel apply's checkpoints on a real server: a checkpoints table from before parallel apply is
// upgraded in place and keeps its position; each worker advances its own row; a source resumes from
// its lowest worker row, and the next sink sets every row back to it (for any worker count); a
// claim by a newer writer stops the older one's workers too.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { createSink, OwnershipLostError, type Sink, type SourceTransactionInput } from '../../src/index.ts';
import { freshDatabase, rowsOf } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const T = 'CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, email VARCHAR(40) NULL, n INT NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, UNIQUE KEY (email))';
type Change = SourceTransactionInput['changes'][number];
const v = (i: number) => (1n << 60n) + BigInt(i) * 1024n + 1n;
const ins = (id: number, n: number, version: bigint, email: string | null = null): Change => ({ schema: 'pw', table: 't', op: 'insert', after: { id, email, n }, version });

/** The checkpoints table as versions before parallel apply created it. */
const LEGACY_CHECKPOINTS = `CREATE TABLE {{meta}}.checkpoints (
  source_id VARCHAR(255) NOT NULL, position VARCHAR(4096) NOT NULL DEFAULT '', last_version BIGINT UNSIGNED NOT NULL DEFAULT 0,
  owner_epoch BIGINT UNSIGNED NOT NULL DEFAULT 0, owner VARCHAR(255) NOT NULL DEFAULT '', applied_batches BIGINT UNSIGNED NOT NULL DEFAULT 0,
  updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), source_time_us BIGINT UNSIGNED NULL,
  source_uuid VARCHAR(64) NULL, source_gtid_set TEXT NULL, source_head VARCHAR(4096) NULL, PRIMARY KEY (source_id)) ENGINE=InnoDB`;

describeEachEngine('parallel apply checkpoints', 1, (ctx) => {
  let url: string;
  let conn: Connection;
  const sinks: Sink[] = [];
  const sinkFor = (meta: string, applyWorkers: number) => {
    const s = createSink({ target: url, failpoints: '', metaSchema: meta, applyWorkers, batch: { maxRows: 16, maxDelayMs: 1 } });
    sinks.push(s);
    return s;
  };
  const workerRows = async (meta: string, sourceId: string) =>
    (await conn.query<RowDataPacket[]>(`SELECT worker, position, apply_seq, owner_epoch FROM ${meta}.checkpoints WHERE source_id = ? ORDER BY worker`, [sourceId]))[0].map(
      (r) => ({ worker: Number(r.worker), position: String(r.position), seq: Number(r.apply_seq), epoch: Number(r.owner_epoch) }),
    );

  beforeAll(async () => {
    url = ctx.servers[0]!.url;
    conn = await connect(url);
  });
  afterAll(async () => {
    for (const s of sinks) await s.abort();
    await conn?.end();
  });

  it('a checkpoint written before parallel apply keeps working: upgraded in place, resumed by 1 and by 4 workers', async () => {
    const meta = 'pw_meta_legacy';
    await freshDatabase(conn, meta, [LEGACY_CHECKPOINTS.replaceAll('{{meta}}', meta)]);
    await conn.query(`INSERT INTO ${meta}.checkpoints (source_id, position, last_version, owner_epoch, owner, source_time_us) VALUES ('node-1', 'binlog.000003:1534', 7, 3, 'old', 1000)`);
    await freshDatabase(conn, 'pw', [T]);

    const one = sinkFor(meta, 1);
    expect(await one.checkpoint('node-1')).toMatchObject({ position: 'binlog.000003:1534', ownerEpoch: 3n, sourceTimeUs: 1000n });
    await one.claim('node-1');
    await one.write({ sourceId: 'node-1', position: 'binlog.000003:2000', changes: [ins(1, 1, v(1))] });
    await one.close();
    expect(await workerRows(meta, 'node-1')).toEqual([{ worker: 0, position: 'binlog.000003:2000', seq: 1, epoch: 4 }]);

    const four = sinkFor(meta, 4);
    expect((await four.checkpoint('node-1'))?.position).toBe('binlog.000003:2000');
    await four.write({ sourceId: 'node-1', position: 'binlog.000003:3000', changes: Array.from({ length: 40 }, (_, i) => ins(10 + i, i, v(10 + i))) });
    await four.close();
    const rows = await workerRows(meta, 'node-1');
    expect(rows.map((r) => r.worker)).toEqual([0, 1, 2, 3]);
    // Every worker had rows of the one transaction, or was never advanced by this sink: all at its position.
    expect(rows.every((r) => r.position === 'binlog.000003:3000' && r.seq === 2 && r.epoch === 5)).toBe(true);
    expect((await rowsOf(conn, 'pw', 't', ['id'])).length).toBe(41);
  });

  it('workers at different checkpoints: the source resumes from the lowest, and the next sink sets every row back to it', async () => {
    const meta = 'pw_meta_spread';
    await conn.query(`DROP DATABASE IF EXISTS ${meta}`);
    await freshDatabase(conn, 'pw', [T]);
    const sink = sinkFor(meta, 4);
    // Transaction 1 touches every worker; later ones one key each (idle workers skip their rows for a second).
    await sink.write({ sourceId: 's', position: 'p01', changes: Array.from({ length: 40 }, (_, i) => ins(100 + i, 0, v(100 + i))) });
    await sink.flush();
    for (let i = 2; i <= 6; i++) {
      await sink.write({ sourceId: 's', position: `p0${i}`, changes: [ins(100, i, v(200 + i))] });
      await sink.flush();
    }
    await sink.abort();
    const spread = await workerRows(meta, 's');
    expect(spread.length).toBe(4);
    expect(new Set(spread.map((r) => r.position)).size).toBeGreaterThan(1);
    expect(spread.some((r) => r.position === 'p06')).toBe(true);
    expect(spread.some((r) => r.position === 'p01' && r.seq === 1)).toBe(true);

    // A source resumes from the lowest row; with 2 workers now, rows 2 and 3 go and rows 0 and 1 agree.
    const next = sinkFor(meta, 2);
    expect((await next.checkpoint('s'))?.position).toBe('p01');
    await next.write({ sourceId: 's', position: 'p02', changes: [] });
    await next.flush();
    expect((await workerRows(meta, 's')).map((r) => [r.worker, r.position, r.seq])).toEqual([
      [0, 'p02', 2],
      [1, 'p02', 2],
    ]);
    await next.close();
    expect((await rowsOf(conn, 'pw', 't', ['id'])).find((r) => r.id === 100)?.n).toBe(6);
  });

  it('the recorded source time only rises and never passes this clock: a past-stamped transaction (SET TIMESTAMP, a binlog replay) does not take it back, a future one does not take it ahead', async () => {
    for (const workers of [1, 4]) {
      const meta = `pw_meta_time${workers}`;
      await conn.query(`DROP DATABASE IF EXISTS ${meta}`);
      await freshDatabase(conn, 'pw', [T]);
      const sink = sinkFor(meta, workers);
      const now = Date.now();
      // Every worker row's time, lowest first (the resume point takes the lowest).
      const times = async () =>
        (await conn.query<RowDataPacket[]>(`SELECT source_time_us AS t FROM ${meta}.checkpoints WHERE source_id = 's' ORDER BY source_time_us`, []))[0].map((r) => BigInt(String(r.t)));
      await sink.write({ sourceId: 's', position: 'p1', changes: [ins(1, 1, v(1))], sourceTimeMs: now });
      await sink.flush();
      expect(await times()).toEqual(new Array(workers).fill(BigInt(now) * 1000n));
      // Past-stamped, in a window of its own and in a window after a newer one.
      await sink.write({ sourceId: 's', position: 'p2', changes: [ins(2, 1, v(2))], sourceTimeMs: now - 3_600_000 });
      await sink.flush();
      expect((await times())[0]).toBe(BigInt(now) * 1000n);
      await sink.write({ sourceId: 's', position: 'p3', changes: [ins(3, 1, v(3))], sourceTimeMs: now + 1 });
      await sink.write({ sourceId: 's', position: 'p4', changes: [ins(4, 1, v(4))], sourceTimeMs: now - 3_600_000 });
      await sink.flush();
      const after = await times();
      expect(after[0]).toBeGreaterThanOrEqual(BigInt(now) * 1000n);
      expect(after[after.length - 1]).toBe(BigInt(now + 1) * 1000n);
      const before = Date.now();
      await sink.write({ sourceId: 's', position: 'p5', changes: [ins(5, 1, v(5))], sourceTimeMs: before + 3_600_000 });
      await sink.flush();
      const latest = (await times()).at(-1)!;
      expect(latest).toBeGreaterThanOrEqual(BigInt(before) * 1000n);
      expect(latest).toBeLessThanOrEqual(BigInt(Date.now()) * 1000n);
      await sink.close();
    }
  });

  it('the recorded last version is exact in all 64 bits (MariaDB compared a bound string as a double and stored it rounded up)', async () => {
    const meta = 'pw_meta_lastv';
    await conn.query(`DROP DATABASE IF EXISTS ${meta}`);
    await freshDatabase(conn, 'pw', [T]);
    const sink = sinkFor(meta, 1);
    const top = ((BigInt(Date.now()) * 1000n) << 10n) + 1001n;
    expect(BigInt(Number(top))).not.toBe(top); // no double holds it
    await sink.write({ sourceId: 's', position: 'p1', changes: [ins(1, 1, v(1))] });
    await sink.write({ sourceId: 's', position: 'p2', changes: [ins(2, 1, top)] });
    await sink.flush();
    expect((await sink.checkpoint('s'))?.lastVersion).toBe(top);
    const [[row]] = await conn.query<RowDataPacket[]>(`SELECT CAST(last_version AS CHAR) AS v FROM ${meta}.checkpoints WHERE source_id = 's'`);
    expect(row!.v).toBe(top.toString());
    await sink.close();
  });

  it("stream ids that differ in letter case or accents keep checkpoints of their own (they shared one: 'orders' resumed from 'Orders'), on a table upgraded in place too; an id ending in a space and a position with a lone surrogate are refused", async () => {
    const meta = 'pw_meta_ids';
    // A checkpoints table from before: the schema's default collation, case- and accent-insensitive.
    await freshDatabase(conn, meta, [LEGACY_CHECKPOINTS.replaceAll('{{meta}}', meta)]);
    await freshDatabase(conn, 'pw', [T]);
    const ids = ['Orders', 'orders', 'café', 'cafe'];
    for (const [i, sourceId] of ids.entries()) {
      const sink = sinkFor(meta, 1);
      await sink.write({ sourceId, position: `pos-${i}`, changes: [ins(10 + i, i, v(10 + i))] });
      await sink.close();
    }
    const check = sinkFor(meta, 1);
    for (const [i, sourceId] of ids.entries()) expect((await check.checkpoint(sourceId))?.position).toBe(`pos-${i}`);
    await check.close();
    const [[col]] = await conn.query<RowDataPacket[]>("SELECT COLLATION_NAME AS c FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'checkpoints' AND COLUMN_NAME = 'source_id'", [meta]);
    expect(col!.c).toBe('utf8mb4_bin');
    const bad = sinkFor(meta, 1);
    await expect(bad.write({ sourceId: 'orders ', position: 'p', changes: [] })).rejects.toThrow(/sourceId.*must not end in a space/);
    const bad2 = sinkFor(meta, 1);
    await expect(bad2.write({ sourceId: 'orders', position: 'a\uD800b', changes: [] })).rejects.toThrow(/position.*lone UTF-16 surrogate/);
    expect((await rowsOf(conn, 'pw', 't', ['id'])).map((r) => r.id)).toEqual([10, 11, 12, 13]);
  });

  it("a newer writer's claim stops the older writer's other workers as well", async () => {
    const meta = 'pw_meta_claim';
    await conn.query(`DROP DATABASE IF EXISTS ${meta}`);
    await freshDatabase(conn, 'pw', [T]);
    const older = sinkFor(meta, 4);
    await older.write({ sourceId: 's', position: '1', changes: Array.from({ length: 40 }, (_, i) => ins(i, 0, v(i))) });
    await older.flush();
    const newer = sinkFor(meta, 4);
    await newer.claim('s');
    // Its next change lands on one worker, whose row now carries the newer epoch.
    const write = older.write({ sourceId: 's', position: '2', changes: [ins(1000, 1, v(1000))] }).then(() => older.flush());
    await expect(write).rejects.toBeInstanceOf(OwnershipLostError);
    const rows = await workerRows(meta, 's');
    expect(rows.every((r) => r.position === '1')).toBe(true);
    await newer.abort();
  });

  it('rows that swap a unique value commit in source order across windows and workers', async () => {
    const meta = 'pw_meta_unique';
    await conn.query(`DROP DATABASE IF EXISTS ${meta}`);
    await freshDatabase(conn, 'pw', [T]);
    const sink = sinkFor(meta, 8);
    const changes: Change[] = [];
    let i = 0;
    for (let round = 0; round < 30; round++) {
      // Row a leaves its value for a temporary one, row b takes it, a takes b's old one.
      const a = round * 2;
      const b = a + 1;
      changes.push(ins(a, 0, v(++i), `x${a}`), ins(b, 0, v(++i), `x${b}`));
      changes.push({ schema: 'pw', table: 't', op: 'update', before: { id: a, email: `x${a}`, n: 0 }, after: { id: a, email: `tmp${a}`, n: 1 }, version: v(++i) });
      changes.push({ schema: 'pw', table: 't', op: 'update', before: { id: b, email: `x${b}`, n: 0 }, after: { id: b, email: `x${a}`, n: 1 }, version: v(++i) });
      changes.push({ schema: 'pw', table: 't', op: 'update', before: { id: a, email: `tmp${a}`, n: 1 }, after: { id: a, email: `x${b}`, n: 2 }, version: v(++i) });
    }
    let pos = 0;
    for (const c of changes) await sink.write({ sourceId: 's', position: String(++pos), changes: [c] });
    await sink.close();
    const rows = await rowsOf(conn, 'pw', 't', ['id']);
    expect(rows.length).toBe(60);
    for (const r of rows) expect(r.email).toBe(r.id % 2 === 0 ? `x${r.id + 1}` : `x${r.id - 1}`);
    const [[c]] = await conn.query<RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${meta}.conflicts`);
    expect(Number(c!.n)).toBe(0);
  });
});
