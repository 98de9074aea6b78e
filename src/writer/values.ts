// Converts row-image values to what the server stores exactly, per column type, and rejects values
// that cannot be stored faithfully. Runs at validation time, before anything is written.
import { BigNumber } from 'bignumber.js';
import { EnumErrorValue } from '../model/enum-error.ts';
import { TypedJson, type TypedJsonScalar } from '../model/json.ts';
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
  const width = bitWidth(columnType);
  const bytes = Math.ceil(width / 8);
  if (isBytes(value)) {
    // The server refuses bits past the width (0x08 into BIT(3)); leading zero bytes are no bits.
    const buf = Buffer.from(value);
    const first = buf.findIndex((b) => b !== 0);
    const significant = first < 0 ? 0 : (buf.length - first - 1) * 8 + (32 - Math.clz32(buf[first]!));
    if (significant > width) throw new ValueError(`0x${buf.toString('hex')} has ${significant} significant bits, more than ${columnType} holds`);
    return buf;
  }
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
  /** Characters the column's character set holds, where known (others are left to the server). */
  repertoire?: 'utf8mb3' | 'latin1' | 'ascii';
  /** ENUM and SET members, as the collation compares them (lower case unless case-sensitive). */
  members?: string[];
  /** ENUM/SET: the collation tells letter case apart (_bin, _cs): 'A' is not member 'a'. */
  caseSensitive: boolean;
  /** TIME, DATETIME, TIMESTAMP: fractional-second digits the column keeps. */
  fsp: number;
  /** FLOAT(M,D) / DOUBLE(M,D): the declared digits and decimals, which the server rounds to and checks. */
  floatDigits?: [number, number];
  /** ENUM and SET members as declared (a number names one by position, or a SET of them by bits). */
  memberNames?: string[];
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
    repertoire: col.charset === 'utf8mb3' || col.charset === 'utf8' ? 'utf8mb3' : col.charset === 'latin1' || col.charset === 'ascii' ? col.charset : undefined,
    caseSensitive: /_bin$|_cs$/.test(col.collation ?? ''),
    fsp: TEMPORAL_TYPES.has(t) && m ? Number(m[1]) : 0,
  };
  const r = INT_RANGES[t];
  if (r) {
    f.range = unsigned ? [0n, r[2]] : [r[0], r[1]];
    f.rangeNumbers = [Number(f.range[0]), Number(f.range[1])];
  }
  if (t === 'varchar' || t === 'char') f.chars = declaredLength(col.columnType);
  f.bytes = t === 'binary' || t === 'varbinary' ? declaredLength(col.columnType) : BYTE_LIMITS[t];
  if (t === 'enum' || t === 'set') {
    // The server drops a member's trailing spaces at CREATE TABLE; COLUMN_TYPE shows them dropped.
    f.memberNames = [...col.columnType.matchAll(/'((?:[^']|'')*)'/g)].map((e) => unescapeMember(e[1]!));
    f.members = f.memberNames.map((name) => memberForm(f!, name));
  }
  if (kind === 'float' && m?.[2] !== undefined) f.floatDigits = [Number(m[1]), Number(m[2])];
  facts.set(col, f);
  return f;
}

/** A number in decimal notation, with the spaces around it the server skips. */
const FLOAT_TEXT = /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;

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

/** A member as COLUMN_TYPE quotes it: a quote doubled; a backslash, NUL, newline, return and Ctrl-Z escaped by a backslash. */
export function unescapeMember(quoted: string): string {
  const escapes: Record<string, string> = { '\\': '\\', '0': '\0', n: '\n', r: '\r', Z: '\x1a', "'": "'" };
  return quoted.replace(/''|\\(.)/gs, (_whole, c: string | undefined) => (c === undefined ? "'" : (escapes[c] ?? c)));
}

