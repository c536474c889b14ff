ALTER TABLE {schema}.runs ADD COLUMN deadline_at BIGINT, ADD COLUMN retention_ms BIGINT,
        ADD COLUMN delete_after BIGINT, ADD COLUMN restarted_from TEXT COLLATE "C";
    CREATE INDEX runs_delete_after ON {schema}.runs (delete_after) WHERE delete_after IS NOT NULL;
    CREATE INDEX runs_completed ON {schema}.runs (completed_at) WHERE completed_at IS NOT NULL;
    CREATE INDEX runs_restarted_from ON {schema}.runs (restarted_from) WHERE restarted_from IS NOT NULL;