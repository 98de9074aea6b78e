// Text of the triggers that stamp local writes with versions, rendered from sql/triggers.sql.
// Pure: the same table shape and node id always give the same text, so install can compare what a
// server holds with what it would create, and an operator reads exactly what runs.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { APPLY_SECRET_TABLE, shortHash, triggerName } from '../model/names.ts';
import { CLAIM_VERSION_COLUMN, type ClaimIndex, claimOwnerColumns } from '../model/table.ts';
import { MAX_NODE_ID } from '../model/version.ts';
import { quoteIdent, quoteList, quoteTable } from './quote.ts';

export type TriggerKind = 'bi' | 'ai' | 'bu' | 'au' | 'ad' | 'bd';

export interface TriggerTarget {
  schema: string;
  table: string;
  /** Primary-key column names in key order. */
  primaryKey: readonly string[];
  versionColumn: string;
  metaSchema: string;
  tombstoneTable: string;
  /** Baked into the trigger text: the low 10 bits of every version this server stamps. */
  nodeId: number;
  /** Baked into the trigger text: this node's apply secret (lww_meta.apply_secret, hex), compared before the table is read. */
  applySecret: string;
  /** Installed tables whose rows reference this one with ON DELETE CASCADE or SET NULL (they get a BEFORE DELETE trigger). */
  cascades?: readonly CascadeChild[];
  /** Secondary UNIQUE keys with a claim table in the metadata schema. */
  claims?: readonly ClaimIndex[];
  /**
   * The server takes no ON DELETE action when a REPLACE deletes a parent row and writes the foreign
   * key's referenced values back byte for byte (MySQL 9.6+ with foreign keys in the SQL layer,
   * innodb_native_foreign_keys=OFF); InnoDB's own foreign keys (MariaDB, older MySQL) always act.
   */
  replaceKeepsReferences?: boolean;
}

/** A table whose rows a foreign key's ON DELETE CASCADE (or SET NULL) deletes (or changes) when a row of the parent goes. */
export interface CascadeChild {
  /** Default CASCADE. */
  onDelete?: 'CASCADE' | 'SET NULL';
  schema: string;
  table: string;
  primaryKey: readonly string[];
  versionColumn: string;
  tombstoneTable: string;
  /** Foreign-key column pairs: the child's column and the parent column it references. */
  columns: readonly { child: string; parent: string }[];
}

export interface TriggerDefinition {
  kind: TriggerKind;
  name: string;
  timing: 'BEFORE' | 'AFTER';
  event: 'INSERT' | 'UPDATE' | 'DELETE';
  /** BEGIN ... END, as information_schema.TRIGGERS.ACTION_STATEMENT reports it. */
  body: string;
  /** CREATE TRIGGER ... FOR EACH ROW <body> */
  create: string;
}

/** Microseconds since the epoch of NOW(6) as BIGINT UNSIGNED (UTC, so DST never shifts it). */
export const NOW_MICROS_SQL = "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS UNSIGNED)";

const KINDS: readonly { kind: TriggerKind; timing: TriggerDefinition['timing']; event: TriggerDefinition['event'] }[] = [
  { kind: 'bi', timing: 'BEFORE', event: 'INSERT' },
  { kind: 'ai', timing: 'AFTER', event: 'INSERT' },
  { kind: 'bu', timing: 'BEFORE', event: 'UPDATE' },
  { kind: 'au', timing: 'AFTER', event: 'UPDATE' },
  { kind: 'ad', timing: 'AFTER', event: 'DELETE' },
];

const CASCADE_KIND = { kind: 'bd', timing: 'BEFORE', event: 'DELETE' } as const;

/** Every trigger kind install may create (uninstall drops these names). */
export const TRIGGER_KINDS: readonly TriggerKind[] = [...KINDS.map((k) => k.kind), CASCADE_KIND.kind];

/** Physical parts at or above this do not fit a version: (2^54 << 10) wraps to 0. */
const MAX_PHYSICAL = 1n << 54n;

