// Prints what a user gets from the packed package: production install size (npm install --omit=dev
// of the tarball in a fresh project) and how long `lww-sink --help` takes to start (median of 7).
//   npm run measure:package
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { folderSize, installTarball, packTarball } from '../test/helpers/package.ts';

const packed = await packTarball();
try {
  const project = await installTarball(packed.tarball, packed.dir);
  const { bytes, packages } = await folderSize(join(project, 'node_modules'));
  const bin = join(project, 'node_modules/.bin/lww-sink');
  const times: number[] = [];
  for (let i = 0; i < 7; i++) {
    const start = process.hrtime.bigint();
    execFileSync(bin, ['--help'], { stdio: 'ignore' });
    times.push(Number(process.hrtime.bigint() - start) / 1e9);
  }
  times.sort((a, b) => a - b);
  console.log(`tarball: ${packed.files.length} files`);
  console.log(`production install: ${(bytes / 1e6).toFixed(1)} MB in ${packages} packages (aim < 30 MB)`);
  console.log(`lww-sink --help: ${times[3]!.toFixed(3)} s median of 7 (min ${times[0]!.toFixed(3)} s; aim < 0.5 s)`);
} finally {
  rmSync(packed.dir, { recursive: true, force: true });
}
