//! The crash tests, one module per scenario, linked into one test binary. Each kills and restarts
//! real `crash-worker` processes; four run at a time ([`common::AT_ONCE`]): they spend their time
//! waiting, not computing (17 CPU seconds in 114 s of wall time), so four together take about a
//! quarter as long and do not compete for the CPU.
//!
//! The harness is `libtest-mimic` (`harness = false`), not the built-in one, because the
//! built-in one runs as many tests at once as the machine has cores (two here) and no setting
//! gives one binary more. It takes the same arguments (filters, `--exact`, `--ignored`,
//! `--include-ignored`, `--list`, `--test-threads`), but does not capture what a test prints.
//! Each test is listed in [`main`]: one that is not is dead code, which the lints refuse.
//!
//! A new test file here must be declared below: Cargo builds only `main.rs` from this directory
//! (`autotests = false`), and `cairn`'s `every_test_file_is_declared` fails when a file is not.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod common;

mod children_postgres;
mod compose_kill9;
mod concurrency_postgres;
mod debounce_postgres;
mod fairness_postgres;
mod faults_postgres;
mod graceful;
mod kill9;
mod loop_kill9;
mod multiprocess_postgres;
mod poison;
mod rate_postgres;
mod schedules_postgres;
mod signals_across;
mod workers_postgres;

use libtest_mimic::{Arguments, Failed, Trial};

/// A test of `async fn` `$test`, named by its path, on a runtime of its own (as
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` made).
macro_rules! asynchronous {
    ($($test:ident)::+) => {
        Trial::test([$(stringify!($test)),+].join("::"), || on_a_runtime($($test)::+()))
    };
}

/// A test of `fn` `$test`, named by its path.
macro_rules! blocking {
    ($($test:ident)::+) => {
        Trial::test([$(stringify!($test)),+].join("::"), || {
            $($test)::+();
            Ok(())
        })
    };
}

/// Runs `test` on a multi-threaded runtime of two workers.
fn on_a_runtime(test: impl Future<Output = ()>) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(test);
    Ok(())
}

/// Heavy: run only with `--ignored` (or `--include-ignored`), as `.ci/run` does.
fn heavy(trial: Trial) -> Trial {
    trial.with_ignored_flag(true)
}

fn main() -> std::process::ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(common::AT_ONCE as usize);
    let trials = vec![
        asynchronous!(
            children_postgres::parents_and_children_run_in_different_processes_and_a_cancel_reaches_the_child
        ),
        asynchronous!(compose_kill9::branches_items_and_races_survive_repeated_kill_9),
        asynchronous!(concurrency_postgres::never_more_than_three_inside_their_step_across_three_workers),
        asynchronous!(
            debounce_postgres::fifty_two_starts_per_key_from_four_processes_make_one_run_each_with_the_last_input
        ),
        asynchronous!(fairness_postgres::a_small_tenant_and_high_priorities_go_first_across_three_workers),
        heavy(asynchronous!(faults_postgres::a_slow_database_costs_no_leases)),
        asynchronous!(faults_postgres::a_worker_waits_for_a_database_that_refuses_connections),
        asynchronous!(faults_postgres::a_database_that_never_answers_ends_a_start_with_the_timeout),
        asynchronous!(faults_postgres::a_partitioned_worker_is_fenced_visibly),
        asynchronous!(faults_postgres::repeated_resets_lose_and_duplicate_nothing),
        asynchronous!(graceful::sigterm_drains_steps_in_flight_and_hands_leases_back),
        asynchronous!(kill9::runs_survive_repeated_kill_9),
        asynchronous!(loop_kill9::loops_resume_from_their_last_checkpoint_after_repeated_kill_9),
        asynchronous!(multiprocess_postgres::three_workers_one_killed_repeatedly),
        asynchronous!(poison::a_run_that_crashes_its_workers_is_parked_as_poison),
        asynchronous!(rate_postgres::a_step_runs_at_most_four_times_a_second_across_three_workers),
        asynchronous!(schedules_postgres::no_firing_lost_or_doubled_while_workers_are_killed),
        asynchronous!(signals_across::sqlite::a_zero_timeout_wait_sees_a_signal_stored_elsewhere),
        asynchronous!(signals_across::sqlite::a_wait_in_memory_is_woken_from_elsewhere),
        asynchronous!(signals_across::sqlite::signal_with_start_from_concurrent_callers),
        asynchronous!(signals_across::postgres::a_zero_timeout_wait_sees_a_signal_stored_elsewhere),
        asynchronous!(signals_across::postgres::a_wait_in_memory_is_woken_from_elsewhere),
        asynchronous!(signals_across::postgres::signal_with_start_from_concurrent_callers),
        blocking!(workers_postgres::a_stalled_worker_loses_its_lease_and_cannot_append),
        asynchronous!(workers_postgres::workers_claim_only_what_they_registered_and_detached_clients_steer),
        asynchronous!(workers_postgres::idle_workers_are_woken_by_notify_not_polling),
        asynchronous!(workers_postgres::result_waiters_hear_of_runs_ending_elsewhere),
    ];
    libtest_mimic::run(&args, trials).exit_code()
}
