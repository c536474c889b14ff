//! Waiting for a run's result: woken by the worker that executes it or by the store's reports,
//! else reading the store with backoff.

use super::handle::Client;
use crate::op_error::ReadError;
use cairn_store::{Notice, RunId, RunStatus};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::time::Duration;

/// Returns once the store reports that `id` ended, or that any run may have (missed or lagging
/// reports); never if the reports stop.
async fn ending_of(notices: &mut tokio::sync::broadcast::Receiver<Notice>, id: &RunId) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match notices.recv().await {
            Ok(Notice::Ended(ended)) if ended == *id => return,
            Ok(Notice::Ended(_) | Notice::Signalled(_)) => {}
            Ok(Notice::Missed) | Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

/// The result of a run that has ended (or is parked), or `None` while it goes on.
fn outcome<O: DeserializeOwned>(
    id: &RunId,
    status: RunStatus,
    output: Option<Box<RawValue>>,
    error: Option<String>,
) -> Option<Result<O, ReadError>> {
    match status {
        RunStatus::Completed => {
            let output = output.map_or_else(|| "null".to_owned(), |o| o.get().to_owned());
            Some(serde_json::from_str(&output).map_err(|e| ReadError::InvalidPayload(e.to_string())))
        }
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::Paused => {
            Some(Err(ReadError::RunDidNotComplete { run_id: id.clone(), status, message: error.unwrap_or_default() }))
        }
        // The chain goes on: its newest run has the result.
        RunStatus::Pending | RunStatus::Running | RunStatus::Suspended | RunStatus::Continued => None,
    }
}

impl Client {
    /// Waits until the run ends; its output decoded, or why it did not complete. A run parked
    /// (`paused`) also ends the wait, with an error. A run that continued as new
    /// ([`Ctx::continue_as_new`](crate::ctx::Ctx::continue_as_new)) has the result of the last run of
    /// its chain.
    pub async fn result<O: DeserializeOwned>(&self, id: &RunId) -> Result<O, ReadError> {
        let mut id = id.clone();
        loop {
            match self.result_of(&id).await? {
                Ok(result) => return Ok(result),
                Err(next) => id = next,
            }
        }
    }

    /// The result of `id`, or the run it continued as.
    async fn result_of<O: DeserializeOwned>(&self, id: &RunId) -> Result<Result<O, RunId>, ReadError> {
        const SAFETY_POLL: Duration = Duration::from_secs(5);
        let mut poll = Duration::from_millis(20);
        let mut first = true;
        // Told to look again (the run stopped here, or ended elsewhere): read the store.
        let mut told = false;
        // Whether this worker can execute the run (known after the first read).
        let mut executable_here = false;
        // A client without a worker hears of endings itself, if the store reports them (the
        // subscription comes before the first read, so no ending falls between the two).
        let mut endings = if self.local.is_none() { self.store.notices() } else { None };
        let reported = endings.is_some() || self.local.as_ref().is_some_and(|local| local.notices_reported());
        loop {
            let watch = self.local.as_ref().map(|local| local.watch(id));
            // A run this worker executes tells its watchers when it stops here, and one it is still
            // claiming is likely to be claimed here: no need to read the store meanwhile.
            let (mut here, mut read) = (false, true);
            if !first
                && !told
                && let Some(local) = &self.local
            {
                here = local.runs_here(id);
                read = !(here || (executable_here && local.claiming()));
            }
            if read {
                let run = self.get(id).await?;
                if let Some(next) = run.rare().continued_as.clone() {
                    return Ok(Err(next));
                }
                if let Some(result) = outcome(&run.id, run.status, run.output, run.error) {
                    return result.map(Ok);
                }
                executable_here = self.local.as_ref().is_some_and(|local| local.registers(&run.workflow, run.version));
                // Where endings are reported, wherever the run ends this waiter hears of it and
                // reading again is a safety net; elsewhere, reads back off.
                poll = match (reported, first) {
                    (true, _) => SAFETY_POLL,
                    (false, true) => poll,
                    (false, false) => (poll * 2).min(Duration::from_millis(500)),
                };
                first = false;
            }
            match watch {
                Some(watch) => {
                    let ended = if here {
                        watch.await.ok()
                    } else {
                        tokio::time::timeout(poll, watch).await.ok().and_then(Result::ok)
                    };
                    // A run that continued: the store names the next.
                    told = matches!(&ended, Some(None))
                        || matches!(&ended, Some(Some(ended)) if ended.status == RunStatus::Continued);
                    if let Some(Some(ended)) = ended
                        && let Some(result) = outcome(id, ended.status, ended.output, ended.error)
                    {
                        return result.map(Ok);
                    }
                }
                None => match endings.as_mut() {
                    Some(endings) => told = tokio::time::timeout(poll, ending_of(endings, id)).await.is_ok(),
                    None => tokio::time::sleep(poll).await,
                },
            }
        }
    }
}
