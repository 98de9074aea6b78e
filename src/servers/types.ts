// The contract between server providers and everything that needs a running server.
export type Engine = 'mysql' | 'mariadb';
export type ProviderName = 'local' | 'testcontainers' | 'external';

export interface ServerEndpoint {
  engine: Engine;
  host: string;
  port: number;
  user: string;
  password: string;
  /** mysql://user:password@host:port/ */
  url: string;
  serverId: number;
}

/** Just the connection details of a server (e.g. to print or serialize it). */
export function endpointOf(server: ServerEndpoint): ServerEndpoint {
  const { engine, host, port, user, password, url, serverId } = server;
  return { engine, host, port, user, password, url, serverId };
}

export interface RunningServer extends ServerEndpoint {
  /** Which provider runs it (external servers cannot be halted or restarted). */
  readonly provider: ProviderName;
  /**
   * Stops the server process and keeps its data (a later start() brings it back on the same port).
   * `abrupt` kills it like a crash (SIGKILL); the engine recovers its data on start().
   */
  halt(options?: HaltOptions): Promise<void>;
  /** Starts a halted server again on the same port with the same data. */
  start(): Promise<void>;
  /** Stops the server for good and removes its data directory. Idempotent. */
  destroy(): Promise<void>;
}

export interface HaltOptions {
  abrupt?: boolean;
}

export interface StartOptions {
  engine: Engine;
  count?: number;
  /** Default: see selectProvider() (LWW_PROVIDER, then Docker if it answers, then local). */
  provider?: ProviderName;
  /** Server flags appended after ours, so they win (e.g. ['--binlog-row-image=MINIMAL']). */
  extraArgs?: string[];
  /** Loopback ports, one per server (local provider). Default: free ports. */
  ports?: number[];
  /** How long to wait for each server to accept connections. Default 60 s. */
  startTimeoutMs?: number;
}
