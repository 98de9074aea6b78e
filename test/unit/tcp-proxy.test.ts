import { createServer, type Server, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../src/harness/tcp-proxy.ts';

function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((s) => s.pipe(s));
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

  it('rewrites a server URL to go through the proxy', () => {
    expect(proxy.rewrite('mysql://root:pw@127.0.0.1:3307/db')).toBe(`mysql://root:pw@127.0.0.1:${proxy.port}/db`);
  });
});
