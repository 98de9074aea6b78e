// Generated schemas for the harness: random tables drawn from a small grammar, reproducible from a
// seed, so the writers exercise the key types, collations and table shapes applications really use
// (temporal, decimal and collated keys, composite keys of mixed types, secondary UNIQUE keys,
// nullable columns, JSON, BLOB/TEXT of varied sizes, ENUM/SET, BIT, generated columns, foreign keys
// with CASCADE / SET NULL). Pure: the same seed gives the same tables and the same value pools on
// every engine. Values are JS values a client binds (strings, bigints, numbers, Buffers, null).
import { type Random, randomInt, seededRandom } from './random.ts';

export type ColumnKind =
  | 'int'
  | 'bigint_u'
  | 'varchar'
  | 'char'
  | 'varbinary'
  | 'datetime'
  | 'timestamp'
  | 'date'
  | 'decimal'
  | 'json'
  | 'text'
  | 'blob'
  | 'enum'
  | 'set'
  | 'bit';

export interface GenColumn {
  name: string;
  kind: ColumnKind;
  /** The column's type as DDL text, e.g. "VARCHAR(24) COLLATE utf8mb4_general_ci". */
  type: string;
  nullable: boolean;
  /** Strings: the collation (binary, or case- and accent-insensitive). */
  collation?: string;
  /** Temporal types: digits after the point. */
  fsp?: number;
  /** DECIMAL(precision, scale). */
  precision?: number;
  scale?: number;
  /** ENUM / SET members. */
  members?: readonly string[];
  /** BIT(n). */
  bits?: number;
  /** VARCHAR/CHAR/VARBINARY length; TEXT/BLOB: the largest value the writers produce, in bytes. */
  length?: number;
  /** A generated column: its expression over other columns (never written). */
  generated?: { expression: string; stored: boolean };
}

export interface GenForeignKey {
  name: string;
  /** The child's column (nullable) referencing the parent's one-column primary key. */
  column: string;
  parentTable: string;
  parentColumn: string;
  onDelete: 'CASCADE' | 'SET NULL';
}

export interface GenTable {
  name: string;
  columns: GenColumn[];
  primaryKey: string[];
  /** Secondary UNIQUE keys (each a column list). */
  uniques: string[][];
  foreignKey?: GenForeignKey;
  /** The key tuples writers fight over (some equal under the key's collation, spelled differently). */
  keyPool: unknown[][];
  /** Values of each unique key's columns the writers draw from (small, so they clash). */
  uniquePools: unknown[][][];
  /** Rows every node starts with (the same on all nodes). */
  initialRows: number;
  /** An integer column writers increment and read-modify-write (default n). */
  counter?: string;
}

export interface GeneratedSchema {
  seed: number;
  tables: GenTable[];
}

/** Case- and accent-insensitive collations present on both MySQL 9.7 and MariaDB 10.11. */
export const INSENSITIVE_COLLATIONS = ['utf8mb4_general_ci', 'utf8mb4_unicode_ci'] as const;
export const BINARY_COLLATION = 'utf8mb4_bin';

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'zeta', 'eta', 'kappa'];
/** Spellings of a word that case- and accent-insensitive collations hold equal. */
function spellings(word: string): string[] {
  const accented = word.replace('a', 'á').replace('e', 'é');
  return [word, word.toUpperCase(), word[0]!.toUpperCase() + word.slice(1), accented];
}

function pad2(n: number): string {
  return String(n).padStart(2, '0');
}

function fraction(random: Random, fsp: number, zeros: boolean): string {
  if (fsp === 0) return '';
  if (zeros) return `.${'0'.repeat(fsp)}`;
  let s = '';
  for (let i = 0; i < fsp; i++) s += String(randomInt(random, 0, 10));
  return `.${s}`;
}

function temporal(random: Random, kind: 'datetime' | 'timestamp' | 'date', fsp: number, variant = random()): string {
  const year = kind === 'timestamp' ? randomInt(random, 2001, 2031) : randomInt(random, 1990, 2100);
  const date = `${year}-${pad2(randomInt(random, 1, 13))}-${pad2(randomInt(random, 1, 29))}`;
  if (kind === 'date') return date;
  const time = `${pad2(randomInt(random, 0, 24))}:${pad2(randomInt(random, 0, 60))}:${pad2(randomInt(random, 0, 60))}`;
  // A third of the values have a zero fraction, spelled with or without it (the same instant).
  if (variant < 0.15) return `${date} ${time}`;
  return `${date} ${time}${fraction(random, fsp, variant < 0.33)}`;
}

