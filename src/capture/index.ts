// Capture: a source's row-based binlog → committed SourceTransactions for the sink.
export { BinlogCapture, type CaptureHandler, type CaptureOptions, type CaptureStats, startCapture } from './reader.ts';
export { type AssembledItem, type CaptureEvent, CHECKPOINT_TABLE, type SchemaChange, TransactionAssembler } from './assembler.ts';
export { type DdlKind, type DdlStatement, parseDdl } from './ddl.ts';
export { type TableFilter, type TableSelector, tableFilter } from './filter.ts';
export { type BinlogPosition, bytesBetween, comparePositions, formatPosition, parsePosition } from './position.ts';
export {
  type BinlogLag,
  binlogFiles,
  binlogLag,
  checkPositionAvailable,
  checkSourceSettings,
  currentPosition,
  headPosition,
  type SourceConnection,
  sourceSettings,
  unsafeSettings,
} from './source.ts';
