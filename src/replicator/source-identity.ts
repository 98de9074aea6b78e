// Checkpoints identify the server they were taken on. A binlog position is only a file name and an
// offset: against another server (a node URL now pointing elsewhere, a rebuilt node) or after
// RESET BINARY LOGS AND GTIDS / RESET MASTER the same names hold a different history, and reading
// from the offset would replay unrelated changes or skip real ones. So each start records, with
// the checkpoint on the target, the source's server_uuid (MariaDB: server_id), its GTID set and its
// binlog head; the next start refuses (permanently) when the source is no longer that server or its
// history went back. The capture resumes by file and offset only, never by GTID, so a different
// server is never resumed: the operator re-seeds.
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { binlogBaseName, comparePositions, mariadbGtidContained, normalizeGtidSet, parsePosition } from '../capture/position.ts';
import { headPosition, serverVersion } from '../capture/source.ts';
import { formatPosition } from '../capture/position.ts';
import { SourceIdentityError } from '../errors.ts';
import {
  MARIADB_SOURCE_IDENTITY_SQL,
  MYSQL_GTID_CONTAINED_SQL,
  MYSQL_SOURCE_IDENTITY_SQL,
  readSourceIdentitySql,
  recordSourceIdentitySql,
  resetCheckpointSqlText,
} from '../sql/checkpoint.ts';

export interface SourceIdentity {
  /** server_uuid (MySQL) or `server_id:N` (MariaDB, which has no uuid). */
  uuid: string;
  /** gtid_executed (MySQL with gtid_mode ON) or gtid_binlog_state (MariaDB); undefined without GTIDs. */
  gtidSet: string | undefined;
  /** The binlog head when it was read. */
  head: string;
  mariadb: boolean;
}

export interface StoredIdentity {
  uuid?: string;
  gtidSet?: string;
  head?: string;
}

export type IdentityProblem = { kind: 'other-server' } | { kind: 'gtids-gone' } | { kind: 'head-went-back' } | { kind: 'checkpoint-past-head' };

/**
 * Pure: what is wrong with resuming `checkpoint` on the server `current`, given what was recorded
 * at the last start. `gtidContained`: whether the stored GTID set is still in the server's.
 */
export function identityProblem(
  stored: StoredIdentity,
  current: SourceIdentity,
  checkpoint: string,
  gtidContained: boolean | undefined,
): IdentityProblem | undefined {
  if (stored.uuid !== undefined && stored.uuid !== current.uuid) return { kind: 'other-server' };
  if (stored.gtidSet && gtidContained === false) return { kind: 'gtids-gone' };
  const head = parsePosition(current.head);
  if (stored.head) {
    const before = parsePosition(stored.head);
    if (binlogBaseName(before.file) === binlogBaseName(head.file) && comparePositions(head, before) < 0) return { kind: 'head-went-back' };
  }
  const cp = parsePosition(checkpoint);
  if (binlogBaseName(cp.file) === binlogBaseName(head.file) && comparePositions(cp, head) > 0) return { kind: 'checkpoint-past-head' };
  return undefined;
}

/** Reads who the source is now. */
export async function readSourceIdentity(source: Pick<Connection, 'query'>): Promise<SourceIdentity> {
  const mariadb = /mariadb/i.test(await serverVersion(source));
  const [rows] = await source.query<RowDataPacket[]>(mariadb ? MARIADB_SOURCE_IDENTITY_SQL : MYSQL_SOURCE_IDENTITY_SQL);
  const r = rows[0]!;
  const gtids = normalizeGtidSet(r.gtidSet as string | null);
  const gtidOn = String(r.gtidMode).toUpperCase() === 'ON';
  return { uuid: String(r.uuid), gtidSet: gtidOn && gtids !== '' ? gtids : undefined, head: formatPosition(await headPosition(source)), mariadb };
}

async function gtidContained(source: Pick<Connection, 'query'>, current: SourceIdentity, stored: string): Promise<boolean> {
  if (current.mariadb) return mariadbGtidContained(stored, current.gtidSet ?? '');
  const [rows] = await source.query<RowDataPacket[]>(MYSQL_GTID_CONTAINED_SQL, [stored]);
  return Number(rows[0]!.contained) === 1;
}

