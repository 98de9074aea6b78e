// Generated sessions: writer transactions shaped like real applications' — explicit multi-statement
// transactions that read a snapshot before they write, savepoints rolled back, REPLACE, INSERT IGNORE,
// INSERT … ON DUPLICATE KEY UPDATE, multi-row INSERT/UPDATE/DELETE, primary-key and case-only key
// changes, unique-value swaps, sessions in other time zones — over any table the schema generator
// describes (or the sbtest tables).
//
// The oracle stays exact without modelling what each statement did: every key a transaction may
// have changed is a candidate (the keys it names; rows a REPLACE or an upsert clashes with on a
// UNIQUE key, and child rows a parent's delete cascades to, both found by locking reads before the
// statement), and just before COMMIT the transaction reads each candidate's row or tombstone. A
// candidate it did not change reads as some committed state (version and values), which the final
// state must equal or exceed anyway; so "per key, the highest version seen" is the LWW winner.
import type { Connection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import { connect } from '../db/connection.ts';
import { NULL_TERM, TERM_SEPARATOR } from '../sql/checksum.ts';
import {
  createGeneratedTableSql,
  deleteByKeysSql,
  type InsertVerb,
  insertRowsSql,
  lockByColumnValuesSql,
  type OracleColumn,
  oracleAllRowsSql,
  oracleRowsSql,
  oracleTombstoneByIdentitySql,
  oracleTombstonesSql,
  ROLLBACK_TO_SAVEPOINT_SQL,
  SAVEPOINT_SQL,
  SET_TIME_ZONE_SQL,
  selectByKeysSql,
  sinkFollowUpsSql,
  sinkRemovalReasonsSql,
  updateByKeysSql,
} from '../sql/generated.ts';
import { createDatabaseSql } from '../sql/workload.ts';
import { FOLLOW_UP_CASCADE_REASON, FOLLOW_UP_SET_NULL_MARK } from '../writer/foreign-keys.ts';
import { loadTableMeta } from '../writer/table-metadata.ts';
import { type Random, randomInt, seededRandom } from './random.ts';
import { BINARY_COLLATION, type GenColumn, type GeneratedSchema, type GenTable, randomValue } from './schema-gen.ts';

export type IsolationChoice = 'read-committed' | 'repeatable-read' | 'mixed';

/** A write the oracle saw inside a committed transaction: the key's identity, version and row text (null: deleted). */
export interface SeenWrite {
  node: string;
  table: string;
  id: string;
  version: bigint;
  text: string | null;
  /** How many of the table's oracle columns the text holds (fewer than now: read before a column was added). */
  width?: number;
}

/** What the oracle reads of one table (loaded from the server after install). */
export interface OracleTable {
  name: string;
  key: OracleColumn[];
  /** Written columns (not generated, not the version), compared by their canonical text. */
  columns: OracleColumn[];
  tombstoneTable: string;
  /** Columns of its ON DELETE SET NULL foreign keys. */
  setNullColumns: string[];
  /**
   * Terms of the columns added (last in `columns`) while the writers ran, as their default shows: a
   * text read before a column existed holds it as that default (session-shapes.ts, DDL).
   */
  appended?: string[];
}

export interface SessionContext {
  schema: string;
  metaSchema: string;
  versionColumn: string;
  tables: readonly GenTable[];
  oracle: ReadonlyMap<string, OracleTable>;
  /** Explicit multi-statement transactions (snapshot read first, savepoints); else one statement each. */
  explicitTx: boolean;
  /** Some transactions run in another session time zone. */
  timeZones: boolean;
  /** Counts of the shapes each transaction used (for the generated-shape report). */
  shapes: Map<string, number>;
}

/** The writer gave up on a transaction because the oracle could not be sure what it changed; roll back and go again. */
export class OracleUncertainError extends Error {}

/** Statement errors an application meets and lives with: the statement changed nothing, the transaction goes on. */
const STATEMENT_ERRORS = new Set(['ER_DUP_ENTRY', 'ER_ROW_IS_REFERENCED_2', 'ER_NO_REFERENCED_ROW_2', 'ER_ROW_IS_REFERENCED', 'ER_NO_REFERENCED_ROW']);

const count = (shapes: Map<string, number>, name: string) => shapes.set(name, (shapes.get(name) ?? 0) + 1);
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

/** The sbtest tables as generator tables (integer key, k, c, pad), so generated sessions can run on them. */
export function sbtestGenTables(tables: number, keys: number): GenTable[] {
  return Array.from({ length: tables }, (_, t) => ({
    name: `sbtest${t + 1}`,
    columns: [
      { name: 'id', kind: 'int', type: 'INT', nullable: false },
      { name: 'k', kind: 'int', type: 'INT', nullable: false },
      { name: 'c', kind: 'char', type: 'CHAR(120)', nullable: false, length: 119, collation: BINARY_COLLATION },
      { name: 'pad', kind: 'char', type: 'CHAR(60)', nullable: false, length: 59, collation: BINARY_COLLATION },
    ],
    primaryKey: ['id'],
    uniques: [],
    uniquePools: [],
    keyPool: Array.from({ length: keys }, (_, i) => [BigInt(i + 1)]),
    initialRows: 0,
    counter: 'k',
  }));
}

const counterOf = (t: GenTable) => t.counter ?? 'n';

/** Creates the generated tables on one node and loads the same initial rows (version 1 << 10) on every node. */
export async function prepareGeneratedTables(url: string, schema: string, gen: GeneratedSchema, versionColumn: string, initialVersion: bigint): Promise<void> {
  const conn = await connect(url);
  try {
    await conn.query(createDatabaseSql(schema));
    for (const t of gen.tables) {
      await conn.query(createGeneratedTableSql(schema, t.name, t, versionColumn));
      const random = seededRandom(gen.seed * 31 + t.name.length * 7 + t.name.charCodeAt(1));
      const writable = t.columns.filter((c) => !c.generated);
      for (const key of t.keyPool.slice(0, t.initialRows)) {
        const values = rowValues(t, key, random, gen.tables, true);
        // The parent's initial rows are the first of its pool: reference only those (or NULL).
        await conn.query(insertRowsSql(schema, t.name, 'INSERT IGNORE', [...writable.map((c) => c.name), versionColumn], 1), [
          ...writable.map((c) => values.get(c.name)),
          initialVersion,
        ]);
      }
    }
  } finally {
    await conn.end();
  }
}

/** Values for every written column of a row with this key. */
export function rowValues(t: GenTable, key: readonly unknown[], random: Random, all: readonly GenTable[], initial = false): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [i, k] of t.primaryKey.entries()) out.set(k, key[i]);
  for (const c of t.columns) {
    if (c.generated || t.primaryKey.includes(c.name)) continue;
    if (t.foreignKey && c.name === t.foreignKey.column) {
      const parent = all.find((p) => p.name === t.foreignKey!.parentTable)!;
      const pool = initial ? parent.keyPool.slice(0, parent.initialRows) : parent.keyPool;
      out.set(c.name, random() < 0.25 || pool.length === 0 ? null : pick(random, pool)[0]);
    } else if (t.uniques.some((u) => u.includes(c.name))) {
      const ui = t.uniques.findIndex((u) => u.includes(c.name));
      const pool = t.uniquePools[ui]!;
      out.set(c.name, initial || random() < 0.2 ? null : pick(random, pool)[t.uniques[ui]!.indexOf(c.name)]);
    } else if (c.name === counterOf(t)) {
      out.set(c.name, BigInt(randomInt(random, 0, 1000)));
    } else {
      out.set(c.name, randomValue(c, random));
    }
  }
  return out;
}

