//! The context a workflow body gets, and its verbs.
//!
//! * `context`: [`Ctx`] itself, its scopes, and the verbs that journal what is not a step;
//! * `steps`: [`Ctx::step`] and [`Step`];
//! * `waits`: sleeps and waits for signals, [`EventFilter`];
//! * `branches`: [`Ctx::join`], [`Ctx::race`], [`Ctx::each`] and [`Branch`].

mod branches;
mod context;
mod steps;
mod waits;

pub use branches::Branch;
pub use context::Ctx;
pub use steps::{Step, step_attempt};
pub use waits::EventFilter;
