-- Tombstone table of one replicated table: the same primary-key columns and types, plus the
-- version of the delete. {{table}} is the quoted meta.tombstone name, {{key_columns}} the key
-- column definitions, {{version_column}} the quoted version column, {{primary_key}} the key list.
CREATE TABLE IF NOT EXISTS {{table}} (
  {{key_columns}},
  {{version_column}} BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY ({{primary_key}})
) ENGINE=InnoDB
