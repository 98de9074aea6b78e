// Which provider starts the servers, decided in one place:
// explicit option, else LWW_PROVIDER, else testcontainers when a Docker engine answers, else local.
import { request } from 'node:http';
import { ProviderUnavailableError } from './errors.ts';
import { externalServers } from './external.ts';
import { canRunLocally, installHint } from './local-binaries.ts';
import { startLocalServers } from './local.ts';
import type { Engine, ProviderName, RunningServer, StartOptions } from './types.ts';

const PROVIDERS: readonly ProviderName[] = ['local', 'testcontainers', 'external'];

export function isProviderName(value: string): value is ProviderName {
  return (PROVIDERS as readonly string[]).includes(value);
}

/** True when a Docker engine answers GET /_ping (DOCKER_HOST, else the default socket) within ~1 s. */
export function dockerAnswers(timeoutMs = 1000): Promise<boolean> {
  const dockerHost = process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock';
  let target: { socketPath: string } | { host: string; port: number };
  if (dockerHost.startsWith('unix://')) {
    target = { socketPath: dockerHost.slice('unix://'.length) };
  } else if (dockerHost.startsWith('tcp://')) {
    const u = new URL(dockerHost.replace(/^tcp:/, 'http:'));
    target = { host: u.hostname, port: Number(u.port) || 2375 };
  } else {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const req = request({ ...target, path: '/_ping', method: 'GET', timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve(false));
    req.end();
  });
}

export interface ProviderProbes {
  dockerAnswers(): Promise<boolean>;
  canRunLocally(engine: Engine): boolean;
}

const machineProbes: ProviderProbes = { dockerAnswers: () => dockerAnswers(), canRunLocally };

/** The provider to use for `engine`; throws ProviderUnavailableError saying what to install. */
export async function selectProvider(engine: Engine, explicit?: ProviderName, probes: ProviderProbes = machineProbes): Promise<ProviderName> {
  const chosen = explicit ?? process.env.LWW_PROVIDER;
  if (chosen) {
    if (!isProviderName(chosen)) {
      throw new ProviderUnavailableError(`LWW_PROVIDER must be one of ${PROVIDERS.join(', ')} (got "${chosen}")`);
    }
    return chosen;
  }
  if (await probes.dockerAnswers()) return 'testcontainers';
  if (probes.canRunLocally(engine)) return 'local';
  throw new ProviderUnavailableError(
    `cannot start ${engine} servers: no Docker engine answers and no local ${engine} binaries can be found or installed. ` +
      `Either start Docker, or ${installHint(engine)}, or set LWW_PROVIDER=external with LWW_SERVER_URLS.`,
  );
}

/** Starts `count` (default 1) servers of one engine, in parallel; all or nothing. */
export async function startServers(options: StartOptions): Promise<RunningServer[]> {
  const provider = await selectProvider(options.engine, options.provider);
  switch (provider) {
    case 'local':
      return startLocalServers(options);
    case 'external':
      return externalServers(options);
    case 'testcontainers': {
      const { startContainerServers } = await import('./testcontainers.ts');
      return startContainerServers(options);
    }
  }
}
