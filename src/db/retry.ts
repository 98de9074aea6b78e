// The one list of transient MySQL/driver errors (deadlocks, lock waits, lost or refused connections,
// timeouts) and the one backoff: exponential with a cap and jitter. Used by the sink (replaying a
// target transaction), the replicator's supervisor and start-up; anything else is not retried here.
import { isPrivilegeError } from './privileges.ts';

const RETRYABLE_ERRNO = new Set([
  1205, // ER_LOCK_WAIT_TIMEOUT
  1213, // ER_LOCK_DEADLOCK
  1040, // ER_CON_COUNT_ERROR
  1053, // ER_SERVER_SHUTDOWN
  1317, // ER_QUERY_INTERRUPTED
  1927, // ER_CONNECTION_KILLED (MariaDB)
  2006, // CR_SERVER_GONE_ERROR
  2013, // CR_SERVER_LOST
  4031, // ER_CLIENT_INTERACTION_TIMEOUT (MySQL)
  3024, // ER_QUERY_TIMEOUT
  1412, // ER_TABLE_DEF_CHANGED: DDL committed after the transaction's snapshot ("please retry transaction")
]);

const CONNECTION_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'ECONNRESET',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTCONN',
  'ER_SERVER_SHUTDOWN',
  'ER_CON_COUNT_ERROR',
  'ER_CONNECTION_KILLED',
]);

interface DriverError {
  errno?: number;
  code?: string;
  fatal?: boolean;
  cause?: unknown;
}

function driverError(err: unknown): DriverError | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 4 && e; depth++) {
    const d = e as DriverError;
    if (typeof d.errno === 'number' || typeof d.code === 'string' || typeof d.fatal === 'boolean') return d;
    e = d.cause;
  }
  return undefined;
}

/** Server errors no retry fixes, even when the driver marks them fatal (they end a handshake or a binlog dump). */
const PERMANENT_ERRNO = new Map<number, string>([
  [1045, 'access denied'], // ER_ACCESS_DENIED_ERROR: wrong user or password
  [1698, 'access denied'], // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
  [1049, 'unknown database'], // ER_BAD_DB_ERROR
  [1236, 'binlog not available'], // ER_MASTER_FATAL_ERROR_READING_BINLOG: purged, or not this server's
  [1153, 'packet larger than max_allowed_packet'], // ER_NET_PACKET_TOO_LARGE: the same statement fails again
  [1301, 'value larger than max_allowed_packet'], // ER_WARN_ALLOWED_PACKET_OVERFLOWED
]);

/** The cause of an error retrying cannot fix (a missing privilege, a login refused, a binlog gone), or undefined. */
export function permanentServerError(err: unknown): string | undefined {
  if (isPrivilegeError(err)) return 'missing privilege';
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 6; e = e.cause, depth++) {
    const errno = (e as { errno?: unknown }).errno;
    if (typeof errno === 'number' && PERMANENT_ERRNO.has(errno)) return PERMANENT_ERRNO.get(errno);
  }
  return undefined;
}

/** Deadlocks, lock waits and lost connections: the transaction is rolled back, so replaying it is safe. */
export function isRetryable(err: unknown): boolean {
  if (permanentServerError(err) !== undefined) return false;
  if (isConnectionLost(err)) return true;
  const d = driverError(err);
  if (!d) return false;
  if (d.errno !== undefined && RETRYABLE_ERRNO.has(d.errno)) return true;
  if (d.code !== undefined && CONNECTION_CODES.has(d.code)) return true;
  return d.fatal === true;
}

/** mysql2 reports a command on a closed connection without a code, only this message and fatal. */
const CLOSED_CONNECTION = /Can't add new command when connection is in closed state|Connection lost/i;

/** The connection cannot be used again (its commit outcome is unknown: replay on a new one). */
export function isConnectionLost(err: unknown): boolean {
  if (err instanceof Error && CLOSED_CONNECTION.test(err.message)) return true;
  const d = driverError(err);
  if (!d) return false;
  return d.fatal === true || (d.code !== undefined && CONNECTION_CODES.has(d.code)) || d.errno === 2006 || d.errno === 2013;
}

export interface Backoff {
  baseMs: number;
  maxMs: number;
}

/** Exponential backoff with jitter: in [exp/2, exp] where exp = min(maxMs, baseMs * 2^attempt). */
export function backoffDelay(attempt: number, b: Backoff, random: () => number = Math.random): number {
  const exp = Math.min(b.maxMs, b.baseMs * 2 ** Math.min(attempt, 20));
  return Math.round(exp / 2 + (random() * exp) / 2);
}

export function serverMessage(err: unknown, dialect?: string): { code?: string; message: string } {
  const d = driverError(err) as (DriverError & { sqlMessage?: string; message?: string }) | undefined;
  if (!d) return { message: err instanceof Error ? err.message : String(err) };
  return { code: errorName(d, dialect), message: d.sqlMessage ?? d.message ?? String(err) };
}

/**
 * mysql2 names error numbers from MySQL's list. MariaDB numbers its own errors from 1900 on, where
 * MySQL's names mean something else (MariaDB's 4025 CONSTRAINT failed is MySQL's
 * ER_INNODB_AUTOEXTEND_SIZE_OUT_OF_RANGE): for those, the number is the honest name.
 */
function errorName(d: DriverError, dialect: string | undefined): string | undefined {
  // 2000-2999 are the client library's (CR_*), alike for both.
  if (dialect === 'mariadb' && typeof d.errno === 'number' && d.errno >= 1900 && !(d.errno >= 2000 && d.errno < 3000)) {
    return `MariaDB error ${d.errno}`;
  }
  return d.code;
}

/** Waits `ms`, or less when the signal fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done);
  });
}

export interface RetryOptions extends Backoff {
  /** Give up (rethrow the last error) once this much time has passed since the first try. */
  budgetMs: number;
  /** Which errors are worth another try; default isRetryable. Others pass straight through. */
  isTransient?: (err: unknown) => boolean;
  signal?: AbortSignal;
  onRetry?: (info: { attempt: number; delayMs: number; error: unknown }) => void;
}

/** Runs `work` until it succeeds, retrying transient errors with backoff within a time budget. */
export async function retry<T>(work: () => Promise<T>, options: RetryOptions): Promise<T> {
  const transient = options.isTransient ?? isRetryable;
  const deadline = Date.now() + options.budgetMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      const delayMs = Math.min(backoffDelay(attempt, options), Math.max(0, deadline - Date.now()));
      if (!transient(err) || delayMs <= 0 || options.signal?.aborted) throw err;
      options.onRetry?.({ attempt, delayMs, error: err });
      await sleep(delayMs, options.signal);
      if (options.signal?.aborted) throw err;
    }
  }
}
