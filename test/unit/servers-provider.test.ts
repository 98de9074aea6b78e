import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { uniqueServerId } from '../../src/servers/allocation.ts';
import {
  ProviderUnavailableError,
  type RunningServer,
  dockerAnswers,
  engineFromVersion,
  instancesRoot,
  isProcessRunning,
  parseServerUrls,
  reapStaleInstances,
  selectProvider,
} from '../../src/servers/index.ts';
import { startInParallel } from '../../src/servers/parallel.ts';

const savedEnv = { ...process.env };
afterEach(() => {
  process.env = { ...savedEnv };
});

describe('choosing a provider', () => {
  it('an explicit provider wins over LWW_PROVIDER', async () => {
    process.env.LWW_PROVIDER = 'external';
    expect(await selectProvider('mysql', 'local')).toBe('local');
    expect(await selectProvider('mysql')).toBe('external');
  });

  it('with no Docker engine and no way to run servers locally, the error says what to install', async () => {
    delete process.env.LWW_PROVIDER;
    const nothing = { dockerAnswers: async () => false, canRunLocally: () => false };
    await expect(selectProvider('mariadb', undefined, nothing)).rejects.toThrow(/no Docker engine answers.*apt-get install mariadb-server-core.*LWW_PROVIDER=external/);
    await expect(selectProvider('mysql', undefined, nothing)).rejects.toThrow(/install-mysql97\.sh/);
    expect(await selectProvider('mysql', undefined, { dockerAnswers: async () => true, canRunLocally: () => true })).toBe('testcontainers');
    expect(await selectProvider('mysql', undefined, { dockerAnswers: async () => false, canRunLocally: () => true })).toBe('local');
  });

  it('an unknown LWW_PROVIDER is refused with the valid names', async () => {
    process.env.LWW_PROVIDER = 'kubernetes';
    await expect(selectProvider('mariadb')).rejects.toThrow(/local, testcontainers, external/);
  });

  it('a Docker engine is detected by its /_ping answer on DOCKER_HOST', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lww-docker-'));
    const socketPath = join(dir, 'docker.sock');
    const fake = createServer((req, res) => res.writeHead(req.url === '/_ping' ? 200 : 404).end('OK'));
    await new Promise<void>((resolve) => fake.listen(socketPath, resolve));
    try {
      process.env.DOCKER_HOST = `unix://${socketPath}`;
      expect(await dockerAnswers()).toBe(true);
      process.env.DOCKER_HOST = `unix://${join(dir, 'nothing.sock')}`;
      expect(await dockerAnswers()).toBe(false);
    } finally {
      fake.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('external servers', () => {
  it('LWW_SERVER_URLS entries become targets with defaults for port and user', () => {
    expect(parseServerUrls(' mysql://app:p%40ss@db1:3307/ , mysql://db2')).toEqual([
      { url: 'mysql://app:p%40ss@db1:3307/', host: 'db1', port: 3307, user: 'app', password: 'p@ss' },
      { url: 'mysql://db2', host: 'db2', port: 3306, user: 'root', password: '' },
    ]);
  });

  it('a URL of another scheme is refused', () => {
    expect(() => parseServerUrls('postgres://x')).toThrow(ProviderUnavailableError);
  });

  it('the engine comes from VERSION()', () => {
    expect(engineFromVersion('10.11.19-MariaDB-0+deb12u1-log')).toBe('mariadb');
    expect(engineFromVersion('9.7.4-2')).toBe('mysql');
  });
});

describe('starting several servers', () => {
  function fakeServer(id: number, destroyed: number[]): RunningServer {
    return {
      engine: 'mysql',
      host: '127.0.0.1',
      port: id,
      user: 'root',
      password: '',
      url: '',
      serverId: id,
      provider: 'local',
      halt: async () => {},
      start: async () => {},
      destroy: async () => {
        destroyed.push(id);
      },
    };
  }

  it('when one fails the others are destroyed and its error is thrown', async () => {
    const destroyed: number[] = [];
    const failing = startInParallel(3, async (i) => {
      if (i === 1) throw new Error('second failed');
      return fakeServer(i, destroyed);
    });
    await expect(failing).rejects.toThrow('second failed');
    expect(destroyed.sort()).toEqual([0, 2]);
  });

  it('server ids handed out in one process are distinct', () => {
    const ids = Array.from({ length: 1000 }, () => uniqueServerId());
    expect(new Set(ids).size).toBe(1000);
  });
});

describe('reaping instances of dead processes', () => {
  it('removes the folder but never kills a process that does not run its data dir', async () => {
    const dir = join(instancesRoot(), `mysql-unit-${process.pid}-${Date.now()}`);
    await mkdir(dir, { recursive: true });
    const bystander = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)'], { stdio: 'ignore' });
    try {
      await writeFile(join(dir, 'owner'), '999999999 0\n');
      await writeFile(join(dir, 'server.pid'), `${bystander.pid}\n`);
      expect(await reapStaleInstances()).toContain(dir);
      expect(existsSync(dir)).toBe(false);
      expect(isProcessRunning(bystander.pid!)).toBe(true);
    } finally {
      bystander.kill('SIGKILL');
    }
  });

  it('kills the server whose command line names the dead owner’s data dir', async () => {
    const dir = join(instancesRoot(), `mysql-unit-${process.pid}-${Date.now()}-k`);
    await mkdir(dir, { recursive: true });
    const server = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)', '--', `--datadir=${join(dir, 'data')}`], {
      stdio: 'ignore',
    });
    const exited = new Promise((resolve) => server.once('exit', resolve));
    await writeFile(join(dir, 'owner'), '999999999 0\n');
    await writeFile(join(dir, 'server.pid'), `${server.pid}\n`);
    await new Promise((resolve) => setTimeout(resolve, 200)); // let it exec
    await reapStaleInstances();
    await exited;
    expect(isProcessRunning(server.pid!)).toBe(false);
    expect(existsSync(dir)).toBe(false);
  });

  it('leaves instances of live owners alone', async () => {
    const dir = join(instancesRoot(), `mysql-unit-${process.pid}-${Date.now()}-live`);
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(join(dir, 'owner'), `${process.pid}\n`);
      expect(await reapStaleInstances()).not.toContain(dir);
      expect(existsSync(dir)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
