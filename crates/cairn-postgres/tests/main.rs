//! The PostgreSQL store's integration tests (the conformance suite, counts under concurrent
//! folding), linked into one test binary.
//!
//! A new test file here must be declared below: Cargo builds only the test targets its manifest
//! names (`autotests = false`), and `cairn`'s `every_test_file_is_declared` fails when a file is
//! neither.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod conformance;
mod counts;
mod errors;
