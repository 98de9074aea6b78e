// A TCP proxy on loopback between the replicator and a server, for network faults: `cut('drop')`
// resets every connection and refuses new ones; `cut('blackhole')` keeps connections open but lets
// no byte through (a silent network partition); `restore()` heals it.
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export type CutMode = 'drop' | 'blackhole';

export class TcpProxy {
  private server: Server | null = null;
  private readonly pairs = new Set<[Socket, Socket | null]>();
  private mode: CutMode | null = null;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(port = 0): Promise<number> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    const addr = this.server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : port;
    return this.port;
  }

  /** The URL of `url`'s server as seen through this proxy. */
  rewrite(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  get isCut(): boolean {
    return this.mode !== null;
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (this.mode === 'drop') {
      client.destroy();
      return;
    }
    const pair: [Socket, Socket | null] = [client, null];
    this.pairs.add(pair);
    const cleanup = () => {
      this.pairs.delete(pair);
      client.destroy();
      pair[1]?.destroy();
    };
    client.on('close', cleanup);
    if (this.mode === 'blackhole') {
      client.pause();
      return;
    }
    this.connectUpstream(pair, cleanup);
  }

  private connectUpstream(pair: [Socket, Socket | null], cleanup: () => void): void {
    const [client] = pair;
    const upstream = tcpConnect(this.targetPort, this.targetHost);
    pair[1] = upstream;
    upstream.on('error', cleanup);
    upstream.on('close', cleanup);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  cut(mode: CutMode): void {
    this.mode = mode;
    for (const [client, upstream] of this.pairs) {
      if (mode === 'drop') {
        client.destroy();
        upstream?.destroy();
      } else {
        client.unpipe();
        upstream?.unpipe();
        client.pause();
        upstream?.pause();
      }
    }
  }

  restore(): void {
    const wasBlackhole = this.mode === 'blackhole';
    this.mode = null;
    if (!wasBlackhole) return;
    // Connections held during the blackhole are reset: like a partition that outlived TCP timeouts.
    for (const [client, upstream] of [...this.pairs]) {
      client.destroy();
      upstream?.destroy();
    }
  }

  async stop(): Promise<void> {
    for (const [client, upstream] of this.pairs) {
      client.destroy();
      upstream?.destroy();
    }
    this.pairs.clear();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }
}
