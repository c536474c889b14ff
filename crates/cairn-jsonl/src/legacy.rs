//! Files written by earlier versions, read as this one keeps them.

use cairn_store::{Request, RunRecord, RunStatus};
use serde::Deserialize;

/// A row written before a waiting cancel or pause had a type of its own (the flags
/// `cancel_requested` and `pause_requested`, and a waiting cancel's reason in `error`): `run` gets
/// the request it stands for, as SQLite's migration 24 gives it.
pub(crate) fn upgrade_flags(run: &mut RunRecord, line: &[u8]) {
    #[derive(Deserialize)]
    struct Flags {
        #[serde(default)]
        cancel_requested: bool,
        #[serde(default)]
        pause_requested: bool,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Row {
        Row { run: Flags },
    }
    if run.pending.is_some() || run.status.is_terminal() || !line.windows(16).any(|w| w == b"_requested\":true") {
        return;
    }
    let Ok(Row::Row { run: flags }) = serde_json::from_slice(line) else { return };
    run.pending = if flags.cancel_requested {
        let waiting = matches!(run.status, RunStatus::Pending | RunStatus::Running | RunStatus::Suspended);
        let reason = waiting.then(|| run.error.take()).flatten();
        Some(Request::Cancel { reason: reason.unwrap_or_else(|| "cancelled".to_owned()) })
    } else if flags.pause_requested {
        Some(Request::Pause { reason: "paused by request".to_owned() })
    } else {
        None
    };
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use super::*;
    use cairn_store::{NewRun, RunId, Timestamp};
    use serde_json::value::RawValue;

    fn row(status: RunStatus, error: Option<&str>, flags: &str) -> (RunRecord, String) {
        let input = RawValue::from_string("1".into()).unwrap();
        let mut run = RunRecord::of(&NewRun::new(
            RunId::new("r"),
            cairn_store::WorkflowName::new("w").expect("a valid name"),
            1,
            input,
            Timestamp::from_millis(0),
        ));
        (run.status, run.error) = (status, error.map(str::to_owned));
        let line = serde_json::json!({ "row": { "run": run, "consumed": null } }).to_string();
        (run, line.replace("\"pending\":null", flags))
    }

    #[test]
    fn the_flags_of_an_earlier_version_become_its_request() {
        let (mut run, line) = row(RunStatus::Running, Some("wrong customer"), r#""cancel_requested":true"#);
        upgrade_flags(&mut run, line.as_bytes());
        assert_eq!((run.pending, run.error), (Some(Request::Cancel { reason: "wrong customer".into() }), None));
        let (mut run, line) = row(RunStatus::Paused, Some("drift"), r#""cancel_requested":true"#);
        upgrade_flags(&mut run, line.as_bytes());
        assert_eq!(run.pending, Some(Request::Cancel { reason: "cancelled".into() }));
        assert_eq!(run.error.as_deref(), Some("drift"), "a park's error stays");
        let (mut run, line) = row(RunStatus::Running, None, r#""cancel_requested":false,"pause_requested":true"#);
        upgrade_flags(&mut run, line.as_bytes());
        assert_eq!(run.pending, Some(Request::Pause { reason: "paused by request".into() }));
        let (mut run, line) = row(RunStatus::Cancelled, Some("op"), r#""cancel_requested":true"#);
        upgrade_flags(&mut run, line.as_bytes());
        assert_eq!((run.pending, run.error.as_deref()), (None, Some("op")), "an ended run keeps none");
    }
}
