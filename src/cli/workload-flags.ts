// Flags shared by the harness, compare and demo commands: workload shape, faults, engine.
import type { ParseArgsConfig } from 'node:util';
import { type Fault, parseDuration, parseFault } from '../harness/faults.ts';
import { LARGE_TX_ROWS_MAX } from '../harness/session-shapes.ts';
import type { WorkloadKind, WorkloadOptions } from '../harness/workload.ts';
import type { Engine } from '../servers/index.ts';

export const workloadFlagOptions = {
  engine: { type: 'string', default: 'mysql' },
  workload: { type: 'string', default: 'hot_keys' },
  'table-count': { type: 'string' },
  /** Deprecated name of --table-count (elsewhere --tables is a list of tables). */
  tables: { type: 'string' },
  rows: { type: 'string', default: '200' },
  threads: { type: 'string', default: '8' },
  duration: { type: 'string', default: '2m' },
  transactions: { type: 'string' },
  seed: { type: 'string', default: '1' },
  'hot-keys': { type: 'string', default: '16' },
  'key-skew': { type: 'string', default: '1' },
  fault: { type: 'string', multiple: true },
  'all-faults': { type: 'boolean', default: false },
  json: { type: 'boolean', default: false },
  isolation: { type: 'string', default: 'repeatable-read' },
  'explicit-tx': { type: 'boolean', default: false },
  'schema-gen': { type: 'string' },
  'large-tx': { type: 'string' },
  'large-tx-rows': { type: 'string' },
  ddl: { type: 'boolean', default: false },
  'refused-settings': { type: 'boolean', default: false },
} satisfies ParseArgsConfig['options'];

export const WORKLOAD_HELP = `  --engine mysql|mariadb        servers to start (default mysql)
  --workload KIND               hot_keys | oltp_write_only | oltp_update_non_index (default hot_keys)
  --table-count N --rows N      tables and rows per table (default 2 × 200; --tables N is a deprecated name)
  --threads N                   writers per node (default 8)
  --duration D                  e.g. 30s, 2m (default 2m)
  --transactions N              stop each writer after N transactions (or at the duration, if sooner)
  --seed N                      workload seed (default 1)
  --hot-keys N                  keys per table the hot-key writers fight over (default 16)
  --key-skew X                  1 = uniform, larger = more weight on low ids (default 1)
  --fault TERM                  repeatable: kill@20s | net:n1@30s/10s~30s | restart:n2@45s/3s | skew:n1@0s=-5s;
                                net takes :drop (FIN), :reset (RST) or :blackhole (silent until healed), restart
                                :clean (SIGTERM) or :abrupt (SIGKILL, crash recovery); without one they alternate;
                                net:n1:writers@30s/5s cuts the writers' connections to n1 instead of the replicator's;
                                net:n1@20s/30s:slow=50ms,1mbit a slow link; 'net:n1>n2.sink@…' one direction only
                                (.capture its reading of n1, .sink its writing into n2, neither: both);
                                kill:after-statements|commit-in-flight|after-commit@20s a kill at a commit point;
                                twin@20s/5s a second replicator beside the first; skew:n2@0s~10s=3s,-2s changing
  --all-faults                  one of each kind, spread over the run (seed scenario: 10 s loss every 30 s)
  --json                        machine-readable result on stdout
  --isolation LEVEL             writers' isolation: read-committed | repeatable-read | mixed (default repeatable-read)
  --explicit-tx                 generated sessions: multi-statement transactions (snapshot read first, savepoints,
                                REPLACE, INSERT IGNORE, upserts, multi-row statements, key changes, unique swaps)
  --schema-gen SEED             random tables from a grammar (key types, collations, UNIQUE, JSON, LOBs, FKs…)
                                with generated sessions; the result lists which shapes ran
  --large-tx N                  generated sessions: N large transactions per run (default 1 with --schema-gen, else 0),
                                each on a node, writer and time drawn from the seed: fresh rows inserted, every tenth
                                deleted again, values of 1–4 MiB in a MEDIUM*/JSON column when the table has one
  --large-tx-rows MIN-MAX|N     their rows (default 10000-50000; at most 200000)
  --ddl                         generated sessions: ADD COLUMN (with a default), then a column reorder (MODIFY … FIRST/
                                AFTER) on a generated table while the writers run, on every node in turn (as README
                                tells operators); the writers write the new column once every node has it
  --refused-settings            generated sessions: a session writes with binlog_format=STATEMENT; the run passes only
                                when the replicator stops loudly naming that cause (exit 0), and fails otherwise`;

export interface WorkloadFlags {
  engine: Engine;
  workload: WorkloadOptions & { durationMs: number };
  faults: Fault[];
}

/**
 * Every fault kind, scaled to the run: the seed scenario (10 s of loss every 30 s) on long runs, with
 * clocks skewed on both nodes, both signs, changing during the run.
 */
