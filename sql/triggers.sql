-- Triggers that stamp a table's local writes with versions (DESIGN.md §2, §3, §12). Rendered by
-- src/sql/triggers.ts; templates are separated by lines holding only ";" (bi, ai, bu, au, ad in
-- that order). README "Why concurrent local writes stay exact" explains the locking.
--
--   hlc(prev) = (GREATEST(now_us, (prev >> 10) + 1) << 10) | node_id
--
-- is written out where it is used, on the physical part (lww_phys): every operand is BIGINT
-- UNSIGNED, so shifts, + and | are exact 64-bit integer math. A physical part that would not fit
-- 54 bits raises an error instead of wrapping to a tiny version that would lose everywhere.
--
-- The clock belongs to the system. Only a session whose @lww_apply equals this node's secret
-- (meta.apply_secret, readable by the triggers' definer, never by applications) keeps the version it
-- writes: that is the sink. Every other write is stamped here, whatever it sets, and a session
-- clock moved ahead of the server's (SET TIMESTAMP) is refused: NOW(6) follows SET TIMESTAMP,
-- SYSDATE(6) does not. A clock moved back is allowed (it only makes the session's writes older,
-- like a slow clock; the hlc still goes above everything the write has seen).
-- Refused too, as writes the other nodes could never match: any local write of a session with
-- sql_log_bin=0 (it never reaches the binlog capture reads), and a delete of a row that still has
-- children in installed tables referencing it ON DELETE CASCADE or SET NULL, with
-- foreign_key_checks=0 (this server then leaves the children alone; the replicated delete would
-- take them on the other nodes). That check is part of {{cascade_tombstones}}, per foreign key.
--
-- Every read that decides a version is a locking read (FOR UPDATE): {{lock_tombstone_of_new}} /
-- {{lock_tombstone_of_old}} raise lww_prev to the tombstone of NEW's / OLD's key, one fragment
-- rendered by src/sql/triggers.ts. A locking read sees the latest committed
-- row or tombstone, whatever the session's isolation level or earlier snapshot reads (REPEATABLE
-- READ transactions that read before, READ COMMITTED). A locking read of a missing tombstone takes
-- no gap lock under READ COMMITTED, so the insert and key-change paths check again AFTER the row
-- exists: the sink writes a tombstone before it deletes a row, the trigger writes the row before
-- it re-reads the tombstone, so one of them always sees (or waits for) the other.
--
-- The sink's session is told by its secret: first against the secret as install rendered it into
-- the text ({{is_apply_session}}, no read: the sink's rows pay three triggers each, and the read of
-- the secret table in every one cut its upsert to a quarter on MariaDB), then, only when that
-- differs, against the secret table (a secret replaced since install still works).
-- Placeholders: {{name}} trigger, {{table}} schema.table, {{tombstone}} meta.tombstone table,
-- {{is_apply_session}} sets lww_stamp false for the sink's session, {{version}} version column (unqualified), {{row_version}} /
-- {{tomb_version}} the version column qualified with its table, {{key_columns}} key column list,
-- {{old_key}} OLD's key values, {{row_key_is_new}} the table's key equals NEW's,
-- {{key_unchanged}} NEW's key equals OLD's (with the key columns' collations, as the unique index
-- compares them), {{tomb_key_of_old}} the tombstone's key columns set to OLD's spelling, {{now_us}},
-- {{node_id}}, {{max_physical}} (2^54).
-- A tombstone that already exists takes the deleted row's spelling of its key ('Beta' over an older
-- 'BETA' under a case-insensitive collation, 'a ' over 'a' under PAD SPACE): the binlog's tombstone
-- image then carries exactly the deleted row's key, which is how capture finds a delete's version.
-- (The delete's version always wins there: it is above the tombstone it read.)
-- Column references are qualified so a column named like a local variable (lww_prev) stays a column.
--
-- Secondary UNIQUE keys with a claim table (src/model/table.ts ClaimIndex): a write that gives a
-- value up (update off it, delete) records the value, the row's key and the version it held it at
-- ({{release_claims_of_updated}}, {{release_claims_of_deleted}}) — the sink's writes too: the row it
-- overwrites or removes held the value on some node, which the peers learn as a claim (from the
-- after image, src/writer/claims.ts), so this node must remember it as well; a local write that takes a value
-- is stamped above every claim of it ({{lock_claims_of_new}}, {{lock_claims_of_changed}}, {{recheck_claims_of_new}}; locking
-- reads, re-checked after the insert like the tombstone), so it never loses to a claim it has seen.
-- Empty for a table without claim tables.

-- Local insert (also the insert half of REPLACE and INSERT ... ON DUPLICATE KEY UPDATE): above the
-- key's tombstone, and above a row the statement may replace (REPLACE's AFTER DELETE writes a
-- tombstone of hlc(row); this goes one tick above it).
CREATE TRIGGER {{name}} BEFORE INSERT ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_row BIGINT UNSIGNED DEFAULT NULL;
  DECLARE lww_phys BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    {{is_apply_session}}
  END IF;
  IF lww_stamp THEN
    IF TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), NOW(6)) > 1000000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: the session clock (SET TIMESTAMP) is ahead of the server clock; local writes are stamped with the server time';
    END IF;
    IF @@SESSION.sql_log_bin = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: sql_log_bin=0 in this session: the write would reach no other node; write with sql_log_bin=1';
    END IF;
    {{lock_tombstone_of_new}}
{{lock_claims_of_new}}
    -- A row that a REPLACE will delete: read plainly first (no gap lock for the common new key),
    -- then, if there is one, with a shared lock (FOR UPDATE on the trigger's own table is refused),
    -- which sees its latest version past any earlier snapshot.
    SELECT MAX({{row_version}}) INTO lww_row FROM {{table}} WHERE {{row_key_is_new}};
    IF lww_row IS NOT NULL THEN
      SELECT MAX({{row_version}}) INTO lww_row FROM {{table}} WHERE {{row_key_is_new}} LOCK IN SHARE MODE;
    END IF;
    SET lww_phys = GREATEST({{now_us}}, (lww_prev >> 10) + 1);
    IF lww_row IS NOT NULL THEN
      SET lww_phys = GREATEST(lww_phys, (lww_row >> 10) + 1) + 1;
    END IF;
    IF lww_phys >= {{max_physical}} THEN
      SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = 'lww: version overflow (a stored version is near 2^64); refusing to wrap';
    END IF;
    SET NEW.{{version}} = (lww_phys << 10) | {{node_id}};{{remember_references}}
  END IF;
END
;
-- Local insert, once the row exists: a replicated delete of the key that committed after the
-- tombstone read above (READ COMMITTED takes no gap lock there) is seen now; the insert is refused
-- rather than committed below that tombstone. SQLSTATE 40001: retry the transaction.
CREATE TRIGGER {{name}} AFTER INSERT ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    {{is_apply_session}}
  END IF;
  IF lww_stamp THEN{{forget_references}}
    {{lock_tombstone_of_new}}
    IF lww_prev >= NEW.{{version}} THEN
      SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'lww: a replicated delete of this key committed while the insert ran; retry the transaction';
    END IF;
{{recheck_claims_of_new}}
  END IF;
END
;
-- Local update: above the old version (OLD is the locked, latest row at any isolation level). A
-- primary-key change is a delete of the old key plus an insert of the new one with the same
-- version: above the new key's tombstone too, and a tombstone for the old key.
CREATE TRIGGER {{name}} BEFORE UPDATE ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_phys BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_v BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    {{is_apply_session}}
  END IF;
  IF lww_stamp THEN
    IF TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), NOW(6)) > 1000000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: the session clock (SET TIMESTAMP) is ahead of the server clock; local writes are stamped with the server time';
    END IF;
    IF @@SESSION.sql_log_bin = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: sql_log_bin=0 in this session: the write would reach no other node; write with sql_log_bin=1';
    END IF;
    SET lww_prev = OLD.{{version}};{{forget_references}}
    IF NOT ({{key_unchanged}}) THEN
      {{lock_tombstone_of_new}}
    END IF;
{{lock_claims_of_changed}}
    SET lww_phys = GREATEST({{now_us}}, (lww_prev >> 10) + 1);
    IF lww_phys >= {{max_physical}} THEN
      SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = 'lww: version overflow (a stored version is near 2^64); refusing to wrap';
    END IF;
    SET lww_v = (lww_phys << 10) | {{node_id}};
    SET NEW.{{version}} = lww_v;
    IF NOT ({{key_unchanged}}) THEN
      INSERT INTO {{tombstone}} ({{key_columns}}, {{version}}) VALUES ({{old_key}}, lww_v)
        ON DUPLICATE KEY UPDATE {{tomb_key_of_old}}, {{tomb_version}} = GREATEST({{tomb_version}}, lww_v);
    END IF;
  END IF;
