// Profiles a timed part of a benchmark (this process's main thread) into a .cpuprofile file that
// Chrome DevTools or scripts/cpu-profile-top.ts reads; with no file, just runs the body.
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { dirname } from 'node:path';

export async function profiledInto<T>(file: string | undefined, body: () => Promise<T>): Promise<T> {
  if (!file) return body();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  // Finer than the default 1 ms: a run lasts seconds, and most of it waits for the server.
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  try {
    return await body();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(profile));
    console.log(`  profile: ${file}`);
  }
}
