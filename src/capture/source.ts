// Questions capture asks the source server over a normal connection: are its binlog settings safe,
// where is the binlog head, which binlog files are left, how far behind is a position.
import type { Connection } from 'mysql2/promise';
import { BinlogPositionError, UnsafeSourceSettingError } from '../errors.ts';
import { SHOW_BINARY_LOGS_SQL, SOURCE_SETTING_NAMES, SOURCE_SETTINGS_SQL, binlogStatusSql } from '../sql/binlog.ts';
import { VERSION_SQL } from '../sql/introspect.ts';
import { type BinlogPosition, bytesBetween, formatPosition, parsePosition } from './position.ts';

export type SourceConnection = Pick<Connection, 'query'>;

type Rows = Array<Record<string, unknown>>;

async function rows(conn: SourceConnection, sql: string, values?: unknown[]): Promise<Rows> {
  const [result] = await conn.query(sql, values);
  return result as Rows;
}

/** Global settings by lower-case name; settings the engine does not have are absent. */
export async function sourceSettings(conn: SourceConnection): Promise<Map<string, string>> {
  const result = await rows(conn, SOURCE_SETTINGS_SQL, [...SOURCE_SETTING_NAMES]);
  return new Map(result.map((r) => [String(r.Variable_name).toLowerCase(), String(r.Value ?? '')]));
}

/**
 * The source's character set of every collation id a TABLE_MAP event can carry. Zongji maps ids by
 * MySQL's table and takes any other for utf8mb4: MariaDB numbers its collations otherwise (its
 * latin1_swedish_nopad_ci is 1032, its uca1400 ones are past 2048, listed only in
 * COLLATION_CHARACTER_SET_APPLICABILITY), and such text was decoded as UTF-8 and crossed as other bytes.
 */
export async function collationCharsets(conn: SourceConnection): Promise<Map<number, string>> {
  let result: Rows;
  try {
    result = await rows(conn, 'SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID IS NOT NULL', []);
  } catch {
    result = await rows(conn, 'SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS', []);
  }
  return new Map(result.map((r) => [Number(r.ID), String(r.CHARACTER_SET_NAME)]));
}

/**
 * The pure part of checkSourceSettings: one UnsafeSourceSettingError per setting that would make
 * capture lose changes silently, each naming the value to set.
 */
export function unsafeSettings(settings: ReadonlyMap<string, string>): UnsafeSourceSettingError[] {
  const problems: UnsafeSourceSettingError[] = [];
  const get = (name: string) => settings.get(name);
  const logBin = get('log_bin');
  if (logBin === undefined || !/^(ON|1)$/i.test(logBin)) {
    problems.push(new UnsafeSourceSettingError('log_bin', logBin ?? 'OFF', 'ON (start the server with --log-bin)'));
    // Without a binlog the other binlog settings mean nothing.
    return problems;
  }
  const format = get('binlog_format');
  if (format !== undefined && format.toUpperCase() !== 'ROW') {
    problems.push(new UnsafeSourceSettingError('binlog_format', format, 'ROW (SET GLOBAL binlog_format = ROW, or --binlog-format=ROW)'));
  }
  const image = get('binlog_row_image');
  if (image !== undefined && image.toUpperCase() !== 'FULL') {
    problems.push(new UnsafeSourceSettingError('binlog_row_image', image, 'FULL (SET GLOBAL binlog_row_image = FULL, or --binlog-row-image=FULL)'));
  }
  // Row events must name their columns: events written before an ALTER TABLE (read later, after a
  // lag, an outage or a restart from an older checkpoint) are then decoded by the names they were
  // written with, never by the table's definition now.
  const metadata = get('binlog_row_metadata');
  if (metadata !== undefined && metadata.toUpperCase() !== 'FULL') {
    problems.push(
      new UnsafeSourceSettingError(
        'binlog_row_metadata',
        metadata,
        'FULL, so row events carry their column names (SET GLOBAL binlog_row_metadata = FULL, or --binlog-row-metadata=FULL; then resume from a position written after the change)',
      ),
    );
  }
  const compression = get('binlog_transaction_compression');
  if (compression !== undefined && /^(ON|1)$/i.test(compression)) {
    problems.push(
      new UnsafeSourceSettingError(
        'binlog_transaction_compression',
        compression,
        'OFF: compressed transactions cannot be decoded (SET GLOBAL binlog_transaction_compression = OFF)',
      ),
    );
  }
  const valueOptions = get('binlog_row_value_options');
  if (valueOptions !== undefined && /PARTIAL_JSON/i.test(valueOptions)) {
    problems.push(
      new UnsafeSourceSettingError(
        'binlog_row_value_options',
        valueOptions,
        "'' (empty): partial JSON updates cannot be decoded (SET GLOBAL binlog_row_value_options = '')",
      ),
    );
  }
  return problems;
}

