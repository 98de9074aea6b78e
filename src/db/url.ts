// Connection URLs: a tolerant parser and the one redaction helper for logs, errors, status and reports.
// Passwords may hold raw `/`, `@`, `:` or `%` (operators paste them unencoded), so the user part ends
// at the last `@`, and redaction also replaces every password this process has parsed, wherever it
// appears in a text.
import type { ConnectionOptions } from 'mysql2/promise';

const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;
const MASK = '***';
const secrets = new Set<string>();

/** Remembers a secret so `redactSecrets` masks it in any text (short ones are masked only inside URLs). */
export function registerSecret(secret: string): void {
  if (secret.length < 4) return;
  secrets.add(secret);
  const encoded = encodeURIComponent(secret);
  if (encoded !== secret) secrets.add(encoded);
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a raw `%` that is not an escape: the text is meant literally
  }
}

interface UrlParts {
  scheme: string;
  user: string | undefined;
  password: string | undefined;
  /** host[:port][/database][?…], untouched. */
  rest: string;
}

function splitUrl(url: string): UrlParts {
  const scheme = SCHEME.exec(url)?.[1] ?? '';
  const body = scheme ? url.slice(scheme.length + 3) : url;
  const at = body.lastIndexOf('@');
  if (at < 0) return { scheme, user: undefined, password: undefined, rest: body };
  const userinfo = body.slice(0, at);
  const colon = userinfo.indexOf(':');
  return {
    scheme,
    user: colon < 0 ? userinfo : userinfo.slice(0, colon),
    password: colon < 0 ? undefined : userinfo.slice(colon + 1),
    rest: body.slice(at + 1),
  };
}

/** Parses mysql://user:password@host:port/database into connection options; the password is registered for redaction. */
export function parseUrl(url: string): ConnectionOptions {
  const parts = splitUrl(url);
  if (!parts.scheme) throw new Error(`connection URL must start with mysql:// (got ${redactUrl(url)})`);
  if (parts.scheme !== 'mysql' && parts.scheme !== 'mariadb') {
    throw new Error(`connection URL must start with mysql:// (got ${parts.scheme}://)`);
  }
  const slash = parts.rest.search(/[/?]/);
  const hostPort = slash < 0 ? parts.rest : parts.rest.slice(0, slash);
  const path = slash < 0 ? '' : parts.rest.slice(slash).replace(/\?.*$/, '');
  const hp = /^(\[[^\]]+\]|[^:]*)(?::(\d+))?$/.exec(hostPort);
  if (!hp) throw new Error(`not a valid connection URL: ${redactUrl(url)} (host:port is "${hostPort}")`);
  const port = hp[2] === undefined ? 3306 : Number(hp[2]);
  if (port < 1 || port > 65535) throw new Error(`not a valid connection URL: ${redactUrl(url)} (port ${hp[2]})`);
  const password = parts.password === undefined ? '' : decode(parts.password);
  if (parts.password !== undefined) {
    registerSecret(parts.password);
    registerSecret(password);
  }
  const opts: ConnectionOptions = {
    host: (hp[1] ?? '').replace(/^\[|\]$/g, '') || '127.0.0.1',
    port,
    user: parts.user ? decode(parts.user) : 'root',
    password,
  };
  const db = path.replace(/^\//, '');
  if (db) opts.database = decode(db);
  return opts;
}

/** Builds a URL from parts, percent-encoding user and password (for config files and child processes). */
export function formatUrl(parts: { host: string; port?: number; user?: string; password?: string; database?: string }): string {
  const user = encodeURIComponent(parts.user ?? 'root');
  const password = parts.password ? `:${encodeURIComponent(parts.password)}` : '';
  if (parts.password) registerSecret(parts.password);
  const host = parts.host.includes(':') ? `[${parts.host}]` : parts.host;
  return `mysql://${user}${password}@${host}:${parts.port ?? 3306}/${parts.database ? encodeURIComponent(parts.database) : ''}`;
}

/** The URL with its password masked, whatever its form (with or without a scheme, raw or encoded). */
export function redactUrl(url: string): string {
  const parts = splitUrl(url);
  if (parts.password === undefined) return redactSecrets(url);
  return `${parts.scheme ? `${parts.scheme}://` : ''}${parts.user}:${MASK}@${redactSecrets(parts.rest)}`;
}

// scheme://user:password@ where the password may hold anything but whitespace and quotes; greedy up
// to the last `@` before whitespace, so raw `@` and `/` in passwords are covered.
const URL_IN_TEXT = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/'"`]*):[^\s'"`]*@/gi;

/** Masks URL passwords and every registered secret in a free text (error messages, log lines). */
export function redactSecrets(text: string): string {
  let out = text.replace(URL_IN_TEXT, `$1:${MASK}@`);
  for (const s of secrets) if (out.includes(s)) out = out.split(s).join(MASK);
  return out;
}
