// What a server says about itself: engine, version, server_id.
import mysql from 'mysql2/promise';
import type { Engine } from './types.ts';

/** Anything that runs a query the mysql2 way (a connection or a pool). */
export type Queryable = Pick<mysql.Connection, 'query'>;

export interface ServerIdentity {
  engine: Engine;
  version: string;
  serverId: number;
}

export interface ProbeTarget {
  host: string;
  port: number;
  user: string;
  password: string;
}

/** MariaDB says so in VERSION() (e.g. "10.11.19-MariaDB-0+deb12u1-log"); anything else is MySQL. */
export function engineFromVersion(version: string): Engine {
  return /mariadb/i.test(version) ? 'mariadb' : 'mysql';
}

export async function detectEngine(conn: Queryable): Promise<Engine> {
  const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT VERSION() AS version');
  return engineFromVersion(String(rows[0]?.version ?? ''));
}

/** Connects once (short timeouts) and reads the server's identity. */
export async function identify(target: ProbeTarget, connectTimeoutMs = 2000): Promise<ServerIdentity> {
  const { host, port, user, password } = target;
  const conn = await mysql.createConnection({ host, port, user, password, connectTimeout: connectTimeoutMs });
  try {
    const [rows] = await conn.query<mysql.RowDataPacket[]>({
      sql: 'SELECT VERSION() AS version, @@server_id AS serverId',
      timeout: 10_000,
    });
    const version = String(rows[0]?.version ?? '');
    return { engine: engineFromVersion(version), version, serverId: Number(rows[0]?.serverId) };
  } finally {
    await conn.end().catch(() => undefined);
  }
}
