//! The statements, one text for every schema (`Statements`, built once per process; a
//! connection finds the tables through its `search_path`), and the SQL fragments they share.

use super::prelude::*;

/// A recorded event's columns, as `row_to_event` reads them.
const EVENT_COLUMNS: &str = "id, topic, payload, published_at, runs";

/// The events before a page cursor (`$2`, `$3`; none: every event), newest first, up to `$4`.
const EVENTS_BEFORE: &str = "(published_at, id) < (coalesce($2::bigint, 9223372036854775807), coalesce($3::text, ''))
    ORDER BY published_at DESC, id DESC LIMIT $4";

/// The flow columns a new run is inserted with, from its workflow's rule `r` (joined, maybe
/// absent): its key (the input's value at the rule's path as text, `''` without a path or value),
/// whether it keeps its slot while suspended, and that it enters waiting for a slot.
pub(super) const FLOW_INSERT_COLUMNS: &str = "flow_key, flow_hold, waiting_for";

pub(super) fn flow_values(input: &str) -> String {
    format!(
        "{},
         coalesce(r.hold, false),
         CASE WHEN r.workflow IS NOT NULL THEN 'concurrency' END",
        flow_key_sql(input)
    )
}

/// The concurrency key of a new run with `input` under its workflow's rule `r` (see
/// [`FLOW_INSERT_COLUMNS`]).
pub(super) fn flow_key_sql(input: &str) -> String {
    format!(
        "CASE WHEN r.workflow IS NULL THEN NULL WHEN r.path IS NULL THEN ''
              ELSE coalesce({input}::jsonb #>> r.path, '') END"
    )
}

pub(super) const RUN_COLUMNS: &str = "id, workflow, version, status, suspend_reason, input, output, error, idempotency_key, \
     created_at, updated_at, completed_at, wake_at, lease_owner, lease_expires_at, epoch, last_seq, request, \
     request_reason, recoveries, deadline_at, retention_ms, delete_after, restarted_from, parent, continued_from, \
     continued_as, flow_key, flow_hold, waiting_for, priority, fair_key, fair_seq, debounce_key, debounce_until";

pub(super) const SCHEDULE_COLUMNS: &str =
    "name, workflow, spec, input, paused, next_fire_at, last_fired_at, created_at, updated_at";

/// [`RUN_COLUMNS`] with `null` for the input and no output: what a list that shows neither
/// reads ([`RunFilter::without_payloads`](cairn_store::RunFilter::without_payloads)).
pub(super) static RUN_SUMMARY_COLUMNS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    RUN_COLUMNS.replacen("input, output", "'null'::text AS input, NULL::text AS output", 1)
});

/// [`RUN_COLUMNS`] of the table aliased `alias`.
pub(super) fn run_columns_of(alias: &str) -> String {
    RUN_COLUMNS.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

/// The `SET` of a run parked or paused: a waiting pause is done, a waiting cancel stays for the
/// worker that claims the run once it is resumed (`cairn_store::lifecycle::apply`, `Park`).
const CLEAR_PAUSE: &str = "request = CASE request WHEN 'pause' THEN NULL ELSE request END,
                     request_reason = CASE request WHEN 'pause' THEN NULL ELSE request_reason END";

/// The `SET` of a run (aliased `u`) leaving a debounce window (it wakes or is paused): it held no
/// slot while it debounced (`flow_hold` false), and from now on keeps one while suspended as its
/// rule says.
pub(super) const HOLD_AFTER_DEBOUNCE: &str = "flow_hold = CASE WHEN u.suspend_reason = 'debouncing'
             THEN coalesce((SELECT c.hold FROM concurrency_rules c WHERE c.workflow = u.workflow), false)
             ELSE u.flow_hold END";

/// The fairness sequence of a new run of priority `priority` and key `key` (SQL expressions)
/// ([`cairn_journal::flow::fair_seq`]): one past the last ready run of its key and priority, and
/// never behind the head of its priority; both read from the front of a partial index. A
/// statement that inserts several runs of one key adds their rank among them.
pub(super) fn fair_seq_sql(priority: &str, key: &str) -> String {
    format!(
        "greatest(
             coalesce((SELECT f.fair_seq + 1 FROM runs f
                       WHERE f.status = 'pending' AND f.waiting_for IS NULL AND f.priority = {priority}
                         AND f.fair_key = {key}
                       ORDER BY f.fair_seq DESC LIMIT 1), 0),
             coalesce((SELECT f.fair_seq FROM runs f
                       WHERE f.status = 'pending' AND f.waiting_for IS NULL AND f.priority = {priority}
                       ORDER BY f.priority DESC, f.fair_seq LIMIT 1), 0))"
    )
}

