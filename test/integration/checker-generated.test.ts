// Generated differences: random tables with every column type hold the same rows on two nodes, then
// 1,000 random single-column changes are made on node B behind replication (the version kept): a
// value, NULL, a sign, a last fraction digit, trailing bytes, a JSON number's spelling, an SRID, a
// large value. Ground truth is each cell's exact stored value compared on the servers (HEX of its
// exact text, SHA-256 for large values); the state check must report exactly the changed keys, each
// a value_mismatch in exactly the changed column, and nothing else.
// LWW_GEN_SEED=<n> replays a run (the seed is printed).
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkState } from '../../src/checker/index.ts';
import { connect } from '../../src/db/connection.ts';
import { ensureMetaSchema } from '../../src/install/provision.ts';
import { enterApplySessionSql } from '../../src/sql/install.ts';
import { quoteIdent, quoteTable } from '../../src/sql/quote.ts';
import { type Random, randomInt, seededRandom, shuffle } from '../../src/harness/random.ts';
import { freshDatabase } from '../helpers/db.ts';
import { describeEachEngine } from '../helpers/engines.ts';

const DB = 'chk_gen';
const CASES = 1000;
const TABLES = 4;
const ROWS = 400;

type Kind = 'int' | 'uint' | 'float' | 'double' | 'decimal' | 'bit' | 'json' | 'geometry' | 'blob' | 'text' | 'datetime' | 'time' | 'date' | 'year' | 'char' | 'varchar' | 'binary' | 'varbinary' | 'enum' | 'set';

interface Column {
  name: string;
  kind: Kind;
  ddl: string;
  large?: boolean;
}

const VALUE_COLUMNS: Column[] = [
  { name: 'i8', kind: 'int', ddl: 'TINYINT' },
  { name: 'i64', kind: 'int', ddl: 'BIGINT' },
  { name: 'u64', kind: 'uint', ddl: 'BIGINT UNSIGNED' },
  { name: 'f', kind: 'float', ddl: 'FLOAT' },
  { name: 'd', kind: 'double', ddl: 'DOUBLE' },
  { name: 'dec', kind: 'decimal', ddl: 'DECIMAL(30,10)' },
  { name: 'bt', kind: 'bit', ddl: 'BIT(17)' },
  { name: 'js', kind: 'json', ddl: 'JSON' },
  { name: 'g', kind: 'geometry', ddl: 'GEOMETRY' },
  { name: 'bl', kind: 'blob', ddl: 'BLOB' },
  { name: 'mb', kind: 'blob', ddl: 'MEDIUMBLOB', large: true },
  { name: 'tx', kind: 'text', ddl: 'TEXT' },
  { name: 'mt', kind: 'text', ddl: 'MEDIUMTEXT', large: true },
  { name: 'dt', kind: 'datetime', ddl: 'DATETIME(6)' },
  { name: 'ts', kind: 'datetime', ddl: 'TIMESTAMP(3) NULL' },
  { name: 'tm', kind: 'time', ddl: 'TIME(6)' },
  { name: 'da', kind: 'date', ddl: 'DATE' },
  { name: 'y', kind: 'year', ddl: 'YEAR' },
  { name: 'ch', kind: 'char', ddl: 'CHAR(8)' },
  { name: 'vc', kind: 'varchar', ddl: 'VARCHAR(40)' },
  { name: 'bn', kind: 'binary', ddl: 'BINARY(6)' },
  { name: 'vb', kind: 'varbinary', ddl: 'VARBINARY(30)' },
  { name: 'en', kind: 'enum', ddl: "ENUM('red','green','blue')" },
  { name: 'st', kind: 'set', ddl: "SET('a','b','c','d')" },
];

/** A cell as SQL: an expression with its bound values. */
interface Cell {
  sql: string;
  params: unknown[];
}

const NULL_CELL: Cell = { sql: 'NULL', params: [] };
const p = (v: unknown): Cell => ({ sql: '?', params: [v] });

