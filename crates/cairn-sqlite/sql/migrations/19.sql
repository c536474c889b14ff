-- Every workflow version a worker has served here, kept after the workers are gone, so that a
-- start of a workflow nobody ever served can be refused.
CREATE TABLE served_workflows (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    first_served INTEGER NOT NULL,
    last_served INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) WITHOUT ROWID;
-- What a database from an earlier build knows: the versions of its runs.
INSERT INTO served_workflows (name, version, first_served, last_served)
    SELECT workflow, version, min(created_at), max(created_at) FROM runs GROUP BY workflow, version;
