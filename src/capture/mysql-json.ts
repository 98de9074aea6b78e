// MySQL's binary JSON (the row-image form of a JSON column) → JSON text as MySQL itself prints it.
// Zongji's own decoder goes through JS values and loses what the server keeps: a double that holds
// an integer (3.0 became 3, an INTEGER on re-insert), -0.0, 64-bit integers in parsed mode, keys such
// as "__proto__", and typed scalars (DECIMAL, DATE...). This renderer walks the bytes and writes the
// text a SELECT returns, so re-inserting it stores the same JSON document.
// Scalars whose type the text loses (DECIMAL, DATE, TIME, DATETIME, unsigned integers) are listed
// with their paths, so the sink can cast them back (src/model/json.ts).
// Format: sql-common/json_binary.h in the MySQL source.
import { type JsonScalarType, memberStep, TypedJson, type TypedJsonScalar } from '../model/json.ts';

const SMALL_OBJECT = 0;
const LARGE_OBJECT = 1;
const SMALL_ARRAY = 2;
const LARGE_ARRAY = 3;
const LITERAL = 4;
const INT16 = 5;
const UINT16 = 6;
const INT32 = 7;
const UINT32 = 8;
const INT64 = 9;
const UINT64 = 10;
const DOUBLE = 11;
const STRING = 12;
const OPAQUE = 15;

// Field types of opaque scalars that MySQL prints as something other than base64.
const FIELD_DATE = 10;
const FIELD_TIME = 11;
const FIELD_DATETIME = 12;
const FIELD_TIMESTAMP = 7;
const FIELD_NEWDECIMAL = 246;

export class JsonDecodeError extends Error {}

/** JSON text for a MySQL binary JSON value (an empty value is JSON null, as the server reads it). */
export function mysqlJsonToText(buf: Buffer): string {
  const doc = mysqlJsonValue(buf);
  return typeof doc === 'string' ? doc : doc.text;
}

/** The document's text, or a TypedJson when it holds scalars the text cannot type. */
export function mysqlJsonValue(buf: Buffer): string | TypedJson {
  if (buf.length === 0) return 'null';
  const w: Walk = { buf, out: [], scalars: [] };
  writeValue(w, buf[0]!, 1, buf.length, '$');
  const text = w.out.join('');
  return w.scalars.length === 0 ? text : new TypedJson(text, w.scalars);
}

interface Walk {
  buf: Buffer;
  out: string[];
  scalars: TypedJsonScalar[];
}

/** Integers above this parse back as unsigned anyway; below it, an unsigned one must be cast back. */
const MAX_SIGNED = (1n << 63n) - 1n;

function typed(w: Walk, path: string, type: JsonScalarType, value: string, extra?: { precision: number; scale: number }): void {
  w.scalars.push({ path, type, value, ...extra });
}

function need(buf: Buffer, end: number): void {
  if (end > buf.length) throw new JsonDecodeError(`binary JSON truncated: needs ${end} bytes, has ${buf.length}`);
}

/** Writes the value of `type` whose data starts at `pos` (for containers: the container start). */
function writeValue(w: Walk, type: number, pos: number, end: number, path: string): void {
  const { buf, out } = w;
  switch (type) {
    case SMALL_OBJECT:
    case LARGE_OBJECT:
      writeContainer(w, pos, type === LARGE_OBJECT, true, path);
      return;
    case SMALL_ARRAY:
    case LARGE_ARRAY:
      writeContainer(w, pos, type === LARGE_ARRAY, false, path);
      return;
    case LITERAL:
      need(buf, pos + 1);
      out.push(literal(buf[pos]!));
      return;
    case INT16:
      need(buf, pos + 2);
      out.push(String(buf.readInt16LE(pos)));
      return;
    case UINT16:
      need(buf, pos + 2);
      unsigned(w, BigInt(buf.readUInt16LE(pos)), path);
      return;
    case INT32:
      need(buf, pos + 4);
      out.push(String(buf.readInt32LE(pos)));
      return;
    case UINT32:
      need(buf, pos + 4);
      unsigned(w, BigInt(buf.readUInt32LE(pos)), path);
      return;
    case INT64:
      need(buf, pos + 8);
      out.push(buf.readBigInt64LE(pos).toString());
      return;
    case UINT64:
      need(buf, pos + 8);
      unsigned(w, buf.readBigUInt64LE(pos), path);
      return;
    case DOUBLE:
      need(buf, pos + 8);
      out.push(formatDouble(buf.readDoubleLE(pos)));
      return;
    case STRING: {
      const [len, start] = varLength(buf, pos);
      need(buf, start + len);
      out.push(JSON.stringify(buf.toString('utf8', start, start + len)));
      return;
    }
    case OPAQUE: {
      need(buf, pos + 1);
      const fieldType = buf[pos]!;
      const [len, start] = varLength(buf, pos + 1);
      need(buf, start + len);
      out.push(opaque(w, fieldType, buf.subarray(start, start + len), path));
      return;
    }
    default:
      throw new JsonDecodeError(`unknown binary JSON type ${type} at byte ${pos} (of ${end})`);
  }
}

