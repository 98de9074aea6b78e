import { describe, expect, it } from 'vitest';
import { triggerDefinitions, type TriggerTarget } from '../../src/sql/triggers.ts';

const items: TriggerTarget = {
  schema: 'shop',
  table: 'items',
  primaryKey: ['id'],
  versionColumn: '_lww_ts',
  metaSchema: 'lww_meta',
  tombstoneTable: 'tomb__shop__items',
  nodeId: 7,
};

const NOW = "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS UNSIGNED)";
const TOMB = '`lww_meta`.`tomb__shop__items`';

const EXPECTED_BI = `CREATE TRIGGER \`shop\`.\`lww_bi__items\` BEFORE INSERT ON \`shop\`.\`items\` FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_row BIGINT UNSIGNED DEFAULT NULL;
  DECLARE lww_phys BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM \`lww_meta\`.\`apply_secret\` WHERE singleton = 1));
  END IF;
  IF lww_stamp THEN
    IF TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), NOW(6)) > 1000000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: the session clock (SET TIMESTAMP) is ahead of the server clock; local writes are stamped with the server time';
    END IF;
    SELECT COALESCE(MAX(${TOMB}.\`_lww_ts\`), 0) INTO lww_prev FROM ${TOMB} WHERE ${TOMB}.\`id\` = NEW.\`id\` FOR UPDATE;
    SELECT MAX(\`shop\`.\`items\`.\`_lww_ts\`) INTO lww_row FROM \`shop\`.\`items\` WHERE \`shop\`.\`items\`.\`id\` = NEW.\`id\`;
    IF lww_row IS NOT NULL THEN
      SELECT MAX(\`shop\`.\`items\`.\`_lww_ts\`) INTO lww_row FROM \`shop\`.\`items\` WHERE \`shop\`.\`items\`.\`id\` = NEW.\`id\` LOCK IN SHARE MODE;
    END IF;
    SET lww_phys = GREATEST(${NOW}, (lww_prev >> 10) + 1);
    IF lww_row IS NOT NULL THEN
      SET lww_phys = GREATEST(lww_phys, (lww_row >> 10) + 1) + 1;
    END IF;
    IF lww_phys >= 18014398509481984 THEN
      SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = 'lww: version overflow (a stored version is near 2^64); refusing to wrap';
    END IF;
    SET NEW.\`_lww_ts\` = (lww_phys << 10) | 7;
  END IF;
END`;

const EXPECTED_AI = `CREATE TRIGGER \`shop\`.\`lww_ai__items\` AFTER INSERT ON \`shop\`.\`items\` FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM \`lww_meta\`.\`apply_secret\` WHERE singleton = 1));
  END IF;
  IF lww_stamp THEN
    SELECT COALESCE(MAX(${TOMB}.\`_lww_ts\`), 0) INTO lww_prev FROM ${TOMB} WHERE ${TOMB}.\`id\` = NEW.\`id\` FOR UPDATE;
    IF lww_prev >= NEW.\`_lww_ts\` THEN
      SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'lww: a replicated delete of this key committed while the insert ran; retry the transaction';
    END IF;
  END IF;
END`;

const EXPECTED_BU = `CREATE TRIGGER \`shop\`.\`lww_bu__items\` BEFORE UPDATE ON \`shop\`.\`items\` FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_phys BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_v BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM \`lww_meta\`.\`apply_secret\` WHERE singleton = 1));
  END IF;
  IF lww_stamp THEN
    IF TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), NOW(6)) > 1000000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: the session clock (SET TIMESTAMP) is ahead of the server clock; local writes are stamped with the server time';
    END IF;
    SET lww_prev = OLD.\`_lww_ts\`;
    IF NOT (NEW.\`id\` = OLD.\`id\`) THEN
      SELECT GREATEST(lww_prev, COALESCE(MAX(${TOMB}.\`_lww_ts\`), 0)) INTO lww_prev FROM ${TOMB} WHERE ${TOMB}.\`id\` = NEW.\`id\` FOR UPDATE;
    END IF;
    SET lww_phys = GREATEST(${NOW}, (lww_prev >> 10) + 1);
    IF lww_phys >= 18014398509481984 THEN
      SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = 'lww: version overflow (a stored version is near 2^64); refusing to wrap';
    END IF;
    SET lww_v = (lww_phys << 10) | 7;
    SET NEW.\`_lww_ts\` = lww_v;
    IF NOT (NEW.\`id\` = OLD.\`id\`) THEN
      INSERT INTO ${TOMB} (\`id\`, \`_lww_ts\`) VALUES (OLD.\`id\`, lww_v)
        ON DUPLICATE KEY UPDATE ${TOMB}.\`_lww_ts\` = GREATEST(${TOMB}.\`_lww_ts\`, lww_v);
    END IF;
  END IF;
END`;

