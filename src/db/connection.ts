// Opens mysql2 connections with the settings every part of the project relies on: exact numbers
// (bigints and decimals as strings), dates as strings, UTC, FOUND_ROWS off (so affected-row counts
// mean "changed"), timeouts on connect and on every query, and a bounded prepared-statement cache.
import mysql from 'mysql2/promise';
import type { Connection, ConnectionOptions } from 'mysql2/promise';
import { parseUrl, redactUrl } from './url.ts';

export type Target = string | ConnectionOptions;

export interface ConnectOptions {
  connectTimeoutMs?: number;
  /** Applied to every query through `query`/`execute` helpers below. */
  queryTimeoutMs?: number;
  /** Statements run once after connecting (session setup). */
  init?: string[];
  multipleStatements?: boolean;
  /**
   * mysql2 captures the caller's stack on every query and execute to put it on an error (default
   * on). The sink's apply connections turn it off: a per-statement cost on the hot path, and their
   * errors are wrapped with the table and statement kind anyway.
   */
  traceCallers?: boolean;
}

/** Server-side prepared statements one connection keeps open (mysql2 closes the least recently used). */
export const MAX_PREPARED_STATEMENTS = 64;

const EXACT: ConnectionOptions = {
  supportBigNumbers: true,
  bigNumberStrings: true,
  decimalNumbers: false,
  dateStrings: true,
  jsonStrings: true,
  timezone: 'Z',
  charset: 'UTF8MB4_GENERAL_CI',
  flags: ['-FOUND_ROWS'],
  // mysql2 keeps every statement text it prepared open on the server, 16,000 per connection by
  // default; coalesced batches of every row count are distinct texts, so a replicator with a few
  // connections would take the server's whole max_prepared_stmt_count (16,382 for all sessions) and
  // the application's own PREPAREs would fail. The least recently used are closed past this bound.
  maxPreparedStatements: MAX_PREPARED_STATEMENTS,
};

export { parseUrl, redactUrl } from './url.ts';

export function describeTarget(target: Target): string {
  if (typeof target === 'string') return redactUrl(target);
  return `${target.host ?? 'localhost'}:${target.port ?? 3306}`;
}

export async function connect(target: Target, options: ConnectOptions = {}): Promise<Connection> {
  const base = typeof target === 'string' ? parseUrl(target) : target;
  const conn = await mysql.createConnection({
    ...base,
    ...EXACT,
    connectTimeout: options.connectTimeoutMs ?? 10_000,
    multipleStatements: options.multipleStatements ?? false,
    trace: options.traceCallers ?? true,
  });
  try {
    // group_concat_max_len: the checker's JSON type signatures (sql/json-types.ts) are GROUP_CONCATs.
    await conn.query("SET time_zone = '+00:00', group_concat_max_len = 16777216");
    for (const stmt of options.init ?? []) await conn.query(stmt);
  } catch (err) {
    conn.destroy();
    throw err;
  }
  return conn;
}
