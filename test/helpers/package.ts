// Packs this repository with `npm pack` (which builds dist/ through `prepack`) and installs the
// tarball into a fresh temporary project, as a user would (from the npm cache when it has the
// dependencies). Used by the packing test and by scripts/measure-package.ts.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { builtIsCurrent } from '../../src/harness/built-cli.ts';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
const NPM_FLAGS = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

export interface PackedFile {
  path: string;
  size: number;
}

/** `npm pack` into a new temporary folder: the tarball path and the files it holds. */
export async function packTarball(): Promise<{ dir: string; tarball: string; files: PackedFile[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'lww-pack-'));
  // A current dist/ (npm test builds first) is packed as it is: `prepack` would delete and rebuild it
  // while other test files run the compiled CLI from it.
  const current = builtIsCurrent(join(REPO, 'dist/index.js'), join(REPO, 'src'));
  const flags = ['pack', '--json', '--pack-destination', dir, '--loglevel=error', ...(current ? ['--ignore-scripts'] : [])];
  const { stdout } = await run('npm', flags, { cwd: REPO, maxBuffer: 64 << 20 });
  const [info] = JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string; files: PackedFile[] }[];
  return { dir, tarball: join(dir, info!.filename), files: info!.files };
}

/** A new project folder with the tarball installed for production (no dev dependencies). */
export async function installTarball(tarball: string, parent: string, name = 'consumer'): Promise<string> {
  const project = join(parent, name);
  await run('mkdir', ['-p', project]);
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: `lww-${name}`, private: true, type: 'module' }));
  await run('npm', ['install', '--omit=dev', ...NPM_FLAGS, tarball], { cwd: project, maxBuffer: 64 << 20 });
  return project;
}

/** Adds packages (e.g. @types/node) to a project, from the npm cache when it has them. */
export async function addPackages(project: string, specs: string[]): Promise<void> {
  await run('npm', ['install', '--no-save', ...NPM_FLAGS, ...specs], { cwd: project, maxBuffer: 64 << 20 });
}

/** Bytes and package count under a node_modules folder. */
export async function folderSize(dir: string): Promise<{ bytes: number; packages: number }> {
  let bytes = 0;
  let packages = 0;
  const walk = async (d: string): Promise<void> => {
    for (const entry of await readdir(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) await walk(p);
      else if (entry.isFile()) {
        bytes += (await stat(p)).size;
        if (entry.name === 'package.json' && /node_modules\/(@[^/]+\/)?[^/@]+\/package\.json$/.test(p)) packages++;
      }
    }
  };
  await walk(dir);
  return { bytes, packages };
}
