// What the history audit reports, and its two renderings: a human table and JSON (versions as strings).

import { clip, reportToJson, shown } from './format.ts';
import { nodeLabel } from './report.ts';

export const AUDIT_CLASSES = ['lww_violation', 'lost', 'redundant', 'inconsistent'] as const;

/**
 * `lww_violation` a key's version went down on a node; `lost` a local write never reached a peer
 * that never held a newer version; `redundant` a replicated write that matches no local write of
 * any peer; `inconsistent` a replicated write with its origin's version but other values.
 */
export type AuditClass = (typeof AUDIT_CLASSES)[number];

/** One write as a node's binlog shows it (or, for `lost`, the highest version the peer held). */
export interface AuditWrite {
  /** Node index (0 = the first node given). */
  node: number;
  op?: 'upsert' | 'delete';
  /** null: a delete without a tombstone, whose version is unknown. */
  version: bigint | null;
  /** Upserts: canonical text of the columns other than key and version. */
  values?: Record<string, string | null>;
  /** Binlog position after the write's transaction; absent for a version read from the current state. */
  position?: string;
  /** Written by a sink (replicated) rather than by a local application. */
  applied?: boolean;
}

export interface AuditFinding {
  class: AuditClass;
  /** The node where the problem shows: whose version went down, that lacks a write, or that applied a bad write. */
  node: number;
  /** `schema.table` */
  table: string;
  /** Primary-key column → canonical text of its value. */
  key: Record<string, string | null>;
  /** The write at fault: on `node`, except for `lost` where it is the origin's local write. */
  write: AuditWrite;
  /**
   * The other side: the earlier, higher version (`lww_violation`), the origin's local write
   * (`inconsistent`), the peer's highest version if any (`lost`); absent for `redundant`.
   */
  other?: AuditWrite;
  explanation: string;
}

export interface AuditNodeSummary {
  /** Password redacted. */
  url: string;
  nodeId: number;
  /** Window start (exclusive position: the first transaction read is the one after it). */
  from: string;
  /** Window end: the position after the last transaction included. */
  until: string;
  /** Committed transactions read in the window that touched the audited tables. */
  transactions: { local: number; applied: number };
  /** Key writes in them (an update changing the primary key counts as delete + upsert). */
  writes: { local: number; applied: number };
}

export interface AuditReport {
  nodes: AuditNodeSummary[];
  /** `schema.table` names audited. */
  tables: string[];
  /** Set when the window was chosen by time (`--since`); ISO text. */
  since?: string;
  /** Findings by class; counts every finding, also those beyond `findings`' limit. */
  counts: Record<AuditClass, number>;
  /** Local writes a peer skipped because it already held a newer version: correct LWW behaviour. */
  lwwSkipped: number;
  /** Local writes found on every peer with their version. */
  delivered: number;
  /** Replicated writes whose origin predates the origin node's window (not judged). */
  outsideWindow: number;
  /** Replicated deletes without a tombstone (a non-LWW sink): their version is unknown, not judged. */
  unknownVersionDeletes: number;
  /** Rows a sink removed because a newer row took their secondary UNIQUE value (last-write-wins across the key). */
  uniqueClashRemovals: number;
  /** Rows a sink wrote with an ON DELETE SET NULL foreign key cleared because the parent was deleted. */
  foreignKeySetNull: number;
  /** Child rows a sink removed (tombstoned at their own version) because their ON DELETE CASCADE parent was deleted on another node. */
  foreignKeyCascades: number;
  /** Rows changed in a sink's transaction with their version unchanged (a foreign key's cascade on the target): not judged. */
  cascadeSideEffects: number;
  findings: AuditFinding[];
  findingsTruncated: boolean;
  notes: string[];
  /** No finding of any class (lww_skipped is fine). */
  ok: boolean;
  durationMs: number;
}

export function emptyAuditCounts(): Record<AuditClass, number> {
  return Object.fromEntries(AUDIT_CLASSES.map((c) => [c, 0])) as Record<AuditClass, number>;
}

/** The report as JSON: bigint versions become decimal strings. */
export function auditReportToJson(report: AuditReport, indent = 2): string {
  return reportToJson(report, indent);
}


