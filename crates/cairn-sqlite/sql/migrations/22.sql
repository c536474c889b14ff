-- Published events, for the events view: each with the runs it started, newest first. `runs` is
-- a JSON array of `{"workflow", "run"}`, one per subscribed workflow.
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    payload TEXT NOT NULL,
    published_at INTEGER NOT NULL,
    runs TEXT NOT NULL
);
CREATE INDEX events_published ON events(published_at, id);
CREATE INDEX events_topic ON events(topic, published_at, id);
