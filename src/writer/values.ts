// Converts row-image values to what the server stores exactly, per column type, and rejects values
// that cannot be stored faithfully. Runs at validation time, before anything is written.
import { TypedJson } from '../model/json.ts';
import type { ColumnMeta } from '../model/table.ts';
import type { SqlValue } from '../sql/dml.ts';

export type { SqlValue } from '../sql/dml.ts';

export class ValueError extends Error {}

const INT_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint']);
const DECIMAL_TYPES = new Set(['decimal', 'numeric']);
const FLOAT_TYPES = new Set(['float', 'double', 'real']);
const TEMPORAL_TYPES = new Set(['date', 'datetime', 'timestamp', 'time', 'year']);
const BINARY_TYPES = new Set(['binary', 'varbinary', 'tinyblob', 'blob', 'mediumblob', 'longblob']);

function isBytes(v: unknown): v is Uint8Array {
  return v instanceof Uint8Array;
}

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

/** Dates are written in UTC (the sink's session time zone) with millisecond precision. */
function formatDate(d: Date, dataType: string): string {
  if (Number.isNaN(d.getTime())) throw new ValueError('invalid Date');
  const date = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  if (dataType === 'date') return date;
  const time = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)}`;
  return dataType === 'time' ? time : `${date} ${time}`;
}

function bitWidth(columnType: string): number {
  const m = /bit\((\d+)\)/i.exec(columnType);
  return m ? Number(m[1]) : 1;
}

function bitValue(value: unknown, columnType: string): Buffer {
  const bytes = Math.ceil(bitWidth(columnType) / 8);
  if (isBytes(value)) return Buffer.from(value);
  let n: bigint;
  if (typeof value === 'bigint') n = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) n = BigInt(value);
  else if (typeof value === 'string' && /^\d+$/.test(value)) n = BigInt(value);
  else if (typeof value === 'boolean') n = value ? 1n : 0n;
  else throw new ValueError(`cannot store ${typeof value} in a BIT column`);
  if (n < 0n || n >= 1n << BigInt(bytes * 8)) throw new ValueError(`value ${n} does not fit ${columnType}`);
  const buf = Buffer.alloc(bytes);
  for (let i = bytes - 1; i >= 0; i--) {
    buf[i] = Number(n & 0xffn);
    n >>= 8n;
  }
  return buf;
}

const INT_RANGES: Record<string, [bigint, bigint, bigint]> = {
  // signed min, signed max, unsigned max
  tinyint: [-(1n << 7n), (1n << 7n) - 1n, (1n << 8n) - 1n],
  smallint: [-(1n << 15n), (1n << 15n) - 1n, (1n << 16n) - 1n],
  mediumint: [-(1n << 23n), (1n << 23n) - 1n, (1n << 24n) - 1n],
  int: [-(1n << 31n), (1n << 31n) - 1n, (1n << 32n) - 1n],
  integer: [-(1n << 31n), (1n << 31n) - 1n, (1n << 32n) - 1n],
  bigint: [-(1n << 63n), (1n << 63n) - 1n, (1n << 64n) - 1n],
};

/** Byte limits of the length-prefixed string and blob types. */
const BYTE_LIMITS: Record<string, number> = {
  tinytext: 255,
  text: 65_535,
  mediumtext: 16_777_215,
  longtext: 4_294_967_295,
  tinyblob: 255,
  blob: 65_535,
  mediumblob: 16_777_215,
  longblob: 4_294_967_295,
};

// The largest finite float32 (2^128 - 2^104): what the server stores and reads back as FLOAT's maximum.
const FLOAT_MAX = 3.4028234663852886e38;

function declaredLength(columnType: string): number | undefined {
  const m = /^\w+\((\d+)\)/.exec(columnType);
  return m ? Number(m[1]) : undefined;
}

function checkInteger(col: ColumnMeta, text: string): string {
  const range = INT_RANGES[col.dataType];
  if (range) {
    const n = BigInt(text);
    const unsigned = /unsigned/i.test(col.columnType);
    const [min, max] = unsigned ? [0n, range[2]] : [range[0], range[1]];
    if (n < min || n > max) throw new ValueError(`${text} is out of range for ${col.columnType} (${min}..${max})`);
  }
  return text;
}

function checkDecimal(col: ColumnMeta, text: string): string {
  const m = /\((\d+)(?:,(\d+))?\)/.exec(col.columnType);
  const precision = m ? Number(m[1]) : 10;
  const scale = m?.[2] ? Number(m[2]) : 0;
  // Digits before the point must fit; extra fraction digits are rounded by the server.
  const plain = /[eE]/.test(text) ? Number(text).toFixed(scale) : text;
  const intDigits = plain.replace(/^[-+]/, '').split('.')[0]!.replace(/^0+/, '').length;
  if (intDigits > precision - scale) throw new ValueError(`${text} is out of range for ${col.columnType}`);
  if (/unsigned/i.test(col.columnType) && /^-/.test(plain) && Number(plain) !== 0) throw new ValueError(`${text} is negative in an unsigned column`);
  return text;
}

function checkFloat(col: ColumnMeta, n: number): void {
  if (!Number.isFinite(n)) throw new ValueError(`${n} cannot be stored (the server has no NaN or Infinity)`);
  if (col.dataType === 'float' && Math.abs(n) > FLOAT_MAX) throw new ValueError(`${n} is out of range for FLOAT`);
  if (/unsigned/i.test(col.columnType) && n < 0) throw new ValueError(`${n} is negative in an unsigned column`);
}

function checkText(col: ColumnMeta, text: string): string {
  const chars = declaredLength(col.columnType);
  if ((col.dataType === 'varchar' || col.dataType === 'char') && chars !== undefined) {
    let n = 0;
    for (const _ of text) n++;
    if (n > chars) throw new ValueError(`${n} characters do not fit ${col.columnType}`);
  }
  const bytes = BYTE_LIMITS[col.dataType];
  if (bytes !== undefined && Buffer.byteLength(text, 'utf8') > bytes) throw new ValueError(`${Buffer.byteLength(text, 'utf8')} bytes do not fit ${col.dataType.toUpperCase()}`);
  if ((col.charset === 'utf8mb3' || col.charset === 'utf8') && /[\u{10000}-\u{10FFFF}]/u.test(text)) {
    throw new ValueError(`a 4-byte character does not fit the ${col.charset} column`);
  }
  if (col.dataType === 'enum') {
    const allowed = [...col.columnType.matchAll(/'((?:[^']|'')*)'/g)].map((m) => m[1]!.replaceAll("''", "'"));
    // A number names a member by position, as the server reads it.
    const index = /^\d+$/.test(text) ? Number(text) : 0;
    if (!allowed.some((a) => a.toLowerCase() === text.toLowerCase()) && !(index >= 1 && index <= allowed.length)) {
      throw new ValueError(`${JSON.stringify(text)} is not one of ${col.columnType}`);
    }
  }
  return text;
}

function checkBytes(col: ColumnMeta, buf: Buffer): Buffer {
  const limit = col.dataType === 'binary' || col.dataType === 'varbinary' ? declaredLength(col.columnType) : BYTE_LIMITS[col.dataType];
  if (limit !== undefined && buf.length > limit) throw new ValueError(`${buf.length} bytes do not fit ${col.columnType}`);
  return buf;
}

/**
 * JSON text of a JS value, as JSON.stringify writes it except that a BigInt is written as its exact
 * digits (a 64-bit integer inside a document stays exact; JSON.stringify refuses it).
 */
function stringifyJson(value: unknown, seen: Set<object>): string | undefined {
  if (typeof value === 'bigint') return value.toString();
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return stringifyJson((value as { toJSON: () => unknown }).toJSON(), seen);
  }
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new ValueError(`${value} is not a JSON number`);
    return JSON.stringify(value);
  }
  if (seen.has(value)) throw new ValueError('cannot be serialized as JSON (it contains itself)');
  seen.add(value);
  let text: string;
  if (Array.isArray(value)) {
    text = `[${value.map((v) => stringifyJson(v, seen) ?? 'null').join(',')}]`;
  } else {
    const members: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      const t = stringifyJson(v, seen);
      if (t !== undefined) members.push(`${JSON.stringify(k)}:${t}`);
    }
    text = `{${members.join(',')}}`;
  }
  seen.delete(value);
  return text;
}

function checkJsonText(text: string): string {
  try {
    JSON.parse(text);
  } catch {
    throw new ValueError('is not valid JSON text');
  }
  return text;
}

const JSON_SCALAR_TEXT: Record<string, RegExp> = {
  decimal: /^-?\d+(\.\d+)?$/,
  date: /^\d{4}-\d{2}-\d{2}$/,
  time: /^-?\d{2,3}:\d{2}:\d{2}(\.\d{1,6})?$/,
  datetime: /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$/,
  unsigned: /^\d+$/,
};

/**
 * JSON for a JSON column: text must parse; a TypedJson keeps its typed scalars on MySQL (a JSON
 * column) and is its text on MariaDB (a LONGTEXT, where JSON has no typed scalars); other values
 * are serialized, BigInts exactly.
 */
function jsonValue(col: ColumnMeta, value: unknown): SqlValue {
  if (value instanceof TypedJson) {
    checkJsonText(value.text);
    for (const s of value.scalars) {
      const pattern = JSON_SCALAR_TEXT[s.type];
      if (!pattern || typeof s.path !== 'string' || !s.path.startsWith('$') || typeof s.value !== 'string' || !pattern.test(s.value)) {
        throw new ValueError(`typed JSON scalar ${JSON.stringify(s)} is not a ${String(s.type).toUpperCase()} at a JSON path`);
      }
    }
    return col.dataType === 'json' && value.scalars.length > 0 ? value : value.text;
  }
  if (typeof value === 'string' || isBytes(value)) return checkJsonText(typeof value === 'string' ? value : Buffer.from(value).toString('utf8'));
  const text = stringifyJson(value, new Set());
  if (text === undefined) throw new ValueError(`cannot store ${describe(value)} as JSON`);
  return text;
}

const DATE_TEXT = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?)?$/;

function checkTemporal(col: ColumnMeta, text: string): string {
  const t = col.dataType;
  if (t !== 'date' && t !== 'datetime' && t !== 'timestamp') return text;
  const m = DATE_TEXT.exec(text);
  if (!m) throw new ValueError(`${JSON.stringify(text)} is not a ${t.toUpperCase()} (YYYY-MM-DD[ hh:mm:ss[.ffffff]])`);
  const [y, mo, d, h = '0', mi = '0', sec = '0'] = m.slice(1).map((x) => x ?? '0') as string[];
  const zero = Number(mo) === 0 && Number(d) === 0 && Number(y) === 0;
  if (!zero) {
    const days = new Date(Date.UTC(Number(y), Number(mo), 0)).getUTCDate();
    if (Number(mo) < 1 || Number(mo) > 12 || Number(d) < 1 || Number(d) > days) throw new ValueError(`${text} is not a valid date`);
  }
  if (Number(h) > 23 || Number(mi) > 59 || Number(sec) > 59) throw new ValueError(`${text} is not a valid time of day`);
  if (t === 'timestamp' && !zero && (text < '1970-01-01 00:00:01' || text > '2038-01-19 03:14:07.999999')) {
    throw new ValueError(`${text} is outside the TIMESTAMP range (1970-01-01 00:00:01 .. 2038-01-19 03:14:07.999999 UTC)`);
  }
  return text;
}

/** The bound value for one column; throws ValueError when the value cannot be stored faithfully. */
export function toSqlValue(col: ColumnMeta, value: unknown): SqlValue {
  if (value === null || value === undefined) {
    if (!col.nullable) throw new ValueError('NULL in a NOT NULL column');
    return null;
  }
  const t = col.dataType;
  if (INT_TYPES.has(t)) {
    if (typeof value === 'bigint') return checkInteger(col, value.toString());
    if (typeof value === 'number') {
      if (!Number.isSafeInteger(value)) throw new ValueError(`${value} is not an exact integer; pass a bigint or decimal string`);
      return checkInteger(col, String(value));
    }
    if (typeof value === 'boolean') return value ? '1' : '0';
    if (typeof value === 'string' && /^-?\d+$/.test(value)) return checkInteger(col, value.replace(/^(-?)0+(?=\d)/, '$1').replace(/^-0$/, '0'));
    throw new ValueError(`cannot store ${describe(value)} in an integer column`);
  }
  if (DECIMAL_TYPES.has(t)) {
    if (typeof value === 'bigint') return checkDecimal(col, value.toString());
    if (typeof value === 'number' && Number.isFinite(value)) return checkDecimal(col, String(value));
    if (typeof value === 'string' && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value)) return checkDecimal(col, value);
    throw new ValueError(`cannot store ${describe(value)} in a DECIMAL column`);
  }
  if (FLOAT_TYPES.has(t)) {
    if (typeof value === 'number') {
      checkFloat(col, value);
      return value;
    }
    if (typeof value === 'string' && value.trim() !== '' && !Number.isNaN(Number(value))) {
      checkFloat(col, Number(value));
      return value;
    }
    throw new ValueError(`cannot store ${describe(value)} in a floating-point column`);
  }
  if (t === 'bit') return bitValue(value, col.columnType);
  if (t === 'json' || col.json) return jsonValue(col, value);
  if (TEMPORAL_TYPES.has(t)) {
    if (value instanceof Date) return formatDate(value, t);
    if (typeof value === 'string') return checkTemporal(col, value);
    if (typeof value === 'number' && t === 'year') return value;
    throw new ValueError(`cannot store ${describe(value)} in a ${t.toUpperCase()} column`);
  }
  if (BINARY_TYPES.has(t)) {
    if (isBytes(value)) return checkBytes(col, Buffer.from(value));
    if (typeof value === 'string') return checkBytes(col, Buffer.from(value, 'utf8'));
    throw new ValueError(`cannot store ${describe(value)} in a binary column`);
  }
  if (t === 'set' && Array.isArray(value)) return checkText(col, value.map(String).join(','));
  if (typeof value === 'string') return checkText(col, value);
  if (typeof value === 'number' || typeof value === 'bigint') return checkText(col, value.toString());
  if (isBytes(value)) return Buffer.from(value);
  throw new ValueError(`cannot store ${describe(value)} in a ${t.toUpperCase()} column`);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (value instanceof Date) return 'a Date';
  return `a ${typeof value}`;
}

/** A stable text form of a key value for grouping changes by primary key. */
export function keyPart(value: SqlValue): string {
  if (value === null) return 'n';
  if (Buffer.isBuffer(value)) return `b${value.toString('hex')}`;
  if (typeof value === 'number') return `d${value}`;
  if (value instanceof TypedJson) return `j${value.text}`;
  return `s${value}`;
}