function checkDecimal(col: ColumnMeta, f: ColumnFacts, text: string): string {
  const { precision, scale } = f;
  // The server rounds extra fraction digits half away from zero: the stored value would not be the
  // one given (1.005 into DECIMAL(5,2) is 1.01), so they are refused unless they are zeros.
  const n = new BigNumber(text);
  const rounded = n.decimalPlaces(scale, BigNumber.ROUND_HALF_UP);
  if (!rounded.eq(n)) throw new ValueError(`${text} has more than ${scale} fraction digits; ${col.columnType} would store ${rounded.toFixed(scale)} (round it first)`);
  if (rounded.abs().integerValue(BigNumber.ROUND_DOWN).toFixed().replace(/^0$/, '').length > precision - scale) {
    throw new ValueError(`${text} is out of range for ${col.columnType}`);
  }
  if (f.unsigned && n.isNegative() && !n.isZero()) throw new ValueError(`${text} is negative in an unsigned column`);
  return text;
}

/**
 * The double a FLOAT(M,D)/DOUBLE(M,D) column stores for n (both engines, truncate_double): the
 * whole part plus the fraction rounded half to even at D decimals. That sum is not always the
 * nearest double to the D-decimal value (6.69 is stored as 6.6899999999999995), so this, not n, is
 * what a key must be bound as to find its row.
 */
export function storedAtDecimals(n: number, d: number): number {
  // The server's powers of ten are double literals (1e23 is not 10 ** 23 in JS).
  const ten = Number(`1e${d}`);
  const whole = Math.floor(n);
  const scaled = (n - whole) * ten;
  const low = Math.floor(scaled);
  const diff = scaled - low;
  const rounded = diff > 0.5 ? low + 1 : diff < 0.5 ? low : low % 2 === 0 ? low : low + 1;
  return whole + rounded / ten;
}

/** Checks a float for its column; returns what the column stores for it (FLOAT: single precision), which is what is bound. */
function checkFloat(col: ColumnMeta, f: ColumnFacts, n: number): number {
  if (!Number.isFinite(n)) throw new ValueError(`${n} cannot be stored (the server has no NaN or Infinity)`);
  if (col.dataType === 'float' && Math.abs(n) > FLOAT_MAX) throw new ValueError(`${n} is out of range for FLOAT`);
  if (f.unsigned && n < 0) throw new ValueError(`${n} is negative in an unsigned column`);
  const single = (x: number) => (col.dataType === 'float' ? Math.fround(x) : x);
  const digits = f.floatDigits;
  if (!digits) return single(n);
  // FLOAT(M,D) keeps D decimals (the server rounds the rest away) and at most 10^(M-D) - 10^-D.
  const [m, d] = digits;
  const atDecimals = storedAtDecimals(n, d);
  const stored = single(atDecimals);
  // Taken: a value with at most D decimals (6.69, stored as 6.6899999999999995), or what the column
  // already stores (that double, or what capture reads of a FLOAT: 1.2345999479293823 for 1.2346).
  if (Number(n.toFixed(d)) !== n && stored !== single(n)) throw new ValueError(`${n} has more than ${d} decimals; ${col.columnType} would store ${Number(stored.toFixed(d))}`);
  if (Math.abs(atDecimals) > Number(`1e${m - d}`) - 1 / Number(`1e${d}`)) throw new ValueError(`${n} is out of range for ${col.columnType}`);
  return stored;
}

/** Trailing spaces are not part of an ENUM/SET member (the server drops them); case as the collation compares. */
function memberForm(f: ColumnFacts, text: string): string {
  const trimmed = text.replace(/ +$/, '');
  return f.caseSensitive ? trimmed : trimmed.toLowerCase();
}

