
CREATE TABLE IF NOT EXISTS ended_counts (
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    runs INTEGER NOT NULL,
    PRIMARY KEY (workflow, status)
) WITHOUT ROWID;
INSERT INTO ended_counts (workflow, status, runs)
    SELECT workflow, status, count(*) FROM runs WHERE status IN ('completed', 'failed', 'cancelled')
    GROUP BY workflow, status;
