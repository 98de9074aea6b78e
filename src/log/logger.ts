// The project's logger: the small interface every module logs through, and the process logger the
// CLI builds — structured JSON (pino) when stderr is not a terminal or with --log-format json,
// one readable line per message on a terminal. Context goes in fields, never into the message text;
// passwords are masked in both (redactSecrets).
import pino from 'pino';
import { redactSecrets } from '../db/url.ts';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** A logger that adds these fields to every line (e.g. `{ direction }`). */
  child?(bindings: Record<string, unknown>): Logger;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export type LogFormat = 'json' | 'text';
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LoggerOptions {
  /** Default: json unless stderr is a terminal (LWW_LOG_FORMAT overrides the default). */
  format?: LogFormat;
  /** Default: LOG_LEVEL, else info (LWW_DEBUG=1 still means debug). */
  level?: LogLevel;
  /** Where lines go; default stderr. */
  write?: (line: string) => void;
  bindings?: Record<string, unknown>;
}

/** The level from LOG_LEVEL (or LWW_DEBUG=1), or the problem with it. */
export function levelFromEnv(env: NodeJS.ProcessEnv = process.env): LogLevel | string {
  const raw = env.LOG_LEVEL?.trim().toLowerCase();
  if (raw === undefined || raw === '') return env.LWW_DEBUG === '1' ? 'debug' : 'info';
  return (LOG_LEVELS as readonly string[]).includes(raw) ? (raw as LogLevel) : `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${env.LOG_LEVEL}")`;
}

/** The format from LWW_LOG_FORMAT or the terminal. */
export function defaultFormat(env: NodeJS.ProcessEnv = process.env): LogFormat {
  if (env.LWW_LOG_FORMAT === 'json' || env.LWW_LOG_FORMAT === 'text') return env.LWW_LOG_FORMAT;
  return process.stderr.isTTY ? 'text' : 'json';
}

/** Field values safe to print: bigints as decimal strings, errors as message + code, secrets masked. */
function clean(value: unknown, depth = 0): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'string') return redactSecrets(value);
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return { type: value.name, message: redactSecrets(value.message), ...(code === undefined ? {} : { code }) };
  }
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => clean(v, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clean(v, depth + 1)]));
}

const cleanFields = (fields?: Record<string, unknown>) => (fields ? (clean(fields) as Record<string, unknown>) : {});

function textLogger(level: LogLevel, write: (line: string) => void, bindings: Record<string, unknown>): Logger {
  const rank = LOG_LEVELS.indexOf(level);
  const line = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(lvl) < rank) return;
    const all = { ...bindings, ...cleanFields(fields) };
    const tail = Object.entries(all)
      .map(([k, v]) => `${k}=${typeof v === 'string' && !/\s/.test(v) ? v : JSON.stringify(v)}`)
      .join(' ');
    write(`${new Date().toISOString()} ${lvl.padEnd(5)} ${redactSecrets(msg)}${tail ? ` ${tail}` : ''}\n`);
  };
  return {
    debug: (m, f) => line('debug', m, f),
    info: (m, f) => line('info', m, f),
    warn: (m, f) => line('warn', m, f),
    error: (m, f) => line('error', m, f),
    child: (b) => textLogger(level, write, { ...bindings, ...cleanFields(b) }),
  };
}

function wrapPino(p: pino.Logger): Logger {
  return {
    debug: (m, f) => p.debug(cleanFields(f), redactSecrets(m)),
    info: (m, f) => p.info(cleanFields(f), redactSecrets(m)),
    warn: (m, f) => p.warn(cleanFields(f), redactSecrets(m)),
    error: (m, f) => p.error(cleanFields(f), redactSecrets(m)),
    child: (b) => wrapPino(p.child(cleanFields(b))),
  };
}

/** A process logger (see the header). */
export function createLogger(options: LoggerOptions = {}): Logger {
  const envLevel = levelFromEnv();
  const level = options.level ?? ((LOG_LEVELS as readonly string[]).includes(envLevel) ? (envLevel as LogLevel) : 'info');
  const format = options.format ?? defaultFormat();
  const bindings = cleanFields(options.bindings);
  if (format === 'text') return textLogger(level, options.write ?? ((l) => process.stderr.write(l)), bindings);
  // Synchronous writes: a line logged just before process.exit is not lost.
  const stream = options.write ? { write: options.write } : pino.destination({ dest: 2, sync: true });
  const p = pino(
    {
      level,
      base: { pid: process.pid, ...bindings },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    stream,
  );
  return wrapPino(p);
}