END
;
-- Local primary-key change, once the row sits at its new key: the same re-check as after an insert.
CREATE TRIGGER {{name}} AFTER UPDATE ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    {{is_apply_session}}
  END IF;
  IF lww_stamp AND NOT ({{key_unchanged}}) THEN
    {{lock_tombstone_of_new}}
    IF lww_prev >= NEW.{{version}} THEN
      SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'lww: a replicated delete of the new key committed while the update ran; retry the transaction';
    END IF;
  END IF;
{{release_claims_of_updated}}
END
;
-- Local delete: a tombstone above the deleted row's version and above the key's tombstone (the
-- delete has seen both), so the tombstone always changes and the binlog always carries the delete's
-- version — even where a non-LWW writer left a row older than its tombstone. The row is already
-- X-locked by the delete; GREATEST makes a concurrent tombstone write of the sink commute.
CREATE TRIGGER {{name}} AFTER DELETE ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_phys BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_v BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    {{is_apply_session}}
  END IF;
  IF lww_stamp THEN
    IF TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), NOW(6)) > 1000000 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: the session clock (SET TIMESTAMP) is ahead of the server clock; local writes are stamped with the server time';
    END IF;
    IF @@SESSION.sql_log_bin = 0 THEN
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'lww: sql_log_bin=0 in this session: the write would reach no other node; write with sql_log_bin=1';
    END IF;
    SET lww_prev = OLD.{{version}};
    {{lock_tombstone_of_old}}
    SET lww_phys = GREATEST({{now_us}}, (lww_prev >> 10) + 1);
    IF lww_phys >= {{max_physical}} THEN
      SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = 'lww: version overflow (a stored version is near 2^64); refusing to wrap';
    END IF;
    SET lww_v = (lww_phys << 10) | {{node_id}};
    INSERT INTO {{tombstone}} ({{key_columns}}, {{version}}) VALUES ({{old_key}}, lww_v)
      ON DUPLICATE KEY UPDATE {{tomb_key_of_old}}, {{tomb_version}} = GREATEST({{tomb_version}}, lww_v);{{check_kept_references}}
  END IF;
{{release_claims_of_deleted}}
END
;
-- Only on a table whose rows other installed tables reference with ON DELETE CASCADE: cascaded
-- deletes fire no triggers, so the parent's delete writes the children's tombstones itself, before
-- the cascade runs (the children still exist), each above the child row and its old tombstone and
-- at least the parent delete's version (lww_v, the value the AFTER DELETE trigger computes too).
-- {{cascade_tombstones}} holds one UPDATE + INSERT pair per referencing foreign key; for ON DELETE
-- SET NULL, one UPDATE that nulls the children's references (their own triggers stamp them).
-- Where the server's foreign keys live in the SQL layer (MySQL 9.6+, innodb_native_foreign_keys=OFF),
-- a REPLACE that deletes a parent row and writes its referenced values back byte for byte takes no
-- ON DELETE action on that foreign key: the children stay as they are. The insert's BEFORE trigger
-- notes NEW's referenced values with the statement's start time ({{remember_references}}), the
-- delete leaves such children alone, and the AFTER DELETE trigger checks that the server did keep
-- them ({{check_kept_references}}: a note left by another statement begun in the same microsecond
-- is refused, not trusted). AFTER INSERT and BEFORE UPDATE drop the note ({{forget_references}}).
CREATE TRIGGER {{name}} BEFORE DELETE ON {{table}} FOR EACH ROW
BEGIN
  DECLARE lww_stamp BOOLEAN DEFAULT TRUE;
  DECLARE lww_prev BIGINT UNSIGNED DEFAULT 0;
  DECLARE lww_v BIGINT UNSIGNED DEFAULT 0;
  IF @lww_apply IS NOT NULL THEN
    {{is_apply_session}}
  END IF;
  IF lww_stamp THEN
    SET lww_prev = OLD.{{version}};
    {{lock_tombstone_of_old}}
    SET lww_v = (GREATEST({{now_us}}, (lww_prev >> 10) + 1) << 10) | {{node_id}};
{{cascade_tombstones}}
  END IF;
END
