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

type Kind = 'integer' | 'decimal' | 'float' | 'bit' | 'json' | 'temporal' | 'binary' | 'other';

/**
 * What a column's type says about its values, worked out once per column object: every value of
 * every change goes through toSqlValue, and these were regular expressions and lookups per value.
 */
interface ColumnFacts {
  kind: Kind;
  unsigned: boolean;
  /** Integers: the allowed range, exact and (for number inputs, which are safe integers) as numbers. */
  range?: [bigint, bigint];
  rangeNumbers?: [number, number];
  /** DECIMAL: precision and scale. */
  precision: number;
  scale: number;
  /** CHAR/VARCHAR: declared length in characters. */
  chars?: number;
  /** Byte limit of a length-prefixed text or blob type, or of BINARY/VARBINARY. */
  bytes?: number;
  /** utf8mb3 column: no 4-byte characters. */
  threeByte: boolean;
  /** ENUM members, lower case. */
  members?: string[];
}

const facts = new WeakMap<ColumnMeta, ColumnFacts>();

function factsOf(col: ColumnMeta): ColumnFacts {
  let f = facts.get(col);
  if (f) return f;
  const t = col.dataType;
  const kind: Kind = INT_TYPES.has(t)
    ? 'integer'
    : DECIMAL_TYPES.has(t)
      ? 'decimal'
      : FLOAT_TYPES.has(t)
        ? 'float'
        : t === 'bit'
          ? 'bit'
          : t === 'json' || col.json
            ? 'json'
            : TEMPORAL_TYPES.has(t)
              ? 'temporal'
              : BINARY_TYPES.has(t)
                ? 'binary'
                : 'other';
  const unsigned = /unsigned/i.test(col.columnType);
  const m = /\((\d+)(?:,(\d+))?\)/.exec(col.columnType);
  f = {
    kind,
    unsigned,
    precision: m ? Number(m[1]) : 10,
    scale: m?.[2] ? Number(m[2]) : 0,
    threeByte: col.charset === 'utf8mb3' || col.charset === 'utf8',
  };
  const r = INT_RANGES[t];
  if (r) {
    f.range = unsigned ? [0n, r[2]] : [r[0], r[1]];
    f.rangeNumbers = [Number(f.range[0]), Number(f.range[1])];
  }
  if (t === 'varchar' || t === 'char') f.chars = declaredLength(col.columnType);
  f.bytes = t === 'binary' || t === 'varbinary' ? declaredLength(col.columnType) : BYTE_LIMITS[t];
  if (t === 'enum') f.members = [...col.columnType.matchAll(/'((?:[^']|'')*)'/g)].map((e) => e[1]!.replaceAll("''", "'").toLowerCase());
  facts.set(col, f);
  return f;
}

/** Decimal text of at most 15 digits: exact as a number. */
const SHORT_INTEGER = /^-?\d{1,15}$/;

function checkInteger(col: ColumnMeta, f: ColumnFacts, text: string, n?: number): string {
  const range = f.range;
  if (range) {
    const [lo, hi] = f.rangeNumbers!;
    // Numbers and short texts compare exactly as numbers; only long texts need a BigInt.
    const x = n ?? (SHORT_INTEGER.test(text) ? Number(text) : undefined);
    const inRange = x !== undefined ? x >= lo && x <= hi : BigInt(text) >= range[0] && BigInt(text) <= range[1];
    if (!inRange) throw new ValueError(`${text} is out of range for ${col.columnType} (${range[0]}..${range[1]})`);
  }
  return text;
}

function checkDecimal(col: ColumnMeta, f: ColumnFacts, text: string): string {
  const { precision, scale } = f;
  // Digits before the point must fit; extra fraction digits are rounded by the server.
  const plain = /[eE]/.test(text) ? Number(text).toFixed(scale) : text;
  const intDigits = plain.replace(/^[-+]/, '').split('.')[0]!.replace(/^0+/, '').length;
  if (intDigits > precision - scale) throw new ValueError(`${text} is out of range for ${col.columnType}`);
  if (f.unsigned && /^-/.test(plain) && Number(plain) !== 0) throw new ValueError(`${text} is negative in an unsigned column`);
  return text;
}