function decimalText(random: Random, precision: number, scale: number): string {
  const intDigits = precision - scale;
  const whole = randomInt(random, 0, Math.min(10 ** Math.min(intDigits, 6), 1_000_000));
  let frac = '';
  for (let i = 0; i < scale; i++) frac += String(randomInt(random, 0, 10));
  const sign = random() < 0.2 ? '-' : '';
  return scale > 0 ? `${sign}${whole}.${frac}` : `${sign}${whole}`;
}

function randomText(random: Random, length: number): string {
  let s = '';
  while (s.length < length) s += Math.floor(random() * 1e12).toString(36);
  return s.slice(0, length);
}

/** A value of this column's type, valid for it (never for generated columns). */
export function randomValue(col: GenColumn, random: Random, allowNull = true): unknown {
  if (allowNull && col.nullable && random() < 0.15) return null;
  switch (col.kind) {
    case 'int':
      return BigInt(randomInt(random, -1_000_000, 1_000_000));
    case 'bigint_u':
      return random() < 0.3 ? 18_446_744_073_709_551_615n - BigInt(randomInt(random, 0, 1000)) : BigInt(randomInt(random, 0, 2 ** 31));
    case 'varchar':
    case 'char': {
      const len = col.length ?? 16;
      if (random() < 0.4) return pick(random, spellings(pick(random, WORDS))).slice(0, len);
      const text = randomText(random, randomInt(random, 1, len + 1));
      return random() < 0.2 ? `${text.slice(0, Math.max(0, len - 2))}ü` : text;
    }
    case 'varbinary': {
      const n = randomInt(random, 0, (col.length ?? 16) + 1);
      return Buffer.from(Array.from({ length: n }, () => randomInt(random, 0, 256)));
    }
    case 'datetime':
    case 'timestamp':
    case 'date':
      return temporal(random, col.kind, col.fsp ?? 0);
    case 'decimal': {
      const text = decimalText(random, col.precision ?? 10, col.scale ?? 2);
      // Sometimes a JS number (the client sends it as a double literal; the server rounds to the scale).
      return random() < 0.2 && Math.abs(Number(text)) < 1e6 ? Number(text) : text;
    }
    case 'json':
      return JSON.stringify(randomJson(random, 3, col.length ?? 200));
    case 'text':
      return randomText(random, randomInt(random, 0, (col.length ?? 100) + 1));
    case 'blob': {
      const n = randomInt(random, 0, (col.length ?? 100) + 1);
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i++) b[i] = randomInt(random, 0, 256);
      return b;
    }
    case 'enum':
      return pick(random, col.members ?? ['a']);
    case 'set': {
      const members = (col.members ?? ['a']).filter(() => random() < 0.5);
      return members.join(',');
    }
    case 'bit':
      return randomInt(random, 0, 2 ** Math.min(col.bits ?? 8, 30));
  }
}

function randomJson(random: Random, depth: number, budget: number): unknown {
  const r = random();
  if (depth === 0 || r < 0.3) {
    const s = random();
    if (s < 0.25) return randomInt(random, -1000, 1000);
    if (s < 0.4) return Number((random() * 100).toFixed(3));
    if (s < 0.5) return random() < 0.5;
    if (s < 0.55) return null;
    return randomText(random, randomInt(random, 0, Math.min(40, budget)));
  }
  if (r < 0.6) return Array.from({ length: randomInt(random, 0, 4) }, () => randomJson(random, depth - 1, budget / 3));
  const o: Record<string, unknown> = {};
  for (let i = randomInt(random, 0, 4); i > 0; i--) o[pick(random, WORDS)] = randomJson(random, depth - 1, budget / 3);
  return o;
}

/**
 * A pool of key values for one column: few, so writers clash; strings under an insensitive collation
 * include spellings the server holds equal (case-only key changes), temporal and DECIMAL values the
 * same instant or number written two ways.
 */