/** Shortest text of a double that parses back to it, -0 included (String(-0) is '0'). */
const dtext = (x: number) => (Object.is(x, -0) ? '-0' : String(x));
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function nextFloat(x: number): number {
  f32[0] = x;
  u32[0] = u32[0]! + 1;
  return f32[0]!;
}
const f64 = new Float64Array(1);
const u64 = new BigUint64Array(f64.buffer);
function nextDouble(x: number): number {
  f64[0] = x;
  u64[0] = u64[0]! + 1n;
  return f64[0]!;
}

/** Value models: what a cell holds, in a form the generator can change by one step. */
type Model = { kind: Kind; v: unknown } | null;

interface Gen {
  r: Random;
  mysql: boolean;
}

function int(g: Gen, lo: number, hi: number): number {
  return randomInt(g.r, lo, hi + 1);
}
function pick<T>(g: Gen, xs: readonly T[]): T {
  return xs[Math.floor(g.r() * xs.length)]!;
}
function bytes(g: Gen, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = int(g, 0, 255);
  return b;
}
function word(g: Gen, n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += pick(g, ['a', 'b', 'z', 'é', '😀', '#', ':', 'N', '0', ' ']);
  return s;
}
const pad = (n: number, w = 2) => String(n).padStart(w, '0');

function randomValue(g: Gen, c: Column): Model {
  switch (c.kind) {
    case 'int':
      return { kind: c.kind, v: BigInt(c.ddl === 'TINYINT' ? int(g, -128, 127) : int(g, -1e9, 1e9)) * (c.ddl === 'TINYINT' ? 1n : 1000003n) };
    case 'uint':
      return { kind: c.kind, v: (1n << 64n) - 1n - BigInt(int(g, 0, 1e9)) };
    case 'float':
      return { kind: c.kind, v: Math.fround((g.r() - 0.5) * 10 ** int(g, -3, 6)) };
    case 'double':
      return { kind: c.kind, v: (g.r() - 0.5) * 10 ** int(g, -12, 12) };
    case 'decimal':
      return { kind: c.kind, v: `${g.r() < 0.5 ? '-' : ''}${int(g, 0, 99999999)}.${String(int(g, 0, 9999999999)).padStart(10, '0')}` };
    case 'bit':
      return { kind: c.kind, v: int(g, 0, (1 << 17) - 1) };
    case 'json':
      return { kind: c.kind, v: `{"n": ${int(g, -1000, 1000)}, "s": "${word(g, 3).replaceAll('"', '')}", "a": [${int(g, 0, 9)}, true, null]}` };
    case 'geometry':
      return { kind: c.kind, v: { x: int(g, -1000, 1000) / 8, y: int(g, -1000, 1000) / 8, srid: pick(g, [0, 3857]) } };
    case 'blob':
      return { kind: c.kind, v: bytes(g, c.large && g.r() < 0.3 ? int(g, 4097, 20000) : int(g, 0, 40)) };
    case 'text':
      return { kind: c.kind, v: c.large && g.r() < 0.3 ? word(g, int(g, 2100, 6000)) : word(g, int(g, 0, 20)) };
    case 'datetime':
      return {
        kind: c.kind,
        v: `20${pad(int(g, 10, 37))}-${pad(int(g, 1, 12))}-${pad(int(g, 1, 28))} ${pad(int(g, 0, 23))}:${pad(int(g, 0, 59))}:${pad(int(g, 0, 59))}.${c.ddl.startsWith('TIMESTAMP') ? pad(int(g, 0, 999), 3) : pad(int(g, 0, 999999), 6)}`,
      };
    case 'time':
      return { kind: c.kind, v: `${g.r() < 0.3 ? '-' : ''}${int(g, 0, 838)}:${pad(int(g, 0, 59))}:${pad(int(g, 0, 59))}.${pad(int(g, 0, 999999), 6)}` };
    case 'date':
      return { kind: c.kind, v: `${int(g, 1000, 9999)}-${pad(int(g, 1, 12))}-${pad(int(g, 1, 28))}` };
    case 'year':
      return { kind: c.kind, v: int(g, 1901, 2155) };
    case 'char':
      return { kind: c.kind, v: word(g, int(g, 0, 8)).trimEnd() };
    case 'varchar':
      return { kind: c.kind, v: word(g, int(g, 0, 30)) };
    case 'binary':
      return { kind: c.kind, v: Buffer.concat([bytes(g, 5), Buffer.from([int(g, 1, 255)])]) };
    case 'varbinary':
      return { kind: c.kind, v: bytes(g, int(g, 0, 20)) };
    case 'enum':
      return { kind: c.kind, v: pick(g, ['red', 'green', 'blue']) };
    case 'set':
      return { kind: c.kind, v: ['a', 'b', 'c', 'd'].filter(() => g.r() < 0.5).join(',') };
  }
}

