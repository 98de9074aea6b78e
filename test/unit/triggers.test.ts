import { describe, expect, it } from 'vitest';
import { lockTombstone, triggerDefinitions, type TriggerTarget } from '../../src/sql/triggers.ts';

const items: TriggerTarget = {
  schema: 'shop',
  table: 'items',
  primaryKey: ['id'],
  versionColumn: '_lww_ts',
  metaSchema: 'lww_meta',
  tombstoneTable: 'tomb__shop__items',
  nodeId: 7,
  applySecret: 'C0FFEE00C0FFEE00C0FFEE00C0FFEE00C0FFEE00C0FFEE00C0FFEE00C0FFEE00',
};

const NOW = "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS UNSIGNED)";
const TOMB = '`lww_meta`.`tomb__shop__items`';

const V = '`_lww_ts`';
const LOCK_NEW = `SELECT GREATEST(lww_prev, COALESCE(MAX(${TOMB}.${V}), 0)) INTO lww_prev FROM ${TOMB} WHERE ${TOMB}.\`id\` = NEW.\`id\` FOR UPDATE;`;
const LOCK_OLD = LOCK_NEW.replace('= NEW.', '= OLD.');
const count = (text: string, part: string) => text.split(part).length - 1;

describe('trigger text', () => {
  it('the tombstone read is one fragment: a locking read raising lww_prev to the key\'s tombstone', () => {
    expect(lockTombstone(TOMB, `${TOMB}.${V}`, `${TOMB}.\`id\` = NEW.\`id\``)).toBe(LOCK_NEW);
  });

  it('renders the five triggers of a one-column-key table, each reading the tombstone of the key it writes with that fragment alone', () => {
    const defs = triggerDefinitions(items);
    expect(defs.map((d) => [d.name, d.timing, d.event])).toEqual([
      ['lww_bi__items', 'BEFORE', 'INSERT'],
      ['lww_ai__items', 'AFTER', 'INSERT'],
      ['lww_bu__items', 'BEFORE', 'UPDATE'],
      ['lww_au__items', 'AFTER', 'UPDATE'],
      ['lww_ad__items', 'AFTER', 'DELETE'],
    ]);
    expect(defs.map((d) => [count(d.body, LOCK_NEW), count(d.body, LOCK_OLD), count(d.body, 'FOR UPDATE')])).toEqual([
      [1, 0, 1],
      [1, 0, 1],
      [1, 0, 1],
      [1, 0, 1],
      [0, 1, 1],
    ]);
    for (const d of defs) {
      expect(d.create).not.toContain('{{');
      expect(d.create.split('\n')[0]).toBe(`CREATE TRIGGER \`shop\`.\`${d.name}\` ${d.timing} ${d.event} ON \`shop\`.\`items\` FOR EACH ROW`);
      // Only a session holding this node's apply secret keeps its version.
      expect(d.body).toContain('SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM `lww_meta`.`apply_secret` WHERE singleton = 1));');
    }
    const [bi, ai, bu, au, ad] = defs.map((d) => d.body) as [string, string, string, string, string];
    // Stamping triggers: server clock only, node id in the low bits, no wrap.
    for (const body of [bi, bu, ad]) {
      expect(body).toContain('IF TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), NOW(6)) > 1000000 THEN');
      expect(body).toContain(`SET lww_phys = GREATEST(${NOW}, (lww_prev >> 10) + 1);`);
      expect(body).toContain("IF lww_phys >= 18014398509481984 THEN\n      SIGNAL SQLSTATE '22003'");
      expect(body).toContain('(lww_phys << 10) | 7;');
    }
    // The insert also goes above a row a REPLACE deletes, read with a shared lock when it exists.
    expect(bi).toContain('SELECT MAX(`shop`.`items`.`_lww_ts`) INTO lww_row FROM `shop`.`items` WHERE `shop`.`items`.`id` = NEW.`id` LOCK IN SHARE MODE;');
    expect(bu).toContain('SET lww_prev = OLD.`_lww_ts`;\n    IF NOT (NEW.`id` = OLD.`id`) THEN');
    expect(ad).toContain(`SET lww_prev = OLD.${V};\n    ${LOCK_OLD}`);
    // After the row exists, a tombstone at or above it means a replicated delete won the race: retry.
    for (const body of [ai, au]) expect(body).toContain(`IF lww_prev >= NEW.${V} THEN\n      SIGNAL SQLSTATE '40001'`);
    expect(au).toContain('IF lww_stamp AND NOT (NEW.`id` = OLD.`id`) THEN');
    // A key change and a delete write the old key's tombstone, keeping the greatest version; an
    // existing tombstone takes the deleted row's spelling of the key (capture matches it by the image).
    for (const body of [bu, ad]) {
      expect(body).toContain(`INSERT INTO ${TOMB} (\`id\`, ${V}) VALUES (OLD.\`id\`, lww_v)\n`);
      expect(body).toContain(`ON DUPLICATE KEY UPDATE ${TOMB}.\`id\` = OLD.\`id\`, ${TOMB}.${V} = GREATEST(${TOMB}.${V}, lww_v);`);
    }
  });

  it('a parent of ON DELETE CASCADE children gets a BEFORE DELETE trigger writing their tombstones', () => {
    const defs = triggerDefinitions({
      ...items,
      cascades: [{ schema: 'shop', table: 'lines', primaryKey: ['id'], versionColumn: '_lww_ts', tombstoneTable: 'tomb__shop__lines', columns: [{ child: 'item_id', parent: 'id' }] }],
    });
    expect(defs.map((d) => d.name)).toEqual(['lww_bi__items', 'lww_ai__items', 'lww_bu__items', 'lww_au__items', 'lww_ad__items', 'lww_bd__items']);
    const bd = defs[5]!;
    expect([bd.timing, bd.event]).toEqual(['BEFORE', 'DELETE']);
    const LT = '`lww_meta`.`tomb__shop__lines`';
    const L = '`shop`.`lines`';
    const hlc = (prev: string) => `((GREATEST(${NOW}, (${prev} >> 10) + 1) << 10) | 7)`;
    expect(bd.body).toContain(
      `    UPDATE ${LT} JOIN ${L} ON ${LT}.\`id\` = ${L}.\`id\` SET ${LT}.\`id\` = ${L}.\`id\`, ${LT}.\`_lww_ts\` = GREATEST(${LT}.\`_lww_ts\`, lww_v, ${hlc(`GREATEST(${L}.\`_lww_ts\`, ${LT}.\`_lww_ts\`)`)}) WHERE ${L}.\`item_id\` = OLD.\`id\`;\n` +
        `    INSERT INTO ${LT} (\`id\`, \`_lww_ts\`) SELECT ${L}.\`id\`, GREATEST(lww_v, ${hlc(`${L}.\`_lww_ts\``)}) FROM ${L} WHERE ${L}.\`item_id\` = OLD.\`id\` AND NOT EXISTS (SELECT 1 FROM ${LT} WHERE ${LT}.\`id\` = ${L}.\`id\`);`,
    );
    expect(bd.body).toContain(`SET lww_v = (GREATEST(${NOW}, (lww_prev >> 10) + 1) << 10) | 7;`);
  });

  it('where a REPLACE keeps children (MySQL SQL-layer foreign keys), the delete leaves those whose referenced key the insert writes back', () => {
    const lines = { schema: 'shop', table: 'lines', primaryKey: ['id'], versionColumn: '_lww_ts', tombstoneTable: 'tomb__shop__lines', columns: [{ child: 'item_id', parent: 'id' }] };
    const plain = triggerDefinitions({ ...items, cascades: [lines] });
    for (const d of plain) expect(d.body).not.toContain('@lww_ref_');
    const [bi, ai, bu, , ad, bd] = triggerDefinitions({ ...items, cascades: [lines, { ...lines, table: 'notes', onDelete: 'SET NULL' }], replaceKeepsReferences: true }).map((d) => d.body);
    const note = (row: string) => `CONCAT_WS(',', CAST(NOW(6) AS CHAR), COALESCE(HEX(CAST(${row}.\`id\` AS BINARY)), '-'))`;
    // One note for both foreign keys (they name the same column), set by the insert, dropped by the insert's end or an update.
    const [name] = /@lww_ref_[0-9a-f]{12}_0/.exec(bi!)!;
    expect(bi).toContain(`SET ${name} = ${note('NEW')};`);
    expect(bi).not.toContain('_1 =');
    for (const body of [ai, bu]) expect(body).toContain(`SET ${name} = NULL;`);
    expect(bd!.split(`IF ${name} <=> ${note('OLD')} THEN`).length).toBe(3);
    const kept = name.replace('@lww_ref_', '@lww_kept_').slice(0, -1);
    const notes = '`shop`.`notes` WHERE `shop`.`notes`.`item_id` = OLD.`id`';
    expect(bd).toContain(`    ELSE\n      SET ${kept}1 = NULL;\n      IF @@SESSION.foreign_key_checks = 0 AND EXISTS (SELECT 1 FROM ${notes}) THEN\n        SIGNAL SQLSTATE '45000'`);
    expect(bd).toContain(`      END IF;\n      UPDATE \`shop\`.\`notes\` SET \`item_id\` = NULL WHERE \`shop\`.\`notes\`.\`item_id\` = OLD.\`id\`;\n    END IF;`);
    // The AFTER DELETE trigger checks that the server kept what the delete left.
    expect(ad).toContain(`IF NOT EXISTS (SELECT 1 FROM \`shop\`.\`lines\` WHERE \`shop\`.\`lines\`.\`item_id\` = OLD.\`id\`) THEN\n        SET ${name} = NULL;\n        SIGNAL SQLSTATE '40001'`);
  });

  it('tells the sink’s session by the rendered secret first and reads the secret table only when that differs; refuses a secret that is not hex', () => {
    const literal = `SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> _binary'${items.applySecret}');`;
    const read = 'SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM `lww_meta`.`apply_secret` WHERE singleton = 1));';
    for (const d of triggerDefinitions(items)) {
      expect(count(d.body, literal)).toBe(1);
      expect(count(d.body, read)).toBe(1);
      expect(d.body).toContain(`IF @lww_apply IS NOT NULL THEN\n    ${literal}\n    IF lww_stamp THEN\n      ${read}\n    END IF;\n  END IF;`);
    }
    expect(() => triggerDefinitions({ ...items, applySecret: "x' OR 1 --" })).toThrow(/hex digits/);
  });

  it('the body is the statement after FOR EACH ROW, as the server stores it', () => {
    for (const d of triggerDefinitions(items)) {
      expect(d.body.startsWith('BEGIN\n')).toBe(true);
      expect(d.body.endsWith('\nEND')).toBe(true);
      expect(d.create.endsWith(`FOR EACH ROW\n${d.body}`)).toBe(true);
    }
  });

  it('matches every column of a composite key and quotes awkward names', () => {
    const defs = triggerDefinitions({
      ...items,
      schema: 'd b',
      table: 'we`ird tâble',
      primaryKey: ['region', 'lww_prev'],
      tombstoneTable: 'tomb_x',
      nodeId: 1023,
    });
    const [bi, , bu, , ad] = defs;
    expect(bi!.create.split('\n')[0]).toBe('CREATE TRIGGER `d b`.`lww_bi__we``ird tâble` BEFORE INSERT ON `d b`.`we``ird tâble` FOR EACH ROW');
    expect(bi!.body).toContain(
      'WHERE `lww_meta`.`tomb_x`.`region` = NEW.`region` AND `lww_meta`.`tomb_x`.`lww_prev` = NEW.`lww_prev` FOR UPDATE;',
    );
    expect(bu!.body).toContain('IF NOT (NEW.`region` = OLD.`region` AND NEW.`lww_prev` = OLD.`lww_prev`) THEN');
    expect(ad!.body).toContain('(`region`, `lww_prev`, `_lww_ts`) VALUES (OLD.`region`, OLD.`lww_prev`, lww_v)');
    for (const d of [bi, bu, ad]) expect(d!.body).toContain('<< 10) | 1023;');
  });

  it('a name ending in "FOR EACH ROW" does not confuse the body', () => {
    const [bi] = triggerDefinitions({ ...items, table: 't FOR EACH ROW\nBEGIN' });
    expect(bi!.body.startsWith('BEGIN\n  DECLARE')).toBe(true);
  });

  it('long table names get hashed trigger names within 64 characters', () => {
    const defs = triggerDefinitions({ ...items, table: 'x'.repeat(64) });
    for (const d of defs) expect(d.name.length).toBeLessThanOrEqual(64);
    expect(new Set(defs.map((d) => d.name)).size).toBe(5);
  });

  it('refuses node ids outside 0..1023 and tables without a key', () => {
    expect(() => triggerDefinitions({ ...items, nodeId: 1024 })).toThrow(/node id/);
    expect(() => triggerDefinitions({ ...items, nodeId: -1 })).toThrow(/node id/);
    expect(() => triggerDefinitions({ ...items, nodeId: 1.5 })).toThrow(/node id/);
    expect(() => triggerDefinitions({ ...items, primaryKey: [] })).toThrow(/primary key/);
  });
});