function keyValues(col: GenColumn, random: Random, n: number): unknown[] {
  const out: unknown[] = [];
  switch (col.kind) {
    case 'int':
      for (let i = 0; i < n; i++) out.push(BigInt(i - 2));
      break;
    case 'bigint_u':
      for (let i = 0; i < n; i++) out.push(i % 2 === 0 ? BigInt(i) : 18_446_744_073_709_551_615n - BigInt(i));
      break;
    case 'varchar':
    case 'char': {
      const insensitive = col.collation !== BINARY_COLLATION;
      for (let i = 0; out.length < n; i++) {
        const word = WORDS[i % WORDS.length]! + (i >= WORDS.length ? String(i) : '');
        const forms = spellings(word);
        // Binary collation: every spelling is its own key. Insensitive: a few spellings of one key.
        out.push(...(insensitive ? forms.slice(0, 2 + (i % 2)) : forms.slice(0, 2)));
      }
      break;
    }
    case 'varbinary':
      for (let i = 0; i < n; i++) out.push(Buffer.from(i % 3 === 0 ? [i] : i % 3 === 1 ? [i, 0] : [0x41 + i, 0x61 + i]));
      break;
    case 'datetime':
    case 'timestamp':
    case 'date': {
      const base = seededRandom(Math.floor(random() * 2 ** 31));
      while (out.length < n) {
        const v = temporal(base, col.kind, col.fsp ?? 0, 0.5);
        out.push(v);
        // The same instant spelled with and without its zero fraction.
        if (col.kind !== 'date' && (col.fsp ?? 0) > 0 && out.length < n) out.push(`${v.slice(0, 19)}.${'0'.repeat(col.fsp!)}`, v.slice(0, 19));
      }
      break;
    }
    case 'decimal': {
      const scale = col.scale ?? 2;
      for (let i = 0; out.length < n; i++) {
        const whole = i - 2;
        if (scale >= 2) out.push(`${whole}.5`, `${whole}.50`, whole + 0.5);
        else out.push(String(whole), whole);
      }
      break;
    }
    case 'enum':
      out.push(...(col.members ?? []));
      break;
    default:
      for (let i = 0; i < n; i++) out.push(randomValue(col, random, false));
  }
  return out.slice(0, Math.max(n, 1));
}

interface KeyTypeChoice {
  kind: ColumnKind;
  make: (random: Random, name: string) => GenColumn;
}

const KEY_TYPES: readonly KeyTypeChoice[] = [
  { kind: 'int', make: (_r, name) => ({ name, kind: 'int', type: 'INT', nullable: false }) },
  { kind: 'bigint_u', make: (_r, name) => ({ name, kind: 'bigint_u', type: 'BIGINT UNSIGNED', nullable: false }) },
  {
    kind: 'varchar',
    make: (r, name) => {
      const collation = r() < 0.35 ? BINARY_COLLATION : pick(r, INSENSITIVE_COLLATIONS);
      return { name, kind: 'varchar', type: `VARCHAR(24) CHARACTER SET utf8mb4 COLLATE ${collation}`, nullable: false, collation, length: 24 };
    },
  },
  {
    kind: 'char',
    make: (r, name) => {
      const collation = r() < 0.35 ? BINARY_COLLATION : pick(r, INSENSITIVE_COLLATIONS);
      return { name, kind: 'char', type: `CHAR(12) CHARACTER SET utf8mb4 COLLATE ${collation}`, nullable: false, collation, length: 12 };
    },
  },
  { kind: 'varbinary', make: (_r, name) => ({ name, kind: 'varbinary', type: 'VARBINARY(16)', nullable: false, length: 16 }) },
  { kind: 'datetime', make: (_r, name) => ({ name, kind: 'datetime', type: 'DATETIME(6)', nullable: false, fsp: 6 }) },
  {
    kind: 'timestamp',
    make: (r, name) => {
      const fsp = pick(r, [0, 3, 6]);
      return { name, kind: 'timestamp', type: `TIMESTAMP${fsp > 0 ? `(${fsp})` : ''}`, nullable: false, fsp };
    },
  },
  { kind: 'date', make: (_r, name) => ({ name, kind: 'date', type: 'DATE', nullable: false }) },
  {
    kind: 'decimal',
    make: (r, name) => {
      const scale = pick(r, [0, 2, 4]);
      return { name, kind: 'decimal', type: `DECIMAL(12,${scale})`, nullable: false, precision: 12, scale };
    },
  },
];

