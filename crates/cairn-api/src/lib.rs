//! The vocabulary of Cairn's HTTP API: what its routes take ([`requests`]) and answer
//! ([`views`], [`ErrorBody`]), as plain serde types; where each route is ([`routes`]); and the
//! operations both clients implement ([`Operations`]).
//!
//! These types are the contract between every program that speaks to Cairn over HTTP: the
//! server (`cairn-http` builds them from the engine's records), the light client
//! (`cairn-client` decodes them), the `cairn` command (its `--json` prints them) and the
//! dashboard. They depend on nothing but serde, so a program that only triggers and reads runs
//! compiles no engine and no store.
//!
//! Times are RFC 3339 in UTC with milliseconds; inputs, outputs and payloads are the JSON they
//! were given as. Field names are snake_case in answers and camelCase in request bodies, as the
//! API has always had them.
//!
//! ```
//! use cairn_api::{DebounceOptions, StartOptions};
//! let options = StartOptions {
//!     idempotency_key: Some("order-42".into()),
//!     priority: Some(10),
//!     debounce: None,
//!     ..StartOptions::default()
//! };
//! let body = serde_json::to_value(&options).unwrap();
//! assert_eq!(body, serde_json::json!({"idempotencyKey": "order-42", "priority": 10}));
//! let back: StartOptions = serde_json::from_value(body).unwrap();
//! assert_eq!(back.priority, Some(10));
//! # let _ = DebounceOptions { key: "k".into(), quiet: "2s".into(), max_wait: None };
//! ```

mod error;
pub mod operations;
pub mod requests;
pub mod routes;
pub mod values;
pub mod views;

pub use operations::{CancelOptions, Coded, EventQuery, ListQuery, Operations, PauseOptions, WorkersQuery};

pub use error::{ErrorBody, ErrorDetail};
pub use requests::{
    BulkAction, BulkBody, BulkFilter, DebounceOptions, PruneBody, PublishBody, RestartBody, ScheduleBody, StartOptions,
};