/** Settings worth changing that lose nothing (none today; kept for the reader's start-up warnings). */
export function sourceAdvisories(_settings: ReadonlyMap<string, string>): string[] {
  return [];
}

/** Reads the source's settings and lists what would lose changes; an empty list means safe to stream. */
export async function checkSourceSettings(conn: SourceConnection): Promise<UnsafeSourceSettingError[]> {
  return unsafeSettings(await sourceSettings(conn));
}

export async function serverVersion(conn: SourceConnection): Promise<string> {
  const [first] = await rows(conn, VERSION_SQL);
  return String(first?.version ?? '');
}

/** The binlog head: where the next transaction will be written. */
export async function headPosition(conn: SourceConnection): Promise<BinlogPosition> {
  const [status] = await rows(conn, binlogStatusSql(await serverVersion(conn)));
  if (!status || status.File === undefined || status.File === null || status.File === '') {
    throw new UnsafeSourceSettingError('log_bin', 'OFF', 'ON (start the server with --log-bin)');
  }
  return { file: String(status.File), offset: Number(status.Position) };
}

/**
 * The position to start capture from so that every transaction committed after this call is read
 * (`SHOW BINARY LOG STATUS` on MySQL 8.4+, `SHOW MASTER STATUS` on MariaDB and older MySQL).
 */
export async function currentPosition(conn: SourceConnection): Promise<string> {
  return formatPosition(await headPosition(conn));
}

/** Binlog files still on the server, oldest first. */
export async function binlogFiles(conn: SourceConnection): Promise<Array<{ name: string; size: number }>> {
  const result = await rows(conn, SHOW_BINARY_LOGS_SQL);
  return result.map((r) => ({ name: String(r.Log_name), size: Number(r.File_size) }));
}

/** Throws BinlogPositionError when reading cannot start at `position` (file purged, offset past its end). */
export async function checkPositionAvailable(conn: SourceConnection, position: string): Promise<void> {
  const p = parsePosition(position);
  const files = await binlogFiles(conn);
  const file = files.find((f) => f.name === p.file);
  if (!file) {
    const oldest = files[0]?.name;
    throw new BinlogPositionError(
      position,
      `binlog file ${p.file} is not on the source any more (purged or another server?)` +
        `${oldest ? `; its oldest binlog is ${oldest}` : ''}. Changes after this position are lost to capture: re-seed the peer with a full merge and start from the current position`,
    );
  }
  if (p.offset > file.size) {
    throw new BinlogPositionError(position, `offset ${p.offset} is past the end of ${p.file} (${file.size} bytes): the position belongs to another server or binlog history`);
  }
}

/**
 * The captured tables that exist now: the listed ones as named, those of whole-schema selectors read
 * from information_schema (the meta schema's own tables excluded).
 */
export async function capturedTables(conn: SourceConnection, include: Readonly<Record<string, string[] | true>>, metaSchema: string): Promise<Array<{ schema: string; table: string }>> {
  const out: Array<{ schema: string; table: string }> = [];
  const whole: string[] = [];
  for (const [schema, tables] of Object.entries(include)) {
    if (schema === metaSchema) continue;
    if (tables === true) whole.push(schema);
    else for (const table of tables) out.push({ schema, table });
  }
  if (whole.length > 0) {
    const found = await rows(conn, `SELECT TABLE_SCHEMA AS s, TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA IN (${whole.map(() => '?').join(', ')})`, whole);
    for (const r of found) out.push({ schema: String(r.s), table: String(r.t) });
  }
  return out;
}

export interface BinlogLag {
  head: string;
  /** Binlog bytes between the position and the head (0 when caught up). */
  bytesBehind: number;
}

/** How far `position` is behind the source's binlog head. */
export async function binlogLag(conn: SourceConnection, position: string): Promise<BinlogLag> {
  const head = await headPosition(conn);
  const files = await binlogFiles(conn);
  return { head: formatPosition(head), bytesBehind: bytesBetween(parsePosition(position), head, files) };
}