/** Reads the oracle's view of each table (key and written columns, typed) from a node after install. */
export async function loadOracleTables(conn: Connection, schema: string, tables: readonly string[], versionColumn: string, metaSchema: string): Promise<Map<string, OracleTable>> {
  const [reg] = await conn.query<RowDataPacket[]>(
    `SELECT table_name AS t, tombstone_table AS tomb FROM \`${metaSchema.replaceAll('`', '``')}\`.\`tables\` WHERE schema_name = ?`,
    [schema],
  );
  const out = new Map<string, OracleTable>();
  for (const name of tables) {
    const meta = await loadTableMeta(conn, schema, name, versionColumn);
    const typed = (c: (typeof meta.columns)[number]): OracleColumn => ({ name: c.name, dataType: c.dataType, columnType: c.columnType, json: c.json ?? c.dataType === 'json', collation: c.collation });
    const tomb = reg.find((r) => r.t === name)?.tomb as string | undefined;
    if (!tomb) throw new Error(`${schema}.${name} is not installed`);
    out.set(name, {
      name,
      key: meta.primaryKey.map((k) => typed(meta.columns.find((c) => c.name === k)!)),
      columns: meta.columns.filter((c) => !c.generated && c.name !== versionColumn).map(typed),
      tombstoneTable: tomb,
      setNullColumns: (meta.setNullKeys ?? []).flatMap((fk) => fk.columns),
    });
  }
  return out;
}

/** Every row of the tables on one node, as the oracle reads them: table → identity → version and text. */
export async function readOracleState(conn: Connection, schema: string, oracle: ReadonlyMap<string, OracleTable>, versionColumn: string): Promise<Map<string, { version: bigint; text: string }>> {
  const out = new Map<string, { version: bigint; text: string }>();
  for (const t of oracle.values()) {
    const [rows] = await conn.query<RowDataPacket[]>(oracleAllRowsSql(schema, t.name, t.key, t.columns, versionColumn));
    for (const r of rows) out.set(`${t.name}/${r.i}`, { version: BigInt(r.v as string), text: String(r.t) });
  }
  return out;
}

export interface Candidates {
  byTable: Map<string, unknown[][]>;
}