let templates: string[] | undefined;

function triggerTemplates(): string[] {
  if (!templates) {
    const text = readFileSync(fileURLToPath(new URL('../../sql/triggers.sql', import.meta.url)), 'utf8');
    templates = text
      .split(/^;\s*$/m)
      .map((part) =>
        part
          .split('\n')
          .filter((line) => !line.trimStart().startsWith('--'))
          .join('\n')
          .trim(),
      )
      .filter((part) => part.length > 0);
    const wellFormed = templates.every((t) => /^CREATE TRIGGER [^\n]* FOR EACH ROW\nBEGIN\n/.test(t));
    if (templates.length !== KINDS.length + 1 || !wellFormed) {
      throw new Error(`sql/triggers.sql must hold ${KINDS.length + 1} templates, each "CREATE TRIGGER ... FOR EACH ROW" then a BEGIN line`);
    }
  }
  return templates;
}

/** Sets lww_stamp to false for the sink's session: the rendered secret first, the secret table only when that differs. */
function isApplySession(target: TriggerTarget): string {
  if (!/^[0-9A-Fa-f]{16,128}$/.test(target.applySecret)) throw new Error('the apply secret must be 16 to 128 hex digits');
  const table = quoteTable(target.metaSchema, APPLY_SECRET_TABLE);
  return (
    `SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> _binary'${target.applySecret}');\n` +
    '    IF lww_stamp THEN\n' +
    `      SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM ${table} WHERE singleton = 1));\n` +
    '    END IF;'
  );
}

function render(template: string, vars: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    const v = vars[key];
    if (v === undefined) throw new Error(`sql/triggers.sql needs {{${key}}}`);
    return v;
  });
}

/** The triggers of one table: before and after insert, before and after update, after delete. */
export function triggerDefinitions(target: TriggerTarget): TriggerDefinition[] {
  if (!Number.isInteger(target.nodeId) || target.nodeId < 0 || target.nodeId > MAX_NODE_ID) {
    throw new RangeError(`node id must be an integer in 0..${MAX_NODE_ID}, got ${target.nodeId}`);
  }
  if (target.primaryKey.length === 0) throw new Error(`${target.schema}.${target.table} has no primary key`);
  const table = quoteTable(target.schema, target.table);
  const tombstone = quoteTable(target.metaSchema, target.tombstoneTable);
  const key = target.primaryKey;
  const pairs = (left: (c: string) => string, right: (c: string) => string) => key.map((c) => `${left(c)} = ${right(c)}`).join(' AND ');
  const ofTable = (c: string) => `${table}.${quoteIdent(c)}`;
  const ofTomb = (c: string) => `${tombstone}.${quoteIdent(c)}`;
  const ofNew = (c: string) => `NEW.${quoteIdent(c)}`;
  const ofOld = (c: string) => `OLD.${quoteIdent(c)}`;
  const shared = {
    table,
    tombstone,
    version: quoteIdent(target.versionColumn),
    row_version: ofTable(target.versionColumn),
    tomb_version: ofTomb(target.versionColumn),
    key_columns: quoteList(key),
    old_key: key.map(ofOld).join(', '),
    row_key_is_new: pairs(ofTable, ofNew),
    lock_tombstone_of_new: lockTombstone(tombstone, ofTomb(target.versionColumn), pairs(ofTomb, ofNew)),
    lock_tombstone_of_old: lockTombstone(tombstone, ofTomb(target.versionColumn), pairs(ofTomb, ofOld)),
    key_unchanged: pairs(ofNew, ofOld),
    tomb_key_of_old: key.map((c) => `${ofTomb(c)} = ${ofOld(c)}`).join(', '),
    now_us: NOW_MICROS_SQL,
    node_id: String(target.nodeId),
    is_apply_session: isApplySession(target),
    max_physical: MAX_PHYSICAL.toString(),
  };
  const cascades = target.cascades ?? [];
  const texts = triggerTemplates();
  const kinds = cascades.length > 0 ? [...KINDS, CASCADE_KIND] : KINDS;
  const kept = keptReferences(target);
  const vars0 = {
    ...shared,
    ...claimFragments(target),
    ...kept.fragments,
    cascade_tombstones: cascades
      .map((c, i) => kept.unlessKept(i, `${refusedWithoutChecks(c)}\n${c.onDelete === 'SET NULL' ? setNullChildren(c) : cascadeTombstones(c, target.metaSchema, shared.now_us, shared.node_id)}`))
      .join('\n'),
  };
  return kinds.map((k, i) => {
    const name = triggerName(target.table, k.kind);
    // Head and body are rendered apart: a quoted name may contain any text, even "FOR EACH ROW".
    const template = texts[i]!;
    const cut = template.indexOf('\n');
    const vars = { ...vars0, name: quoteTable(target.schema, name) };
    const head = render(template.slice(0, cut), vars);
    const body = render(template.slice(cut + 1), vars);
    const create = `${head}\n${body}`;
    return { ...k, name, body, create };
  });
}

