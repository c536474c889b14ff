//! [`Operations`] on the embedded [`Client`]: each operation of the API, in process, answering
//! the API's views. The HTTP API serves exactly this; the `cairn` command runs it on a store.

use super::error::OperationError;
use super::query::{Selection, duration, page_limit, selection};
use super::views;
use crate::client::Client;
use crate::clock::wall_now;
use crate::error::ClientError;
use crate::workers::LiveWorkers;
use cairn_api::views::{
    BulkResult, BulkRun, EventPage, Outcome, Pruned, PublishedEvent, Restarted, RunCount, RunDetail, RunPage,
    ScheduleView, Schedules, SignalSent, Signals, StartedRun, Steps, Workers, Workflows,
};
use cairn_api::{
    BulkAction, BulkBody, BulkFilter, CancelOptions, EventQuery, ListQuery, Operations, PauseOptions, PruneBody,
    PublishBody, RestartBody, ScheduleBody, StartOptions, WorkersQuery,
};
use cairn_store::{EventCursor, EventName, RunFilter, RunId, RunRecord, RunStatus};
use futures::StreamExt as _;
use serde_json::value::RawValue;
use std::time::Duration;

/// The most runs a count counts unless asked for fewer.
const COUNT_AT_MOST: u64 = 10_000;

/// The most runs one bulk action acts on at once.
const BULK_AT_ONCE: usize = 16;

/// The longest a result waits for its run to end.
const RESULT_WAIT_AT_MOST: Duration = Duration::from_secs(300);

type Answer<T> = Result<T, OperationError>;

/// A run id as given: `invalid_run_id` when it breaks the id's rule.
pub fn run_id(id: &str) -> Answer<RunId> {
    RunId::validate(id).map_err(|error| OperationError::invalid("invalid_run_id", error.to_string()))
}

/// One page of the runs `selection` selects (only those no live worker in `live` serves, when
/// it asks for stranded runs); a page shows no payload, so none is read.
pub async fn run_page(client: &Client, selection: &Selection, live: &LiveWorkers) -> Answer<RunPage> {
    let filter = RunFilter { without_payloads: true, ..stranded(selection, live) };
    let page = client.list(&filter).await?;
    let runs = page.runs.iter().map(|run| views::listed(run, live)).collect();
    Ok(RunPage { runs, next_cursor: page.next_cursor.map(|cursor| cursor.encode()) })
}

/// How many runs `selection` selects (as [`run_page`]), up to `at_most`.
async fn run_count(client: &Client, selection: &Selection, live: &LiveWorkers, at_most: u64) -> Answer<u64> {
    Ok(client.count(&stranded(selection, live), at_most).await?)
}

/// The filter of `selection`, narrowed to the runs no live worker serves when it asks for
/// stranded ones.
fn stranded(selection: &Selection, live: &LiveWorkers) -> RunFilter {
    match selection.stranded {
        true => RunFilter { stranded: Some(live.served()), ..selection.filter.clone() },
        false => selection.filter.clone(),
    }
}

/// `run` in full: stranded or not, the runs that restart it, its children (three reads at once).
pub async fn run_detail(client: &Client, run: &RunRecord) -> Answer<RunDetail> {
    let (restarts, children, live) =
        tokio::try_join!(client.restarts(&run.id), client.children(&run.id), client.live_workers())?;
    Ok(views::detail(run, &live, &restarts, &children))
}

/// Every workflow with runs or served by a worker: its counts by status and its versions.
pub async fn workflows(client: &Client) -> Answer<Workflows> {
    let (counts, served) = tokio::try_join!(client.workflow_counts(), client.served_workflows())?;
    Ok(views::workflows(&counts, &served))
}

/// The live workers (`live`) and the stranded versions, as of now.
pub async fn workers(client: &Client, live: &LiveWorkers) -> Answer<Workers> {
    let stranded = client.stranded_versions().await?;
    Ok(views::workers(live, &stranded, wall_now()))
}

/// Run `id`'s signals (none for a run that does not exist: callers check it first).
pub async fn run_signals(client: &Client, id: &RunId) -> Answer<Signals> {
    let signals = client.signals(id).await?;
    Ok(Signals { run: id.to_string(), signals: signals.iter().map(views::signal).collect() })
}

impl Operations for Client {
    type Error = OperationError;