/** A UTF-16 text with a lone surrogate: UTF-8 has no form for it, and the driver sends U+FFFD instead. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkWellFormed(text: string): void {
  if (LONE_SURROGATE.test(text)) throw new ValueError('holds a lone UTF-16 surrogate, which no character set can store (it would arrive as U+FFFD)');
}

/** Characters of MySQL's latin1 (Windows-1252, with its five unassigned bytes kept as U+0081, U+008D, U+008F, U+0090, U+009D). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the class lists what the character set holds, controls included
const NOT_LATIN1 = /[^\u0000-\u007F\u0081\u008D\u008F\u0090\u009D\u00A0-\u00FF\u0152\u0153\u0160\u0161\u0178\u017D\u017E\u0192\u02C6\u02DC\u2013\u2014\u2018-\u201A\u201C-\u201E\u2020-\u2022\u2026\u2030\u2039\u203A\u20AC\u2122]/u;
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above
const NOT_ASCII = /[^\u0000-\u007F]/;
const FOUR_BYTE = /[\u{10000}-\u{10FFFF}]/u;

function checkRepertoire(col: ColumnMeta, f: ColumnFacts, text: string): void {
  const outside = f.repertoire === 'utf8mb3' ? FOUR_BYTE : f.repertoire === 'latin1' ? NOT_LATIN1 : f.repertoire === 'ascii' ? NOT_ASCII : undefined;
  const m = outside?.exec(text);
  if (m) {
    const cp = m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    throw new ValueError(`character U+${cp} does not exist in the ${col.charset} column's character set`);
  }
}

function checkText(col: ColumnMeta, f: ColumnFacts, text: string): string {
  checkWellFormed(text);
  const chars = f.chars;
  // CHAR drops trailing spaces when read, so 'abc  ' in CHAR(3) is stored and read as 'abc'.
  const counted = col.dataType === 'char' && text.endsWith(' ') ? text.replace(/ +$/, '') : text;
  // A text never has more characters than UTF-16 units, nor more UTF-8 bytes than 3 per unit.
  if (chars !== undefined && counted.length > chars) {
    let n = 0;
    for (const _ of counted) n++;
    if (n > chars) throw new ValueError(`${n} characters do not fit ${col.columnType}`);
  }
  const bytes = f.bytes;
  if (bytes !== undefined && text.length * 3 > bytes && Buffer.byteLength(text, 'utf8') > bytes) {
    throw new ValueError(`${Buffer.byteLength(text, 'utf8')} bytes do not fit ${col.dataType.toUpperCase()}`);
  }
  checkRepertoire(col, f, text);
  if (col.dataType === 'enum') checkEnum(col, f, text);
  else if (col.dataType === 'set') checkSet(col, f, text);
  return text;
}

function checkEnum(col: ColumnMeta, f: ColumnFacts, text: string): void {
  const members = f.members!;
  // A number names a member by position, as the server reads it (0 is the invalid-value index: refused).
  const index = /^\d+$/.test(text) ? Number(text) : 0;
  if (!members.includes(memberForm(f, text)) && !(index >= 1 && index <= members.length)) {
    throw new ValueError(`${JSON.stringify(text)} is not one of ${col.columnType}${f.caseSensitive ? ` (${col.collation} tells letter case apart)` : ''}`);
  }
}

/**
 * A number names an ENUM member by position (1 is the first) and a SET by its bits, as the server
 * reads a number; sent as text it would name the member spelled '1' where there is one. Written as
 * the members' names.
 */
function memberOfNumber(col: ColumnMeta, f: ColumnFacts, value: number | bigint): string {
  const names = f.memberNames!;
  if (typeof value === 'number' && !Number.isSafeInteger(value)) throw new ValueError(`${value} is not a member position of ${col.columnType}`);
  const n = BigInt(value);
  if (col.dataType === 'enum') {
    if (n < 1n || n > BigInt(names.length)) throw new ValueError(`${n} is not a member position of ${col.columnType} (1..${names.length})`);
    return names[Number(n) - 1]!;
  }
  if (n < 0n || n >= 1n << BigInt(names.length)) throw new ValueError(`${n} is not a set of members of ${col.columnType} (bits 0..${names.length - 1})`);
  return names.filter((_, i) => (n >> BigInt(i)) & 1n).join(',');
}