/**
 * The one tombstone read of the triggers: raises lww_prev to the version of the key's tombstone,
 * as a locking read (the latest committed tombstone, whatever the isolation level or snapshot).
 */
export function lockTombstone(tombstone: string, tombVersion: string, keyMatch: string): string {
  return `SELECT GREATEST(lww_prev, COALESCE(MAX(${tombVersion}), 0)) INTO lww_prev FROM ${tombstone} WHERE ${keyMatch} FOR UPDATE;`;
}

/**
 * The trigger fragments of a table's claim tables (sql/triggers.sql): locking reads that raise
 * lww_prev above every claim of NEW's values, and the upserts that record OLD's values as given up.
 * Empty strings for a table without claim tables.
 */
function claimFragments(target: TriggerTarget): Record<string, string> {
  const claims = target.claims ?? [];
  const owners = claimOwnerColumns(target.primaryKey);
  const cv = quoteIdent(CLAIM_VERSION_COLUMN);
  const version = quoteIdent(target.versionColumn);
  const parts = claims.map((c) => {
    const table = quoteTable(target.metaSchema, c.table);
    const of = (row: 'NEW' | 'OLD') => c.columns.map((col) => `${table}.${quoteIdent(col)} = ${row}.${quoteIdent(col)}`).join(' AND ');
    const unchanged = c.columns.map((col) => `NEW.${quoteIdent(col)} <=> OLD.${quoteIdent(col)}`).join(' AND ');
    const held = c.columns.map((col) => `OLD.${quoteIdent(col)} IS NOT NULL`).join(' AND ');
    const lock = `SELECT GREATEST(lww_prev, COALESCE(MAX(${table}.${cv}), 0)) INTO lww_prev FROM ${table} WHERE ${of('NEW')} FOR UPDATE;`;
    const newer = `OLD.${version} > ${table}.${cv}`;
    const record =
      `INSERT INTO ${table} (${quoteList([...c.columns, ...owners, CLAIM_VERSION_COLUMN])}) VALUES (${[...c.columns, ...target.primaryKey].map((col) => `OLD.${quoteIdent(col)}`).join(', ')}, OLD.${version})` +
      ` ON DUPLICATE KEY UPDATE ${[...owners.map((o, i) => `${quoteIdent(o)} = IF(${newer}, OLD.${quoteIdent(target.primaryKey[i]!)}, ${table}.${quoteIdent(o)})`), `${cv} = GREATEST(${table}.${cv}, OLD.${version})`].join(', ')};`;
    return { lock, unchanged, held, record };
  });
  if (parts.length === 0) return { lock_claims_of_new: '', recheck_claims_of_new: '', lock_claims_of_changed: '', release_claims_of_updated: '', release_claims_of_deleted: '' };
  const lockAll = parts.map((p) => `    ${p.lock}`).join('\n');
  return {
    lock_claims_of_new: lockAll,
    // After the insert: a claim committed since the BEFORE trigger's read (no gap lock under READ COMMITTED).
    recheck_claims_of_new:
      `${lockAll}\n    IF lww_prev >= NEW.${version} THEN\n` +
      "      SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'lww: a replicated claim of this UNIQUE value committed while the insert ran; retry the transaction';\n    END IF;",
    lock_claims_of_changed: parts.map((p) => `    IF NOT (${p.unchanged}) THEN\n      ${p.lock}\n    END IF;`).join('\n'),
    // After the update: the values given up are recorded — by the sink's writes too (a stored row
    // it overwrites or removes held its value at its version on some node: the other nodes learn
    // of it as a claim, so this one must too); a value a local write takes is checked again against
    // claims committed since the BEFORE trigger's read (READ COMMITTED takes no gap lock there).
    release_claims_of_updated: parts
      .map(
        (p) =>
          `  IF NOT (${p.unchanged}) THEN\n    IF lww_stamp THEN\n      ${p.lock}\n      IF lww_prev >= NEW.${version} THEN\n` +
          "        SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'lww: a replicated claim of this UNIQUE value committed while the update ran; retry the transaction';\n" +
          `      END IF;\n    END IF;\n    IF ${p.held} THEN\n      ${p.record}\n    END IF;\n  END IF;`,
      )
      .join('\n'),
    release_claims_of_deleted: parts.map((p) => `  IF ${p.held} THEN\n    ${p.record}\n  END IF;`).join('\n'),
  };
}

