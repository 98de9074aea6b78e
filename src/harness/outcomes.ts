// Commits with an unknown outcome (the connection was lost, or COMMIT failed, before its reply came
// back) are decided by the transaction's own marker: every writer transaction inserts a row with a
// unique id into the node's writer_markers table (never replicated) just before COMMIT. Once the node
// answers again, a locking read of the id decides: present, the transaction committed and its writes
// join the acknowledged ones; absent, it rolled back and they do not. A transaction still undecided on
// the server (its session not yet gone) holds the marker's lock, so the read waits or times out and
// the outcome stays pending; it is retried, never dropped, and whatever is still pending when the
// bound runs out is reported as unresolved, which fails the run.
import { randomUUID } from 'node:crypto';
import type { RowDataPacket } from 'mysql2/promise';
import { connect } from '../db/connection.ts';
import { SET_ISOLATION_SQL } from '../sql/generated.ts';
import { readWriterMarkersSql, SHORT_LOCK_WAIT_SQL } from '../sql/workload.ts';

/** A transaction whose COMMIT was sent and whose outcome the writer does not know. */
export interface InDoubt<W> {
  marker: string;
  node: string;
  /** What the transaction wrote, read inside it before COMMIT. */
  writes: W[];
  /** Why the outcome is unknown (the COMMIT's error). */
  error: string;
  /** ms since the epoch when COMMIT failed. */
  at: number;
}

/** An outcome the writers could not decide in time: which marker, what COMMIT said, what the last look at the marker said. */
export interface UnresolvedOutcome {
  node: string;
  marker: string;
  writes: number;
  error: string;
  lastCheck: string;
}

/** An unknown outcome the marker decided. */
export interface DecidedOutcome {
  node: string;
  marker: string;
  committed: boolean;
  writes: number;
  error: string;
}

export interface OutcomeTally {
  /** Unknown outcomes whose marker was found: committed, their writes are in the expected state. */
  committed: number;
  /** Unknown outcomes whose marker was absent: rolled back. */
  notCommitted: number;
  unresolved: UnresolvedOutcome[];
  /** Each decided one, in the order decided. */
  decided: DecidedOutcome[];
}

export const newMarker = (): string => randomUUID();

export function emptyTally(): OutcomeTally {
  return { committed: 0, notCommitted: 0, unresolved: [], decided: [] };
}

export function addTallies(tallies: readonly OutcomeTally[]): OutcomeTally {
  const out = emptyTally();
  for (const t of tallies) {
    out.committed += t.committed;
    out.notCommitted += t.notCommitted;
    out.unresolved.push(...t.unresolved);
    out.decided.push(...t.decided);
  }
  return out;
}

/**
 * Decides in-doubt transactions by the markers found present: the committed ones' writes, the
 * number rolled back. Pure; `present` must be the answer for every marker of `pending`.
 */
export function settle<W>(pending: readonly InDoubt<W>[], present: ReadonlySet<string>): { committed: InDoubt<W>[]; notCommitted: InDoubt<W>[] } {
  const committed: InDoubt<W>[] = [];
  const notCommitted: InDoubt<W>[] = [];
  for (const p of pending) (present.has(p.marker) ? committed : notCommitted).push(p);
  return { committed, notCommitted };
}

/** The in-doubt transactions of one writer thread and what became of them. */
export class OutcomeLedger<W> {
  private pending: InDoubt<W>[] = [];
  private lastCheck = 'not checked yet';
  readonly tally: OutcomeTally = emptyTally();

  constructor(private readonly onCommitted: (writes: W[]) => void) {}

  add(doubt: InDoubt<W>): void {
    this.pending.push(doubt);
  }

  get size(): number {
    return this.pending.length;
  }

  /** Records the markers' answer (see `settle`). */
  decide(present: ReadonlySet<string>): void {
    const { committed, notCommitted } = settle(this.pending, present);
    for (const c of committed) this.onCommitted(c.writes);
    for (const p of this.pending) this.tally.decided.push({ node: p.node, marker: p.marker, committed: present.has(p.marker), writes: p.writes.length, error: p.error });
    this.tally.committed += committed.length;
    this.tally.notCommitted += notCommitted.length;
    this.pending = [];
  }

  /** Records why a look at the markers failed; the outcomes stay pending. */
  failedCheck(reason: string): void {
    this.lastCheck = reason;
  }

  /** Gives up: every outcome still pending is unresolved. */
  close(): void {
    for (const p of this.pending) this.tally.unresolved.push({ node: p.node, marker: p.marker, writes: p.writes.length, error: p.error, lastCheck: this.lastCheck });
    this.pending = [];
  }

  markers(): string[] {
    return this.pending.map((p) => p.marker);
  }
}

/** One look at the markers on the node (its own short-lived connection); false when the node did not answer or a marker's transaction is still undecided. */
export async function checkMarkers<W>(url: string, schema: string, ledger: OutcomeLedger<W>): Promise<boolean> {
  const markers = ledger.markers();
  if (markers.length === 0) return true;
  try {
    const conn = await connect(url, { connectTimeoutMs: 2000, init: [SET_ISOLATION_SQL['read-committed'], SHORT_LOCK_WAIT_SQL] });
    try {
      const present = new Set<string>();
      for (let i = 0; i < markers.length; i += 100) {
        const chunk = markers.slice(i, i + 100);
        const [rows] = await conn.query<RowDataPacket[]>(readWriterMarkersSql(schema, chunk.length), chunk);
        for (const r of rows) present.add(String(r.id));
      }
      ledger.decide(present);
      return true;
    } finally {
      await conn.end().catch(() => conn.destroy());
    }
  } catch (err) {
    const e = err as { code?: string; message?: string };
    ledger.failedCheck(`${e.code ?? 'error'}: ${e.message ?? String(err)}`);
    return false;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Looks at the markers until every outcome is decided or `boundMs` has passed; then what is left is unresolved. */
export async function resolveOutcomes<W>(url: string, schema: string, ledger: OutcomeLedger<W>, boundMs: number, stopped: () => boolean = () => false): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (ledger.size > 0) {
    if (await checkMarkers(url, schema, ledger)) break;
    if (Date.now() >= deadline || stopped()) break;
    await sleep(250);
  }
  ledger.close();
}