function checkSet(col: ColumnMeta, f: ColumnFacts, text: string): void {
  const members = f.members!;
  if (text === '' || members.includes(memberForm(f, text))) return;
  // Digits that name no member are a bit mask of members, as the server reads them.
  if (/^\d+$/.test(text) && BigInt(text) < 1n << BigInt(members.length)) return;
  for (const part of text.split(',')) {
    if (part === '' || !members.includes(memberForm(f, part))) {
      throw new ValueError(`${JSON.stringify(part)} in ${JSON.stringify(text)} is not a member of ${col.columnType}${f.caseSensitive ? ` (${col.collation} tells letter case apart)` : ''}`);
    }
  }
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
/**
 * What each server's JSON parser takes: MySQL's JSON type nests up to 100 levels and holds numbers
 * as doubles; MariaDB's JSON is a LONGTEXT checked by JSON_VALID, which refuses 32 levels and more
 * and keeps a number's text as given.
 */
interface JsonLimits {
  depth: number;
  doubles: boolean;
}
const MYSQL_JSON: JsonLimits = { depth: 100, doubles: true };
const MARIADB_JSON: JsonLimits = { depth: 31, doubles: false };

function jsonLimits(col: ColumnMeta): JsonLimits {
  return col.dataType === 'json' ? MYSQL_JSON : MARIADB_JSON;
}

/** What JSON.parse takes and the server does not: lone surrogates (also as escapes), depth, numbers past a double. */
function checkJsonDocument(value: unknown, limits: JsonLimits, depth: number): void {
  // Arrays and objects count as levels; a scalar inside the deepest one does not.
  if (depth > limits.depth && value !== null && typeof value === 'object') throw new ValueError(`nests deeper than ${limits.depth} levels, which the server refuses`);
  if (typeof value === 'string') checkWellFormed(value);
  else if (typeof value === 'number') {
    if (limits.doubles && !Number.isFinite(value)) throw new ValueError('holds a number beyond the range of a double');
  } else if (Array.isArray(value)) {
    for (const v of value) checkJsonDocument(v, limits, depth + 1);
  } else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      checkWellFormed(k);
      checkJsonDocument(v, limits, depth + 1);
    }
  }
}

const INT64_MIN = -(1n << 63n);
const UINT64_MAX = (1n << 64n) - 1n;

/** MySQL's JSON holds an integer beyond 64 bits as a double: another value, and another type. */
function checkJsonInteger(digits: string): void {
  const n = BigInt(digits);
  if (n < INT64_MIN || n > UINT64_MAX) throw new ValueError(`holds the integer ${digits}, beyond 64 bits: MySQL's JSON would store it as the double ${Number(n)}`);
}

/** Integer tokens of JSON text (outside strings), checked as checkJsonInteger. */
function checkJsonTextIntegers(text: string): void {
  const token = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?/g;
  for (const m of text.matchAll(token)) {
    const t = m[0];
    if (t.charCodeAt(0) !== 34 && !/[.eE]/.test(t) && t.length > 18) checkJsonInteger(t);
  }
}

function stringifyJson(value: unknown, seen: Set<object>, limits: JsonLimits): string | undefined {
  if (typeof value === 'bigint') {
    if (limits.doubles) checkJsonInteger(value.toString());
    return value.toString();
  }
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return stringifyJson((value as { toJSON: () => unknown }).toJSON(), seen, limits);
  }
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new ValueError(`${value} is not a JSON number`);
    if (typeof value === 'string') checkWellFormed(value);
    return JSON.stringify(value);
  }
  if (seen.has(value)) throw new ValueError('cannot be serialized as JSON (it contains itself)');
  seen.add(value);
  // The containers open on the way here are the document's depth at this one.
  if (seen.size > limits.depth) throw new ValueError(`nests deeper than ${limits.depth} levels, which the server refuses`);
  let text: string;
  if (Array.isArray(value)) {
    text = `[${value.map((v) => stringifyJson(v, seen, limits) ?? 'null').join(',')}]`;
  } else {
    const members: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      checkWellFormed(k);
      const t = stringifyJson(v, seen, limits);
      if (t !== undefined) members.push(`${JSON.stringify(k)}:${t}`);
    }
    text = `{${members.join(',')}}`;
  }
  seen.delete(value);
  return text;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