/**
 * The fragments that keep a REPLACE's children where the server keeps them (TriggerTarget
 * replaceKeepsReferences; sql/triggers.sql explains them): per referencing foreign key, a session
 * variable holding the statement's start time and the inserted row's referenced values (hex of their
 * bytes, as the server compares them), and one set by the delete when it left children alone, which
 * the AFTER DELETE trigger checks. Nothing for other servers or tables without such children.
 */
function keptReferences(target: TriggerTarget): { fragments: Record<string, string>; unlessKept: (i: number, action: string) => string } {
  const cascades = target.cascades ?? [];
  if (!target.replaceKeepsReferences || cascades.length === 0) {
    return { fragments: { remember_references: '', forget_references: '', check_kept_references: '' }, unlessKept: (_i, action) => action };
  }
  const id = shortHash(`${target.schema}\u0000${target.table}`);
  // One note per distinct list of referenced columns (most foreign keys name the primary key).
  const listOf = (c: CascadeChild) => JSON.stringify(c.columns.map((p) => p.parent));
  const firsts = cascades.flatMap((c, i) => (cascades.findIndex((d) => listOf(d) === listOf(c)) === i ? [i] : []));
  const note = (i: number) => `@lww_ref_${id}_${firsts.findIndex((f) => listOf(cascades[f]!) === listOf(cascades[i]!))}`;
  const left = (i: number) => `@lww_kept_${id}_${i}`;
  const values = (row: 'NEW' | 'OLD', c: CascadeChild) =>
    `CONCAT_WS(',', CAST(NOW(6) AS CHAR), ${c.columns.map((p) => `COALESCE(HEX(CAST(${row}.${quoteIdent(p.parent)} AS BINARY)), '-')`).join(', ')})`;
  const children = (c: CascadeChild) => `SELECT 1 FROM ${quoteTable(c.schema, c.table)} WHERE ${referencesOld(c)}`;
  return {
    fragments: {
      remember_references: firsts.map((i) => `\n    SET ${note(i)} = ${values('NEW', cascades[i]!)};`).join(''),
      forget_references: firsts.map((i) => `\n    SET ${note(i)} = NULL;`).join(''),
      check_kept_references: cascades
        .map(
          (c, i) =>
            `\n    IF ${left(i)} THEN\n      SET ${left(i)} = NULL;\n      IF NOT EXISTS (${children(c)}) THEN\n        SET ${note(i)} = NULL;\n` +
            "        SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'lww: a REPLACE note of another statement begun in the same microsecond met this delete; retry the statement';\n" +
            '      END IF;\n    END IF;',
        )
        .join(''),
    },
    unlessKept: (i, action) =>
      `    IF ${note(i)} <=> ${values('OLD', cascades[i]!)} THEN\n      SET ${left(i)} = EXISTS (${children(cascades[i]!)});\n    ELSE\n      SET ${left(i)} = NULL;\n${action.replace(/^/gm, '  ')}\n    END IF;`,
  };
}

