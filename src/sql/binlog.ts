// Statements capture runs against a source server: binlog coordinates, binlog files, the settings
// that decide whether row events can be read without loss, and session setup of the dump connection.

/** MySQL 8.4+ (SHOW MASTER STATUS was removed there). Columns: File, Position, ... */
export const SHOW_BINARY_LOG_STATUS_SQL = 'SHOW BINARY LOG STATUS';

/** MariaDB and MySQL before 8.4. Columns: File, Position, ... */
export const SHOW_MASTER_STATUS_SQL = 'SHOW MASTER STATUS';

/** The binlog status statement for a server, from its VERSION() text. */
export function binlogStatusSql(serverVersion: string): string {
  if (/mariadb/i.test(serverVersion)) return SHOW_MASTER_STATUS_SQL;
  const m = /^(\d+)\.(\d+)/.exec(serverVersion);
  const major = m ? Number(m[1]) : 0;
  const minor = m ? Number(m[2]) : 0;
  return major > 8 || (major === 8 && minor >= 4) ? SHOW_BINARY_LOG_STATUS_SQL : SHOW_MASTER_STATUS_SQL;
}

/** Binlog files still on the server. Columns: Log_name, File_size (and Encrypted on MySQL). */
export const SHOW_BINARY_LOGS_SQL = 'SHOW BINARY LOGS';

/** Every global variable the source checks read; unknown names (other engine) are simply absent. */
export const SOURCE_SETTING_NAMES = [
  'log_bin',
  'binlog_format',
  'binlog_row_image',
  'binlog_transaction_compression',
  'binlog_row_value_options',
  'binlog_row_metadata',
  'server_id',
] as const;

/** Bound: one value per name in SOURCE_SETTING_NAMES. Columns: Variable_name, Value. */
export const SOURCE_SETTINGS_SQL = `SHOW GLOBAL VARIABLES WHERE Variable_name IN (${SOURCE_SETTING_NAMES.map(() => '?').join(', ')})`;

/**
 * Session setup of the binlog dump connection, run before the dump starts. Bound: heartbeat period
 * in nanoseconds (twice: MySQL 8.4+ reads @source_heartbeat_period, older servers and MariaDB
 * @master_heartbeat_period), then net_write_timeout in seconds (how long the server waits while a
 * paused reader does not read; past it the server drops the connection and capture reconnects).
 */
export const DUMP_SESSION_SQL =
  'SET @master_heartbeat_period = ?, @source_heartbeat_period = ?, SESSION net_write_timeout = ?';
