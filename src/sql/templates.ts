// Renders the DDL files of sql/ with quoted identifiers, so the code runs exactly what an operator reads.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

const SQL_DIR = fileURLToPath(new URL('../../sql/', import.meta.url));
const cache = new Map<string, string>();

function template(file: string): string {
  let text = cache.get(file);
  if (text === undefined) {
    text = readFileSync(SQL_DIR + file, 'utf8');
    cache.set(file, text);
  }
  return text;
}

function stripComments(sql: string): string {
  return sql
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n')
    .trim();
}

function render(file: string, vars: Record<string, string>): string[] {
  // Comments go before substitution: a value spanning lines (a composite key's column list) must
  // not spill a comment's placeholder into the statement.
  return template(file)
    .split(/^;\s*$/m)
    .map(stripComments)
    .filter((s) => s.length > 0)
    .map((stmt) =>
      stmt.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
        const v = vars[key];
        if (v === undefined) throw new Error(`template ${file} needs {{${key}}}`);
        return v;
      }),
    );
}

/** The statements that create the metadata schema and its tables. */
export function metaSchemaDdl(metaSchema: string): string[] {
  return render('meta.sql', { meta: quoteIdent(metaSchema) });
}

export interface KeyColumnDef {
  name: string;
  /** information_schema COLUMN_TYPE, as the server reported it. */
  columnType: string;
  charset: string | null;
  collation: string | null;
}

const SAFE_NAME = /^[A-Za-z0-9_]+$/;

/** `name type CHARACTER SET cs COLLATE coll NOT NULL` of one tombstone key column. */
export function columnDefinition(col: KeyColumnDef): string {
  let def = `${quoteIdent(col.name)} ${col.columnType}`;
  if (col.charset && SAFE_NAME.test(col.charset)) def += ` CHARACTER SET ${col.charset}`;
  if (col.collation && SAFE_NAME.test(col.collation)) def += ` COLLATE ${col.collation}`;
  return `${def} NOT NULL`;
}

/** CREATE TABLE IF NOT EXISTS for one table's tombstones. */
export function tombstoneTableDdl(metaSchema: string, tombstoneTable: string, key: KeyColumnDef[], versionColumn: string): string {
  const [stmt] = render('tombstone.sql', {
    table: quoteTable(metaSchema, tombstoneTable),
    key_columns: key.map(columnDefinition).join(',\n  '),
    version_column: quoteIdent(versionColumn),
    primary_key: quoteList(key.map((k) => k.name)),
  });
  return stmt!;
}

/** CREATE TABLE IF NOT EXISTS for one UNIQUE key's claims (sql/claims.sql). */
export function claimTableDdl(metaSchema: string, claimTable: string, values: KeyColumnDef[], owners: KeyColumnDef[], versionColumn: string): string {
  const [stmt] = render('claims.sql', {
    table: quoteTable(metaSchema, claimTable),
    value_columns: values.map(columnDefinition).join(',\n  '),
    owner_columns: owners.map(columnDefinition).join(',\n  '),
    version_column: quoteIdent(versionColumn),
    primary_key: quoteList(values.map((k) => k.name)),
  });
  return stmt!;
}
