-- Claim table of one secondary UNIQUE key: a value rows of the table held and gave up (an update
-- moved the row off it, or a delete removed the row), the primary key of the row that held it and
-- the row's version while it held it; one row per value, the highest version kept. {{table}} is the
-- quoted meta.claim name, {{value_columns}} the key's column definitions (types and collations as
-- in the data table, so values compare as the UNIQUE index compares them), {{owner_columns}} the
-- primary-key column definitions renamed _lww_owner0.., {{version_column}} the claim's version,
-- {{primary_key}} the key's column list.
CREATE TABLE IF NOT EXISTS {{table}} (
  {{value_columns}},
  {{owner_columns}},
  {{version_column}} BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY ({{primary_key}})
) ENGINE=InnoDB
