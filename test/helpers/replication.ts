// Helpers for replication tests: install two nodes, run a replicator in-process, wait for convergence.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { expect } from 'vitest';
import type { AuditReport } from '../../src/checker/index.ts';
import { currentPosition } from '../../src/capture/source.ts';
import { connect } from '../../src/db/connection.ts';
import { install } from '../../src/install/install.ts';
import { Replicator, type ReplicatorOptions } from '../../src/replicator/replicator.ts';
import { quoteIdent, quoteTable } from '../../src/sql/quote.ts';
import { freshDatabase } from './db.ts';

export async function setupNodes(urls: string[], db: string, ddl: string[], tables: string[]): Promise<Connection[]> {
  const conns: Connection[] = [];
  for (const [i, url] of urls.entries()) {
    const c = await connect(url);
    await c.query('DROP DATABASE IF EXISTS lww_meta');
    await freshDatabase(c, db, ddl);
    await install({ url, nodeId: i + 1, tables: tables.map((t) => `${db}.${t}`) });
    conns.push(c);
  }
  return conns;
}

export async function startReplicator(urls: string[], extra: Partial<ReplicatorOptions> = {}): Promise<Replicator> {
  const r = new Replicator({ nodes: urls, restartDelayMs: 200, capture: { heartbeatMs: 1000 }, sink: { batch: { maxDelayMs: 5 } }, ...extra });
  await r.start();
  await r.whenStreaming();
  return r;
}

/** Every row with its version (named: install adds the version column INVISIBLE, so `*` omits it). */
export async function snapshot(conn: Connection, schema: string, table: string, versionColumn = '_lww_ts'): Promise<string> {
  const [rows] = await conn.query<RowDataPacket[]>(`SELECT *, ${quoteIdent(versionColumn)} FROM ${quoteTable(schema, table)} ORDER BY 1`);
  return JSON.stringify(rows);
}

/** Waits until `check` holds (polling), or fails with the last observation. */
export async function eventually<T>(what: string, probe: () => Promise<T>, check: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T = await probe();
  while (!check(last)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    await new Promise((r) => setTimeout(r, 100));
    last = await probe();
  }
  return last;
}

/** Waits until every node holds the same table contents. */
export async function converged(conns: Connection[], schema: string, table: string, timeoutMs = 30_000): Promise<string> {
  const all = await eventually(
    `${schema}.${table} to converge`,
    () => Promise.all(conns.map((c) => snapshot(c, schema, table))),
    (snaps) => snaps.every((s) => s === snaps[0]),
    timeoutMs,
  );
  return all[0]!;
}

/** Each node's current binlog position (the start of an audit window). */
export async function binlogHeads(urls: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const url of urls) {
    const c = await connect(url);
    try {
      out.push(await currentPosition(c));
    } finally {
      await c.end();
    }
  }
  return out;
}

/** A query's rows as text, columns joined by '|', for compact assertions. */
export async function textRows(conn: Connection, sql: string): Promise<string[]> {
  const [rows] = await conn.query<RowDataPacket[]>(sql);
  return rows.map((r) => Object.values(r).map(String).join('|'));
}

/** The history audit found nothing wrong; on failure the message lists the findings. */
export function expectCleanAudit(report: Pick<AuditReport, 'counts' | 'findings'>): void {
  const why = JSON.stringify(report.findings, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
  expect(report.counts, why).toEqual({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 });
}
