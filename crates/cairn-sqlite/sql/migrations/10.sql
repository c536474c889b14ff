
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY NOT NULL,
    workflow TEXT NOT NULL,
    spec TEXT NOT NULL,
    input TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_fire_at INTEGER,
    last_fired_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS schedules_due ON schedules(next_fire_at) WHERE paused = 0 AND next_fire_at IS NOT NULL;