function cellOf(m: Model): Cell {
  if (m === null) return NULL_CELL;
  const v = m.v;
  switch (m.kind) {
    case 'int':
    case 'uint':
      return p(String(v));
    case 'blob':
    case 'binary':
    case 'varbinary':
      // A Buffer binds as bytes; as hex here too so equal cells compare equal in JSON.
      return { sql: 'UNHEX(?)', params: [(v as Buffer).toString('hex')] };
    case 'float':
    case 'double':
      return p(dtext(v as number));
    case 'bit':
      return { sql: 'CAST(? AS UNSIGNED)', params: [v] };
    case 'geometry': {
      const gv = v as { x: number; y: number; srid: number };
      return { sql: 'ST_GeomFromText(?, ?)', params: [`POINT(${dtext(gv.x)} ${dtext(gv.y)})`, gv.srid] };
    }
    default:
      return p(v);
  }
}

const MUTATIONS = ['value', 'null', 'sign', 'fraction', 'trailing', 'json', 'srid', 'large'] as const;
type Mutation = (typeof MUTATIONS)[number];

/** The columns a mutation can apply to (it may still not apply to a given value). */
const APPLIES: Record<Mutation, (c: Column) => boolean> = {
  value: () => true,
  null: () => true,
  sign: (c) => ['int', 'float', 'double', 'decimal', 'time'].includes(c.kind),
  fraction: (c) => ['float', 'double', 'decimal', 'datetime', 'time'].includes(c.kind),
  trailing: (c) => ['blob', 'varbinary', 'text', 'varchar', 'binary'].includes(c.kind),
  json: (c) => c.kind === 'json',
  srid: (c) => c.kind === 'geometry',
  large: (c) => c.large === true,
};

/** One step away from a model for the given mutation, or undefined when it does not apply to this cell. */
function mutate(g: Gen, c: Column, m: Model, how: Mutation): Model | undefined {
  if (how === 'null') return m === null ? randomValue(g, c) : null;
  if (m === null) return how === 'value' ? randomValue(g, c) : undefined;
  const v = m.v;
  const same = (x: unknown): Model => ({ kind: m.kind, v: x });
  switch (how) {
    case 'value': {
      for (let i = 0; i < 20; i++) {
        const n = randomValue(g, c)!;
        if (JSON.stringify(cellOf(n)) !== JSON.stringify(cellOf(m))) return n;
      }
      return undefined;
    }
    case 'sign':
      if (m.kind === 'int' && v !== 0n && c.ddl !== 'TINYINT') return same(-(v as bigint));
      if (m.kind === 'float' || m.kind === 'double') {
        // -0 exists only on MySQL; MariaDB stores 0.
        if ((v as number) === 0 && !g.mysql) return undefined;
        return same(-(v as number));
      }
      if (m.kind === 'decimal' || m.kind === 'time') {
        const s = v as string;
        // Zero has no sign to change.
        if (!/[1-9]/.test(s)) return undefined;
        return same(s.startsWith('-') ? s.slice(1) : `-${s}`);
      }
      return undefined;
    case 'fraction':
      if (m.kind === 'float') return same(nextFloat(v as number));
      if (m.kind === 'double') return same(nextDouble(v as number));
      if (m.kind === 'decimal' || m.kind === 'datetime' || m.kind === 'time') {
        const s = v as string;
        const last = Number(s[s.length - 1]);
        return same(`${s.slice(0, -1)}${last === 9 ? 8 : last + 1}`);
      }
      return undefined;
    case 'trailing':
      if (m.kind === 'blob' || m.kind === 'varbinary') return (v as Buffer).length < 30 || m.kind === 'blob' ? same(Buffer.concat([v as Buffer, Buffer.from([0])])) : undefined;
      if (m.kind === 'text' || m.kind === 'varchar') return (v as string).length < 39 || m.kind === 'text' ? same(`${v} `) : undefined;
      if (m.kind === 'binary') {
        const b = Buffer.from(v as Buffer);
        b[5] = b[5] === 1 ? 2 : 1;
        return same(b);
      }
      return undefined;
    case 'json': {
      if (m.kind !== 'json') return undefined;
      // 5 → 5.0 is another document on MySQL too; spacing only differs in MariaDB's stored text.
      const spelled = (v as string).replace(/"n": (-?\d+)/, '"n": $1.0');
      return same(g.mysql || g.r() < 0.5 ? spelled : (v as string).replace('{"n": ', '{"n":'));
    }
    case 'srid':
      if (m.kind !== 'geometry') return undefined;
      return same({ ...(v as object), srid: (v as { srid: number }).srid === 0 ? 3857 : 0 });
    case 'large': {
      if (!c.large) return undefined;
      if (m.kind === 'blob') {
        const b = (v as Buffer).length > 4096 ? Buffer.from(v as Buffer) : bytes(g, int(g, 4097, 30000));
        const at = int(g, 0, b.length - 1);
        b[at] = b[at]! ^ 1;
        return same(b);
      }
      const s = (v as string).length > 2100 ? (v as string) : word(g, int(g, 2100, 9000));
      const at = int(g, 0, s.length - 1);
      return same(`${s.slice(0, at)}${s[at] === 'x' ? 'y' : 'x'}${s.slice(at + 1)}`);
    }
  }
}

