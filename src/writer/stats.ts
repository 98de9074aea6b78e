// Counters the sink keeps per table and overall. A batch's counts are merged only after it commits,
// so retried batches are not counted twice.

export interface TableCounters {
  inserted: number;
  updated: number;
  /** Upserts not applied because the stored row had the same or a newer version (LWW conflicts). */
  skippedStale: number;
  deleted: number;
  tombstoned: number;
  /** Upserts not applied because a tombstone with the same or a newer version exists. */
  skippedByTombstone: number;
  /** Upserts that clashed on a secondary UNIQUE key with another row; written to the conflict log. */
  uniqueClashes: number;
  /**
   * Child rows that went with a parent deleted on another node (ON DELETE CASCADE): an incoming row
   * whose parent is gone here, or a row here that the incoming parent delete cascades; logged.
   */
  foreignKeyCascades: number;
  /** Upserts replaced by a later, newer change of the same key within one batch (not conflicts). */
  coalesced: number;
  /** Bypass mode: rows written by REPLACE INTO. */
  replaced: number;
  /** Failpoints: changes dropped or mutated before writing. */
  dropped: number;
  mutated: number;
}

export interface SinkStats {
  transactions: number;
  batches: number;
  retries: number;
  rows: number;
  tables: Record<string, TableCounters>;
  totals: TableCounters;
}

export function emptyCounters(): TableCounters {
  return {
    inserted: 0,
    updated: 0,
    skippedStale: 0,
    coalesced: 0,
    deleted: 0,
    tombstoned: 0,
    skippedByTombstone: 0,
    uniqueClashes: 0,
    foreignKeyCascades: 0,
    replaced: 0,
    dropped: 0,
    mutated: 0,
  };
}

export function emptyStats(): SinkStats {
  return { transactions: 0, batches: 0, retries: 0, rows: 0, tables: {}, totals: emptyCounters() };
}

export function addCounters(into: TableCounters, from: Partial<TableCounters>): void {
  for (const [k, v] of Object.entries(from) as Array<[keyof TableCounters, number]>) into[k] += v;
}

/** Merges a committed batch's per-table counts into the running stats. */
export function mergeBatch(stats: SinkStats, batch: Map<string, TableCounters>): void {
  for (const [table, counters] of batch) {
    stats.tables[table] ??= emptyCounters();
    addCounters(stats.tables[table], counters);
    addCounters(stats.totals, counters);
  }
}

/** Parses `Records: N  Duplicates: D  Warnings: W` of a multi-row INSERT ... ON DUPLICATE KEY UPDATE. */
export function upsertOutcome(rows: number, affectedRows: number, info: string | undefined): { inserted: number; updated: number; skipped: number } {
  const m = info ? /Duplicates:\s*(\d+)/.exec(info) : null;
  if (m) {
    const updated = Number(m[1]);
    const inserted = affectedRows - 2 * updated;
    return { inserted, updated, skipped: rows - inserted - updated };
  }
  if (rows !== 1) throw new Error(`multi-row upsert returned no Records/Duplicates info (affected ${affectedRows})`);
  // A single-row statement has no info string: 1 = inserted, 2 = updated, 0 = unchanged.
  if (affectedRows === 1) return { inserted: 1, updated: 0, skipped: 0 };
  if (affectedRows === 2) return { inserted: 0, updated: 1, skipped: 0 };
  return { inserted: 0, updated: 0, skipped: 1 };
}

/** The sum of several stats (e.g. every run of a restarted stream). */
export function sumStats(list: readonly SinkStats[]): SinkStats {
  const out = emptyStats();
  for (const s of list) {
    out.transactions += s.transactions;
    out.batches += s.batches;
    out.retries += s.retries;
    out.rows += s.rows;
    mergeBatch(out, new Map(Object.entries(s.tables)));
  }
  return out;
}
