// Binlog positions: `<file>:<offset>` of the first event AFTER a transaction, so reading resumes
// with the next transaction. Opaque to the sink, which stores the text as its checkpoint.
import { BinlogPositionError } from '../errors.ts';

export interface BinlogPosition {
  file: string;
  offset: number;
}

export function formatPosition(p: BinlogPosition): string {
  return `${p.file}:${p.offset}`;
}

/** Parses `<file>:<offset>`; throws BinlogPositionError naming what is wrong. */
export function parsePosition(text: string): BinlogPosition {
  const i = text.lastIndexOf(':');
  const file = i > 0 ? text.slice(0, i) : '';
  const offsetText = i > 0 ? text.slice(i + 1) : '';
  if (!file || !/^\d{1,19}$/.test(offsetText)) {
    throw new BinlogPositionError(text, 'expected <binlog file>:<offset>, e.g. binlog.000003:1534');
  }
  const offset = Number(offsetText);
  if (!Number.isSafeInteger(offset) || offset < 4) {
    throw new BinlogPositionError(text, 'the offset must be at least 4 (the first event of a binlog file)');
  }
  return { file, offset };
}

/**
 * Orders two positions of the same server: negative when a is earlier. Binlog file names share a
 * base name and a zero-padded, growing sequence number, so comparing the numeric suffix is exact.
 */
export function comparePositions(a: BinlogPosition, b: BinlogPosition): number {
  if (a.file !== b.file) {
    const na = fileSequence(a.file);
    const nb = fileSequence(b.file);
    if (na !== undefined && nb !== undefined && na !== nb) return na < nb ? -1 : 1;
    return a.file < b.file ? -1 : 1;
  }
  return a.offset - b.offset;
}

function fileSequence(file: string): number | undefined {
  const m = /\.(\d+)$/.exec(file);
  return m ? Number(m[1]) : undefined;
}

/**
 * Bytes of binlog between `from` and `to` given the server's file list (SHOW BINARY LOGS):
 * the capture's lag behind the head. 0 when `from` is at or past `to`.
 */
export function bytesBetween(from: BinlogPosition, to: BinlogPosition, files: ReadonlyArray<{ name: string; size: number }>): number {
  if (comparePositions(from, to) >= 0) return 0;
  if (from.file === to.file) return to.offset - from.offset;
  let bytes = 0;
  let inRange = false;
  for (const f of files) {
    if (f.name === from.file) {
      inRange = true;
      bytes += Math.max(0, f.size - from.offset);
      continue;
    }
    if (f.name === to.file) {
      bytes += to.offset;
      break;
    }
    if (inRange) bytes += f.size;
  }
  return bytes;
}

/** Binlog file names without their sequence number: positions compare only within one base name. */
export function binlogBaseName(file: string): string {
  return file.replace(/\.\d+$/, '');
}

/** A GTID set as the server prints it, without the line breaks MySQL puts after its commas. */
export function normalizeGtidSet(text: string | null | undefined): string {
  return (text ?? '').replace(/\s+/g, '');
}

/**
 * MariaDB: whether every `domain-server-seq` of `stored` is reached in `current` (gtid_binlog_state
 * keeps the last seq per domain and server id). A reset binlog or another server lacks them.
 */
export function mariadbGtidContained(stored: string, current: string): boolean {
  const last = new Map<string, bigint>();
  for (const g of normalizeGtidSet(current).split(',').filter(Boolean)) {
    const m = /^(\d+)-(\d+)-(\d+)$/.exec(g);
    if (m) last.set(`${m[1]}-${m[2]}`, BigInt(m[3]!));
  }
  for (const g of normalizeGtidSet(stored).split(',').filter(Boolean)) {
    const m = /^(\d+)-(\d+)-(\d+)$/.exec(g);
    if (!m) return false;
    const seq = last.get(`${m[1]}-${m[2]}`);
    if (seq === undefined || seq < BigInt(m[3]!)) return false;
  }
  return true;
}
