// Local provider: mysqld / mariadbd processes on this machine, one throwaway folder each.
//
// Servers are spawned detached with their output going to files (never pipes), so a server keeps
// running if this process is killed; such leftovers are reaped by the next provider start. A
// normally ending process kills and deletes its servers from an exit hook.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, rmSync } from 'node:fs';
import { cp, mkdir, rm, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { claimPort, findFreePort, isPortFree, releasePort, releaseServerId, uniqueServerId } from './allocation.ts';
import { PortInUseError, ServerStartError, UnsupportedServerOperationError } from './errors.ts';
import { type InstancePaths, instancePaths, localServerArgs } from './flags.ts';
import { type EngineBinaries, ensureBinaries, ensureTemplate, tailOfLogs } from './local-binaries.ts';
import { createInstanceDir, reapStaleInstances, serverPidFile } from './local-instances.ts';
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

const HOST = '127.0.0.1';
const DEFAULT_START_TIMEOUT_MS = 60_000;
const HALT_TIMEOUT_MS = 60_000;
const ADDRESS_IN_USE = /Address already in use|Bind on TCP\/IP port|Can't start server: Bind/;

export interface LocalServerOptions {
  engine: Engine;
  /** A fixed loopback port; PortInUseError when taken. Default: a free port. */
  port?: number;
  extraArgs?: string[];
  startTimeoutMs?: number;
}

/** Servers of this process not yet destroyed (the exit hook kills them). */
const live = new Set<LocalServer>();

export class LocalServer implements RunningServer {
  readonly provider = 'local' as const;
  readonly host = HOST;
  readonly user = 'root';
  readonly password = '';
  port = 0;
  url = '';
  readonly paths: InstancePaths;
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private exitStatus: string | undefined = 'not started';
  private destroying: Promise<void> | undefined;

  private constructor(
    readonly engine: Engine,
    readonly serverId: number,
    dir: string,
    private readonly bin: EngineBinaries,
    private readonly extraArgs: string[],
    private readonly startTimeoutMs: number,
  ) {
    this.paths = instancePaths(dir);
  }

  /** Copies the engine's template data dir into a fresh instance folder and starts the server. */
  static async create(options: LocalServerOptions): Promise<LocalServer> {
    const bin = await ensureBinaries(options.engine);
    const template = await ensureTemplate(bin);
    const dir = await createInstanceDir(options.engine);
    const server = new LocalServer(
      options.engine,
      uniqueServerId(),
      dir,
      bin,
      options.extraArgs ?? [],
      options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS,
    );
    live.add(server);
    installExitCleanup();
    try {
      await cp(template, server.paths.dataDir, { recursive: true });
      await mkdir(server.paths.filesDir);
      await mkdir(server.paths.tmpDir);
      for (let attempt = 1; ; attempt++) {
        server.setPort(options.port === undefined ? await findFreePort() : await claimPort(options.port));
        try {
          await server.launch();
          return server;
        } catch (e) {
          if (!(e instanceof ServerStartError && ADDRESS_IN_USE.test(e.logTail))) throw e;
          if (options.port !== undefined) throw new PortInUseError(options.port);
          if (attempt >= 5) throw e;
          // Another process took the port between our check and the server's bind: try another.
          releasePort(server.port);
          await Promise.all([writeFile(server.paths.errorLog, ''), writeFile(server.paths.consoleLog, '')]);
        }
      }
    } catch (e) {
      await server.destroy();
      throw e;
    }
  }

  get dir(): string {
    return this.paths.dir;
  }

  /** The server's process id while it runs. */
  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  get running(): boolean {
    return this.child !== undefined && this.exitStatus === undefined;
  }

  toJSON(): ServerEndpoint {
    return endpointOf(this);
  }

  async start(): Promise<void> {
    if (this.destroying) {
      throw new UnsupportedServerOperationError(`${this.engine} server ${this.url} was destroyed and cannot start again`);
    }
    if (this.running) return;
    if (!(await isPortFree(this.port))) throw new PortInUseError(this.port);
    await this.launch();
  }

  async halt(options: HaltOptions = {}): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    // The child is unref'd so it never keeps a process alive; waiting for its exit must.
    child.ref();
    child.kill(options.abrupt ? 'SIGKILL' : 'SIGTERM');
    if (!(await settlesWithin(this.exited, HALT_TIMEOUT_MS))) {
      child.kill('SIGKILL');
      await this.exited;
    }
  }

  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      if (this.running) {
        // The data is thrown away, so there is nothing to shut down cleanly.
        this.child?.ref();
        this.child?.kill('SIGKILL');
        await this.exited;
      }
      await rm(this.paths.dir, { recursive: true, force: true });
      live.delete(this);
      releasePort(this.port);
      releaseServerId(this.serverId);
    })();
    return this.destroying;
  }

  /** For the exit hook, where nothing asynchronous runs any more. */
  destroySync(): void {
    if (this.running && this.child?.pid) {
      try {
        process.kill(this.child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    rmSync(this.paths.dir, { recursive: true, force: true });
    live.delete(this);
  }

  private setPort(port: number): void {
    this.port = port;
    this.url = `mysql://${this.user}:${this.password}@${HOST}:${port}/`;
  }

  private async launch(): Promise<void> {
    const args = localServerArgs({
      engine: this.engine,
      serverId: this.serverId,
      port: this.port,
      paths: this.paths,
      messagesDir: this.bin.messagesDir,
      runAsRoot: process.getuid?.() === 0,
      extraArgs: this.extraArgs,
    });
    const out = openSync(this.paths.consoleLog, 'a');
    let child: ChildProcess;
    try {
      child = spawn(this.bin.command, [...this.bin.prefixArgs, ...args], { detached: true, stdio: ['ignore', out, out] });
    } finally {
      closeSync(out);
    }
    this.child = child;
    this.exitStatus = undefined;
    this.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitStatus = signal ? `killed by ${signal}` : `exited with code ${code}`;
        resolve();
      });
      child.once('error', (e) => {
        this.exitStatus = `could not be spawned (${e.message})`;
        resolve();
      });
    });
    child.unref();
    if (child.pid) await writeFile(serverPidFile(this.paths.dir), `${child.pid}\n`);
    await this.waitUntilReady();
  }

  /** Polls over TCP until our server (checked by server_id) answers, it exits, or time runs out. */
  private async waitUntilReady(): Promise<void> {
    const deadline = Date.now() + this.startTimeoutMs;
    let lastError = 'no attempt yet';
    for (;;) {
      if (!this.running) throw await this.startError(`the server process ${this.exitStatus}`);
      try {
        const { serverId } = await identify(this);
        if (serverId === this.serverId) return;
        lastError = `another server (server_id ${serverId}) answers on port ${this.port}`;
      } catch (e) {
        lastError = (e as Error).message;
      }
      if (Date.now() > deadline) {
        this.child?.kill('SIGKILL');
        await this.exited;
        throw await this.startError(`no connection within ${this.startTimeoutMs / 1000} s (last error: ${lastError})`);
      }
      await sleep(100);
    }
  }

  private async startError(reason: string): Promise<ServerStartError> {
    const tail = await tailOfLogs([this.paths.consoleLog, this.paths.errorLog]);
    return new ServerStartError(this.engine, this.port, reason, tail);
  }
}

/** Starts `count` local servers in parallel, after reaping instances left by dead processes. */
export async function startLocalServers(options: StartOptions): Promise<LocalServer[]> {
  const count = options.count ?? 1;
  if (options.ports && options.ports.length !== count) {
    throw new RangeError(`${options.ports.length} ports given for ${count} servers`);
  }
  await reapStaleInstances();
  return startInParallel(count, (i) =>
    LocalServer.create({
      engine: options.engine,
      port: options.ports?.[i],
      extraArgs: options.extraArgs,
      startTimeoutMs: options.startTimeoutMs,
    }),
  );
}

function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  return Promise.race([promise.then(() => true), timeout]).finally(() => clearTimeout(timer));
}

let cleanupInstalled = false;

function installExitCleanup(): void {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  process.once('exit', () => {
    for (const server of [...live]) server.destroySync();
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      // Another listener (e.g. `lww-sink servers up`) owns this signal and destroys its servers;
      // such a listener must stay registered until it has done so.
      if (process.listenerCount(signal) > 1) return;
      for (const server of [...live]) server.destroySync();
      process.removeListener(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}
