//! The schema, as ordered migrations applied once each under an advisory lock.

/// Migrations in order; `{schema}` is replaced by the quoted schema name. Never edit one that has
/// shipped: add another.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: runs, journal, signals.
    "CREATE TABLE {schema}.runs (
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
    CREATE INDEX signals_run ON {schema}.signals (run_id, id);",
    // 2: ids and workflow names compare byte for byte (`COLLATE "C"`: no locale-aware comparison
    // in every index descent, and the same order as the other stores); the claim indexes hold
    // only runs that can become ready (finished runs, most of the table in time, are in none of
    // them), and a status change touches one of them instead of two.
    "DROP INDEX {schema}.runs_wake;
    DROP INDEX {schema}.runs_lease;
    ALTER TABLE {schema}.runs ALTER COLUMN id TYPE TEXT COLLATE \"C\", ALTER COLUMN workflow TYPE TEXT COLLATE \"C\";
    ALTER TABLE {schema}.journal ALTER COLUMN run_id TYPE TEXT COLLATE \"C\";
    ALTER TABLE {schema}.signals ALTER COLUMN run_id TYPE TEXT COLLATE \"C\";
    CREATE INDEX runs_pending ON {schema}.runs (created_at) WHERE status = 'pending';
    CREATE INDEX runs_wake ON {schema}.runs (wake_at) WHERE status = 'suspended';
    CREATE INDEX runs_lease ON {schema}.runs (lease_expires_at) WHERE status = 'running';",
    // 3: pause requests and the recovery count (poison runs).
    "ALTER TABLE {schema}.runs ADD COLUMN pause_requested BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;",
    // 4: run deadlines, retention (the sweeper's indexes hold ended runs only), restarts.
    "ALTER TABLE {schema}.runs ADD COLUMN deadline_at BIGINT, ADD COLUMN retention_ms BIGINT,
        ADD COLUMN delete_after BIGINT, ADD COLUMN restarted_from TEXT COLLATE \"C\";
    CREATE INDEX runs_delete_after ON {schema}.runs (delete_after) WHERE delete_after IS NOT NULL;
    CREATE INDEX runs_completed ON {schema}.runs (completed_at) WHERE completed_at IS NOT NULL;
    CREATE INDEX runs_restarted_from ON {schema}.runs (restarted_from) WHERE restarted_from IS NOT NULL;",
    // 5: workers and the workflow versions they serve (`name@version` tags).
    "CREATE TABLE {schema}.workers (
        id TEXT COLLATE \"C\" PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started_at BIGINT NOT NULL,
        last_seen BIGINT NOT NULL,
        live_until BIGINT NOT NULL,
        serves TEXT[] NOT NULL
    );",
    // 6: runs per workflow in each ended status. Triggers append +1/-1 rows to `ended_deltas` as
    // runs end and are deleted (append-only: concurrent workers never wait on a shared counter
    // row); `workflow_counts` folds them into `ended_counts` and adds what is left. Unended runs
    // are counted where they are: each unended status has a partial index.
    "CREATE TABLE {schema}.ended_counts (
        workflow TEXT COLLATE \"C\" NOT NULL,
        status TEXT NOT NULL,
        runs BIGINT NOT NULL,
        PRIMARY KEY (workflow, status)
    );
    CREATE TABLE {schema}.ended_deltas (
        workflow TEXT COLLATE \"C\" NOT NULL,
        status TEXT NOT NULL,
        runs BIGINT NOT NULL
    );
    INSERT INTO {schema}.ended_counts (workflow, status, runs)
        SELECT workflow, status, count(*) FROM {schema}.runs WHERE status IN ('completed', 'failed', 'cancelled')
        GROUP BY workflow, status;
    CREATE INDEX runs_paused ON {schema}.runs (workflow) WHERE status = 'paused';
    CREATE FUNCTION {schema}.count_ended() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' AND OLD.status IN ('completed', 'failed', 'cancelled') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (OLD.workflow, OLD.status, -1);
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.status IN ('completed', 'failed', 'cancelled') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (NEW.workflow, NEW.status, 1);
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER runs_ended_insert AFTER INSERT ON {schema}.runs FOR EACH ROW
        WHEN (NEW.status IN ('completed', 'failed', 'cancelled')) EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_update AFTER UPDATE OF status ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IS DISTINCT FROM NEW.status
            AND (OLD.status IN ('completed', 'failed', 'cancelled') OR NEW.status IN ('completed', 'failed', 'cancelled')))
        EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_delete AFTER DELETE ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IN ('completed', 'failed', 'cancelled')) EXECUTE FUNCTION {schema}.count_ended();",
    // 7: the topic patterns each workflow subscribes to.
    "CREATE TABLE {schema}.subscriptions (
        workflow TEXT COLLATE \"C\" NOT NULL,
        pattern TEXT COLLATE \"C\" NOT NULL,
        version INTEGER NOT NULL,
        PRIMARY KEY (workflow, pattern)
    );",
    // 8: a workflow's failed or cancelled runs, newest first, without scanning its other runs
    // (partial: a run pays for one only while it has that status; lists name the status as a
    // literal so the planner can use them). Paused runs have `runs_paused` (migration 6).
    "CREATE INDEX runs_failed ON {schema}.runs (workflow, created_at, id) WHERE status = 'failed';
    CREATE INDEX runs_cancelled ON {schema}.runs (workflow, created_at, id) WHERE status = 'cancelled';",
    // 9: child runs' parents.
    "ALTER TABLE {schema}.runs ADD COLUMN parent TEXT COLLATE \"C\";
    CREATE INDEX runs_parent ON {schema}.runs (parent) WHERE parent IS NOT NULL;",
    // 10: continuations (`continue_as_new`): the run a run continues and the one it continued
    // as; `continued` is an ended status the counters count.
    "ALTER TABLE {schema}.runs ADD COLUMN continued_from TEXT COLLATE \"C\", ADD COLUMN continued_as TEXT COLLATE \"C\";
    CREATE OR REPLACE FUNCTION {schema}.count_ended() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' AND OLD.status IN ('completed', 'failed', 'cancelled', 'continued') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (OLD.workflow, OLD.status, -1);
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.status IN ('completed', 'failed', 'cancelled', 'continued') THEN
            INSERT INTO {schema}.ended_deltas (workflow, status, runs) VALUES (NEW.workflow, NEW.status, 1);
        END IF;
        RETURN NULL;
    END $$;
    DROP TRIGGER runs_ended_insert ON {schema}.runs;
    DROP TRIGGER runs_ended_update ON {schema}.runs;
    DROP TRIGGER runs_ended_delete ON {schema}.runs;
    CREATE TRIGGER runs_ended_insert AFTER INSERT ON {schema}.runs FOR EACH ROW
        WHEN (NEW.status IN ('completed', 'failed', 'cancelled', 'continued')) EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_update AFTER UPDATE OF status ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IS DISTINCT FROM NEW.status
            AND (OLD.status IN ('completed', 'failed', 'cancelled', 'continued')
                 OR NEW.status IN ('completed', 'failed', 'cancelled', 'continued')))
        EXECUTE FUNCTION {schema}.count_ended();
    CREATE TRIGGER runs_ended_delete AFTER DELETE ON {schema}.runs FOR EACH ROW
        WHEN (OLD.status IN ('completed', 'failed', 'cancelled', 'continued')) EXECUTE FUNCTION {schema}.count_ended();",
    // 11: schedules; the partial index holds the ones that will fire, by when.
    "CREATE TABLE {schema}.schedules (
        name TEXT COLLATE \"C\" PRIMARY KEY,
        workflow TEXT COLLATE \"C\" NOT NULL,
        spec TEXT NOT NULL,
        input TEXT NOT NULL,
        paused BOOLEAN NOT NULL DEFAULT false,
        next_fire_at BIGINT,
        last_fired_at BIGINT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE INDEX schedules_due ON {schema}.schedules (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;",
    // 12: concurrency limits. A run of a limited workflow has a `flow_key` (its group is workflow
    // and key), enters waiting (`waiting_for = 'concurrency'`) and is admitted by `flow_admit`,
    // in creation order, while its group holds fewer slots than the rule's limit; the group's
    // row in `concurrency_slots` is locked while it admits, so concurrent transactions never
    // admit past the limit. The triggers fire only for rows with a `flow_key`. The claim reads
    // pending runs through `runs_pending`, which now leaves waiting runs out.
    "ALTER TABLE {schema}.runs ADD COLUMN flow_key TEXT COLLATE \"C\", ADD COLUMN flow_hold BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN waiting_for TEXT;
    DROP INDEX {schema}.runs_pending;
    CREATE INDEX runs_pending ON {schema}.runs (created_at) WHERE status = 'pending' AND waiting_for IS NULL;
    CREATE INDEX runs_waiting ON {schema}.runs (workflow, flow_key, created_at, id) WHERE waiting_for IS NOT NULL;
    CREATE TABLE {schema}.concurrency_rules (
        workflow TEXT COLLATE \"C\" PRIMARY KEY,
        key TEXT,
        path TEXT[],
        lim INTEGER NOT NULL,
        hold BOOLEAN NOT NULL
    );
    CREATE TABLE {schema}.concurrency_slots (
        workflow TEXT COLLATE \"C\" NOT NULL,
        key TEXT COLLATE \"C\" NOT NULL,
        held INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (workflow, key)
    );
    CREATE FUNCTION {schema}.flow_admit(w TEXT, k TEXT) RETURNS void LANGUAGE plpgsql AS $$
    DECLARE free BIGINT;
    BEGIN
        INSERT INTO {schema}.concurrency_slots (workflow, key) VALUES (w, k) ON CONFLICT DO NOTHING;
        SELECT coalesce((SELECT lim FROM {schema}.concurrency_rules WHERE workflow = w), 1000000000) - held INTO free
            FROM {schema}.concurrency_slots WHERE workflow = w AND key = k FOR UPDATE;
        IF free > 0 THEN
            WITH admitted AS (
                UPDATE {schema}.runs SET waiting_for = NULL WHERE id IN (
                    SELECT id FROM {schema}.runs WHERE workflow = w AND flow_key = k AND waiting_for IS NOT NULL
                    ORDER BY created_at, id LIMIT free FOR UPDATE SKIP LOCKED)
                RETURNING 1)
            UPDATE {schema}.concurrency_slots SET held = held + (SELECT count(*) FROM admitted)
                WHERE workflow = w AND key = k;
        END IF;
    END $$;
    CREATE FUNCTION {schema}.flow_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND OLD.waiting_for IS NULL
            AND (OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold)) THEN
            UPDATE {schema}.concurrency_slots SET held = held - 1 WHERE workflow = OLD.workflow AND key = OLD.flow_key;
        END IF;
        PERFORM {schema}.flow_admit(NEW.workflow, NEW.flow_key);
        RETURN NULL;
    END $$;
    CREATE TRIGGER runs_flow_insert AFTER INSERT ON {schema}.runs FOR EACH ROW
        WHEN (NEW.flow_key IS NOT NULL) EXECUTE FUNCTION {schema}.flow_changed();
    CREATE TRIGGER runs_flow_update AFTER UPDATE OF status, waiting_for ON {schema}.runs FOR EACH ROW
        WHEN (OLD.flow_key IS NOT NULL AND ((OLD.waiting_for IS NULL AND NEW.waiting_for IS NOT NULL)
            OR (OLD.waiting_for IS NULL AND (OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold))
                AND NOT (NEW.waiting_for IS NULL
                         AND (NEW.status IN ('pending', 'running') OR (NEW.status = 'suspended' AND NEW.flow_hold))))))
        EXECUTE FUNCTION {schema}.flow_changed();",
    // 13: priority with fairness. A ready run's place in the claim order is its priority, then
    // its fairness sequence (`cairn_journal::flow::fair_seq`, assigned at insert from
    // `runs_fair`: the last ready run of its key, and the head of its priority in
    // `runs_pending`), then its creation: the claim reads the first runs of `runs_pending` in
    // that order.
    "ALTER TABLE {schema}.runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN fair_key TEXT COLLATE \"C\" NOT NULL DEFAULT '', ADD COLUMN fair_seq BIGINT NOT NULL DEFAULT 0;
    DROP INDEX {schema}.runs_pending;
    CREATE INDEX runs_pending ON {schema}.runs (priority DESC, fair_seq, created_at)
        WHERE status = 'pending' AND waiting_for IS NULL;
    CREATE INDEX runs_fair ON {schema}.runs (priority, fair_key, fair_seq) WHERE status = 'pending' AND waiting_for IS NULL;",
    // 14: rate limits. `take_rate` locks its bucket's row, so concurrent takes of one bucket
    // decide one after another (each statement seeing the grants committed before it), drops
    // the grants no asker can count any more (`rate_forgets_before`: two periods back), and
    // grants (NULL) or names when a turn frees up (`cairn_journal::flow::rate_verdict`).
    "CREATE TABLE {schema}.rate_buckets (bucket TEXT COLLATE \"C\" PRIMARY KEY);
    CREATE TABLE {schema}.rate_grants (bucket TEXT COLLATE \"C\" NOT NULL, at BIGINT NOT NULL);
    CREATE INDEX rate_grants_bucket ON {schema}.rate_grants (bucket, at);
    CREATE FUNCTION {schema}.take_rate(b TEXT, lim INTEGER, period BIGINT, asked BIGINT) RETURNS BIGINT
    LANGUAGE plpgsql AS $$
    DECLARE taken BIGINT;
    BEGIN
        INSERT INTO {schema}.rate_buckets (bucket) VALUES (b) ON CONFLICT DO NOTHING;
        PERFORM 1 FROM {schema}.rate_buckets WHERE bucket = b FOR UPDATE;
        DELETE FROM {schema}.rate_grants WHERE bucket = b AND at <= asked - 2 * period;
        SELECT count(*) INTO taken FROM {schema}.rate_grants WHERE bucket = b AND at > asked - period;
        IF taken < lim THEN
            INSERT INTO {schema}.rate_grants (bucket, at) VALUES (b, asked);
            RETURN NULL;
        END IF;
        RETURN (SELECT at FROM {schema}.rate_grants WHERE bucket = b AND at > asked - period
                ORDER BY at OFFSET taken - lim LIMIT 1) + period;
    END $$;",
    // 15: concurrency slots kept once per statement, not once per row. Migration 12's row
    // triggers updated the group's slot row for every run that ended: a writer round that ended
    // 2,048 runs of one group piled 2,048 versions of that row into its transaction, holding it
    // locked throughout, and W1 under a limit that never binds ran at a quarter of its speed.
    // The statement triggers see every changed row at once (transition tables) and move each
    // group's count once; like SQLite's, they exist only once the store has a concurrency rule
    // (`ensure_flow_triggers`, called by `put_concurrency` and here), so a store without rules
    // pays nothing for them.
    "DROP TRIGGER runs_flow_insert ON {schema}.runs;
    DROP TRIGGER runs_flow_update ON {schema}.runs;
    DROP FUNCTION {schema}.flow_changed();
    CREATE FUNCTION {schema}.flow_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM {schema}.flow_admit(g.workflow, g.flow_key)
        FROM (SELECT DISTINCT workflow, flow_key FROM added WHERE flow_key IS NOT NULL ORDER BY workflow, flow_key) g;
        RETURN NULL;
    END $$;
    CREATE FUNCTION {schema}.flow_updated() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE g RECORD;
    BEGIN
        FOR g IN
            WITH moved AS (
                SELECT o.workflow, o.flow_key,
                    o.waiting_for IS NULL AND (o.status IN ('pending', 'running') OR (o.status = 'suspended' AND o.flow_hold))
                        AS held,
                    n.waiting_for IS NULL AND (n.status IN ('pending', 'running') OR (n.status = 'suspended' AND n.flow_hold))
                        AS holds,
                    o.waiting_for IS NULL AND n.waiting_for IS NOT NULL AS queued
                FROM before o JOIN after n ON n.id = o.id
                WHERE o.flow_key IS NOT NULL)
            SELECT workflow, flow_key, count(*) FILTER (WHERE held AND NOT holds) AS released
            FROM moved WHERE (held AND NOT holds) OR queued
            GROUP BY workflow, flow_key ORDER BY workflow, flow_key
        LOOP
            IF g.released > 0 THEN
                UPDATE {schema}.concurrency_slots SET held = held - g.released
                    WHERE workflow = g.workflow AND key = g.flow_key;
            END IF;
            PERFORM {schema}.flow_admit(g.workflow, g.flow_key);
        END LOOP;
        RETURN NULL;
    END $$;
    CREATE FUNCTION {schema}.ensure_flow_triggers() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{schema}.runs'::regclass AND tgname = 'runs_flow_inserted')
        THEN
            CREATE TRIGGER runs_flow_inserted AFTER INSERT ON {schema}.runs REFERENCING NEW TABLE AS added
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_inserted();
            CREATE TRIGGER runs_flow_updated AFTER UPDATE ON {schema}.runs
                REFERENCING OLD TABLE AS before NEW TABLE AS after
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_updated();
        END IF;
    EXCEPTION WHEN duplicate_object THEN
        NULL;
    END $$;
    SELECT {schema}.ensure_flow_triggers() WHERE EXISTS (SELECT 1 FROM {schema}.concurrency_rules);",
    // 16: debounce. A debounced run waits `suspended` with reason `debouncing` until its
    // `wake_at`; a start with its workflow and key while it does joins it: the unique partial
    // index `runs_debouncing` is the upsert's arbiter, so there is one window per key whatever
    // the number of concurrent starters. `debounce_until` caps its wake-ups.
    "ALTER TABLE {schema}.runs ADD COLUMN debounce_key TEXT COLLATE \"C\", ADD COLUMN debounce_until BIGINT;
    CREATE UNIQUE INDEX runs_debouncing ON {schema}.runs (workflow, debounce_key)
        WHERE status = 'suspended' AND suspend_reason = 'debouncing';",
    // 17: a run cancelled or paused while it waited for a concurrency slot kept `waiting_for`,
    // and a later admission gave it a slot nobody would free. Such runs leave the queue, each
    // group's count is taken again from its runs, and groups with room admit.
    "UPDATE {schema}.runs SET waiting_for = NULL WHERE waiting_for IS NOT NULL AND status <> 'pending';
    UPDATE {schema}.concurrency_slots s SET held = (
        SELECT count(*) FROM {schema}.runs r WHERE r.workflow = s.workflow AND r.flow_key = s.key
          AND r.waiting_for IS NULL
          AND (r.status IN ('pending', 'running') OR (r.status = 'suspended' AND r.flow_hold)));
    SELECT {schema}.flow_admit(g.workflow, g.flow_key)
    FROM (SELECT DISTINCT workflow, flow_key FROM {schema}.runs WHERE waiting_for IS NOT NULL
          ORDER BY workflow, flow_key) g;",
    // 18: releases without transition tables. Migration 15's update trigger captured every
    // changed row of every UPDATE on `runs` (the steps' appends included) to find the few that
    // moved a slot, and W1 under a limit that never binds ran at half speed. Now a row trigger
    // whose WHEN (checked without calling anything) matches only a run that gave its slot up or
    // went back to wait for one notes its group in `flow_moves`, under the transaction's id;
    // a statement trigger on the status columns folds the statement's notes into each group's
    // count once and admits (`flow_settle`).
    "DROP TRIGGER IF EXISTS runs_flow_updated ON {schema}.runs;
    DROP FUNCTION {schema}.flow_updated();
    CREATE TABLE {schema}.flow_moves (
        xid xid8 NOT NULL,
        workflow TEXT COLLATE \"C\" NOT NULL,
        key TEXT COLLATE \"C\" NOT NULL,
        released INTEGER NOT NULL
    );
    CREATE INDEX flow_moves_xid ON {schema}.flow_moves (xid);
    CREATE FUNCTION {schema}.flow_moved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {schema}.flow_moves (xid, workflow, key, released)
        VALUES (pg_current_xact_id(), OLD.workflow, OLD.flow_key,
                CASE WHEN OLD.waiting_for IS NULL
                      AND (OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold))
                     THEN 1 ELSE 0 END);
        RETURN NULL;
    END $$;
    CREATE FUNCTION {schema}.flow_settle() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE g RECORD;
    BEGIN
        FOR g IN
            WITH moved AS (
                DELETE FROM {schema}.flow_moves WHERE xid = pg_current_xact_id() RETURNING workflow, key, released)
            SELECT workflow, key, sum(released) AS released FROM moved GROUP BY workflow, key ORDER BY workflow, key
        LOOP
            IF g.released > 0 THEN
                UPDATE {schema}.concurrency_slots SET held = held - g.released
                    WHERE workflow = g.workflow AND key = g.key;
            END IF;
            PERFORM {schema}.flow_admit(g.workflow, g.key);
        END LOOP;
        RETURN NULL;
    END $$;
    CREATE OR REPLACE FUNCTION {schema}.ensure_flow_triggers() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{schema}.runs'::regclass AND tgname = 'runs_flow_inserted')
        THEN
            CREATE TRIGGER runs_flow_inserted AFTER INSERT ON {schema}.runs REFERENCING NEW TABLE AS added
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_inserted();
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = '{schema}.runs'::regclass AND tgname = 'runs_flow_moved')
        THEN
            CREATE TRIGGER runs_flow_moved AFTER UPDATE OF status, waiting_for ON {schema}.runs FOR EACH ROW
                WHEN (OLD.flow_key IS NOT NULL AND OLD.waiting_for IS NULL
                      AND (NEW.waiting_for IS NOT NULL
                           OR ((OLD.status IN ('pending', 'running') OR (OLD.status = 'suspended' AND OLD.flow_hold))
                               AND NOT (NEW.status IN ('pending', 'running')
                                        OR (NEW.status = 'suspended' AND NEW.flow_hold)))))
                EXECUTE FUNCTION {schema}.flow_moved();
            CREATE TRIGGER runs_flow_settle AFTER UPDATE OF status, waiting_for ON {schema}.runs
                FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_settle();
        END IF;
    EXCEPTION WHEN duplicate_object THEN
        NULL;
    END $$;
    SELECT {schema}.ensure_flow_triggers() WHERE EXISTS (SELECT 1 FROM {schema}.concurrency_rules);",
    // 19: new runs admitted as they are inserted. A batch of new runs takes its groups' free
    // slots first (`flow_take`: the slot row locked, none taken while runs wait), so its first
    // runs of each group are inserted admitted instead of inserted waiting and then updated by
    // the insert trigger's admission; slots taken for runs the batch did not insert (an id or
    // idempotency key already taken) go back (`flow_give`).
    "CREATE FUNCTION {schema}.flow_take(w TEXT, k TEXT, n INTEGER) RETURNS INTEGER LANGUAGE plpgsql AS $$
    DECLARE free BIGINT;
    BEGIN
        INSERT INTO {schema}.concurrency_slots (workflow, key) VALUES (w, k) ON CONFLICT DO NOTHING;
        SELECT coalesce((SELECT lim FROM {schema}.concurrency_rules WHERE workflow = w), 1000000000) - held INTO free
            FROM {schema}.concurrency_slots WHERE workflow = w AND key = k FOR UPDATE;
        IF free <= 0
            OR EXISTS (SELECT 1 FROM {schema}.runs WHERE workflow = w AND flow_key = k AND waiting_for IS NOT NULL) THEN
            RETURN 0;
        END IF;
        free := least(free, n);
        UPDATE {schema}.concurrency_slots SET held = held + free WHERE workflow = w AND key = k;
        RETURN free;
    END $$;
    CREATE FUNCTION {schema}.flow_give(w TEXT, k TEXT, n INTEGER) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE {schema}.concurrency_slots SET held = held - n WHERE workflow = w AND key = k;
    END $$;",
];

