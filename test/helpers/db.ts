// Small helpers for integration tests: connections and table snapshots read exactly.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { connect } from '../../src/db/connection.ts';
import { quoteIdent, quoteTable } from '../../src/sql/quote.ts';

export async function admin(url: string): Promise<Connection> {
  return connect(url);
}

/** Drops and recreates a database, then runs the given DDL inside it. */
export async function freshDatabase(conn: Connection, db: string, ddl: string[] = []): Promise<void> {
  await conn.query(`DROP DATABASE IF EXISTS ${quoteIdent(db)}`);
  await conn.query(`CREATE DATABASE ${quoteIdent(db)} CHARACTER SET utf8mb4`);
  for (const stmt of ddl) await conn.query(stmt.replaceAll('{{db}}', quoteIdent(db)));
}

/** All rows of a table ordered by the given columns, as the server returns them. */
export async function rowsOf(conn: Connection, schema: string, table: string, orderBy: string[]): Promise<RowDataPacket[]> {
  const [rows] = await conn.query<RowDataPacket[]>(`SELECT * FROM ${quoteTable(schema, table)} ORDER BY ${orderBy.map(quoteIdent).join(', ')}`);
  return rows;
}
