// Wires the initial copy (src/sync/initial-copy.ts) into a replication direction's first start.
import { copyTables } from '../sync/initial-copy.ts';
import type { Logger } from '../writer/options.ts';
import type { Direction } from './direction.ts';
import type { Sink } from '../writer/sink.ts';

export function initialCopyOf(options: { logger: Logger; chunkRows?: number }) {
  return async ({ sink, sourceId, direction }: { sink: Sink; sourceId: string; direction: Direction }): Promise<void> => {
    const report = await copyTables({
      sourceUrl: direction.sourceUrl,
      tables: direction.tables,
      sink,
      sourceId,
      metaSchema: sink.options.metaSchema,
      versionColumn: sink.options.versionColumn,
      chunkRows: options.chunkRows,
      logger: options.logger,
      names: { source: `node ${direction.name.split('→')[0]}`, target: `node ${direction.name.split('→')[1]}` },
      onProgress: (p) =>
        options.logger.info(
          `${direction.name}: copying ${p.table} ${p.kind} ${p.copied}/${p.total} (${p.total ? Math.round((100 * p.copied) / p.total) : 100}%) ${Math.round(p.rowsPerSecond)} rows/s${p.etaSeconds !== undefined ? ` eta ${Math.round(p.etaSeconds)}s` : ''}`,
        ),
    });
    const copied = report.tables.filter((t) => !t.skippedDone);
    if (copied.length > 0) {
      options.logger.info(`${direction.name}: initial copy done, ${report.rowsCopied} rows and tombstones in ${report.seconds.toFixed(1)}s`, {
        tables: copied,
      });
    }
    direction.lastCopy = report;
  };
}
