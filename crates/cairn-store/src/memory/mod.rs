//! The memory store: `handle` (the [`MemoryStore`] handle and its `Store` implementation) over
//! `inner` (its state and the changes it makes).

mod handle;
mod inner;

pub use handle::MemoryStore;
