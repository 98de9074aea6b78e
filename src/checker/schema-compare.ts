// How the table's definition differs between nodes, beyond which columns exist (state-check.ts
// commonColumns): the attributes that decide what a write stores and which writes clash. A
// collation decides which keys are one key, a charset which characters a column holds, NULL and
// DEFAULT what an insert without the column stores, a UNIQUE key which rows clash: nodes that
// differ there diverge on the next write even when their data is equal today. Pure.

import type { ColumnMeta } from '../model/table.ts';

/** One column's definition, as the table metadata holds it (writer/table-metadata.ts). */
export type ColumnSchema = Pick<ColumnMeta, 'name' | 'columnType' | 'nullable' | 'charset' | 'collation' | 'columnDefault' | 'extra' | 'generation'>;

export interface TableSchema {
  columns: readonly ColumnSchema[];
  /** Column lists of the table's UNIQUE keys other than the primary key. */
  uniqueKeys: readonly (readonly string[])[];
}

/** COLUMN_TYPE without integer display widths (MariaDB shows int(11), MySQL int). */
export function typeName(columnType: string): string {
  return columnType.toLowerCase().replace(/^(tinyint|smallint|mediumint|int|integer|bigint|year)\(\d+\)/, '$1');
}

/**
 * An expression as information_schema shows it, without the charset introducers MySQL adds from the
 * creating session (`_utf8mb3'n'` from a utf8mb3 session, `_utf8mb4'n'` from another): one DEFAULT.
 */
function expression(text: string): string {
  return text.replace(/_[a-z0-9]+(?=\\?')/gi, '');
}

const ATTRIBUTES: Array<[string, (c: ColumnSchema) => string]> = [
  ['type', (c) => typeName(c.columnType)],
  ['character set', (c) => c.charset ?? 'none'],
  ['collation', (c) => c.collation ?? 'none'],
  ['nullable', (c) => (c.nullable ? 'NULL' : 'NOT NULL')],
  ['default', (c) => (c.columnDefault === null || c.columnDefault === undefined ? 'none' : JSON.stringify(expression(c.columnDefault)))],
  ['extra', (c) => c.extra?.toLowerCase() || 'none'],
  ['generated as', (c) => (c.generation ? expression(c.generation) : 'not generated')],
];

/** The differences of each node's definition from node 0's, for the columns both have and the UNIQUE keys. */
export function schemaDifferences(perNode: readonly TableSchema[], label: (node: number) => string): string[] {
  const out: string[] = [];
  const first = perNode[0]!;
  const uniqueText = (s: TableSchema) => s.uniqueKeys.map((k) => `(${k.join(', ')})`).sort();
  perNode.forEach((other, i) => {
    if (i === 0) return;
    for (const c of first.columns) {
      const o = other.columns.find((x) => x.name === c.name);
      if (!o) continue;
      for (const [what, of] of ATTRIBUTES) {
        if (of(c) !== of(o)) {
          const note = what === 'type' ? ' (data compared by value)' : '';
          out.push(`column ${c.name}: ${what} ${of(c)} on node ${label(0)}, ${of(o)} on node ${label(i)}${note}`);
        }
      }
    }
    const mine = uniqueText(first);
    const theirs = uniqueText(other);
    for (const k of mine) if (!theirs.includes(k)) out.push(`UNIQUE key ${k} on node ${label(0)} only, not on node ${label(i)}`);
    for (const k of theirs) if (!mine.includes(k)) out.push(`UNIQUE key ${k} on node ${label(i)} only, not on node ${label(0)}`);
  });
  return out;
}