function addCandidate(c: Candidates, table: string, key: readonly unknown[]): void {
  const list = c.byTable.get(table) ?? [];
  c.byTable.set(table, list);
  list.push([...key]);
}

const typedKey = (ctx: SessionContext, t: GenTable) => ctx.oracle.get(t.name)!.key;

/** Spelling variants of a key value the collation holds equal (case and accents), from the pool. */
function sameKeyOtherSpelling(col: GenColumn, value: unknown, pool: readonly unknown[]): unknown | undefined {
  if (!(col.kind === 'varchar' || col.kind === 'char') || col.collation === BINARY_COLLATION || typeof value !== 'string') return undefined;
  const fold = (s: string) => s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
  const others = pool.filter((v) => typeof v === 'string' && v !== value && fold(v) === fold(value));
  return others[0];
}

/**
 * Runs one generated transaction's statements on an open transaction and returns what it wrote
 * (read back before COMMIT, see the header). Throws OracleUncertainError when it cannot be sure.
 */
export async function generatedTransaction(conn: Connection, random: Random, ctx: SessionContext, node: string): Promise<{ writes: SeenWrite[]; statements: number }> {
  const cand: Candidates = { byTable: new Map() };
  let statements = 0;
  const s = ctx.schema;
  const shapes = ctx.shapes;

  const run = async (sql: string, values: unknown[]): Promise<ResultSetHeader | RowDataPacket[] | null> => {
    statements++;
    try {
      const [res] = await conn.query(sql, values);
      return res as ResultSetHeader | RowDataPacket[];
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code && STATEMENT_ERRORS.has(code)) {
        count(shapes, `statement-error:${code}`);
        return null;
      }
      throw err;
    }
  };
  const children = (t: GenTable) => ctx.tables.filter((c) => c.foreignKey?.parentTable === t.name);
  const flatKeys = (keys: readonly (readonly unknown[])[]) => keys.flatMap((k) => [...k]);

  /** Locks the rows of these keys (and the rows holding these unique values) and notes every child row a delete of them would cascade to. */
  const lockClashes = async (t: GenTable, keys: readonly (readonly unknown[])[], uniqueValues: readonly unknown[]): Promise<number> => {
    const key = typedKey(ctx, t);
    const found = new Map<string, unknown[]>();
    const note = (rows: RowDataPacket[]) => {
      for (const r of rows) {
        const k = t.primaryKey.map((c) => r[c]);
        found.set(k.map((v) => (Buffer.isBuffer(v) ? v.toString('hex') : String(v))).join('|'), k);
      }
    };
    if (keys.length > 0) note(((await run(selectByKeysSql(s, t.name, t.primaryKey, key, keys.length, true), flatKeys(keys))) ?? []) as RowDataPacket[]);
    const u = uniqueValues.filter((v) => v !== null);
    if (t.uniques.length > 0 && u.length > 0) {
      const ucol = ctx.oracle.get(t.name)!.columns.find((c) => c.name === t.uniques[0]![0])!;
      note(((await run(lockByColumnValuesSql(s, t.name, t.primaryKey, ucol, u.length), u)) ?? []) as RowDataPacket[]);
    }
    for (const k of found.values()) addCandidate(cand, t.name, k);
    for (const child of children(t)) {
      if (found.size === 0) break;
      const fk = child.foreignKey!;
      const pcol = ctx.oracle.get(child.name)!.columns.find((c) => c.name === fk.column)!;
      const parents = [...found.values()].map((k) => k[0]);
      const rows = ((await run(lockByColumnValuesSql(s, child.name, child.primaryKey, pcol, parents.length), parents)) ?? []) as RowDataPacket[];
      for (const r of rows) addCandidate(cand, child.name, child.primaryKey.map((c) => r[c]));
    }
    return found.size;
  };

  const distinctKeys = (t: GenTable, n: number): unknown[][] => {
    const out: unknown[][] = [];
    for (let i = 0; i < n * 3 && out.length < n; i++) {
      const k = pick(random, t.keyPool);
      if (!out.includes(k)) out.push(k);
    }
    return out;
  };

  const op = async (t: GenTable): Promise<void> => {
    const key = typedKey(ctx, t);
    const writable = t.columns.filter((c) => !c.generated);
    const nonKey = writable.filter((c) => !t.primaryKey.includes(c.name));
    const hasChildren = children(t).length > 0;
    const uniqueCol = t.uniques[0]?.[0];
    const r = random();
    if (r < 0.3) {
      // INSERT / INSERT IGNORE / REPLACE / INSERT … ON DUPLICATE KEY UPDATE, one row or several.
      const verbChoice = random();
      const verb: InsertVerb | 'ODKU' = verbChoice < 0.25 ? 'INSERT' : verbChoice < 0.5 ? 'INSERT IGNORE' : verbChoice < 0.75 ? 'REPLACE' : 'ODKU';
      // A REPLACE that may delete rows it clashes with stays one row, so its affected-row count checks the clash read.
      const single = verb === 'REPLACE' && (t.uniques.length > 0 || hasChildren);
      const keys = distinctKeys(t, single ? 1 : randomInt(random, 1, 4));
      const rows = keys.map((k) => rowValues(t, k, random, ctx.tables));
      const uvals = uniqueCol ? rows.map((row) => row.get(uniqueCol)) : [];
      // A REPLACE deletes what it clashes with: lock those rows first (and find their cascaded children).
      const clashes = verb === 'REPLACE' && single ? await lockClashes(t, keys, uvals) : 0;
      if (verb === 'REPLACE' && !single && hasChildren) await lockClashes(t, keys, []);
      const update = verb === 'ODKU' ? nonKey.filter((c) => c.name !== uniqueCol && c.name !== t.foreignKey?.column && random() < 0.6).map((c) => c.name) : undefined;
      if (update?.length === 0) update.push(counterOf(t));
      const fresh = rowValues(t, keys[0]!, random, ctx.tables);
      const updateValues = (update ?? []).map((c) => fresh.get(c));
      const sql = insertRowsSql(s, t.name, verb === 'ODKU' ? 'INSERT' : verb, writable.map((c) => c.name), rows.length, update);
      const res = (await run(sql, [...rows.flatMap((row) => writable.map((c) => row.get(c.name))), ...updateValues])) as ResultSetHeader | null;
      for (const k of keys) addCandidate(cand, t.name, k);
      count(shapes, `op:${verb === 'ODKU' ? 'odku' : verb.toLowerCase().replace(' ', '-')}${rows.length > 1 ? '-multi' : ''}`);
      // An upsert that clashed on the unique key updated the row holding that value: it still holds it.
      if (verb === 'ODKU' && uniqueCol) await lockClashes(t, [], uvals);
      // A REPLACE removes 1 + the rows it clashed with; more means a clash the locking read did not see (READ COMMITTED).
      if (single && res && res.affectedRows > 1 + clashes) throw new OracleUncertainError(`REPLACE removed rows the clash read did not see (${res.affectedRows} affected)`);
    } else if (r < 0.5) {
      // Multi-row UPDATE by a key list: new values, and the counter incremented.
      const keys = distinctKeys(t, randomInt(random, 1, 4));
      const set = nonKey.filter((c) => c.name !== counterOf(t) && random() < 0.5);
      const values = set.map((c) => rowValues(t, keys[0]!, random, ctx.tables).get(c.name));
      await run(updateByKeysSql(s, t.name, set.map((c) => c.name), [counterOf(t)], key, keys.length), [...values, ...flatKeys(keys)]);
      for (const k of keys) addCandidate(cand, t.name, k);
      count(shapes, `op:update${keys.length > 1 ? '-multi' : ''}`);
    } else if (r < 0.65) {
      const keys = distinctKeys(t, randomInt(random, 1, 3));
      if (hasChildren) await lockClashes(t, keys, []);
      await run(deleteByKeysSql(s, t.name, key, keys.length), flatKeys(keys));
      for (const k of keys) addCandidate(cand, t.name, k);
      count(shapes, `op:delete${keys.length > 1 ? '-multi' : ''}${hasChildren ? '-parent' : ''}`);
    } else if (r < 0.77) {
      // Primary-key change: one key column moves to another value, or to another spelling of the same key.
      const [from] = distinctKeys(t, 1);
      const ci = t.primaryKey.findIndex((k, i) => sameKeyOtherSpelling(t.columns.find((c) => c.name === k)!, from![i], t.keyPool.map((p) => p[i])) !== undefined);
      const i = ci >= 0 && random() < 0.6 ? ci : randomInt(random, 0, t.primaryKey.length);
      const col = t.columns.find((c) => c.name === t.primaryKey[i])!;
      const caseOnly = i === ci ? sameKeyOtherSpelling(col, from![i], t.keyPool.map((p) => p[i])) : undefined;
      const to = [...from!];
      to[i] = caseOnly ?? pick(random, t.keyPool)[i];
      await run(updateByKeysSql(s, t.name, [col.name], [], key, 1), [to[i], ...from!]);
      addCandidate(cand, t.name, from!);
      addCandidate(cand, t.name, to);
      count(shapes, caseOnly !== undefined ? 'op:case-only-key-change' : 'op:key-change');
    } else if (r < 0.85 && uniqueCol) {
      // Swap two rows' unique values through NULL (id1 u=NULL; id2 u=<id1's>; id1 u=<id2's>).
      const [a, b] = distinctKeys(t, 2);
      if (!a || !b) return;
      const rows = ((await run(selectByKeysSql(s, t.name, [...t.primaryKey, uniqueCol], key, 2, true), flatKeys([a, b]))) ?? []) as RowDataPacket[];
      if (rows.length === 2) {
        const [ua, ub] = [rows[0]![uniqueCol], rows[1]![uniqueCol]];
        const [ka, kb] = rows.map((row) => t.primaryKey.map((c) => row[c]));
        await run(updateByKeysSql(s, t.name, [uniqueCol], [], key, 1), [null, ...ka!]);
        await run(updateByKeysSql(s, t.name, [uniqueCol], [], key, 1), [ua, ...kb!]);
        await run(updateByKeysSql(s, t.name, [uniqueCol], [], key, 1), [ub, ...ka!]);
        addCandidate(cand, t.name, ka!);
        addCandidate(cand, t.name, kb!);
        count(shapes, 'op:unique-swap');
      }
    } else {
      // Read-modify-write from the snapshot: read the counter, write it back changed.
      const [k] = distinctKeys(t, 1);
      const rows = ((await run(selectByKeysSql(s, t.name, [counterOf(t)], key, 1, false), [...k!])) ?? []) as RowDataPacket[];
      const seen = rows[0] ? BigInt(String(rows[0][counterOf(t)])) : 0n;
      await run(updateByKeysSql(s, t.name, [counterOf(t)], [], key, 1), [seen + 7n, ...k!]);
      addCandidate(cand, t.name, k!);
      count(shapes, 'op:read-modify-write');
    }
  };

  let zone: string | undefined;
  if (ctx.timeZones && random() < 0.3) {
    zone = pick(random, ['+05:30', '-08:00', '+13:00']);
    await conn.query(SET_TIME_ZONE_SQL, [zone]);
    count(shapes, 'session:time-zone');
  }
  try {
    if (ctx.explicitTx) {
      count(shapes, 'tx:explicit');
      if (random() < 0.7) {
        // The snapshot read before any write (REPEATABLE READ fixes the snapshot here).
        const t = pick(random, ctx.tables);
        const keys = distinctKeys(t, 3);
        await run(selectByKeysSql(s, t.name, t.primaryKey, typedKey(ctx, t), keys.length, false), flatKeys(keys));
        count(shapes, 'tx:snapshot-read-first');
      }
      const n = randomInt(random, 1, 5);
      for (let i = 0; i < n; i++) await op(pick(random, ctx.tables));
      if (random() < 0.25) {
        await conn.query(SAVEPOINT_SQL);
        for (let i = randomInt(random, 1, 3); i > 0; i--) await op(pick(random, ctx.tables));
        await conn.query(ROLLBACK_TO_SAVEPOINT_SQL);
        count(shapes, 'tx:savepoint-rolled-back');
      }
    } else {
      count(shapes, 'tx:single-statement');
      await op(pick(random, ctx.tables));
    }
    return { writes: await readBack(conn, ctx, cand, node), statements };
  } finally {
    if (zone) await conn.query(SET_TIME_ZONE_SQL, ['+00:00']);
  }
}

