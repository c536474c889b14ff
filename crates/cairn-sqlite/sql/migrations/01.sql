
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY NOT NULL,
    workflow TEXT NOT NULL,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    suspend_reason TEXT,
    input TEXT NOT NULL,
    output TEXT,
    error TEXT,
    idempotency_key TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    completed_at INTEGER,
    wake_at INTEGER,
    lease_owner TEXT,
    lease_expires_at INTEGER,
    epoch INTEGER NOT NULL DEFAULT 0,
    last_seq INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_idempotency ON runs(workflow, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_wake ON runs(status, wake_at);
CREATE INDEX IF NOT EXISTS runs_lease ON runs(status, lease_expires_at);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at, id);
CREATE INDEX IF NOT EXISTS runs_workflow_created ON runs(workflow, created_at, id);
CREATE TABLE IF NOT EXISTS journal (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    kind TEXT NOT NULL,
    path TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS signals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    sent_at INTEGER NOT NULL,
    consumed_seq INTEGER
);
CREATE INDEX IF NOT EXISTS signals_run ON signals(run_id, id);
