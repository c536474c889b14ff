//! Checks for workflow code before it is deployed.
//!
//! [`replay`] runs a workflow body against a stored journal (exported from production with
//! `cairn runs show ID --json`, say) without executing any step, and reports the first
//! non-determinism: a user's CI can check that new code still replays the journals of runs in
//! flight before it is deployed.

use crate::clock::SystemClock;
use crate::ctx::Ctx;
use crate::engine::{Config, Local, run_setup};
use crate::error::{Interrupt, WorkflowError};
use crate::registry::Registry;
use crate::run::RunShared;
use crate::run_core::Mode;
use cairn_journal::{Event, JournalEntry, NonDeterminism, RunState, StepPath, Timestamp};
use cairn_store::MemoryStore;
use cairn_store::{RunId, WorkflowName};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;

/// What a [`replay`] found: the journal and the code agree up to where the body stopped.
#[derive(Debug)]
#[non_exhaustive]
pub struct ReplayReport {
    /// How many of the journal's steps the body asked for.
    pub replayed: usize,
    /// Where the body stopped.
    pub end: ReplayEnd,
}

/// Where a [`replay`] stopped, the journal and the code agreeing up to there.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayEnd {
    /// The body asked for a step the journal does not hold settled (a new step, or a sleep, wait
    /// or retry still under way): a live run would carry on from here.
    Continues {
        /// That step's path.
        at: StepPath,
    },
    /// The body returned, having asked for every step the journal holds: its output, or its
    /// error as text.
    Returned(Result<Box<RawValue>, String>),
}

/// Why a [`replay`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The code diverges from the journal: deployed, it would park the run with this error.
    #[error(transparent)]
    NonDeterminism(#[from] NonDeterminism),
    /// The journal could not be read or does not fold.
    #[error("[CAIRN-E0106] the journal cannot be replayed: {0}")]
    Journal(String),
    /// The workflow body panicked.
    #[error("[CAIRN-E0108] the workflow body panicked: {0}")]
    Panicked(String),
}

/// Replays `workflow` against `journal` without executing anything, and reports the first
/// non-determinism, as a worker running this code would meet it.
///
/// ```
/// use cairn::prelude::*;
/// use cairn::testing::{ReplayEnd, replay, journal_from_json};
///
/// async fn v1(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
///     ctx.step("a", || async { Ok::<_, StepError>(1u8) }).await
/// }
/// async fn v2(ctx: Ctx, (): ()) -> Result<u8, WorkflowError> {
///     ctx.step("b", || async { Ok::<_, StepError>(2u8) }).await
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let exported = r#"{"journal": [
///   {"seq": 1, "event": {"started": {"workflow": "w", "version": 1, "input": null}}},
///   {"seq": 2, "event": {"step_completed": {"path": "a", "ordinal": 0, "attempt": 1, "output": 1}}}
/// ]}"#;
/// let journal = journal_from_json(exported)?;
/// let report = replay(&journal, v1).await?;
/// assert!(matches!(report.end, ReplayEnd::Returned(Ok(_))));
/// assert!(replay(&journal, v2).await.is_err()); // `b` where the journal holds `a`
/// # Ok::<(), cairn::testing::ReplayError>(())
/// # }).unwrap();
/// ```
pub async fn replay<I, O, F, Fut>(journal: &[JournalEntry], workflow: F) -> Result<ReplayReport, ReplayError>
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(Ctx, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, WorkflowError>> + Send + 'static,
{
    let state = RunState::fold(journal).map_err(|e| ReplayError::Journal(e.to_string()))?;
    let input = state.input().ok_or_else(|| ReplayError::Journal("it has no `started` event".into()))?.to_owned();
    let mut registry = Registry::default();
    registry.insert(state.workflow(), state.version(), workflow);
    let body = registry
        .get(state.workflow(), state.version())
        .map(|registered| Arc::clone(&registered.body))
        .ok_or_else(|| ReplayError::Journal("the workflow could not be registered".into()))?;
    let local =
        Arc::new(Local::new(Arc::new(MemoryStore::new()), Arc::new(SystemClock), registry, Config::default(), false));
    let setup = run_setup(&local, &state);
    let named = (RunId::new("replay-check"), WorkflowName::read_back(state.workflow()));
    let shared = Arc::new(RunShared::new(named, Default::default(), 0, setup, state, Mode::ReplayCheck));
    let returned = crate::panic::caught(body(Ctx::new(Arc::clone(&shared)), input)).await;
    // Taken first: the core is not held while the arms ask it again.
    let interruption = shared.lock().interruption().cloned();
    match interruption {
        Some(Interrupt::NonDeterminism(error)) => return Err(error.into()),
        Some(Interrupt::ReplayChecked { path }) => {
            let (_, replayed) = shared.lock().unreached();
            return Ok(ReplayReport { replayed, end: ReplayEnd::Continues { at: path } });
        }
        _ => {}
    }
    let returned = returned.map_err(ReplayError::Panicked)?;
    let (unreached, replayed) = shared.lock().unreached();
    unreached?;
    Ok(ReplayReport { replayed, end: ReplayEnd::Returned(returned.map_err(|e| e.to_string())) })
}

/// Reads a journal exported as JSON: the output of `cairn runs show ID --json` (its `journal`
/// field) or an array of its entries, each `{"seq": n, "event": {...}}` with optional `at_ms`.
pub fn journal_from_json(text: &str) -> Result<Vec<JournalEntry>, ReplayError> {
    let bad = |what: String| ReplayError::Journal(what);
    let document: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let entries = match &document {
        serde_json::Value::Array(entries) => entries,
        serde_json::Value::Object(fields) => match fields.get("journal") {
            Some(serde_json::Value::Array(entries)) => entries,
            _ => return Err(bad("no `journal` array in the document".into())),
        },
        _ => return Err(bad("expected an array of journal entries or an object with `journal`".into())),
    };
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let seq = entry["seq"].as_u64().ok_or_else(|| bad(format!("entry {i} has no `seq`")))?;
            let at = Timestamp::from_millis(entry["at_ms"].as_i64().unwrap_or(0));
            let event = Event::from_json(&entry["event"].to_string())
                .map_err(|e| bad(format!("entry {i} (#{seq}) is not an event: {e}")))?;
            Ok(JournalEntry::new(seq, at, event))
        })
        .collect()
}
