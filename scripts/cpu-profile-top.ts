// Self time per function of a V8 .cpuprofile (node --cpu-prof), heaviest first. Code run through
// tsx is minified into one line; positions are mapped back to the .ts source through tsx's cache of
// transformed files (its source maps), so run this on the machine that took the profile.
//   npx tsx scripts/cpu-profile-top.ts PROFILE.cpuprofile [--top 25] [--by function|file]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' }, by: { type: 'string', default: 'function' } },
});
if (positionals.length !== 1) throw new Error('usage: cpu-profile-top.ts PROFILE.cpuprofile [--top N] [--by function|file]');
const profile = JSON.parse(readFileSync(positionals[0]!, 'utf8')) as Profile;

/** tsx's transformed files by source path, newest first (a changed file leaves older entries). */
function tsxCache(): Map<string, Array<{ code: string; map: SourceMap }>> {
  const out = new Map<string, Array<{ code: string; map: SourceMap; mtime: number }>>();
  const dir = join(tmpdir(), `tsx-${process.getuid?.() ?? 0}`);
  let files: string[] = [];
  try {
    files = readdirSync(dir);
  } catch {
    return new Map();
  }
  for (const f of files) {
    try {
      const path = join(dir, f);
      const entry = JSON.parse(readFileSync(path, 'utf8')) as { code?: string; map?: { sources?: string[] } };
      const source = entry.map?.sources?.[0];
      if (!entry.code || !source) continue;
      const list = out.get(source) ?? [];
      list.push({ code: entry.code, map: new SourceMap(entry.map as never), mtime: statSync(path).mtimeMs });
      out.set(source, list);
    } catch {
      // not a transform entry
    }
  }
  for (const list of out.values()) list.sort((a, b) => b.mtime - a.mtime);
  return out;
}

const cache = tsxCache();
/** The cache entry a profile used for a file: the one whose code names the profiled functions where they were sampled. */
const chosen = new Map<string, SourceMap | null>();
function mapOf(path: string): SourceMap | null {
  if (chosen.has(path)) return chosen.get(path)!;
  const candidates = cache.get(path) ?? [];
  const frames = profile.nodes.map((n) => n.callFrame).filter((f) => f.url.startsWith('file://') && fileURLToPath(f.url) === path && f.functionName);
  let best: SourceMap | null = null;
  let bestScore = -1;
  for (const c of candidates) {
    const lines = c.code.split('\n');
    const score = frames.filter((f) => (lines[f.lineNumber] ?? '').slice(Math.max(0, f.columnNumber - 40), f.columnNumber + 40).includes(f.functionName)).length;
    if (score > bestScore) {
      best = c.map;
      bestScore = score;
    }
  }
  chosen.set(path, best);
  return best;
}

const root = process.cwd();
function where(f: CallFrame): string {
  if (!f.url) return '(native)';
  if (!f.url.startsWith('file://')) return `${f.url}:${f.lineNumber + 1}`;
  const path = fileURLToPath(f.url);
  const rel = relative(root, path).replace(/^node_modules\//, '~/');
  const map = path.endsWith('.ts') ? mapOf(path) : null;
  if (map) {
    const e = map.findEntry(f.lineNumber, f.columnNumber) as { originalLine?: number };
    if (e.originalLine !== undefined) return `${rel}:${e.originalLine + 1}`;
  }
  return `${rel}:${f.lineNumber + 1}`;
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map<number, number>();
const count = new Map<number, number>();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i]!;
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
  count.set(id, (count.get(id) ?? 0) + 1);
}
const total = profile.samples.length;
let idle = 0;
const groups = new Map<string, { name: string; at: string; samples: number; us: number }>();
for (const [id, n] of count) {
  const f = byId.get(id)!.callFrame;
  if (f.functionName === '(idle)') idle += n;
  const at = where(f);
  const name = f.functionName || '(anonymous)';
  const key = values.by === 'file' ? at.replace(/:\d+$/, '') : `${name}\u0000${at}`;
  const g = groups.get(key) ?? { name: values.by === 'file' ? '' : name, at: values.by === 'file' ? at.replace(/:\d+$/, '') : at, samples: 0, us: 0 };
  g.samples += n;
  g.us += selfUs.get(id) ?? 0;
  groups.set(key, g);
}
const busy = total - idle;
let idleUs = 0;
let allUs = 0;
for (const [id, us] of selfUs) {
  allUs += us;
  if (byId.get(id)!.callFrame.functionName === '(idle)') idleUs += us;
}
console.log(
  `${positionals[0]}: ${total} samples over ${(allUs / 1000).toFixed(0)} ms, ${((busy / total) * 100).toFixed(1)}% not idle (${((allUs - idleUs) / 1000).toFixed(0)} ms of CPU on this thread); % of all samples, then % of non-idle ones`,
);
const rows = [...groups.values()].sort((a, b) => b.samples - a.samples).slice(0, Number(values.top));
rows.forEach((g, i) => {
  const pct = ((g.samples / total) * 100).toFixed(1).padStart(5);
  const busyPct = g.name === '(idle)' ? '    -' : ((g.samples / busy) * 100).toFixed(1).padStart(5);
  console.log(`${String(i + 1).padStart(3)} ${pct}% ${busyPct}%  ${(g.us / 1000).toFixed(0).padStart(6)} ms  ${g.name ? `${g.name}  ` : ''}${g.at}`);
});