function dataColumn(random: Random, name: string): GenColumn {
  const nullable = random() < 0.5;
  const r = random();
  const col = (c: Omit<GenColumn, 'name' | 'nullable'>): GenColumn => ({ name, nullable, ...c });
  if (r < 0.12) return col({ kind: 'int', type: 'INT' });
  if (r < 0.2) return col({ kind: 'bigint_u', type: 'BIGINT UNSIGNED' });
  if (r < 0.32) {
    const collation = random() < 0.5 ? BINARY_COLLATION : pick(random, INSENSITIVE_COLLATIONS);
    return col({ kind: 'varchar', type: `VARCHAR(40) CHARACTER SET utf8mb4 COLLATE ${collation}`, collation, length: 40 });
  }
  if (r < 0.38) return col({ kind: 'datetime', type: 'DATETIME(6)', fsp: 6 });
  if (r < 0.43) return col({ kind: 'timestamp', type: 'TIMESTAMP(3) NULL', fsp: 3 });
  if (r < 0.48) return col({ kind: 'date', type: 'DATE' });
  if (r < 0.55) return col({ kind: 'decimal', type: 'DECIMAL(14,4)', precision: 14, scale: 4 });
  if (r < 0.65) return col({ kind: 'json', type: 'JSON', length: pick(random, [100, 2000]) });
  if (r < 0.73) {
    const [type, length] = pick(random, [
      ['TINYTEXT', 200],
      ['TEXT', 3000],
      ['MEDIUMTEXT', 70_000],
    ] as const);
    return col({ kind: 'text', type: `${type} CHARACTER SET utf8mb4`, length });
  }
  if (r < 0.81) {
    const [type, length] = pick(random, [
      ['TINYBLOB', 200],
      ['BLOB', 5000],
      ['MEDIUMBLOB', 100_000],
    ] as const);
    return col({ kind: 'blob', type, length });
  }
  if (r < 0.87) return col({ kind: 'enum', type: "ENUM('red','green','blue','x y')", members: ['red', 'green', 'blue', 'x y'] });
  if (r < 0.93) return col({ kind: 'set', type: "SET('a','b','c','d')", members: ['a', 'b', 'c', 'd'] });
  const bits = pick(random, [1, 8, 20]);
  return col({ kind: 'bit', type: `BIT(${bits})`, bits });
}

export interface SchemaGenOptions {
  /** How many tables (default 2 or 3, drawn from the seed). */
  tables?: number;
  /** How many key tuples per table the writers fight over (default 12). */
  hotKeys?: number;
}

/** The tables for one seed. */
export function generateSchema(seed: number, options: SchemaGenOptions = {}): GeneratedSchema {
  const random = seededRandom(seed * 2_654_435_761 + 17);
  const count = options.tables ?? randomInt(random, 2, 4);
  const hot = options.hotKeys ?? 12;
  const tables: GenTable[] = [];
  for (let t = 0; t < count; t++) {
    const name = `g${t + 1}`;
    const keyColumns = random() < 0.35 ? randomInt(random, 2, 4) : 1;
    const columns: GenColumn[] = [];
    const usedKinds = new Set<ColumnKind>();
    for (let i = 0; i < keyColumns; i++) {
      let choice = pick(random, KEY_TYPES);
      // Composite keys mix types.
      for (let tries = 0; usedKinds.has(choice.kind) && tries < 5; tries++) choice = pick(random, KEY_TYPES);
      usedKinds.add(choice.kind);
      columns.push(choice.make(random, `k${i + 1}`));
    }
    const primaryKey = columns.map((c) => c.name);
    const dataCount = randomInt(random, 2, 6);
    for (let i = 0; i < dataCount; i++) columns.push(dataColumn(random, `c${i + 1}`));
    // A mutable integer every table has: writers read it and write it back changed (read-modify-write).
    columns.push({ name: 'n', kind: 'int', type: 'INT', nullable: false });
    const uniques: string[][] = [];
    const uniquePools: unknown[][][] = [];
    if (random() < 0.5) {
      const kind = pick(random, ['int', 'varchar'] as const);
      const collation = kind === 'varchar' ? pick(random, [BINARY_COLLATION, ...INSENSITIVE_COLLATIONS]) : undefined;
      const u: GenColumn =
        kind === 'int'
          ? { name: 'u', kind: 'int', type: 'INT', nullable: true }
          : { name: 'u', kind: 'varchar', type: `VARCHAR(20) CHARACTER SET utf8mb4 COLLATE ${collation}`, nullable: true, collation, length: 20 };
      columns.push(u);
      uniques.push(['u']);
      uniquePools.push(keyValues(u, random, Math.ceil(hot * 1.5)).map((v) => [v]));
    }
    if (random() < 0.4) {
      const source = columns.find((c) => c.name === 'n')!;
      const stored = random() < 0.5;
      columns.push({ name: 'g', kind: 'int', type: 'BIGINT', nullable: true, generated: { expression: `(\`${source.name}\` * 2 + 1)`, stored } });
    }
    const keyPool = keyTuples(columns.slice(0, keyColumns), random, hot);
    tables.push({ name, columns, primaryKey, uniques, uniquePools, keyPool, initialRows: Math.min(keyPool.length, Math.ceil(hot / 2)) });
  }
  // A foreign key from a later table to an earlier one with a one-column key (CASCADE or SET NULL).
  if (tables.length >= 2 && random() < 0.6) {
    const parentIdx = tables.findIndex((t) => t.primaryKey.length === 1);
    const childIdx = tables.findIndex((_, i) => i > parentIdx && i > 0);
    if (parentIdx >= 0 && childIdx > parentIdx) {
      const parent = tables[parentIdx]!;
      const child = tables[childIdx]!;
      const pk = parent.columns.find((c) => c.name === parent.primaryKey[0])!;
      child.columns.push({ ...pk, name: 'p', nullable: true, generated: undefined });
      child.foreignKey = { name: `fk_${child.name}_${parent.name}`, column: 'p', parentTable: parent.name, parentColumn: pk.name, onDelete: random() < 0.6 ? 'CASCADE' : 'SET NULL' };
    }
  }
  return { seed, tables };
}

