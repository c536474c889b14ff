
CREATE TABLE IF NOT EXISTS subscriptions (
    workflow TEXT NOT NULL,
    pattern TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (workflow, pattern)
) WITHOUT ROWID;
