// Converts row-image values to what the server stores exactly, per column type, and rejects values
// that cannot be stored faithfully. Runs at validation time, before anything is written.
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

/** The bound value for one column; throws ValueError when the value cannot be stored faithfully. */
export function toSqlValue(col: ColumnMeta, value: unknown): SqlValue {
  if (value === null || value === undefined) {
    if (!col.nullable) throw new ValueError('NULL in a NOT NULL column');
    return null;
  }
  const t = col.dataType;
  if (INT_TYPES.has(t)) {
    if (typeof value === 'bigint') return value.toString();
    if (typeof value === 'number') {
      if (!Number.isSafeInteger(value)) throw new ValueError(`${value} is not an exact integer; pass a bigint or decimal string`);
      return String(value);
    }
    if (typeof value === 'boolean') return value ? '1' : '0';
    if (typeof value === 'string' && /^-?\d+$/.test(value)) return value.replace(/^(-?)0+(?=\d)/, '$1');
    throw new ValueError(`cannot store ${describe(value)} in an integer column`);
  }
  if (DECIMAL_TYPES.has(t)) {
    if (typeof value === 'bigint') return value.toString();
    if (typeof value === 'number' && Number.isFinite(value)) return String(value);
    if (typeof value === 'string' && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value)) return value;
    throw new ValueError(`cannot store ${describe(value)} in a DECIMAL column`);
  }
  if (FLOAT_TYPES.has(t)) {
    if (typeof value === 'number') return value;
    if (typeof value === 'string' && value.trim() !== '' && !Number.isNaN(Number(value))) return value;
    throw new ValueError(`cannot store ${describe(value)} in a floating-point column`);
  }
  if (t === 'bit') return bitValue(value, col.columnType);
  if (t === 'json') {
    // A JSON column takes JSON text; any other JS value is serialized.
    if (typeof value === 'string') return value;
    if (isBytes(value)) return Buffer.from(value).toString('utf8');
    if (typeof value === 'bigint') return value.toString();
    return JSON.stringify(value);
  }
  if (TEMPORAL_TYPES.has(t)) {
    if (value instanceof Date) return formatDate(value, t);
    if (typeof value === 'string') return value;
    if (typeof value === 'number' && t === 'year') return value;
    throw new ValueError(`cannot store ${describe(value)} in a ${t.toUpperCase()} column`);
  }
  if (BINARY_TYPES.has(t)) {
    if (isBytes(value)) return Buffer.from(value);
    if (typeof value === 'string') return Buffer.from(value, 'utf8');
    throw new ValueError(`cannot store ${describe(value)} in a binary column`);
  }
  if (t === 'set' && Array.isArray(value)) return value.map(String).join(',');
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return value.toString();
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
  return `s${value}`;
}
