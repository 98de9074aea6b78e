// Warns when two nodes can hand out the same AUTO_INCREMENT ids: both would insert "new" rows with
// the same key, and LWW would keep only one of them. Each node hands out ids offset + k*increment;
// two such sequences share values exactly when the offsets agree modulo gcd(increments).
import type { Connection, RowDataPacket } from 'mysql2/promise';
import { connect, describeTarget } from '../db/connection.ts';
import { AUTO_INCREMENT_SETTINGS_SQL, AUTO_INCREMENT_TABLES_SQL, META_TABLE_EXISTS_SQL, selectRegisteredTablesSql } from '../sql/install.ts';
import { formatTableRef, type TableRef } from './table-list.ts';

export interface AutoIncrementSettings {
  increment: number;
  offset: number;
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/** The offset the server really uses: an offset above the increment is ignored (MySQL manual). */
function effectiveOffset(s: AutoIncrementSettings): number {
  return s.offset > s.increment ? 1 : s.offset;
}

/** True when the two id sequences have values in common. */
export function autoIncrementRangesCollide(a: AutoIncrementSettings, b: AutoIncrementSettings): boolean {
  return (effectiveOffset(a) - effectiveOffset(b)) % gcd(a.increment, b.increment) === 0;
}

export interface NodeAutoIncrement extends AutoIncrementSettings {
  /** How the node is named in warnings (its redacted URL or host:port). */
  label: string;
  /** Replicated tables of this node with an AUTO_INCREMENT column. */
  tables: TableRef[];
}

/** Readable warnings, one per pair of nodes whose sequences collide on tables both replicate. */
export function autoIncrementWarnings(nodes: readonly NodeAutoIncrement[]): string[] {
  const warnings: string[] = [];
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) {
      const a = nodes[i]!;
      const b = nodes[j]!;
      const onB = new Set(b.tables.map(formatTableRef));
      const shared = a.tables.map(formatTableRef).filter((t) => onB.has(t));
      if (shared.length === 0 || !autoIncrementRangesCollide(a, b)) continue;
      warnings.push(
        `${a.label} (auto_increment_increment=${a.increment}, auto_increment_offset=${a.offset}) and ` +
          `${b.label} (auto_increment_increment=${b.increment}, auto_increment_offset=${b.offset}) can hand out the same ` +
          `AUTO_INCREMENT ids for ${shared.join(', ')}: rows inserted on both with the same id overwrite each other. ` +
          `Set auto_increment_increment to at least the number of nodes (${nodes.length}) on every node and a ` +
          `different auto_increment_offset on each (e.g. 1, 2, ...).`,
      );
    }
  }
  return warnings;
}

export interface AutoIncrementCheckOptions {
  metaSchema?: string;
  /** Tables to consider; default: the tables registered by install on each node (all tables of a node with no registry). */
  tables?: TableRef[];
}

async function readNode(conn: Connection, label: string, options: AutoIncrementCheckOptions): Promise<NodeAutoIncrement> {
  const [settings] = await conn.query<RowDataPacket[]>(AUTO_INCREMENT_SETTINGS_SQL);
  const [aiRows] = await conn.query<RowDataPacket[]>(AUTO_INCREMENT_TABLES_SQL);
  let tables: TableRef[] = aiRows.map((r) => ({ schema: String(r.schemaName), table: String(r.tableName) }));
  let wanted: Set<string> | undefined;
  if (options.tables) {
    wanted = new Set(options.tables.map(formatTableRef));
  } else {
    const meta = options.metaSchema ?? 'lww_meta';
    const [exists] = await conn.query<RowDataPacket[]>(META_TABLE_EXISTS_SQL, [meta, 'tables']);
    if (Number(exists[0]!.n) > 0) {
      const [registered] = await conn.query<RowDataPacket[]>(selectRegisteredTablesSql(meta));
      if (registered.length > 0) wanted = new Set(registered.map((r) => formatTableRef({ schema: String(r.schemaName), table: String(r.tableName) })));
    }
  }
  if (wanted) tables = tables.filter((t) => wanted.has(formatTableRef(t)));
  return { label, increment: Number(settings[0]!.aiIncrement), offset: Number(settings[0]!.aiOffset), tables };
}

/**
 * Reads auto_increment_increment / auto_increment_offset (global: what application sessions get)
 * of every node and returns a warning per pair of nodes that can hand out the same ids.
 */
export async function checkAutoIncrementCollisions(
  nodes: readonly (Connection | string)[],
  options: AutoIncrementCheckOptions = {},
): Promise<string[]> {
  const infos: NodeAutoIncrement[] = [];
  for (const [i, node] of nodes.entries()) {
    if (typeof node === 'string') {
      const conn = await connect(node);
      try {
        infos.push(await readNode(conn, describeTarget(node), options));
      } finally {
        await conn.end();
      }
    } else {
      const { host, port } = node.config;
      infos.push(await readNode(node, host ? `${host}:${port ?? 3306}` : `node #${i + 1}`, options));
    }
  }
  return autoIncrementWarnings(infos);
}
