// What the state check reports, and its two renderings: a human table and JSON (versions as strings).
import { clip, reportToJson, shown } from './format.ts';

/**
 * A key's state on one node. `values` holds the exact text of every column but the key and version
 * (large values longer than 4 KiB as `sha256:<digest> (<n> bytes)`); `tombstone` is set when an
 * equal or newer tombstone sits beside a row the node still shows. `chunk` is a whole key range of an
 * `unexplained_chunk` finding: its row count and checksum on that node.
 */
export type NodeState =
  | { kind: 'row'; version: bigint; values: Record<string, string | null>; tombstone?: bigint }
  | { kind: 'tombstone'; version: bigint }
  | { kind: 'absent' }
  | { kind: 'chunk'; rows: number; checksum: string; /** A range has no version. */ version?: never };

export const FINDING_CLASSES = [
  'missing_row',
  'extra_row',
  'value_mismatch',
  'version_mismatch',
  'tombstone_vs_row',
  'tombstone_mismatch',
  'row_under_tombstone',
  'unexplained_chunk',
] as const;

/**
 * Seen from the reference node (the first): `missing_row` the other node lacks the reference's row,
 * `extra_row` it has a row the reference lacks, `value_mismatch` same version with other values,
 * `version_mismatch` rows of different versions, `tombstone_vs_row` a row on one side and a
 * tombstone on the other, `tombstone_mismatch` tombstones of different versions (or one missing),
 * `row_under_tombstone` a node shows a row although an equal or newer tombstone says it is deleted
 * (whatever the other node holds), `unexplained_chunk` a key range whose checksums differ (twice)
 * while its rows compare equal: never forgiven, the check cannot vouch for it.
 */
export type FindingClass = (typeof FINDING_CLASSES)[number];

export interface StateFinding {
  /** `schema.table` */
  table: string;
  /** Primary-key column → canonical text of its value. */
  key: Record<string, string | null>;
  /** Node indexes compared: the reference (0) and another node. */
  nodes: [number, number];
  states: [NodeState, NodeState];
  class: FindingClass;
  /** Index of the node whose state LWW says should win; null when both hold the same version (LWW cannot tell). */
  winner: number | null;
}

export interface TableStateReport {
  /** `schema.table` */
  table: string;
  /** `metaSchema.tombstoneTable` */
  tombstoneTable: string;
  /** Key-range chunks of the table compared by checksum, and how many of them differed. */
  chunks: number;
  chunksDiffering: number;
  /** The same for the tombstone table. */
  tombstoneChunks: number;
  tombstoneChunksDiffering: number;
  /** Rows read from the servers to compare differing chunks and look up keys (0 when all checksums agree). */
  rowsFetched: number;
  /** Findings by class; counts every finding, also those beyond `findings`' limit. */
  counts: Record<FindingClass, number>;
  findings: StateFinding[];
  /** True when more findings existed than `maxFindings` kept. */
  findingsTruncated: boolean;
  /** Differences of structure: table missing on a node, columns not on every node. Each makes the check fail. */
  schemaDifferences: string[];
  /** Information that does not fail the check (e.g. a column type that differs but compares equal). */
  notes: string[];
}

export interface StateReport {
  /** The nodes compared, passwords redacted; node 0 is the reference. */
  nodes: string[];
  tables: TableStateReport[];
  /** No findings and no schema differences in any table. */
  identical: boolean;
  totals: { chunks: number; chunksDiffering: number; rowsFetched: number; findings: number };
  durationMs: number;
}

export function emptyCounts(): Record<FindingClass, number> {
  return Object.fromEntries(FINDING_CLASSES.map((c) => [c, 0])) as Record<FindingClass, number>;
}

export function findingCount(t: TableStateReport): number {
  return FINDING_CLASSES.reduce((sum, c) => sum + t.counts[c], 0);
}

/** A, B, C... for node 0, 1, 2... */
export function nodeLabel(index: number): string {
  return index < 26 ? String.fromCharCode(65 + index) : `N${index}`;
}

/** The report as JSON: bigint versions become decimal strings. */
export function stateReportToJson(report: StateReport, indent = 2): string {
  return reportToJson(report, indent);
}