/** The child rows of one foreign key that reference the deleted row (OLD), as a WHERE condition. */
function referencesOld(c: CascadeChild): string {
  const child = quoteTable(c.schema, c.table);
  return c.columns.map((p) => `${child}.${quoteIdent(p.child)} = OLD.${quoteIdent(p.parent)}`).join(' AND ');
}

/**
 * With foreign_key_checks=0 the server takes no ON DELETE action: the children of the deleted row
 * stay here, while the replicated delete would take them on the other nodes. Such a delete is
 * refused while the row has children (a parent without any is deleted as usual).
 */
function refusedWithoutChecks(c: CascadeChild): string {
  return (
    `    IF @@SESSION.foreign_key_checks = 0 AND EXISTS (SELECT 1 FROM ${quoteTable(c.schema, c.table)} WHERE ${referencesOld(c)}) THEN\n` +
    "      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: foreign_key_checks=0 while deleting a row referenced ON DELETE CASCADE or SET NULL: other nodes would act on its children';\n" +
    '    END IF;'
  );
}

/** The UPDATE + INSERT that raise or write the tombstones of one foreign key's cascaded child rows. */
function cascadeTombstones(c: CascadeChild, metaSchema: string, nowUs: string, nodeId: string): string {
  const child = quoteTable(c.schema, c.table);
  const tomb = quoteTable(metaSchema, c.tombstoneTable);
  const v = quoteIdent(c.versionColumn);
  const keyMatch = c.primaryKey.map((k) => `${tomb}.${quoteIdent(k)} = ${child}.${quoteIdent(k)}`).join(' AND ');
  const ofParent = referencesOld(c);
  const hlc = (prev: string) => `((GREATEST(${nowUs}, (${prev} >> 10) + 1) << 10) | ${nodeId})`;
  return (
    `    UPDATE ${tomb} JOIN ${child} ON ${keyMatch} SET ${c.primaryKey.map((k) => `${tomb}.${quoteIdent(k)} = ${child}.${quoteIdent(k)}, `).join('')}${tomb}.${v} = GREATEST(${tomb}.${v}, lww_v, ${hlc(`GREATEST(${child}.${v}, ${tomb}.${v})`)}) WHERE ${ofParent};\n` +
    `    INSERT INTO ${tomb} (${quoteList([...c.primaryKey, c.versionColumn])}) SELECT ${c.primaryKey.map((k) => `${child}.${quoteIdent(k)}`).join(', ')}, GREATEST(lww_v, ${hlc(`${child}.${v}`)})` +
    ` FROM ${child} WHERE ${ofParent} AND NOT EXISTS (SELECT 1 FROM ${tomb} WHERE ${keyMatch});`
  );
}

/**
 * ON DELETE SET NULL done by the parent's delete itself, before the foreign key would: an UPDATE
 * the child's own triggers stamp with a new version (a cascade's change gets none, so it would never
 * win anywhere, and a peer whose parent row was re-inserted would keep the old reference). The
 * foreign key's own action then finds nothing left to change.
 */
function setNullChildren(c: CascadeChild): string {
  return `    UPDATE ${quoteTable(c.schema, c.table)} SET ${c.columns.map((p) => `${quoteIdent(p.child)} = NULL`).join(', ')} WHERE ${referencesOld(c)};`;
}

/** DROP TRIGGER IF EXISTS for one of a table's triggers. */
export function dropTriggerSql(schema: string, name: string): string {
  return `DROP TRIGGER IF EXISTS ${quoteTable(schema, name)}`;
}
