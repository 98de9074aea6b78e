// Queries the replicator runs against a node's metadata schema. Pure text; values bound.
import { quoteTable } from './quote.ts';

export function readNodeIdSql(metaSchema: string): string {
  return `SELECT \`node_id\` FROM ${quoteTable(metaSchema, 'node')} LIMIT 1`;
}

export function registeredTablesSql(metaSchema: string): string {
  return `SELECT \`schema_name\`, \`table_name\` FROM ${quoteTable(metaSchema, 'tables')} ORDER BY \`schema_name\`, \`table_name\``;
}

export const SCHEMA_EXISTS_SQL = 'SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?';
