//! Every route of the API, defined once: the server registers and documents each at the path
//! named here (`cairn-http`'s `#[utoipa::path(path = routes::…)]`), and the light client fills
//! the same text in with [`path`]. A run's routes name it by id alone; the server finds its
//! workflow, so no caller reads a run to address it.
//!
//! ```
//! use cairn_api::routes;
//! assert_eq!(routes::path(routes::RUN_SIGNAL, &["order 7", "paid"]), "/v1/runs/order%207/signals/paid");
//! assert_eq!(routes::under_workflow(routes::RUN_PAUSE), "/v1/workflows/{name}/runs/{id}/pause");
//! ```

/// Start a run (`POST`), list a workflow's runs (`GET`).
pub const WORKFLOW_RUNS: &str = "/v1/workflows/{name}/runs";
/// Every workflow with its counts (`GET`).
pub const WORKFLOWS: &str = "/v1/workflows";
/// Runs across workflows (`GET`).
pub const RUNS: &str = "/v1/runs";
/// How many runs a filter selects (`GET`).
pub const RUN_COUNT: &str = "/v1/run-count";
/// Delete or list ended runs (`POST`).
pub const PRUNE: &str = "/v1/runs/prune";
/// Act on the runs a filter selects (`POST`).
pub const BULK: &str = "/v1/runs/bulk";
/// One run (`GET`); cancel it (`DELETE`).
pub const RUN: &str = "/v1/runs/{id}";
/// A run's steps and journal (`GET`).
pub const RUN_STEPS: &str = "/v1/runs/{id}/steps";
/// A run's signals (`GET`).
pub const RUN_SIGNALS: &str = "/v1/runs/{id}/signals";
/// Deliver a signal (`POST`).
pub const RUN_SIGNAL: &str = "/v1/runs/{id}/signals/{event}";
/// Pause a run (`POST`).
pub const RUN_PAUSE: &str = "/v1/runs/{id}/pause";
/// Resume a run (`POST`).
pub const RUN_RESUME: &str = "/v1/runs/{id}/resume";
/// Restart a run from a step (`POST`).
pub const RUN_RESTART: &str = "/v1/runs/{id}/restart";
/// A run once it has ended or paused (`GET`).
pub const RUN_RESULT: &str = "/v1/runs/{id}/result";
/// Publish an event (`POST`).
pub const EVENT: &str = "/v1/events/{topic}";
/// Published events (`GET`).
pub const EVENTS: &str = "/v1/events";
/// The live workers (`GET`).
pub const WORKERS: &str = "/v1/workers";
/// Every schedule (`GET`).
pub const SCHEDULES: &str = "/v1/schedules";
/// One schedule (`GET`, `PUT`, `DELETE`).
pub const SCHEDULE: &str = "/v1/schedules/{name}";
/// Pause a schedule (`POST`).
pub const SCHEDULE_PAUSE: &str = "/v1/schedules/{name}/pause";
/// Resume a schedule (`POST`).
pub const SCHEDULE_RESUME: &str = "/v1/schedules/{name}/resume";
/// Start a schedule's run now (`POST`).
pub const SCHEDULE_TRIGGER: &str = "/v1/schedules/{name}/trigger";

/// Where a run's route by id (`/v1/runs/{id}…`) is also served under its workflow, as the API
/// first had it (`/v1/workflows/{name}/runs/{id}…`; a run of another workflow is not found
/// there). `route` is returned as it is when it does not name a run by id.
pub fn under_workflow(route: &str) -> String {
    match route.strip_prefix("/v1/runs/{id}") {
        Some(rest) => format!("/v1/workflows/{{name}}/runs/{{id}}{rest}"),
        None => route.to_owned(),
    }
}

/// `route` with each `{…}` replaced, in order, by the next of `values`, percent-encoded
/// ([`encode`]). A placeholder without a value is left empty.
pub fn path(route: &str, values: &[&str]) -> String {
    let mut out = String::with_capacity(route.len() + 32);
    let mut values = values.iter();
    let mut rest = route;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |at| open + at + 1);
        if let Some(value) = values.next() {
            out.push_str(&encode(value));
        }
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// `text` as one segment of a path or a query value: every byte but ASCII letters, digits and
/// `-._~` percent-encoded.
///
/// ```
/// assert_eq!(cairn_api::routes::encode("a b/c?d%é"), "a%20b%2Fc%3Fd%25%C3%A9");
/// ```
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fill_each_placeholder_in_order() {
        assert_eq!(path(RUN_RESTART, &["r/1"]), "/v1/runs/r%2F1/restart");
        assert_eq!(path(SCHEDULE_TRIGGER, &["nightly"]), "/v1/schedules/nightly/trigger");
        assert_eq!(path(RUNS, &[]), "/v1/runs");
        assert_eq!(path(&under_workflow(RUN), &["hello", "r-1"]), "/v1/workflows/hello/runs/r-1");
        assert_eq!(under_workflow(SCHEDULES), SCHEDULES);
    }
}
