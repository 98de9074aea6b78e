// Active-active replication between N nodes by full mesh: one Direction per ordered pair of nodes.
// Before streaming it checks what would silently lose changes: every node installed, node ids
// distinct; the capture itself refuses unsafe binlog settings. A node that is not up yet (refused,
// reset, timed out) is retried with backoff within startTimeoutMs; anything else stops the start.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import type { TableSelector } from '../capture/filter.ts';
import { connect, redactUrl } from '../db/connection.ts';
import { LwwError } from '../errors.ts';
import { retry } from '../db/retry.ts';
import { classifyFailure } from './classify.ts';
import { checkAutoIncrementCollisions } from '../install/auto-increment.ts';
import { readNodeIdSql, registeredTablesSql, SCHEMA_EXISTS_SQL } from '../sql/replicator.ts';
import type { Logger, SinkOptionsInput } from '../writer/options.ts';
import { silentLogger } from '../writer/options.ts';
import type { Sink } from '../writer/sink.ts';
import { type GcScheduleOptions, GcScheduler, type GcStatus } from '../gc/scheduler.ts';
import { initialCopyOf } from './initial-copy.ts';
import { formatTableRef, type TableRef } from '../install/table-list.ts';
import { applicationPeriodsOf, isUnguardedAppTrigger, unguardedTriggersReason } from '../install/inspect.ts';
import { registeredTableCharsetsSql, registeredTablesWithChecksSql, registeredTableTriggersSql, registeredTableTypesSql } from '../sql/install.ts';
import { applicationPeriodsReason, unsupportedTableType } from '../model/table.ts';
import { unsupportedCharsetColumn } from '../model/charsets.ts';
import { Direction, type DirectionOptions, type DirectionStatus, type NodeRef } from './direction.ts';

export class ReplicatorConfigError extends LwwError {}

/** Apply workers per direction unless told otherwise (see ReplicatorOptions.applyWorkers). */
export const DEFAULT_APPLY_WORKERS = 4;

export interface ReplicatorOptions {
  /** mysql:// URLs of the nodes (two or more). */
  nodes: readonly string[];
  /**
   * Per-direction URLs that replace a node's URL for one direction's connections: key `n1>n2.capture`
   * (the n1→n2 direction reading n1) or `n1>n2.sink` (it writing into n2); nodes are named n1, n2, …
   * in the order of `nodes`. The node must be the same server (a proxy in front of it, another address).
   */
  routes?: Readonly<Record<string, string>>;
  /** Tables to replicate (`db.t`, or `db` for a schema); default: the tables registered by install on each node (read again every registryIntervalMs). */
  tables?: readonly TableSelector[];
  /** How often the registered tables are read again when `tables` is not given (default 5000 ms). */
  registryIntervalMs?: number;
  metaSchema?: string;
  versionColumn?: string;
  sink?: Partial<SinkOptionsInput>;
  /**
   * Parallel apply workers per direction, each with its own target connection and checkpoint row
   * (the sink's applyWorkers); default DEFAULT_APPLY_WORKERS, or sink.applyWorkers when given there.
   */
  applyWorkers?: number;
  capture?: DirectionOptions['capture'];
  /** How a direction's first start merges existing rows; default: the chunked LWW copy; false: none. */
  initialCopy?: false | ((ctx: { sink: Sink; sourceId: string; direction: Direction }) => Promise<void>);
  /** First restart delay of a direction after a transient failure (grows exponentially, with jitter); default 500 ms. */
  restartDelayMs?: number;
  /** Store an idle source's position (and time, which moves the GC horizon) at most this often; default 10 s. */
  keepaliveCheckpointMs?: number;
  /** Tombstone and metadata GC between the nodes (src/gc/), every minute by default; false: none. */
  gc?: false | Omit<GcScheduleOptions, 'nodes' | 'metaSchema'>;
  /** Cap of that delay; default 30 s. */
  maxRestartDelayMs?: number;
  /**
   * Progress watchdog: a direction with work pending (the source's binlog past what it read, or
   * read-but-unapplied changes) and no progress for this long stops with a diagnosis; the first
   * stall restarts it, a second one without a commit in between fails it. Default 60 s; 0: off.
   */
  stallTimeoutMs?: number;
  /** How long start() keeps retrying nodes that cannot be reached yet; default 30 s. */
  startTimeoutMs?: number;
  logger?: Logger;
}