/** A key column as the check shows it. */
function keyTextSql(name: string): string {
  const q = quoteIdent(name);
  if (name === 'fk') return `CAST(CAST(${q} AS DOUBLE) AS CHAR)`;
  if (name === 'dk') return `TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM ${q}))`;
  return `CAST(${q} AS CHAR)`;
}

/** Key texts as compared: a FLOAT key's exact double text through a JS number (the same double). */
function keyId(table: string, names: string[], texts: unknown[]): string {
  return `${table}|${JSON.stringify(texts.map((v, i) => (names[i] === 'fk' ? dtext(Number(v)) : String(v))))}`;
}

/** Each cell's exact stored value, for ground truth: HEX of its exact text, or its length and SHA-256 when large. */
function truthSql(c: Column): string {
  const q = quoteIdent(c.name);
  if (c.kind === 'float') return `HEX(CAST(CAST(${q} AS DOUBLE) AS CHAR))`;
  if (c.kind === 'blob' || c.kind === 'text') return `CONCAT(LENGTH(${q}), ':', SHA2(${q}, 256))`;
  if (c.kind === 'json') return `HEX(CONVERT(${q} USING utf8mb4))`;
  if (['int', 'uint', 'double', 'decimal', 'datetime', 'time', 'date', 'year'].includes(c.kind)) return `HEX(CAST(${q} AS CHAR))`;
  return `HEX(${q})`;
}

interface KeyShape {
  ddl: string;
  names: string[];
  /** The i-th row's key values (bound) and its text as the check reports it. */
  key: (i: number) => { values: unknown[]; text: string[] };
}

const KEY_SHAPES: KeyShape[] = [
  { ddl: 'id INT NOT NULL', names: ['id'], key: (i) => ({ values: [i * 3 - 500], text: [String(i * 3 - 500)] }) },
  {
    ddl: 'k VARCHAR(12) NOT NULL, n BIGINT UNSIGNED NOT NULL',
    names: ['k', 'n'],
    key: (i) => {
      const n = ((1n << 64n) - 1n - BigInt(i % 7)).toString();
      return { values: [`k${Math.floor(i / 7)}`, n], text: [`k${Math.floor(i / 7)}`, n] };
    },
  },
  // FLOAT keys that differ past the sixth digit; read back as their exact double.
  { ddl: 'fk FLOAT NOT NULL', names: ['fk'], key: (i) => ({ values: [dtext(Math.fround(100 + i / 1024 + 1 / 3))], text: [dtext(Math.fround(100 + i / 1024 + 1 / 3))] }) },
  { ddl: 'dk DECIMAL(40,20) NOT NULL', names: ['dk'], key: (i) => ({ values: [`1.${String(i).padStart(20, '0')}`], text: [`1.${String(i).padStart(20, '0')}`.replace(/0+$/, '').replace(/\.$/, '')] }) },
];

