// External provider: servers someone else runs, named in LWW_SERVER_URLS (comma-separated
// mysql:// URLs). They can be used but not halted, restarted or removed.
import { ProviderUnavailableError, UnsupportedServerOperationError } from './errors.ts';
import { type ProbeTarget, identify } from './probe.ts';
import { type Engine, type RunningServer, type ServerEndpoint, type StartOptions, endpointOf } from './types.ts';

/** Parses LWW_SERVER_URLS-style text into connection targets (defaults: port 3306, user root). */
export function parseServerUrls(text: string): (ProbeTarget & { url: string })[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((url) => {
      let u: URL;
      try {
        u = new URL(url);
      } catch {
        throw new ProviderUnavailableError(`LWW_SERVER_URLS has an invalid URL: ${url.replace(/:[^:@/]*@/, ':***@')}`);
      }
      if (u.protocol !== 'mysql:' && u.protocol !== 'mariadb:') {
        throw new ProviderUnavailableError(`LWW_SERVER_URLS entries must be mysql:// URLs (got ${u.protocol}//)`);
      }
      return {
        url,
        host: u.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: u.port ? Number(u.port) : 3306,
        user: decodeURIComponent(u.username) || 'root',
        password: decodeURIComponent(u.password),
      };
    });
}

class ExternalServer implements RunningServer {
  readonly provider = 'external' as const;
  constructor(
    readonly engine: Engine,
    readonly host: string,
    readonly port: number,
    readonly user: string,
    readonly password: string,
    readonly url: string,
    readonly serverId: number,
  ) {}

  toJSON(): ServerEndpoint {
    return endpointOf(this);
  }

  halt(): Promise<void> {
    return Promise.reject(this.unsupported('halt'));
  }

  start(): Promise<void> {
    return Promise.reject(this.unsupported('start'));
  }

  /** Nothing to remove: the server belongs to whoever runs it. */
  async destroy(): Promise<void> {}

  private unsupported(operation: string): UnsupportedServerOperationError {
    return new UnsupportedServerOperationError(
      `${operation}() is not supported for external servers (${this.host}:${this.port}); use the local or testcontainers provider`,
    );
  }
}

/** The first `count` servers of LWW_SERVER_URLS that run the requested engine. */
export async function externalServers(options: StartOptions, urls = process.env.LWW_SERVER_URLS ?? ''): Promise<RunningServer[]> {
  const count = options.count ?? 1;
  const targets = parseServerUrls(urls);
  if (targets.length === 0) {
    throw new ProviderUnavailableError('the external provider needs LWW_SERVER_URLS=mysql://user:password@host:port/,...');
  }
  const found = await Promise.all(
    targets.map(async (t) => {
      const id = await identify(t, 5000);
      return new ExternalServer(id.engine, t.host, t.port, t.user, t.password, t.url, id.serverId);
    }),
  );
  const matching = found.filter((s) => s.engine === options.engine);
  if (matching.length < count) {
    throw new ProviderUnavailableError(
      `LWW_SERVER_URLS has ${matching.length} ${options.engine} server(s) of the ${count} needed (found: ${
        found.map((s) => `${s.host}:${s.port} ${s.engine}`).join(', ') || 'none'
      })`,
    );
  }
  return matching.slice(0, count);
}
