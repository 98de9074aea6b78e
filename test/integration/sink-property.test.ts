// Property: over randomly generated schemas (INT, BIGINT UNSIGNED, VARCHAR under binary and
// case-insensitive collations, DATETIME(6), TIMESTAMP(3), DECIMAL, composite keys, a secondary
// UNIQUE key) and random change sets whose keys are spelled differently each time (strings, JS
// numbers, Dates, with and without fractions, in other letter case), every order and grouping of
// the changes ends in the LWW oracle's state, no key is both a row and behind a newer tombstone,
// and no false unique-key conflict is logged — applied by one worker and by 8 parallel workers.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { randomInt, type Random, seededRandom, shuffle } from '../../src/harness/random.ts';
import { createSink, type SourceTransactionInput } from '../../src/index.ts';
import { tombstoneTableName } from '../../src/model/names.ts';
import { quoteIdent, quoteTable } from '../../src/sql/quote.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { freshDatabase } from '../helpers/db.ts';

type Change = SourceTransactionInput['changes'][number];

/** A key column type: how many logical values it has, how to spell one, how to read one back. */
interface KeyType {
  ddl: string;
  /** Spellings of logical value i that the server considers the same key. */
  spell(i: number, random: Random): unknown;
  /** The logical value of a stored value (as mysql2 returns it with dateStrings). */
  logical(stored: unknown): number;
  /** Under a case-insensitive collation the spelling of the newest write must win. */
  caseInsensitive?: boolean;
}

const pick = <T,>(random: Random, items: readonly T[]): T => items[randomInt(random, 0, items.length)]!;
const second = (i: number) => `2024-01-01 10:00:${String(i).padStart(2, '0')}`;
const LETTERS = 'abcdefghij';

const KEY_TYPES: Record<string, KeyType> = {
  int: { ddl: 'INT NOT NULL', spell: (i, r) => pick(r, [i, String(i), `0${i}`]), logical: (s) => Number(s) },
  u64: {
    ddl: 'BIGINT UNSIGNED NOT NULL',
    spell: (i, r) => pick(r, [18446744073709551600n + BigInt(i), (18446744073709551600n + BigInt(i)).toString()]),
    logical: (s) => Number(BigInt(String(s)) - 18446744073709551600n),
  },
  bin: { ddl: 'VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', spell: (i) => `k${LETTERS[i]}`, logical: (s) => LETTERS.indexOf(String(s).slice(1)) },
  ci: {
    ddl: 'VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL',
    spell: (i, r) => pick(r, [`k${LETTERS[i]}`, `K${LETTERS[i]!.toUpperCase()}`, `k${LETTERS[i]!.toUpperCase()}`]),
    logical: (s) => LETTERS.indexOf(String(s).slice(1).toLowerCase()),
    caseInsensitive: true,
  },
  dt6: {
    ddl: 'DATETIME(6) NOT NULL',
    spell: (i, r) => pick(r, [second(i), `${second(i)}.000000`, new Date(`${second(i)}Z`)]),
    logical: (s) => Number(String(s).slice(17, 19)),
  },
  ts3: {
    ddl: 'TIMESTAMP(3) NOT NULL',
    spell: (i, r) => pick(r, [second(i), `${second(i)}.000`, new Date(`${second(i)}Z`)]),
    logical: (s) => Number(String(s).slice(17, 19)),
  },
  dec: { ddl: 'DECIMAL(8,2) NOT NULL', spell: (i, r) => pick(r, [i + 0.5, `${i}.50`, `${i}.5`]), logical: (s) => Math.floor(Number(s)) },
};

interface Schema {
  key: string[];
  unique: boolean;
  /** Logical keys: tuples of logical values. */
  keys: number[][];
}

