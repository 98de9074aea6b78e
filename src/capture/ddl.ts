// Recognizes DDL in binlog QUERY events and names the tables it touches, so capture can tell the
// sink to refresh its metadata; and recognizes row changes logged as statements (parseDml), which
// capture cannot turn into exact changes. Not a SQL parser: it reads the statement head and names.

export type DdlKind =
  | 'create_table'
  | 'alter_table'
  | 'drop_table'
  | 'rename_table'
  | 'truncate_table'
  | 'create_index'
  | 'drop_index'
  | 'create_schema'
  | 'alter_schema'
  | 'drop_schema';

export interface DdlStatement {
  kind: DdlKind;
  /** Tables named by the statement (schema defaulted from the event); empty for schema-level DDL. */
  tables: Array<{ schema: string; table: string }>;
  /** Schema-level DDL: the schema it names. */
  schema?: string;
  /** ALTER TABLE that removes, swaps or brings in rows without row events: the clause (TRUNCATE / DROP / EXCHANGE PARTITION, MariaDB's CONVERT PARTITION / TABLE, DISCARD / IMPORT TABLESPACE). */
  removesRows?: string;
}

type Token = { kind: 'word'; text: string; quoted: boolean } | { kind: 'punct'; text: string };

/** Splits the statement into identifiers/keywords and punctuation, dropping comments and string literals. */
function tokenize(sql: string, limit = 400): Token[] {
  const out: Token[] = [];
  let i = 0;
  // Inside an executable comment (/*! … */, MariaDB's /*M! … */): its text is part of the statement.
  let executable = false;
  while (i < sql.length && out.length < limit) {
    const ch = sql[i]!;
    if (/\s/.test(ch)) {
      i++;
    } else if (ch === '/' && sql[i + 1] === '*' && /^\/\*M?!/.test(sql.slice(i, i + 4))) {
      i += sql[i + 2] === 'M' ? 4 : 3;
      while (i < sql.length && /\d/.test(sql[i]!)) i++;
      executable = true;
    } else if (executable && ch === '*' && sql[i + 1] === '/') {
      i += 2;
      executable = false;
    } else if (ch === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end === -1 ? sql.length : end + 2;
    } else if ((ch === '-' && sql[i + 1] === '-' && /\s/.test(sql[i + 2] ?? ' ')) || ch === '#') {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end + 1;
    } else if (ch === '`') {
      let text = '';
      i++;
      while (i < sql.length) {
        if (sql[i] === '`') {
          if (sql[i + 1] === '`') {
            text += '`';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        text += sql[i];
        i++;
      }
      out.push({ kind: 'word', text, quoted: true });
    } else if (ch === "'" || ch === '"') {
      i++;
      while (i < sql.length && sql[i] !== ch) i += sql[i] === '\\' ? 2 : 1;
      i++;
      out.push({ kind: 'punct', text: 'literal' });
    } else if (/[\w$\u0080-\uffff]/.test(ch)) {
      let j = i;
      while (j < sql.length && /[\w$\u0080-\uffff]/.test(sql[j]!)) j++;
      out.push({ kind: 'word', text: sql.slice(i, j), quoted: false });
      i = j;
    } else {
      out.push({ kind: 'punct', text: ch });
      i++;
    }
  }
  return out;
}

class Cursor {
  i = 0;
  constructor(private readonly tokens: Token[]) {}
  peekKeyword(...words: string[]): boolean {
    const t = this.tokens[this.i];
    return t?.kind === 'word' && !t.quoted && words.includes(t.text.toUpperCase());
  }
  /** Consumes the keyword sequence when it is next. */
  accept(...words: string[]): boolean {
    for (let k = 0; k < words.length; k++) {
      const t = this.tokens[this.i + k];
      if (!(t?.kind === 'word' && !t.quoted && t.text.toUpperCase() === words[k])) return false;
    }
    this.i += words.length;
    return true;
  }
  /** The first of the keyword sequences found from here on (unquoted words); the cursor stays. */
  findSequence(...sequences: string[][]): string[] | undefined {
    for (let k = this.i; k < this.tokens.length; k++) {
      const found = sequences.find((seq) =>
        seq.every((w, n) => {
          const t = this.tokens[k + n];
          return t?.kind === 'word' && !t.quoted && t.text.toUpperCase() === w;
        }),
      );
      if (found) return found;
    }
    return undefined;
  }
  /** Moves past the next occurrence of the keyword sequence; false (cursor unmoved) when there is none. */
  skipTo(...words: string[]): boolean {
    const start = this.i;
    for (; this.i < this.tokens.length; this.i++) if (this.accept(...words)) return true;
    this.i = start;
    return false;
  }
  skipAny(...words: string[]): void {
    while (this.peekKeyword(...words)) this.i++;
  }
  punct(text: string): boolean {
    const t = this.tokens[this.i];
    if (t?.kind === 'punct' && t.text === text) {
      this.i++;
      return true;
    }
    return false;
  }
  /** `name` or `schema`.`name`. */
  qualifiedName(defaultSchema: string): { schema: string; table: string } | undefined {
    const first = this.tokens[this.i];
    if (first?.kind !== 'word') return undefined;
    this.i++;
    if (this.punct('.')) {
      const second = this.tokens[this.i];
      if (second?.kind !== 'word') return undefined;
      this.i++;
      return { schema: first.text, table: second.text };
    }
    return { schema: defaultSchema, table: first.text };
  }
  nameList(defaultSchema: string): Array<{ schema: string; table: string }> {
    const names: Array<{ schema: string; table: string }> = [];
    for (;;) {
      const n = this.qualifiedName(defaultSchema);
      if (!n) break;
      names.push(n);
      if (!this.punct(',')) break;
    }
    return names;
  }
  word(): string | undefined {
    const t = this.tokens[this.i];
    if (t?.kind !== 'word') return undefined;
    this.i++;
    return t.text;
  }
}

/**
 * The DDL a QUERY event carries, or undefined for anything else (BEGIN, COMMIT, GRANT, triggers...).
 * `defaultSchema` is the event's current database, used for unqualified names.
 */
export function parseDdl(query: string, defaultSchema: string): DdlStatement | undefined {
  const c = new Cursor(tokenize(query));
  if (c.accept('CREATE')) {
    c.accept('OR', 'REPLACE');
    c.skipAny('TEMPORARY');
    if (c.accept('TABLE')) {
      c.accept('IF', 'NOT', 'EXISTS');
      const t = c.qualifiedName(defaultSchema);
      return t ? { kind: 'create_table', tables: [t] } : undefined;
    }
    if (c.accept('DATABASE') || c.accept('SCHEMA')) {
      c.accept('IF', 'NOT', 'EXISTS');
      const schema = c.word();
      return schema ? { kind: 'create_schema', tables: [], schema } : undefined;
    }
    c.skipAny('ONLINE', 'OFFLINE', 'UNIQUE', 'FULLTEXT', 'SPATIAL');
    if (c.accept('INDEX')) return indexTarget(c, 'create_index', defaultSchema);
    return undefined;
  }
  if (c.accept('ALTER')) {
    c.skipAny('ONLINE', 'OFFLINE', 'IGNORE');
    if (c.accept('TABLE')) {
      c.accept('IF', 'EXISTS');
      const t = c.qualifiedName(defaultSchema);
      if (!t) return undefined;
      // Partition maintenance that deletes rows (or swaps them with another table's) logs no row events.
      // MariaDB: CONVERT PARTITION moves a partition's rows out to a table, CONVERT TABLE moves a table's rows in;
      // DISCARD/IMPORT (PARTITION …) TABLESPACE drop or bring in rows as files.
      const removesRows = c.findSequence(
        ['TRUNCATE', 'PARTITION'],
        ['DROP', 'PARTITION'],
        ['EXCHANGE', 'PARTITION'],
        ['CONVERT', 'PARTITION'],
        ['CONVERT', 'TABLE'],
        ['DISCARD', 'PARTITION'],
        ['IMPORT', 'PARTITION'],
        ['DISCARD', 'TABLESPACE'],
        ['IMPORT', 'TABLESPACE'],
      );
      if (!removesRows) return { kind: 'alter_table', tables: [t] };
      const tables = [t];
      if (removesRows.join(' ') === 'EXCHANGE PARTITION' && c.skipTo('WITH', 'TABLE')) {
        const other = c.qualifiedName(defaultSchema);
        if (other) tables.push(other);
      }
      if (removesRows.join(' ') === 'CONVERT TABLE' && c.skipTo('CONVERT', 'TABLE')) {
        const other = c.qualifiedName(defaultSchema);
        if (other) tables.push(other);
      }
      return { kind: 'alter_table', tables, removesRows: removesRows.join(' ') };
    }
    if (c.accept('DATABASE') || c.accept('SCHEMA')) {
      const schema = c.word();
      return { kind: 'alter_schema', tables: [], schema: schema && !/^(DEFAULT|CHARACTER|CHARSET|COLLATE|READ|ENCRYPTION|COMMENT)$/i.test(schema) ? schema : defaultSchema };
    }
    return undefined;
  }
  if (c.accept('DROP')) {
    c.skipAny('TEMPORARY');
    if (c.accept('TABLE') || c.accept('TABLES')) {
      c.accept('IF', 'EXISTS');
      const tables = c.nameList(defaultSchema);
      return tables.length ? { kind: 'drop_table', tables } : undefined;
    }
    if (c.accept('DATABASE') || c.accept('SCHEMA')) {
      c.accept('IF', 'EXISTS');
      const schema = c.word();
      return schema ? { kind: 'drop_schema', tables: [], schema } : undefined;
    }
    c.skipAny('ONLINE', 'OFFLINE');
    if (c.accept('INDEX')) return indexTarget(c, 'drop_index', defaultSchema);
    return undefined;
  }
  if (c.accept('RENAME')) {
    if (!(c.accept('TABLE') || c.accept('TABLES'))) return undefined;
    const tables: Array<{ schema: string; table: string }> = [];
    for (;;) {
      const from = c.qualifiedName(defaultSchema);
      if (!from || !c.accept('TO')) break;
      const to = c.qualifiedName(defaultSchema);
      if (!to) break;
      tables.push(from, to);
      if (!c.punct(',')) break;
    }
    return tables.length ? { kind: 'rename_table', tables } : undefined;
  }
  if (c.accept('TRUNCATE')) {
    c.accept('TABLE');
    const t = c.qualifiedName(defaultSchema);
    return t ? { kind: 'truncate_table', tables: [t] } : undefined;
  }
  return undefined;
}

function indexTarget(c: Cursor, kind: 'create_index' | 'drop_index', defaultSchema: string): DdlStatement | undefined {
  c.accept('IF', 'NOT', 'EXISTS');
  c.accept('IF', 'EXISTS');
  if (!c.word()) return undefined;
  // Skip an optional index type (USING BTREE) before ON.
  if (c.accept('USING')) c.word();
  if (!c.accept('ON')) return undefined;
  const t = c.qualifiedName(defaultSchema);
  return t ? { kind, tables: [t] } : undefined;
}

export interface DmlStatement {
  /** INSERT, REPLACE, UPDATE, DELETE or LOAD. */
  verb: string;
  /**
   * Every name the statement could refer to as a table (schema defaulted from the event): all
   * `a.b` pairs and all bare words. An over-approximation on purpose: a statement-logged change of
   * a captured table must never pass unnoticed.
   */
  names: Array<{ schema: string; table: string }>;
}

/** A data change logged as a statement (binlog_format STATEMENT or MIXED in the writing session), or undefined. */
export function parseDml(query: string, defaultSchema: string): DmlStatement | undefined {
  const tokens = tokenize(query, 4000);
  let i = 0;
  // WITH ... UPDATE/DELETE: the verb follows the common table expressions.
  const first = tokens[0];
  if (first?.kind !== 'word' || first.quoted) return undefined;
  let verb = first.text.toUpperCase();
  if (verb === 'WITH') {
    const next = tokens.findIndex((t, k) => k > 0 && t.kind === 'word' && !t.quoted && /^(INSERT|REPLACE|UPDATE|DELETE)$/i.test(t.text));
    if (next < 0) return undefined;
    verb = (tokens[next] as { text: string }).text.toUpperCase();
  }
  if (!['INSERT', 'REPLACE', 'UPDATE', 'DELETE', 'LOAD'].includes(verb)) return undefined;
  const names: Array<{ schema: string; table: string }> = [];
  for (; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.kind !== 'word') continue;
    const dot = tokens[i + 1];
    const second = tokens[i + 2];
    if (dot?.kind === 'punct' && dot.text === '.' && second?.kind === 'word') {
      names.push({ schema: t.text, table: second.text });
      i += 2;
    } else names.push({ schema: defaultSchema, table: t.text });
  }
  return { verb, names };
}
