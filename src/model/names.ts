// Derived names of metadata objects. Identifiers are at most 64 characters and BMP-only, so long or
// ambiguous natural names fall back to a short hash.
import { createHash } from 'node:crypto';

function fitsIdentifier(name: string): boolean {
  return [...name].length <= 64 && [...name].every((ch) => ch.codePointAt(0)! <= 0xffff);
}

/** 12 hex digits of the text's SHA-256: a name part that fits any identifier. */
export function shortHash(text: string): string {
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

/**
 * Claim table of one secondary UNIQUE key (`claim__<schema>__<table>__<index>` when unambiguous):
 * the values that rows of the table held and gave up, with the version they held them at. Every
 * name starts with `claim_`, which capture uses to pass over their row events.
 */
export function claimTableName(schema: string, table: string, index: string): string {
  const natural = `claim__${schema}__${table}__${index}`;
  if (fitsIdentifier(natural) && ![schema, table, index].some((n) => n.includes('__'))) return natural;
  const readable = [...`${schema}_${table}_${index}`]
    .filter((ch) => /[A-Za-z0-9_]/.test(ch))
    .join('')
    .slice(0, 32);
  return `claim_${readable}_${shortHash(`${schema}\u0000${table}\u0000${index}`)}`;
}

/** Whether a metadata table is a claim table (see claimTableName). */
export function isClaimTable(name: string): boolean {
  return name.startsWith('claim_');
}

/** Trigger names for a table (kept in the table's own schema, as MySQL requires). */
export function triggerName(table: string, kind: 'bi' | 'ai' | 'bu' | 'au' | 'ad' | 'bd'): string {
  const natural = `lww_${kind}__${table}`;
  if (fitsIdentifier(natural)) return natural;
  return `lww_${kind}_${shortHash(table)}`;
}

/** The metadata table holding this node's apply secret (see sql/meta.sql). */
export const APPLY_SECRET_TABLE = 'apply_secret';
