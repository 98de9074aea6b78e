// lww-sink replicate --node URL --node URL [--tables db.t,...|--schema db] [--json] [--metrics-addr [host:]port]
import { redactSecrets } from '../../db/url.ts';
import { type FailpointName, Failpoints } from '../../failpoints/failpoints.ts';
import { initialCopyOf } from '../../replicator/initial-copy.ts';
import { type OpsServer, parseListenAddress, serveOps, statusDocument } from '../../replicator/metrics.ts';
import { DEFAULT_APPLY_WORKERS, Replicator, type ReplicatorStatus } from '../../replicator/replicator.ts';
import { DEFAULT_GC_INTERVAL_MS } from '../../gc/scheduler.ts';
import { durationFlag, failpointsFlag, integerFlag, nodeProblems, parseCommandArgs, renamedFlag, tableListFlag, tableListProblems, usageProblems } from '../args.ts';
import { describeError, EXIT, exitCodeOf } from '../exit-codes.ts';
import { consoleLogger, toJson } from '../logger.ts';

export const summary = 'replicate both ways between nodes with last-write-wins (runs until Ctrl-C)';

const HELP = `usage: lww-sink replicate --node URL --node URL [options]

  --node URL               a node (twice or more; full mesh between all of them); or LWW_NODES / --config
  --tables db.t1,db.t2     tables to replicate (default: the tables install registered)
  --schema db              replicate a whole schema
  --meta-schema NAME       metadata schema (default lww_meta)
  --progress-interval S    print status every S seconds (default 5; 0 = never)
  --json                   status as JSON lines on stdout
  --metrics-addr [H:]P     serve /metrics (Prometheus), /healthz and /status on H:P (default host 127.0.0.1)
  --batch-rows N           rows per target transaction (default 1024)
  --apply-workers N        parallel apply workers per direction (default ${DEFAULT_APPLY_WORKERS}, or LWW_APPLY_WORKERS; 1 = in order)
  --no-initial-copy        do not merge existing rows on a direction's first start
  --gc-interval D          remove tombstones every peer has applied every D (default 1m; 0 = no GC)
  --gc-margin D            GC safety margin for long transactions and clock skew (default 10m)
  --gc-retention D         keep conflict-log and idle copy/sync progress rows this long (default 7d)
                           (durations: 30s, 10m, 2h, 7d; see lww-sink gc --help for the horizon)
  --stall-timeout D        a direction with work pending and no progress (nothing read, applied or
                           committed) for D stops with a diagnosis: restarted once, then it fails
                           (default 60s; 0 = no watchdog)
  --start-timeout S        keep retrying nodes that cannot be reached yet for S seconds (default 30), then exit 3
  --failpoints SPEC        break replication on purpose (tests only), e.g. sinkDropMessage=1%return(true);
                           LWW_FAILPOINTS is read only with LWW_FAILPOINTS_ENABLE=1
  LWW_ROUTES               per-direction URLs, e.g. "n1>n2.capture=URL n1>n2.sink=URL": the n1→n2 direction
                           reads n1 / writes n2 through them (nodes named n1, n2… in --node order)
  --failpoints-ipc         accept failpoints from the parent process over its IPC channel (the harness
                           arms commit-point kills this way; tests only)
  deprecated: --status-interval (= --progress-interval), --metrics-port P (= --metrics-addr 127.0.0.1:P)
`;

function formatGc(gc: NonNullable<ReplicatorStatus['gc']>): string {
  const last = gc.last;
  const horizon = !last ? 'no pass yet' : last.paused.length > 0 ? `paused: ${last.paused[0]}` : last.nodes.map((n) => `${n.name}<${n.horizonTime}`).join(' ');
  const tombstones = last ? ` tombstones=${last.nodes.map((n) => `${n.name}:${n.tombstones}`).join(',')}` : '';
  return `gc runs=${gc.runs} collected=${gc.collected}${tombstones} horizon ${horizon}${gc.lastError ? ` last-error="${gc.lastError}"` : ''}`;
}

