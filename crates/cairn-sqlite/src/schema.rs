//! The schema: its migrations in order, and the SQL fragments they and the queries share.

/// The triggers that kept concurrency groups' slots from migration 11 to 16 (migration 17 drops
/// them: the writer keeps the slots itself). A macro, so migration 11's text stays as it shipped.
macro_rules! flow_triggers {
    () => {
        "
CREATE TRIGGER IF NOT EXISTS runs_flow_insert AFTER INSERT ON runs WHEN new.flow_key IS NOT NULL
BEGIN
    INSERT INTO flow_admit (workflow, key) VALUES (new.workflow, new.flow_key);
END;
CREATE TRIGGER IF NOT EXISTS runs_flow_update AFTER UPDATE OF status, waiting_for ON runs
WHEN old.flow_key IS NOT NULL AND ((old.waiting_for IS NULL AND new.waiting_for IS NOT NULL)
    OR (old.waiting_for IS NULL AND (old.status IN ('pending', 'running') OR (old.status = 'suspended' AND old.flow_hold = 1))
        AND NOT (new.waiting_for IS NULL
                 AND (new.status IN ('pending', 'running') OR (new.status = 'suspended' AND new.flow_hold = 1)))))
BEGIN
    UPDATE concurrency_slots SET held = held - 1 WHERE workflow = old.workflow AND key = old.flow_key
        AND old.waiting_for IS NULL AND (old.status IN ('pending', 'running') OR (old.status = 'suspended' AND old.flow_hold = 1));
    INSERT INTO flow_admit (workflow, key) VALUES (old.workflow, old.flow_key);
END;
"
    };
}

/// The `SET` of a run leaving a debounce window (it wakes or is paused): it held no slot while
/// it debounced (`flow_hold` 0), and from now on keeps one while suspended as its rule says.
macro_rules! hold_after_debounce {
    () => {
        "flow_hold = CASE WHEN suspend_reason = 'debouncing'
             THEN coalesce((SELECT hold FROM concurrency_rules r WHERE r.workflow = runs.workflow), 0)
             ELSE flow_hold END"
    };
}

/// The condition of the partial index `runs_open` (migration 18). SQLite reads a partial index
/// for a query whose condition implies the index's: `status = 'running'` implies this one (an
/// equality implies an `OR` that holds it), an `IN` list does not, so a query with one names
/// this condition as well. Equalities, not `IN`: SQLite tests an `IN` list of more than two
/// values in an index's condition by building a temporary table each time a row is written.
macro_rules! open_runs {
    () => {
        "(status = 'pending' OR status = 'running' OR status = 'suspended' OR status = 'paused')"
    };
}

/// Runs that need a worker to go on (`RunStatus::needs_worker`: pending, running, suspended), as
/// a condition that reads them from `runs_open` (see `open_runs!`).
macro_rules! needs_worker {
    () => {
        concat!("status IN ('pending', 'running', 'suspended') AND ", open_runs!())
    };
}