/** Each candidate key's row (or tombstone) as this transaction sees it just before COMMIT. */
export async function readBack(conn: Connection, ctx: SessionContext, cand: Candidates, node: string, chunkKeys = 50): Promise<SeenWrite[]> {
  const out: SeenWrite[] = [];
  for (const [table, keys] of cand.byTable) {
    const o = ctx.oracle.get(table)!;
    const width = o.columns.length;
    const seen = new Set<string>();
    for (let i = 0; i < keys.length; i += chunkKeys) {
      const chunk = keys.slice(i, i + chunkKeys);
      const flat = chunk.flat();
      const [rows] = await conn.query<RowDataPacket[]>(oracleRowsSql(ctx.schema, table, o.key, o.columns, ctx.versionColumn, chunk.length), flat);
      for (const r of rows) {
        const id = String(r.i);
        if (seen.has(id)) continue;
        seen.add(id);
        out.push({ node, table, id, version: BigInt(r.v as string), text: String(r.t), width });
      }
      const [tombs] = await conn.query<RowDataPacket[]>(oracleTombstonesSql(ctx.metaSchema, o.tombstoneTable, o.key, ctx.versionColumn, chunk.length), flat);
      for (const r of tombs) {
        const id = String(r.i);
        if (seen.has(id)) continue;
        seen.add(id);
        out.push({ node, table, id, version: BigInt(r.v as string), text: null });
      }
    }
  }
  return out;
}

