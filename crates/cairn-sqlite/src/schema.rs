//! The schema: its migrations in order, and the SQL fragments they and the queries share.

/// The `SET` of a run leaving a debounce window (it wakes or is paused): it held no slot while
/// it debounced (`flow_hold` 0), and from now on keeps one while suspended as its rule says.
macro_rules! hold_after_debounce {
    () => {
        "flow_hold = CASE WHEN suspend_reason = 'debouncing'
             THEN coalesce((SELECT hold FROM concurrency_rules r WHERE r.workflow = runs.workflow), 0)
             ELSE flow_hold END"
    };
}

/// The `SET` of a run parked or paused: a waiting pause is done, a waiting cancel stays for the
/// worker that claims the run once it is resumed (`cairn_store::lifecycle::apply`, `Park`).
macro_rules! clear_pause {
    () => {
        "request = CASE request WHEN 'pause' THEN NULL ELSE request END,
         request_reason = CASE request WHEN 'pause' THEN NULL ELSE request_reason END"
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

/// The value of `column` in the head of run `runs.id` (migration 25: a running run's journal
/// end, last change and recoveries live in `run_heads` while a worker holds it), or `NULL` when
/// the run has none.
macro_rules! head {
    ($column:literal) => {
        concat!("(SELECT h.", $column, " FROM run_heads h WHERE h.id = runs.id)")
    };
}

/// `column` of a run as its reads see it: its head's while it runs and has one, else the row's.
macro_rules! folded {
    ($column:literal) => {
        concat!(
            "CASE WHEN runs.status = 'running' THEN coalesce(",
            head!($column),
            ", runs.",
            $column,
            ") ELSE runs.",
            $column,
            " END"
        )
    };
}

/// The `SET` of an operator's pause, which takes a run off its worker without a journal end of
/// its own: a running run's head (journal end and recoveries) folded back into the row; a run
/// that is not running has none and is not looked up. The head is deleted after
/// (`Writer::drop_head`).
macro_rules! fold_head {
    () => {
        concat!("last_seq = ", folded!("last_seq"), ", recoveries = ", folded!("recoveries"))
    };
}

/// The condition of a worker's change that takes the run off its lease: the run is running at
/// the worker's epoch (`?4`) and its journal ends at the append's `after_seq` (`?5`), read from
/// its head. The head is deleted after (`Writer::drop_head`).
macro_rules! held_at_end {
    () => {
        concat!("id = ?3 AND epoch = ?4 AND status = 'running' AND coalesce(", head!("last_seq"), ", last_seq) = ?5")
    };
}

/// The schema as migrations in order, one file each under `sql/migrations/`: a database at
/// `PRAGMA user_version` n has the first n applied. Never edit one that has shipped: add another
/// (`shipped_migrations_keep_their_text` checks each file's hash).
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("../sql/migrations/01.sql"),
    include_str!("../sql/migrations/02.sql"),
    include_str!("../sql/migrations/03.sql"),
    include_str!("../sql/migrations/04.sql"),
    include_str!("../sql/migrations/05.sql"),
    include_str!("../sql/migrations/06.sql"),
    include_str!("../sql/migrations/07.sql"),
    include_str!("../sql/migrations/08.sql"),
    include_str!("../sql/migrations/09.sql"),
    include_str!("../sql/migrations/10.sql"),
    include_str!("../sql/migrations/11.sql"),
    include_str!("../sql/migrations/12.sql"),
    include_str!("../sql/migrations/13.sql"),
    include_str!("../sql/migrations/14.sql"),
    include_str!("../sql/migrations/15.sql"),
    include_str!("../sql/migrations/16.sql"),
    include_str!("../sql/migrations/17.sql"),
    include_str!("../sql/migrations/18.sql"),
    include_str!("../sql/migrations/19.sql"),
    include_str!("../sql/migrations/20.sql"),
    include_str!("../sql/migrations/21.sql"),
    include_str!("../sql/migrations/22.sql"),
    include_str!("../sql/migrations/23.sql"),
    include_str!("../sql/migrations/24.sql"),
    include_str!("../sql/migrations/25.sql"),
];

pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

#[cfg(test)]
mod tests {
    /// FNV-1a, 64 bits: a fingerprint of a migration's text.
    fn fingerprint(text: &str) -> u64 {
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
    }

    /// Each shipped migration's text, as it shipped: a database written by an earlier build
    /// applied exactly these, so none may change (add a migration instead).
    #[test]
    fn shipped_migrations_keep_their_text() {
        const SHIPPED: [u64; 24] = [
            0x40a7728179ffc23a,
            0x62cb369a58943bef,
            0x71c4d6169e83e441,
            0x73633f803d4dbdec,
            0x3909b28e33a67708,
            0x0b31de9d7912f2a2,
            0xb18207641b85af1d,
            0x2af657b6d84e9bf7,
            0xb0721be89bb09b33,
            0xf4cc80f5a817b02a,
            0x2e22accc7a9feca4,
            0xf1656cdcdcb5f349,
            0xb4462361bbc6855e,
            0x9e3f140c3fd8d698,
            0xb79b6a2a34f81d38,
            0xd001d1d9525f20ef,
            0xf1656cdcdcb5f349,
            0x9207e37fdcc17e27,
            0x9001db172c78fa06,
            0x49d3dd3be9489fbd,
            0xe9c93c2d165d4865,
            0x77c4ef32365e786d,
            0x89a39cacb889b07f,
            0x356e14d16ab51058,
        ];
        let now: Vec<u64> = super::MIGRATIONS.iter().map(|text| fingerprint(text)).collect();
        assert_eq!(now[..SHIPPED.len()], SHIPPED, "a shipped migration's text changed");
    }
}