/// A store's statements and the schema they run in: each connection's `search_path` is the
/// schema, so the statements are one text for every schema ([`STATEMENTS`], built once per
/// process).
pub(super) struct Sql {
    /// The schema holding Cairn's tables; also the name of its notification channel.
    pub(super) schema: String,
}

impl Sql {
    pub(super) fn new(schema: &str) -> Sql {
        Sql { schema: schema.to_owned() }
    }
}

impl std::ops::Deref for Sql {
    type Target = Statements;

    fn deref(&self) -> &Statements {
        &STATEMENTS
    }
}

/// Every statement, unqualified: the tables are found through the connection's `search_path`.
pub(super) static STATEMENTS: std::sync::LazyLock<Statements> = std::sync::LazyLock::new(Statements::new);

/// Every statement a store runs: those that are one text are `sql/statements/<field>.sql`,
/// embedded; those that share fragments (the run's columns, the journal insert, the fairness
/// sequence, the flow columns) are composed here once per process.
pub(super) struct Statements {
    pub(super) get_run: String,
    pub(super) by_key: String,
    pub(super) create_batch: String,
    pub(super) flow_places: String,
    pub(super) put_rule: String,
    pub(super) delete_rule: String,
    pub(super) admit_workflow: String,
    pub(super) ensure_flow_triggers: String,
    pub(super) rules: String,
    pub(super) take_rate: String,
    pub(super) insert_events: String,
    /// Deletes what a loop checkpoint trims: $1 run, ($2, $3] the range, $4 the iterations'
    /// path prefix, $5 the loop's path (its earlier checkpoints), and the values' sets.
    pub(super) trim_loop: String,
    pub(super) journal: String,
    pub(super) signals: String,
    pub(super) claim: String,
    pub(super) refusal: String,
    pub(super) recheck_signals: String,
    pub(super) heartbeat: String,
    pub(super) heartbeat_batch: String,
    pub(super) pending: String,
    pub(super) request_cancel: String,
    pub(super) request_pause: String,
    pub(super) pause_now: String,
    pub(super) resume: String,
    pub(super) insert_run: String,
    pub(super) debounce_run: String,
    pub(super) restart_journal: String,
    pub(super) lock_by_key: String,
    pub(super) insert_signal: String,
    pub(super) wake_waiting: String,
    pub(super) lock_run: String,
    pub(super) continued_as: String,
    pub(super) move_signals: String,
    pub(super) cancel_now: String,
    pub(super) next_wake: String,
    pub(super) put_schedule: String,
    pub(super) get_schedule: String,
    pub(super) schedules: String,
    pub(super) due_schedules: String,
    pub(super) fire_schedule: String,
    pub(super) pause_schedule: String,
    pub(super) delete_schedule: String,
    pub(super) notify: String,
    pub(super) append_batch: String,
    pub(super) progress: String,
    pub(super) suspend: String,
    pub(super) finish: String,
    pub(super) release: String,
    pub(super) park: String,
    pub(super) prune_candidates: String,
    pub(super) prune_events: String,
    pub(super) events: String,
    pub(super) events_of_topic: String,
    pub(super) prune: String,
    pub(super) record_worker: String,
    pub(super) record_served: String,
    pub(super) served_workflows: String,
    pub(super) workers: String,
    pub(super) forget_workers: String,
    pub(super) set_subscriptions: String,
    pub(super) subscriptions: String,
    pub(super) version_counts: String,
    pub(super) fold_ended_counts: String,
    pub(super) vacuum_deltas: String,
    pub(super) workflow_counts: String,
}

