// Testcontainers provider: the same servers (same flags) as Docker containers.
//
// `testcontainers` is imported only when this provider is used. The host port is fixed per
// container (a free local port) so that halt() + start() keep it, as with local servers; this
// assumes the Docker engine runs on this machine, which is when selectProvider() picks it.
import type { StartedTestContainer } from 'testcontainers';
import { findFreePort, releasePort, releaseServerId, uniqueServerId } from './allocation.ts';
import { ServerStartError } from './errors.ts';
import { serverFlags } from './flags.ts';
import { startInParallel } from './parallel.ts';
import { identify } from './probe.ts';
import {
  type Engine,
  type HaltOptions,
  type RunningServer,
  type ServerEndpoint,
  type StartOptions,
  endpointOf,
} from './types.ts';

const IMAGES: Record<Engine, string> = { mysql: 'mysql:9.7', mariadb: 'mariadb:10.11' };
const ENVIRONMENT: Record<Engine, Record<string, string>> = {
  mysql: { MYSQL_ALLOW_EMPTY_PASSWORD: 'yes', MYSQL_ROOT_HOST: '%' },
  mariadb: { MARIADB_ALLOW_EMPTY_ROOT_PASSWORD: '1', MARIADB_ROOT_HOST: '%' },
};
const DEFAULT_START_TIMEOUT_MS = 180_000;

class ContainerServer implements RunningServer {
  readonly provider = 'testcontainers' as const;
  readonly user = 'root';
  readonly password = '';
  readonly url: string;
  private destroying: Promise<void> | undefined;

  constructor(
    readonly engine: Engine,
    readonly host: string,
    readonly port: number,
    readonly serverId: number,
    private readonly container: StartedTestContainer,
    private readonly startTimeoutMs: number,
  ) {
    this.url = `mysql://${this.user}:${this.password}@${host}:${port}/`;
  }

  toJSON(): ServerEndpoint {
    return endpointOf(this);
  }

  async halt(options: HaltOptions = {}): Promise<void> {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const client = await getContainerRuntimeClient();
    await client.container.stop(client.container.getById(this.container.getId()), { timeout: options.abrupt ? 0 : 60 });
  }

  async start(): Promise<void> {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const client = await getContainerRuntimeClient();
    const container = client.container.getById(this.container.getId());
    if ((await client.container.inspect(container)).State.Running) return;
    await client.container.start(container);
    await this.waitUntilReady();
  }

  /** Polls until our server (checked by server_id) answers on the mapped port. */
  async waitUntilReady(): Promise<void> {
    const deadline = Date.now() + this.startTimeoutMs;
    let lastError = '';
    while (Date.now() < deadline) {
      try {
        if ((await identify(this)).serverId === this.serverId) return;
        lastError = 'another server answers';
      } catch (e) {
        lastError = (e as Error).message;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new ServerStartError(this.engine, this.port, `no connection (last error: ${lastError})`, await this.logTail());
  }

  private async logTail(): Promise<string> {
    try {
      // The log stream follows the container, so read what arrives within a second.
      const stream = await this.container.logs({ tail: 20 });
      const chunks: string[] = [];
      stream.on('data', (chunk) => chunks.push(String(chunk)));
      await new Promise((resolve) => {
        stream.once('end', resolve);
        stream.once('error', resolve);
        setTimeout(resolve, 1000).unref();
      });
      stream.destroy();
      return chunks.join('');
    } catch {
      return '';
    }
  }

  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      await this.container.stop({ remove: true, removeVolumes: true, timeout: 0 });
      releasePort(this.port);
      releaseServerId(this.serverId);
    })();
    return this.destroying;
  }
}

async function startContainer(options: StartOptions): Promise<ContainerServer> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const serverId = uniqueServerId();
  const port = options.ports?.[0] ?? (await findFreePort());
  const timeout = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  const container = await new GenericContainer(IMAGES[options.engine])
    .withEnvironment(ENVIRONMENT[options.engine])
    .withCommand([...serverFlags(options.engine, serverId), ...(options.extraArgs ?? [])])
    .withExposedPorts({ container: 3306, host: port })
    .withWaitStrategy(Wait.forListeningPorts())
    .withStartupTimeout(timeout)
    .start();
  const server = new ContainerServer(options.engine, container.getHost(), port, serverId, container, timeout);
  try {
    await server.waitUntilReady();
  } catch (e) {
    await server.destroy();
    throw e;
  }
  return server;
}

export function startContainerServers(options: StartOptions): Promise<RunningServer[]> {
  return startInParallel(options.count ?? 1, (i) =>
    startContainer({ ...options, ports: options.ports?.[i] === undefined ? undefined : [options.ports[i]] }),
  );
}