    async fn start(&self, workflow: &str, options: &StartOptions) -> Answer<StartedRun> {
        if let Some(id) = &options.id {
            run_id(id)?;
        }
        let handle = self.start_with(workflow, options.clone()).await?;
        Ok(views::started(&handle))
    }

    async fn get(&self, id: &str) -> Answer<RunDetail> {
        let run = Client::get(self, &run_id(id)?).await?;
        run_detail(self, &run).await
    }

    async fn list(&self, query: &ListQuery) -> Answer<RunPage> {
        let selection = selection(query)?;
        run_page(self, &selection, &self.live_workers().await?).await
    }

    async fn count(&self, query: &ListQuery, at_most: Option<u64>) -> Answer<RunCount> {
        let at_most = match at_most {
            None => COUNT_AT_MOST,
            Some(n @ 1..=100_000) => n,
            Some(n) => {
                return Err(OperationError::invalid("invalid_query", format!("at_most {n} is not from 1 to 100000")));
            }
        };
        let selection = selection(query)?;
        let count = run_count(self, &selection, &self.live_workers().await?, at_most).await?;
        Ok(RunCount { count, capped: count >= at_most })
    }

    async fn bulk(&self, bulk: &BulkBody) -> Answer<BulkResult> {
        let BulkFilter { workflow, status, id_prefix, since, until, error, stranded, input } = bulk.filter.clone();
        let limit = Some(bulk.limit.unwrap_or(100));
        let query =
            ListQuery { workflow, status, since, until, stranded, id_prefix, error, limit, ..ListQuery::default() };
        let mut selection = selection(&query)?;
        selection.filter.input_contains = input.map(serde_json::Value::Object);
        let page = run_page(self, &selection, &self.live_workers().await?).await?;
        let runs: Vec<BulkRun> = futures::stream::iter(page.runs)
            .map(|listed| async move {
                let id = &listed.run.id;
                let outcome = match bulk.action {
                    BulkAction::Cancel => Operations::cancel(self, id, &CancelOptions::default()).await,
                    BulkAction::Pause => Operations::pause(self, id, &PauseOptions::default()).await,
                    BulkAction::Resume => Operations::resume(self, id).await,
                };
                let (outcome, error) = match outcome {
                    Ok(outcome) => (Some(outcome.outcome), None),
                    Err(error) => (None, Some(error.detail())),
                };
                BulkRun { run: listed.run.id, workflow: listed.run.workflow, outcome, error }
            })
            .buffered(BULK_AT_ONCE)
            .collect()
            .await;
        let refused = runs.iter().filter(|run| run.error.is_some()).count();
        let more = page.next_cursor.is_some();
        Ok(BulkResult { action: bulk.action, done: runs.len() - refused, refused, runs, more })
    }

    async fn steps(&self, id: &str) -> Answer<Steps> {
        let id = run_id(id)?;
        Client::get(self, &id).await?;
        Ok(views::steps(&id, &self.journal(&id).await?))
    }

    async fn signals(&self, id: &str) -> Answer<Signals> {
        let id = run_id(id)?;
        Client::get(self, &id).await?;
        run_signals(self, &id).await
    }

    async fn signal(&self, id: &str, event: &str, payload: &RawValue) -> Answer<SignalSent> {
        EventName::check(event).map_err(ClientError::InvalidName)?;
        let id = run_id(id)?;
        let signal = self.signal_raw(&id, event, payload.to_owned()).await?;
        Ok(SignalSent { run: id.to_string(), signal: signal.0, event: event.to_owned() })
    }

    async fn cancel(&self, id: &str, options: &CancelOptions) -> Answer<Outcome> {
        let id = run_id(id)?;
        let outcome = Client::cancel(self, &id).reason(options.reason.clone()).await?;
        Ok(views::cancelled(&id, outcome))
    }

    async fn pause(&self, id: &str, options: &PauseOptions) -> Answer<Outcome> {
        let id = run_id(id)?;
        Ok(views::paused(&id, Client::pause(self, &id).reason(options.reason.clone()).await?))
    }

    async fn resume(&self, id: &str) -> Answer<Outcome> {
        let id = run_id(id)?;
        Client::resume(self, &id).await?;
        Ok(views::resumed(&id))
    }

