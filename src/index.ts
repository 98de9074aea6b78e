// Public API of mysql-lww-sink.

export { type CaptureHandler, type CaptureOptions, checkSourceSettings, currentPosition, startCapture } from './capture/index.ts';
export * from './checker/index.ts';
export * from './errors.ts';
export { FAILPOINT_NAMES, type FailpointName, Failpoints, parseFailpointSpec } from './failpoints/failpoints.ts';
export { collectGarbage, formatGcReport, type GcOptions, type GcReport } from './gc/collector.ts';
export { computeHorizons, type HorizonReport } from './gc/horizon.ts';
export { type Comparison, compareModes, comparisonMarkdown, formatComparison } from './harness/compare.ts';
export { type Fault, parseFault } from './harness/faults.ts';
export { type HarnessOptions, type HarnessResult, runHarness } from './harness/harness.ts';
export { checkAutoIncrementCollisions } from './install/auto-increment.ts';
export { type InstallOptions, type InstallResult, install, uninstall } from './install/install.ts';
export type { Op, Row, RowChange, SourceTransaction, SourceTransactionInput } from './model/change.ts';
export { type JsonScalarType, TypedJson, type TypedJsonScalar } from './model/json.ts';
export type { ColumnMeta, TableMeta } from './model/table.ts';
export { MAX_NODE_ID, MAX_VERSION, makeVersion, nextVersion, nodeIdOf, parseVersion, physicalMicrosOf } from './model/version.ts';
export { Replicator, type ReplicatorOptions, type ReplicatorStatus } from './replicator/replicator.ts';
export { type Engine, type RunningServer, startServers } from './servers/index.ts';
export type { Dialect } from './sql/dialect.ts';
export { type CopyReport, copyTables } from './sync/initial-copy.ts';
export { formatSyncReport, syncNodes } from './sync/repair.ts';
export type { CommitInfo, Logger, SinkOptions, SinkOptionsInput } from './writer/options.ts';
export { type Checkpoint, createSink, type Sink } from './writer/sink.ts';
export type { SinkStats, TableCounters } from './writer/stats.ts';
