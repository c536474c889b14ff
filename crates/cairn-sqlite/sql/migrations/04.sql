
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    live_until INTEGER NOT NULL,
    serves TEXT NOT NULL
);
