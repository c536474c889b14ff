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

mod control;
mod flow;
mod lists;
pub mod model;
mod model_test;
mod runs;
mod schedules;
mod signals;
mod support;

pub use control::*;
pub use flow::*;
pub use lists::*;
pub use model_test::{Transitions, check_against_model, check_against_model_seeded};
pub use runs::*;
pub use schedules::*;
pub use signals::*;
pub use support::DynStore;
