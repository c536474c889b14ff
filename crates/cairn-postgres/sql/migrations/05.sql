CREATE TABLE {schema}.workers (
        id TEXT COLLATE "C" PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started_at BIGINT NOT NULL,
        last_seen BIGINT NOT NULL,
        live_until BIGINT NOT NULL,
        serves TEXT[] NOT NULL
    );