function checkJsonText(col: ColumnMeta, text: string): string {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new ValueError('is not valid JSON text');
  }
  const limits = jsonLimits(col);
  checkJsonDocument(doc, limits, 1);
  if (limits.doubles) checkJsonTextIntegers(text);
  return text;
}

function jsonTextOfBytes(bytes: Uint8Array): string {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw new ValueError('is not valid UTF-8, so it is not JSON text');
  }
}

/** What the server would refuse in a typed scalar's CAST: a DECIMAL without a valid precision and scale, or a date or time that does not exist. */
function checkTypedScalar(s: TypedJsonScalar): void {
  const v = s.value;
  if (s.type === 'decimal') {
    const { precision, scale } = s;
    if (!Number.isInteger(precision) || !Number.isInteger(scale) || precision! < 1 || precision! > 65 || scale! < 0 || scale! > 30 || scale! > precision!) {
      throw new ValueError(`typed JSON scalar ${JSON.stringify(s)}: a DECIMAL needs a precision (1..65) and a scale (0..30, at most the precision)`);
    }
    const [whole = '', fraction = ''] = v.replace(/^-/, '').split('.');
    if (fraction.length > scale! || whole.replace(/^0+/, '').length > precision! - scale!) throw new ValueError(`typed JSON scalar ${JSON.stringify(s)}: ${v} does not fit DECIMAL(${precision},${scale})`);
    return;
  }
  if (s.type === 'date' || s.type === 'datetime') {
    const y = digitsAt(v, 0, 4);
    const mo = digitsAt(v, 5, 2);
    const d = digitsAt(v, 8, 2);
    if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) throw new ValueError(`typed JSON scalar ${JSON.stringify(s)}: ${v} is not a valid date`);
  }
  const clock = s.type === 'datetime' ? v.slice(11) : s.type === 'time' ? v.replace(/^-/, '') : undefined;
  if (clock !== undefined) {
    const [h, mi, sec] = clock.split(':').map((p) => Number.parseFloat(p));
    if (mi! > 59 || sec! >= 60 || (s.type === 'datetime' ? h! > 23 : h! > 838)) throw new ValueError(`typed JSON scalar ${JSON.stringify(s)}: ${v} is not a valid ${s.type.toUpperCase()}`);
  }
}

