// The row-change model every source feeds the sink with, and its validation.
import { z } from 'zod';
import { InvalidChangeError } from '../errors.ts';
import { parseVersion, VersionFormatError } from './version.ts';

export type Op = 'insert' | 'update' | 'delete';

/** Column name → value. Values: string, number, bigint, boolean, null, Buffer/Uint8Array, Date, or JSON-able objects for JSON columns. */
export type Row = Record<string, unknown>;

export interface RowChange {
  schema: string;
  table: string;
  op: Op;
  before?: Row;
  after?: Row;
  version: bigint;
  /**
   * The source table's columns when the change was written (capture: the binlog's own column
   * metadata, binlog_row_metadata=FULL). Lets the sink tell a column the source table did not have
   * yet (schema changes reach the nodes one by one) from an incomplete image: a written target
   * column the after image lacks and this list does not name takes its default (see prepare.ts).
   * Without it, every missing written column is refused.
   */
  sourceColumns?: readonly string[];
}

export interface SourceTransaction {
  /** Identifies the source stream; its checkpoint row on the target is keyed by it. */
  sourceId: string;
  /** Opaque resume position, stored as the source's checkpoint when this transaction commits. */
  position: string;
  changes: RowChange[];
  /**
   * Commit time of the transaction on the source's clock (ms since the epoch), when known: every
   * later transaction of the source commits at or after it. Stored with the checkpoint; the
   * tombstone GC horizon is computed from it (a stream without it holds GC back).
   */
  sourceTimeMs?: number;
}

/** What callers may pass: versions as bigint or decimal string. */
export interface SourceTransactionInput {
  sourceId: string;
  position: string;
  changes: Array<Omit<RowChange, 'version'> & { version: bigint | string }>;
  /** See SourceTransaction.sourceTimeMs. */
  sourceTimeMs?: number;
}

const rowSchema = z.record(z.string(), z.unknown());

const changeSchema = z
  .object({
    schema: z.string().min(1).max(64),
    table: z.string().min(1).max(64),
    op: z.enum(['insert', 'update', 'delete']),
    before: rowSchema.optional(),
    after: rowSchema.optional(),
    // Optional here so that a missing one is named by parseVersion, not as a bare schema error.
    version: z.unknown().optional(),
    sourceColumns: z.array(z.string().min(1).max(64)).optional(),
  })
  .strict();

/** A lone UTF-16 surrogate: the server stores U+FFFD instead, so the text read back is another one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Ids and positions are keys and resume tokens: stored as given or refused. */
const txnSchema = z
  .object({
    // A trailing space would be ignored by the checkpoint key's collation (PAD SPACE): another stream's row.
    sourceId: z
      .string()
      .min(1)
      .max(255)
      .refine((s) => !s.endsWith(' '), 'must not end in a space (the checkpoint table compares ids without trailing spaces)')
      .refine((s) => !LONE_SURROGATE.test(s), 'holds a lone UTF-16 surrogate, which the server would store as U+FFFD'),
    position: z.string().max(4096).refine((s) => !LONE_SURROGATE.test(s), 'holds a lone UTF-16 surrogate, which the server would store as U+FFFD: the resume token read back would differ'),
    changes: z.array(z.unknown()),
    sourceTimeMs: z.number().int().nonnegative().optional(),
  })
  .strict();

function describePath(path: ReadonlyArray<PropertyKey>): string {
  return path.map((p) => String(p)).join('.') || '(root)';
}

const CHANGE_KEYS = new Set(['schema', 'table', 'op', 'before', 'after', 'version', 'sourceColumns']);
const OPS = new Set(['insert', 'update', 'delete']);
const VERSION_TEXT = /^[0-9]{1,20}$/;
const MAX_U64 = (1n << 64n) - 1n;

