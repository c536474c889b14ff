ALTER TABLE {schema}.runs ADD COLUMN debounce_key TEXT COLLATE "C", ADD COLUMN debounce_until BIGINT;
    CREATE UNIQUE INDEX runs_debouncing ON {schema}.runs (workflow, debounce_key)
        WHERE status = 'suspended' AND suspend_reason = 'debouncing';