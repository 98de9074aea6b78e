// The CLI's logger: one line per message on stderr, fields as JSON; debug only with LWW_DEBUG=1.
import type { Logger } from '../writer/options.ts';

export function consoleLogger(prefix = ''): Logger {
  const line = (level: string, msg: string, fields?: Record<string, unknown>) =>
    console.error(`${new Date().toISOString()} ${level} ${prefix}${msg}${fields && Object.keys(fields).length ? ` ${JSON.stringify(fields, (_, v) => (typeof v === 'bigint' ? v.toString() : v))}` : ''}`);
  return {
    debug: (m, f) => {
      if (process.env.LWW_DEBUG === '1') line('debug', m, f);
    },
    info: (m, f) => line('info', m, f),
    warn: (m, f) => line('warn', m, f),
    error: (m, f) => line('error', m, f),
  };
}

/** JSON.stringify that writes bigints as decimal strings (versions on the wire). */
export function toJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? v.toString() : v), indent);
}
