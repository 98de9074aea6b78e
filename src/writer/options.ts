// Sink options, validated with zod so a bad option is named in the error.
import { hostname } from 'node:os';
import { z } from 'zod';
import { InvalidOptionsError } from '../errors.ts';
import { Failpoints } from '../failpoints/failpoints.ts';
import { type Logger, silentLogger } from '../log/logger.ts';

export type { Logger };

/** Told after each target transaction commits: which source transactions it carried. */
export interface CommitInfo {
  transactions: Array<{ sourceId: string; position: string; maxVersion: bigint; changes: number }>;
  committedAtMs: number;
}

export { silentLogger };

const identifier = z
  .string()
  .min(1)
  .max(64)
  .refine((s) => !s.includes('\u0000') && [...s].every((c) => c.codePointAt(0)! <= 0xffff), 'must be a valid MySQL identifier');

const optionsSchema = z
  .object({
    target: z.union([z.string().min(1), z.record(z.string(), z.unknown())]),
    dialect: z.enum(['auto', 'mysql', 'mariadb', 'tidb']).default('auto'),
    versionColumn: identifier.default('_lww_ts'),
    metaSchema: identifier.default('lww_meta'),
    batch: z
      .object({
        maxRows: z.number().int().min(1).max(1_000_000).default(1024),
        maxBytes: z.number().int().min(1024).default(8 << 20),
        maxDelayMs: z.number().min(0).max(60_000).default(10),
      })
      .strict()
      .prefault({}),
    limits: z
      .object({
        maxTransactionRows: z.number().int().min(1).default(100_000),
        /** A transaction of several changes above this (approximate in-memory bytes) is refused; one row alone is bounded by the target's max_allowed_packet instead. */
        maxTransactionBytes: z.number().int().min(1024).default(64 << 20),
        /** write() waits while the queue holds more than this (values plus per-row objects), the window being applied not counted: the sink's share of memory besides that window. */
        maxQueueBytes: z.number().int().min(1024).default(16 << 20),
        /** Versions whose physical part is further than this ahead of the sink's clock are refused (InvalidChangeError). */
        maxFutureMs: z.number().int().min(0).default(3_600_000),
      })
      .strict()
      .prefault({}),
    timeouts: z
      .object({
        connectMs: z.number().int().min(100).default(10_000),
        queryMs: z.number().int().min(100).default(60_000),
        lockWaitSeconds: z.number().int().min(1).max(3600).default(10),
      })
      .strict()
      .prefault({}),
    retry: z
      .object({
        maxAttempts: z.number().int().min(1).default(30),
        baseMs: z.number().min(0).default(50),
        maxMs: z.number().min(0).default(5_000),
      })
      .strict()
      .prefault({}),
    /**
     * Apply workers, each with its own target connection and checkpoint row per source: a batch is
     * split by hashes of every unique key of its rows (rows that could clash stay in one worker, in
     * source order) and applied in parallel; a source resumes from its lowest worker checkpoint.
     * 1 applies everything on one connection, in one transaction per batch.
     */
    applyWorkers: z.number().int().min(1).max(64).default(1),
    failpoints: z.union([z.string(), z.record(z.string(), z.string()), z.instanceof(Failpoints)]).optional(),
    owner: z.string().min(1).max(255).default(`${hostname()}:${process.pid}`),
    logger: z.custom<Logger>((v) => typeof v === 'object' && v !== null && 'warn' in v && 'error' in v).optional(),
    /**
     * Owner epochs already claimed for source ids (shared by a supervisor's successive sinks): a sink
     * reuses them instead of bumping the epoch again, and records the ones it claims.
     */
    claims: z.custom<Map<string, bigint>>((v) => v instanceof Map, 'must be a Map of source id to epoch').optional(),
    onCommit: z.custom<(info: CommitInfo) => void>((v) => typeof v === 'function', 'must be a function').optional(),
  })
  .strict();

export type SinkOptionsInput = z.input<typeof optionsSchema>;
export type SinkOptions = Omit<z.output<typeof optionsSchema>, 'failpoints' | 'logger'> & { failpoints: Failpoints; logger: Logger };

export function parseSinkOptions(input: unknown): SinkOptions {
  const r = optionsSchema.safeParse(input);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const path = issue.path.map(String).join('.') || '(options)';
    throw new InvalidOptionsError(`invalid sink option ${path}: ${issue.message}`);
  }
  const { failpoints, logger, ...rest } = r.data;
  const fp = failpoints instanceof Failpoints ? failpoints : failpoints === undefined ? Failpoints.fromEnv() : new Failpoints(failpoints);
  const log = logger ?? silentLogger;
  // Failpoints construct data loss: never on silently.
  if (fp.enabled) log.warn('failpoints enabled: this sink deliberately breaks replication', { failpoints: fp.toString() });
  return { ...rest, failpoints: fp, logger: log };
}
