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
    await new Promise((r) => setTimeout(r, 100));
    expect(got.join('')).toBe('one');
    expect(proxy.cut('blackhole')).toBe(1);
    s.write('two');
    await new Promise((r) => setTimeout(r, 300));
    expect(got.join('')).toBe('one');
    expect(s.destroyed).toBe(false);
    proxy.restore();
    await new Promise((r) => setTimeout(r, 100));
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

  it('rewrites a server URL to go through the proxy', () => {
    expect(proxy.rewrite('mysql://root:pw@127.0.0.1:3307/db')).toBe(`mysql://root:pw@127.0.0.1:${proxy.port}/db`);
  });
});
