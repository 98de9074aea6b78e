-- Metadata schema of mysql-lww-sink. {{meta}} is replaced by the quoted schema name.
-- Statements are separated by lines holding only ";". Every statement is idempotent.

CREATE DATABASE IF NOT EXISTS {{meta}} CHARACTER SET utf8mb4
;
-- One row per source stream and apply worker on this server. The sink updates it in the same
-- transaction as the data it applies, so progress and data commit together; a capture that sees a
-- transaction touching this table knows a sink wrote it and drops it (loop prevention). Worker 0's
-- row holds the stream's owner and source identity; with parallel apply each worker advances its
-- own row and the stream resumes from the row with the lowest `apply_seq` (src/writer/worker-pool.ts).
CREATE TABLE IF NOT EXISTS {{meta}}.`checkpoints` (
  -- Binary collation: two streams whose ids differ in letter case or accents ('Orders', 'orders')
  -- are two rows (under the schema's default collation they shared one, and one resumed from the
  -- other's position). The sink refuses an id ending in a space (PAD SPACE ignores it).
  `source_id`       VARCHAR(255)    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `worker`          SMALLINT UNSIGNED NOT NULL DEFAULT 0,
  `position`        VARCHAR(4096)   NOT NULL DEFAULT '',
  `last_version`    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  `owner_epoch`     BIGINT UNSIGNED NOT NULL DEFAULT 0,
  `owner`           VARCHAR(255)    NOT NULL DEFAULT '',
  `applied_batches` BIGINT UNSIGNED NOT NULL DEFAULT 0,
  `updated_at`      TIMESTAMP(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  -- Physical time (microseconds, the source's clock) the source stream had reached at `position`:
  -- every later source transaction commits at or after it. NULL while unknown. The tombstone GC
  -- horizon is computed from it (src/gc/horizon.ts).
  `source_time_us`  BIGINT UNSIGNED NULL,
  -- Which server and binlog history `position` belongs to, recorded by the replicator at each start
  -- (src/replicator/source-identity.ts): server_uuid (MariaDB: server_id), the GTID set it had then
  -- (gtid_executed, MariaDB gtid_binlog_state) and its binlog head. A resume against another server
  -- or after a binlog reset is refused instead of reading a meaningless offset. NULL while unknown.
  `source_uuid`     VARCHAR(64)     NULL,
  `source_gtid_set` TEXT            NULL,
  `source_head`     VARCHAR(4096)   NULL,
  -- The sink's ordinal of the source transaction at `position`, growing along the stream across
  -- restarts: it orders the worker rows of a stream, whose positions are opaque text.
  `apply_seq`       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (`source_id`, `worker`)
) ENGINE=InnoDB
;
-- Incoming rows that could not be applied without overwriting an unrelated row (a clash on a
-- secondary UNIQUE key). Replication continues; an operator resolves these by hand.
CREATE TABLE IF NOT EXISTS {{meta}}.`conflicts` (
  `id`          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `source_id`   VARCHAR(255)    NOT NULL,
  `schema_name` VARCHAR(64)     NOT NULL,
  `table_name`  VARCHAR(64)     NOT NULL,
  `reason`      VARCHAR(255)    NOT NULL,
  `version`     BIGINT UNSIGNED NOT NULL,
  `row_json`    LONGTEXT        NOT NULL,
  `created_at`  TIMESTAMP(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (`id`)
) ENGINE=InnoDB
;
-- Tombstone garbage collection on this server, per replicated table: tombstones with a version below
-- `collected_below` may have been removed (src/gc/). Repair paths and the state check read it: a key
-- this server lacks with an older version elsewhere cannot be told apart from a collected delete.
CREATE TABLE IF NOT EXISTS {{meta}}.`gc_state` (
  `schema_name`     VARCHAR(64)     NOT NULL,
  `table_name`      VARCHAR(64)     NOT NULL,
  `collected_below` BIGINT UNSIGNED NOT NULL DEFAULT 0,
  `collected_rows`  BIGINT UNSIGNED NOT NULL DEFAULT 0,
  `updated_at`      TIMESTAMP(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (`schema_name`, `table_name`)
) ENGINE=InnoDB
;
-- The node id this server stamps its local writes with (written by install).
CREATE TABLE IF NOT EXISTS {{meta}}.`node` (
  `singleton`    TINYINT UNSIGNED  NOT NULL DEFAULT 1,
  `node_id`      SMALLINT UNSIGNED NOT NULL,
  `installed_at` TIMESTAMP(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (`singleton`)
) ENGINE=InnoDB
;
-- Replicated tables and where their tombstones live.
CREATE TABLE IF NOT EXISTS {{meta}}.`tables` (
  `schema_name`     VARCHAR(64) NOT NULL,
  `table_name`      VARCHAR(64) NOT NULL,
  `tombstone_table` VARCHAR(64) NOT NULL,
  `version_column`  VARCHAR(64) NOT NULL,
  `added_version_column` TINYINT NOT NULL DEFAULT 0,
  PRIMARY KEY (`schema_name`, `table_name`)
) ENGINE=InnoDB
;
-- This node's apply secret. Only a session whose @lww_apply equals it keeps the versions it writes
-- (the sink); the triggers read it as their definer. Applications must have no privilege on this
-- schema. Created once with random bytes; never replicated (each node has its own).
CREATE TABLE IF NOT EXISTS {{meta}}.`apply_secret` (
  `singleton` TINYINT UNSIGNED NOT NULL DEFAULT 1,
  `secret`    CHAR(64)         NOT NULL,
  PRIMARY KEY (`singleton`)
) ENGINE=InnoDB
;
INSERT IGNORE INTO {{meta}}.`apply_secret` (`singleton`, `secret`) VALUES (1, HEX(RANDOM_BYTES(32)))
