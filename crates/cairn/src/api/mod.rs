//! The API's operations in process: [`cairn_api::Operations`] implemented on [`Client`](crate::Client),
//! answering the API's views. The HTTP API (`cairn-http`) serves this implementation, and the
//! `cairn` command runs it on a store, so each operation is defined here once; the light client
//! (`cairn-client`) implements the same trait over HTTP.
//!
//! * `views`: the API's answers built from the engine's records;
//! * `query`: a list's parameters read as the store's filter;
//! * `operations`: the trait's implementation, and the reads the live streams share;
//! * `error`: [`OperationError`], with the API's code and status.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use cairn_api::Operations;
//! let client = cairn::Client::new(cairn::MemoryStore::new());
//! let page = Operations::list(&client, &cairn_api::ListQuery::default()).await?;
//! assert!(page.runs.is_empty());
//! let missing = Operations::get(&client, "no-such-run").await.unwrap_err();
//! assert_eq!((missing.status(), cairn_api::Coded::code(&missing)), (404, Some("run_not_found")));
//! # Ok::<(), cairn::api::OperationError>(())
//! # }).unwrap();
//! ```

mod error;
mod operations;
mod query;
pub mod views;

pub use error::OperationError;
pub use operations::{run_detail, run_id, run_page, run_signals, workers, workflows};
pub use query::{Selection, selection};
