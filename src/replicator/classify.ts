// Decides what the supervisor does with an error that ended a run of a direction: a transient one
// (the network, a restarting server, a lock) is retried with backoff; a permanent one (a setting,
// a privilege, lost ownership, a binlog that is gone, data or capture that can never apply) fails
// the direction, because restarting would only hide it in a loop. Unknown errors are permanent:
// failing closed beats restarting forever.
import { isRetryable, permanentServerError } from '../db/retry.ts';
import { explainPrivilegeError } from '../db/privileges.ts';
import {
  BinlogPositionError,
  CaptureError,
  DirectionStalledError,
  InvalidChangeError,
  InvalidOptionsError,
  LwwError,
  OwnershipLostError,
  SourceIdentityError,
  UnknownColumnError,
  UnknownTableError,
  UnsafeSourceError,
  UnsafeSourceSettingError,
  UnsupportedTableError,
} from '../errors.ts';

export type FailureKind = 'transient' | 'permanent';

export interface Classified {
  kind: FailureKind;
  /** A short name of the cause, for logs, /status and the exit message. */
  cause: string;
}

function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 6; e = (e as { cause?: unknown }).cause, depth++) out.push(e);
  return out;
}

export function classifyFailure(err: unknown): Classified {
  const errors = chain(err);
  const has = (type: abstract new (...args: never[]) => unknown) => errors.some((e) => e instanceof type);
  if (has(OwnershipLostError)) return { kind: 'permanent', cause: 'ownership lost' };
  // The progress watchdog: one restart (it drops every connection and reads again from the
  // checkpoint), then, stalled again with nothing committed in between, the direction fails.
  const stall = errors.find((e): e is DirectionStalledError => e instanceof DirectionStalledError);
  if (stall) return stall.repeated ? { kind: 'permanent', cause: 'stalled again without progress' } : { kind: 'transient', cause: 'stalled (no progress)' };
  if (has(SourceIdentityError)) return { kind: 'permanent', cause: 'checkpoint belongs to another server or binlog history' };
  // Errors that know they are final say so (capture's CaptureRefusedError: reading the same binlog again meets it again).
  const final = errors.find((e) => (e as { permanent?: unknown } | null)?.permanent === true);
  if (final) return { kind: 'permanent', cause: final instanceof CaptureError ? 'capture refused' : (final as Error).name };
  const server = permanentServerError(err);
  if (server !== undefined) return { kind: 'permanent', cause: server };
  if (has(BinlogPositionError)) return { kind: 'permanent', cause: 'binlog not available' };
  if (has(UnsafeSourceError) || has(UnsafeSourceSettingError)) return { kind: 'permanent', cause: 'unsafe source setting' };
  if (has(InvalidOptionsError)) return { kind: 'permanent', cause: 'invalid option' };
  // A named error wrapping a lost connection or a lock (the sink giving up after its own retries,
  // capture not reaching the source): the cause is what counts.
  if (isRetryable(err)) return { kind: 'transient', cause: 'connection or lock' };
  // The target lacks a table or column the source has: held back until the operator's DDL reaches it.
  if (has(UnknownColumnError) || has(UnknownTableError)) return { kind: 'transient', cause: 'target schema behind the source (waiting for its DDL)' };
  if (has(CaptureError)) return { kind: 'permanent', cause: 'capture refused' };
  if (has(InvalidChangeError) || has(UnsupportedTableError)) return { kind: 'permanent', cause: 'change cannot be applied' };
  if (err instanceof LwwError) return { kind: 'permanent', cause: err.name };
  return { kind: 'permanent', cause: 'unexpected error' };
}

/** The message for logs and status: a missing privilege named, else the error's own message. */
export function failureMessage(err: unknown): string {
  return explainPrivilegeError(err) ?? (err instanceof Error ? err.message : String(err));
}
