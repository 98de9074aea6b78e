// LWW vs REPLACE: the same seeded workload with the same faults, run twice on fresh servers — once
// with the LWW sink, once with the mysqlSinkBypassLWW failpoint (what a REPLACE INTO sink does) —
// and one side-by-side table of what each did to the data.
import type { Logger } from '../writer/options.ts';
import { type HarnessOptions, type HarnessResult, runHarness } from './harness.ts';

export interface ComparisonRow {
  metric: string;
  lww: string;
  replace: string;
}

export interface Comparison {
  lww: HarnessResult;
  replace: HarnessResult;
  rows: ComparisonRow[];
}

const AUDIT_CLASSES = ['lww_violation', 'lost', 'redundant', 'inconsistent', 'lww_skipped'];

function fmt(n: number | undefined, digits = 0): string {
  return n === undefined || Number.isNaN(n) ? '—' : n.toFixed(digits);
}

export function comparisonRows(lww: HarnessResult, replace: HarnessResult): ComparisonRow[] {
  const both = (metric: string, f: (r: HarnessResult) => string): ComparisonRow => ({ metric, lww: f(lww), replace: f(replace) });
  const rows = [
    both('converged (identical, as the writers expect)', (r) => (r.converged && r.expectationMismatches.length === 0 && r.unknownOutcomes.unresolved.length === 0 ? 'yes' : 'NO')),
    both('transactions (both nodes)', (r) => fmt(r.transactions)),
    both('acknowledged row writes', (r) => fmt(r.operations)),
    both('rows applied by the replicator', (r) => fmt(r.replication.applied)),
    both('conflicts seen by the sink', (r) => (r.mode === 'replace' ? 'not detected' : fmt(r.replication.conflicts))),
    both('stale changes skipped', (r) => (r.mode === 'replace' ? '0 (overwrites)' : fmt(r.replication.staleSkipped + r.replication.skippedByTombstone))),
    both('diverged keys (state check)', (r) => fmt(r.divergedKeys)),
    both('keys differing from the expected state', (r) => fmt(new Set(r.expectationMismatches.map((m) => m.key)).size)),
    both('unknown commit outcomes: committed / not / unresolved', (r) => `${r.unknownOutcomes.committed} / ${r.unknownOutcomes.notCommitted} / ${r.unknownOutcomes.unresolved.length}`),
    both('writes later in real time lost to an earlier one (clock skew)', (r) => (r.mode === 'replace' ? 'n/a (arrival order decides)' : fmt(r.skewCost.lostToEarlier))),
  ];
  for (const c of AUDIT_CLASSES) {
    rows.push(both(`audit: ${c}`, (r) => (r.audit ? fmt(r.audit.counts[c] ?? 0) : '—')));
  }
  rows.push(
    both('throughput (transactions/s)', (r) => fmt(r.throughput)),
    both('replication lag at the end (ms)', (r) => fmt(r.replication.lagMs)),
    both('faults injected', (r) => `${r.faultsInjected}`),
  );
  return rows;
}

export async function compareModes(options: Omit<HarnessOptions, 'mode' | 'servers'>, logger?: Logger): Promise<Comparison> {
  const lww = await runHarness({ ...options, mode: 'lww', logger: logger ?? options.logger });
  const replace = await runHarness({ ...options, mode: 'replace', logger: logger ?? options.logger });
  return { lww, replace, rows: comparisonRows(lww, replace) };
}

/** Plain-text side-by-side table. */
export function formatComparison(rows: readonly ComparisonRow[]): string {
  const w0 = Math.max(...rows.map((r) => r.metric.length), 6);
  const w1 = Math.max(...rows.map((r) => r.lww.length), 3);
  const w2 = Math.max(...rows.map((r) => r.replace.length), 7);
  const line = (a: string, b: string, c: string) => `${a.padEnd(w0)} | ${b.padStart(w1)} | ${c.padStart(w2)}`;
  return [line('', 'LWW', 'REPLACE'), `${'-'.repeat(w0)}-+-${'-'.repeat(w1)}-+-${'-'.repeat(w2)}`, ...rows.map((r) => line(r.metric, r.lww, r.replace))].join('\n');
}

/** The same table as Markdown, with a few diverged keys of the REPLACE run as evidence. */
export function comparisonMarkdown(c: Comparison, title: string): string {
  const lines = [`# ${title}`, '', '| metric | LWW | REPLACE |', '|---|---:|---:|', ...c.rows.map((r) => `| ${r.metric} | ${r.lww} | ${r.replace} |`), ''];
  const sample = c.replace.state.tables.flatMap((t) => t.findings).slice(0, 10);
  if (sample.length > 0) {
    lines.push('## Diverged keys under REPLACE (first 10)', '', '| table | key | class | node A | node B | LWW winner |', '|---|---|---|---|---|---|');
    const st = (s: (typeof sample)[number]['states'][number]) => (s.kind === 'absent' ? 'absent' : `${s.kind} v${s.version}`);
    for (const f of sample) {
      lines.push(`| ${f.table} | ${JSON.stringify(f.key)} | ${f.class} | ${st(f.states[0])} | ${st(f.states[1])} | ${f.winner === null ? '—' : String.fromCharCode(65 + f.winner)} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}
