// Which ON DUPLICATE KEY UPDATE form a server takes: MySQL >= 8.0.19 the row alias, others VALUES().

export type Dialect = 'mysql' | 'mariadb' | 'tidb';
export type DialectOption = Dialect | 'auto';

/** Picks the dialect from `SELECT VERSION()`. Old MySQL (< 8.0.19) gets the VALUES() form. */
export function dialectFromVersion(version: string): Dialect {
  if (/mariadb/i.test(version)) return 'mariadb';
  if (/tidb/i.test(version)) return 'tidb';
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  if (m) {
    const [maj, min, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
    const atLeast8019 = maj > 8 || (maj === 8 && (min > 0 || patch >= 19));
    if (!atLeast8019) return 'mariadb';
  }
  return 'mysql';
}

/** True when the dialect uses the `AS alias` row alias instead of VALUES(col). */
export function usesRowAlias(dialect: Dialect): boolean {
  return dialect === 'mysql';
}
