// Derived names of metadata objects. Identifiers are at most 64 characters and BMP-only, so long or
// ambiguous natural names fall back to a short hash.
import { createHash } from 'node:crypto';

function fitsIdentifier(name: string): boolean {
  return [...name].length <= 64 && [...name].every((ch) => ch.codePointAt(0)! <= 0xffff);
}

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12);
}

/** Tombstone table name in the metadata schema for schema.table: `tomb__<schema>__<table>` when unambiguous. */
export function tombstoneTableName(schema: string, table: string): string {
  const natural = `tomb__${schema}__${table}`;
  if (fitsIdentifier(natural) && !schema.includes('__') && !table.includes('__')) return natural;
  const readable = [...`${schema}_${table}`]
    .filter((ch) => /[A-Za-z0-9_]/.test(ch))
    .join('')
    .slice(0, 32);
  return `tomb_${readable}_${shortHash(`${schema}\u0000${table}`)}`;
}

/** Trigger names for a table (kept in the table's own schema, as MySQL requires). */
export function triggerName(table: string, kind: 'bi' | 'ai' | 'bu' | 'au' | 'ad' | 'bd'): string {
  const natural = `lww_${kind}__${table}`;
  if (fitsIdentifier(natural)) return natural;
  return `lww_${kind}_${shortHash(table)}`;
}

/** The metadata table holding this node's apply secret (see sql/meta.sql). */
export const APPLY_SECRET_TABLE = 'apply_secret';
