import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLI_NODE_ARGS } from '../../src/harness/replicator-process.ts';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI_NODE_ARGS, ...args], { cwd: REPO }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('lww-sink command line', () => {
  it('--help lists the commands', async () => {
    const { code, stdout } = await cli('--help');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^\s+servers\s+start throwaway/m);
  });

  it('an unknown command is named and exits with 2', async () => {
    const { code, stderr } = await cli('frobnicate');
    expect(code).toBe(2);
    expect(stderr).toContain('unknown command "frobnicate"');
  });

  it('servers up refuses a bad engine or count before starting anything', async () => {
    const { code, stderr } = await cli('servers', 'up', '--engine', 'oracle', '--count', '0');
    expect(code).toBe(2);
    expect(stderr).toContain('--engine must be mysql or mariadb');
    expect(stderr).toContain('--count must be a positive integer');
  });
});
