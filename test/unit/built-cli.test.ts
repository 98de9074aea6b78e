// The harness and the tests run the compiled CLI only when it was built after every source change.
import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { builtIsCurrent } from '../../src/harness/built-cli.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function tree(srcAt: number, builtAt: number | undefined): Promise<{ built: string; src: string }> {
  const root = await mkdtemp(join(tmpdir(), 'lww-built-'));
  dirs.push(root);
  const src = join(root, 'src');
  await mkdir(join(src, 'cli'), { recursive: true });
  const file = join(src, 'cli', 'main.ts');
  await writeFile(file, 'x');
  for (const p of [file, join(src, 'cli'), src]) await utimes(p, srcAt, srcAt);
  const built = join(root, 'main.js');
  if (builtAt !== undefined) {
    await writeFile(built, 'y');
    await utimes(built, builtAt, builtAt);
  }
  return { built, src };
}

it('is current only when built after the newest source file, nested directories included', async () => {
  const fresh = await tree(1_000, 2_000);
  expect(builtIsCurrent(fresh.built, fresh.src)).toBe(true);
  const stale = await tree(3_000, 2_000);
  expect(builtIsCurrent(stale.built, stale.src)).toBe(false);
  // One nested file edited after the build makes it stale.
  await utimes(join(fresh.src, 'cli', 'main.ts'), 5_000, 5_000);
  expect(builtIsCurrent(fresh.built, fresh.src)).toBe(false);
});

it('is not current when nothing was built or the sources cannot be read', async () => {
  const none = await tree(1_000, undefined);
  expect(builtIsCurrent(none.built, none.src)).toBe(false);
  const fresh = await tree(1_000, 2_000);
  expect(builtIsCurrent(fresh.built, join(fresh.src, 'missing'))).toBe(false);
});
