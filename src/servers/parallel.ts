// Starting several servers at once: all or nothing.
import type { RunningServer } from './types.ts';

/** Starts `count` servers concurrently; if any fails, destroys the others and throws its error. */
export async function startInParallel<T extends RunningServer>(
  count: number,
  startOne: (index: number) => Promise<T>,
): Promise<T[]> {
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`server count must be a positive integer, got ${count}`);
  const results = await Promise.allSettled(Array.from({ length: count }, (_, i) => startOne(i)));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  const started = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  if (failed) {
    await Promise.allSettled(started.map((s) => s.destroy()));
    throw failed.reason;
  }
  return started;
}