/** A schema whose first key column is `first` (so the seeds cover every type), maybe composite. */
function randomSchema(random: Random, first: string): Schema {
  const names = Object.keys(KEY_TYPES).filter((n) => n !== first);
  const width = random() < 0.4 ? 2 : 1;
  const key = [first, ...shuffle(random, names)].slice(0, width);
  const per = width === 2 ? 3 : 8;
  const keys: number[][] = [];
  if (width === 1) for (let i = 0; i < per; i++) keys.push([i]);
  else for (let i = 0; i < per; i++) for (let j = 0; j < per; j++) keys.push([i, j]);
  return { key, unique: random() < 0.6, keys };
}

const col = (i: number) => `k${i}`;

function ddlOf(s: Schema): string {
  const cols = s.key.map((t, i) => `${col(i)} ${KEY_TYPES[t]!.ddl}`);
  return (
    `CREATE TABLE {{db}}.t (${cols.join(', ')}, v INT NOT NULL, u INT NULL, _lww_ts BIGINT UNSIGNED NOT NULL, PRIMARY KEY (${s.key.map((_, i) => col(i)).join(', ')})` +
    `${s.unique ? ', UNIQUE KEY uu (u)' : ''}) ENGINE=InnoDB`
  );
}

interface Expected {
  rows: Map<string, { v: number; version: bigint; spelling: unknown[] }>;
  tombs: Map<string, bigint>;
}

/** The LWW oracle, per logical key: the newest upsert survives unless a delete is as new or newer. */
function oracle(changes: Array<{ change: Change; keys: { before?: number[]; after?: number[] }; spelling?: unknown[] }>): Expected {
  const best = new Map<string, { v: number; version: bigint; spelling: unknown[] }>();
  const tombs = new Map<string, bigint>();
  for (const { change, keys, spelling } of changes) {
    const version = BigInt(change.version);
    const id = (k: number[]) => k.join(',');
    const moved = keys.before && keys.after && id(keys.before) !== id(keys.after);
    if (change.op === 'delete' || moved) {
      const k = id(keys.before!);
      if ((tombs.get(k) ?? -1n) < version) tombs.set(k, version);
    }
    if (keys.after) {
      const k = id(keys.after);
      if ((best.get(k)?.version ?? -1n) < version) best.set(k, { v: (change.after as { v: number }).v, version, spelling: spelling! });
    }
  }
  const rows = new Map([...best].filter(([k, b]) => b.version > (tombs.get(k) ?? -1n)));
  return { rows, tombs };
}

