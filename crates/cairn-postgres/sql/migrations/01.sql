CREATE TABLE {schema}.runs (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        version INTEGER NOT NULL,
        status TEXT NOT NULL,
        suspend_reason TEXT,
        input TEXT NOT NULL,
        output TEXT,
        error TEXT,
        idempotency_key TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        completed_at BIGINT,
        wake_at BIGINT,
        lease_owner TEXT,
        lease_expires_at BIGINT,
        epoch BIGINT NOT NULL DEFAULT 0,
        last_seq BIGINT NOT NULL,
        cancel_requested BOOLEAN NOT NULL DEFAULT false
    ) WITH (fillfactor = 70);
    CREATE UNIQUE INDEX runs_idempotency ON {schema}.runs (workflow, idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE INDEX runs_wake ON {schema}.runs (status, wake_at);
    CREATE INDEX runs_lease ON {schema}.runs (status, lease_expires_at);
    CREATE INDEX runs_created ON {schema}.runs (created_at, id);
    CREATE INDEX runs_workflow_created ON {schema}.runs (workflow, created_at, id);
    CREATE TABLE {schema}.journal (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        at BIGINT NOT NULL,
        kind TEXT NOT NULL,
        path TEXT,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE {schema}.signals (
        id BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT NOT NULL,
        sent_at BIGINT NOT NULL,
        consumed_seq BIGINT
    );
    CREATE INDEX signals_run ON {schema}.signals (run_id, id);