// Whether a compiled file is newer than every source file it was built from (mtimes; when unsure: no).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function builtIsCurrent(builtFile: string, sourceRoot: string): boolean {
  let builtAt: number;
  try {
    builtAt = statSync(builtFile).mtimeMs;
  } catch {
    return false;
  }
  try {
    return newestMtime(sourceRoot) < builtAt;
  } catch {
    return false;
  }
}

function newestMtime(dir: string): number {
  let newest = statSync(dir).mtimeMs;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}
