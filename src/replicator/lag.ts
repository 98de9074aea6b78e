// Replication lag samples: the time from a write on the source (the physical part of its version)
// to the commit of the target transaction that applied it. Bounded memory: a ring of recent samples.
import { physicalMicrosOf } from '../model/version.ts';

export class LagRecorder {
  private readonly samples: number[] = [];
  private next = 0;
  last: number | undefined;
  /** Called with every sample in ms (the metrics endpoint feeds its lag histogram from it). */
  onSample: ((ms: number) => void) | undefined;

  constructor(private readonly capacity = 20_000) {}

  record(version: bigint, committedAtMs: number): void {
    if (version === 0n) return;
    const ms = committedAtMs - Number(physicalMicrosOf(version)) / 1000;
    this.last = ms;
    this.onSample?.(ms);
    if (this.samples.length < this.capacity) this.samples.push(ms);
    else {
      this.samples[this.next] = ms;
      this.next = (this.next + 1) % this.capacity;
    }
  }

  get count(): number {
    return this.samples.length;
  }

  /** The q-quantile (0..1) of the recorded lags in ms, or undefined with no samples. */
  quantile(q: number): number | undefined {
    return quantile(this.samples, q);
  }

  reset(): void {
    this.samples.length = 0;
    this.next = 0;
    this.last = undefined;
  }
}

/** The q-quantile (0..1) of `values` (nearest rank), or undefined with none. */
export function quantile(values: readonly number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