function isRow(v: unknown): v is Row {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function isName(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= 64;
}

// Capture hands one column list to every change of a rows event: each list is checked once.
const checkedLists = new WeakSet<object>();
function validColumnList(v: unknown): v is string[] {
  if (!Array.isArray(v)) return false;
  if (checkedLists.has(v)) return true;
  if (!v.every(isName)) return false;
  checkedLists.add(v);
  return true;
}

/**
 * The common case checked by hand (this runs for every change on the hot path); anything it does
 * not accept goes through the zod schemas, which produce the error message.
 */
function fastParse(input: unknown): SourceTransaction | undefined {
  if (!isRow(input)) return undefined;
  const { sourceId, position, changes, sourceTimeMs } = input as { sourceId?: unknown; position?: unknown; changes?: unknown; sourceTimeMs?: unknown };
  if (typeof sourceId !== 'string' || sourceId.length === 0 || sourceId.length > 255 || sourceId.endsWith(' ') || LONE_SURROGATE.test(sourceId)) return undefined;
  if (typeof position !== 'string' || position.length > 4096 || !Array.isArray(changes) || LONE_SURROGATE.test(position)) return undefined;
  if (sourceTimeMs !== undefined && !(Number.isSafeInteger(sourceTimeMs) && (sourceTimeMs as number) >= 0)) return undefined;
  for (const key in input) if (key !== 'sourceId' && key !== 'position' && key !== 'changes' && key !== 'sourceTimeMs') return undefined;
  const out: RowChange[] = new Array(changes.length);
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i] as Record<string, unknown>;
    if (!isRow(c) || !isName(c.schema) || !isName(c.table) || typeof c.op !== 'string' || !OPS.has(c.op)) return undefined;
    for (const key in c) if (!CHANGE_KEYS.has(key)) return undefined;
    const { before, after } = c;
    if ((before !== undefined && !isRow(before)) || (after !== undefined && !isRow(after))) return undefined;
    const op = c.op as Op;
    if (op === 'insert' ? !after || before : op === 'update' ? !after : !before || after) return undefined;
    let version: bigint;
    if (typeof c.version === 'bigint') version = c.version;
    else if (typeof c.version === 'string' && VERSION_TEXT.test(c.version)) version = BigInt(c.version);
    else return undefined;
    if (version < 0n || version > MAX_U64) return undefined;
    const change: RowChange = { schema: c.schema, table: c.table, op, version };
    if (before) change.before = before;
    if (after) change.after = after;
    const sourceColumns = c.sourceColumns;
    if (sourceColumns !== undefined) {
      if (!validColumnList(sourceColumns)) return undefined;
      change.sourceColumns = sourceColumns;
    }
    out[i] = change;
  }
  return sourceTimeMs === undefined ? { sourceId, position, changes: out } : { sourceId, position, changes: out, sourceTimeMs: sourceTimeMs as number };
}

/**
 * Validates the shape of a source transaction (not yet against table metadata) and normalizes versions.
 * Throws InvalidChangeError naming the change index and field.
 */
export function parseSourceTransaction(input: unknown): SourceTransaction {
  const fast = fastParse(input);
  if (fast) return fast;
  return parseWithSchemas(input);
}

function parseWithSchemas(input: unknown): SourceTransaction {
  const top = txnSchema.safeParse(input);
  if (!top.success) {
    const issue = top.error.issues[0]!;
    throw new InvalidChangeError(`invalid transaction: ${describePath(issue.path)}: ${issue.message}`, undefined, describePath(issue.path));
  }
  const changes: RowChange[] = top.data.changes.map((raw, index) => {
    const parsed = changeSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const field = describePath(issue.path);
      throw new InvalidChangeError(`change #${index}: ${field}: ${issue.message}`, index, field);
    }
    const c = parsed.data;
    let version: bigint;
    try {
      version = parseVersion(c.version);
    } catch (err) {
      if (err instanceof VersionFormatError) {
        throw new InvalidChangeError(`change #${index} (${c.schema}.${c.table}): version: ${err.message}`, index, 'version');
      }
      throw err;
    }
    checkImages(index, c.op, c.before, c.after, `${c.schema}.${c.table}`);
    const change: RowChange = { schema: c.schema, table: c.table, op: c.op, version };
    if (c.before) change.before = c.before;
    if (c.after) change.after = c.after;
    if (c.sourceColumns) change.sourceColumns = c.sourceColumns;
    return change;
  });
  const txn: SourceTransaction = { sourceId: top.data.sourceId, position: top.data.position, changes };
  if (top.data.sourceTimeMs !== undefined) txn.sourceTimeMs = top.data.sourceTimeMs;
  return txn;
}

function checkImages(index: number, op: Op, before: Row | undefined, after: Row | undefined, name: string): void {
  const fail = (field: string, msg: string) => {
    throw new InvalidChangeError(`change #${index} (${name}, ${op}): ${field}: ${msg}`, index, field);
  };
  switch (op) {
    case 'insert':
      if (!after) fail('after', 'an insert needs an after image');
      if (before) fail('before', 'an insert has no before image');
      break;
    case 'update':
      if (!after) fail('after', 'an update needs an after image');
      break;
    case 'delete':
      if (!before) fail('before', 'a delete needs a before image (at least the primary key)');
      if (after) fail('after', 'a delete has no after image');
      break;
  }
}