/** The value at a MySQL JSON path of member steps (`."key"`, JSON string syntax) and array steps (`[2]`); undefined when absent or not such a path. */
function jsonAtPath(doc: unknown, path: string): unknown {
  let at: unknown = doc;
  let i = 1;
  while (i < path.length) {
    if (path.startsWith('."', i)) {
      let j = i + 2;
      while (j < path.length && path[j] !== '"') j += path[j] === '\\' ? 2 : 1;
      let key: string;
      try {
        key = JSON.parse(path.slice(i + 1, j + 1)) as string;
      } catch {
        return undefined;
      }
      if (at === null || typeof at !== 'object' || Array.isArray(at) || !Object.hasOwn(at, key)) return undefined;
      at = (at as Record<string, unknown>)[key];
      i = j + 1;
    } else if (path[i] === '[') {
      const close = path.indexOf(']', i);
      const index = close < 0 ? Number.NaN : Number(path.slice(i + 1, close));
      if (!Number.isInteger(index) || !Array.isArray(at) || index < 0 || index >= at.length) return undefined;
      at = at[index];
      i = close + 1;
    } else return undefined;
  }
  return at;
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
    checkJsonText(col, value.text);
    let doc: unknown;
    for (const s of value.scalars) {
      const pattern = JSON_SCALAR_TEXT[s.type];
      if (!pattern || typeof s.path !== 'string' || !s.path.startsWith('$') || typeof s.value !== 'string' || !pattern.test(s.value)) {
        throw new ValueError(`typed JSON scalar ${JSON.stringify(s)} is not a ${String(s.type).toUpperCase()} at a JSON path`);
      }
      checkTypedScalar(s);
      // The scalar types the text's own value there: one that says otherwise would be stored on
      // MySQL (the CAST sets it) and not on MariaDB (text only).
      doc ??= JSON.parse(value.text);
      const at = jsonAtPath(doc, s.path);
      const agrees = s.type === 'decimal' || s.type === 'unsigned' ? typeof at === 'number' && at === Number(s.value) : at === s.value;
      if (!agrees) throw new ValueError(`typed JSON scalar ${JSON.stringify(s)} does not match the document's value there (${at === undefined ? 'nothing' : JSON.stringify(at)})`);
    }
    return col.dataType === 'json' && value.scalars.length > 0 ? value : value.text;
  }
  if (typeof value === 'string' || isBytes(value)) return checkJsonText(col, typeof value === 'string' ? value : jsonTextOfBytes(value));
  // Checked as it is written (depth, numbers, strings): no second parse of the text.
  const text = stringifyJson(value, new Set(), jsonLimits(col));
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

/**
 * Fractional-second digits past what the column keeps must be zeros: MySQL rounds them and MariaDB
 * truncates them, so the stored value would be neither what was given nor the same on both engines.
 */
function checkFraction(col: ColumnMeta, f: ColumnFacts, text: string, point: number): void {
  if (point < 0) return;
  for (let i = point + 1 + f.fsp; i < text.length; i++) {
    if (text.charCodeAt(i) !== 48) {
      throw new ValueError(`${text} has more fractional-second digits than ${col.columnType.toUpperCase()} keeps (MySQL would round them, MariaDB truncate them)`);
    }
  }
}

const TIME_TEXT = /^-?(\d{1,3}):(\d{2}):(\d{2})(\.\d{1,6})?$/;

function checkTime(col: ColumnMeta, f: ColumnFacts, text: string): string {
  const m = TIME_TEXT.exec(text);
  if (!m) throw new ValueError(`${JSON.stringify(text)} is not a TIME ([-]hhh:mm:ss[.ffffff])`);
  const h = Number(m[1]);
  if (Number(m[2]) > 59 || Number(m[3]) > 59) throw new ValueError(`${text} is not a valid TIME (minutes and seconds go to 59)`);
  // 838:59:59 is the end, with no fraction past it.
  if (h > 838 || (h === 838 && m[2] === '59' && m[3] === '59' && /[1-9]/.test(m[4] ?? ''))) {
    throw new ValueError(`${text} is outside the TIME range (-838:59:59 .. 838:59:59)`);
  }
  checkFraction(col, f, text, text.indexOf('.'));
  return text;
}

/** YEAR keeps 1901..2155 and 0000; the server turns one- and two-digit years into 19xx/20xx. */
function checkYear(value: number | string, columnType: string): number | string {
  // MariaDB's YEAR(2) holds 1970..2069 as two digits, and reads back as those two digits.
  if (/^year\(2\)/i.test(columnType)) {
    const n = typeof value === 'number' ? value : /^\d{1,4}$/.test(value) ? Number(value) : Number.NaN;
    if (Number.isInteger(n) && ((n >= 0 && n <= 99) || (n >= 1970 && n <= 2069))) return value;
    throw new ValueError(`${JSON.stringify(value)} is not a YEAR(2) (00..99, or 1970..2069)`);
  }
  const ok =
    typeof value === 'number' ? Number.isInteger(value) && (value === 0 || (value >= 1901 && value <= 2155)) : /^\d{4}$/.test(value) && (value === '0000' || (value >= '1901' && value <= '2155'));
  if (!ok) {
    throw new ValueError(`${JSON.stringify(value)} is not a YEAR the column stores as given (1901..2155, or 0 / '0000'; the server turns 1 to 99 into 19xx or 20xx)`);
  }
  return value;
}

