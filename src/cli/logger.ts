// The CLI's process logger (src/log/logger.ts): JSON lines when stderr is not a terminal or with
// --log-format json, readable lines on a terminal; LOG_LEVEL sets the level.
import { createLogger, type Logger } from '../log/logger.ts';

/** The process logger; `component` becomes a field of every line. */
export function consoleLogger(component?: string): Logger {
  return createLogger({ bindings: component ? { component: component.replace(/[:\s]+$/, '') } : undefined });
}

/** JSON.stringify that writes bigints as decimal strings (versions on the wire). */
export function toJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? v.toString() : v), indent);
}
