// One exit-code table for every command: printed by `lww-sink --help`, documented in README.
import { explainPrivilegeError } from '../db/privileges.ts';
import { redactSecrets } from '../db/url.ts';
import { InvalidOptionsError } from '../errors.ts';

export const EXIT = {
  ok: 0,
  /** The command ran and found something: differences, audit findings, a run that did not converge. */
  findings: 1,
  /** Bad flags, config file or environment: nothing was started. */
  usage: 2,
  /** A server could not be reached (replicate: within --start-timeout) or refused the login. */
  connection: 3,
  /** The command stopped on an error retrying cannot fix (privilege, setting, schema, replication). */
  failed: 4,
  /** Ctrl-C / SIGTERM: stopped early; rerunning the command finishes the job. */
  interrupted: 130,
} as const;

export const GLOBAL_HELP = `options of every command:
  --config FILE       nodes, tables and options from a JSON file (see README), so no password is on the command line
  --log-format F      json (default when stderr is not a terminal) or text
  LWW_NODES           node URLs for --node (comma-separated); LWW_URL for install/uninstall --url
  LWW_APPLY_WORKERS   replicate's --apply-workers when the flag is not given
  LOG_LEVEL           debug | info | warn | error | silent (default info)`;

export const EXIT_CODE_HELP = `exit codes (every command):
  0    done; nothing found
  1    findings: check/audit found differences, harness/compare did not converge
  2    usage: bad flags, config file or environment; nothing was started
  3    connection: a server could not be reached (replicate: within --start-timeout) or refused the login
  4    failed: stopped on an error retrying cannot fix (missing privilege, unsafe setting, purged binlog,
       lost ownership, a change capture or the target refuses; see README "What the replicator refuses")
  130  interrupted (Ctrl-C); rerun the command to finish`;

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'PROTOCOL_CONNECTION_LOST',
  'ER_ACCESS_DENIED_ERROR',
  'ER_HOST_NOT_PRIVILEGED',
  'ER_HOST_IS_BLOCKED',
  'ER_CON_COUNT_ERROR',
]);

/** The exit code for an error that ended a command. */
export function exitCodeOf(err: unknown): number {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECTION_CODES.has(code)) return EXIT.connection;
    if (e instanceof InvalidOptionsError) return EXIT.usage;
  }
  return EXIT.failed;
}

/** The message to print for an error that ended a command: secrets masked, a missing privilege named. */
export function describeError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return redactSecrets(explainPrivilegeError(err) ?? message);
}
