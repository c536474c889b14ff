-- Published events, for the events view: each with the runs it started, newest first. `runs` is
-- a JSON array of `{"workflow", "run"}`, one per subscribed workflow.
CREATE TABLE {schema}.events (
        id TEXT COLLATE "C" PRIMARY KEY,
        topic TEXT COLLATE "C" NOT NULL,
        payload TEXT NOT NULL,
        published_at BIGINT NOT NULL,
        runs TEXT NOT NULL
    );
    CREATE INDEX events_published ON {schema}.events (published_at, id);
    CREATE INDEX events_topic ON {schema}.events (topic, published_at, id);