function keyTuples(keyColumns: readonly GenColumn[], random: Random, n: number): unknown[][] {
  const pools = keyColumns.map((c) => keyValues(c, random, keyColumns.length === 1 ? n : Math.max(2, Math.ceil(n ** (1 / keyColumns.length)) + 1)));
  const out: unknown[][] = [];
  const seen = new Set<string>();
  for (let tries = 0; out.length < n && tries < n * 20; tries++) {
    const tuple = keyColumns.length === 1 ? [pools[0]![out.length % pools[0]!.length]] : pools.map((p) => pick(random, p));
    const text = tuple.map((v) => (Buffer.isBuffer(v) ? v.toString('hex') : String(v))).join('|');
    if (seen.has(text)) continue;
    seen.add(text);
    out.push(tuple);
  }
  return out;
}

/** Short labels of the shapes a schema exercises, for the generated-shape report. */
export function shapeLabels(schema: GeneratedSchema): string[] {
  const out: string[] = [];
  for (const t of schema.tables) {
    const keyCols = t.primaryKey.map((k) => t.columns.find((c) => c.name === k)!);
    out.push(keyCols.length > 1 ? 'key:composite' : 'key:single');
    for (const c of keyCols) out.push(`key:${columnLabel(c)}`);
    for (const c of t.columns) {
      if (t.primaryKey.includes(c.name)) continue;
      if (c.generated) out.push(`column:generated-${c.generated.stored ? 'stored' : 'virtual'}`);
      else if (c.name !== 'n' && c.name !== 'p' && c.name !== 'u') out.push(`column:${columnLabel(c)}${c.nullable ? '-null' : ''}`);
    }
    if (t.uniques.length > 0) out.push(`unique:${columnLabel(t.columns.find((c) => c.name === t.uniques[0]![0])!)}`);
    if (t.foreignKey) out.push(`fk:on-delete-${t.foreignKey.onDelete.replace(' ', '-').toLowerCase()}`);
  }
  return out;
}

function columnLabel(c: GenColumn): string {
  if (c.kind === 'varchar' || c.kind === 'char') return `${c.kind}-${c.collation === BINARY_COLLATION ? 'bin' : 'ci'}`;
  if (c.kind === 'timestamp' || c.kind === 'datetime') return `${c.kind}(${c.fsp ?? 0})`;
  if (c.kind === 'decimal') return `decimal(${c.precision},${c.scale})`;
  if (c.kind === 'text' || c.kind === 'blob') return c.type.split(' ')[0]!.toLowerCase();
  return c.kind;
}

/** The generated-shape report: schema shapes of this seed plus the writers' counts of session shapes. */
export function generatedShapes(schemaSeed: number | undefined, writerShapes: readonly Record<string, number>[], options: SchemaGenOptions = {}): Record<string, number> {
  const out: Record<string, number> = {};
  if (schemaSeed !== undefined) for (const label of shapeLabels(generateSchema(schemaSeed, options))) out[label] = (out[label] ?? 0) + 1;
  for (const shapes of writerShapes) for (const [k, v] of Object.entries(shapes)) out[k] = (out[k] ?? 0) + v;
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}