export interface ReplicatorStatus {
  nodes: Array<{ name: string; url: string; nodeId: number }>;
  directions: DirectionStatus[];
  /** Garbage collection: totals and the last pass (horizon per node and direction). */
  gc?: GcStatus;
}

/** Reads each node's id and registered tables; refuses nodes that are not installed or share an id. */
/** The tables install registered on one node, by `db.t`; as objects, since names may hold dots or commas. */
async function registeredOn(conn: Pick<Connection, 'query'>, metaSchema: string): Promise<Map<string, TableRef>> {
  const [tables] = await conn.query<RowDataPacket[]>(registeredTablesSql(metaSchema));
  const registered = new Map<string, TableRef>();
  for (const t of tables) {
    const ref = { schema: String(t.schema_name), table: String(t.table_name) };
    registered.set(formatTableRef(ref), ref);
  }
  return registered;
}

/** The tables registered by install on each node (a node that cannot be read rejects). */
async function readRegisteredTables(urls: readonly string[], metaSchema: string): Promise<Array<Map<string, TableRef>>> {
  const perNode: Array<Map<string, TableRef>> = [];
  for (const url of urls) {
    const conn = await connect(url, { connectTimeoutMs: 5000 });
    try {
      perNode.push(await registeredOn(conn, metaSchema));
    } finally {
      conn.destroy();
    }
  }
  return perNode;
}

