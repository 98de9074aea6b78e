// Public API of mysql-lww-sink.
export * from './errors.ts';
export { createSink, type Sink, type Checkpoint } from './writer/sink.ts';
export type { CommitInfo, SinkOptions, SinkOptionsInput, Logger } from './writer/options.ts';
export type { SinkStats, TableCounters } from './writer/stats.ts';
export type { Op, Row, RowChange, SourceTransaction, SourceTransactionInput } from './model/change.ts';
export type { TableMeta, ColumnMeta } from './model/table.ts';
export { parseVersion, makeVersion, nextVersion, nodeIdOf, physicalMicrosOf, MAX_VERSION, MAX_NODE_ID } from './model/version.ts';
export { Failpoints, FAILPOINT_NAMES, type FailpointName, parseFailpointSpec } from './failpoints/failpoints.ts';
export type { Dialect } from './sql/dialect.ts';
export { install, uninstall, type InstallOptions, type InstallResult } from './install/install.ts';
export { checkAutoIncrementCollisions } from './install/auto-increment.ts';
export { startCapture, type CaptureHandler, type CaptureOptions, currentPosition, checkSourceSettings } from './capture/index.ts';
export { Replicator, type ReplicatorOptions, type ReplicatorStatus } from './replicator/replicator.ts';
export * from './checker/index.ts';
export { runHarness, type HarnessOptions, type HarnessResult } from './harness/harness.ts';
export { compareModes, formatComparison, comparisonMarkdown, type Comparison } from './harness/compare.ts';
export { parseFault, type Fault } from './harness/faults.ts';
export { startServers, type RunningServer, type Engine } from './servers/index.ts';