export async function readStoredIdentity(target: Pick<Connection, 'query'>, metaSchema: string, sourceId: string): Promise<StoredIdentity> {
  const [rows] = await target.query<RowDataPacket[]>(readSourceIdentitySql(metaSchema), [sourceId]);
  const r = rows[0];
  const text = (v: unknown) => (v === null || v === undefined || v === '' ? undefined : String(v));
  return r ? { uuid: text(r.source_uuid), gtidSet: text(r.source_gtid_set), head: text(r.source_head) } : {};
}

export async function recordSourceIdentity(
  target: Pick<Connection, 'query'>,
  metaSchema: string,
  sourceId: string,
  epoch: bigint,
  identity: SourceIdentity,
): Promise<void> {
  await target.query(recordSourceIdentitySql(metaSchema), [identity.uuid, identity.gtidSet ?? null, identity.head, sourceId, epoch.toString()]);
}

export interface IdentityCheck {
  source: Pick<Connection, 'query'>;
  target: Pick<Connection, 'query'>;
  metaSchema: string;
  sourceId: string;
  /** The stored checkpoint position being resumed. */
  checkpoint: string;
  /** For the message: `n1→n2`, `node n1 (url)`, `node n2`. */
  direction: string;
  sourceName: string;
  targetName: string;
}

/** Throws SourceIdentityError when the checkpoint cannot be resumed on the source as it is now; returns who it is. */
export async function checkSourceIdentity(o: IdentityCheck): Promise<SourceIdentity> {
  const stored = await readStoredIdentity(o.target, o.metaSchema, o.sourceId);
  const current = await readSourceIdentity(o.source);
  const contained = stored.gtidSet ? await gtidContained(o.source, current, stored.gtidSet) : undefined;
  const problem = identityProblem(stored, current, o.checkpoint, contained);
  if (!problem) return current;
  const what: Record<IdentityProblem['kind'], string> = {
    'other-server':
      `the checkpoint of source ${o.sourceId} on ${o.targetName} (position ${o.checkpoint}) was taken on server ${stored.uuid}, ` +
      `but ${o.sourceName} is now server ${current.uuid}: another server (a node URL pointing elsewhere, or a rebuilt node) whose binlog position ${o.checkpoint} means nothing`,
    'gtids-gone':
      `the binary log of ${o.sourceName} (server ${current.uuid}, checkpoint server ${stored.uuid ?? 'unknown'}) was reset since the checkpoint ` +
      `(RESET BINARY LOGS AND GTIDS / RESET MASTER, or another server): GTIDs it had executed (${abbreviate(stored.gtidSet!)}) are not in its GTID state now ` +
      `(${abbreviate(current.gtidSet ?? '')}), so position ${o.checkpoint} belongs to a history that is gone`,
    'head-went-back':
      `the binary log of ${o.sourceName} (server ${current.uuid}, checkpoint server ${stored.uuid ?? 'unknown'}) was reset since the checkpoint ` +
      `(RESET BINARY LOGS AND GTIDS / RESET MASTER): its head ${current.head} is before ${stored.head}, recorded at the last start, so position ${o.checkpoint} belongs to a history that is gone`,
    'checkpoint-past-head':
      `position ${o.checkpoint} is past the binlog head ${current.head} of ${o.sourceName} (server ${current.uuid}, checkpoint server ${stored.uuid ?? 'unknown'}): ` +
      'the binary log was reset (RESET BINARY LOGS AND GTIDS / RESET MASTER) or this is another server',
  };
  throw new SourceIdentityError(
    `${o.direction}: ${what[problem.kind]}. This capture resumes by binlog file and offset only, not by GTID. ` +
      `What to do: re-seed ${o.targetName} from the source and reset the checkpoint: on ${o.targetName} run ` +
      `${resetCheckpointSqlText(o.metaSchema, o.sourceId)} and start replicate again (its first start records the current position and merges every table ` +
      '(or run lww-sink sync between the nodes)); or point the node URL back at the server the checkpoint was taken on.',
    o.sourceId,
    stored.uuid,
    current.uuid,
  );
}

function abbreviate(set: string): string {
  return set.length > 200 ? `${set.slice(0, 200)}…` : set;
}
