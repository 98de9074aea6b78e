// LWW's accepted cost under clock skew, counted: a write that began after another write of the same
// key had committed (real time, the harness's own clock) still gets the lower version when its node's
// clock is behind and the other write has not reached that node yet, and then loses everywhere. That
// is last-write-wins by version, not by real time; the run reports how often it happened.
//
// The writers' observations give each version's author and times: every transaction reads back the
// keys it may have changed just before COMMIT (session-gen.ts), so the author of a version read it
// first (before its own COMMIT), and every other transaction saw it only after that COMMIT. Versions
// no writer made (the initial rows, the sink's own follow-up writes) have no author among them: the
// first transaction to read one would pass for it, so they are left out.
import { physicalMicrosOf } from '../model/version.ts';

/** The harness clock for these times: ms since the epoch with sub-millisecond resolution, monotonic within the run. */
export const harnessClockMs = (): number => performance.timeOrigin + performance.now();

/** A write as the writers observed it, with the harness clock's times of its transaction (ms). */
export interface TimedWrite {
  table: string;
  id: number | string;
  version: bigint;
  /** When its transaction sent BEGIN. */
  begunAt?: number;
  /** When its transaction's read-back returned (before COMMIT). */
  readAt?: number;
  /** When COMMIT answered OK; undefined when the outcome was decided later by the marker. */
  committedAt?: number;
}

export interface SkewCost {
  /** Versions written by the writers (each counted once, by its author). */
  authored: number;
  /** Of those, the ones that began after a newer-versioned write of the key had committed: lost to an earlier write. */
  lostToEarlier: number;
  /** Keys with at least one such write. */
  keys: number;
}

interface Authored {
  version: bigint;
  begunAt: number;
  committedAt: number | undefined;
}

/** Versions that no writer made. */
export interface NotAuthored {
  /** Versions with a physical part below this (µs) predate the run: the initial rows. */
  physicalBeforeUs?: bigint;
  /** Versions the sinks wrote as their own (follow-ups). */
  versions?: ReadonlySet<bigint>;
}

/** Counts the writes that were later in real time than a write of the same key with a higher version. */
export function skewCost(writes: Iterable<TimedWrite>, notAuthored: NotAuthored = {}): SkewCost {
  // Per key and version, the observation read back first is the author's.
  const authors = new Map<string, Map<bigint, TimedWrite>>();
  for (const w of writes) {
    if (w.readAt === undefined || w.begunAt === undefined) continue;
    if (notAuthored.versions?.has(w.version)) continue;
    if (notAuthored.physicalBeforeUs !== undefined && physicalMicrosOf(w.version) < notAuthored.physicalBeforeUs) continue;
    const key = `${w.table}/${w.id}`;
    const byVersion = authors.get(key) ?? new Map<bigint, TimedWrite>();
    authors.set(key, byVersion);
    const seen = byVersion.get(w.version);
    if (!seen || w.readAt < seen.readAt!) byVersion.set(w.version, w);
  }
  const out: SkewCost = { authored: 0, lostToEarlier: 0, keys: 0 };
  for (const byVersion of authors.values()) {
    const list: Authored[] = [...byVersion.values()].map((w) => ({ version: w.version, begunAt: w.begunAt!, committedAt: w.committedAt }));
    out.authored += list.length;
    // Known commit times in order, with the highest version committed by each point.
    const committed = list.filter((a) => a.committedAt !== undefined).sort((a, b) => a.committedAt! - b.committedAt!);
    const highest: bigint[] = [];
    for (const a of committed) highest.push(highest.length === 0 || a.version > highest.at(-1)! ? a.version : highest.at(-1)!);
    let lost = 0;
    for (const x of list) {
      const before = committedBefore(committed, x.begunAt);
      if (before > 0 && highest[before - 1]! > x.version) lost++;
    }
    out.lostToEarlier += lost;
    if (lost > 0) out.keys++;
  }
  return out;
}

/** How many of the (ordered) commits answered strictly before `at`. */
function committedBefore(committed: readonly Authored[], at: number): number {
  let lo = 0;
  let hi = committed.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (committed[mid]!.committedAt! < at) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
