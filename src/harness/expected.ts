// Compares what the nodes hold with the state the writers' acknowledged writes imply.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { selectAllSbtestSql } from '../sql/workload.ts';
import type { ExpectedRow, RowValues } from './workload.ts';

export interface ExpectationMismatch {
  node: string;
  key: string;
  expected: { version: string; row: RowValues | null };
  actual: { version: string; row: RowValues } | null;
}

/** Every key whose state on the node differs from the expected one (version and values). */
export async function compareWithExpected(
  conn: Connection,
  node: string,
  schema: string,
  tables: string[],
  versionColumn: string,
  expected: Map<string, ExpectedRow>,
): Promise<ExpectationMismatch[]> {
  const out: ExpectationMismatch[] = [];
  const seen = new Set<string>();
  for (const table of tables) {
    const [rows] = await conn.query<RowDataPacket[]>(selectAllSbtestSql(schema, table, versionColumn));
    for (const r of rows) {
      const key = `${table}/${r.id}`;
      seen.add(key);
      const actual = { version: String(r.v), row: { k: Number(r.k), c: String(r.c), pad: String(r.pad) } };
      const exp = expected.get(key);
      const same = exp?.row && exp.version.toString() === actual.version && exp.row.k === actual.row.k && exp.row.c === actual.row.c && exp.row.pad === actual.row.pad;
      if (!same) out.push({ node, key, expected: { version: exp?.version.toString() ?? 'none', row: exp?.row ?? null }, actual });
    }
  }
  for (const [key, exp] of expected) {
    if (exp.row && !seen.has(key) && tables.includes(key.slice(0, key.indexOf('/')))) {
      out.push({ node, key, expected: { version: exp.version.toString(), row: exp.row }, actual: null });
    }
  }
  return out;
}
