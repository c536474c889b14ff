-- A cancel or pause that waits for the worker holding a run is one request with its reason
-- (`request`: 'cancel' or 'pause'; `request_reason`), in place of the flags `cancel_requested` and
-- `pause_requested` and of the reason a waiting cancel kept in `error` (which a park then
-- overwrote). A cancel outranks a pause, as the worker always did; an ended run keeps none.
-- Rebuilt as migration 23 was, so that the input and the output stay last in the row.
CREATE TABLE runs_requests (
    id TEXT PRIMARY KEY NOT NULL,
    workflow TEXT NOT NULL,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    suspend_reason TEXT,
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
    request TEXT,
    request_reason TEXT,
    recoveries INTEGER NOT NULL DEFAULT 0,
    deadline_at INTEGER,
    retention_ms INTEGER,
    delete_after INTEGER,
    restarted_from TEXT,
    parent TEXT,
    continued_from TEXT,
    continued_as TEXT,
    flow_key TEXT,
    flow_hold INTEGER NOT NULL DEFAULT 0,
    waiting_for TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    fair_key TEXT NOT NULL DEFAULT '',
    fair_seq INTEGER NOT NULL DEFAULT 0,
    debounce_key TEXT,
    debounce_until INTEGER,
    input TEXT NOT NULL,
    output TEXT
);
INSERT INTO runs_requests (id, workflow, version, status, suspend_reason, error, idempotency_key, created_at, updated_at, completed_at, wake_at, lease_owner, lease_expires_at, epoch, last_seq, request, request_reason, recoveries, deadline_at, retention_ms, delete_after, restarted_from, parent, continued_from, continued_as, flow_key, flow_hold, waiting_for, priority, fair_key, fair_seq, debounce_key, debounce_until, input, output)
    SELECT id, workflow, version, status, suspend_reason,
        CASE WHEN cancel_requested = 1 AND status IN ('pending', 'running', 'suspended') THEN NULL ELSE error END,
        idempotency_key, created_at, updated_at, completed_at, wake_at, lease_owner, lease_expires_at, epoch, last_seq,
        CASE WHEN status IN ('completed', 'failed', 'cancelled', 'continued') THEN NULL
             WHEN cancel_requested = 1 THEN 'cancel' WHEN pause_requested = 1 THEN 'pause' END,
        CASE WHEN status IN ('completed', 'failed', 'cancelled', 'continued') THEN NULL
             WHEN cancel_requested = 1 THEN
                 coalesce(CASE WHEN status IN ('pending', 'running', 'suspended') THEN error END, 'cancelled')
             WHEN pause_requested = 1 THEN 'paused by request' END,
        recoveries, deadline_at, retention_ms, delete_after, restarted_from, parent, continued_from, continued_as, flow_key, flow_hold, waiting_for, priority, fair_key, fair_seq, debounce_key, debounce_until, input, output FROM runs;
DROP TABLE runs;
PRAGMA legacy_alter_table = ON;
ALTER TABLE runs_requests RENAME TO runs;
PRAGMA legacy_alter_table = OFF;
CREATE UNIQUE INDEX runs_idempotency ON runs(workflow, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_created ON runs(created_at, id);
CREATE INDEX runs_workflow_created ON runs(workflow, created_at, id);
CREATE INDEX runs_delete_after ON runs(delete_after) WHERE delete_after IS NOT NULL;
CREATE INDEX runs_completed ON runs(completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX runs_restarted_from ON runs(restarted_from) WHERE restarted_from IS NOT NULL;
CREATE INDEX runs_failed ON runs(workflow, created_at, id) WHERE status = 'failed';
CREATE INDEX runs_cancelled ON runs(workflow, created_at, id) WHERE status = 'cancelled';
CREATE INDEX runs_paused ON runs(workflow, created_at, id) WHERE status = 'paused';
CREATE INDEX runs_parent ON runs(parent) WHERE parent IS NOT NULL;
CREATE INDEX runs_waiting ON runs(workflow, flow_key, created_at, id) WHERE waiting_for IS NOT NULL;
CREATE INDEX runs_ready ON runs(priority DESC, fair_seq, created_at) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE INDEX runs_fair ON runs(priority, fair_key, fair_seq) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE UNIQUE INDEX runs_debouncing ON runs(workflow, debounce_key)
    WHERE status = 'suspended' AND suspend_reason = 'debouncing';
CREATE INDEX runs_timer ON runs(wake_at) WHERE status = 'suspended';
CREATE INDEX runs_leased ON runs(lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_open ON runs(status, workflow, created_at, id, version) WHERE (status = 'pending' OR status = 'running' OR status = 'suspended' OR status = 'paused');
CREATE TRIGGER run_inputs_delete AFTER DELETE ON runs WHEN json_type(old.input) = 'object' BEGIN
    DELETE FROM run_inputs WHERE at = old.created_at AND run = old.id AND (path, kind, value) IN (
        SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
               CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END
        FROM json_tree(old.input)
        WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256
          AND (type <> 'text' OR length(atom) <= 256)
        UNION ALL SELECT '', 'many', 0);
END;
CREATE TRIGGER run_inputs_update AFTER UPDATE OF input ON runs WHEN old.input IS NOT new.input BEGIN
    DELETE FROM run_inputs WHERE at = old.created_at AND run = old.id AND json_type(old.input) = 'object'
        AND (path, kind, value) IN (
            SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
                   CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END
            FROM json_tree(old.input)
            WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256
              AND (type <> 'text' OR length(atom) <= 256)
            UNION ALL SELECT '', 'many', 0);
    INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
        SELECT fullkey, CASE WHEN type IN ('integer', 'real') THEN 'number' ELSE type END,
               CASE type WHEN 'integer' THEN CAST(atom AS REAL) WHEN 'real' THEN atom WHEN 'text' THEN atom ELSE 0 END,
               new.created_at, new.id
        FROM json_tree(new.input)
        WHERE json_type(new.input) = 'object' AND type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0
          AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)
          AND (SELECT count(*) FROM json_tree(new.input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) <= 64;
    INSERT OR IGNORE INTO run_inputs (path, kind, value, at, run)
        SELECT '', 'many', 0, new.created_at, new.id
        WHERE json_type(new.input) = 'object'
          AND (SELECT count(*) FROM json_tree(new.input)
              WHERE type NOT IN ('object', 'array') AND instr(fullkey, '[') = 0 AND length(fullkey) <= 256 AND (type <> 'text' OR length(atom) <= 256)) > 64;
END;