describeEachEngine('state check on generated differences', 2, (ctx) => {
  let conns: Connection[];
  let urls: string[];
  beforeAll(async () => {
    urls = ctx.servers.map((s) => s.url);
    conns = await Promise.all(urls.map((u) => connect(u)));
    for (const c of conns) await ensureMetaSchema(c, 'lww_meta');
  });
  afterAll(async () => {
    await Promise.all((conns ?? []).map((c) => c.end()));
  });

  it(`reports exactly the ${CASES} injected single-column differences, each in its column, and nothing else`, async () => {
    const seed = Number(process.env.LWW_GEN_SEED ?? Date.now() % 1_000_000);
    console.log(`[${ctx.engine}] generated differences, LWW_GEN_SEED=${seed}`);
    const g: Gen = { r: seededRandom(seed), mysql: ctx.engine === 'mysql' };
    const [a, b] = conns as [Connection, Connection];
    const tables = Array.from({ length: TABLES }, (_, t) => {
      // Every type, in a random order, behind one of the key shapes.
      const columns = shuffle(g.r, VALUE_COLUMNS);
      return { name: `t${t}`, shape: KEY_SHAPES[t % KEY_SHAPES.length]!, columns };
    });
    await Promise.all(
      conns.map((c) =>
        freshDatabase(
          c,
          DB,
          tables.map(
            (t) =>
              `CREATE TABLE {{db}}.${t.name} (${t.shape.ddl}, ${t.columns.map((c) => `${quoteIdent(c.name)} ${c.ddl.replace(' NULL', '')} NULL`).join(', ')},` +
              ` _lww_ts BIGINT UNSIGNED NOT NULL, PRIMARY KEY (${t.shape.names.map(quoteIdent).join(', ')}))`,
          ),
        ),
      ),
    );
    // The same rows on both nodes, past the triggers with explicit versions, as replication leaves them.
    const models = tables.map((t) => Array.from({ length: ROWS }, () => t.columns.map((c) => (g.r() < 0.1 ? null : randomValue(g, c)))));
    for (const [ti, t] of tables.entries()) {
      const names = [...t.shape.names, ...t.columns.map((c) => c.name), '_lww_ts'];
      for (let start = 0; start < ROWS; start += 100) {
        const rows = models[ti]!.slice(start, start + 100);
        const cells = rows.map((row, j) => {
          const i = start + j;
          const parts: Cell[] = [...t.shape.key(i).values.map(p), ...row.map(cellOf), p(String((1_700_000_000_000_000n + BigInt(i)) << 10n))];
          return { sql: `(${parts.map((x) => x.sql).join(', ')})`, params: parts.flatMap((x) => x.params) };
        });
        const sql = `INSERT INTO ${quoteTable(DB, t.name)} (${names.map(quoteIdent).join(', ')}) VALUES ${cells.map((x) => x.sql).join(', ')}`;
        await Promise.all(conns.map((c) => c.query(sql, cells.flatMap((x) => x.params))));
      }
    }

    // 1,000 single-column changes on B, each on its own key, the version kept (behind replication).
    const injected = new Map<string, string>(); // `table|key text` → column
    const byMutation: Record<string, number> = {};
    await b.query(enterApplySessionSql('lww_meta'));
    let tries = 0;
    while (injected.size < CASES && tries++ < CASES * 50) {
      const ti = int(g, 0, TABLES - 1);
      const t = tables[ti]!;
      const i = int(g, 0, ROWS - 1);
      const key = t.shape.key(i);
      const id = keyId(t.name, t.shape.names, key.text);
      if (injected.has(id)) continue;
      const how = pick(g, MUTATIONS);
      const fits = t.columns.filter((x) => APPLIES[how](x));
      const c = pick(g, fits);
      const ci = t.columns.indexOf(c);
      const next = mutate(g, c, models[ti]![i]![ci]!, how);
      if (next === undefined) continue;
      const cell = cellOf(next);
      const where = t.shape.names.map((n) => `${quoteIdent(n)} = ?`).join(' AND ');
      // MySQL leaves a row unchanged when its JSON is equal as JSON (5.0 = 5): go through NULL.
      if (how === 'json') await b.query(`UPDATE ${quoteTable(DB, t.name)} SET ${quoteIdent(c.name)} = NULL WHERE ${where}`, key.values);
      await b.query(`UPDATE ${quoteTable(DB, t.name)} SET ${quoteIdent(c.name)} = ${cell.sql} WHERE ${where}`, [...cell.params, ...key.values]);
      injected.set(id, c.name);
      byMutation[how] = (byMutation[how] ?? 0) + 1;
    }
    // One value of 9 MiB on top (past MariaDB's packet limit once in HEX).
    {
      const t = tables.find((x) => x.shape.names[0] === 'id')!;
      const i = [...Array(ROWS).keys()].find((k) => !injected.has(keyId(t.name, t.shape.names, t.shape.key(k).text)))!;
      await Promise.all(conns.map((c) => c.query(`UPDATE ${quoteTable(DB, t.name)} SET mb = REPEAT(X'AB', 9 << 20) WHERE id = ?`, t.shape.key(i).values)));
      await b.query(`UPDATE ${quoteTable(DB, t.name)} SET mb = INSERT(mb, 5000000, 1, X'AC') WHERE id = ?`, t.shape.key(i).values);
      injected.set(keyId(t.name, t.shape.names, t.shape.key(i).text), 'mb');
      byMutation.large = (byMutation.large ?? 0) + 1;
    }
    await b.query('SET @lww_apply = NULL');
    console.log(`[${ctx.engine}] injected ${injected.size} differences:`, byMutation);
    expect(injected.size).toBe(CASES + 1);
    for (const m of MUTATIONS) expect(byMutation[m] ?? 0, m).toBeGreaterThan(50);

    // Ground truth on the servers: exactly the injected cells differ.
    const truth = new Map<string, string[]>();
    for (const t of tables) {
      const sql = `SELECT ${t.shape.names.map((n, i) => `${keyTextSql(n)} AS _k${i}`).join(', ')}, ${t.columns.map((c) => `${truthSql(c)} AS ${quoteIdent(c.name)}`).join(', ')} FROM ${quoteTable(DB, t.name)} ORDER BY ${t.shape.names.map(quoteIdent).join(', ')}`;
      const [ra, rb] = await Promise.all([a.query<RowDataPacket[]>(sql), b.query<RowDataPacket[]>(sql)]);
      ra[0].forEach((rowA, i) => {
        expect(JSON.stringify(t.shape.names.map((_, j) => rb[0][i]![`_k${j}`]))).toBe(JSON.stringify(t.shape.names.map((_, j) => rowA[`_k${j}`])));
        const rowB = rb[0][i]!;
        const differing = t.columns.filter((c) => rowA[c.name] !== rowB[c.name]).map((c) => c.name);
        if (differing.length > 0) truth.set(keyId(t.name, t.shape.names, t.shape.names.map((_, j) => rowA[`_k${j}`])), differing);
      });
    }
    expect(Object.fromEntries(truth)).toEqual(Object.fromEntries([...injected].map(([k, c]) => [k, [c]])));

    const report = await checkState({ nodes: urls, tables: tables.map((t) => `${DB}.${t.name}`), chunkSize: 64 });
    const reported = new Map<string, string[]>();
    for (const t of report.tables) {
      expect(t.schemaDifferences).toEqual([]);
      for (const f of t.findings) {
        expect(f.class).toBe('value_mismatch');
        expect(f.winner).toBeNull();
        const [sa, sb] = f.states;
        const cols = sa.kind === 'row' && sb.kind === 'row' ? Object.keys(sa.values).filter((k) => sa.values[k] !== sb.values[k]) : [];
        reported.set(keyId(t.table.slice(DB.length + 1), Object.keys(f.key), Object.values(f.key)), cols);
      }
    }
    expect(report.totals.findings).toBe(CASES + 1);
    expect(Object.fromEntries(reported)).toEqual(Object.fromEntries(truth));
  }, 300_000);
});