/// Checks a schema name: letters, digits and `_`, starting with a letter or `_`, at most 63 bytes.
pub(crate) fn valid_schema_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test
mod tests {
    use super::MIGRATIONS;
    use crate::testing::{raw_client as client, test_store};
    use crate::{PostgresOptions, PostgresStore};
    use cairn_store::{ClaimRequest, RunId, Store, WorkflowKey};

    /// Workers starting together on a fresh schema each apply nothing twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_starts_migrate_once() {
        // The first store only reserves a schema name (and drops it at the end).
        let Some((first, schema)) = test_store("migrate_race").await else { return };
        first.drop_schema().await.unwrap();
        let starts: Vec<_> = (0..4)
            .map(|_| {
                let options = PostgresOptions::new(&schema.url).schema(&schema.name).pool_size(2);
                tokio::spawn(PostgresStore::connect(options))
            })
            .collect();
        for start in starts {
            start.await.unwrap().unwrap();
        }
        let client = client(&schema.url).await;
        let rows = client
            .query(&format!("SELECT version FROM \"{}\".migrations ORDER BY version", schema.name), &[])
            .await
            .unwrap();
        let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(versions, (1..=MIGRATIONS.len() as i32).collect::<Vec<_>>());
    }

    /// A schema made by the first release upgrades in place: its runs stay readable and claimable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn upgrades_a_schema_from_migration_one() {
        let Some((first, schema)) = test_store("migrate_up").await else { return };
        first.drop_schema().await.unwrap();
        let s = format!("\"{}\"", schema.name);
        let client = client(&schema.url).await;
        client
            .batch_execute(&format!(
                "CREATE SCHEMA {s};
                 CREATE TABLE {s}.migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now());
                 {}
                 INSERT INTO {s}.migrations (version) VALUES (1);
                 INSERT INTO {s}.runs (id, workflow, version, status, input, created_at, updated_at, last_seq)
                     VALUES ('old-run', 'order', 1, 'pending', '{{}}', 5, 5, 1);
                 INSERT INTO {s}.journal (run_id, seq, at, kind, path, data)
                     VALUES ('old-run', 1, 5, 'started', NULL, '{{\"started\":{{\"workflow\":\"order\",\"version\":1,\"input\":{{}}}}}}');",
                MIGRATIONS[0].replace("{schema}", &s)
            ))
            .await
            .unwrap();
        let store =
            PostgresStore::connect(PostgresOptions::new(&schema.url).schema(&schema.name).pool_size(2)).await.unwrap();
        let journal = store.read_journal(&RunId::new("old-run")).await.unwrap();
        assert_eq!(journal.len(), 1);
        let now = cairn_journal::Timestamp::from_millis(10);
        let claimed = store
            .claim(&ClaimRequest {
                owner: "w".into(),
                workflows: vec![WorkflowKey { name: "order".into(), version: 1 }],
                now,
                lease_now: now,
                lease_until: cairn_journal::Timestamp::from_millis(1_000),
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(claimed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), vec!["old-run"]);
        let collation: Option<String> = client
            .query_one(
                "SELECT collation_name::text FROM information_schema.columns
                 WHERE table_schema = $1 AND table_name = 'runs' AND column_name = 'id'",
                &[&schema.name],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(collation.as_deref(), Some("C"));
    }
}
