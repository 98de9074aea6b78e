// One CLI convention: --version, the exit-code table applied by every command, flags and config
// checked before anything starts (no server is needed for any of these).
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyConfig, splitNodeList } from '../../src/cli/config.ts';
import { parseWorkloadFlags, workloadFlagOptions } from '../../src/cli/workload-flags.ts';
import { CLI_NODE_ARGS, ReplicatorProcess } from '../../src/harness/replicator-process.ts';
import { parseArgs } from 'node:util';

function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI_NODE_ARGS, ...args], { env: { ...process.env, LWW_NODES: '', LWW_URL: '', ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

let dir = '';
let closedPort = 0;
let busy: Server;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lww-cli-'));
  // A port nothing listens on (bound, then closed) and one that is taken.
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
  closedPort = (probe.address() as { port: number }).port;
  await new Promise<void>((r) => probe.close(() => r()));
  busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
});
afterAll(async () => {
  busy?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('lww-sink conventions', () => {
  it('--version prints the package version; --help lists the exit codes', async () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const [version, help, checkHelp] = await Promise.all([cli(['--version']), cli(['--help']), cli(['check', '--help'])]);
    expect(version).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
    for (const h of [help, checkHelp]) {
      expect(h.code).toBe(0);
      expect(h.stdout).toMatch(/^\s+3\s+connection/m);
      expect(h.stdout).toMatch(/^\s+130\s+interrupted/m);
    }
  });

  it('exits 2 on a bad flag and 3 when a node cannot be reached, in every command that connects', async () => {
    const down = `mysql://app:pw-not-shown@127.0.0.1:${closedPort}/`;
    const down2 = `mysql://app:pw-not-shown@localhost:${closedPort}/`;
    const runs = await Promise.all([
      cli(['check', '--bogus']),
      cli(['sync', '--chunk-rows', 'x', '--node', down, '--node', down]),
      cli(['replicate', '--progress-interval', 'soon', '--node', down, '--node', down]),
      cli(['audit', '--node', down]),
      cli(['install', '--url', down]),
      cli(['check', '--log-format', 'yaml', '--node', down, '--node', down2]),
      cli(['check', '--node', down, '--node', down2], { LOG_LEVEL: 'loud' }),
      cli(['check', '--node', down, '--node', down]),
      cli(['audit', '--node', down, '--node', down, '--since', '2026-01-01T00:00:00Z']),
      cli(['sync', '--node', down, '--node', down2, '--quiet']),
      // replicate retries unreachable nodes for --start-timeout (default 30 s) before exit 3.
      cli(['replicate', '--start-timeout', '2', '--node', down, '--node', down]),
      cli(['install', '--url', down, '--node-id', '1', '--schema', 'shop']),
    ]);
    expect(runs.map((r) => r.code)).toEqual([2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3]);
    for (const r of runs) expect(r.stdout + r.stderr).not.toContain('pw-not-shown');
  });

  it('checks the metrics address before replication starts (a taken port is a usage error)', async () => {
    const port = (busy.address() as { port: number }).port;
    const down = `mysql://root@127.0.0.1:${closedPort}/`;
    const r = await cli(['replicate', '--metrics-addr', `127.0.0.1:${port}`], { LWW_NODES: `${down},${down}` });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--metrics-addr');
  });

  it('rejects a config file naming the field that is wrong', async () => {
    const file = join(dir, 'bad.json');
    await writeFile(file, JSON.stringify({ nodes: [{ host: 'db1', port: 'x' }, { url: 'mysql://a@b/', user: 'u' }], metaSchema: 5 }));
    const r = await cli(['check', '--config', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('nodes[0].port');
    expect(r.stderr).toContain('nodes[1]');
    expect(r.stderr).toContain('metaSchema');
  });

  it('deprecated flag names still work, with a warning', async () => {
    const down = `mysql://root@127.0.0.1:${closedPort}/`;
    const r = await cli(['check', '--chunk-size', '100', '--node', down, '--node', down]);
    expect(r.stderr).toContain('--chunk-size is deprecated; use --chunk-rows');
    expect(r.code).toBe(3);
    const { values } = parseArgs({ args: ['--tables', '3'], options: workloadFlagOptions });
    expect(parseWorkloadFlags(values).workload.tables).toBe(3);
  });
});

describe('Ctrl-C', () => {
  it('during install or sync says what stays and to rerun, and exits 130', async () => {
    const interrupt = new URL('../../src/cli/interrupt.ts', import.meta.url).pathname;
    const script = `import { announceInterrupt } from '${interrupt}'; announceInterrupt('sync', 'every chunk merged so far is committed'); console.log('ready'); setInterval(() => {}, 1000);`;
    const child = execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]);
    let stderr = '';
    child.stderr!.on('data', (d) => {
      stderr += String(d);
    });
    await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(stderr).toBe('lww-sink sync: interrupted (SIGINT); every chunk merged so far is committed; rerun to finish\n');
  });
});

describe('nodes from a config file and the environment', () => {
  it('the harness hands its replicator child the node URLs through the environment, never argv', async () => {
    const logs: string[] = [];
    const nodes = [`mysql://app:pw-not-shown@127.0.0.1:${closedPort}/`, `mysql://app:pw-not-shown@localhost:${closedPort}/`];
    const p = new ReplicatorProcess({ nodes, onLog: (l) => logs.push(l), extraArgs: ['--start-timeout', '2'] });
    p.start();
    const child = Reflect.get(p, 'child') as { spawnargs: string[] };
    const exited = Reflect.get(p, 'exit') as Promise<number | null>;
    expect(child.spawnargs.join(' ')).not.toContain('pw-not-shown');
    const code = await exited;
    expect(code).toBe(3); // it did read the nodes (from LWW_NODES) and could not reach them
    expect(logs.join('\n')).toContain('app:***@127.0.0.1');
    expect(logs.join('\n')).not.toContain('pw-not-shown');
  });

  it('turns config nodes (password from a variable) into --node values; command-line flags win', async () => {
    const file = join(dir, 'nodes.json');
    await writeFile(
      file,
      JSON.stringify({
        nodes: [{ host: 'db1', user: 'app', passwordEnv: 'DB_PW' }, 'mysql://app@db2:3307/'],
        tables: ['shop.orders', 'shop.items'],
        options: { check: { 'max-findings': 5, json: true } },
      }),
    );
    const argv = applyConfig('check', ['--config', file, '--max-findings', '9'], { DB_PW: 'a/b@c' });
    expect(argv).toEqual(['--node', 'mysql://app:a%2Fb%40c@db1:3306/', '--node', 'mysql://app@db2:3307/', '--tables', 'shop.orders,shop.items', '--json', '--max-findings', '9']);
    expect(() => applyConfig('check', ['--config', file], {})).toThrow(/nodes\[0\]\.passwordEnv: variable DB_PW is not set/);
  });

  it('reads LWW_NODES (commas inside passwords kept) and LWW_URL', () => {
    expect(splitNodeList('mysql://a:x,y@h1/, mysql://b@h2/ mariadb://c@h3/')).toEqual(['mysql://a:x,y@h1/', 'mysql://b@h2/', 'mariadb://c@h3/']);
    expect(applyConfig('sync', ['--quiet'], { LWW_NODES: 'mysql://a@h1/,mysql://b@h2/' })).toEqual(['--node', 'mysql://a@h1/', '--node', 'mysql://b@h2/', '--quiet']);
    expect(applyConfig('install', ['--node-id', '1'], { LWW_URL: 'mysql://a@h1/' })).toEqual(['--url', 'mysql://a@h1/', '--node-id', '1']);
    expect(applyConfig('check', ['--node', 'mysql://x@h/'], { LWW_NODES: 'mysql://a@h1/' })).toEqual(['--node', 'mysql://x@h/']);
  });
});
