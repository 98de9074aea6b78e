// Test files in the order that keeps the two workers busy to the end: the longest first (measured
// with `vitest run --reporter=json`, seconds on this 2-core machine), then vitest's own order. A
// fresh clone has no timing cache, and by file size the short harness files ran last: one of them
// alone kept the run going for minutes.
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const LONGEST = [
  'harness-generated', // 218 s
  'harness.test', // 145
  'harness-sessions', // 82
  'replicator-crash', // 63
  'harness-commit-points', // 59
  'replicate-refusals', // 59
  'examples', // 58
  'harness-faults', // 55
  'initial-copy', // 52
  'foreign-keys', // 51
  'replicate.test', // 51
];

function rank(file: TestSpecification): number {
  const i = LONGEST.findIndex((name) => file.moduleId.includes(`/${name}`));
  return i < 0 ? LONGEST.length : i;
}

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    return base.map((f, i) => ({ f, i })).sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i).map(({ f }) => f);
  }
}