export async function inspectNodes(urls: readonly string[], metaSchema: string): Promise<{ nodes: NodeRef[]; registered: TableRef[] }> {
  if (urls.length < 2) throw new ReplicatorConfigError('replication needs at least two nodes (--node URL --node URL)');
  const nodes: NodeRef[] = [];
  const registered = new Map<string, TableRef>();
  for (const [i, url] of urls.entries()) {
    const conn = await connect(url).catch((err: unknown) => {
      throw new ReplicatorConfigError(`cannot connect to node ${redactUrl(url)}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
    try {
      const [schema] = await conn.query<RowDataPacket[]>(SCHEMA_EXISTS_SQL, [metaSchema]);
      const [rows] = schema.length > 0 ? await conn.query<RowDataPacket[]>(readNodeIdSql(metaSchema)) : [[]];
      if (rows.length === 0) {
        throw new ReplicatorConfigError(`node ${redactUrl(url)} is not installed (no node id in ${metaSchema}.node): run lww-sink install --url URL --node-id N first`);
      }
      const nodeId = Number(rows[0]!.node_id);
      const clash = nodes.find((n) => n.nodeId === nodeId);
      if (clash) {
        throw new ReplicatorConfigError(
          `nodes ${redactUrl(clash.url)} and ${redactUrl(url)} both have node id ${nodeId}: their versions could tie; reinstall one with another --node-id`,
        );
      }
      nodes.push({ name: `n${i + 1}`, url, nodeId });
      for (const [name, ref] of await registeredOn(conn, metaSchema)) registered.set(name, ref);
      // A trigger added after install that does not skip the sink's sessions would run again for every replicated row.
      const [triggers] = await conn.query<RowDataPacket[]>(registeredTableTriggersSql(metaSchema));
      const unguarded = triggers.filter((t) => isUnguardedAppTrigger(String(t.tableName), String(t.name), String(t.body)));
      if (unguarded.length > 0) {
        const table = `${unguarded[0]!.schemaName}.${unguarded[0]!.tableName}`;
        const names = unguarded.filter((t) => `${t.schemaName}.${t.tableName}` === table).map((t) => `${t.name} (${t.timing} ${t.event})`);
        throw new ReplicatorConfigError(`node ${redactUrl(url)}: ${table} cannot be replicated: ${unguardedTriggersReason(names)}, then start again`);
      }
      // A column altered to a charset capture cannot carry after install (model/charsets.ts).
      const [texts] = await conn.query<RowDataPacket[]>(registeredTableCharsetsSql(metaSchema));
      for (const c of texts) {
        const why = unsupportedCharsetColumn({ name: String(c.name), charset: String(c.charset) });
        if (why) throw new ReplicatorConfigError(`node ${redactUrl(url)}: ${String(c.schemaName)}.${String(c.tableName)} cannot be replicated: ${why}, then start again`);
      }
      // MariaDB: a table made system-versioned or given an application-time period after install (model/table.ts).
      const [types] = await conn.query<RowDataPacket[]>(registeredTableTypesSql(metaSchema));
      for (const t of types) {
        const why = unsupportedTableType(String(t.tableType));
        if (why) throw new ReplicatorConfigError(`node ${redactUrl(url)}: ${String(t.schemaName)}.${String(t.tableName)} cannot be replicated: ${why}, then start again`);
      }
      const [checked] = await conn.query<RowDataPacket[]>(registeredTablesWithChecksSql(metaSchema));
      for (const t of checked) {
        const periods = await applicationPeriodsOf(conn, String(t.schemaName), String(t.tableName));
        if (periods.length > 0) {
          throw new ReplicatorConfigError(`node ${redactUrl(url)}: ${String(t.schemaName)}.${String(t.tableName)} cannot be replicated: ${applicationPeriodsReason(periods)}, then start again`);
        }
      }
    } finally {
      await conn.end();
    }
  }
  return { nodes, registered: [...registered.keys()].sort().map((k) => registered.get(k)!) };
}

export class Replicator {
  readonly directions: Direction[] = [];
  private nodes: NodeRef[] = [];
  private readonly log: Logger;
  private done: Promise<unknown> | null = null;
  /** The GC loop (undefined when disabled); `runOnce()` runs a pass now. */
  gc: GcScheduler | undefined;
  private registryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ReplicatorOptions) {
    this.log = options.logger ?? silentLogger;
  }

  /** Checks the nodes and starts every direction; resolves once they are running. */
  async start(): Promise<void> {
    const metaSchema = this.options.metaSchema ?? 'lww_meta';
    const { nodes, registered, warnings } = await retry(
      async () => ({
        ...(await inspectNodes(this.options.nodes, metaSchema)),
        warnings: await checkAutoIncrementCollisions(this.options.nodes, { metaSchema }),
      }),
      {
        baseMs: 250,
        maxMs: 5000,
        budgetMs: this.options.startTimeoutMs ?? 30_000,
        isTransient: (err) => classifyFailure(err).kind === 'transient',
        onRetry: ({ delayMs, error }) => this.log.warn(`a node cannot be reached yet; retrying in ${delayMs} ms: ${error instanceof Error ? error.message : String(error)}`),
      },
    );
    this.nodes = nodes;
    for (const key of Object.keys(this.options.routes ?? {})) {
      const m = /^(n\d+)>(n\d+)\.(capture|sink)$/.exec(key);
      if (!m || m[1] === m[2] || !nodes.some((n) => n.name === m[1]) || !nodes.some((n) => n.name === m[2])) {
        throw new ReplicatorConfigError(`route "${key}": expected nA>nB.capture or nA>nB.sink with two of the nodes ${nodes.map((n) => n.name).join(', ')}`);
      }
    }
    for (const warning of warnings) this.log.warn(warning);
    const tables = this.options.tables ?? registered;
    if (tables.length === 0) throw new ReplicatorConfigError('no tables to replicate: install some (lww-sink install) or pass --tables');
    for (const source of nodes) {
      for (const target of nodes) {
        if (source === target) continue;
        const via = (node: NodeRef, role: 'capture' | 'sink'): NodeRef => {
          const url = this.options.routes?.[`${source.name}>${target.name}.${role}`];
          return url === undefined ? node : { ...node, url };
        };
        this.directions.push(
          new Direction({
            source: via(source, 'capture'),
            target: via(target, 'sink'),
            tables,
            metaSchema,
            versionColumn: this.options.versionColumn ?? '_lww_ts',
            sink: { ...this.options.sink, applyWorkers: this.options.applyWorkers ?? this.options.sink?.applyWorkers ?? DEFAULT_APPLY_WORKERS },
            capture: this.options.capture,
            initialCopy: this.options.initialCopy === false ? undefined : (this.options.initialCopy ?? initialCopyOf({ logger: this.log })),
            restartDelayMs: this.options.restartDelayMs,
            stallTimeoutMs: this.options.stallTimeoutMs,
            keepaliveCheckpointMs: this.options.keepaliveCheckpointMs,
            maxRestartDelayMs: this.options.maxRestartDelayMs,
            logger: this.log,
          }),
        );
      }
    }
    this.done = Promise.all(this.directions.map((d) => d.start()));
    this.done.catch(() => undefined);
    if (!this.options.tables) this.watchRegistry(metaSchema, registered);
    if (this.options.gc !== false) {
      this.gc = new GcScheduler({ ...this.options.gc, nodes: this.options.nodes, metaSchema }, this.log);
      this.gc.start();
    }
  }

  /** Resolves when every direction has streamed at least once (first start and copy done). */
  async whenStreaming(timeoutMs = 60_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`replication did not start streaming within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([Promise.all(this.directions.map((d) => d.streaming)), timeout, this.wait().then(() => timeout)]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Rejects when a direction stops for good (lost ownership); resolves after stop(). */
  wait(): Promise<unknown> {
    return this.done ?? Promise.resolve();
  }

  /**
   * Replicating the registered tables: a table installed (or uninstalled) on a node while this runs
   * joins (or leaves) every direction within a few seconds; before, it waited for a restart while
   * its writes reached no other node.
   */
  private watchRegistry(metaSchema: string, initial: readonly TableRef[]): void {
    const current = new Map(initial.map((t) => [formatTableRef(t), t]));
    let busy = false;
    this.registryTimer = setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        const perNode = await readRegisteredTables(this.options.nodes, metaSchema);
        // A table joins once installed on every node (copied into a node without its version
        // column, it would stop the direction), and leaves once installed on none.
        const added = [...perNode[0]!.values()].filter((t) => !current.has(formatTableRef(t)) && perNode.every((m) => m.has(formatTableRef(t))));
        const removed = [...current.keys()].filter((n) => perNode.every((m) => !m.has(n)));
        if (added.length === 0 && removed.length === 0) return;
        for (const t of added) current.set(formatTableRef(t), t);
        for (const n of removed) current.delete(n);
        this.log.info(
          `installed tables changed while replicating (added: ${added.map(formatTableRef).join(', ') || 'none'}; removed: ${removed.join(', ') || 'none'}): every direction takes the new list`,
        );
        for (const d of this.directions) d.setTables([...current.values()]);
      } catch {
        // A node that cannot be read now: the next round asks again.
      } finally {
        busy = false;
      }
    }, this.options.registryIntervalMs ?? 5000);
    this.registryTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.registryTimer) clearInterval(this.registryTimer);
    await this.gc?.stop();
    await Promise.all(this.directions.map((d) => d.stop()));
  }

  async status(): Promise<ReplicatorStatus> {
    return {
      nodes: this.nodes.map((n) => ({ name: n.name, url: redactUrl(n.url), nodeId: n.nodeId })),
      directions: await Promise.all(this.directions.map((d) => d.status())),
      ...(this.gc ? { gc: this.gc.status } : {}),
    };
  }
}
