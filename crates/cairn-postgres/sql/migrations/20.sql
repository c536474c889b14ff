-- Every workflow version a worker has served here, kept after the workers are gone, so that a
-- start of a workflow nobody ever served can be refused. A schema from an earlier build knows
-- the versions of its runs.
CREATE TABLE {schema}.served_workflows (
        name TEXT COLLATE "C" NOT NULL,
        version INTEGER NOT NULL,
        first_served BIGINT NOT NULL,
        last_served BIGINT NOT NULL,
        PRIMARY KEY (name, version)
    );
    INSERT INTO {schema}.served_workflows (name, version, first_served, last_served)
        SELECT workflow, version, min(created_at), max(created_at) FROM {schema}.runs GROUP BY workflow, version;
