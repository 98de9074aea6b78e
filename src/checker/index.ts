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
export { canonicalJson, canonicalValue, classify, effectiveState, lwwWinner } from './compare-values.ts';
