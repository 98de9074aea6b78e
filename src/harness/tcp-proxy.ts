// A TCP proxy on loopback between a client (the replicator, a writer) and a server, for network
// faults. While cut:
//   'drop'       every connection is closed on both sides (FIN) and new ones are accepted and closed;
//   'reset'      every connection is reset on both sides (RST: ECONNRESET) and so are new ones;
//   'blackhole'  connections stay open but no byte crosses and neither side learns anything (no FIN, no
//                RST), like a silent partition: a query through it neither answers nor fails until a
//                timeout of the client's own. New connections are accepted and held the same way.
// `restore()` heals it. After a blackhole the held connections resume where they were (bytes sent
// into the partition arrive now, as TCP retransmits them); a side that gave up during the blackhole
// has its close delivered to the other side only now.
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export type CutMode = 'drop' | 'reset' | 'blackhole';

interface Pair {
  client: Socket;
  upstream: Socket | null;
  /** A side closed during a blackhole: the other learns it on restore. */
  closedInBlackhole: boolean;
}

export class TcpProxy {
  private server: Server | null = null;
  private readonly pairs = new Set<Pair>();
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

  /** Connections open through the proxy (held ones included). */
  get connections(): number {
    return this.pairs.size;
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (this.mode === 'drop') {
      client.destroy();
      return;
    }
    if (this.mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, upstream: null, closedInBlackhole: false };
    this.pairs.add(pair);
    client.on('close', () => this.closed(pair));
    if (this.mode === 'blackhole') {
      client.pause();
      return;
    }
    this.connectUpstream(pair);
  }

  /** One side closed: close the other, unless a blackhole hides it until restore. */
  private closed(pair: Pair): void {
    if (this.mode === 'blackhole') {
      pair.closedInBlackhole = true;
      return;
    }
    this.pairs.delete(pair);
    pair.client.destroy();
    pair.upstream?.destroy();
  }

  private connectUpstream(pair: Pair): void {
    const upstream = tcpConnect(this.targetPort, this.targetHost);
    pair.upstream = upstream;
    upstream.on('error', () => undefined);
    upstream.on('close', () => this.closed(pair));
    pair.client.pipe(upstream);
    upstream.pipe(pair.client);
  }

  /** Cuts every connection in `mode`; returns how many it broke or froze. */
  cut(mode: CutMode): number {
    this.mode = mode;
    const n = this.pairs.size;
    for (const pair of [...this.pairs]) {
      const { client, upstream } = pair;
      if (mode === 'blackhole') {
        client.unpipe();
        upstream?.unpipe();
        client.pause();
        upstream?.pause();
        continue;
      }
      this.pairs.delete(pair);
      if (mode === 'reset') {
        if (!client.destroyed) client.resetAndDestroy();
        if (upstream && !upstream.destroyed) upstream.resetAndDestroy();
      } else {
        client.destroy();
        upstream?.destroy();
      }
    }
    return n;
  }

  restore(): void {
    const wasBlackhole = this.mode === 'blackhole';
    this.mode = null;
    if (!wasBlackhole) return;
    for (const pair of [...this.pairs]) {
      if (pair.closedInBlackhole || pair.client.destroyed) {
        this.closed(pair);
        continue;
      }
      if (!pair.upstream) {
        this.connectUpstream(pair);
        continue;
      }
      if (pair.upstream.destroyed) {
        this.closed(pair);
        continue;
      }
      pair.client.pipe(pair.upstream);
      pair.upstream.pipe(pair.client);
    }
  }

  async stop(): Promise<void> {
    this.mode = null;
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream?.destroy();
    }
    this.pairs.clear();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }
}