impl Statements {
    fn new() -> Statements {
        // One statement per append, so a step commits in one round trip: the run-row update checks
        // the lease (its epoch, and that the run is running), the journal's end and (when the append consumes a signal) that the
        // signal is still free; the signal and journal writes happen only if it matched.
        let append = |set: &str| {
            format!(
                "WITH upd AS (
                     UPDATE runs SET last_seq = $1, updated_at = $2, recoveries = 0{set}
                     WHERE id = $3 AND epoch = $4 AND last_seq = $5 AND status = 'running'
                       AND ($6::bigint IS NULL OR EXISTS (
                           SELECT 1 FROM signals g WHERE g.id = $6 AND g.run_id = $3 AND g.consumed_seq IS NULL))
                     RETURNING id),
                 sig AS (
                     UPDATE signals SET consumed_seq = $7
                     WHERE id = $6 AND run_id = $3 AND EXISTS (SELECT 1 FROM upd) RETURNING id),
                 ins AS (
                     INSERT INTO journal (run_id, seq, at, kind, path, data)
                     SELECT $3, e.seq, $2, e.kind, e.path, e.data
                     FROM unnest($8::bigint[], $9::text[], $10::text[], $11::text[]) AS e(seq, kind, path, data)
                     WHERE EXISTS (SELECT 1 FROM upd) RETURNING 1)
                 SELECT count(*) FROM upd"
            )
        };
        // Ended runs past their retention (or ended before $2), through the two partial indexes.
        let candidates = "(SELECT id FROM runs WHERE delete_after <= $1 AND status IN ('completed', 'failed', 'cancelled', 'continued')
              UNION
              SELECT id FROM runs WHERE $2::bigint IS NOT NULL AND completed_at < $2
                AND status IN ('completed', 'failed', 'cancelled', 'continued'))".to_string();
        Statements {
            // Rows another sweeper (or anything else) holds are skipped, so sweepers never wait for
            // each other or for claims, and each run is deleted once.
            prune: format!(
                "WITH doomed AS (
                     SELECT id FROM runs WHERE id IN {candidates} ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED),
                 j AS (DELETE FROM journal WHERE run_id IN (SELECT id FROM doomed)),
                 g AS (DELETE FROM signals WHERE run_id IN (SELECT id FROM doomed))
                 DELETE FROM runs WHERE id IN (SELECT id FROM doomed) RETURNING id"
            ),
            prune_candidates: format!("SELECT id FROM {candidates} AS c ORDER BY id LIMIT $3"),
            prune_events: "DELETE FROM events WHERE id IN
                (SELECT id FROM events WHERE published_at < $1 ORDER BY published_at, id LIMIT $2)"
                .to_owned(),
            // Both take the same four parameters; without a topic `$1` is NULL and only typed.
            events: format!("SELECT {EVENT_COLUMNS} FROM events WHERE $1::text IS NULL AND {EVENTS_BEFORE}"),
            events_of_topic: format!("SELECT {EVENT_COLUMNS} FROM events WHERE topic = $1 AND {EVENTS_BEFORE}"),
            record_worker: include_str!("../../sql/statements/record_worker.sql").to_owned(),
            record_served: include_str!("../../sql/statements/record_served.sql").to_owned(),
            served_workflows: include_str!("../../sql/statements/served_workflows.sql").to_owned(),
            workers: include_str!("../../sql/statements/workers.sql").to_owned(),
            forget_workers: include_str!("../../sql/statements/forget_workers.sql").to_owned(),
            // One statement: the subscriptions of workflows $1 not among the new ones ($2, $3, $4)
            // go, the new ones are added or updated; a reader sees the old set or the new one.
            set_subscriptions: include_str!("../../sql/statements/set_subscriptions.sql").to_owned(),
            subscriptions: include_str!("../../sql/statements/subscriptions.sql").to_owned(),
            version_counts: include_str!("../../sql/statements/version_counts.sql").to_owned(),
            // Concurrent folds never count a delta twice: a row one has deleted is skipped by the
            // other; counters are upserted in key order, so two folds never deadlock.
            vacuum_deltas: include_str!("../../sql/statements/vacuum_deltas.sql").to_owned(),
            fold_ended_counts: include_str!("../../sql/statements/fold_ended_counts.sql").to_owned(),
            workflow_counts: include_str!("../../sql/statements/workflow_counts.sql").to_owned(),
            get_run: format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
            by_key: format!("SELECT {RUN_COLUMNS} FROM runs WHERE workflow = $1 AND idempotency_key = $2"),
            // New runs skip any id or idempotency-key conflict (the caller looks the winner up);
            // only inserted runs get their `started` entry; one notification wakes idle workers
            // when anything was inserted. Each (priority, key) of the batch looks its place up
            // once, before the insert (MATERIALIZED): looked up per run, each look walked back
            // over the index entries of the runs this statement had inserted before it
            // (invisible to it), and W1 ran at half speed. A batch's first runs of each limited
            // group take its free slots before they are inserted (`flow_take`, in group order)
            // and go in admitted; slots taken for runs not inserted go back (`flow_give`); the
            // rest go in waiting. The last branch only makes the notification and the give-backs
            // run (a CTE that reads is run only as far as something reads it, and nothing reads
            // past an empty `ins`).
            create_batch: format!(
                "WITH i AS (
                     SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::bigint[],
                                          $14::bigint[], $15::bigint[], $16::bigint[], $17::text[], $18::text[],
                                          $19::text[], $20::int[], $21::text[]) WITH ORDINALITY
                         AS i(id, workflow, version, input, key, created_at, last_seq, deadline_at, retention_ms,
                              restarted_from, parent, continued_from, priority, fair_key, ord)),
                 places AS MATERIALIZED (
                     SELECT k.priority, k.fair_key, {fair_seq} AS first
                     FROM (SELECT DISTINCT priority, fair_key FROM i) AS k),
                 keyed AS MATERIALIZED (
                     SELECT i.*, {flow_key} AS fkey, coalesce(r.hold, false) AS hold
                     FROM i LEFT JOIN concurrency_rules r ON r.workflow = i.workflow),
                 nth AS (
                     SELECT k.*, row_number() OVER (PARTITION BY k.workflow, k.fkey ORDER BY k.ord) AS nth FROM keyed k),
                 taken AS MATERIALIZED (
                     SELECT g.workflow, g.fkey, flow_take(g.workflow, g.fkey, g.n::int) AS n
                     FROM (SELECT workflow, fkey, count(*) AS n FROM keyed WHERE fkey IS NOT NULL
                           GROUP BY workflow, fkey ORDER BY workflow, fkey) AS g),
                 ins AS (
                     INSERT INTO runs (id, workflow, version, status, input, idempotency_key, created_at, updated_at,
                         last_seq, deadline_at, retention_ms, restarted_from, parent, continued_from, {FLOW_INSERT_COLUMNS},
                         priority, fair_key, fair_seq)
                     SELECT k.id, k.workflow, k.version, 'pending', k.input, k.key, k.created_at, k.created_at,
                         k.last_seq, k.deadline_at, k.retention_ms, k.restarted_from, k.parent, k.continued_from,
                         k.fkey, k.hold, CASE WHEN k.fkey IS NOT NULL AND k.nth > t.n THEN 'concurrency' END,
                         k.priority, k.fair_key,
                         p.first + row_number() OVER (PARTITION BY k.priority, k.fair_key ORDER BY k.ord) - 1
                     FROM nth k JOIN places p ON p.priority = k.priority AND p.fair_key = k.fair_key
                         LEFT JOIN taken t ON t.workflow = k.workflow AND t.fkey = k.fkey
                     ON CONFLICT DO NOTHING
                     RETURNING id, workflow, flow_key, flow_key IS NOT NULL AND waiting_for IS NULL AS admitted,
                         fair_seq),
                 gave AS (
                     SELECT flow_give(t.workflow, t.fkey, (t.n - count(a.id))::int)
                     FROM taken t LEFT JOIN ins a ON a.workflow = t.workflow AND a.flow_key = t.fkey AND a.admitted
                     GROUP BY t.workflow, t.fkey, t.n HAVING t.n > count(a.id)),
                 {journal},
                 woke AS (SELECT pg_notify($13, '') FROM (SELECT 1 FROM ins LIMIT 1) AS any_new)
                 SELECT ins.id, ins.flow_key IS NOT NULL, ins.fair_seq FROM ins
                 UNION ALL
                 SELECT NULL, NULL, NULL FROM (SELECT (SELECT count(*) FROM woke) + (SELECT count(*) FROM gave) AS n) AS forced
                 WHERE forced.n < 0",
                journal = journal_cte(7, "ins"),
                flow_key = flow_key_sql("i.input"),
                fair_seq = fair_seq_sql("k.priority", "k.fair_key")
            ),
            trim_loop: include_str!("../../sql/statements/trim_loop.sql").to_owned(),
            insert_events: include_str!("../../sql/statements/insert_events.sql").to_owned(),
            journal: include_str!("../../sql/statements/journal.sql").to_owned(),
            signals: include_str!("../../sql/statements/signals.sql").to_owned(),
            // One pass of a claim (`Model::claim` in the conformance suite). Woken runs that gave
            // their slot up when they suspended wait for one again, as do debounced runs whose
            // window closed, which from then on keep their slot while suspended as their rule says
            // (the update's trigger admits them where their group has room, after this statement:
            // a second pass claims those). One row per claimed run, or one of nulls if none, each
            // ending with how many runs were requeued.
            claim: format!(
                "WITH requeued AS (
                     UPDATE runs u SET status = 'pending', waiting_for = 'concurrency', suspend_reason = NULL,
                         wake_at = NULL, updated_at = $3,
                         {hold}
                     WHERE id IN (SELECT id FROM runs
                                  WHERE status = 'suspended' AND wake_at <= $3 AND flow_key IS NOT NULL AND NOT flow_hold
                                    AND (workflow || '@' || version) = ANY($5)
                                  FOR UPDATE SKIP LOCKED)
                     RETURNING 1),
                 pending AS (
                     SELECT id, priority, fair_seq, created_at AS due FROM runs
                     WHERE status = 'pending' AND waiting_for IS NULL AND (workflow || '@' || version) = ANY($5)
                     ORDER BY priority DESC, fair_seq, created_at, id COLLATE \"C\"
                     LIMIT $6
                     FOR UPDATE SKIP LOCKED),
                 woken AS (
                     SELECT id, priority, fair_seq, wake_at AS due FROM runs
                     WHERE status = 'suspended' AND wake_at <= $3 AND (flow_key IS NULL OR flow_hold)
                       AND (workflow || '@' || version) = ANY($5)
                     ORDER BY wake_at, id COLLATE \"C\"
                     LIMIT $6
                     FOR UPDATE SKIP LOCKED),
                 lapsed AS (
                     SELECT id, priority, fair_seq, lease_expires_at AS due FROM runs
                     WHERE status = 'running' AND lease_expires_at <= $4 AND (workflow || '@' || version) = ANY($5)
                     ORDER BY lease_expires_at, id COLLATE \"C\"
                     LIMIT $6
                     FOR UPDATE SKIP LOCKED),
                 ready AS (
                     SELECT id FROM (SELECT * FROM pending UNION ALL SELECT * FROM woken UNION ALL SELECT * FROM lapsed) c
                     ORDER BY priority DESC, fair_seq, due, id COLLATE \"C\"
                     LIMIT $6),
                 claimed AS (
                     UPDATE runs r SET status = 'running', suspend_reason = NULL, wake_at = NULL, lease_owner = $1,
                         lease_expires_at = $2, epoch = r.epoch + 1, updated_at = $3,
                         recoveries = CASE WHEN r.status = 'running' THEN r.recoveries + 1 ELSE r.recoveries END
                     FROM ready WHERE r.id = ready.id
                     RETURNING {})
                 SELECT c.*, q.requeued FROM (SELECT count(*) AS requeued FROM requeued) q LEFT JOIN claimed c ON true",
                run_columns_of("r"),
                hold = HOLD_AFTER_DEBOUNCE
            ),
            refusal: include_str!("../../sql/statements/refusal.sql").to_owned(),
            // After a run suspended to wait: a signal committed while the suspending statement
            // waited for the run's row (its snapshot predates the signal) wakes it now.
            recheck_signals: include_str!("../../sql/statements/recheck_signals.sql").to_owned(),
            heartbeat: include_str!("../../sql/statements/heartbeat.sql").to_owned(),
            // Every lease of one worker in one statement, without waiting: rows another
            // transaction holds (an append round under way) are skipped and beaten one by one
            // afterwards, so this never waits while holding other rows (no deadlock with rounds).
            heartbeat_batch: include_str!("../../sql/statements/heartbeat_batch.sql").to_owned(),
            pending: include_str!("../../sql/statements/pending.sql").to_owned(),
            request_cancel: include_str!("../../sql/statements/request_cancel.sql").to_owned(),
            request_pause: include_str!("../../sql/statements/request_pause.sql").to_owned(),
            pause_now: format!(
                "UPDATE runs u SET epoch = epoch + 1, status = 'paused', error = $2, updated_at = $3, {CLEAR_PAUSE},
                     suspend_reason = NULL, wake_at = NULL, lease_owner = NULL,
                     lease_expires_at = NULL, waiting_for = NULL, {}
                 WHERE id = $1",
                HOLD_AFTER_DEBOUNCE
            ),
            resume: include_str!("../../sql/statements/resume.sql").to_owned(),
            insert_run: format!(
                "INSERT INTO runs (id, workflow, version, status, input, idempotency_key, created_at, updated_at,
                     last_seq, deadline_at, retention_ms, restarted_from, parent, continued_from, {FLOW_INSERT_COLUMNS},
                     priority, fair_key, fair_seq)
                 SELECT $1, $2, $3, 'pending', $4, $5, $6, $6, $7, $8, $9, $10, $11, $12, {flow_values}, $13, $14, {fair_seq}
                 FROM (SELECT $2::text AS workflow) AS i LEFT JOIN concurrency_rules r ON r.workflow = i.workflow
                 ON CONFLICT DO NOTHING RETURNING id, flow_key IS NOT NULL, fair_seq",
                flow_values = flow_values("$4::text"),
                fair_seq = fair_seq_sql("$13::int", "$14::text")
            ),
            // A debounced start: a new run debouncing under its key, or (the arbiter is the unique
            // partial index of debouncing runs) the one already debouncing there takes its input
            // and wakes $13 (quiet after now), capped by its window's maximum wait. A run whose
            // claim is under way leaves the index when that claim commits, and the insert then
            // goes ahead. `created` tells which (`xmax` is 0 only for a row this statement
            // inserted). A debouncing run holds no concurrency slot and waits for none (see
            // `claim`).
            debounce_run: format!(
                "INSERT INTO runs AS t (id, workflow, version, status, suspend_reason, wake_at, input, created_at,
                     updated_at, last_seq, deadline_at, retention_ms, {FLOW_INSERT_COLUMNS}, priority, fair_key, fair_seq,
                     debounce_key, debounce_until)
                 SELECT $1, $2, $3, 'suspended', 'debouncing', $4, $5, $6, $6, 1, $7, $8, {flow_key}, false, NULL,
                     $9, $10, {fair_seq}, $11, $12
                 FROM (SELECT $2::text AS workflow) AS i LEFT JOIN concurrency_rules r ON r.workflow = i.workflow
                 ON CONFLICT (workflow, debounce_key) WHERE status = 'suspended' AND suspend_reason = 'debouncing'
                 DO UPDATE SET input = excluded.input, updated_at = excluded.updated_at,
                     wake_at = least($13, t.debounce_until)
                 RETURNING {}, t.xmax = 0 AS created",
                run_columns_of("t"),
                flow_key = flow_key_sql("$5::text"),
                fair_seq = fair_seq_sql("$9::int", "$10::text")
            ),
            restart_journal: include_str!("../../sql/statements/restart_journal.sql").to_owned(),
            flow_places: include_str!("../../sql/statements/flow_places.sql").to_owned(),
            put_rule: include_str!("../../sql/statements/put_rule.sql").to_owned(),
            delete_rule: include_str!("../../sql/statements/delete_rule.sql").to_owned(),
            // The flow triggers exist once the store has a rule (schema migrations 15 and 18).
            ensure_flow_triggers: include_str!("../../sql/statements/ensure_flow_triggers.sql").to_owned(),
            admit_workflow: include_str!("../../sql/statements/admit_workflow.sql").to_owned(),
            rules: include_str!("../../sql/statements/rules.sql").to_owned(),
            take_rate: include_str!("../../sql/statements/take_rate.sql").to_owned(),
            lock_by_key: format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE workflow = $1 AND idempotency_key = $2 FOR UPDATE"
            ),
            insert_signal: include_str!("../../sql/statements/insert_signal.sql").to_owned(),
            wake_waiting: include_str!("../../sql/statements/wake_waiting.sql").to_owned(),
            lock_run: format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1 FOR UPDATE"),
            continued_as: include_str!("../../sql/statements/continued_as.sql").to_owned(),
            move_signals: include_str!("../../sql/statements/move_signals.sql").to_owned(),
            cancel_now: include_str!("../../sql/statements/cancel_now.sql").to_owned(),
            put_schedule: format!(
                "INSERT INTO schedules AS o (name, workflow, spec, input, next_fire_at, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6)
                 ON CONFLICT (name) DO UPDATE SET workflow = excluded.workflow, input = excluded.input,
                     next_fire_at = CASE WHEN o.spec = excluded.spec THEN o.next_fire_at ELSE excluded.next_fire_at END,
                     spec = excluded.spec, updated_at = excluded.updated_at
                 RETURNING {SCHEDULE_COLUMNS}"
            ),
            get_schedule: format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = $1"),
            schedules: format!("SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name"),
            due_schedules: format!(
                "SELECT {SCHEDULE_COLUMNS} FROM schedules
                 WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at <= $1 AND workflow = ANY($2)
                 ORDER BY next_fire_at LIMIT $3"
            ),
            fire_schedule: include_str!("../../sql/statements/fire_schedule.sql").to_owned(),
            pause_schedule: include_str!("../../sql/statements/pause_schedule.sql").to_owned(),
            delete_schedule: include_str!("../../sql/statements/delete_schedule.sql").to_owned(),
            // The schedules' minimum goes through their partial index (few rows: the unpaused).
            next_wake: include_str!("../../sql/statements/next_wake.sql").to_owned(),
            // The channel is the schema's name: one channel per Cairn installation.
            notify: "SELECT pg_notify($1, $2)".to_owned(),
            append_batch: format!(
                "WITH input AS (
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[],
                                          $12::bool[], $13::text[], $14::text[], $15::text[], $16::bigint[])
                         AS i(id, epoch, after_seq, new_last, at, finish, status, output, error, completed_at)),
                 upd AS (
                     UPDATE runs r SET last_seq = i.new_last, updated_at = i.at, recoveries = 0,
                         status = CASE WHEN i.finish THEN i.status ELSE r.status END,
                         suspend_reason = CASE WHEN i.finish THEN NULL ELSE r.suspend_reason END,
                         output = CASE WHEN i.finish THEN i.output ELSE r.output END,
                         error = CASE WHEN i.finish THEN i.error ELSE r.error END,
                         completed_at = CASE WHEN i.finish THEN i.completed_at ELSE r.completed_at END,
                         delete_after = CASE WHEN i.finish THEN i.completed_at + r.retention_ms ELSE r.delete_after END,
                         wake_at = CASE WHEN i.finish THEN NULL ELSE r.wake_at END,
                         lease_owner = CASE WHEN i.finish THEN NULL ELSE r.lease_owner END,
                         lease_expires_at = CASE WHEN i.finish THEN NULL ELSE r.lease_expires_at END,
                         request = CASE WHEN i.finish THEN NULL ELSE r.request END,
                         request_reason = CASE WHEN i.finish THEN NULL ELSE r.request_reason END
                     FROM input i
                     WHERE r.id = i.id AND r.epoch = i.epoch AND r.last_seq = i.after_seq AND r.status = 'running'
                     RETURNING r.id),
                 {journal}
                 SELECT id FROM upd",
                journal = journal_cte(6, "upd")
            ),
            progress: append(""),
            suspend: append(", status = 'suspended', suspend_reason = $12, lease_owner = NULL, lease_expires_at = NULL,
                 wake_at = CASE WHEN request IS NOT NULL OR ($13::bigint IS NOT NULL AND EXISTS (
                         SELECT 1 FROM signals g WHERE g.run_id = runs.id AND g.consumed_seq IS NULL AND g.id > $13))
                     THEN $14 ELSE $15::bigint END"),
            finish: append(
                ", status = $12, suspend_reason = NULL, output = $13, error = $14, completed_at = $15, wake_at = NULL,
                 lease_owner = NULL, lease_expires_at = NULL, delete_after = $15 + retention_ms, request = NULL,
                 request_reason = NULL",
            ),
            release: append(
                ", status = 'pending', suspend_reason = NULL, wake_at = NULL, lease_owner = NULL, lease_expires_at = NULL",
            ),
            park: append(&format!(
                ", status = 'paused', suspend_reason = NULL, error = $12, wake_at = NULL, lease_owner = NULL,
                 lease_expires_at = NULL, {CLEAR_PAUSE}"
            )),
        }
    }
}

/// A CTE inserting the journal rows of [`JournalColumns`] bound as parameters `$first…$first+5`,
/// only for runs whose id the CTE `gate` returned.
pub(super) fn journal_cte(first: usize, gate: &str) -> String {
    let p = |i: usize| first + i;
    format!(
        "journal_rows AS (
             INSERT INTO journal (run_id, seq, at, kind, path, data)
             SELECT e.run_id, e.seq, e.at, e.kind, e.path, e.data
             FROM unnest(${}::text[], ${}::bigint[], ${}::bigint[], ${}::text[], ${}::text[], ${}::text[])
                 AS e(run_id, seq, at, kind, path, data)
             WHERE e.run_id IN (SELECT id FROM {gate}))",
        p(0),
        p(1),
        p(2),
        p(3),
        p(4),
        p(5)
    )
}

/// A driver's error as the store's, kept as its source.
pub(crate) fn backend(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::from_cause(error)
}