export interface GenericExpected {
  version: bigint;
  text: string | null;
}

/** Per table/identity, the state LWW must converge to: the highest version seen (initial rows included). */
export function genericExpected(initial: ReadonlyMap<string, { version: bigint; text: string }>, writes: Iterable<SeenWrite>): Map<string, GenericExpected> {
  const out = new Map<string, GenericExpected>();
  for (const [k, v] of initial) out.set(k, { version: v.version, text: v.text });
  for (const w of writes) {
    const k = `${w.table}/${w.id}`;
    const cur = out.get(k);
    if (!cur || w.version > cur.version) out.set(k, { version: w.version, text: w.text });
  }
  return out;
}

export interface GenericMismatch {
  node: string;
  key: string;
  expected: { version: string; row: string | null };
  actual: { version: string; row: string } | null;
}

/** Every key whose row on the node differs from the expected state (version or canonical text). */
export function compareGeneric(node: string, actual: ReadonlyMap<string, { version: bigint; text: string }>, expected: ReadonlyMap<string, GenericExpected>): GenericMismatch[] {
  const out: GenericMismatch[] = [];
  for (const [key, a] of actual) {
    const e = expected.get(key);
    if (!e || e.text === null || e.version !== a.version || e.text !== a.text) {
      out.push({ node, key, expected: { version: e?.version.toString() ?? 'none', row: e?.text ?? null }, actual: { version: a.version.toString(), row: a.text } });
    }
  }
  for (const [key, e] of expected) {
    if (e.text !== null && !actual.has(key)) out.push({ node, key, expected: { version: e.version.toString(), row: e.text }, actual: null });
  }
  return out;
}