    async fn restart(&self, id: &str, restart: &RestartBody) -> Answer<Restarted> {
        let id = run_id(id)?;
        let restarted = Client::restart(self, &id, &restart.from_step).reason(restart.reason.clone()).await?;
        Ok(Restarted {
            run: restarted.id().to_string(),
            restarted_from: id.to_string(),
            from_step: restart.from_step.clone(),
        })
    }

    async fn result(&self, id: &str, wait: Duration) -> Answer<RunDetail> {
        let id = run_id(id)?;
        let run = Client::get(self, &id).await?;
        if !run.status.is_terminal() && run.status != RunStatus::Paused {
            // Ended or not, the answer is the run as it is now.
            let ended = Client::result::<serde::de::IgnoredAny>(self, &id);
            let _ = tokio::time::timeout(wait.min(RESULT_WAIT_AT_MOST), ended).await;
        }
        let run = Client::get(self, &id).await?;
        run_detail(self, &run).await
    }

    async fn events(&self, query: &EventQuery) -> Answer<EventPage> {
        let cursor = (query.cursor.as_deref())
            .map(|text| {
                EventCursor::decode(text).map_err(|error| OperationError::invalid("invalid_cursor", error.to_string()))
            })
            .transpose()?;
        let query = cairn_store::EventQuery { topic: query.topic.clone(), cursor, limit: page_limit(query.limit)? };
        Ok(views::event_page(&Client::events(self, &query).await?))
    }

    async fn publish(&self, topic: &str, event: &PublishBody) -> Answer<PublishedEvent> {
        let payload = event.payload.as_deref().unwrap_or(RawValue::NULL);
        let mut publish = Client::publish(self, topic, payload);
        if let Some(id) = &event.id {
            publish = publish.id(id.clone());
        }
        Ok(views::published(topic, &publish.await?))
    }

    async fn prune(&self, prune: &PruneBody) -> Answer<Pruned> {
        Operations::prune_reporting(self, prune, &mut |_| {}).await
    }

    async fn prune_reporting(&self, prune: &PruneBody, report: &mut (dyn FnMut(usize) + Send)) -> Answer<Pruned> {
        let older_than =
            prune.older_than.as_deref().map(|text| duration("invalid_duration", "olderThan", text)).transpose()?;
        let runs = Client::prune_reporting(self, older_than, prune.dry_run, report).await?;
        Ok(views::pruned(&runs, prune.dry_run))
    }

    async fn workflows(&self) -> Answer<Workflows> {
        workflows(self).await
    }

    async fn workers(&self, query: WorkersQuery) -> Answer<Workers> {
        // One read of the recorded workers: every one of them with `all`, the live ones else.
        let (recorded, now) = (self.store().workers().await.map_err(ClientError::from)?, wall_now());
        let all: Option<Vec<_>> = query.all.then(|| recorded.iter().map(|w| views::worker(w, now)).collect());
        let mut answer = workers(self, &LiveWorkers::at(recorded, now)).await?;
        if let Some(all) = all {
            answer.workers = all;
        }
        Ok(answer)
    }

    async fn schedules(&self) -> Answer<Schedules> {
        let schedules = Client::schedules(self).await?;
        Ok(Schedules { schedules: schedules.iter().map(views::schedule_view).collect() })
    }

    async fn schedule(&self, name: &str) -> Answer<ScheduleView> {
        Ok(views::schedule_view(&Client::schedule(self, name).await?))
    }

    async fn put_schedule(&self, name: &str, schedule: &ScheduleBody) -> Answer<ScheduleView> {
        let schedule =
            views::schedule(schedule, name).map_err(|message| OperationError::invalid("invalid_schedule", message))?;
        Ok(views::schedule_view(&Client::put_schedule(self, &schedule).await?))
    }

    async fn delete_schedule(&self, name: &str) -> Answer<()> {
        Ok(Client::delete_schedule(self, name).await?)
    }

    async fn pause_schedule(&self, name: &str) -> Answer<ScheduleView> {
        Ok(views::schedule_view(&Client::pause_schedule(self, name).await?))
    }

    async fn resume_schedule(&self, name: &str) -> Answer<ScheduleView> {
        Ok(views::schedule_view(&Client::resume_schedule(self, name).await?))
    }

    async fn trigger_schedule(&self, name: &str) -> Answer<StartedRun> {
        Ok(views::started(&Client::trigger_schedule(self, name).await?))
    }
}
