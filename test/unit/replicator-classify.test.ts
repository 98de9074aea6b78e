import { describe, expect, it } from 'vitest';
import { backoffDelay, retry } from '../../src/db/retry.ts';
import { ApplyError, BinlogPositionError, CaptureError, CaptureRefusedError, InvalidChangeError, OwnershipLostError, UnknownColumnError, UnsafeSourceError, UnsafeSourceSettingError } from '../../src/errors.ts';
import { classifyFailure } from '../../src/replicator/classify.ts';

const driver = (props: Record<string, unknown>, message = 'driver error') => Object.assign(new Error(message), props);

describe('the supervisor classifies what stopped a direction', () => {
  it('network, restarting servers, lock waits and deadlocks are transient', () => {
    for (const e of [
      driver({ code: 'ECONNREFUSED' }),
      driver({ code: 'ECONNRESET' }),
      driver({ code: 'PROTOCOL_CONNECTION_LOST', fatal: true }),
      driver({ errno: 1205, code: 'ER_LOCK_WAIT_TIMEOUT' }),
      driver({ errno: 1213, code: 'ER_LOCK_DEADLOCK' }),
      driver({ errno: 2006 }, 'MySQL server has gone away'),
      // The sink giving up after its own retries, capture not reaching the source: the cause counts.
      new ApplyError('applying a batch failed after 30 attempts', 'db.t', 'ER_LOCK_WAIT_TIMEOUT', { cause: driver({ errno: 1205 }) }),
      new CaptureError('binlog connection not ready', 'binlog.000001:4', { cause: driver({ code: 'ETIMEDOUT' }) }),
    ]) {
      expect(classifyFailure(e), String(e)).toEqual({ kind: 'transient', cause: 'connection or lock' });
    }
    // Schema drift the operator is fixing: held back, retried.
    expect(classifyFailure(new UnknownColumnError('db', 't', 'note')).kind).toBe('transient');
  });

  it('settings, privileges, ownership, a purged binlog and refused changes are permanent, with the cause named', () => {
    const cases: Array<[unknown, string]> = [
      [new OwnershipLostError('node-1', 1n, 2n), 'ownership lost'],
      [driver({ errno: 1227, code: 'ER_SPECIFIC_ACCESS_DENIED_ERROR', fatal: true }), 'missing privilege'],
      [driver({ errno: 1142 }), 'missing privilege'],
      [driver({ errno: 1045, code: 'ER_ACCESS_DENIED_ERROR', fatal: true }), 'access denied'],
      [driver({ errno: 1236, fatal: true }), 'binlog not available'],
      [new BinlogPositionError('binlog.000001:4', 'purged'), 'binlog not available'],
      [new UnsafeSourceError('db1', [new UnsafeSourceSettingError('binlog_format', 'STATEMENT', 'ROW')]), 'unsafe source setting'],
      [new CaptureError('statement-logged DELETE on db.t', 'binlog.000001:400'), 'capture refused'],
      [new CaptureRefusedError('a statement-logged DELETE', 'db.t', 'binlog.000001:400', 'SET binlog_format=ROW', { cause: driver({ code: 'ECONNRESET' }) }), 'capture refused'],
      [new InvalidChangeError('too many rows'), 'change cannot be applied'],
      [new ApplyError('applying a batch failed on db.t: ER_DATA_TOO_LONG', 'db.t', 'ER_DATA_TOO_LONG', { cause: driver({ errno: 1406 }) }), 'ApplyError'],
      [new Error('something nobody expected'), 'unexpected error'],
    ];
    for (const [err, cause] of cases) expect(classifyFailure(err), String(err)).toEqual({ kind: 'permanent', cause });
  });

  it('backs off exponentially, capped, with jitter; the retry helper gives up at its budget and passes permanent errors through', async () => {
    expect(backoffDelay(1, { baseMs: 100, maxMs: 1000 }, () => 0)).toBe(100);
    expect(backoffDelay(1, { baseMs: 100, maxMs: 1000 }, () => 1)).toBe(200);
    expect(backoffDelay(3, { baseMs: 100, maxMs: 1000 }, () => 1)).toBe(800);
    expect(backoffDelay(30, { baseMs: 100, maxMs: 1000 }, () => 1)).toBe(1000);
    expect(backoffDelay(30, { baseMs: 100, maxMs: 1000 }, () => 0)).toBe(500);
    let tries = 0;
    const refused = driver({ code: 'ECONNREFUSED' });
    await expect(retry(async () => {
      tries++;
      throw refused;
    }, { baseMs: 5, maxMs: 10, budgetMs: 100 })).rejects.toBe(refused);
    expect(tries).toBeGreaterThan(3);
    tries = 0;
    const denied = driver({ errno: 1045 });
    await expect(retry(async () => {
      tries++;
      throw denied;
    }, { baseMs: 5, maxMs: 10, budgetMs: 1000, isTransient: (e) => classifyFailure(e).kind === 'transient' })).rejects.toBe(denied);
    expect(tries).toBe(1);
    tries = 0;
    expect(await retry(async () => (tries++ < 2 ? Promise.reject(refused) : 'up'), { baseMs: 1, maxMs: 2, budgetMs: 1000 })).toBe('up');
  });
});
