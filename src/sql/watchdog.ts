// What the progress watchdog asks a target about the sessions of a stalled direction's apply
// statements: the processlist rows, InnoDB's view of their transactions, and who blocks them.

const placeholders = (n: number) => Array.from({ length: n }, () => '?').join(', ');

/** Sessions by connection id: ID, USER, COMMAND, TIME (s), STATE, INFO (the statement's head). */
export function processlistSql(ids: number): string {
  return `SELECT ID, USER, COMMAND, TIME, STATE, LEFT(INFO, 160) AS INFO FROM information_schema.PROCESSLIST WHERE ID IN (${placeholders(ids)})`;
}

/** The InnoDB transactions of sessions: state (RUNNING, LOCK WAIT), seconds waited, rows locked. */
export function innodbTrxSql(ids: number): string {
  return (
    'SELECT trx_mysql_thread_id AS id, trx_state AS state, TIMESTAMPDIFF(SECOND, trx_wait_started, NOW()) AS waited, trx_rows_locked AS locked ' +
    `FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id IN (${placeholders(ids)})`
  );
}

/** Where each engine lists lock waits: MariaDB in information_schema, MySQL 8+ in performance_schema. */
const LOCK_WAITS = {
  mariadb: { table: 'information_schema.INNODB_LOCK_WAITS', requesting: 'requesting_trx_id', blocking: 'blocking_trx_id' },
  mysql: { table: 'performance_schema.data_lock_waits', requesting: 'REQUESTING_ENGINE_TRANSACTION_ID', blocking: 'BLOCKING_ENGINE_TRANSACTION_ID' },
} as const;

/** The sessions blocking the given ones, from the engine's lock-wait table. */
export function blockersSql(engine: keyof typeof LOCK_WAITS, ids: number): string {
  const w = LOCK_WAITS[engine];
  return (
    'SELECT r.trx_mysql_thread_id AS waiting, b.trx_mysql_thread_id AS blocking, b.trx_state AS state, LEFT(b.trx_query, 160) AS query ' +
    `FROM ${w.table} w ` +
    `JOIN information_schema.INNODB_TRX r ON r.trx_id = w.${w.requesting} ` +
    `JOIN information_schema.INNODB_TRX b ON b.trx_id = w.${w.blocking} ` +
    `WHERE r.trx_mysql_thread_id IN (${placeholders(ids)})`
  );
}

/** Other sessions' transactions holding row locks, oldest first (who may block, when the lock-wait tables say nothing). */
export function lockHoldersSql(excluded: number): string {
  return (
    'SELECT trx_mysql_thread_id AS id, trx_state AS state, TIMESTAMPDIFF(SECOND, trx_started, NOW()) AS age, trx_rows_locked AS locked, LEFT(trx_query, 160) AS query ' +
    `FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id NOT IN (${placeholders(excluded)}) AND trx_rows_locked > 0 ORDER BY trx_started LIMIT 5`
  );
}

/**
 * Ends a stalled apply session on the target. Dropping the socket is not enough: a session blocked in
 * a lock wait keeps running (and holding its checkpoint row lock) until its statement ends.
 */
export const KILL_CONNECTION_SQL = 'KILL CONNECTION ?';
