//! The `cairn` binary's integration tests, one module per surface (the CLI, the HTTP server, the
//! dashboard in a browser, `--url`, OTLP), linked into one test binary.
//!
//! A new test file here must be declared below: Cargo builds only the test targets its manifest
//! names (`autotests = false`), and `cairn`'s `every_test_file_is_declared` fails when a file is
//! neither.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod common;

mod cli;
mod contract;
mod dashboard;
mod dashboard_search;
mod dashboard_states;
mod hostile;
mod otlp;
mod remote;
mod serve;
mod upgrade;
