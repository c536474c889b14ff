//! The crash tests, one module per scenario, linked into one test binary. Each kills and restarts
//! real `crash-worker` processes; two run at a time (`common::slot`): they spend their time
//! waiting, not computing, so two together take about half as long and do not compete for the CPU.
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