function checkFloat(col: ColumnMeta, f: ColumnFacts, n: number): void {
  if (!Number.isFinite(n)) throw new ValueError(`${n} cannot be stored (the server has no NaN or Infinity)`);
  if (col.dataType === 'float' && Math.abs(n) > FLOAT_MAX) throw new ValueError(`${n} is out of range for FLOAT`);
  if (f.unsigned && n < 0) throw new ValueError(`${n} is negative in an unsigned column`);
}

function checkText(col: ColumnMeta, f: ColumnFacts, text: string): string {
  const chars = f.chars;
  // A text never has more characters than UTF-16 units, nor more UTF-8 bytes than 3 per unit.
  if (chars !== undefined && text.length > chars) {
    let n = 0;
    for (const _ of text) n++;
    if (n > chars) throw new ValueError(`${n} characters do not fit ${col.columnType}`);
  }
  const bytes = f.bytes;
  if (bytes !== undefined && text.length * 3 > bytes && Buffer.byteLength(text, 'utf8') > bytes) {
    throw new ValueError(`${Buffer.byteLength(text, 'utf8')} bytes do not fit ${col.dataType.toUpperCase()}`);
  }
  if (f.threeByte && /[\u{10000}-\u{10FFFF}]/u.test(text)) {
    throw new ValueError(`a 4-byte character does not fit the ${col.charset} column`);
  }
  if (f.members) {
    const allowed = f.members;
    // A number names a member by position, as the server reads it.
    const index = /^\d+$/.test(text) ? Number(text) : 0;
    const lower = text.toLowerCase();
    if (!allowed.includes(lower) && !(index >= 1 && index <= allowed.length)) {
      throw new ValueError(`${JSON.stringify(text)} is not one of ${col.columnType}`);
    }
  }
  return text;
}

function checkBytes(col: ColumnMeta, f: ColumnFacts, buf: Buffer): Buffer {
  const limit = f.bytes;
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

/** The value of `n` ASCII digits at `from`, or -1 when one is not a digit (or the text ends). */
function digitsAt(s: string, from: number, n: number): number {
  let v = 0;
  for (let i = from; i < from + n; i++) {
    const c = s.charCodeAt(i) - 48;
    if (!(c >= 0 && c <= 9)) return -1;
    v = v * 10 + c;
  }
  return v;
}

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Days in a month (1-12) as Date.UTC counts them: a year below 100 is taken as 19xx. */
function daysInMonth(year: number, month: number): number {
  if (month !== 2) return MONTH_DAYS[month - 1]!;
  const y = year < 100 ? year + 1900 : year;
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
}

function checkTemporal(col: ColumnMeta, text: string): string {
  const t = col.dataType;
  if (t !== 'date' && t !== 'datetime' && t !== 'timestamp') return text;
  // YYYY-MM-DD[( |T)hh:mm:ss[.f{1,6}]] read by position: no match array nor substrings per value.
  const len = text.length;
  let ok = (len === 10 || len === 19 || (len >= 21 && len <= 26)) && text.charCodeAt(4) === 45 && text.charCodeAt(7) === 45;
  const y = digitsAt(text, 0, 4);
  const mo = digitsAt(text, 5, 2);
  const d = digitsAt(text, 8, 2);
  ok &&= y >= 0 && mo >= 0 && d >= 0;
  let h = 0;
  let mi = 0;
  let sec = 0;
  if (ok && len > 10) {
    const sep = text.charCodeAt(10);
    h = digitsAt(text, 11, 2);
    mi = digitsAt(text, 14, 2);
    sec = digitsAt(text, 17, 2);
    ok = (sep === 32 || sep === 84) && text.charCodeAt(13) === 58 && text.charCodeAt(16) === 58 && h >= 0 && mi >= 0 && sec >= 0;
    if (ok && len > 19) ok = text.charCodeAt(19) === 46 && digitsAt(text, 20, len - 20) >= 0;
  }
  if (!ok) throw new ValueError(`${JSON.stringify(text)} is not a ${t.toUpperCase()} (YYYY-MM-DD[ hh:mm:ss[.ffffff]])`);
  const zero = mo === 0 && d === 0 && y === 0;
  if (!zero) {
    if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) throw new ValueError(`${text} is not a valid date`);
  }
  if (h > 23 || mi > 59 || sec > 59) throw new ValueError(`${text} is not a valid time of day`);
  // Compared as text with a space separator ('T' sorts after it: the last second passed for out of range).
  const spaced = len > 10 && text.charCodeAt(10) === 84 ? `${text.slice(0, 10)} ${text.slice(11)}` : text;
  if (t === 'timestamp' && !zero && (spaced < '1970-01-01 00:00:01' || spaced > '2038-01-19 03:14:07.999999')) {
    throw new ValueError(`${text} is outside the TIMESTAMP range (1970-01-01 00:00:01 .. 2038-01-19 03:14:07.999999 UTC)`);
  }
  return text;
}

