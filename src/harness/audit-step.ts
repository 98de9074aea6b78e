// The history audit as a harness step: the run's binlog window on every node, summarized.
import { auditHistory } from '../checker/audit.ts';
import type { AuditSummary } from './harness.ts';

export async function harnessAudit(args: { nodes: string[]; from: string[]; tables: string[] }): Promise<AuditSummary> {
  const report = await auditHistory({ nodes: args.nodes, from: args.from, tables: args.tables });
  const findings = Object.values(report.counts).reduce((n, c) => n + c, 0);
  return { counts: { ...report.counts, lww_skipped: report.lwwSkipped }, findings, details: report };
}
