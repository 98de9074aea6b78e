// Errors of the server providers: each says what failed and what to do about it.
import { LwwError } from '../errors.ts';
import type { Engine } from './types.ts';

/** A server process exited or never answered; carries the tail of its log (its folder is removed). */
export class ServerStartError extends LwwError {
  constructor(
    readonly engine: Engine,
    readonly port: number,
    reason: string,
    readonly logTail: string,
  ) {
    super(`${engine} server on 127.0.0.1:${port} did not start: ${reason}\nlast lines of its log:\n${logTail || '(log is empty)'}`);
  }
}

/** The caller asked for a port that something else already listens on. */
export class PortInUseError extends LwwError {
  constructor(readonly port: number) {
    super(`port ${port} on 127.0.0.1 is already in use; choose another port or stop what listens there`);
  }
}

/** No provider can start the requested servers on this machine; says what to install. */
export class ProviderUnavailableError extends LwwError {}

/** The operation exists for servers this process controls, not for the chosen provider. */
export class UnsupportedServerOperationError extends LwwError {}

/** Creating the initial data directory of an engine failed; carries the tail of the init log. */
export class DataDirInitError extends LwwError {
  constructor(
    readonly engine: Engine,
    readonly logPath: string,
    readonly logTail: string,
  ) {
    super(`initializing a ${engine} data directory failed; last lines of ${logPath}:\n${logTail || '(log is empty)'}`);
  }
}