function formatStatus(s: ReplicatorStatus): string {
  const lines = s.directions
    .map((d) => {
      const t = d.sink.totals;
      const lag = d.lagBytes === undefined ? '?' : `${d.lagBytes}B`;
      const ms = d.lagMs === undefined ? '' : ` ${Math.round(d.lagMs)}ms`;
      return `${d.name} ${d.state} applied=${t.inserted + t.updated + t.deleted} stale=${t.skippedStale} tomb-skip=${t.skippedByTombstone} clashes=${t.uniqueClashes} lag=${lag}${ms} restarts=${d.restarts}${d.stuckForMs ? ` no-progress=${Math.round(d.stuckForMs / 1000)}s` : ''}${d.stalls ? ` stalls=${d.stalls}` : ''}${d.lastError ? ` last-error="${d.lastError}"` : ''}`;
    });
  if (s.gc) lines.push(formatGc(s.gc));
  return lines.join('\n');
}

/** LWW_ROUTES: `KEY=URL` entries separated by white space or commas (before each key). */
export function routesFromEnv(text: string | undefined): Record<string, string> | undefined {
  if (!text?.trim()) return undefined;
  const routes: Record<string, string> = {};
  for (const entry of text.trim().split(/[\s,]+(?=[A-Za-z0-9_-]+>[A-Za-z0-9_-]+\.[a-z]+=)/)) {
    const eq = entry.indexOf('=');
    routes[entry.slice(0, eq).trim()] = entry.slice(eq + 1).trim().replace(/,$/, '');
  }
  return routes;
}

