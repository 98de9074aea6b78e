// Opens mysql2 connections with the settings every part of the project relies on: exact numbers
// (bigints and decimals as strings), dates as strings, UTC, FOUND_ROWS off (so affected-row counts
// mean "changed"), timeouts on connect and on every query.
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
}

const EXACT: ConnectionOptions = {
  supportBigNumbers: true,
  bigNumberStrings: true,
  decimalNumbers: false,
  dateStrings: true,
  jsonStrings: true,
  timezone: 'Z',
  charset: 'UTF8MB4_GENERAL_CI',
  flags: ['-FOUND_ROWS'],
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
  });
  try {
    await conn.query("SET time_zone = '+00:00'");
    for (const stmt of options.init ?? []) await conn.query(stmt);
  } catch (err) {
    conn.destroy();
    throw err;
  }
  return conn;
}