function describeWrite(w: AuditWrite | undefined, onlyColumns?: readonly string[]): string {
  if (!w) return '-';
  const version = w.version === null ? '@?' : `@${w.version}`;
  const where = `${nodeLabel(w.node)}${w.applied === undefined ? '' : w.applied ? ' applied' : ' local'}`;
  if (w.op === undefined) return `${where} held ${version}`;
  if (w.op === 'delete') return `${where} delete ${version}`;
  const columns = onlyColumns ?? Object.keys(w.values ?? {});
  const values = columns.map((c) => `${c}=${shown(w.values?.[c] ?? null)}`).join(', ');
  return clip(`${where} row ${version}${values ? ` ${values}` : ''}`);
}

/** Columns whose values differ between two upserts; undefined otherwise. */
function differingColumns(a: AuditWrite | undefined, b: AuditWrite | undefined): string[] | undefined {
  if (!a?.values || !b?.values) return undefined;
  const columns = [...new Set([...Object.keys(a.values), ...Object.keys(b.values)])];
  const differing = columns.filter((c) => a.values![c] !== b.values![c]);
  return differing.length > 0 ? differing : undefined;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => [...(r[i] ?? '')].length)));
  return rows.map((r) => r.map((cell, i) => cell + ' '.repeat(widths[i]! - [...cell].length)).join('  ').trimEnd()).join('\n');
}

/** The human report: nodes and windows, counts per class, then every finding kept. */
export function formatAuditReport(report: AuditReport): string {
  const out: string[] = [];
  out.push(`History audit of ${report.nodes.length} nodes, ${report.tables.length} table(s)${report.since ? ` since ${report.since}` : ''}`);
  out.push(
    table([
      ['node', 'id', 'from', 'until', 'local txns', 'applied txns', 'local writes', 'applied writes'],
      ...report.nodes.map((n, i) => [
        `${nodeLabel(i)} ${n.url}`,
        String(n.nodeId),
        n.from,
        n.until,
        String(n.transactions.local),
        String(n.transactions.applied),
        String(n.writes.local),
        String(n.writes.applied),
      ]),
    ])
      .split('\n')
      .map((l) => `  ${l}`)
      .join('\n'),
  );
  out.push('');
  out.push(
    table([
      ['class', 'count'],
      ...Object.entries(report.counts).map(([k, c]) => [k, String(c)]),
      ['lww_skipped (ok)', String(report.lwwSkipped)],
      ['delivered (ok)', String(report.delivered)],
      ...(report.outsideWindow > 0 ? [['outside window (not judged)', String(report.outsideWindow)]] : []),
      ...(report.unknownVersionDeletes > 0 ? [['untombstoned deletes (not judged)', String(report.unknownVersionDeletes)]] : []),
      ...(report.uniqueClashRemovals > 0 ? [['removed by a UNIQUE clash (ok)', String(report.uniqueClashRemovals)]] : []),
      ...(report.cascadeSideEffects > 0 ? [['cascaded in a sink transaction, version kept (not judged)', String(report.cascadeSideEffects)]] : []),
      ...(report.foreignKeySetNull > 0 ? [['foreign key set NULL, parent deleted (ok)', String(report.foreignKeySetNull)]] : []),
      ...(report.foreignKeyCascades > 0 ? [['gone with a CASCADE parent deleted on another node (ok)', String(report.foreignKeyCascades)]] : []),
    ])
      .split('\n')
      .map((l) => `  ${l}`)
      .join('\n'),
  );
  for (const n of report.notes) out.push(`  note: ${n}`);
  if (report.findings.length > 0) {
    out.push('');
    out.push(`Findings${report.findingsTruncated ? ` (first ${report.findings.length} shown)` : ''}:`);
    const rows = [['class', 'node', 'table', 'key', 'write', 'other side', 'why']];
    for (const f of report.findings) {
      const only = differingColumns(f.write, f.other);
      rows.push([
        f.class,
        nodeLabel(f.node),
        f.table,
        clip(
          Object.entries(f.key)
            .map(([k, v]) => `${k}=${shown(v)}`)
            .join(', '),
          40,
        ),
        describeWrite(f.write, only),
        describeWrite(f.other, only),
        f.explanation,
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
  const total = Object.values(report.counts).reduce((a, b) => a + b, 0);
  out.push(
    report.ok
      ? `OK: no finding; ${report.delivered} write(s) delivered, ${report.lwwSkipped} skipped by LWW, ${(report.durationMs / 1000).toFixed(1)} s`
      : `FINDINGS: ${total} (${Object.entries(report.counts)
          .filter(([, c]) => c > 0)
          .map(([k, c]) => `${k} ${c}`)
          .join(', ')}), ${(report.durationMs / 1000).toFixed(1)} s`,
  );
  return out.join('\n');
}