export function allFaults(durationMs: number): Fault[] {
  const s = durationMs / 1000;
  const terms =
    s >= 60
      ? ['skew:n1@5s~40s=-5s,3s', 'skew:n2@25s~40s=4s,-2s', 'net:n1@30s/10s~30s', 'kill@20s/2s', 'restart:n2@45s/3s~40s']
      : [
          `skew:n1@${Math.round(s * 0.1)}s~${Math.max(1, Math.round(s * 0.4))}s=-5s,3s`,
          `skew:n2@${Math.round(s * 0.3)}s~${Math.max(1, Math.round(s * 0.4))}s=4s,-2s`,
          `kill@${Math.round(s * 0.25)}s/1s`,
          `net:n1@${Math.round(s * 0.4)}s/${Math.max(1, Math.round(s * 0.15))}s:drop`,
          `restart:n2@${Math.round(s * 0.7)}s/2s:clean`,
        ];
  return terms.map(parseFault);
}

export function parseWorkloadFlags(values: Record<string, unknown>, schema = 'lwwbench'): WorkloadFlags {
  const num = (name: string, min = 1) => {
    const v = Number(values[name]);
    if (!Number.isFinite(v) || v < min) throw new Error(`--${name} must be a number ≥ ${min} (got ${String(values[name])})`);
    return v;
  };
  if (values.tables !== undefined) {
    console.error('lww-sink: --tables N (a count) is deprecated here; use --table-count N (--tables lists tables in other commands)');
    values = { ...values, 'table-count': values['table-count'] ?? values.tables };
  }
  values = { ...values, 'table-count': values['table-count'] ?? '2' };
  const engine = String(values.engine);
  if (engine !== 'mysql' && engine !== 'mariadb') throw new Error(`--engine must be mysql or mariadb (got ${engine})`);
  const kind = String(values.workload);
  if (!['hot_keys', 'oltp_write_only', 'oltp_update_non_index'].includes(kind)) {
    throw new Error(`--workload must be hot_keys, oltp_write_only or oltp_update_non_index (got ${kind})`);
  }
  const durationMs = parseDuration(String(values.duration));
  const isolation = String(values.isolation ?? 'repeatable-read');
  if (!['read-committed', 'repeatable-read', 'mixed'].includes(isolation)) throw new Error(`--isolation must be read-committed, repeatable-read or mixed (got ${isolation})`);
  const schemaGen = values['schema-gen'] === undefined ? undefined : num('schema-gen', 0);
  const largeTransactions = values['large-tx'] === undefined ? (schemaGen === undefined ? 0 : 1) : num('large-tx', 0);
  const largeTxRows = parseLargeTxRows(values['large-tx-rows']);
  if ((largeTransactions > 0 || values.ddl || values['refused-settings']) && schemaGen === undefined && !values['explicit-tx']) {
    throw new Error('--large-tx, --ddl and --refused-settings need generated sessions (--schema-gen SEED or --explicit-tx)');
  }
  const faults = [...(values['all-faults'] ? allFaults(durationMs) : []), ...((values.fault as string[] | undefined) ?? []).map(parseFault)];
  return {
    engine,
    faults,
    workload: {
      kind: kind as WorkloadKind,
      schema,
      tables: num('table-count'),
      rowsPerTable: num('rows'),
      threads: num('threads'),
      durationMs,
      ...(values.transactions === undefined ? {} : { transactionsPerThread: num('transactions') }),
      seed: num('seed', 0),
      hotKeys: num('hot-keys'),
      keySkew: num('key-skew'),
      isolation: isolation as 'read-committed' | 'repeatable-read' | 'mixed',
      ...(values['explicit-tx'] ? { explicitTx: true } : {}),
      ...(schemaGen === undefined ? {} : { schemaGen }),
      ...(largeTransactions > 0 ? { largeTransactions } : {}),
      ...(largeTxRows ? { largeTxRows } : {}),
      ...(values.ddl ? { ddl: true } : {}),
      ...(values['refused-settings'] ? { refusedSetting: true } : {}),
    },
  };
}

/** `--large-tx-rows MIN-MAX` or `N` (exactly N), within 1..200,000. */
export function parseLargeTxRows(value: unknown): [number, number] | undefined {
  if (value === undefined) return undefined;
  const m = /^(\d+)(?:-(\d+))?$/.exec(String(value));
  const [min, max] = m ? [Number(m[1]), Number(m[2] ?? m[1])] : [Number.NaN, Number.NaN];
  if (!(min >= 1 && max >= min && max <= LARGE_TX_ROWS_MAX)) throw new Error(`--large-tx-rows must be MIN-MAX or N with 1 ≤ MIN ≤ MAX ≤ ${LARGE_TX_ROWS_MAX} (got ${String(value)})`);
  return [min, max];
}

/** Parsed workload flags, or 2 after printing what is wrong. */
export function workloadFlagsOrProblem(command: string, values: Record<string, unknown>): WorkloadFlags | number {
  try {
    return parseWorkloadFlags(values);
  } catch (err) {
    console.error(`lww-sink ${command}: ${(err as Error).message}`);
    return 2;
  }
}
