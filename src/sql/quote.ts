// The one place identifiers are quoted. Values never go through here: they are always bound.

export class IdentifierError extends Error {}

/** Quotes a MySQL identifier with backticks, doubling embedded backticks. */
export function quoteIdent(name: string): string {
  if (name.length === 0) throw new IdentifierError('empty identifier');
  if (name.includes('\u0000')) throw new IdentifierError(`identifier contains a NUL character: ${JSON.stringify(name)}`);
  if ([...name].length > 64) throw new IdentifierError(`identifier longer than 64 characters: ${name}`);
  for (const ch of name) {
    if (ch.codePointAt(0)! > 0xffff) throw new IdentifierError(`identifier contains a 4-byte character: ${name}`);
  }
  return `\`${name.replaceAll('`', '``')}\``;
}

/** `schema`.`table` */
export function quoteTable(schema: string, table: string): string {
  return `${quoteIdent(schema)}.${quoteIdent(table)}`;
}

/** A comma-separated list of quoted identifiers. */
export function quoteList(names: readonly string[]): string {
  return names.map(quoteIdent).join(', ');
}

/** Placeholders for one row of n values: (?, ?, ?) */
export function placeholders(n: number): string {
  return `(${new Array(n).fill('?').join(', ')})`;
}
