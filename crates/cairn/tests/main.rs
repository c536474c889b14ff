//! The `cairn` crate's integration tests, one module per feature, linked into one test binary
//! (each separate binary took its own link of the engine, the stores and tokio).
//! `step_costs.rs` stays a binary of its own: its counting global allocator would count every
//! other test's allocations too.
//!
//! A new test file here must be declared below: Cargo builds only `main.rs` and `step_costs.rs`
//! from this directory (`autotests = false`), and `every_test_file_is_declared` (below, for every
//! crate of the workspace) fails when a file is not.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod common;

mod bad_input;
mod branches;
mod cancel;
mod capacity;
mod children;
mod concurrency;
mod concurrency_limits;
mod continuations;
mod continue_as_new;
mod debounce;
mod each;
mod events;
mod helpers;
mod nondeterminism;
mod panics;
mod pause;
mod priority;
mod race;
mod rate_limits;
mod repeat;
mod replay;
mod replay_check;
mod restart;
mod retention;
mod retries;
mod saga;
mod schedules;
mod service;
mod signals;
mod store_faults;
mod stranded;
mod timeout;
mod vars;
mod versions;

/// In every crate of the workspace that builds only the test targets it names (`autotests =
/// false`), each `.rs` file in `tests/` is a module of its `tests/main.rs` or a target its manifest
/// names, so none is left out of `cargo test` unnoticed.
#[test]
fn every_test_file_is_declared() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for krate in std::fs::read_dir(&crates).unwrap() {
        let krate = krate.unwrap().path();
        let Ok(files) = std::fs::read_dir(krate.join("tests")) else { continue };
        let main = std::fs::read_to_string(krate.join("tests/main.rs")).unwrap_or_default();
        let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
        if !manifest.contains("autotests = false") {
            continue; // Cargo builds each of its files as a test binary of its own
        }
        for file in files {
            let path = file.unwrap().path();
            let (Some(stem), Some("rs")) =
                (path.file_stem().and_then(|s| s.to_str()), path.extension().and_then(|e| e.to_str()))
            else {
                continue;
            };
            let declared =
                main.contains(&format!("\nmod {stem};")) || manifest.contains(&format!("path = \"tests/{stem}.rs\""));
            assert!(
                declared,
                "{} is neither a module of its tests/main.rs nor a [[test]] of its Cargo.toml",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} test files found under {}", crates.display());
}
