// Server errors that mean "this account lacks a privilege": named in words an admin can act on
// (which privilege, on what), pointing at README "Privileges". Never a hint to relax server settings
// (e.g. log_bin_trust_function_creators): the remedy is a GRANT.

const PRIVILEGE_ERRNOS = new Set([
  1044, // ER_DBACCESS_DENIED_ERROR: Access denied for user … to database …
  1142, // ER_TABLEACCESS_DENIED_ERROR: INSERT command denied to user … for table …
  1143, // ER_COLUMNACCESS_DENIED_ERROR
  1227, // ER_SPECIFIC_ACCESS_DENIED_ERROR: you need (at least one of) the … privilege(s)
  1370, // ER_PROCACCESS_DENIED_ERROR
  1419, // ER_BINLOG_CREATE_ROUTINE_NEED_SUPER (creating a trigger with binary logging on)
]);

interface ServerError {
  errno?: number;
  sql?: string;
  sqlMessage?: string;
  message: string;
}

function serverError(err: unknown): ServerError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const errno = (e as { errno?: unknown }).errno;
    if (typeof errno === 'number' && PRIVILEGE_ERRNOS.has(errno)) return e as ServerError;
  }
  return undefined;
}

/** True when the error (or its cause) is a missing privilege: retrying cannot fix it. */
export function isPrivilegeError(err: unknown): boolean {
  return serverError(err) !== undefined;
}

/** The statement's privilege, from its first words (CREATE TABLE → CREATE, INSERT → INSERT, …). */
function privilegeOf(sql: string | undefined): string | undefined {
  const m = /^\s*(?:\/\*.*?\*\/\s*)*(CREATE\s+TRIGGER|CREATE\s+TABLE|CREATE\s+DATABASE|CREATE\s+SCHEMA|DROP\s+TRIGGER|LOCK\s+TABLES?|INSERT|REPLACE|UPDATE|DELETE|SELECT|ALTER|DROP|CREATE)\b/i.exec(sql ?? '');
  if (!m) return undefined;
  const verb = m[1]!.toUpperCase().replace(/\s+/g, ' ');
  if (verb === 'CREATE TRIGGER' || verb === 'DROP TRIGGER') return 'TRIGGER';
  if (verb.startsWith('CREATE')) return 'CREATE';
  if (verb === 'REPLACE') return 'INSERT and DELETE';
  if (verb.startsWith('LOCK')) return 'LOCK TABLES';
  return verb;
}

/** An explanation naming the missing privilege, or undefined when the error is not about privileges. */
export function explainPrivilegeError(err: unknown): string | undefined {
  const e = serverError(err);
  if (!e) return undefined;
  const text = e.sqlMessage ?? e.message;
  const see = 'grant it (README, "Privileges", lists what each command needs)';
  if (e.errno === 1419) {
    return `creating the LWW triggers was refused: the installing account needs the TRIGGER privilege on the table's schema and, as the triggers' definer, SELECT, INSERT and UPDATE on the metadata schema; with binary logging on, MariaDB and MySQL also want SUPER for it — run install as an account with these privileges`;
  }
  if (e.errno === 1044) {
    const db = /to database '([^']*)'/.exec(text)?.[1];
    const priv = privilegeOf(e.sql);
    return `missing privilege${priv ? ` ${priv}` : ''} on ${db ? `\`${db}\`.*` : 'a database'} (${text}); ${see}`;
  }
  return `missing privilege (${text}); ${see}`;
}
