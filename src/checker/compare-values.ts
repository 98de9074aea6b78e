// Comparing states: a key's state on one node (row, with any tombstone that says it is deleted;
// tombstone; absent), the classification of two states with the node LWW says should win, and the
// canonical text of values decoded from the binlog, which the history audit compares (the state
// check reads exact text from the servers instead, see src/sql/checksum.ts). Pure functions.
import { BigNumber } from 'bignumber.js';
import { EnumErrorValue } from '../model/enum-error.ts';
import { TypedJson } from '../model/json.ts';
import { ENUM_ERROR_TEXT } from '../sql/checksum.ts';
import type { FindingClass, NodeState } from './report.ts';

export interface ValueColumn {
  name: string;
  dataType: string;
  columnType: string;
  /** JSON column (MariaDB: LONGTEXT with a json_valid() check). */
  json: boolean;
  /** Character set of a text column, where known (sql/checksum.ts compares some by their bytes). */
  charset?: string | null;
}

const Exact = BigNumber.clone({ EXPONENTIAL_AT: [-7, 20], DECIMAL_PLACES: 1e9 });

const INT_TYPES = new Set(['tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint', 'year']);
const DECIMAL_TYPES = new Set(['decimal', 'numeric', 'fixed']);
const FLOAT_TYPES = new Set(['float', 'double', 'real', 'double precision']);
const TEMPORAL_TYPES = new Set(['date', 'datetime', 'timestamp', 'time']);

function isBytes(v: unknown): v is Uint8Array {
  return v instanceof Uint8Array;
}

function hex(v: Uint8Array): string {
  return `0x${Buffer.from(v).toString('hex').toUpperCase()}`;
}

/** Exact decimal text without exponent noise or trailing fraction zeros: 1.50 → 1.5, -0.00 → 0. */
export function canonicalDecimal(text: string): string {
  const n = new Exact(text);
  if (!n.isFinite()) return text;
  return n.isZero() ? '0' : n.toFixed();
}

/** '12:00:00.500000' → '12:00:00.5'; '2024-01-01 00:00:00.000' → '2024-01-01 00:00:00'. */
export function canonicalTemporal(text: string): string {
  return text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
}

/**
 * Canonical JSON text: object keys sorted (the last of duplicate keys wins, as in MySQL), no
 * whitespace, strings re-escaped, numbers by exact value (1.0 = 1 = 1e0). Invalid JSON: unchanged.
 */
export function canonicalJson(text: string): string {
  try {
    const parser = new JsonCanonicalizer(text);
    const out = parser.value();
    parser.end();
    return out;
  } catch {
    return text;
  }
}

class JsonCanonicalizer {
  private pos = 0;
  constructor(private readonly text: string) {}

  private ws(): void {
    while (this.pos < this.text.length && ' \t\n\r'.includes(this.text[this.pos]!)) this.pos++;
  }

  end(): void {
    this.ws();
    if (this.pos !== this.text.length) throw new Error('trailing text');
  }

  value(): string {
    this.ws();
    const ch = this.text[this.pos];
    if (ch === '{') return this.object();
    if (ch === '[') return this.array();
    if (ch === '"') return JSON.stringify(this.string());
    for (const literal of ['true', 'false', 'null']) {
      if (this.text.startsWith(literal, this.pos)) {
        this.pos += literal.length;
        return literal;
      }
    }
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/.exec(this.text.slice(this.pos, this.pos + 400));
    if (!m) throw new Error(`unexpected character at ${this.pos}`);
    this.pos += m[0].length;
    return canonicalDecimal(m[0]);
  }

  private string(): string {
    if (this.text[this.pos] !== '"') throw new Error(`expected a string at ${this.pos}`);
    let end = this.pos + 1;
    while (end < this.text.length && this.text[end] !== '"') end += this.text[end] === '\\' ? 2 : 1;
    if (end >= this.text.length) throw new Error(`unterminated string at ${this.pos}`);
    // JSON.parse decodes the escapes and refuses raw control characters.
    const decoded = JSON.parse(this.text.slice(this.pos, end + 1)) as string;
    this.pos = end + 1;
    return decoded;
  }

