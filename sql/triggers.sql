-- Triggers that stamp a table's local writes with versions (DESIGN.md §2, §3). Rendered by
-- src/sql/triggers.ts; templates are separated by lines holding only ";" (bi, bu, ad in that order).
--
--   hlc(prev) = (GREATEST(now_us, (prev >> 10) + 1) << 10) | node_id
--
-- is written out where it is used. Every operand is BIGINT UNSIGNED (local variables, the version
-- column, {{now_us}} is CAST(... AS UNSIGNED)), so shifts, + and | are exact 64-bit integer math:
-- nothing goes through DOUBLE or DECIMAL. {{now_us}} follows NOW(6) (SET TIMESTAMP moves it).
--
-- Placeholders: {{name}} trigger, {{table}} schema.table, {{tombstone}} meta.tombstone table,
-- {{version}} version column (unqualified, assignment targets and column lists only),
-- {{row_version}} / {{tomb_version}} the version column qualified with its table, {{key_columns}}
-- key column list, {{old_key}} OLD's key values, {{row_key_is_new}} / {{tomb_key_is_new}} the
-- table's / tombstone's key equals NEW's, {{tomb_key_is_old}} the tombstone's key equals OLD's, {{key_unchanged}} NEW's key equals OLD's (with the key
-- columns' collations, as the unique index compares them), {{now_us}}, {{node_id}}.
-- Column references are qualified so a column named like a local variable (lww_prev) stays a column.
-- The triggers do nothing for the sink's own writes (@lww_apply set): those keep their version.

-- Local insert: above the key's tombstone (the insert has seen the delete; the locking read makes a
-- concurrent sink delete wait), and above the row a REPLACE is about to delete (its AFTER DELETE
-- writes a tombstone of hlc(row)).
CREATE TRIGGER {{name}} BEFORE INSERT ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_row BIGINT UNSIGNED DEFAULT NULL;
  IF @lww_apply IS NULL THEN
    SELECT COALESCE(MAX({{tomb_version}}), 0) INTO lww_prev FROM {{tombstone}} WHERE {{tomb_key_is_new}} FOR UPDATE;
    SELECT MAX({{row_version}}) INTO lww_row FROM {{table}} WHERE {{row_key_is_new}};
    IF lww_row IS NOT NULL THEN
      SET lww_prev = GREATEST(lww_prev, (GREATEST({{now_us}}, (lww_row >> 10) + 1) << 10) | {{node_id}});
    END IF;
    SET NEW.{{version}} = (GREATEST({{now_us}}, (lww_prev >> 10) + 1) << 10) | {{node_id}};
  END IF;
END
;
-- Local update: above the old version. A primary-key change is a delete of the old key plus an
-- insert of the new one with the same version: above the new key's tombstone too, and a tombstone
-- for the old key.
CREATE TRIGGER {{name}} BEFORE UPDATE ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_v BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NULL THEN
    SET lww_prev = OLD.{{version}};
    IF NOT ({{key_unchanged}}) THEN
      SELECT GREATEST(lww_prev, COALESCE(MAX({{tomb_version}}), 0)) INTO lww_prev FROM {{tombstone}} WHERE {{tomb_key_is_new}} FOR UPDATE;
    END IF;
    SET lww_v = (GREATEST({{now_us}}, (lww_prev >> 10) + 1) << 10) | {{node_id}};
    SET NEW.{{version}} = lww_v;
    IF NOT ({{key_unchanged}}) THEN
      INSERT INTO {{tombstone}} ({{key_columns}}, {{version}}) VALUES ({{old_key}}, lww_v)
        ON DUPLICATE KEY UPDATE {{tomb_version}} = GREATEST({{tomb_version}}, lww_v);
    END IF;
  END IF;
END
;
-- Local delete: a tombstone above the deleted row's version and above the key's tombstone (the
-- delete has seen both), so the tombstone always changes and the binlog always carries the delete's
-- version — even where a non-LWW writer left a row older than its tombstone.
CREATE TRIGGER {{name}} AFTER DELETE ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_v BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NULL THEN
    SELECT GREATEST(OLD.{{version}}, COALESCE(MAX({{tomb_version}}), 0)) INTO lww_prev FROM {{tombstone}} WHERE {{tomb_key_is_old}} FOR UPDATE;
    SET lww_v = (GREATEST({{now_us}}, (lww_prev >> 10) + 1) << 10) | {{node_id}};
    INSERT INTO {{tombstone}} ({{key_columns}}, {{version}}) VALUES ({{old_key}}, lww_v)
      ON DUPLICATE KEY UPDATE {{tomb_version}} = GREATEST({{tomb_version}}, lww_v);
  END IF;
END
