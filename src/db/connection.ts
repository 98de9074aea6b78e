// Opens mysql2 connections with the settings every part of the project relies on: exact numbers
// (bigints and decimals as strings), dates as strings, UTC, FOUND_ROWS off (so affected-row counts
// mean "changed"), timeouts on connect and on every query.
import mysql from 'mysql2/promise';
import type { Connection, ConnectionOptions } from 'mysql2/promise';

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

/** Parses a mysql:// URL into connection options (user, password, host, port, database). */
export function parseUrl(url: string): ConnectionOptions {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error(`not a valid connection URL: ${redactUrl(url)}`);
  }
  if (u.protocol !== 'mysql:' && u.protocol !== 'mariadb:') {
    throw new Error(`connection URL must start with mysql:// (got ${u.protocol}//)`);
  }
  const opts: ConnectionOptions = {
    host: u.hostname || '127.0.0.1',
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username || 'root'),
    password: decodeURIComponent(u.password || ''),
  };
  const db = u.pathname.replace(/^\//, '');
  if (db) opts.database = decodeURIComponent(db);
  return opts;
}

/** The URL with its password replaced, for logs and errors. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

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