/** The oracle's start: the typed tables and the rows every node holds before the writers start (read from one node). */
export async function startGenericOracle(url: string, schema: string, tables: readonly string[], versionColumn: string, metaSchema: string) {
  const conn = await connect(url);
  try {
    const oracle = await loadOracleTables(conn, schema, tables, versionColumn, metaSchema);
    return { oracle, metaSchema, initial: await readOracleState(conn, schema, oracle, versionColumn) };
  } finally {
    await conn.end();
  }
}

/**
 * The written row with only its ON DELETE SET NULL references cleared, at the same version: the
 * parent went, and the foreign key's own action (on the node that deleted it, or where the delete
 * arrived) or the sink (where the row arrived after the delete, logged) cleared them. The writers'
 * per-key state cannot know that; the state check still compares the nodes.
 */
export function clearedBySetNull(table: OracleTable | undefined, m: GenericMismatch, followedUp = false): boolean {
  if (!table || table.setNullColumns.length === 0 || !m.actual || m.expected.row === null) return false;
  // Another version only where a node cleared the row as its own write (a follow-up, logged at the written version), newer.
  if (m.actual.version !== m.expected.version && !(followedUp && m.expected.version !== 'none' && BigInt(m.actual.version) > BigInt(m.expected.version))) return false;
  const want = m.expected.row.split(TERM_SEPARATOR);
  const got = m.actual.row.split(TERM_SEPARATOR);
  // A term holding the separator itself splits differently: not judged, the mismatch stands.
  if (want.length !== table.columns.length || got.length !== want.length) return false;
  return want.every((w, i) => w === got[i] || (got[i] === NULL_TERM && table.setNullColumns.includes(table.columns[i]!.name)));
}

/** What a node's sink recorded about a key the writers expect present: conflict-log reasons at the written version, the key's tombstone. */
export interface SinkRemovalEvidence {
  /** Reasons of the conflict log's removals (UNIQUE clash, foreign key cascade) of the table's rows at the expected version. */
  reasons: readonly string[];
  /** The node's tombstone version of the key, if it has one. */
  tombstoneVersion: bigint | undefined;
}

/**
 * Whether the node's sink removed the expected row at its written version, as its conflict log says:
 * - by last-write-wins across a secondary UNIQUE key (the writers' per-key state cannot know that a
 *   newer row of another key took the value);
 * - with an ON DELETE CASCADE parent deleted on another node (the row was written concurrently with
 *   the parent's delete: both nodes drop it, with a tombstone of that key at the row's own version,
 *   foreign-keys.ts). The conflict log entry names the table and version; the tombstone of this very
 *   key at that very version ties it to the key (a later delete or write of the key is no such removal).
 * The state check and the history audit (which pairs the removal with the logged reason) still judge it.
 */
export function removedBySink(m: GenericMismatch, ev: SinkRemovalEvidence): boolean {
  if (m.actual !== null || m.expected.row === null || m.expected.version === 'none') return false;
  if (ev.reasons.some((r) => r.startsWith('unique key clash: removed'))) return true;
  // Deleted as a node's own write (a follow-up of a parent delete, logged at the written version on that node): a newer tombstone.
  if (ev.reasons.some((r) => r.startsWith(FOLLOW_UP_CASCADE_REASON)) && ev.tombstoneVersion !== undefined && ev.tombstoneVersion > BigInt(m.expected.version)) return true;
  return ev.reasons.some((r) => r.startsWith('foreign key cascade')) && ev.tombstoneVersion === BigInt(m.expected.version);
}

/** A SET NULL follow-up's conflict-log reason (writer/foreign-keys.ts). */
const isSetNullFollowUp = (r: string) => r.startsWith('foreign key set null:') && r.includes(FOLLOW_UP_SET_NULL_MARK);

/** A sink's follow-up as its conflict log records it: the row's version it corrected, the version it wrote. */
export interface LoggedFollowUp {
  action: 'CASCADE' | 'SET NULL';
  /** The version the row held when the follow-up changed it (the log entry's version). */
  logged: bigint;
  /** The version the follow-up wrote (named in the reason). */
  to: bigint;
}

