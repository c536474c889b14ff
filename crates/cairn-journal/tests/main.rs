//! The journal's integration tests (properties of the fold and of flow control, the format
//! fixtures), linked into one test binary.
//!
//! A new test file here must be declared below: Cargo builds only the test targets its manifest
//! names (`autotests = false`), and `cairn`'s `every_test_file_is_declared` fails when a file is
//! neither.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod debounce_properties;
mod fairness_properties;
mod fold_properties;
mod format_fixtures;
