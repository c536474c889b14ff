ALTER TABLE {schema}.runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN fair_key TEXT COLLATE "C" NOT NULL DEFAULT '', ADD COLUMN fair_seq BIGINT NOT NULL DEFAULT 0;
    DROP INDEX {schema}.runs_pending;
    CREATE INDEX runs_pending ON {schema}.runs (priority DESC, fair_seq, created_at)
        WHERE status = 'pending' AND waiting_for IS NULL;
    CREATE INDEX runs_fair ON {schema}.runs (priority, fair_key, fair_seq) WHERE status = 'pending' AND waiting_for IS NULL;