/** The bound value for one column; throws ValueError when the value cannot be stored faithfully. */
export function toSqlValue(col: ColumnMeta, value: unknown): SqlValue {
  // A property holding undefined is no value: taken for NULL, it wrote a NULL nobody gave.
  if (value === undefined) throw new ValueError('undefined is not a value (give null for NULL, or leave the column out)');
  if (value === null) {
    if (!col.nullable) throw new ValueError('NULL in a NOT NULL column');
    return null;
  }
  const f = factsOf(col);
  const t = col.dataType;
  switch (f.kind) {
    case 'integer':
      if (typeof value === 'bigint') return checkInteger(col, f, value.toString());
      if (typeof value === 'number') {
        if (!Number.isSafeInteger(value)) throw new ValueError(`${value} is not an exact integer; pass a bigint or decimal string`);
        return checkInteger(col, f, String(value), value);
      }
      if (typeof value === 'boolean') return value ? '1' : '0';
      if (typeof value === 'string' && /^-?\d+$/.test(value)) return checkInteger(col, f, value.replace(/^(-?)0+(?=\d)/, '$1').replace(/^-0$/, '0'));
      throw new ValueError(`cannot store ${describe(value)} in an integer column`);
    case 'decimal':
      if (typeof value === 'bigint') return checkDecimal(col, f, value.toString());
      if (typeof value === 'number' && Number.isFinite(value)) return checkDecimal(col, f, String(value));
      if (typeof value === 'string' && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value)) return checkDecimal(col, f, value);
      throw new ValueError(`cannot store ${describe(value)} in a DECIMAL column`);
    case 'float':
      if (typeof value === 'number') {
        checkFloat(col, f, value);
        return value;
      }
      if (typeof value === 'string' && value.trim() !== '' && !Number.isNaN(Number(value))) {
        checkFloat(col, f, Number(value));
        return value;
      }
      throw new ValueError(`cannot store ${describe(value)} in a floating-point column`);
    case 'bit':
      return bitValue(value, col.columnType);
    case 'json':
      return jsonValue(col, value);
    case 'temporal':
      if (value instanceof Date) return formatDate(value, t);
      if (typeof value === 'string') return checkTemporal(col, value);
      if (typeof value === 'number' && t === 'year') return value;
      throw new ValueError(`cannot store ${describe(value)} in a ${t.toUpperCase()} column`);
    case 'binary':
      if (isBytes(value)) return checkBytes(col, f, Buffer.from(value));
      if (typeof value === 'string') return checkBytes(col, f, Buffer.from(value, 'utf8'));
      throw new ValueError(`cannot store ${describe(value)} in a binary column`);
  }
  if (t === 'set' && Array.isArray(value)) return checkText(col, f, value.map(String).join(','));
  if (typeof value === 'string') return checkText(col, f, value);
  if (typeof value === 'number' || typeof value === 'bigint') return checkText(col, f, value.toString());
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
