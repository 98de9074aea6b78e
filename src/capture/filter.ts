// Which tables a capture emits: `db.table` entries, or whole schemas as `db` / `db.*`.
// Names may be backtick-quoted (`my.db`.`t`) when they contain dots.
import { InvalidOptionsError } from '../errors.ts';

export type TableSelector = string | { schema: string; table?: string };

export interface TableFilter {
  /** True when changes of schema.table are emitted. */
  includes(schema: string, table: string): boolean;
  /** True when the schema is captured whole or holds a captured table. */
  touchesSchema(schema: string): boolean;
  /** For zongji's includeSchema: whole schemas as `true`, else table lists. */
  zongjiIncludeSchema(extraSchemas: readonly string[]): Record<string, string[] | true>;
  describe(): string;
}

function splitName(entry: string): string[] {
  const parts: string[] = [];
  let i = 0;
  while (i < entry.length) {
    if (entry[i] === '`') {
      let name = '';
      i++;
      for (;;) {
        if (i >= entry.length) throw new InvalidOptionsError(`unterminated backtick in table selector ${JSON.stringify(entry)}`);
        if (entry[i] === '`') {
          if (entry[i + 1] === '`') {
            name += '`';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        name += entry[i];
        i++;
      }
      parts.push(name);
    } else {
      const dot = entry.indexOf('.', i);
      const end = dot === -1 ? entry.length : dot;
      parts.push(entry.slice(i, end));
      i = end;
    }
    if (i < entry.length) {
      if (entry[i] !== '.') throw new InvalidOptionsError(`expected "." after a quoted name in table selector ${JSON.stringify(entry)}`);
      i++;
      if (i === entry.length) parts.push('');
    }
  }
  return parts;
}

/** Parses selectors; throws InvalidOptionsError for empty or malformed entries. */
export function tableFilter(selectors: readonly TableSelector[]): TableFilter {
  if (selectors.length === 0) throw new InvalidOptionsError('capture needs at least one table or schema to read');
  const wholeSchemas = new Set<string>();
  const tables = new Map<string, Set<string>>();
  for (const sel of selectors) {
    let schema: string;
    let table: string | undefined;
    if (typeof sel === 'string') {
      const parts = splitName(sel.trim());
      if (parts.length > 2 || parts.some((p) => p === '')) {
        throw new InvalidOptionsError(`table selector ${JSON.stringify(sel)} must be "db", "db.*" or "db.table"`);
      }
      schema = parts[0]!;
      table = parts[1] === '*' ? undefined : parts[1];
    } else {
      schema = sel.schema;
      table = sel.table;
      if (!schema || table === '') throw new InvalidOptionsError(`table selector ${JSON.stringify(sel)} needs a schema (and a non-empty table when given)`);
    }
    if (table === undefined) wholeSchemas.add(schema);
    else {
      const set = tables.get(schema) ?? new Set<string>();
      tables.set(schema, set);
      set.add(table);
    }
  }
  return {
    includes: (schema, table) => wholeSchemas.has(schema) || (tables.get(schema)?.has(table) ?? false),
    touchesSchema: (schema) => wholeSchemas.has(schema) || tables.has(schema),
    zongjiIncludeSchema(extraSchemas) {
      const out: Record<string, string[] | true> = {};
      for (const [schema, set] of tables) out[schema] = [...set];
      for (const schema of [...wholeSchemas, ...extraSchemas]) out[schema] = true;
      return out;
    },
    describe() {
      return [...[...wholeSchemas].map((s) => `${s}.*`), ...[...tables].flatMap(([s, set]) => [...set].map((t) => `${s}.${t}`))].join(', ');
    },
  };
}