function unsigned(w: Walk, n: bigint, path: string): void {
  const text = n.toString();
  w.out.push(text);
  if (n <= MAX_SIGNED) typed(w, path, 'unsigned', text);
}

function literal(v: number): string {
  if (v === 0) return 'null';
  if (v === 1) return 'true';
  if (v === 2) return 'false';
  throw new JsonDecodeError(`unknown binary JSON literal ${v}`);
}

/** Containers: count, size, then key entries (objects), then value entries; offsets from `start`. */
function writeContainer(walk: Walk, start: number, large: boolean, isObject: boolean, path: string): void {
  const { buf, out } = walk;
  const w = large ? 4 : 2;
  const read = (at: number) => {
    need(buf, at + w);
    return large ? buf.readUInt32LE(at) : buf.readUInt16LE(at);
  };
  const count = read(start);
  const size = read(start + w);
  need(buf, start + size);
  const keyEntries = start + 2 * w;
  const valueEntries = keyEntries + (isObject ? count * (w + 2) : 0);
  out.push(isObject ? '{' : '[');
  for (let i = 0; i < count; i++) {
    if (i > 0) out.push(', ');
    let step = `[${i}]`;
    if (isObject) {
      const entry = keyEntries + i * (w + 2);
      const keyOffset = read(entry);
      need(buf, entry + w + 2);
      const keyLength = buf.readUInt16LE(entry + w);
      need(buf, start + keyOffset + keyLength);
      const key = buf.toString('utf8', start + keyOffset, start + keyOffset + keyLength);
      out.push(JSON.stringify(key), ': ');
      step = memberStep(key);
    }
    const entry = valueEntries + i * (1 + w);
    need(buf, entry + 1 + w);
    const type = buf[entry]!;
    // Small scalars are inlined in the entry; everything else sits at an offset from the container start.
    const inlined = type === LITERAL || type === INT16 || type === UINT16 || (large && (type === INT32 || type === UINT32));
    writeValue(walk, type, inlined ? entry + 1 : start + read(entry + 1), start + size, `${path}${step}`);
  }
  out.push(isObject ? '}' : ']');
}

/** Lengths are stored 7 bits per byte, low bits first, high bit = more bytes follow. */
function varLength(buf: Buffer, pos: number): [number, number] {
  let len = 0;
  for (let i = 0; i < 5; i++) {
    need(buf, pos + i + 1);
    const b = buf[pos + i]!;
    len += (b & 0x7f) * 2 ** (7 * i);
    if ((b & 0x80) === 0) return [len, pos + i + 1];
  }
  throw new JsonDecodeError(`binary JSON length at byte ${pos} is too long`);
}

/**
 * A JSON double as MySQL prints it: the shortest digits that round-trip, always recognizably a
 * double (3.0, -0.0). Positional notation when the decimal point falls within -14..15 places (or
 * inside the digits), else 1.5e16 / 1e-15 (rule measured on MySQL 9.7).
 */
export function formatDouble(d: number): string {
  if (d === 0) return Object.is(d, -0) ? '-0.0' : '0.0';
  const sign = d < 0 ? '-' : '';
  const [mantissa, exponent] = Math.abs(d).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const decpt = Number(exponent) + 1; // digits before the decimal point
  if (decpt >= -14 && (decpt <= 15 || decpt < digits.length)) {
    if (decpt <= 0) return `${sign}0.${'0'.repeat(-decpt)}${digits}`;
    if (decpt < digits.length) return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
    return `${sign}${digits}${'0'.repeat(decpt - digits.length)}.0`;
  }
  return `${sign}${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ''}e${decpt - 1}`;
}

function pad(n: number | bigint, width: number): string {
  return String(n).padStart(width, '0');
}

