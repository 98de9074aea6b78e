// Real MySQL / MariaDB servers on demand, for tests, the harness and the CLI.
export type { Engine, HaltOptions, ProviderName, RunningServer, ServerEndpoint, StartOptions } from './types.ts';
export { endpointOf } from './types.ts';
export { DataDirInitError, PortInUseError, ProviderUnavailableError, ServerStartError, UnsupportedServerOperationError } from './errors.ts';
export { dockerAnswers, isProviderName, selectProvider, startServers } from './provider.ts';
export { type Queryable, type ServerIdentity, detectEngine, engineFromVersion, identify } from './probe.ts';
export { LocalServer, type LocalServerOptions, startLocalServers } from './local.ts';
export { instancesRoot, isProcessRunning, processStartTime, reapStaleInstances } from './local-instances.ts';
export { externalServers, parseServerUrls } from './external.ts';
export { serverFlags } from './flags.ts';
