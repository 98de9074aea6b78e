// Large source transactions and large values cross exactly, in bounded chunks, and the direction is
// not wedged afterwards; a value the target cannot take stops the direction naming
// max_allowed_packet, leaving the peer's row untouched. One server pair per engine, shared.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import type { Replicator } from '../../src/replicator/replicator.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { eventually, setupNodes, startReplicator } from '../helpers/replication.ts';

const DB = 'big';
const DDL = [
  'CREATE TABLE {{db}}.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(16) NOT NULL)',
  'CREATE TABLE {{db}}.doc (id INT PRIMARY KEY, body LONGTEXT, bin LONGBLOB, n INT NOT NULL DEFAULT 0)',
];
const ROWS = 60_000;
const MB = 1024 * 1024;

/** Row count and an order-free hash of every column, version included. */
async function fingerprint(conn: Connection, sql: string): Promise<string> {
  const [rows] = await conn.query<RowDataPacket[]>(sql);
  return JSON.stringify(rows[0]);
}
const T_PRINT = "SELECT COUNT(*) AS n, BIT_XOR(CRC32(CONCAT_WS('|', id, v, s, _lww_ts))) AS h FROM big.t";
const DOC_PRINT = "SELECT COUNT(*) AS n, BIT_XOR(CRC32(CONCAT_WS('|', id, SHA2(body, 256), SHA2(bin, 256), LENGTH(body), LENGTH(bin), n, _lww_ts))) AS h FROM big.doc";

async function sameOn(conns: Connection[], sql: string, timeoutMs: number): Promise<string> {
  const prints = await eventually(
    sql,
    () => Promise.all(conns.map((c) => fingerprint(c, sql))),
    (p) => p.every((x) => x === p[0]),
    timeoutMs,
  );
  return prints[0]!;
}

describeEachEngine('large transactions and values', 2, (ctx) => {
  let urls: string[];
  let a: Connection;
  let b: Connection;
  let replicator: Replicator | null = null;

  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    // A 20 MiB value needs packets larger than MariaDB's 16 MiB default (MySQL's is 64 MiB), and more than one
    // 16 MiB protocol packet to carry it.
    for (const url of urls) {
      const c = await connect(url);
      await c.query('SET GLOBAL max_allowed_packet = ?', [128 * MB]);
      await c.end();
    }
    [a, b] = (await setupNodes(urls, DB, DDL, ['t', 'doc'])) as [Connection, Connection];
    replicator = await startReplicator(urls);
  });
  afterAll(async () => {
    await replicator?.stop();
    await a?.end();
    await b?.end();
  });

  it('a 60,000-row source transaction with updates and deletes crosses exactly, and a later update still crosses', async () => {
    const s = await connect(urls[0]!);
    try {
      await s.query(ctx.engine === 'mysql' ? 'SET SESSION cte_max_recursion_depth = 1000000' : 'SET SESSION max_recursive_iterations = 1000000');
      await s.query('BEGIN');
      await s.query(
        `INSERT INTO big.t (id, v, s) SELECT n, n, CONCAT('r', n) FROM (WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ${ROWS}) SELECT n FROM seq) AS x`,
      );
      await s.query('UPDATE big.t SET v = v + 1 WHERE id % 97 = 0');
      await s.query('DELETE FROM big.t WHERE id % 151 = 0');
      await s.query('COMMIT');
    } finally {
      await s.end();
    }
    const expected = ROWS - Math.floor(ROWS / 151);
    const print = await sameOn([a, b], T_PRINT, 90_000);
    expect(Number(JSON.parse(print).n)).toBe(expected);
    const tombs = "SELECT COUNT(*) AS n, BIT_XOR(CRC32(CONCAT_WS('|', id, _lww_ts))) AS h FROM lww_meta.tomb__big__t";
    expect(Number(JSON.parse(await sameOn([a, b], tombs, 30_000)).n)).toBe(Math.floor(ROWS / 151));
    const status = await replicator!.status();
    expect(status.directions.every((d) => d.state === 'streaming')).toBe(true);
    // Not wedged: an ordinary update crosses afterwards.
    await a.query("UPDATE big.t SET s = 'later' WHERE id = 1");
    await eventually('the later update on B', () => fingerprint(b, "SELECT s FROM big.t WHERE id = 1"), (x) => x.includes('later'));
    await sameOn([a, b], T_PRINT, 30_000);
  });

  it('a single 20 MiB LONGTEXT and a 20 MiB LONGBLOB cross exactly, and a later update still crosses', async () => {
    const s = await connect(urls[0]!);
    try {
      await s.query("INSERT INTO big.doc (id, body, bin) VALUES (1, CONCAT(REPEAT('abcdefghij', 2 * 1024 * 1024), 'é'), NULL)");
      await s.query('INSERT INTO big.doc (id, body, bin) VALUES (2, NULL, ?)', [Buffer.alloc(20 * MB, 0xa5)]);
    } finally {
      await s.end();
    }
    const print = await sameOn([a, b], DOC_PRINT, 60_000);
    expect(Number(JSON.parse(print).n)).toBe(2);
    const [[len]] = await b.query<RowDataPacket[]>('SELECT CHAR_LENGTH(body) AS c FROM big.doc WHERE id = 1');
    expect(Number(len!.c)).toBe(20 * MB + 1);
    await a.query('UPDATE big.doc SET n = 5 WHERE id = 1');
    await eventually('the later update on B', () => fingerprint(b, 'SELECT n FROM big.doc WHERE id = 1'), (x) => x.includes('5'));
    await sameOn([a, b], DOC_PRINT, 60_000);
  });

  it("a value larger than the target's max_allowed_packet stops the direction naming max_allowed_packet; the peer keeps its row", async () => {
    await replicator!.stop();
    await b.query('SET GLOBAL max_allowed_packet = ?', [16 * MB]);
    try {
      replicator = await startReplicator(urls, { initialCopy: false });
      const before = await fingerprint(b, DOC_PRINT);
      await a.query("UPDATE big.doc SET body = CONCAT(REPEAT('0123456789', 3 * 1024 * 1024), 'x') WHERE id = 1");
      const d = replicator.directions.find((x) => x.name === 'n1→n2')!;
      await eventually('A→B to stop', async () => d.state, (st) => st === 'failed', 60_000);
      expect(d.lastError).toMatch(/max_allowed_packet/);
      expect(d.lastError).toMatch(/big\.doc/);
      expect(await fingerprint(b, DOC_PRINT)).toBe(before);
    } finally {
      await replicator?.stop();
      replicator = null;
      await b.query('SET GLOBAL max_allowed_packet = ?', [128 * MB]);
    }
  });
});
