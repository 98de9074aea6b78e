// GC inside `replicate`: one pass (collector.ts) every interval, never two at once, and a running
// total for status and metrics. A pass that fails is logged and retried at the next interval; a
// paused horizon is reported, not an error.
import type { Logger } from '../writer/options.ts';
import { collectGarbage, type GcOptions, type GcReport, validateGcOptions } from './collector.ts';

export const DEFAULT_GC_INTERVAL_MS = 60_000;

export interface GcScheduleOptions extends Omit<GcOptions, 'dryRun' | 'logger'> {
  /** Time between passes (default one minute). */
  intervalMs?: number;
}

export interface GcStatus {
  intervalMs: number;
  marginMs: number;
  runs: number;
  /** Totals over every pass of this process. */
  collected: number;
  conflictsRemoved: number;
  progressRowsRemoved: number;
  /** Totals per node name. */
  byNode: Record<string, { collected: number; conflictsRemoved: number }>;
  lastError?: string;
  /** The last pass's report (horizon per node and direction, tombstones per table). */
  last?: GcReport;
}

export class GcScheduler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private stopped = false;
  private chain: Promise<unknown> = Promise.resolve();
  readonly status: GcStatus;

  constructor(
    private readonly options: GcScheduleOptions,
    private readonly log: Logger,
  ) {
    validateGcOptions(options);
    this.status = { intervalMs: options.intervalMs ?? DEFAULT_GC_INTERVAL_MS, marginMs: options.marginMs ?? 600_000, runs: 0, collected: 0, conflictsRemoved: 0, progressRowsRemoved: 0, byNode: {} };
  }

  start(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.runOnce().finally(() => {
        this.running = null;
        this.schedule();
      });
    }, this.status.intervalMs);
    this.timer.unref?.();
  }

  /** One pass now (operators' tests, status); waits for a pass already running, never overlaps it. */
  runOnce(): Promise<GcReport | undefined> {
    const next = this.chain.then(() => this.pass());
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async pass(): Promise<GcReport | undefined> {
    try {
      const report = await collectGarbage({ ...this.options, logger: this.log });
      this.status.runs++;
      this.status.last = report;
      for (const n of report.nodes) {
        this.status.collected += n.collected;
        this.status.conflictsRemoved += n.conflictsRemoved;
        this.status.progressRowsRemoved += n.progressRowsRemoved;
        const mine = this.status.byNode[n.name] ?? { collected: 0, conflictsRemoved: 0 };
        this.status.byNode[n.name] = mine;
        mine.collected += n.collected;
        mine.conflictsRemoved += n.conflictsRemoved;
      }
      delete this.status.lastError;
      const collected = report.nodes.reduce((s, n) => s + n.collected, 0);
      if (report.paused.length > 0) this.log.info('gc: paused, tombstones kept', { reasons: report.paused });
      else if (collected > 0) this.log.info(`gc: removed ${collected} tombstone(s)`, { horizons: report.nodes.map((n) => ({ node: n.name, horizon: n.horizonTime, heldBy: n.heldBy })) });
      return report;
    } catch (err) {
      this.status.lastError = err instanceof Error ? err.message : String(err);
      this.log.warn(`gc: pass failed, retrying in ${this.status.intervalMs} ms: ${this.status.lastError}`);
      return undefined;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