/// The schema as migrations in order: a database at `PRAGMA user_version` n has the first n
/// applied. Never edit one that has shipped: add another.
pub(super) const MIGRATIONS: &[&str] = &[
    "
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
",
    // 2: pause requests and the recovery count (poison runs).
    "
ALTER TABLE runs ADD COLUMN pause_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;
",
    // 3: run deadlines, retention, restarts.
    "
ALTER TABLE runs ADD COLUMN deadline_at INTEGER;
ALTER TABLE runs ADD COLUMN retention_ms INTEGER;
ALTER TABLE runs ADD COLUMN delete_after INTEGER;
ALTER TABLE runs ADD COLUMN restarted_from TEXT;
CREATE INDEX IF NOT EXISTS runs_delete_after ON runs(delete_after) WHERE delete_after IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_completed ON runs(completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_restarted_from ON runs(restarted_from) WHERE restarted_from IS NOT NULL;
",
    // 4: workers and the workflow versions they serve (a JSON array of `name@version` tags).
    "
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    live_until INTEGER NOT NULL,
    serves TEXT NOT NULL
);
",
    // 5: runs per workflow in each ended status, kept by the writer as runs end and are deleted
    // (what `workflow_counts` reads instead of scanning every ended run). Not by triggers: a
    // trigger on `runs` made every write statement on it dearer and cost W1 about 45 %.
    "
CREATE TABLE IF NOT EXISTS ended_counts (
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    runs INTEGER NOT NULL,
    PRIMARY KEY (workflow, status)
) WITHOUT ROWID;
INSERT INTO ended_counts (workflow, status, runs)
    SELECT workflow, status, count(*) FROM runs WHERE status IN ('completed', 'failed', 'cancelled')
    GROUP BY workflow, status;
",
    // 6: the topic patterns each workflow subscribes to (events published to a matching topic
    // start a run of it).
    "
CREATE TABLE IF NOT EXISTS subscriptions (
    workflow TEXT NOT NULL,
    pattern TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (workflow, pattern)
) WITHOUT ROWID;
",
    // 7: a workflow's failed, cancelled or paused runs, newest first, without scanning its other
    // runs. Partial indexes: a run pays for one only while it has that status (full indexes on
    // status cost W1 about 12 %); lists name the status as a literal so the planner can use them.
    "
CREATE INDEX IF NOT EXISTS runs_failed ON runs(workflow, created_at, id) WHERE status = 'failed';
CREATE INDEX IF NOT EXISTS runs_cancelled ON runs(workflow, created_at, id) WHERE status = 'cancelled';
CREATE INDEX IF NOT EXISTS runs_paused ON runs(workflow, created_at, id) WHERE status = 'paused';
",
    // 8: child runs' parents.
    "
ALTER TABLE runs ADD COLUMN parent TEXT;
CREATE INDEX IF NOT EXISTS runs_parent ON runs(parent) WHERE parent IS NOT NULL;
",
    // 9: continuations (`continue_as_new`): the run a run continues, and the one it continued as.
    "
ALTER TABLE runs ADD COLUMN continued_from TEXT;
ALTER TABLE runs ADD COLUMN continued_as TEXT;
",
    // 10: schedules; the partial index holds the ones that will fire, by when.
    "
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY NOT NULL,
    workflow TEXT NOT NULL,
    spec TEXT NOT NULL,
    input TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_fire_at INTEGER,
    last_fired_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS schedules_due ON schedules(next_fire_at) WHERE paused = 0 AND next_fire_at IS NOT NULL;
",
    // 11: concurrency limits. A run of a limited workflow has a `flow_key` (its group is
    // workflow and key), enters as `waiting_for = 'concurrency'`, and is admitted (`waiting_for`
    // cleared) by `flow_admit` in creation order while its group holds fewer slots than the
    // rule's limit. The triggers fire only for rows with a `flow_key` changing status or
    // `waiting_for`: a store without rules pays for nothing but the columns. The claim reads
    // pending runs through `runs_ready`, which leaves waiting runs out.
    concat!(
        "
ALTER TABLE runs ADD COLUMN flow_key TEXT;
ALTER TABLE runs ADD COLUMN flow_hold INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN waiting_for TEXT;
CREATE INDEX IF NOT EXISTS runs_ready ON runs(created_at) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE INDEX IF NOT EXISTS runs_waiting ON runs(workflow, flow_key, created_at, id) WHERE waiting_for IS NOT NULL;
CREATE TABLE IF NOT EXISTS concurrency_rules (
    workflow TEXT PRIMARY KEY NOT NULL,
    key TEXT,
    lim INTEGER NOT NULL,
    hold INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS concurrency_slots (
    workflow TEXT NOT NULL,
    key TEXT NOT NULL,
    held INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, key)
) WITHOUT ROWID;
CREATE VIEW IF NOT EXISTS flow_admit (workflow, key) AS SELECT NULL, NULL WHERE 0;
CREATE TRIGGER IF NOT EXISTS flow_admit INSTEAD OF INSERT ON flow_admit
BEGIN
    INSERT OR IGNORE INTO concurrency_slots (workflow, key, held) VALUES (new.workflow, new.key, 0);
    UPDATE runs SET waiting_for = NULL WHERE id IN (
        SELECT id FROM runs WHERE workflow = new.workflow AND flow_key = new.key AND waiting_for IS NOT NULL
        ORDER BY created_at, id
        LIMIT max(0, coalesce((SELECT lim FROM concurrency_rules WHERE workflow = new.workflow), 1000000000)
                     - (SELECT held FROM concurrency_slots WHERE workflow = new.workflow AND key = new.key)));
    UPDATE concurrency_slots SET held = held + changes() WHERE workflow = new.workflow AND key = new.key;
END;
",
        flow_triggers!()
    ),
    // 12: the triggers on `runs` go until a store has a concurrency rule (`flow_triggers!`): even
    // with a WHEN that is false for every row, they made each insert and status update dearer
    // (timed from Python on a migrated file: an insert 8 -> 25 us, claim + finish 14 -> 38 us)
    // and W1 about 10 % slower.
    "
DROP TRIGGER IF EXISTS runs_flow_insert;
DROP TRIGGER IF EXISTS runs_flow_update;
",
    // 13: priority with fairness. A ready run's place in the claim order is its priority, then
    // its fairness sequence (`cairn_journal::flow::fair_seq`, assigned at insert from
    // `runs_fair`: the last ready run of its key, and the head of its priority in `runs_ready`),
    // then its creation: the claim reads the first runs of `runs_ready` in that order.
    "
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN fair_key TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN fair_seq INTEGER NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS runs_ready;
CREATE INDEX runs_ready ON runs(priority DESC, fair_seq, created_at) WHERE status = 'pending' AND waiting_for IS NULL;
CREATE INDEX runs_fair ON runs(priority, fair_key, fair_seq) WHERE status = 'pending' AND waiting_for IS NULL;
",
    // 14: rate limits: the grants each bucket made within its window (older ones are deleted as
    // the bucket is next asked).
    "
CREATE TABLE IF NOT EXISTS rate_grants (bucket TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rate_grants_bucket ON rate_grants(bucket, at);
",
    // 15: debounce. A debounced run waits `suspended` with reason `debouncing` until its
    // `wake_at`; a start with its workflow and key while it does joins it (`runs_debouncing`
    // finds it, and keeps the window one per key). `debounce_until` caps its wake-ups.
    "
ALTER TABLE runs ADD COLUMN debounce_key TEXT;
ALTER TABLE runs ADD COLUMN debounce_until INTEGER;
CREATE UNIQUE INDEX runs_debouncing ON runs(workflow, debounce_key)
    WHERE status = 'suspended' AND suspend_reason = 'debouncing';
",
    // 16: a run cancelled or paused while it waited for a concurrency slot kept `waiting_for`,
    // and a later admission gave it a slot nobody would free. Such runs leave the queue, each
    // group's count is taken again from its runs, and groups with room admit.
    "
UPDATE runs SET waiting_for = NULL WHERE waiting_for IS NOT NULL AND status <> 'pending';
UPDATE concurrency_slots SET held = (
    SELECT count(*) FROM runs r WHERE r.workflow = concurrency_slots.workflow AND r.flow_key = concurrency_slots.key
      AND r.waiting_for IS NULL
      AND (r.status IN ('pending', 'running') OR (r.status = 'suspended' AND r.flow_hold = 1)));
INSERT INTO flow_admit (workflow, key) SELECT DISTINCT workflow, flow_key FROM runs WHERE waiting_for IS NOT NULL;
",
    // 17: concurrency slots are kept by the writer's own statements, not by triggers on `runs`:
    // a new run takes a slot as it is inserted when its group has room and nobody waits
    // (`Writer::take_slot`), and a run that stops holding one gives it back, which admits the
    // group's next waiting runs (`Writer::release_slot`). With the triggers, W1 under a limit
    // that never binds ran 35-40 % slower than without a rule: each insert, claim and end paid
    // for trigger programs, and each new run was written twice (inserted waiting, then admitted).
    "
DROP TRIGGER IF EXISTS runs_flow_insert;
DROP TRIGGER IF EXISTS runs_flow_update;
",
    // 18: the status indexes hold unended runs only. `runs_wake` and `runs_lease` were keyed by
    // status over every run, so each run paid four index writes as it was claimed and four more
    // as it ended, and ended runs (most of a store) filled both. Now a suspended run is in
    // `runs_timer` by its wake time, a running one in `runs_leased` by its lease's end, and every
    // unended one in `runs_open` by status, workflow and creation (the status lists, newest
    // first, and with the version the counts read): a run that ends leaves them. The claim and
    // the wake-ups name the first two (`INDEXED BY`: `runs_open` would serve them too, and
    // SQLite cannot tell it is the worse choice).
    concat!(
        "
DROP INDEX IF EXISTS runs_wake;
DROP INDEX IF EXISTS runs_lease;
CREATE INDEX runs_timer ON runs(wake_at) WHERE status = 'suspended';
CREATE INDEX runs_leased ON runs(lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_open ON runs(status, workflow, created_at, id, version) WHERE ",
        open_runs!(),
        ";
"
    ),
];

pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;
