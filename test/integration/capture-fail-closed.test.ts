// Every way an application writes a captured table either replicates exactly (both nodes equal to
// what the application wrote, and a later ordinary update still crosses) or stops the direction
// loudly with the cause and the table named, leaving nothing corrupted on the peer. One server
// pair per engine, shared by the scenarios in order.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { currentPosition } from '../../src/capture/source.ts';
import { connect } from '../../src/db/connection.ts';
import type { Direction } from '../../src/replicator/direction.ts';
import { Replicator } from '../../src/replicator/replicator.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, eventually, setupNodes, snapshot, startReplicator } from '../helpers/replication.ts';

const DB = 'fc';
const DDL = [
  'CREATE TABLE {{db}}.t (id INT PRIMARY KEY, a INT, b VARCHAR(20), c INT NOT NULL DEFAULT 7, body TEXT)',
  'CREATE TABLE {{db}}.ro (id INT PRIMARY KEY, a INT, b INT, at DATETIME(3) NULL)',
  'CREATE TABLE {{db}}.p (id INT PRIMARY KEY, n INT) ENGINE=InnoDB',
  'CREATE TABLE {{db}}.ch (id INT PRIMARY KEY, pid INT NOT NULL, v INT, FOREIGN KEY (pid) REFERENCES {{db}}.p (id) ON DELETE CASCADE) ENGINE=InnoDB',
  "CREATE TABLE {{db}}.en (id INT PRIMARY KEY, c ENUM('', 'a') NOT NULL, code INT NOT NULL DEFAULT 0, UNIQUE KEY uk (c, code))",
  'CREATE TABLE {{db}}.pt (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200), PARTITION p2 VALUES LESS THAN MAXVALUE)',
  'CREATE TABLE {{db}}.rn (id INT PRIMARY KEY, v INT)',
  'CREATE TABLE {{db}}.dd (id INT PRIMARY KEY, v DOUBLE(5,2), f FLOAT(7,4))',
  'CREATE TABLE {{db}}.cs (id INT PRIMARY KEY, a VARCHAR(200) CHARACTER SET gbk, b VARCHAR(200) CHARACTER SET euckr, c VARCHAR(200) CHARACTER SET cp1251, d VARCHAR(200) CHARACTER SET latin2, e VARCHAR(200) CHARACTER SET utf16)',
];
const TABLES = ['t', 'ro', 'p', 'ch', 'en', 'pt', 'rn', 'cs', 'dd', 'cn'];
/** Collations whose ids zongji's table does not know or maps to another charset (MariaDB's nopad and utf16 ones; MySQL's known ones as a control). */
const COLLATED = (engine: string) =>
  engine === 'mariadb'
    ? 'CREATE TABLE {{db}}.cn (id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci, b VARCHAR(20) CHARACTER SET utf16 COLLATE utf16_croatian_ci, c VARCHAR(20) CHARACTER SET gbk COLLATE gbk_chinese_nopad_ci, d VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci)'
    : 'CREATE TABLE {{db}}.cn (id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_german2_ci, b VARCHAR(20) CHARACTER SET utf16 COLLATE utf16_croatian_ci, c VARCHAR(20) CHARACTER SET gbk COLLATE gbk_bin, d VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_as_cs)';