function describeState(state: NodeState, onlyColumns?: readonly string[]): string {
  if (state.kind === 'absent') return 'absent';
  if (state.kind === 'tombstone') return `tombstone @${state.version}`;
  if (state.kind === 'chunk') return `${state.rows} row(s), checksum ${state.checksum}`;
  const columns = onlyColumns ?? Object.keys(state.values);
  const values = columns.map((c) => `${c}=${shown(state.values[c] ?? null)}`).join(', ');
  const under = state.tombstone === undefined ? '' : ` under tombstone @${state.tombstone}`;
  return clip(`row @${state.version}${under}${values ? ` ${values}` : ''}`);
}

/** Columns whose values differ between two rows; undefined unless both states are rows. */
function differingColumns(a: NodeState, b: NodeState): string[] | undefined {
  if (a.kind !== 'row' || b.kind !== 'row') return undefined;
  const columns = [...new Set([...Object.keys(a.values), ...Object.keys(b.values)])];
  return columns.filter((c) => a.values[c] !== b.values[c]);
}

function winnerText(f: StateFinding): string {
  if (f.winner !== null) return nodeLabel(f.winner);
  if (f.class === 'row_under_tombstone') return 'the tombstone (delete the row)';
  return f.class === 'unexplained_chunk' ? 'unknown' : 'none (same version)';
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => [...(r[i] ?? '')].length)));
  return rows.map((r) => r.map((cell, i) => cell + ' '.repeat(widths[i]! - [...cell].length)).join('  ').trimEnd()).join('\n');
}

/** The human report: nodes, a summary line per table, then every finding kept. */
export function formatStateReport(report: StateReport): string {
  const out: string[] = [];
  out.push(`State check of ${report.nodes.length} nodes (reference: A)`);
  for (const [i, url] of report.nodes.entries()) out.push(`  ${nodeLabel(i)} = ${url}`);
  out.push('');
  out.push(
    table([
      ['table', 'chunks', 'differing', 'tombstone chunks', 'differing', 'rows fetched', 'findings'],
      ...report.tables.map((t) => [
        t.table,
        String(t.chunks),
        String(t.chunksDiffering),
        String(t.tombstoneChunks),
        String(t.tombstoneChunksDiffering),
        String(t.rowsFetched),
        t.schemaDifferences.length > 0 ? `${findingCount(t)} + schema` : String(findingCount(t)),
      ]),
    ]),
  );
  for (const t of report.tables) {
    const n = findingCount(t);
    if (n === 0 && t.schemaDifferences.length === 0 && t.notes.length === 0) continue;
    out.push('');
    out.push(`${t.table}:`);
    for (const s of t.schemaDifferences) out.push(`  schema: ${s}`);
    for (const s of t.notes) out.push(`  note: ${s}`);
    if (n === 0) continue;
    const byClass = Object.entries(t.counts)
      .filter(([, c]) => c > 0)
      .map(([k, c]) => `${k} ${c}`)
      .join(', ');
    out.push(`  ${n} finding(s): ${byClass}${t.findingsTruncated ? ` (first ${t.findings.length} shown)` : ''}`);
    const rows = [['key', 'node A', 'other node', 'class', 'LWW winner']];
    for (const f of t.findings) {
      const only = differingColumns(f.states[0], f.states[1]);
      rows.push([
        clip(
          Object.entries(f.key)
            .map(([k, v]) => `${k}=${shown(v)}`)
            .join(', '),
          40,
        ),
        describeState(f.states[0], only),
        `${nodeLabel(f.nodes[1])}: ${describeState(f.states[1], only)}`,
        f.class,
        winnerText(f),
      ]);
    }
    out.push(
      table(rows)
        .split('\n')
        .map((l) => `  ${l}`)
        .join('\n'),
    );
  }
  out.push('');
  const tt = report.totals;
  out.push(
    report.identical
      ? `identical: ${report.tables.length} table(s), ${tt.chunks} chunk(s), ${(report.durationMs / 1000).toFixed(1)} s`
      : `DIFFERENT: ${tt.findings} finding(s) in ${report.tables.filter((t) => findingCount(t) > 0 || t.schemaDifferences.length > 0).length} table(s); ` +
          `${tt.chunksDiffering} of ${tt.chunks} chunk(s) differed, ${tt.rowsFetched} row(s) fetched, ${(report.durationMs / 1000).toFixed(1)} s`,
  );
  return out.join('\n');
}
