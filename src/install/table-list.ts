// Which tables an install or uninstall is about: `db.t` names (or `schema`.`table` quoted) parsed
// into references, or every base table of a schema.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { InvalidOptionsError } from '../errors.ts';
import { SCHEMA_BASE_TABLES_SQL } from '../sql/install.ts';

export interface TableRef {
  schema: string;
  table: string;
}

/** One quoted identifier at the start of text: [name, rest]. */
function takeQuoted(text: string): [string, string] | undefined {
  if (!text.startsWith('`')) return undefined;
  let name = '';
  for (let i = 1; i < text.length; i++) {
    if (text[i] === '`') {
      if (text[i + 1] === '`') {
        name += '`';
        i++;
        continue;
      }
      return [name, text.slice(i + 1)];
    }
    name += text[i];
  }
  return undefined;
}

/** The whole of text as one quoted, non-empty identifier, or undefined. */
function wholeQuoted(text: string): string | undefined {
  const quoted = takeQuoted(text);
  return quoted && quoted[1] === '' && quoted[0] !== '' ? quoted[0] : undefined;
}

/**
 * Parses `db.t`, splitting at the first dot, or the quoted form `` `my.db`.`t``x` `` for names that
 * hold dots or backticks.
 */
export function parseTableRef(text: string): TableRef {
  const bad = () => new InvalidOptionsError(`table "${text}" must be written schema.table (quote names holding a dot with backticks: \`my.db\`.\`t\`)`);
  let schema: string | undefined;
  let rest: string;
  if (text.startsWith('`')) {
    const first = takeQuoted(text);
    if (!first?.[1].startsWith('.')) throw bad();
    schema = first[0];
    rest = first[1].slice(1);
  } else {
    const dot = text.indexOf('.');
    if (dot < 0) throw bad();
    schema = text.slice(0, dot);
    rest = text.slice(dot + 1);
  }
  const table = rest.startsWith('`') ? wholeQuoted(rest) : rest;
  if (!schema || !table) throw bad();
  return { schema, table };
}

/** A selector given as text: a schema (`db`, `db.*`, `` `my.db` ``) or a table (see parseTableRef). */
export function parseTableSelectorText(text: string): { schema: string; table?: string } {
  const whole = wholeQuoted(text);
  if (whole !== undefined) return { schema: whole };
  if (text.endsWith('.*')) {
    const schema = text.slice(0, -2);
    const quoted = wholeQuoted(schema);
    if (quoted !== undefined || (!schema.startsWith('`') && !schema.includes('.') && schema !== '')) return { schema: quoted ?? schema };
  }
  if (!text.startsWith('`') && !text.includes('.') && text !== '') return { schema: text };
  return parseTableRef(text);
}

export function formatTableRef(ref: TableRef): string {
  return `${ref.schema}.${ref.table}`;
}

/** Exactly one of tables / schema must be given; returns the explicit references (undefined for a schema). */
export function checkTableSelection(tables: readonly (string | TableRef)[] | undefined, schema: string | undefined): TableRef[] | undefined {
  if ((tables === undefined) === (schema === undefined)) {
    throw new InvalidOptionsError('give either tables (schema.table names) or schema (all tables of one schema), not both and not neither');
  }
  if (schema !== undefined) {
    if (typeof schema !== 'string' || schema.length === 0) throw new InvalidOptionsError('schema must be a non-empty name');
    return undefined;
  }
  if (!Array.isArray(tables) || tables.length === 0) throw new InvalidOptionsError('tables must list at least one schema.table');
  const refs = tables.map((t) => (typeof t === 'string' ? parseTableRef(t) : { schema: t.schema, table: t.table }));
  const seen = new Set<string>();
  return refs.filter((r) => {
    const key = `${r.schema}\u0000${r.table}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Base tables of a schema, in name order. */
export async function baseTablesOf(conn: Connection, schema: string): Promise<TableRef[]> {
  const [rows] = await conn.query<RowDataPacket[]>(SCHEMA_BASE_TABLES_SQL, [schema]);
  return rows.map((r) => ({ schema, table: String(r.name) }));
}