describeEachEngine('capture fails closed', 2, (ctx) => {
  let urls: string[];
  let a: Connection;
  let b: Connection;
  let replicator: Replicator | null = null;

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    [a, b] = (await setupNodes(urls, DB, [...DDL, COLLATED(ctx.engine)], TABLES)) as [Connection, Connection];
    replicator = await startReplicator(urls);
  });
  afterAll(async () => {
    await replicator?.stop();
    await a?.end();
    await b?.end();
  });

  const aToB = (): Direction => replicator!.directions.find((d) => d.name === 'n1→n2')!;
  const same = (table: string) => converged([a, b], DB, table);
  /** A session of its own on A (session settings must not leak into the shared connection). */
  async function onA<T>(fn: (s: Connection) => Promise<T>): Promise<T> {
    const s = await connect(urls[0]!);
    try {
      return await fn(s);
    } finally {
      await s.end();
    }
  }
  /** What an operator does after a loud stop once the cause is fixed: resume after the refused event. */
  async function resumeAfterRefusal(fix: () => Promise<void> = async () => undefined): Promise<void> {
    await replicator!.stop();
    await fix();
    await b.query("UPDATE lww_meta.checkpoints SET position = ? WHERE source_id = 'node-1'", [await currentPosition(a)]);
    await a.query("UPDATE lww_meta.checkpoints SET position = ? WHERE source_id = 'node-2'", [await currentPosition(b)]);
    replicator = await startReplicator(urls, { initialCopy: false });
  }
  async function expectLoudStop(pattern: RegExp): Promise<void> {
    const d = aToB();
    await eventually('A→B to stop', async () => d.state, (s) => s === 'failed', 30_000);
    expect(d.lastError).toMatch(pattern);
  }

  it('an UPDATE or INSERT logged with binlog_row_image MINIMAL or NOBLOB crosses whole: missing columns are re-read, never NULL', async () => {
    await a.query("INSERT INTO fc.t (id, a, b, c, body) VALUES (1, 1, 'one', 11, 'first body'), (3, 3, 'three', 33, 'third body')");
    await same('t');
    await onA(async (s) => {
      await s.query("SET SESSION binlog_row_image = 'MINIMAL'");
      await s.query('UPDATE fc.t SET a = 5 WHERE id = 1');
      await s.query('INSERT INTO fc.t (id, a) VALUES (2, 9)');
      await s.query("SET SESSION binlog_row_image = 'NOBLOB'");
      await s.query('UPDATE fc.t SET a = 6 WHERE id = 3');
    });
    const rows = await same('t');
    expect(JSON.parse(rows).map((r: Record<string, unknown>) => [r.id, r.a, r.b, r.c, r.body])).toEqual([
      [1, 5, 'one', 11, 'first body'],
      [2, 9, null, 7, null],
      [3, 6, 'three', 33, 'third body'],
    ]);
    // Not wedged: an ordinary update crosses afterwards.
    await a.query("UPDATE fc.t SET b = 'later' WHERE id = 1");
    expect(await same('t')).toContain('later');
  });

  it('events written before a column reorder are read by their own column names after a stop', async () => {
    await replicator!.stop();
    await a.query("INSERT INTO fc.ro (id, a, b, at) VALUES (1, 10, 20, '2026-01-02 03:04:05.678')");
    for (const c of [a, b]) await c.query('ALTER TABLE fc.ro MODIFY COLUMN b INT AFTER id, MODIFY COLUMN at DATETIME(3) NULL FIRST');
    await a.query("INSERT INTO fc.ro (id, a, b, at) VALUES (2, 30, 40, '2026-05-06 07:08:09.123')");
    replicator = await startReplicator(urls, { initialCopy: false });
    const rows = JSON.parse(await same('ro')) as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r.id, r.a, r.b, r.at])).toEqual([
      [1, 10, 20, '2026-01-02 03:04:05.678'],
      [2, 30, 40, '2026-05-06 07:08:09.123'],
    ]);
    await a.query('UPDATE fc.ro SET a = 11 WHERE id = 1');
    expect(JSON.parse(await same('ro'))[0].a).toBe(11);
  });

  it('XA transactions cross at their XA COMMIT (and one-phase commits); XA ROLLBACK never crosses', async () => {
    await onA(async (s) => {
      await s.query("XA START 'x1'");
      await s.query("INSERT INTO fc.t (id, a) VALUES (10, 1)");
      await s.query("XA END 'x1'");
      await s.query("XA PREPARE 'x1'");
      await a.query('INSERT INTO fc.t (id, a) VALUES (11, 1)');
      await s.query("XA COMMIT 'x1'");
      await s.query("XA START 'x2'");
      await s.query('INSERT INTO fc.t (id, a) VALUES (12, 1)');
      await s.query("XA END 'x2'");
      await s.query("XA PREPARE 'x2'");
      await s.query("XA ROLLBACK 'x2'");
      await s.query("XA START 'x3'");
      await s.query('INSERT INTO fc.t (id, a) VALUES (13, 1)');
      await s.query("XA END 'x3'");
      await s.query("XA COMMIT 'x3' ONE PHASE");
    });
    const rows = JSON.parse(await eventually('the XA rows', () => snapshot(b, DB, 't'), (s) => s.includes('"id":13'))) as Array<{ id: number }>;
    expect(rows.map((r) => r.id)).toEqual([1, 2, 3, 10, 11, 13]);
    expect(await same('t')).toBe(await snapshot(a, DB, 't'));
  });

  it('cascaded child deletes carry tombstones to the peer, and an older concurrent child update from the peer stays deleted', async () => {
    await a.query('INSERT INTO fc.p VALUES (1, 1), (2, 2)');
    await a.query('INSERT INTO fc.ch VALUES (10, 1, 0), (11, 1, 0), (20, 2, 0)');
    await same('ch');
    await replicator!.stop();
    await b.query('UPDATE fc.ch SET v = 5 WHERE id = 10');
    await new Promise((r) => setTimeout(r, 5));
    await a.query('DELETE FROM fc.p WHERE id = 1');
    replicator = await startReplicator(urls, { initialCopy: false });
    await same('p');
    const children = JSON.parse(await same('ch')) as Array<{ id: number }>;
    expect(children.map((r) => r.id)).toEqual([20]);
    const tombs = async (c: Connection) => {
      const [r] = await c.query<RowDataPacket[]>('SELECT id, _lww_ts FROM lww_meta.tomb__fc__ch ORDER BY id');
      return JSON.stringify(r);
    };
    const onB = await eventually('child tombstones on B', () => tombs(b), (t) => t.includes('"id":11'));
    expect(onB).toBe(await tombs(a));
    await a.query('UPDATE fc.ch SET v = 9 WHERE id = 20');
    expect(await same('ch')).toContain('"v":9');
  });

  it('statement-logged DML on a captured table stops A→B naming the session setting; the peer keeps its row', async () => {
    const before = await snapshot(b, DB, 't');
    await onA(async (s) => {
      await s.query("SET SESSION binlog_format = 'STATEMENT'");
      await s.query('UPDATE fc.t SET a = 77 WHERE id = 1');
    });
    await expectLoudStop(/fc\.t.*binlog_format=STATEMENT/s);
    expect(await snapshot(b, DB, 't')).toBe(before);
    await resumeAfterRefusal();
    await a.query('UPDATE fc.t SET a = 78 WHERE id = 1');
    expect(await same('t')).toContain('"a":78');
  });

  it("an invalid ENUM value stored by a non-strict session (index 0, read as '') stops A→B naming it, never written as the member ''", async () => {
    await a.query("INSERT INTO fc.en (id, c) VALUES (1, 'a')");
    expect(await same('en')).toContain('"c":"a"');
    const before = await snapshot(b, DB, 'en');
    await onA(async (s) => {
      await s.query("SET SESSION sql_mode = ''");
      await s.query("UPDATE fc.en SET c = 'zz' WHERE id = 1");
    });
    const [[stored]] = await a.query<RowDataPacket[]>('SELECT c + 0 AS i FROM fc.en WHERE id = 1');
    expect(Number(stored!.i)).toBe(0);
    await expectLoudStop(/fc\.en.*ENUM error value \(index 0/s);
    expect(await snapshot(b, DB, 'en')).toBe(before);
    // The operator sets the row to a member on A: that crosses as the member '' (index 1), its before
    // image (the error value, giving up its UNIQUE value) taken as the '' it reads as.
    await resumeAfterRefusal();
    await a.query("UPDATE fc.en SET c = '' WHERE id = 1");
    await eventually('the member to cross', async () => Number((await b.query<RowDataPacket[]>('SELECT c + 0 AS i FROM fc.en WHERE id = 1'))[0][0]!.i), (i) => i === 1, 30_000);
  });

  it('a session logging partial JSON or compressed transactions (MySQL) stops A→B for good, naming the session setting and what to do; the peer keeps its row', async () => {
    if (ctx.engine !== 'mysql') {
      // MariaDB has neither setting: the session cannot set them.
      await expect(onA((s) => s.query("SET SESSION binlog_row_value_options = 'PARTIAL_JSON'"))).rejects.toThrow(/Unknown system variable/);
      return;
    }
    await a.query('ALTER TABLE fc.ro ADD COLUMN doc JSON NULL');
    await b.query('ALTER TABLE fc.ro ADD COLUMN doc JSON NULL');
    await a.query('INSERT INTO fc.ro (id, a, b, doc) VALUES (40, 1, 1, \'{"k": "a long enough value", "n": 1}\')');
    expect(await same('ro')).toContain('"id":40');
    for (const [setting, value, write, pattern] of [
      ['binlog_row_value_options', "'PARTIAL_JSON'", "UPDATE fc.ro SET doc = JSON_SET(doc, '$.n', 2) WHERE id = 40", /partial JSON \(a session with binlog_row_value_options=PARTIAL_JSON\).*What to do: clear binlog_row_value_options/s],
      ['binlog_transaction_compression', 'ON', 'UPDATE fc.ro SET a = 2 WHERE id = 40', /logged compressed \(a session with binlog_transaction_compression=ON\).*What to do: set binlog_transaction_compression = OFF/s],
    ] as const) {
      const before = await snapshot(b, DB, 'ro');
      await onA(async (s) => {
        await s.query(`SET SESSION ${setting} = ${value}`);
        await s.query(write);
      });
      await expectLoudStop(pattern);
      expect(await snapshot(b, DB, 'ro')).toBe(before);
      await resumeAfterRefusal();
    }
    await a.query('UPDATE fc.ro SET a = 3 WHERE id = 40');
    expect(await same('ro')).toContain('"a":3');
  });

  it('DOUBLE(M,D) and FLOAT(M,D) values cross as the server stored them (6.69 is stored as 6.6899999999999995: it was refused as a value with more decimals, for good)', async () => {
    const values = [6.69, 1.14, 1.36, 1.39, 1.57, -6.69, 999.99, 0.1];
    await a.query(`INSERT INTO fc.dd (id, v, f) VALUES ${values.map((_, i) => `(${i}, ?, ?)`).join(', ')}`, values.flatMap((v) => [v, v]));
    await a.query('UPDATE fc.dd SET v = 5.55, f = 1.2346 WHERE id = 0');
    const rows = await same('dd');
    expect(rows).toContain('"id":7');
    const hex = (c: Connection) => c.query<RowDataPacket[]>('SELECT id, HEX(CAST(v * 1e0 AS CHAR)) AS v, HEX(CAST(f * 1e0 AS CHAR)) AS f FROM fc.dd ORDER BY id').then(([r]) => JSON.stringify(r));
    expect(await hex(b)).toBe(await hex(a));
    expect(aToB().state).toBe('streaming');
  });

  it('text in any collation of a carried charset crosses byte for byte (MariaDB: latin1_swedish_nopad_ci was decoded as UTF-8, é arrived as another byte, both directions streaming)', async () => {
    await a.query("INSERT INTO fc.cn (id, a, b, c, d) VALUES (1, 'café ÿ', 'é 𝄞', '中文', 'ñ 😀')");
    await a.query("UPDATE fc.cn SET a = CONCAT(a, '!') WHERE id = 1");
    expect(await same('cn')).toContain('"id":1');
    const hex = (c: Connection) => c.query<RowDataPacket[]>('SELECT HEX(a) a, HEX(b) b, HEX(c) c, HEX(d) d FROM fc.cn ORDER BY id').then(([r]) => JSON.stringify(r));
    expect(await hex(b)).toBe(await hex(a));
    expect(await hex(a)).toContain('636166E920FF21');
    expect(aToB().state).toBe('streaming');
  });

  it('ALTER TABLE … TRUNCATE PARTITION and DROP PARTITION of a captured table stop A→B naming the clause; the peer keeps its rows', async () => {
    await a.query('INSERT INTO fc.pt (id, v) VALUES (1, 1), (150, 2), (250, 3)');
    expect(await same('pt')).toContain('"id":250');
    const before = await snapshot(b, DB, 'pt');
    await a.query('ALTER TABLE fc.pt TRUNCATE PARTITION p0');
    await expectLoudStop(/fc\.pt.*TRUNCATE PARTITION/s);
    expect(await snapshot(b, DB, 'pt')).toBe(before);
    await resumeAfterRefusal(() => b.query('ALTER TABLE fc.pt TRUNCATE PARTITION p0').then(() => undefined));
    await a.query('ALTER TABLE fc.pt DROP PARTITION p1');
    await expectLoudStop(/fc\.pt.*DROP PARTITION/s);
    await resumeAfterRefusal(() => b.query('ALTER TABLE fc.pt DROP PARTITION p1').then(() => undefined));
    await a.query('INSERT INTO fc.pt (id, v) VALUES (260, 4)');
    expect(await same('pt')).toContain('"id":260');
  });

  it('TRUNCATE of a captured table stops A→B naming the table', async () => {
    const before = await snapshot(b, DB, 'ro');
    await a.query('TRUNCATE TABLE fc.ro');
    await expectLoudStop(/fc\.ro.*TRUNCATE/s);
    expect(await snapshot(b, DB, 'ro')).toBe(before);
    await resumeAfterRefusal(() => b.query('TRUNCATE TABLE fc.ro').then(() => undefined));
    await a.query('INSERT INTO fc.ro (id, a, b) VALUES (5, 1, 2)');
    expect(await same('ro')).toContain('"id":5');
  });

  it('text in the charsets capture carries crosses byte for byte; a column altered to one it cannot (big5) stops A→B naming it (big5 0xC6A1 reached the peer as 0xC7E9)', async () => {
    // Bytes as the server stores them: gbk and euckr two-byte runs, cp1251 and latin2 upper halves, a utf16 surrogate pair.
    const run = (from: number, to: number, width: 1 | 2) => {
      const out: number[] = [];
      for (let v = from; v <= to; v++) out.push(...(width === 2 ? [v >> 8, v & 0xff] : [v]));
      return Buffer.from(out);
    };
    const values = [run(0xb0a1, 0xb0fe, 2), run(0xb0a1, 0xb0fe, 2), run(0xc0, 0xff, 1), run(0xa0, 0xff, 1), Buffer.from('d83dde00006100e9', 'hex')];
    await a.query('INSERT INTO fc.cs (id, a, b, c, d, e) VALUES (1, ?, ?, ?, ?, ?)', values);
    const hex = (c: Connection) => c.query<RowDataPacket[]>('SELECT HEX(a) a, HEX(b) b, HEX(c) c, HEX(d) d, HEX(e) e FROM fc.cs WHERE id = 1').then(([r]) => r[0]);
    expect(await hex(a)).toEqual({ a: values[0]!.toString('hex').toUpperCase(), b: values[1]!.toString('hex').toUpperCase(), c: values[2]!.toString('hex').toUpperCase(), d: values[3]!.toString('hex').toUpperCase(), e: 'D83DDE00006100E9' });
    await eventually('the row to cross', () => hex(b), (r) => r !== undefined, 30_000);
    expect(await hex(b)).toEqual(await hex(a));

    await a.query("UPDATE fc.cs SET a = 'x' WHERE id = 1");
    await eventually('the update to cross', () => hex(b), (r) => r?.a === '78', 30_000);
    const before = await snapshot(b, DB, 'cs');
    await a.query('ALTER TABLE fc.cs MODIFY a VARCHAR(200) CHARACTER SET big5');
    await a.query("UPDATE fc.cs SET a = X'A4A4' WHERE id = 1");
    await expectLoudStop(/fc\.cs.*the column a is in character set big5, whose text capture cannot carry byte for byte/s);
    expect(aToB().lastFailure?.kind).toBe('permanent');
    expect(await snapshot(b, DB, 'cs')).toBe(before);
    await resumeAfterRefusal(() => a.query('ALTER TABLE fc.cs MODIFY a VARCHAR(200) CHARACTER SET gbk').then(() => undefined));
    await a.query('UPDATE fc.cs SET d = ? WHERE id = 1', [Buffer.from([0xa1, 0xff])]);
    await eventually('the next update to cross', () => hex(b), (r) => r?.d === 'A1FF', 30_000);
  });

  it('a table renamed on every node while its changes wait in the binlog stops A→B for good, naming why (it restarted forever, waiting for DDL)', async () => {
    await a.query('INSERT INTO fc.rn VALUES (1, 1)');
    expect(await same('rn')).toContain('"id":1');
    await replicator!.stop();
    await a.query('INSERT INTO fc.rn VALUES (2, 2)');
    await a.query('RENAME TABLE fc.rn TO fc.rn2');
    await b.query('RENAME TABLE fc.rn TO fc.rn2');
    // Not startReplicator: A→B may fail before every direction streamed, which it would reject.
    replicator = new Replicator({ nodes: urls, restartDelayMs: 200, capture: { heartbeatMs: 1000 }, sink: { batch: { maxDelayMs: 5 } }, initialCopy: false });
    await replicator.start();
    await expectLoudStop(/table fc\.rn does not exist on the target.*the source has no table fc\.rn now either/s);
    expect(aToB().lastFailure?.kind).toBe('permanent');
  });
});