const formatText = (s: ReplicatorStatus) => redactSecrets(formatStatus(s));

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('replicate', HELP, argv, {
    node: { type: 'string', multiple: true },
    tables: { type: 'string' },
    schema: { type: 'string', multiple: true },
    'meta-schema': { type: 'string', default: 'lww_meta' },
    'progress-interval': { type: 'string' },
    'status-interval': { type: 'string' },
    json: { type: 'boolean', default: false },
    'metrics-addr': { type: 'string' },
    'metrics-port': { type: 'string' },
    'batch-rows': { type: 'string' },
    'apply-workers': { type: 'string' },
    'no-initial-copy': { type: 'boolean', default: false },
    failpoints: { type: 'string' },
    'gc-interval': { type: 'string' },
    'gc-margin': { type: 'string' },
    'gc-retention': { type: 'string' },
    'start-timeout': { type: 'string', default: '30' },
    'stall-timeout': { type: 'string' },
    'failpoints-ipc': { type: 'boolean', default: false },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const nodes = values.node ?? [];
  const tableFlag = tableListFlag(values.tables);
  const tables = [...(typeof tableFlag === 'string' ? [] : (tableFlag ?? [])), ...(values.schema ?? [])];
  const intervalText = renamedFlag('replicate', values, 'progress-interval', 'status-interval') ?? '5';
  const interval = Number(intervalText);
  const batchRows = values['batch-rows'] === undefined ? undefined : integerFlag('batch-rows', values['batch-rows'], 1);
  const workersText = values['apply-workers'] ?? process.env.LWW_APPLY_WORKERS;
  const applyWorkers = workersText === undefined ? DEFAULT_APPLY_WORKERS : integerFlag('apply-workers', workersText, 1);
  const oldPort = values['metrics-port'] === undefined ? undefined : integerFlag('metrics-port', values['metrics-port'], 1);
  if (oldPort !== undefined) console.error('lww-sink replicate: --metrics-port is deprecated; use --metrics-addr');
  const addrText = values['metrics-addr'] ?? (typeof oldPort === 'number' ? `127.0.0.1:${oldPort}` : undefined);
  const metricsAddr = addrText === undefined ? undefined : parseListenAddress(addrText);
  const failpoints = failpointsFlag(values.failpoints);
  const gcInterval = values['gc-interval'] === undefined ? DEFAULT_GC_INTERVAL_MS : durationFlag('gc-interval', values['gc-interval']);
  const gcMargin = values['gc-margin'] === undefined ? undefined : durationFlag('gc-margin', values['gc-margin']);
  const gcRetention = values['gc-retention'] === undefined ? undefined : durationFlag('gc-retention', values['gc-retention']);
  const startTimeout = integerFlag('start-timeout', values['start-timeout'], 0);
  const stallTimeout = values['stall-timeout'] === undefined ? undefined : durationFlag('stall-timeout', values['stall-timeout']);
  const bad = usageProblems(
    'replicate',
    [
      ...nodeProblems(nodes),
      typeof tableFlag === 'string' && `--tables: ${tableFlag}`,
      ...tableListProblems(typeof tableFlag === 'string' ? undefined : tableFlag),
      (!/^\d+(\.\d+)?$/.test(intervalText) || !Number.isFinite(interval)) && '--progress-interval must be a number of seconds',
      typeof batchRows === 'string' && batchRows,
      typeof applyWorkers === 'string' && applyWorkers,
      typeof applyWorkers === 'number' && applyWorkers > 64 && `--apply-workers must be at most 64 (got ${applyWorkers})`,
      typeof oldPort === 'string' && oldPort,
      typeof metricsAddr === 'string' && metricsAddr,
      typeof failpoints === 'string' && failpoints,
      typeof gcInterval === 'string' && gcInterval,
      typeof gcMargin === 'string' && gcMargin,
      typeof gcRetention === 'string' && gcRetention,
      typeof startTimeout === 'string' && startTimeout,
      typeof stallTimeout === 'string' && stallTimeout,
    ],
    HELP,
  );
  if (bad !== undefined) return bad;
  const logger = consoleLogger();
  // One explicit set for every sink (the flag, or the environment only with LWW_FAILPOINTS_ENABLE=1), shown in status and metrics.
  const fp = typeof failpoints === 'object' ? failpoints : Failpoints.fromEnv();
  // The endpoint binds before anything starts: a taken port is a usage error, not a half-started replicator.
  let ops: OpsServer | undefined;
  if (typeof metricsAddr === 'object') {
    try {
      ops = await serveOps({ ...metricsAddr, failpoints: fp });
      logger.info('serving /metrics, /healthz and /status', { address: `${ops.address.address}:${ops.address.port}` });
    } catch (e) {
      console.error(`lww-sink replicate: --metrics-addr ${addrText}: ${(e as Error).message}`);
      return EXIT.usage;
    }
  }
  if (values['failpoints-ipc'] && process.send) {
    // { failpoints: 'name=term;…' } from the parent (see src/harness/replicator-process.ts armFailpoints).
    process.on('message', (m: { failpoints?: unknown }) => {
      if (typeof m?.failpoints !== 'string') return;
      try {
        for (const entry of m.failpoints.split(';').filter((e) => e.trim())) {
          const eq = entry.indexOf('=');
          fp.enable(entry.slice(0, eq).trim() as FailpointName, entry.slice(eq + 1));
        }
        logger.warn('failpoints armed by the parent process', { failpoints: m.failpoints });
      } catch (e) {
        logger.error('failpoints from the parent process refused', { error: (e as Error).message });
      }
    });
    process.channel?.unref();
  }
  const replicator = new Replicator({
    nodes,
    routes: routesFromEnv(process.env.LWW_ROUTES),
    tables: tables.length > 0 ? tables : undefined,
    metaSchema: values['meta-schema'],
    sink: { ...(typeof batchRows === 'number' ? { batch: { maxRows: batchRows } } : {}), failpoints: fp },
    applyWorkers: applyWorkers as number,
    initialCopy: values['no-initial-copy'] ? false : initialCopyOf({ logger }),
    gc: gcInterval === 0 ? false : { intervalMs: gcInterval as number, marginMs: gcMargin as number | undefined, retentionMs: gcRetention as number | undefined },
    startTimeoutMs: (startTimeout as number) * 1000,
    ...(typeof stallTimeout === 'number' ? { stallTimeoutMs: stallTimeout } : {}),
    logger,
  });
  // Listening before start: a signal while the directions start (which can take long after a crash)
  // ends in the same graceful stop, not the default kill.
  let signalled = false;
  const stop = new Promise<void>((resolve) => {
    const onSignal = () => {
      signalled = true;
      resolve();
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
  try {
    await replicator.start();
  } catch (e) {
    await ops?.close();
    throw e;
  }
  ops?.attach(replicator);
  const print = async () => {
    const s = await replicator.status();
    if (values.json) console.log(toJson(statusDocument(s, fp)));
    else console.log(formatText(s));
  };
  const timer = interval > 0 ? setInterval(() => void print(), interval * 1000) : null;
  let code: number = EXIT.ok;
  try {
    await Promise.race([stop, replicator.wait()]);
  } catch (err) {
    logger.error('replication stopped', { error: describeError(err) });
    code = exitCodeOf(err) === EXIT.usage ? EXIT.usage : EXIT.failed;
  }
  if (timer) clearInterval(timer);
  await replicator.stop();
  await print();
  await ops?.close();
  if (signalled) logger.info('stopped gracefully: everything read was committed or will be replayed from the checkpoints');
  return code;
}