/** An opaque scalar's text; DECIMAL and temporal values are also listed with their type. */
function opaque(w: Walk, fieldType: number, data: Buffer, path: string): string {
  switch (fieldType) {
    case FIELD_NEWDECIMAL: {
      const text = decimalText(data);
      typed(w, path, 'decimal', text, { precision: data[0]!, scale: data[1]! });
      return text;
    }
    case FIELD_DATE:
    case FIELD_DATETIME:
    case FIELD_TIMESTAMP: {
      // Packed datetime: ((year*13+month) << 22 | day << 17 | hour << 12 | minute << 6 | second) << 24 | micros.
      if (data.length < 8) break;
      let v = data.readBigInt64LE(0);
      if (v < 0n) v = -v;
      const micros = v & 0xffffffn;
      const ymdhms = v >> 24n;
      const ymd = ymdhms >> 17n;
      const hms = ymdhms & 0x1ffffn;
      const ym = ymd >> 5n;
      const date = `${pad(ym / 13n, 4)}-${pad(ym % 13n, 2)}-${pad(ymd & 31n, 2)}`;
      if (fieldType === FIELD_DATE) {
        typed(w, path, 'date', date);
        return JSON.stringify(date);
      }
      const time = `${pad(hms >> 12n, 2)}:${pad((hms >> 6n) & 63n, 2)}:${pad(hms & 63n, 2)}.${pad(micros, 6)}`;
      // A TIMESTAMP comes back as a DATETIME (no CAST yields a TIMESTAMP): same value and text.
      typed(w, path, 'datetime', `${date} ${time}`);
      return JSON.stringify(`${date} ${time}`);
    }
    case FIELD_TIME: {
      // Packed time: (hour << 12 | minute << 6 | second) << 24 | micros, negated for negative times.
      if (data.length < 8) break;
      let v = data.readBigInt64LE(0);
      const negative = v < 0n;
      if (negative) v = -v;
      const micros = v & 0xffffffn;
      const hms = v >> 24n;
      const hour = hms >> 12n;
      const text = `${negative ? '-' : ''}${pad(hour, 2)}:${pad((hms >> 6n) & 63n, 2)}:${pad(hms & 63n, 2)}.${pad(micros, 6)}`;
      typed(w, path, 'time', text);
      return JSON.stringify(text);
    }
  }
  return JSON.stringify(`base64:type${fieldType}:${data.toString('base64')}`);
}

const DIGITS_PER_WORD = 9;
const BYTES_FOR_DIGITS = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

/** MySQL's binary DECIMAL (precision, scale, then the digits) as a numeral with `scale` decimals. */
export function decimalText(data: Buffer): string {
  const precision = data[0]!;
  const scale = data[1]!;
  const bytes = Buffer.from(data.subarray(2));
  const intDigits = precision - scale;
  const intWords = Math.floor(intDigits / DIGITS_PER_WORD);
  const intLead = intDigits % DIGITS_PER_WORD;
  const fracWords = Math.floor(scale / DIGITS_PER_WORD);
  const fracTail = scale % DIGITS_PER_WORD;
  const size = intWords * 4 + BYTES_FOR_DIGITS[intLead]! + fracWords * 4 + BYTES_FOR_DIGITS[fracTail]!;
  if (bytes.length < size || size === 0) throw new JsonDecodeError(`binary DECIMAL(${precision},${scale}) needs ${size} bytes, has ${bytes.length}`);
  const positive = (bytes[0]! & 0x80) !== 0;
  bytes[0] = bytes[0]! ^ 0x80;
  const mask = positive ? 0 : 0xff;
  let pos = 0;
  const readWord = (n: number): number => {
    let v = 0;
    for (let i = 0; i < n; i++) v = v * 256 + (bytes[pos + i]! ^ mask);
    pos += n;
    return v;
  };
  let intText = '';
  if (intLead > 0) intText += String(readWord(BYTES_FOR_DIGITS[intLead]!));
  for (let i = 0; i < intWords; i++) intText += pad(readWord(4), DIGITS_PER_WORD);
  intText = intText.replace(/^0+(?=\d)/, '') || '0';
  let fracText = '';
  for (let i = 0; i < fracWords; i++) fracText += pad(readWord(4), DIGITS_PER_WORD);
  if (fracTail > 0) fracText += pad(readWord(BYTES_FOR_DIGITS[fracTail]!), fracTail);
  const text = scale > 0 ? `${intText}.${fracText}` : intText;
  return positive || /^[0.]+$/.test(text) ? text : `-${text}`;
}