  private expect(ch: string): void {
    this.ws();
    if (this.text[this.pos] !== ch) throw new Error(`expected ${ch} at ${this.pos}`);
    this.pos++;
  }

  private peek(ch: string): boolean {
    this.ws();
    if (this.text[this.pos] === ch) {
      this.pos++;
      return true;
    }
    return false;
  }

  private object(): string {
    this.expect('{');
    const members = new Map<string, string>();
    if (!this.peek('}')) {
      do {
        this.ws();
        const key = this.string();
        this.expect(':');
        members.delete(key);
        members.set(key, this.value());
      } while (this.peek(','));
      this.expect('}');
    }
    const keys = [...members.keys()].sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${members.get(k)}`).join(',')}}`;
  }

  private array(): string {
    this.expect('[');
    const items: string[] = [];
    if (!this.peek(']')) {
      do items.push(this.value());
      while (this.peek(','));
      this.expect(']');
    }
    return `[${items.join(',')}]`;
  }
}

/**
 * The canonical text of one fetched value (null for NULL): equal data gives equal text whatever
 * the column's exact type (DECIMAL scale, fractional-second precision, JSON formatting, charset).
 */
export function canonicalValue(col: ValueColumn, value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof EnumErrorValue) return ENUM_ERROR_TEXT;
  const t = col.dataType;
  if (col.json) {
    if (typeof value === 'string') return canonicalJson(value);
    if (isBytes(value)) return canonicalJson(Buffer.from(value).toString('utf8'));
    // Captured MySQL JSON with typed scalars: the types are part of the value (a DATE is not a string).
    if (value instanceof TypedJson) return `${canonicalJson(value.text)} ${value.scalars.map((s) => `${s.path}:${s.type}`).join(' ')}`;
    return canonicalJson(JSON.stringify(value));
  }
  if (INT_TYPES.has(t)) {
    const text = String(value);
    return /^-?\d+$/.test(text) ? BigInt(text).toString() : text;
  }
  if (DECIMAL_TYPES.has(t)) return canonicalDecimal(String(value));
  if (FLOAT_TYPES.has(t)) {
    const n = typeof value === 'number' ? value : Number(value);
    return Number.isNaN(n) ? String(value) : String(n);
  }
  if (TEMPORAL_TYPES.has(t)) return canonicalTemporal(String(value));
  if (t === 'bit') {
    if (isBytes(value)) return value.length === 0 ? '0' : BigInt(`0x${Buffer.from(value).toString('hex')}`).toString();
    return String(value);
  }
  if (isBytes(value)) return hex(value);
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  // Spatial values come back parsed into objects.
  return canonicalJson(JSON.stringify(value));
}

/**
 * A key's state on one node from its row and its tombstone. A row is what applications see, so it is
 * the state whatever tombstone sits beside it; a tombstone at or above the row's version (LWW says
 * the row is deleted) is kept with it as `tombstone`. Without a row, the tombstone (or nothing).
 */
export function effectiveState(row: { version: bigint; values: Record<string, string | null> } | undefined, tombstone: bigint | undefined): NodeState {
  if (row) {
    if (tombstone !== undefined && tombstone >= row.version) return { kind: 'row', version: row.version, values: row.values, tombstone };
    return { kind: 'row', version: row.version, values: row.values };
  }
  if (tombstone !== undefined) return { kind: 'tombstone', version: tombstone };
  return { kind: 'absent' };
}

/** A row shown to applications although an equal or newer tombstone says it is deleted. */
export function underTombstone(s: NodeState): boolean {
  return s.kind === 'row' && s.tombstone !== undefined;
}

function sameValues(a: Record<string, string | null>, b: Record<string, string | null>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) if (a[k] !== b[k]) return false;
  return true;
}

export function sameState(a: NodeState, b: NodeState): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'absent') return true;
  if (a.kind === 'chunk' || b.kind === 'chunk') return false;
  if (a.version !== (b as { version: bigint }).version) return false;
  if (a.kind === 'row' && b.kind === 'row') return a.tombstone === b.tombstone && sameValues(a.values, b.values);
  return true;
}