/** The follow-up a conflict-log entry records, or undefined for any other entry. */
export function parseFollowUp(reason: string, version: string): LoggedFollowUp | undefined {
  const action = reason.startsWith(FOLLOW_UP_CASCADE_REASON) ? 'CASCADE' : isSetNullFollowUp(reason) ? 'SET NULL' : undefined;
  const to = /\(version (\d+)\)/.exec(reason)?.[1];
  if (!action || to === undefined || !/^\d+$/.test(version)) return undefined;
  return { action, logged: BigInt(version), to: BigInt(to) };
}

/**
 * Whether the node holds what a follow-up wrote, newer than the writers' last write of the key: a
 * follow-up is a node's own write at the least version of that node above the row's (foreign-keys.ts),
 * so a writer's write on another node made from the same row state in the same microsecond (a clock
 * behind, versions advancing by the floor) is concurrent with it and loses by node id (generated seed
 * 107 on MySQL). Tied to this key by the follow-up's written version (the row's version, or its
 * tombstone's) and by the row it corrected: a write of this key the writers saw at the logged version,
 * which with its SET NULL columns cleared is what the node holds (CASCADE: the key is deleted).
 */
export function writtenByFollowUp(
  table: OracleTable | undefined,
  m: GenericMismatch,
  followUps: readonly LoggedFollowUp[],
  seenAt: (version: bigint) => string | null | undefined,
  tombstoneVersion?: bigint,
): boolean {
  if (!table || m.expected.version === 'none') return false;
  const expected = BigInt(m.expected.version);
  for (const f of followUps) {
    if (f.to <= expected) continue;
    const corrected = seenAt(f.logged);
    if (typeof corrected !== 'string') continue;
    if (f.action === 'CASCADE' && m.actual === null && tombstoneVersion === f.to) return true;
    if (f.action === 'SET NULL' && m.actual !== null && BigInt(m.actual.version) === f.to) {
      if (clearedBySetNull(table, { ...m, expected: { version: m.actual.version, row: corrected } })) return true;
    }
  }
  return false;
}

/** The versions the sinks wrote as their own follow-ups on any node, over these tables. */
export async function followUpVersions(conns: readonly Connection[], metaSchema: string, schema: string, tables: readonly string[]): Promise<Set<bigint>> {
  const out = new Set<bigint>();
  for (const t of tables) for (const f of await loggedFollowUps(conns, metaSchema, schema, t)) out.add(f.to);
  return out;
}

/** Every follow-up any node's sink logged for a table (they replicate as plain writes: the other nodes log nothing). */
async function loggedFollowUps(conns: readonly Connection[], metaSchema: string, schema: string, table: string): Promise<LoggedFollowUp[]> {
  const out: LoggedFollowUp[] = [];
  for (const c of conns) {
    const [rows] = await c.query<RowDataPacket[]>(sinkFollowUpsSql(metaSchema), [schema, table]);
    for (const r of rows) {
      const f = parseFollowUp(String(r.reason), String(r.version));
      if (f) out.push(f);
    }
  }
  return out;
}

/** The follow-ups any node's sink logged for a table's rows at a version (they replicate as plain writes: the other nodes log nothing). */
async function followUpReasons(conns: readonly Connection[], metaSchema: string, schema: string, table: string, version: string): Promise<string[]> {
  if (version === 'none') return [];
  const out: string[] = [];
  for (const c of conns) {
    const [rows] = await c.query<RowDataPacket[]>(sinkRemovalReasonsSql(metaSchema, true), [schema, table, version]);
    out.push(...rows.map((r) => String(r.reason)).filter((r) => r.startsWith(FOLLOW_UP_CASCADE_REASON) || isSetNullFollowUp(r)));
  }
  return out;
}

async function sinkRemovalEvidence(
  conn: Connection,
  metaSchema: string,
  schema: string,
  table: OracleTable,
  id: string,
  version: string,
  versionColumn: string,
  elsewhere: readonly string[] = [],
): Promise<SinkRemovalEvidence> {
  const [rows] = await conn.query<RowDataPacket[]>(sinkRemovalReasonsSql(metaSchema), [schema, table.name, version]);
  // Follow-ups logged on another node (they reach this one as plain writes) count too: this node's tombstone is then read.
  const reasons = [...rows.map((r) => String(r.reason)), ...elsewhere];
  if (!reasons.some((r) => r.startsWith('foreign key cascade'))) return { reasons, tombstoneVersion: undefined };
  const [tombs] = await conn.query<RowDataPacket[]>(oracleTombstoneByIdentitySql(metaSchema, table.tombstoneTable, table.key, versionColumn), [id]);
  return { reasons, tombstoneVersion: tombstoneVersionOf(tombs as Array<{ i: unknown; v: unknown }>, id) };
}

/**
 * The version of the tombstone whose identity is exactly this one (the server's comparison may
 * have folded case: a binary key column's 'beta' and 'BETA' are two keys with two tombstones; seed 108).
 */
