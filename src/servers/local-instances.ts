// Bookkeeping of local instances on disk, and reaping the ones whose owner died.
//
// Each instance lives in <tmp>/mysql-lww-sink/instances/<id>/ with an `owner` file (pid and start
// time of the process that started it) and a `server.pid` file. A process killed with SIGKILL
// cannot clean up, so every provider start looks for instances whose owner is gone, stops their
// server — only after checking /proc/<pid>/cmdline names that instance's data dir — and deletes them.
import { readFileSync } from 'node:fs';
import { mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { instancePaths } from './flags.ts';
import type { Engine } from './types.ts';

export function instancesRoot(): string {
  return join(tmpdir(), 'mysql-lww-sink', 'instances');
}

/** Field 22 of /proc/<pid>/stat: tells a live owner from a later process that reused its pid. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** True while the process exists and is not a zombie waiting to be reaped. */
export function isProcessRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    if (process.platform === 'linux') return false;
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

let sequence = 0;

/** Creates a fresh instance folder owned by this process. */
export async function createInstanceDir(engine: Engine): Promise<string> {
  const id = `${engine}-${process.pid}-${++sequence}-${Math.random().toString(36).slice(2, 6)}`;
  const dir = join(instancesRoot(), id);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'owner'), `${process.pid} ${processStartTime(process.pid) ?? ''}\n`);
  return dir;
}

export function serverPidFile(dir: string): string {
  return join(dir, 'server.pid');
}

async function ownerIsAlive(dir: string): Promise<boolean | undefined> {
  const text = await readFile(join(dir, 'owner'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const [pidText, startTime] = text.trim().split(' ');
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0 || !isProcessRunning(pid)) return false;
  return !startTime || processStartTime(pid) === startTime;
}

/** True when /proc/<pid>/cmdline has exactly this data dir: never kill a pid on weaker evidence. */
function runsDataDir(pid: number, dataDir: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(`--datadir=${dataDir}`);
  } catch {
    return false;
  }
}

/** Kills the server of an instance folder, if one still runs there, and waits until it is gone. */
export async function killInstanceServer(dir: string): Promise<void> {
  const { dataDir, pidFile } = instancePaths(dir);
  const pids = new Set<number>();
  for (const file of [serverPidFile(dir), pidFile]) {
    const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    if (Number.isInteger(pid) && pid > 0) pids.add(pid);
  }
  for (const pid of pids) {
    if (!runsDataDir(pid, dataDir)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      continue;
    }
    for (let i = 0; i < 200 && isProcessRunning(pid); i++) await sleep(50);
  }
}

/** Folders that have no owner file yet may be in the middle of being created. */
const OWNERLESS_GRACE_MS = 60_000;

/** Stops and deletes instances whose owner process is gone; returns the folders removed. */
export async function reapStaleInstances(): Promise<string[]> {
  const root = instancesRoot();
  const names = await readdir(root).catch(() => [] as string[]);
  const reaped: string[] = [];
  for (const name of names) {
    const dir = join(root, name);
    const alive = await ownerIsAlive(dir);
    if (alive) continue;
    if (alive === undefined) {
      const info = await stat(dir).catch(() => undefined);
      if (!info?.isDirectory() || Date.now() - info.mtimeMs < OWNERLESS_GRACE_MS) continue;
    }
    await killInstanceServer(dir);
    await rm(dir, { recursive: true, force: true });
    reaped.push(dir);
  }
  return reaped;
}
