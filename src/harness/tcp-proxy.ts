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
// `slow(link)` keeps every connection but makes the link slow, each way on its own: a chunk arrives
// `latencyMs` after it was sent, and no faster than `bytesPerSecond` lets it through (a queue that
// fills pauses the sender, as a full TCP window does). `restore()` delivers what is queued, then
// forwards at full speed again.
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export type CutMode = 'drop' | 'reset' | 'blackhole';

/** A slow link: each chunk `latencyMs` late, at most `bytesPerSecond` (undefined: no limit). */
export interface SlowLinkOptions {
  latencyMs: number;
  bytesPerSecond?: number;
}

/** Bytes a slow lane holds before it pauses its sender. */
const LANE_HIGH_WATER = 256 * 1024;
/** Chunks are paced in pieces no larger than this, so a bandwidth limit is smooth. */
const PIECE = 16 * 1024;

/** One direction of one connection: bytes from `from` to `to`, at full speed or through a slow link. */
class Lane {
  private readonly queue: Array<{ chunk: Buffer; due: number }> = [];
  private queued = 0;
  private timer: NodeJS.Timeout | null = null;
  /** When the slow link is free to start sending the next byte (bandwidth pacing). */
  private nextFree = 0;
  private lastDue = 0;
  private blocked = false;

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly proxy: TcpProxy,
  ) {
    from.on('data', (chunk: Buffer) => this.push(chunk));
  }

  get idle(): boolean {
    return this.queue.length === 0;
  }

  private push(chunk: Buffer): void {
    const slow = this.proxy.slowLink;
    if (!slow && this.queue.length === 0) {
      this.write(chunk);
      return;
    }
    const now = Date.now();
    for (let i = 0; i < chunk.length; i += PIECE) {
      const piece = chunk.subarray(i, i + PIECE);
      let sent = now;
      if (slow?.bytesPerSecond) {
        this.nextFree = Math.max(now, this.nextFree) + (piece.length * 1000) / slow.bytesPerSecond;
        sent = this.nextFree;
      }
      this.lastDue = Math.max(this.lastDue, sent + (slow?.latencyMs ?? 0));
      this.queue.push({ chunk: piece, due: this.lastDue });
      this.queued += piece.length;
    }
    if (this.queued > LANE_HIGH_WATER) this.from.pause();
    this.schedule();
  }

  private write(chunk: Buffer): void {
    if (this.to.destroyed) return;
    if (!this.to.write(chunk) && !this.blocked) {
      this.blocked = true;
      this.from.pause();
      this.to.once('drain', () => {
        this.blocked = false;
        this.proxy.resumeIfFlowing(this.from);
      });
    }
  }

  /** Delivers what is due (nothing while blackholed) and sets a timer for the rest. */
  schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.proxy.isBlackholed) return;
    const now = Date.now();
    const fast = !this.proxy.slowLink;
    while (this.queue.length > 0 && (fast || this.queue[0]!.due <= now)) {
      const { chunk } = this.queue.shift()!;
      this.queued -= chunk.length;
      this.write(chunk);
    }
    if (this.queue.length === 0) {
      this.lastDue = 0;
      this.proxy.laneIdle();
    } else this.timer = setTimeout(() => this.schedule(), Math.max(1, this.queue[0]!.due - now));
    if (this.queued <= LANE_HIGH_WATER / 2 && !this.blocked) this.proxy.resumeIfFlowing(this.from);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
    this.queued = 0;
  }
}

interface Pair {
  client: Socket;
  upstream: Socket | null;
  lanes: Lane[];
  /** A side closed during a blackhole: the other learns it on restore. */
  closedInBlackhole: boolean;
  /** A side closed while bytes were still on a slow link: the other learns it once they arrived. */
  closing: boolean;
}

export class TcpProxy {
  private server: Server | null = null;
  private readonly pairs = new Set<Pair>();
  private mode: CutMode | null = null;
  /** The slow link in force, or null at full speed. */
  slowLink: SlowLinkOptions | null = null;
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

  get isBlackholed(): boolean {
    return this.mode === 'blackhole';
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
    const pair: Pair = { client, upstream: null, lanes: [], closedInBlackhole: false, closing: false };
    this.pairs.add(pair);
    client.on('close', () => this.closed(pair));
    client.pause();
    if (this.mode === 'blackhole') return;
    this.connectUpstream(pair);
  }

  /** One side closed: close the other, unless a blackhole hides it until restore or a slow link still carries bytes. */
  private closed(pair: Pair): void {
    if (this.mode === 'blackhole') {
      pair.closedInBlackhole = true;
      return;
    }
    if (!pair.lanes.every((l) => l.idle)) {
      pair.closing = true;
      return;
    }
    this.pairs.delete(pair);
    for (const l of pair.lanes) l.stop();
    pair.client.destroy();
    pair.upstream?.destroy();
  }

  /** A lane emptied: a pair waiting for its slow bytes may close now. */
  laneIdle(): void {
    for (const pair of [...this.pairs]) if (pair.closing) this.closed(pair);
  }

  /** Resumes reading a socket unless a blackhole holds it. */
  resumeIfFlowing(socket: Socket): void {
    if (this.mode !== 'blackhole' && !socket.destroyed) socket.resume();
  }

  private connectUpstream(pair: Pair): void {
    const upstream = tcpConnect(this.targetPort, this.targetHost);
    pair.upstream = upstream;
    upstream.on('error', () => undefined);
    upstream.on('close', () => this.closed(pair));
    pair.lanes = [new Lane(pair.client, upstream, this), new Lane(upstream, pair.client, this)];
    pair.client.resume();
  }

  /** Cuts every connection in `mode`; returns how many it broke or froze. */
  cut(mode: CutMode): number {
    this.mode = mode;
    const n = this.pairs.size;
    for (const pair of [...this.pairs]) {
      const { client, upstream } = pair;
      if (mode === 'blackhole') {
        client.pause();
        upstream?.pause();
        continue;
      }
      this.pairs.delete(pair);
      for (const l of pair.lanes) l.stop();
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

  /** Makes the link slow (see the header); returns the connections it slows now. */
  slow(link: SlowLinkOptions): number {
    this.slowLink = { ...link };
    return this.pairs.size;
  }

  restore(): void {
    const wasBlackhole = this.mode === 'blackhole';
    this.mode = null;
    this.slowLink = null;
    for (const pair of [...this.pairs]) {
      if (wasBlackhole && (pair.closedInBlackhole || pair.client.destroyed)) {
        this.closed(pair);
        continue;
      }
      if (!pair.upstream) {
        this.connectUpstream(pair);
        continue;
      }
      if (wasBlackhole && pair.upstream.destroyed) {
        this.closed(pair);
        continue;
      }
      // Queued bytes go first, at full speed, then reading resumes.
      for (const l of pair.lanes) l.schedule();
      this.resumeIfFlowing(pair.client);
      this.resumeIfFlowing(pair.upstream);
    }
  }

  async stop(): Promise<void> {
    this.mode = null;
    this.slowLink = null;
    for (const { client, upstream, lanes } of this.pairs) {
      for (const l of lanes) l.stop();
      client.destroy();
      upstream?.destroy();
    }
    this.pairs.clear();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }
}
