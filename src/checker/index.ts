// The consistency checker: the state check (are the nodes identical now?).
export { CheckerNodeError, type CheckStateOptions, checkState, parseTableName, UncheckableTableError } from './state-check.ts';
export {
  FINDING_CLASSES,
  type FindingClass,
  formatStateReport,
  type NodeState,
  nodeLabel,
  type StateFinding,
  type StateReport,
  stateReportToJson,
  type TableStateReport,
} from './report.ts';
export { canonicalJson, canonicalValue, classify, effectiveState, isFinding, lwwWinner, underTombstone } from './compare-values.ts';
// The history audit (did replication keep the LWW rules over a binlog window?).
export { type AuditOptions, auditHistory, positionAtTime } from './audit.ts';
export {
  type Classification,
  type ClassifyOptions,
  classifyHistory,
  type HistoryTransaction,
  type KeyWrite,
  keyIdOf,
  lostCandidates,
  type NodeHistory,
} from './audit-classify.ts';
export {
  AUDIT_CLASSES,
  type AuditClass,
  type AuditFinding,
  type AuditNodeSummary,
  type AuditReport,
  auditReportToJson,
  type AuditWrite,
  formatAuditReport,
} from './audit-report.ts';