function checkTemporal(col: ColumnMeta, f: ColumnFacts, text: string): string {
  const t = col.dataType;
  if (t === 'time') return checkTime(col, f, text);
  if (t === 'year') return checkYear(text, col.columnType) as string;
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
    if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) {
      throw new ValueError(
        `${text} is not a valid date (a source session with sql_mode ALLOW_INVALID_DATES or without strict mode stores such dates; the sink's strict session cannot write one: set the row to a valid date on the source, then resume after this transaction)`,
      );
    }
  }
  if (h > 23 || mi > 59 || sec > 59) throw new ValueError(`${text} is not a valid time of day`);
  // Compared as text with a space separator ('T' sorts after it: the last second passed for out of range).
  const spaced = len > 10 && text.charCodeAt(10) === 84 ? `${text.slice(0, 10)} ${text.slice(11)}` : text;
  if (t === 'timestamp' && !zero && (spaced < '1970-01-01 00:00:01' || spaced > '2038-01-19 03:14:07.999999')) {
    throw new ValueError(`${text} is outside the TIMESTAMP range (1970-01-01 00:00:01 .. 2038-01-19 03:14:07.999999 UTC)`);
  }
  if (len > 19) checkFraction(col, f, text, 19);
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
  if (value instanceof EnumErrorValue) {
    throw new ValueError(
      "is the ENUM error value (index 0, stored for an invalid value by a session without strict sql_mode): no strict session can write it, and '' would be another value; set the row to a member (or NULL) on the source, then resume from a position after this transaction (the fix then crosses)",
    );
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
      // A FLOAT holds single precision: bound as that value, so that it also matches the stored one
      // where it is compared (a key 0.1 bound as the double 0.1 found no row, nor its tombstone).
      // FLOAT(M,D)/DOUBLE(M,D) likewise as the double the column stores (storedAtDecimals).
      if (typeof value === 'number') return checkFloat(col, f, value);
      // Decimal notation only: JS also reads '0x10', '0b1' and 'Infinity', which the server refuses.
      if (typeof value === 'string' && FLOAT_TEXT.test(value)) {
        const stored = checkFloat(col, f, Number(value));
        return t === 'float' || f.floatDigits ? stored : value;
      }
      throw new ValueError(`cannot store ${describe(value)} in a floating-point column`);
    case 'bit':
      return bitValue(value, col.columnType);
    case 'json':
      return jsonValue(col, value);
    case 'temporal':
      if (value instanceof Date) return checkTemporal(col, f, formatDate(value, t));
      if (typeof value === 'string') return checkTemporal(col, f, value);
      if (typeof value === 'number' && t === 'year') return checkYear(value, col.columnType);
      throw new ValueError(`cannot store ${describe(value)} in a ${t.toUpperCase()} column`);
    case 'binary':
      if (isBytes(value)) return checkBytes(col, f, Buffer.from(value));
      if (typeof value === 'string') {
        checkWellFormed(value);
        return checkBytes(col, f, Buffer.from(value, 'utf8'));
      }
      throw new ValueError(`cannot store ${describe(value)} in a binary column`);
  }
  if (t === 'set' && Array.isArray(value)) return checkText(col, f, value.map(String).join(','));
  if ((t === 'enum' || t === 'set') && (typeof value === 'number' || typeof value === 'bigint')) return memberOfNumber(col, f, value);
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