export function tombstoneVersionOf(rows: ReadonlyArray<{ i: unknown; v: unknown }>, id: string): bigint | undefined {
  const exact = rows.filter((r) => String(r.i) === id);
  return exact.length === 1 ? BigInt(String(exact[0]!.v)) : undefined;
}

/**
 * A row text read before columns were added (DDL while the writers ran) as it reads now: those
 * columns hold their defaults (ADD COLUMN fills every row, and no writer wrote them before every node
 * had them). `width` is how many columns the text holds; unknown: the columns the oracle started with.
 */
export function withAddedDefaults(table: OracleTable | undefined, text: string | null, width: number | undefined): string | null {
  const added = table?.appended ?? [];
  if (text === null || !table || added.length === 0) return text;
  const base = table.columns.length - added.length;
  const missing = added.slice(Math.max(0, (width ?? base) - base));
  return missing.length === 0 ? text : [text, ...missing].join(TERM_SEPARATOR);
}

/**
 * Per key, the row text the writers saw at each version (null: only the key's tombstone was seen at
 * it). A row seen at a version stays: a tombstone at the same version (a child dropped on arrival at
 * its own version, foreign-keys.ts) does not hide it.
 */
export function seenTexts(initial: ReadonlyMap<string, { version: bigint; text: string }>, seen: Iterable<SeenWrite>): Map<string, Map<bigint, string | null>> {
  const texts = new Map<string, Map<bigint, string | null>>();
  const note = (key: string, version: bigint, text: string | null) => {
    const byVersion = texts.get(key) ?? new Map<bigint, string | null>();
    texts.set(key, byVersion);
    if (typeof byVersion.get(version) !== 'string') byVersion.set(version, text);
  };
  for (const [k, v] of initial) note(k, v.version, v.text);
  for (const w of seen) note(`${w.table}/${w.id}`, w.version, w.text);
  return texts;
}

/** Each node's rows against the state the writers' committed transactions imply. */
export async function genericMismatches(
  conns: readonly Connection[],
  names: readonly string[],
  schema: string,
  versionColumn: string,
  start: Awaited<ReturnType<typeof startGenericOracle>>,
  acked: Iterable<{ node: string; table: string; id: number | string; version: bigint; text?: string | null; width?: number }>,
): Promise<GenericMismatch[]> {
  const seen: SeenWrite[] = [];
  for (const w of acked) {
    if (w.text === undefined) continue;
    seen.push({ node: w.node, table: w.table, id: String(w.id), version: w.version, text: withAddedDefaults(start.oracle.get(w.table), w.text, w.width) });
  }
  const initial = new Map<string, { version: bigint; text: string }>();
  for (const [k, v] of start.initial) initial.set(k, { version: v.version, text: withAddedDefaults(start.oracle.get(k.slice(0, k.indexOf('/'))), v.text, undefined) as string });
  const expected = genericExpected(initial, seen);
  // Every text the writers saw per key and version (the rows a follow-up corrected), and each table's logged follow-ups.
  const texts = seenTexts(initial, seen);
  const followUpsOf = new Map<string, Promise<LoggedFollowUp[]>>();
  const followUps = (table: string) => {
    const known = followUpsOf.get(table);
    if (known) return known;
    const loading = loggedFollowUps(conns, start.metaSchema, schema, table);
    followUpsOf.set(table, loading);
    return loading;
  };
  const out: GenericMismatch[] = [];
  for (const [i, c] of conns.entries()) {
    for (const m of compareGeneric(names[i]!, await readOracleState(c, schema, start.oracle, versionColumn), expected)) {
      const table = m.key.slice(0, m.key.indexOf('/'));
      const t = start.oracle.get(table);
      const id = m.key.slice(table.length + 1);
      if (m.actual === null && t) {
        const followUps = await followUpReasons(conns, start.metaSchema, schema, table, m.expected.version);
        if (removedBySink(m, await sinkRemovalEvidence(c, start.metaSchema, schema, t, m.key.slice(table.length + 1), m.expected.version, versionColumn, followUps))) continue;
      }
      if (clearedBySetNull(t, m)) continue;
      if (m.actual !== null && m.actual.version !== m.expected.version && clearedBySetNull(t, m, (await followUpReasons(conns, start.metaSchema, schema, table, m.expected.version)).some((r) => isSetNullFollowUp(r)))) continue;
      if (t && m.expected.version !== 'none' && (m.actual === null ? m.expected.row !== null : BigInt(m.actual.version) > BigInt(m.expected.version))) {
        const logged = await followUps(table);
        if (logged.length > 0) {
          const [tombs] = m.actual === null ? await c.query<RowDataPacket[]>(oracleTombstoneByIdentitySql(start.metaSchema, t.tombstoneTable, t.key, versionColumn), [id]) : [[]];
          const tombstone = tombstoneVersionOf(tombs as Array<{ i: unknown; v: unknown }>, id);
          if (writtenByFollowUp(t, m, logged, (v) => texts.get(m.key)?.get(v), tombstone)) continue;
        }
      }
      out.push(m);
    }
  }
  return out;
}
