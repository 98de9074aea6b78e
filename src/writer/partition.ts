// The partitioner for parallel apply (TiCDC's conflict-detector rule): a row goes to a worker chosen
// by hashes of every unique key of the row — primary and secondary, before and after images — and
// rows that share any key hash (directly or through a chain of rows) are kept in one worker, in
// source order. Pure: key values in, worker numbers out; wiring into a direction lives elsewhere.
//
// Why parallel apply converges under LWW:
// - Per key, the outcome does not depend on order. The apply statement keeps the row (or tombstone)
//   with the highest version and refuses older ones, so any interleaving of changes to one primary
//   key ends at the same state; ordering them is needed only for speed, not for correctness.
// - What LWW cannot order by itself is a clash between different primary keys on a secondary
//   UNIQUE key (a swap of unique values, a delete freeing a value another row then takes): applied
//   out of order, the second row would hit a duplicate-key error or overwrite the wrong row. Every
//   unique key's hash is a partition key, so such rows land in one worker and keep source order —
//   exactly the order in which the source's own unique index accepted them.
// - Before images count too: a row leaving a unique value and a row taking it share that value's
//   hash, so the hand-over stays ordered.
// - Each worker checkpoints its own position; the direction resumes from the lowest of them. A
//   worker that was ahead replays changes it already applied: a replayed change carries the same
//   version the target already has (or an older one), so the version guard refuses it — harmless.
// - Hashes may collide; a collision only merges groups (less parallelism), never splits one. For
//   the same reason text is folded coarser than any collation compares it (case, accents, trailing
//   spaces), so keys the server holds equal always hash equal.
// Consecutive windows: a group's worker is chosen from this window only, so the caller starts a
// window's rows only after every row of the previous window that shares a key has committed (the
// simplest form: a barrier between windows).

/** A row as the partitioner sees it: its table, its unique keys (column lists) and its images. */
export interface PartitionRow {
  /** `schema.table` */
  table: string;
  /** Every unique key of the table, primary key first, as column-name lists. */
  uniqueKeys: readonly (readonly string[])[];
  before?: Readonly<Record<string, unknown>> | null;
  after?: Readonly<Record<string, unknown>> | null;
}

export interface Partition {
  /** The worker of each input row, by input index. */
  workerOf: number[];
  /** Input indexes per worker, in source order. */
  rowsOf: number[][];
}

/** Folds text at least as coarsely as any collation compares it: case, accents, trailing spaces. */
function foldText(s: string): string {
  // Printable ASCII (digits of an integer key, most names) has no marks and no compatibility forms.
  if (ASCII.test(s)) return s.toLowerCase().replace(/ +$/, '');
  return s.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase().replace(/ +$/, '');
}

const ASCII = /^[ -~]*$/;

function encodeValue(v: unknown): string {
  if (typeof v === 'string') return `s${foldText(v)}`;
  if (Buffer.isBuffer(v)) return `b${v.toString('hex')}`;
  if (typeof v === 'bigint' || typeof v === 'number') return `n${v.toString()}`;
  if (v instanceof Date) return `d${v.getTime()}`;
  return `j${JSON.stringify(v)}`;
}

/** 32-bit FNV-1a. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * Hashes of every unique key of the row's images. A key with a NULL column is left out: a UNIQUE
 * index holds any number of NULLs, so such a key clashes with nothing.
 */
export function keyHashes(row: PartitionRow): number[] {
  const out = new Set<number>();
  for (const image of [row.before, row.after]) {
    if (!image) continue;
    row.uniqueKeys.forEach((columns, k) => {
      const parts: string[] = [];
      for (const c of columns) {
        const v = image[c];
        if (v === null || v === undefined) return;
        parts.push(encodeValue(v));
      }
      out.add(fnv1a(`${row.table}\u0000${k}\u0000${parts.join('\u0000')}`));
    });
  }
  return [...out];
}

/**
 * Splits rows (in source order) over `workers` workers: rows sharing a key hash, directly or
 * through other rows, form one group and go to one worker in source order. A group's worker comes
 * from its smallest key hash, so a key alone on its rows always lands on the same worker.
 */
export function partitionRows(rows: readonly PartitionRow[], workers: number): Partition {
  return partitionByHashes(rows.map(keyHashes), workers);
}

/** partitionRows over key hashes computed earlier (keyHashes, plus any the caller adds). */
export function partitionByHashes(hashes: readonly (readonly number[])[], workers: number): Partition {
  if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`workers must be a positive integer (got ${workers})`);
  const rows = hashes;
  const parent = rows.map((_, i) => i);
  const find = (i: number): number => {
    while (parent[i] !== i) {
      parent[i] = parent[parent[i]!]!;
      i = parent[i]!;
    }
    return i;
  };
  const firstWithHash = new Map<number, number>();
  hashes.forEach((hs, i) => {
    for (const h of hs) {
      const j = firstWithHash.get(h);
      if (j === undefined) firstWithHash.set(h, i);
      else parent[find(i)] = find(j);
    }
  });
  const groupHash = new Map<number, number>();
  hashes.forEach((hs, i) => {
    const g = find(i);
    // A row without any non-NULL unique key cannot clash: its own index stands in for a hash.
    const own = hs.length > 0 ? Math.min(...hs) : fnv1a(`row\u0000${i}`);
    groupHash.set(g, Math.min(groupHash.get(g) ?? own, own));
  });
  const rowsOf: number[][] = Array.from({ length: workers }, () => []);
  const workerOf = rows.map((_, i) => {
    const w = groupHash.get(find(i))! % workers;
    rowsOf[w]!.push(i);
    return w;
  });
  return { workerOf, rowsOf };
}