const EXPECTED_AU = `CREATE TRIGGER \`shop\`.\`lww_au__items\` AFTER UPDATE ON \`shop\`.\`items\` FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM \`lww_meta\`.\`apply_secret\` WHERE singleton = 1));
  END IF;
  IF lww_stamp AND NOT (NEW.\`id\` = OLD.\`id\`) THEN
    SELECT COALESCE(MAX(${TOMB}.\`_lww_ts\`), 0) INTO lww_prev FROM ${TOMB} WHERE ${TOMB}.\`id\` = NEW.\`id\` FOR UPDATE;
    IF lww_prev >= NEW.\`_lww_ts\` THEN
      SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'lww: a replicated delete of the new key committed while the update ran; retry the transaction';
    END IF;
  END IF;
END`;

const EXPECTED_AD = `CREATE TRIGGER \`shop\`.\`lww_ad__items\` AFTER DELETE ON \`shop\`.\`items\` FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_phys BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_v BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    SET lww_stamp = NOT (CAST(@lww_apply AS BINARY) <=> (SELECT CAST(secret AS BINARY) FROM \`lww_meta\`.\`apply_secret\` WHERE singleton = 1));
  END IF;
  IF lww_stamp THEN
    IF TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), NOW(6)) > 1000000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: the session clock (SET TIMESTAMP) is ahead of the server clock; local writes are stamped with the server time';
    END IF;
    SELECT GREATEST(OLD.\`_lww_ts\`, COALESCE(MAX(${TOMB}.\`_lww_ts\`), 0)) INTO lww_prev FROM ${TOMB} WHERE ${TOMB}.\`id\` = OLD.\`id\` FOR UPDATE;
    SET lww_phys = GREATEST(${NOW}, (lww_prev >> 10) + 1);
    IF lww_phys >= 18014398509481984 THEN
      SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = 'lww: version overflow (a stored version is near 2^64); refusing to wrap';
    END IF;
    SET lww_v = (lww_phys << 10) | 7;
    INSERT INTO ${TOMB} (\`id\`, \`_lww_ts\`) VALUES (OLD.\`id\`, lww_v)
      ON DUPLICATE KEY UPDATE ${TOMB}.\`_lww_ts\` = GREATEST(${TOMB}.\`_lww_ts\`, lww_v);
  END IF;
END`;

describe('trigger text', () => {
  it('renders the five triggers of a one-column-key table exactly', () => {
    const defs = triggerDefinitions(items);
    expect(defs.map((d) => d.create)).toEqual([EXPECTED_BI, EXPECTED_AI, EXPECTED_BU, EXPECTED_AU, EXPECTED_AD]);
    expect(defs.map((d) => [d.name, d.timing, d.event])).toEqual([
      ['lww_bi__items', 'BEFORE', 'INSERT'],
      ['lww_ai__items', 'AFTER', 'INSERT'],
      ['lww_bu__items', 'BEFORE', 'UPDATE'],
      ['lww_au__items', 'AFTER', 'UPDATE'],
      ['lww_ad__items', 'AFTER', 'DELETE'],
    ]);
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
      `    UPDATE ${LT} JOIN ${L} ON ${LT}.\`id\` = ${L}.\`id\` SET ${LT}.\`_lww_ts\` = GREATEST(${LT}.\`_lww_ts\`, lww_v, ${hlc(`GREATEST(${L}.\`_lww_ts\`, ${LT}.\`_lww_ts\`)`)}) WHERE ${L}.\`item_id\` = OLD.\`id\`;\n` +
        `    INSERT INTO ${LT} (\`id\`, \`_lww_ts\`) SELECT ${L}.\`id\`, GREATEST(lww_v, ${hlc(`${L}.\`_lww_ts\``)}) FROM ${L} WHERE ${L}.\`item_id\` = OLD.\`id\` AND NOT EXISTS (SELECT 1 FROM ${LT} WHERE ${LT}.\`id\` = ${L}.\`id\`);`,
    );
    expect(bd.body).toContain(`SET lww_v = (GREATEST(${NOW}, (lww_prev >> 10) + 1) << 10) | 7;`);
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
