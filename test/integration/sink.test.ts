import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect, MAX_PREPARED_STATEMENTS } from '../../src/db/connection.ts';
import { randomInt, seededRandom, shuffle } from '../../src/harness/random.ts';
import { ApplyError, createSink, InvalidChangeError, OwnershipLostError, type Sink, type SourceTransactionInput } from '../../src/index.ts';
import { freshDatabase, rowsOf } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const T = 'CREATE TABLE {{db}}.t (id INT NOT NULL PRIMARY KEY, v VARCHAR(40) NULL, n BIGINT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)';
type Change = SourceTransactionInput['changes'][number];

const ins = (db: string, id: number, v: string, version: bigint): Change => ({ schema: db, table: 't', op: 'insert', after: { id, v, n: id }, version });
const upd = (db: string, id: number, v: string, version: bigint, newId = id): Change => ({
  schema: db,
  table: 't',
  op: 'update',
  before: { id, v: 'x', n: id },
  after: { id: newId, v, n: newId },
  version,
});
const del = (db: string, id: number, version: bigint): Change => ({ schema: db, table: 't', op: 'delete', before: { id }, version });

describeEachEngine('LWW sink', 1, (ctx) => {
  let url: string;
  let conn: Connection;
  const sinks: Sink[] = [];
  const sinkFor = (opts: Partial<Parameters<typeof createSink>[0]> = {}) => {
    const s = createSink({ target: url, failpoints: '', ...opts });
    sinks.push(s);
    return s;
  };

  beforeAll(async () => {
    url = ctx.servers[0]!.url;
    conn = await connect(url);
  });
  afterAll(async () => {
    for (const s of sinks) await s.abort();
    await conn?.end();
  });

  it('newer wins, older is skipped and counted, an equal replay is a no-op', async () => {
    await freshDatabase(conn, 'lww1', [T]);
    const sink = sinkFor();
    await sink.write({ sourceId: 'a', position: '1', changes: [ins('lww1', 1, 'v10', 10n), ins('lww1', 2, 'v10', 10n)] });
    await sink.flush();
    await sink.write({ sourceId: 'a', position: '2', changes: [upd('lww1', 1, 'v20', 20n)] });
    await sink.flush();
    await sink.write({ sourceId: 'a', position: '3', changes: [upd('lww1', 1, 'v15', 15n), upd('lww1', 2, 'v10', 10n)] });
    await sink.flush();
    const rows = await rowsOf(conn, 'lww1', 't', ['id']);
    expect(rows.map((r) => [r.id, r.v, r._lww_ts])).toEqual([
      [1, 'v20', '20'],
      [2, 'v10', '10'],
    ]);
    const t = sink.stats().tables['lww1.t']!;
    expect(t).toMatchObject({ inserted: 2, updated: 1, skippedStale: 2 });
    expect((await sink.checkpoint('a'))?.position).toBe('3');
  });

  it('a delete wins over older writes and loses to newer ones, whatever the arrival order', async () => {
    await freshDatabase(conn, 'lww2', [T]);
    const sink = sinkFor({ batch: { maxRows: 1 } });
    await sink.write({ sourceId: 'a', position: '1', changes: [ins('lww2', 1, 'a', 10n), ins('lww2', 2, 'b', 10n)] });
    await sink.write({ sourceId: 'a', position: '2', changes: [del('lww2', 1, 30n), del('lww2', 2, 5n)] });
    await sink.write({ sourceId: 'a', position: '3', changes: [upd('lww2', 1, 'late-older', 20n), ins('lww2', 3, 'c', 1n)] });
    await sink.write({ sourceId: 'a', position: '4', changes: [del('lww2', 3, 2n)] });
    await sink.flush();
    const rows = await rowsOf(conn, 'lww2', 't', ['id']);
    expect(rows.map((r) => [r.id, r._lww_ts])).toEqual([[2, '10']]);
    const [tombs] = await conn.query<RowDataPacket[]>('SELECT id, _lww_ts FROM lww_meta.tomb__lww2__t ORDER BY id');
    expect(tombs.map((r) => [r.id, r._lww_ts])).toEqual([
      [1, '30'],
      [2, '5'],
      [3, '2'],
    ]);
    expect(sink.stats().tables['lww2.t']).toMatchObject({ deleted: 2, tombstoned: 3, skippedByTombstone: 1 });
  });

  it('two composite keys whose parts hold control characters stay two keys in one batch (insert, and a delete beside an insert)', async () => {
    await freshDatabase(conn, 'lwwck', ['CREATE TABLE {{db}}.t (k1 VARCHAR(10) NOT NULL, k2 VARCHAR(10) NOT NULL, a VARCHAR(10) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, PRIMARY KEY (k1, k2))']);
    const one = { k1: 'a\u0001sb', k2: 'c' };
    const two = { k1: 'a', k2: 'b\u0001sc' };
    const sink = sinkFor();
    await sink.write({ sourceId: 'ck', position: '1', changes: [{ schema: 'lwwck', table: 't', op: 'insert', after: { ...one, a: 'A' }, version: 10n }] });
    await sink.write({ sourceId: 'ck', position: '2', changes: [{ schema: 'lwwck', table: 't', op: 'insert', after: { ...two, a: 'B' }, version: 11n }] });
    await sink.flush();
    expect((await rowsOf(conn, 'lwwck', 't', ['a'])).map((r) => `${r.a}@${r._lww_ts}`)).toEqual(['A@10', 'B@11']);
    await sink.write({ sourceId: 'ck', position: '3', changes: [{ schema: 'lwwck', table: 't', op: 'delete', before: one, version: 20n }] });
    await sink.write({ sourceId: 'ck', position: '4', changes: [{ schema: 'lwwck', table: 't', op: 'update', before: two, after: { ...two, a: 'B2' }, version: 21n }] });
    await sink.flush();
    expect((await rowsOf(conn, 'lwwck', 't', ['a'])).map((r) => `${r.a}@${r._lww_ts}`)).toEqual(['B2@21']);
  });

  it('any permutation and batching of a random change set yields the same table and tombstones (property, many seeds)', async () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const random = seededRandom(seed);
      const changes: Change[] = [];
      const used = new Set<bigint>();
      const version = () => {
        // Versions above 2^53 on purpose: they must never pass through a JS number.
        for (;;) {
          const v = (1n << 60n) + BigInt(randomInt(random, 0, 1_000_000_000));
          if (!used.has(v)) {
            used.add(v);
            return v;
          }
        }
      };
      for (let i = 0; i < 2000; i++) {
        const id = randomInt(random, 1, 201);
        const r = random();
        if (r < 0.35) changes.push(ins('x', id, `i${i}`, version()));
        else if (r < 0.65) changes.push(upd('x', id, `u${i}`, version()));
        else if (r < 0.85) changes.push(del('x', id, version()));
        else changes.push(upd('x', id, `pk${i}`, version(), randomInt(random, 1, 201)));
      }
      const snapshots: string[] = [];
      for (let perm = 0; perm < 3; perm++) {
        const db = `prop_${seed}_${perm}`;
        await freshDatabase(conn, db, [T]);
        const order = perm === 0 ? changes : shuffle(random, changes);
        const sink = sinkFor({ batch: { maxRows: randomInt(random, 1, 300) } });
        let pos = 0;
        for (let i = 0; i < order.length; ) {
          const size = randomInt(random, 1, 40);
          const part = order.slice(i, i + size).map((c) => ({ ...c, schema: db }));
          await sink.write({ sourceId: 'p', position: String(++pos), changes: part });
          i += size;
        }
        await sink.flush();
        const rows = await rowsOf(conn, db, 't', ['id']);
        const [tombs] = await conn.query<RowDataPacket[]>(`SELECT id, _lww_ts FROM lww_meta.tomb__${db}__t ORDER BY id`);
        snapshots.push(JSON.stringify([rows, tombs]));
        await sink.close();
        await conn.query(`DROP DATABASE ${db}`);
        await conn.query(`DROP TABLE lww_meta.tomb__${db}__t`);
      }
      // The oracle: per key the highest upsert survives unless the highest delete is newer.
      const best = new Map<number, { v: bigint; row: [number, string, number] }>();
      const tomb = new Map<number, bigint>();
      for (const c of changes) {
        const before = c.before as { id: number } | undefined;
        const after = c.after as { id: number; v: string; n: number } | undefined;
        if (c.op === 'delete' || (c.op === 'update' && before!.id !== after!.id)) {
          const id = before!.id;
          if ((tomb.get(id) ?? -1n) < BigInt(c.version)) tomb.set(id, BigInt(c.version));
        }
        if (after && (best.get(after.id)?.v ?? -1n) < BigInt(c.version)) best.set(after.id, { v: BigInt(c.version), row: [after.id, after.v, after.n] });
      }
      const expectedRows = [...best.entries()]
        .filter(([id, b]) => b.v > (tomb.get(id) ?? -1n))
        .sort(([a], [b]) => a - b)
        .map(([, b]) => ({ id: b.row[0], v: b.row[1], n: String(b.row[2]), _lww_ts: b.v.toString() }));
      const expectedTombs = [...tomb.entries()].sort(([a], [b]) => a - b).map(([id, v]) => ({ id, _lww_ts: v.toString() }));
      expect(snapshots[1]).toBe(snapshots[0]);
      expect(snapshots[2]).toBe(snapshots[0]);
      expect(snapshots[0]).toBe(JSON.stringify([expectedRows, expectedTombs]));
    }
  });

  it('replaying transactions after a crash gives the same state, counts the replays as skipped, and keeps the checkpoint', async () => {
    await freshDatabase(conn, 'lww3', [T]);
    const txns: SourceTransactionInput[] = [];
    for (let i = 0; i < 50; i++) {
      txns.push({ sourceId: 'r', position: `pos-${i}`, changes: [ins('lww3', i, `a${i}`, BigInt(100 + i)), upd('lww3', (i * 7) % 50, `b${i}`, BigInt(1000 + i))] });
    }
    txns.push({ sourceId: 'r', position: 'pos-del', changes: [del('lww3', 3, 5000n)] });
    const first = sinkFor();
    for (const t of txns) await first.write(t);
    await first.flush();
    const before = await rowsOf(conn, 'lww3', 't', ['id']);
    // A crash: uncommitted work is dropped; the checkpoint still says the last committed position.
    await first.write({ sourceId: 'r', position: 'never-committed', changes: [ins('lww3', 999, 'x', 1n)] });
    await first.abort();
    const second = sinkFor();
    expect((await second.checkpoint('r'))?.position).toBe('pos-del');
    for (const t of txns) await second.write(t);
    await second.flush();
    expect(await rowsOf(conn, 'lww3', 't', ['id'])).toEqual(before);
    const s = second.stats().tables['lww3.t']!;
    expect(s.inserted + s.updated + s.deleted).toBe(0);
    expect(s.skippedStale + s.skippedByTombstone + s.coalesced).toBe(100);
    expect(s.skippedStale + s.skippedByTombstone).toBeGreaterThan(0);
    expect((await second.checkpoint('r'))?.position).toBe('pos-del');
  });

  it('a batch that fails mid-way leaves nothing behind and is retried', async () => {
    await freshDatabase(conn, 'lww4', [T, T.replace('.t ', '.u ')]);
    const blocker = await connect(url);
    try {
      await blocker.query('INSERT INTO lww4.u (id, v, _lww_ts) VALUES (7, NULL, 1)');
      await blocker.query('BEGIN');
      await blocker.query('SELECT * FROM lww4.u WHERE id = 7 FOR UPDATE');
      const sink = sinkFor({ timeouts: { lockWaitSeconds: 1 }, retry: { baseMs: 200, maxMs: 400 } });
      await sink.write({
        sourceId: 'f',
        position: 'x1',
        changes: [ins('lww4', 1, 'first-table', 10n), { schema: 'lww4', table: 'u', op: 'update', after: { id: 7, v: 'blocked', n: 1 }, version: 10n }],
      });
      const flushed = sink.flush();
      // While the lock holds, the half-applied batch is invisible and the checkpoint has not moved.
      await new Promise((r) => setTimeout(r, 1500));
      const reader = await connect(url);
      expect(await rowsOf(reader, 'lww4', 't', ['id'])).toEqual([]);
      expect(sink.stats().retries).toBeGreaterThanOrEqual(1);
      await reader.end();
      await blocker.query('COMMIT');
      await flushed;
      expect((await rowsOf(conn, 'lww4', 't', ['id'])).map((r) => r.v)).toEqual(['first-table']);
      expect((await rowsOf(conn, 'lww4', 'u', ['id'])).map((r) => r.v)).toEqual(['blocked']);
      expect((await sink.checkpoint('f'))?.position).toBe('x1');
    } finally {
      await blocker.end();
    }
  });

  it('a lost connection is retried on a new one', async () => {
    await freshDatabase(conn, 'lww5', [T]);
    const sink = sinkFor();
    await sink.write({ sourceId: 'k', position: '1', changes: [ins('lww5', 1, 'a', 1n)] });
    await sink.flush();
    const [procs] = await conn.query<RowDataPacket[]>("SELECT ID FROM information_schema.PROCESSLIST WHERE DB IS NULL AND USER = 'root' AND ID <> CONNECTION_ID()");
    for (const p of procs) await conn.query(`KILL ${Number(p.ID)}`);
    await sink.write({ sourceId: 'k', position: '2', changes: [upd('lww5', 1, 'b', 2n)] });
    await sink.flush();
    expect((await rowsOf(conn, 'lww5', 't', ['id'])).map((r) => r.v)).toEqual(['b']);
    expect((await sink.checkpoint('k'))?.position).toBe('2');
  });

  it('with mysqlSinkBypassLWW a late older change overwrites a newer row; with LWW it does not', async () => {
    await freshDatabase(conn, 'lww6', [T]);
    await freshDatabase(conn, 'lww7', [T]);
    const lww = sinkFor();
    const replace = sinkFor({ failpoints: 'mysqlSinkBypassLWW=return(true)' });
    for (const [sink, db] of [
      [lww, 'lww6'],
      [replace, 'lww7'],
    ] as const) {
      await sink.write({ sourceId: 'b', position: '1', changes: [ins(db, 1, 'newer', 200n), ins(db, 2, 'kept', 100n)] });
      await sink.flush();
      await sink.write({ sourceId: 'b', position: '2', changes: [upd(db, 1, 'older', 100n), del(db, 2, 50n)] });
      await sink.flush();
    }
    const side = async (db: string) => (await rowsOf(conn, db, 't', ['id'])).map((r) => `${r.id}:${r.v}@${r._lww_ts}`);
    expect({ lww: await side('lww6'), replace: await side('lww7') }).toEqual({ lww: ['1:newer@200', '2:kept@100'], replace: ['1:older@100'] });
    expect(replace.stats().tables['lww7.t']).toMatchObject({ replaced: 3, deleted: 1 });
  });

  it('sinkDropMessage drops changes before writing and sinkMutateValue alters the last column; both are counted', async () => {
    await freshDatabase(conn, 'lww12', [T]);
    await freshDatabase(conn, 'lww13', [T]);
    const drop = sinkFor({ failpoints: 'sinkDropMessage=2*return(true)' });
    await drop.write({ sourceId: 'd', position: '1', changes: [ins('lww12', 1, 'a', 1n), ins('lww12', 2, 'b', 1n), ins('lww12', 3, 'c', 1n)] });
    await drop.flush();
    expect((await rowsOf(conn, 'lww12', 't', ['id'])).map((r) => r.id)).toEqual([3]);
    expect(drop.stats().tables['lww12.t']).toMatchObject({ dropped: 2, inserted: 1 });
    expect((await drop.checkpoint('d'))?.position).toBe('1');
    const mutate = sinkFor({ failpoints: { sinkMutateValue: 'return(true)' } });
    await mutate.write({ sourceId: 'm', position: '1', changes: [ins('lww13', 1, 'a', 1n)] });
    await mutate.flush();
    // The last non-key column of t is n (BIGINT): 1 becomes 2.
    expect((await rowsOf(conn, 'lww13', 't', ['id'])).map((r) => [r.v, r.n])).toEqual([['a', '2']]);
    expect(mutate.stats().tables['lww13.t']).toMatchObject({ mutated: 1 });
  });

  it('a key equal under a case-insensitive collation is held back by its tombstone, across batches and within one', async () => {
    await freshDatabase(conn, 'lww14', ['CREATE TABLE {{db}}.t (k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)']);
    const sink = sinkFor();
    const up = (k: string, version: bigint): Change => ({ schema: 'lww14', table: 't', op: 'insert', after: { k, v: 1 }, version });
    const delK = (k: string, version: bigint): Change => ({ schema: 'lww14', table: 't', op: 'delete', before: { k }, version });
    await sink.write({ sourceId: 'ci', position: '1', changes: [up('A', 100n), up('B', 100n)] });
    await sink.flush();
    await sink.write({ sourceId: 'ci', position: '2', changes: [delK('A', 200n)] });
    await sink.flush();
    // 'a' is the same key as 'A' for the server: the older insert must not bring it back.
    await sink.write({ sourceId: 'ci', position: '3', changes: [up('a', 150n)] });
    await sink.flush();
    // Within one batch: the delete of 'b' and an older insert of 'B'.
    await sink.write({ sourceId: 'ci', position: '4', changes: [delK('b', 300n), up('B', 250n)] });
    await sink.flush();
    expect(await rowsOf(conn, 'lww14', 't', ['k'])).toEqual([]);
    expect(sink.stats().tables['lww14.t']!.skippedByTombstone).toBe(2);
    // A newer insert does win.
    await sink.write({ sourceId: 'ci', position: '5', changes: [up('a', 400n)] });
    await sink.flush();
    expect((await rowsOf(conn, 'lww14', 't', ['k'])).map((r) => `${r.k}@${r._lww_ts}`)).toEqual(['a@400']);
  });

  it('bad input is refused with an error naming the problem, and nothing is written', async () => {
    await freshDatabase(conn, 'lww8', [
      T,
      'CREATE TABLE {{db}}.nopk (a INT, _lww_ts BIGINT UNSIGNED NOT NULL)',
      'CREATE TABLE {{db}}.nover (a INT PRIMARY KEY)',
      'CREATE TABLE {{db}}.u (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, UNIQUE KEY uk_email (email))',
    ]);
    const sink = sinkFor({ limits: { maxTransactionRows: 3 } });
    const good = ins('lww8', 1, 'ok', 1n);
    const cases: Array<[Change[], RegExp]> = [
      [[good, { schema: 'lww8', table: 't', op: 'insert', after: { v: 'no key', n: 1 }, version: 2n }], /change #1 .*lacks primary-key column id/],
      [[good, { schema: 'lww8', table: 't', op: 'insert', after: { id: 2, v: 'a', n: 1, bogus: 1 }, version: 2n }], /column bogus does not exist in lww8.t/],
      [[good, { schema: 'lww8', table: 'missing', op: 'insert', after: { id: 2 }, version: 2n }], /lww8.missing does not exist/],
      [[good, { schema: 'lww8', table: 't', op: 'insert', after: { id: 2, v: 'a', n: 1 }, version: '18446744073709551616' }], /change #1 .*version.*64-bit/],
      [[good, { schema: 'lww8', table: 't', op: 'insert', after: { id: 2, v: 'a', n: 1 }, version: -3n }], /change #1 .*version/],
      [[good, { schema: 'lww8', table: 't', op: 'delete', after: { id: 2 }, version: 2n }], /change #1 .*delete/],
      [[good, { schema: 'lww8', table: 't', op: 'update', before: { id: 2 }, version: 2n }], /change #1 .*update needs an after image/],
      [[good, good, good, good], /4 changes, more than limits.maxTransactionRows \(3\)/],
      [[good, { schema: 'lww8', table: 'nopk', op: 'insert', after: { a: 1 }, version: 2n }], /lww8.nopk cannot be replicated: it has no primary key/],
      [[good, { schema: 'lww8', table: 'nover', op: 'insert', after: { a: 1 }, version: 2n }], /lww8.nover cannot be replicated: it has no version column _lww_ts/],
      // A property holding undefined is no value (it was written as NULL).
      [[good, { schema: 'lww8', table: 't', op: 'insert', after: { id: 2, v: undefined, n: 1 }, version: 2n }], /change #1 .*after\.v: undefined is not a value/],
      // A before image's version names the claim of a UNIQUE value the row gave up: it must be below the change's.
      [[good, { schema: 'lww8', table: 'u', op: 'update', before: { id: 2, email: 'x', _lww_ts: '99' }, after: { id: 2, email: 'y' }, version: 50n }], /change #1 .*before\._lww_ts 99 is not below the change's version 50/],
      [[good, { schema: 'lww8', table: 'u', op: 'delete', before: { id: 2, email: 'x', _lww_ts: '18446744073709551616' }, version: 50n }], /change #1 .*before\._lww_ts 18446744073709551616 is not below/],
    ];
    // A refused transaction stops the sink (a later position must not commit past it): one sink per case.
    for (const [changes, message] of cases) {
      const one = sinkFor({ limits: { maxTransactionRows: 3 } });
      await expect(one.write({ sourceId: 'bad', position: 'p', changes })).rejects.toThrow(message);
      await expect(one.write({ sourceId: 'bad', position: 'ok', changes: [good] })).rejects.toThrow(message);
    }
    await expect(sink.write({ sourceId: 'bad', position: 'p', changes: [{ ...good, version: 1.5 as unknown as bigint }] })).rejects.toBeInstanceOf(InvalidChangeError);
    await expect(sink.flush()).rejects.toBeInstanceOf(InvalidChangeError);
    expect(await rowsOf(conn, 'lww8', 't', ['id'])).toEqual([]);
    // A new sink resumes from the checkpoint, which never moved.
    const next = sinkFor();
    expect(await next.checkpoint('bad')).toBeUndefined();
    await next.write({ sourceId: 'bad', position: 'ok', changes: [good] });
    await next.flush();
    expect((await rowsOf(conn, 'lww8', 't', ['id'])).length).toBe(1);
  });

  it('a clash on a secondary UNIQUE key never overwrites the other row: the newest row keeps the value, the others are removed at their versions, counted and logged', async () => {
    await freshDatabase(conn, 'lww9', ['CREATE TABLE {{db}}.t (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, UNIQUE KEY uk_email (email))']);
    const sink = sinkFor();
    const row = (id: number, email: string, version: bigint, op: 'insert' | 'update' = 'insert'): Change => ({ schema: 'lww9', table: 't', op, after: { id, email }, version });
    await sink.write({ sourceId: 'u', position: '1', changes: [row(1, 'a@x', 10n), row(2, 'b@x', 10n)] });
    await sink.flush();
    // Insert path (a new key takes a value an older row holds) and update path (an existing key
    // moves onto a value a newer row holds by then).
    await sink.write({ sourceId: 'u', position: '2', changes: [row(3, 'a@x', 20n), row(2, 'a@x', 15n, 'update'), row(4, 'd@x', 20n)] });
    await sink.flush();
    expect((await rowsOf(conn, 'lww9', 't', ['id'])).map((r) => `${r.id}:${r.email}@${r._lww_ts}`)).toEqual(['3:a@x@20', '4:d@x@20']);
    const [tombs] = await conn.query<RowDataPacket[]>('SELECT id, CAST(_lww_ts AS CHAR) AS v FROM lww_meta.tomb__lww9__t ORDER BY id');
    expect(tombs.map((r) => `${r.id}@${r.v}`)).toEqual(['1@10', '2@15']);
    expect(sink.stats().tables['lww9.t']).toMatchObject({ uniqueClashes: 2, skippedStale: 0 });
    const [log] = await conn.query<RowDataPacket[]>("SELECT table_name, reason, version, row_json FROM lww_meta.conflicts WHERE schema_name = 'lww9' ORDER BY id");
    expect(log.map((r) => [r.table_name, r.version, String(JSON.parse(r.row_json).id)])).toEqual([
      ['t', '10', '1'],
      ['t', '15', '2'],
    ]);
    expect(log.every((r) => /^unique key clash: removed by newer row/.test(r.reason))).toBe(true);
  });

  it('batches of every row count keep a bounded number of prepared statements open on the server', async () => {
    await freshDatabase(conn, 'lwwprep', [T]);
    const openStatements = async () => {
      const [rows] = await conn.query<RowDataPacket[]>("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'");
      return Number(rows[0]!.Value);
    };
    const before = await openStatements();
    const sink = sinkFor();
    // 150 batches of 1..150 rows: each row count is another statement text (upsert, tombstone guard).
    let id = 0;
    for (let n = 1; n <= 150; n++) {
      const changes: Change[] = [];
      for (let i = 0; i < n; i++) changes.push(ins('lwwprep', ++id, 'v', 10n));
      await sink.write({ sourceId: 'prep', position: String(n), changes });
      await sink.flush();
    }
    const open = (await openStatements()) - before;
    expect(open).toBeGreaterThan(0);
    // The sink holds two connections here (its own and the apply worker's); unbounded, 300 statements stay open.
    expect(open).toBeLessThanOrEqual(2 * MAX_PREPARED_STATEMENTS);
    const [count] = await conn.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM lwwprep.t');
    expect(Number(count[0]!.n)).toBe(id);
    await sink.close();
  });

  it('write() holds a fast source back at two windows of queued rows besides the one being applied, and every row still lands in order', async () => {
    await freshDatabase(conn, 'lww15', [T]);
    const sink = sinkFor({ batch: { maxRows: 2, maxDelayMs: 60_000 } });
    const queuedAtReturn: number[] = [];
    const writes = Array.from({ length: 40 }, (_, i) =>
      sink.write({ sourceId: 'bp', position: String(i + 1), changes: [ins('lww15', i + 1, `v${i}`, BigInt(i + 1))] }).then(() => {
        queuedAtReturn.push(sink.progress().pendingRows);
      }),
    );
    await Promise.all(writes);
    await sink.flush();
    // Two windows of 2 rows (one apply worker) waiting, and the one being applied: never more queued when a write returns.
    expect(Math.max(...queuedAtReturn)).toBeLessThanOrEqual(6);
    expect((await rowsOf(conn, 'lww15', 't', ['id'])).map((r) => r.id)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect((await sink.checkpoint('bp'))?.position).toBe('40');
  });

  it('a second writer of the same source takes over and the first stops instead of writing', async () => {
    await freshDatabase(conn, 'lww10', [T]);
    const first = sinkFor();
    await first.write({ sourceId: 'own', position: '1', changes: [ins('lww10', 1, 'first', 1n)] });
    await first.flush();
    const second = sinkFor();
    await second.write({ sourceId: 'own', position: '2', changes: [ins('lww10', 2, 'second', 2n)] });
    await second.flush();
    await first.write({ sourceId: 'own', position: '3', changes: [ins('lww10', 3, 'stale writer', 3n)] });
    await expect(first.flush()).rejects.toBeInstanceOf(OwnershipLostError);
    expect((await rowsOf(conn, 'lww10', 't', ['id'])).map((r) => r.id)).toEqual([1, 2]);
    expect((await second.checkpoint('own'))?.position).toBe('2');
  });

  it('an error the server raises surfaces with the table and a redacted message, and stops the sink', async () => {
    await freshDatabase(conn, 'lww11', ["CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, CONSTRAINT v_ok CHECK (v <> 'secret-too-long'))"]);
    const sink = sinkFor();
    await sink.write({ sourceId: 'e', position: '1', changes: [{ schema: 'lww11', table: 't', op: 'insert', after: { id: 1, v: 'secret-too-long' }, version: 1n }] });
    const err = await sink.flush().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplyError);
    expect((err as ApplyError).table).toBe('lww11.t');
    expect((err as Error).message).toMatch(/CHECK|CONSTRAINT/i);
    expect((err as Error).message).not.toContain('secret-too-long');
    await expect(sink.write({ sourceId: 'e', position: '2', changes: [] })).rejects.toBe(err);
  });
});
