// Repairs changes whose row image is incomplete (a session wrote with binlog_row_image MINIMAL or
// NOBLOB): the missing columns were never logged, so instead of applying them as NULLs the row is
// read again from the source by primary key, in one consistent snapshot, and handed on as it is now
// with its own version (or, when it is gone, as a delete at its tombstone's version). LWW makes
// that exact: a newer state carries a newer version, and the binlog's later changes of the key
// replay harmlessly over it. A key that is neither a row nor a tombstone stops capture.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { connect, type Target } from '../db/connection.ts';
import { CaptureRefusedError } from '../errors.ts';
import type { Row, RowChange, SourceTransaction } from '../model/change.ts';
import type { TableMeta } from '../model/table.ts';
import { tableKey } from '../model/table.ts';
import { bindKeyValue, type ReadColumn, type TypedColumn, withExactValues } from '../sql/column-read.ts';
import { selectByKeysSql } from '../sql/copy.ts';
import { keyIdOf } from '../sync/table-reader.ts';
import { loadTableMeta, TableMetadataCache } from '../writer/table-metadata.ts';

/** Keys per lookup statement. */
const KEYS_PER_READ = 500;

export interface RepairOptions {
  source: Target;
  metaSchema: string;
  versionColumn: string;
  connectTimeoutMs?: number;
}

interface Wanted {
  index: number;
  change: RowChange;
  meta: TableMeta;
  key: unknown[];
}

export class RowImageRepairer {
  private conn: Promise<Connection> | null = null;
  private readonly metadata: TableMetadataCache;
  /** Changes repaired so far (for stats and tests). */
  repaired = 0;

  constructor(private readonly options: RepairOptions) {
    this.metadata = new TableMetadataCache(async (schema, table) => loadTableMeta(await this.connection(), schema, table, options.versionColumn));
  }

  private connection(): Promise<Connection> {
    if (!this.conn) {
      const p = connect(this.options.source, {
        connectTimeoutMs: this.options.connectTimeoutMs,
        init: ['SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ'],
      });
      p.then(
        (c) => c.on('error', () => {
          if (this.conn === p) this.conn = null;
        }),
        () => {
          if (this.conn === p) this.conn = null;
        },
      );
      this.conn = p;
    }
    return this.conn;
  }

  async close(): Promise<void> {
    const p = this.conn;
    this.conn = null;
    if (p) await p.then((c) => c.destroy()).catch(() => undefined);
  }

  /** Table metadata changed on the source (DDL read from the binlog). */
  refresh(schema?: string, table?: string): void {
    this.metadata.refresh(schema, table);
  }

  /** The transaction with the changes at `indexes` replaced by the source's current rows (or tombstones). */
  async repair(txn: SourceTransaction, indexes: readonly number[]): Promise<SourceTransaction> {
    const wanted: Wanted[] = [];
    for (const index of indexes) {
      const change = txn.changes[index]!;
      const meta = await this.metadata.get(change.schema, change.table);
      wanted.push({ index, change, meta, key: keyOf(meta, change, txn.position) });
    }
    const conn = await this.connection();
    const replaced = new Map<number, RowChange[]>();
    await conn.query('START TRANSACTION WITH CONSISTENT SNAPSHOT');
    try {
      const byTable = new Map<string, Wanted[]>();
      for (const w of wanted) {
        const k = tableKey(w.meta.schema, w.meta.table);
        byTable.set(k, [...(byTable.get(k) ?? []), w]);
      }
      for (const group of byTable.values()) {
        const meta = group[0]!.meta;
        const columns = typed(meta, meta.writableColumns);
        const key = typed(meta, meta.primaryKey);
        const rows = await this.read(conn, meta.schema, meta.table, columns, key, group);
        const gone = group.filter((w) => !rows.has(keyIdOf(w.key)));
        const tombs = gone.length > 0 ? await this.read(conn, this.options.metaSchema, meta.tombstoneTable, [...key, meta.versionColumn], key, gone) : new Map<string, Row>();
        for (const w of group) replaced.set(w.index, this.replacement(w, rows.get(keyIdOf(w.key)), tombs.get(keyIdOf(w.key)), txn.position));
      }
      await conn.query('COMMIT');
    } catch (err) {
      await conn.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    this.repaired += wanted.length;
    const changes = txn.changes.flatMap((c, i) => replaced.get(i) ?? [c]);
    return { ...txn, changes };
  }

  private async read(conn: Connection, schema: string, table: string, columns: ReadColumn[], key: TypedColumn[], wanted: Wanted[]): Promise<Map<string, Row>> {
    const found = new Map<string, Row>();
    for (let i = 0; i < wanted.length; i += KEYS_PER_READ) {
      const part = wanted.slice(i, i + KEYS_PER_READ);
      const [rows] = await conn.query<RowDataPacket[]>(
        selectByKeysSql(schema, table, columns, key, part.length),
        part.flatMap((w) => w.key.map((v, j) => bindKeyValue(key[j]!, v))),
      );
      for (const r of withExactValues(rows, columns)) found.set(keyIdOf(key.map((k) => r[k.name])), { ...r });
    }
    return found;
  }

  private replacement(w: Wanted, row: Row | undefined, tomb: Row | undefined, position: string): RowChange[] {
    const { change, meta } = w;
    const name = `${meta.schema}.${meta.table}`;
    if (row) {
      const out: RowChange = { schema: change.schema, table: change.table, op: change.op, after: row, version: BigInt(String(row[meta.versionColumn])) };
      if (change.before) out.before = change.before;
      return [out];
    }
    if (tomb) {
      const keyRow: Row = {};
      meta.primaryKey.forEach((k, i) => {
        keyRow[k] = w.key[i];
      });
      const out: RowChange[] = [{ schema: change.schema, table: change.table, op: 'delete', before: keyRow, version: BigInt(String(tomb[meta.versionColumn])) }];
      // An update that moved the key also deleted the old key, at the update's own version.
      const oldKey = change.before ? meta.primaryKey.map((k) => change.before![k]) : undefined;
      if (oldKey && keyIdOf(oldKey) !== keyIdOf(w.key)) {
        if (change.version === 0n) throw refused(name, position, 'it moved the primary key and its image has no version column');
        out.push({ schema: change.schema, table: change.table, op: 'delete', before: change.before!, version: change.version });
      }
      return out;
    }
    throw refused(name, position, 'the row is neither on the source nor tombstoned there (removed by TRUNCATE, or its tombstone was collected)');
  }
}

function refused(table: string, position: string, why: string): CaptureRefusedError {
  return new CaptureRefusedError(
    `a row image is incomplete (binlog_row_image MINIMAL or NOBLOB in the writing session) and cannot be repaired by reading the row again: ${why}`,
    table,
    position,
    "set binlog_row_image=FULL in every session writing replicated tables (SET SESSION binlog_row_image = 'FULL'); run lww-sink sync for the table, then resume from a position after this transaction",
  );
}

function typed(meta: TableMeta, names: readonly string[]): TypedColumn[] {
  return names.map((n) => {
    const c = meta.columns.find((col) => col.name === n)!;
    return { name: c.name, dataType: c.dataType, columnType: c.columnType };
  });
}

/** The primary key the change leaves its row at: the after image's key columns, else the before image's. */
function keyOf(meta: TableMeta, change: RowChange, position: string): unknown[] {
  return meta.primaryKey.map((k) => {
    const v = change.after && k in change.after ? change.after[k] : change.before?.[k];
    if (v === undefined || v === null) throw refused(`${meta.schema}.${meta.table}`, position, `its images lack primary-key column ${k}`);
    return v;
  });
}
