// lww-sink replicate --node URL --node URL [--tables db.t,...|--schema db] [--json] [--metrics-port P]
import { initialCopyOf } from '../../replicator/initial-copy.ts';
import { Replicator, type ReplicatorStatus } from '../../replicator/replicator.ts';
import { serveMetrics } from '../../replicator/metrics.ts';
import { integerFlag, nodeProblems, parseCommandArgs, splitList, usageProblems } from '../args.ts';
import { consoleLogger, toJson } from '../logger.ts';

export const summary = 'replicate both ways between nodes with last-write-wins (runs until Ctrl-C)';

const HELP = `usage: lww-sink replicate --node URL --node URL [options]

  --node URL            a node (twice or more; full mesh between all of them)
  --tables db.t1,db.t2  tables to replicate (default: the tables install registered)
  --schema db           replicate a whole schema
  --meta-schema NAME    metadata schema (default lww_meta)
  --status-interval S   print status every S seconds (default 5; 0 = never)
  --json                status as JSON lines on stdout
  --metrics-port P      serve Prometheus metrics on 127.0.0.1:P/metrics
  --batch-rows N        rows per target transaction (default 1024)
  --no-initial-copy     do not merge existing rows on a direction's first start
`;

function formatStatus(s: ReplicatorStatus): string {
  return s.directions
    .map((d) => {
      const t = d.sink.totals;
      const lag = d.lagBytes === undefined ? '?' : `${d.lagBytes}B`;
      const ms = d.lagMs === undefined ? '' : ` ${Math.round(d.lagMs)}ms`;
      return `${d.name} ${d.state} applied=${t.inserted + t.updated + t.deleted} stale=${t.skippedStale} tomb-skip=${t.skippedByTombstone} clashes=${t.uniqueClashes} lag=${lag}${ms} restarts=${d.restarts}${d.lastError ? ` last-error="${d.lastError}"` : ''}`;
    })
    .join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseCommandArgs('replicate', HELP, argv, {
    node: { type: 'string', multiple: true },
    tables: { type: 'string' },
    schema: { type: 'string', multiple: true },
    'meta-schema': { type: 'string', default: 'lww_meta' },
    'status-interval': { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
    'metrics-port': { type: 'string' },
    'batch-rows': { type: 'string' },
    'no-initial-copy': { type: 'boolean', default: false },
  });
  if (!parsed.ok) return parsed.exit;
  const { values } = parsed;
  const nodes = values.node ?? [];
  const tables = [...(splitList(values.tables) ?? []), ...(values.schema ?? [])];
  const interval = Number(values['status-interval']);
  const batchRows = values['batch-rows'] === undefined ? undefined : integerFlag('batch-rows', values['batch-rows'], 1);
  const metricsPort = values['metrics-port'] === undefined ? undefined : integerFlag('metrics-port', values['metrics-port'], 1);
  const bad = usageProblems(
    'replicate',
    [
      ...nodeProblems(nodes),
      (!Number.isFinite(interval) || interval < 0) && '--status-interval must be a number of seconds',
      typeof batchRows === 'string' && batchRows,
      typeof metricsPort === 'string' && metricsPort,
    ],
    HELP,
  );
  if (bad !== undefined) return bad;
  const logger = consoleLogger();
  const replicator = new Replicator({
    nodes,
    tables: tables.length > 0 ? tables : undefined,
    metaSchema: values['meta-schema'],
    sink: typeof batchRows === 'number' ? { batch: { maxRows: batchRows } } : undefined,
    initialCopy: values['no-initial-copy'] ? false : initialCopyOf({ logger }),
    logger,
  });
  await replicator.start();
  const metrics = typeof metricsPort === 'number' ? await serveMetrics(replicator, metricsPort) : null;
  const print = async () => {
    const s = await replicator.status();
    if (values.json) console.log(toJson({ time: new Date().toISOString(), ...s }));
    else console.log(formatStatus(s));
  };
  const timer = interval > 0 ? setInterval(() => void print(), interval * 1000) : null;
  let signalled = false;
  const stop = new Promise<void>((resolve) => {
    const onSignal = () => {
      signalled = true;
      resolve();
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
  let code = 0;
  try {
    await Promise.race([stop, replicator.wait()]);
  } catch (err) {
    logger.error(`replication stopped: ${err instanceof Error ? err.message : String(err)}`);
    code = 1;
  }
  if (timer) clearInterval(timer);
  await replicator.stop();
  await print();
  metrics?.close();
  if (signalled) logger.info('stopped gracefully: everything read was committed or will be replayed from the checkpoints');
  return code;
}
