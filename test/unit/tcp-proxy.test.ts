import { createServer, type Server, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../src/harness/tcp-proxy.ts';

function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.on('error', () => undefined).pipe(s));
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port })));
}

function roundTrip(port: number, text: string, timeoutMs = 500): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      s.destroy();
      resolve('timeout');
    }, timeoutMs);
    s.on('error', () => {
      clearTimeout(timer);
      resolve('error');
    });
    s.on('close', () => {
      clearTimeout(timer);
      resolve('closed');
    });
    s.on('data', (d) => {
      clearTimeout(timer);
      s.destroy();
      resolve(d.toString());
    });
    s.write(text);
  });
}


/** Polls until `done` holds or 5 s passed (a loaded machine forwards late; the assertion after it decides). */
async function until(done: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

describe('tcp proxy for network faults', () => {
  let echo: { server: Server; port: number };
  let proxy: TcpProxy;
  beforeAll(async () => {
    echo = await echoServer();
    proxy = new TcpProxy('127.0.0.1', echo.port);
    await proxy.start();
  });
  afterAll(async () => {
    await proxy.stop();
    echo.server.close();
  });

  it('forwards, drops, blackholes and heals', async () => {
    expect(await roundTrip(proxy.port, 'hello')).toBe('hello');
    proxy.cut('drop');
    expect(await roundTrip(proxy.port, 'x')).toMatch(/closed|error/);
    proxy.restore();
    expect(await roundTrip(proxy.port, 'again')).toBe('again');
    proxy.cut('blackhole');
    expect(await roundTrip(proxy.port, 'silent', 300)).toBe('timeout');
    proxy.restore();
    expect(await roundTrip(proxy.port, 'healed')).toBe('healed');
  });

  it('a reset gives a connected client ECONNRESET; a blackhole holds a connection silently and it resumes on heal', async () => {
    const s = connect(proxy.port, '127.0.0.1');
    const got: string[] = [];
    s.on('data', (d) => got.push(d.toString()));
    const ended = new Promise<string>((resolve) => {
      s.on('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? 'error'));
      s.on('close', () => resolve('closed'));
    });
    s.write('one');
    await until(() => got.join('') === 'one');
    expect(got.join('')).toBe('one');
    expect(proxy.cut('blackhole')).toBe(1);
    s.write('two');
    await new Promise((r) => setTimeout(r, 300));
    expect(got.join('')).toBe('one');
    expect(s.destroyed).toBe(false);
    proxy.restore();
    await until(() => got.join('') === 'onetwo');
    expect(got.join('')).toBe('onetwo');
    expect(proxy.cut('reset')).toBe(1);
    expect(await ended).toBe('ECONNRESET');
    proxy.restore();
  });

  it('a client that gives up during a blackhole is closed upstream only when it heals', async () => {
    let upstreamClosed = false;
    const server = createServer((sock) => sock.on('error', () => undefined).on('close', () => (upstreamClosed = true)));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const p = new TcpProxy('127.0.0.1', (server.address() as { port: number }).port);
    await p.start();
    try {
      const s = connect(p.port, '127.0.0.1');
      await new Promise((r) => s.once('connect', r));
      await new Promise((r) => setTimeout(r, 100));
      p.cut('blackhole');
      s.destroy();
      await new Promise((r) => setTimeout(r, 200));
      expect(upstreamClosed).toBe(false);
      p.restore();
      await new Promise((r) => setTimeout(r, 200));
      expect(upstreamClosed).toBe(true);
    } finally {
      await p.stop();
      server.close();
    }
  });

  it('a slow link delays each byte by its latency and holds a transfer to its bandwidth, each way; restore delivers the rest at full speed', async () => {
    const fast = Date.now();
    expect(await roundTrip(proxy.port, 'quick')).toBe('quick');
    const fastMs = Date.now() - fast;
    proxy.slow({ latencyMs: 150 });
    const t0 = Date.now();
    expect(await roundTrip(proxy.port, 'late', 2000)).toBe('late');
    // There and back: twice the latency.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    proxy.restore();

    // 400 kB one way at 2 Mbit/s (250 kB/s) takes at least 1.6 s; at full speed far less.
    let received = 0;
    let doneAt = 0;
    const server = createServer((sock) => {
      sock.on('error', () => undefined);
      sock.on('data', (d) => {
        received += d.length;
        if (received >= 400_000 && !doneAt) doneAt = Date.now();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const p = new TcpProxy('127.0.0.1', (server.address() as { port: number }).port);
    await p.start();
    try {
      const s = connect(p.port, '127.0.0.1');
      s.on('error', () => undefined);
      await new Promise((r) => s.once('connect', r));
      expect(p.slow({ latencyMs: 0, bytesPerSecond: 250_000 })).toBe(1);
      const start = Date.now();
      s.write(Buffer.alloc(400_000, 1));
      await new Promise((r) => setTimeout(r, 1000));
      // After 1 s about 250 kB are through, not all of it.
      expect(received).toBeGreaterThan(150_000);
      expect(received).toBeLessThan(340_000);
      await new Promise((r) => setTimeout(r, 1000));
      expect(doneAt - start).toBeGreaterThanOrEqual(1500);
      p.restore();
      s.write(Buffer.alloc(400_000, 2));
      const healed = Date.now();
      while (received < 800_000 && Date.now() - healed < 2000) await new Promise((r) => setTimeout(r, 20));
      expect(received).toBe(800_000);
      expect(Date.now() - healed).toBeLessThan(500 + fastMs);
      s.destroy();
    } finally {
      await p.stop();
      server.close();
    }
  });

  it('rewrites a server URL to go through the proxy', () => {
    expect(proxy.rewrite('mysql://root:pw@127.0.0.1:3307/db')).toBe(`mysql://root:pw@127.0.0.1:${proxy.port}/db`);
  });
});