/** Whether a pair of states is a finding: they differ, or either shows a row LWW says is deleted. */
export function isFinding(a: NodeState, b: NodeState): boolean {
  return !sameState(a, b) || underTombstone(a) || underTombstone(b);
}

/**
 * The class of a difference, seen from the reference node `a`: `row_under_tombstone` when either
 * node shows a row under an equal or newer tombstone, `missing_row` when the other node lacks a row
 * the reference has, `extra_row` when it has one the reference lacks.
 */
export function classify(a: NodeState, b: NodeState): FindingClass {
  if (a.kind === 'chunk' || b.kind === 'chunk') return 'unexplained_chunk';
  if (underTombstone(a) || underTombstone(b)) return 'row_under_tombstone';
  if (a.kind === 'row' && b.kind === 'row') return a.version === b.version ? 'value_mismatch' : 'version_mismatch';
  if (a.kind === 'row' && b.kind === 'absent') return 'missing_row';
  if (a.kind === 'absent' && b.kind === 'row') return 'extra_row';
  if (a.kind === 'row' || b.kind === 'row') return 'tombstone_vs_row';
  return 'tombstone_mismatch';
}

/**
 * A difference tombstone GC explains: one node holds only a tombstone, the other nothing at all for
 * the key, and the tombstone is below the version under which that other node garbage-collected
 * this table's tombstones (gc_state). Such a tombstone may be removed there already, and nothing
 * older can arrive any more (src/gc/horizon.ts). A row on either side, two different tombstones, or
 * a tombstone at or above the other node's collected horizon stay findings.
 */
export function isCollectedTombstone(a: NodeState, b: NodeState, collectedA: bigint, collectedB: bigint): boolean {
  if (a.kind === 'tombstone' && b.kind === 'absent') return a.version < collectedB;
  if (b.kind === 'tombstone' && a.kind === 'absent') return b.version < collectedA;
  return false;
}

/** What LWW makes of a state: the higher of row and tombstone (a tombstone wins a tie). */
function rank(s: NodeState): [bigint, number] {
  if (s.kind === 'absent' || s.kind === 'chunk') return [-1n, 0];
  if (s.kind === 'row' && s.tombstone !== undefined) return [s.tombstone, 1];
  return [s.version, s.kind === 'tombstone' ? 1 : 0];
}

/**
 * Which side LWW says should win: the higher version (absent loses; a tombstone beats a row of the
 * same version; a row under a tombstone counts as that tombstone, and loses a tie to a node that does
 * not show the row). 'a' or 'b'; null when both hold the same (LWW cannot tell them apart).
 */
export function lwwWinner(a: NodeState, b: NodeState): 'a' | 'b' | null {
  const [va, ka] = rank(a);
  const [vb, kb] = rank(b);
  if (va !== vb) return va > vb ? 'a' : 'b';
  if (ka !== kb) return ka > kb ? 'a' : 'b';
  if (underTombstone(a) !== underTombstone(b)) return underTombstone(a) ? 'b' : 'a';
  return null;
}

/** A fetched key value as a bound parameter: integers as bigint (rendered exactly), the rest as read. */
export function keyParam(col: ValueColumn, value: unknown): unknown {
  if (INT_TYPES.has(col.dataType) && (typeof value === 'string' || typeof value === 'number') && /^-?\d+$/.test(String(value))) {
    return BigInt(String(value));
  }
  return value;
}

const NUMERIC = /^-?\d+(\.\d+)?$/;

/**
 * Orders canonical keys for display: numbers by value, other text by code unit, NULL first. The
 * servers' collations may order text otherwise; this only sorts the findings of one chunk.
 */
export function compareKeys(a: readonly (string | null)[], b: readonly (string | null)[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] ?? null;
    const y = b[i] ?? null;
    if (x === y) continue;
    if (x === null) return -1;
    if (y === null) return 1;
    if (NUMERIC.test(x) && NUMERIC.test(y)) {
      const c = new Exact(x).comparedTo(new Exact(y)) ?? 0;
      if (c !== 0) return c;
      continue;
    }
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}
