ALTER TABLE {schema}.runs ADD COLUMN parent TEXT COLLATE "C";
    CREATE INDEX runs_parent ON {schema}.runs (parent) WHERE parent IS NOT NULL;