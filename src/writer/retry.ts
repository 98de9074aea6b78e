// Which errors retrying the whole target transaction can fix, and how long to wait between tries.

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

/** Deadlocks, lock waits and lost connections: the transaction is rolled back, so replaying it is safe. */
export function isRetryable(err: unknown): boolean {
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

/** Exponential backoff with jitter. */
export function backoffDelay(attempt: number, b: Backoff, random: () => number = Math.random): number {
  const exp = Math.min(b.maxMs, b.baseMs * 2 ** Math.min(attempt, 20));
  return Math.round(exp / 2 + (random() * exp) / 2);
}

export function serverMessage(err: unknown): { code?: string; message: string } {
  const d = driverError(err) as (DriverError & { sqlMessage?: string; message?: string }) | undefined;
  if (!d) return { message: err instanceof Error ? err.message : String(err) };
  return { code: d.code, message: d.sqlMessage ?? d.message ?? String(err) };
}
