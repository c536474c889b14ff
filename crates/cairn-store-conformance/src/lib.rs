//! The conformance suite every [`Store`](cairn_store::Store) backend must pass.
//!
//! Each check is an async function taking a fresh, empty store. The
//! [`conformance_tests!`] macro turns the whole suite into `#[tokio::test]`s for one backend:
//!
//! ```ignore
//! cairn_store_conformance::conformance_tests!(memory, || async {
//!     (std::sync::Arc::new(cairn_store::MemoryStore::new()) as std::sync::Arc<dyn cairn_store::Store>, ())
//! });
//! ```

// This crate is test code: a failed check panics, as in any test.
#![allow(clippy::unwrap_used)]

pub mod control;
pub mod events;
pub mod flow;
pub mod journal;
pub mod lists;
pub mod model;
mod model_test;
pub mod runs;
pub mod schedules;
pub mod signals;
mod support;
pub mod workers;

pub use model_test::{Transitions, check_against_model, check_against_model_seeded};
pub use support::DynStore;

// The checks by store trait, collected from the sources by `build.rs`: `__conformance_checks!`.
include!(concat!(env!("OUT_DIR"), "/checks.rs"));

/// Declares one `#[tokio::test]` per conformance check for a backend, in one module per store
/// trait (`memory::runs::create_and_read_back`, `memory::journal::append_checks_sequence`, …).
/// The list of checks is not kept by hand: `build.rs` collects every `pub async fn
/// name(store: DynStore)` of the check modules, so a new check runs on every backend.
///
/// `$make` is an expression producing a future of `(store, guard)` — a fresh, empty [`DynStore`]
/// and anything that must live as long as the test (a temporary directory, say) — or of an
/// `Option` of that, `None` meaning the backend is unavailable and the test is skipped.
///
/// `model: $model` gives the model test ([`check_against_model`]) a maker of its own, for a
/// backend whose fresh stores are dear and can be emptied instead (PostgreSQL's
/// `ReusedSchema`): an expression producing a closure that makes a store for each case.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:ident, $make:expr) => {
        $crate::conformance_tests!($backend, $make, model: || $make());
    };
    ($backend:ident, $make:expr, model: $model:expr) => {
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $crate::__conformance_checks!($make);

            /// Random operation sequences against the model ([`check_against_model`]): 256 of up
            /// to 40 operations from a fixed seed (`CAIRN_MODEL_CASES` sets another count,
            /// `CAIRN_MODEL_SEED` another seed or `random`).
            #[test]
            fn matches_the_model() {
                $crate::check_against_model(256, 40, $model);
            }
        }
    };
    (@each $make:expr; $($module:ident::$name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                // `None`: the backend is not available here and the test is skipped (the maker
                // says so, and fails instead where the backend is required).
                let made: Option<($crate::DynStore, _)> = ($make)().await.into();
                if let Some((store, _guard)) = made {
                    $crate::$module::$name(store).await;
                }
            }
        )*
    };
}