describeEachEngine('LWW sink property: random schemas, spellings, orders, groupings and worker counts', 1, (ctx) => {
  let url: string;
  let conn: Connection;
  beforeAll(async () => {
    url = ctx.servers[0]!.url;
    conn = await connect(url);
  });
  afterAll(async () => {
    await conn?.end();
  });

  it('every order and grouping converges on the oracle, with no row behind a newer tombstone', async () => {
    const typeNames = Object.keys(KEY_TYPES);
    for (const seed of [11, 12, 13, 14, 15, 16, 17]) {
      const random = seededRandom(seed);
      const schema = randomSchema(random, typeNames[seed % typeNames.length]!);
      const types = schema.key.map((t) => KEY_TYPES[t]!);
      const used = new Set<bigint>();
      const version = () => {
        for (;;) {
          const v = (1n << 60n) + BigInt(randomInt(random, 0, 1_000_000)) * 1024n + BigInt(randomInt(random, 0, 1024));
          if (!used.has(v)) {
            used.add(v);
            return v;
          }
        }
      };
      const keyRow = (logical: number[]) => {
        const spelling = logical.map((l, i) => types[i]!.spell(l, random));
        return { row: Object.fromEntries(spelling.map((s, i) => [col(i), s])), spelling };
      };
      // u is a function of the logical key: the UNIQUE key never clashes for real, so any logged clash is false.
      const uOf = (logical: number[]) => logical.reduce((a, b) => a * 10 + b, 0);
      const changes: Array<{ change: Change; keys: { before?: number[]; after?: number[] }; spelling?: unknown[] }> = [];
      for (let i = 0; i < 150; i++) {
        const logical = pick(random, schema.keys);
        const r = random();
        const v = version();
        if (r < 0.35) {
          const { row, spelling } = keyRow(logical);
          changes.push({ change: { schema: 'x', table: 't', op: 'insert', after: { ...row, v: i, u: uOf(logical) }, version: v }, keys: { after: logical }, spelling });
        } else if (r < 0.6) {
          // Possibly a key change, possibly only a change of spelling (not a key change for the server).
          const to = random() < 0.3 ? pick(random, schema.keys) : logical;
          const before = keyRow(logical);
          const after = keyRow(to);
          changes.push({
            change: { schema: 'x', table: 't', op: 'update', before: { ...before.row, v: 0, u: uOf(logical) }, after: { ...after.row, v: i, u: uOf(to) }, version: v },
            keys: { before: logical, after: to },
            spelling: after.spelling,
          });
        } else {
          changes.push({ change: { schema: 'x', table: 't', op: 'delete', before: keyRow(logical).row, version: v }, keys: { before: logical } });
        }
      }
      const expected = oracle(changes);
      for (let perm = 0; perm < 3; perm++) {
        const db = `prop_${seed}_${perm}`;
        await freshDatabase(conn, db, [ddlOf(schema)]);
        const order = perm === 0 ? changes : shuffle(random, changes);
        // The source order through one worker; the shuffled orders through 8 parallel workers.
        const applyWorkers = perm === 0 ? 1 : 8;
        const sink = createSink({ target: url, failpoints: '', applyWorkers, batch: { maxRows: randomInt(random, 1, 200) } });
        try {
          let pos = 0;
          for (let i = 0; i < order.length; ) {
            const size = randomInt(random, 1, 12);
            await sink.write({ sourceId: db, position: String(++pos), changes: order.slice(i, i + size).map((c) => ({ ...c.change, schema: db })) });
            i += size;
          }
          await sink.flush();
        } finally {
          await sink.close();
        }
        const label = `seed ${seed}, order ${perm}, ${applyWorkers} workers, key ${schema.key.join('+')}${schema.unique ? ' + unique' : ''}`;
        const tomb = quoteTable('lww_meta', tombstoneTableName(db, 't'));
        const keyCols = schema.key.map((_, i) => quoteIdent(col(i)));
        const [rows] = await conn.query<RowDataPacket[]>(`SELECT * FROM ${quoteTable(db, 't')}`);
        const got = new Map(rows.map((r) => [schema.key.map((_, i) => types[i]!.logical(r[col(i)])).join(','), r]));
        expect([...got.keys()].sort(), label).toEqual([...expected.rows.keys()].sort());
        for (const [k, want] of expected.rows) {
          const r = got.get(k)!;
          expect([r.v, BigInt(r._lww_ts)], `${label}, key ${k}`).toEqual([want.v, want.version]);
          types.forEach((t, i) => {
            if (t.caseInsensitive) expect(r[col(i)], `${label}, key ${k}: the newest spelling wins`).toBe(want.spelling[i]);
          });
        }
        const [tombs] = await conn.query<RowDataPacket[]>(`SELECT * FROM ${tomb}`);
        const gotTombs = new Map(tombs.map((r) => [schema.key.map((_, i) => types[i]!.logical(r[col(i)])).join(','), BigInt(r._lww_ts)]));
        expect(gotTombs, label).toEqual(expected.tombs);
        const [under] = await conn.query<RowDataPacket[]>(
          `SELECT COUNT(*) AS n FROM ${quoteTable(db, 't')} t JOIN ${tomb} tb ON ${keyCols.map((c) => `tb.${c} = t.${c}`).join(' AND ')} WHERE tb._lww_ts >= t._lww_ts`,
        );
        expect(Number(under[0]!.n), label).toBe(0);
        const [clashes] = await conn.query<RowDataPacket[]>('SELECT COUNT(*) AS n FROM lww_meta.conflicts WHERE schema_name = ?', [db]);
        expect(Number(clashes[0]!.n), `${label}: no false unique-key conflicts`).toBe(0);
        await conn.query(`DROP DATABASE ${quoteIdent(db)}`);
        await conn.query(`DROP TABLE ${tomb}`);
      }
    }
  });
});
