// The package as users get it: `npm pack`, installed into a fresh project, imported from plain Node
// ESM, type-checked by a strict TypeScript consumer (node16 and bundler resolution), its bin run.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addPackages, folderSize, installTarball, type PackedFile, packTarball, REPO } from '../helpers/package.ts';

const run = promisify(execFile);
const TSC = join(REPO, 'node_modules/typescript/bin/tsc');
const typesNode = JSON.parse(readFileSync(join(REPO, 'node_modules/@types/node/package.json'), 'utf8')) as { version: string };

const CONSUMER_TS = `import { createSink, parseVersion, type Sink, type SinkOptionsInput } from 'mysql-lww-sink';

const options: SinkOptionsInput = { target: 'mysql://app@127.0.0.1:3306/' };
const sink: Sink = createSink(options);
const version: bigint = parseVersion('1843000000000001025');
// @ts-expect-error the declarations are real types: a number is not a target
createSink({ target: 42 });
export { sink, version };
`;

function tsconfig(moduleResolution: 'node16' | 'bundler'): string {
  return JSON.stringify({
    compilerOptions: {
      strict: true,
      noEmit: true,
      skipLibCheck: false,
      target: 'ES2022',
      module: moduleResolution === 'node16' ? 'node16' : 'ESNext',
      moduleResolution,
      types: ['node'],
    },
    files: ['consumer.ts'],
  });
}

describe('the packed package', () => {
  let dir = '';
  let project = '';
  let files: PackedFile[] = [];

  beforeAll(async () => {
    const packed = await packTarball();
    dir = packed.dir;
    files = packed.files;
    project = await installTarball(packed.tarball, dir);
  }, 300_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('ships compiled JavaScript, declarations, the bin and the SQL templates, and no tests or TypeScript sources', () => {
    const paths = files.map((f) => f.path);
    expect(paths).toContain('dist/index.js');
    expect(paths).toContain('dist/index.d.ts');
    expect(paths).toContain('dist/cli/main.js');
    expect(paths).toContain('bin/lww-sink.js');
    expect(paths).toContain('sql/triggers.sql');
    expect(paths.filter((p) => p.startsWith('test/') || p.startsWith('src/') || (p.endsWith('.ts') && !p.endsWith('.d.ts')))).toEqual([]);
  });

  it('installs for production without tsx or testcontainers, under 30 MB', async () => {
    const modules = join(project, 'node_modules');
    const names = (await run('npm', ['ls', '--all', '--parseable'], { cwd: project })).stdout;
    expect(names).not.toMatch(/node_modules\/(tsx|testcontainers|typescript|vitest)$/m);
    const { bytes, packages } = await folderSize(modules);
    console.log(`production install: ${(bytes / 1e6).toFixed(1)} MB in ${packages} packages`);
    expect(bytes).toBeLessThan(30e6);
  });

  it('is imported from plain Node ESM', async () => {
    const script = `import { createSink, parseVersion } from 'mysql-lww-sink'; console.log(typeof createSink, parseVersion('7').toString());`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: project });
    expect(stdout.trim()).toBe('function 7');
  });

  it('type-checks a strict TypeScript consumer with node16 and with bundler resolution', async () => {
    await addPackages(project, [`@types/node@${typesNode.version}`]);
    await writeFile(join(project, 'consumer.ts'), CONSUMER_TS);
    for (const resolution of ['node16', 'bundler'] as const) {
      await writeFile(join(project, `tsconfig.${resolution}.json`), tsconfig(resolution));
      const result = await run(process.execPath, [TSC, '-p', `tsconfig.${resolution}.json`], { cwd: project }).then(
        () => '',
        (e: { stdout?: string }) => e.stdout ?? String(e),
      );
      expect(result, `tsc (${resolution})`).toBe('');
    }
  });

  it('runs `lww-sink --version` from the installed bin', async () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const { stdout } = await run(join(project, 'node_modules/.bin/lww-sink'), ['--version'], { cwd: project });
    expect(stdout.trim()).toBe(pkg.version);
  });
});
