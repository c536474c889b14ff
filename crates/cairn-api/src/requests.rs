//! What the API's routes take: the bodies of starts, publishes, prunes, restarts and schedules.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// How to start a run: its input and every option of a start. The one form of a start's options
/// everywhere: the body of `POST /v1/workflows/{name}/runs`, what `cairn runs start` builds from
/// its flags, what the light client sends, and what `Client::start_with` takes from Rust.
///
/// Durations are text as people write them (`2s`, `500ms`, `5m`, `1h 30m`), checked where the
/// start is made: a start whose duration does not parse is refused and stores nothing.
///
/// ```
/// let options: cairn_api::StartOptions =
///     serde_json::from_str(r#"{"input": {"to": "ada"}, "fairnessKey": "acme", "timeout": "1h"}"#).unwrap();
/// assert_eq!(options.fairness_key.as_deref(), Some("acme"));
/// assert!(serde_json::from_str::<cairn_api::StartOptions>(r#"{"colour": "red"}"#).is_err());
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema),
    schema(as = StartBody, description = "What `POST /v1/workflows/{name}/runs` takes."))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StartOptions {
    /// The run's input (default `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub input: Option<Box<RawValue>>,
    /// The run's id (default: a new UUIDv7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Starting again with the same key returns the existing run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The workflow version (default: the newest the server's worker registered).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole")]
    pub version: Option<u32>,
    /// Days to keep the run once it has ended (default: the workflow's, or 30).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole")]
    pub retention_days: Option<u32>,
    /// Ready runs of a higher priority are claimed first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole")]
    pub priority: Option<i32>,
    /// Within a priority, ready runs are served fairly between keys (a tenant, a customer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness_key: Option<String>,
    /// Debounce the start: starts with the same key collapse into one run with the latest
    /// input (the answer is then `200` with that run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce: Option<DebounceOptions>,
    /// A deadline for the whole run, this long after the start (`30m`, `2h`; default: none). At
    /// the deadline the run ends `failed` with a timeout error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Start it even if no worker has ever served this workflow (or version) on the store: it
    /// waits, pending, for one that will. Without it such a start is `404 unknown_workflow`
    /// (or `unknown_version`), since the run would wait for nobody.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unknown: Option<bool>,
}

/// A start's `debounce`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = DebounceBody))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DebounceOptions {
    /// Starts of the workflow with equal keys collapse (1 to 200 bytes).
    pub key: String,
    /// How long the key must be quiet before the run begins (`2s`, `500ms`, `5m`).
    pub quiet: String,
    /// The latest the run begins after the window's first start (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<String>,
}

/// What `POST /v1/events/{topic}` takes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PublishBody {
    /// The event's id (default: a new UUIDv7). Publishing an id again starts no run it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The event's payload, each started run's input (default `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub payload: Option<Box<RawValue>>,
}

/// What `POST /v1/runs/prune` takes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PruneBody {
    /// Also delete every ended run that ended longer ago than this (`90d`, `12h`), whatever its
    /// retention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_than: Option<String>,
    /// List what would be deleted, deleting nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// What `POST /v1/runs/bulk` does to each run it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// Cancel it (as `DELETE …/runs/{id}`).
    Cancel,
    /// Pause it (as `POST …/pause`).
    Pause,
    /// Resume it (as `POST …/resume`).
    Resume,
}

/// Which runs `POST /v1/runs/bulk` acts on: the filters of `GET /v1/runs`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BulkFilter {
    /// Only this workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Only this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Only runs whose id starts with this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_prefix: Option<String>,
    /// Created at or after (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Created before (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Only runs whose error holds this text, ignoring the case of ASCII letters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Only stranded runs.
    #[serde(default)]
    pub stranded: bool,
    /// Only runs whose input contains this JSON object (`{"customer": 42}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What `POST /v1/runs/bulk` takes: an action, the runs it applies to, and how many at most.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BulkBody {
    /// What to do to each run.
    pub action: BulkAction,
    /// Which runs (every run when empty).
    #[serde(default, deserialize_with = "object_only")]
    pub filter: BulkFilter,
    /// At most this many runs, the newest the filter selects: 1 to 1,000 (default 100). The
    /// answer says whether more matched.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "whole")]
    pub limit: Option<usize>,
}

/// What `POST …/restart` takes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RestartBody {
    /// The step (or scope) to run again from, as the journal names it.
    pub from_step: String,
    /// Why, journaled in the new run's `started` event: 1 to 1,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What `PUT /v1/schedules/{name}` takes (and `cairn schedules put`): cron expressions or an
/// interval, not both.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScheduleBody {
    /// The workflow each firing starts.
    pub workflow: String,
    /// Cron expressions (5 fields, or 6 with seconds first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cron: Vec<String>,
    /// The IANA time zone of the cron expressions (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// An interval instead (`30s`, `5m`, `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// Each run's input (default `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub input: Option<Value>,
    /// `skip`, `once` (the default) or `all:N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    /// Declare it even if no worker has ever served its workflow on the store (default false:
    /// `404 unknown_workflow`, since its firings would wait for nobody).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unknown: Option<bool>,
}

/// An optional integer field that also takes a number with no fraction (`3.0`): JSON has one
/// number type, and JSON Schema counts `3.0` as an integer, so a client may send either.
/// A struct read from a JSON object only (serde would also read one from an array of its
/// fields, which the document does not allow).
fn object_only<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error;
    match Value::deserialize(deserializer)? {
        value @ Value::Object(_) => serde_json::from_value(value).map_err(D::Error::custom),
        other => Err(D::Error::custom(format!("expected an object, not {other}"))),
    }
}

fn whole<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<i64>,
{
    use serde::de::Error;
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else { return Ok(None) };
    let whole = match (number.as_i64(), number.as_f64()) {
        (Some(n), _) => Some(n),
        (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(f as i64),
        _ => None,
    };
    let value = whole.and_then(|n| T::try_from(n).ok());
    value.map(Some).ok_or_else(|| D::Error::custom(format!("{number} is not an integer in range")))
}

#[cfg(test)]
mod tests {
    use super::StartOptions;

    #[test]
    fn integers_may_be_written_with_a_zero_fraction() {
        let options: StartOptions = serde_json::from_str(r#"{"version": 2.0, "priority": -3}"#).unwrap();
        assert_eq!((options.version, options.priority), (Some(2), Some(-3)));
        for refused in
            [r#"{"version": 2.5}"#, r#"{"version": -1}"#, r#"{"priority": 3000000000}"#, r#"{"version": "2"}"#]
        {
            assert!(serde_json::from_str::<StartOptions>(refused).is_err(), "{refused}");
        }
    }
}
