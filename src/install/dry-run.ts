// `install --dry-run`: install runs against a connection that executes reads (the catalog, the
// registry) and records every other statement instead of running it, so the plan is exactly the
// SQL install would send. A version column that would be added is shown to the later catalog reads
// as if it existed, so the triggers and the tombstone table are planned for it.
import type { Connection } from 'mysql2/promise';
import { COLUMNS_SQL } from '../sql/introspect.ts';
import { quoteTable } from '../sql/quote.ts';

export interface PlannedStatement {
  sql: string;
  values?: unknown[];
}

const READ = /^\s*(SELECT|SHOW|DESCRIBE|EXPLAIN|WITH)\b/i;
// Session-only settings (install's own @lww_apply and sql_mode) change nothing on the server.
const SESSION = /^\s*SET\s+(@|SESSION\b)/i;

function addedColumn(planned: readonly PlannedStatement[], schema: string, table: string): string | undefined {
  const prefix = `ALTER TABLE ${quoteTable(schema, table)} ADD COLUMN \``;
  const stmt = planned.find((p) => p.sql.startsWith(prefix));
  if (!stmt) return undefined;
  const rest = stmt.sql.slice(prefix.length);
  return rest.slice(0, rest.indexOf('` BIGINT')).replaceAll('``', '`');
}

// The apply secret install renders into the triggers (src/sql/triggers.ts) is not printed. The plan
// stays runnable: a literal that never matches only sends the triggers to the secret table.
const RENDERED_SECRET = /_binary'[0-9A-Fa-f]{16,128}'/g;
const SECRET_NOT_SHOWN = "_binary'(the apply secret, not shown)'";

const NOTHING_WRITTEN = { affectedRows: 0, changedRows: 0, insertId: 0, warningStatus: 0, info: '', fieldCount: 0, serverStatus: 0 };
/** Install's reads of the apply secret (entering the apply session, rendering the triggers). */
const APPLY_SECRET_READ = /\bapply_secret`? WHERE singleton = 1/;
/** ER_NO_SUCH_TABLE, ER_BAD_DB_ERROR. */
const MISSING = new Set([1146, 1049]);
const PLANNED_SECRET = '0'.repeat(64);

/** A view of `conn` that runs reads and appends every write to `planned` instead. */
export function recordingConnection(conn: Connection, planned: PlannedStatement[]): Connection {
  const query = async (sql: string | { sql: string }, values?: unknown[]) => {
    const text = typeof sql === 'string' ? sql : sql.sql;
    if (READ.test(text) || SESSION.test(text)) {
      let result: Awaited<ReturnType<Connection['query']>>;
      try {
        result = await conn.query(text, values);
      } catch (err) {
        // A node never installed has no secret yet (a planned statement creates it): a stand-in,
        // never shown (RENDERED_SECRET), lets the triggers be planned. Before, the plan failed here.
        if (!APPLY_SECRET_READ.test(text) || !MISSING.has((err as { errno?: number }).errno ?? 0)) throw err;
        return SESSION.test(text) ? [NOTHING_WRITTEN, undefined] : [[{ secret: PLANNED_SECRET }], []];
      }
      if (text === COLUMNS_SQL && Array.isArray(values)) {
        const column = addedColumn(planned, String(values[0]), String(values[1]));
        const rows = result[0] as unknown as Record<string, unknown>[];
        if (column && !rows.some((r) => r.name === column)) {
          rows.push({ name: column, dataType: 'bigint', columnType: 'bigint unsigned', nullable: 'NO', extra: 'INVISIBLE', generation: '', charset: null, collation: null });
        }
      }
      return result;
    }
    const shown = text.replace(RENDERED_SECRET, SECRET_NOT_SHOWN);
    planned.push(values === undefined ? { sql: shown } : { sql: shown, values });
    return [NOTHING_WRITTEN, undefined];
  };
  return new Proxy(conn, {
    get(target, prop, receiver) {
      if (prop === 'query' || prop === 'execute') return query;
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** The plan as SQL an operator can read or feed to the mysql client (values inlined, `;;` as delimiter). */
export function formatPlan(conn: Connection, planned: readonly PlannedStatement[]): string {
  if (planned.length === 0) return '-- nothing to do: every table is installed as asked';
  const lines = ['-- install --dry-run: nothing was changed; install would run these statements, in order', 'DELIMITER ;;'];
  for (const p of planned) {
    if (/^\s*UPDATE\b[\s\S]*\bLIMIT\b/i.test(p.sql)) lines.push('-- repeated until it changes no row');
    lines.push(`${p.values === undefined ? p.sql : conn.format(p.sql, p.values)};;`);
  }
  lines.push('DELIMITER ;');
  return lines.join('\n');
}
