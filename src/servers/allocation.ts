// What must be unique among the servers of a process: loopback ports and server ids.
//
// Ports are picked below the kernel's ephemeral range: a halted server is restarted on the same
// port, and an ephemeral port could meanwhile be taken by some outgoing connection.
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { PortInUseError } from './errors.ts';

const HOST = '127.0.0.1';
/** Ports handed out in this process and not yet released (two parallel starts never share one). */
const reserved = new Set<number>();

/** True when a listener can bind host:port and nothing answers a connect there. */
export async function isPortFree(port: number): Promise<boolean> {
  const bindable = await new Promise<boolean>((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: HOST, exclusive: true }, () => server.close(() => resolve(true)));
  });
  if (!bindable) return false;
  return new Promise<boolean>((resolve) => {
    const socket = connect({ port, host: HOST });
    socket.setTimeout(500);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

/** Reserves the caller's port, or throws PortInUseError naming it. */
export async function claimPort(port: number): Promise<number> {
  if (reserved.has(port) || !(await isPortFree(port))) throw new PortInUseError(port);
  reserved.add(port);
  return port;
}

/** Reserves a free port (tries random candidates below the ephemeral range, then asks the OS). */
export async function findFreePort(): Promise<number> {
  const [low, high] = candidateRange();
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (reserved.has(port)) continue;
    reserved.add(port);
    if (await isPortFree(port)) return port;
    reserved.delete(port);
  }
  const port = await osAssignedPort();
  reserved.add(port);
  return port;
}

export function releasePort(port: number): void {
  reserved.delete(port);
}

function candidateRange(): [number, number] {
  let ephemeralLow = 32768;
  try {
    const [first] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    ephemeralLow = Number(first) || ephemeralLow;
  } catch {
    // not Linux: keep the common default
  }
  return ephemeralLow > 20_000 ? [15_000, ephemeralLow - 1] : [ephemeralLow, 65_535];
}

function osAssignedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ port: 0, host: HOST }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const serverIds = new Set<number>();

/** A random server_id, distinct from every other one handed out in this process. */
export function uniqueServerId(): number {
  for (;;) {
    const id = 1000 + Math.floor(Math.random() * (2 ** 31 - 1000));
    if (!serverIds.has(id)) {
      serverIds.add(id);
      return id;
    }
  }
}

export function releaseServerId(id: number): void {
  serverIds.delete(id);
}
