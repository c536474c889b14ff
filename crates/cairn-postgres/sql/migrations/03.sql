ALTER TABLE {schema}.runs ADD COLUMN pause_requested BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;