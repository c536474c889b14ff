//! Where a command's runs are: a store the command opens itself, or a running `cairn serve`
//! (`--url`). Both answer with the HTTP API's views, so every command prints the same text and
//! the same `--json` either way.

use crate::store_args::{Access, StoreArgs};
use anyhow::Result;
use cairn::{Client, PageCursor, RunFilter, RunId, RunStatus, StartOptions};
use cairn_client::Client as Remote;
use cairn_http::reads;
use cairn_http::views::{
    self, EntryView, Outcome, Pruned, PublishedEvent, RunDetail, RunPage, SignalSent, SignalView, StartedRun, Steps,
    Workflows,
};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::Duration;

/// A store (`--db`, `--database-url`, `--data-dir`) or a server (`--url`).
#[derive(Args, Clone)]
pub(crate) struct Target {
    #[command(flatten)]
    store: StoreArgs,
    /// Talk to a running `cairn serve` at this URL (e.g. http://127.0.0.1:7700) instead of
    /// opening a store.
    #[arg(long, env = "CAIRN_URL", global = true)]
    url: Option<String>,
    /// The bearer token that server wants (with --url).
    #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
}

impl Target {
    /// The server, or the store opened for `access`.
    pub(crate) async fn connect(&self, access: Access) -> Result<Backend> {
        match &self.url {
            Some(url) => Ok(Backend::Http(Remote::new(url, self.token.clone())?)),
            None => Ok(Backend::Store(Client::from_shared(self.store.open(access).await?))),
        }
    }
}

/// Runs in a store, or behind a server's API.
pub(crate) enum Backend {
    Store(Client),
    Http(Remote),
}

/// `cairn runs show --json`: a run, its journal and its signals.
#[derive(Serialize, Deserialize)]
pub(crate) struct Shown {
    pub(crate) run: RunDetail,
    pub(crate) journal: Vec<EntryView>,
    pub(crate) signals: Vec<SignalView>,
    /// Its durable values, each as last set.
    pub(crate) vars: std::collections::BTreeMap<String, serde_json::Value>,
}

/// One page of a `runs list`.
pub(crate) struct ListQuery {
    pub(crate) workflow: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) stranded: bool,
    /// `(FIELD, VALUE)` filters on the input ([`input_pairs`]).
    pub(crate) input: Vec<(String, String)>,
    /// Only runs whose id starts with this text.
    pub(crate) id_prefix: Option<String>,
    /// Only runs whose error holds this text.
    pub(crate) error: Option<String>,
    pub(crate) cursor: Option<String>,
    /// 1 to 1,000.
    pub(crate) limit: usize,
}

/// `--input FIELD=VALUE` arguments as their fields and values.
pub(crate) fn input_pairs(given: &[String]) -> Result<Vec<(String, String)>> {
    given
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((field, value)) => Ok((field.to_owned(), value.to_owned())),
            None => anyhow::bail!("--input {pair:?} is not FIELD=VALUE"),
        })
        .collect()
}

/// A refusal or failure of the server, as the command reports it.
pub(crate) fn remote_error(error: cairn_client::Error) -> anyhow::Error {
    match error {
        cairn_client::Error::Api { status: 401, message, .. } => {
            anyhow::anyhow!("{message} (set CAIRN_TOKEN or --token)")
        }
        other => other.into(),
    }
}

impl Backend {
    pub(crate) async fn list(&self, query: &ListQuery) -> Result<RunPage> {
        match self {
            Backend::Store(client) => {
                let status =
                    query.status.as_deref().map(RunStatus::parse_given).transpose().map_err(anyhow::Error::msg)?;
                let live = client.live_workers().await?;
                let input_contains = match query.input.is_empty() {
                    true => None,
                    false => {
                        // The API's parameter names: `input.FIELD`.
                        let named: Vec<(String, &str)> = query
                            .input
                            .iter()
                            .map(|(field, value)| (format!("input.{field}"), value.as_str()))
                            .collect();
                        let named = named.iter().map(|(name, value)| (name.as_str(), *value));
                        Some(views::input_filter(named).map_err(anyhow::Error::msg)?)
                    }
                };
                let filter = RunFilter {
                    input_contains,
                    workflow: query.workflow.clone(),
                    status,
                    cursor: query.cursor.as_deref().map(PageCursor::decode).transpose()?,
                    limit: Some(query.limit),
                    id_prefix: query.id_prefix.clone(),
                    error_contains: query.error.clone(),
                    ..RunFilter::default()
                };
                Ok(reads::run_page(client, &filter, query.stranded, &live).await?)
            }
            Backend::Http(remote) => {
                let query = cairn_client::ListQuery {
                    workflow: query.workflow.clone(),
                    status: query.status.clone(),
                    stranded: query.stranded,
                    input: query.input.clone(),
                    cursor: query.cursor.clone(),
                    limit: Some(query.limit),
                    id_prefix: query.id_prefix.clone(),
                    error: query.error.clone(),
                    ..cairn_client::ListQuery::default()
                };
                remote.list(&query).await.map_err(remote_error)
            }
        }
    }

    pub(crate) async fn show(&self, id: &str) -> Result<Shown> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                let journal = client.journal(&id).await?;
                Ok(Shown {
                    run: reads::run_detail(client, &client.get(&id).await?).await?,
                    journal: journal.iter().map(views::entry).collect(),
                    signals: reads::run_signals(client, &id).await?.signals,
                    vars: cairn::journal::vars(&journal),
                })
            }
            Backend::Http(remote) => {
                let run = remote.get(id).await.map_err(remote_error)?;
                let workflow = &run.listed.run.workflow;
                let steps = remote.steps_of(workflow, id).await.map_err(remote_error)?;
                let signals = remote.signals_of(workflow, id).await.map_err(remote_error)?;
                Ok(Shown { run, journal: steps.journal, signals: signals.signals, vars: steps.vars })
            }
        }
    }

    pub(crate) async fn steps(&self, id: &str) -> Result<Steps> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                client.get(&id).await?;
                Ok(views::steps(&id, &client.journal(&id).await?))
            }
            Backend::Http(remote) => remote.steps(id).await.map_err(remote_error),
        }
    }

    pub(crate) async fn signal(&self, id: &str, event: &str, payload: Box<RawValue>) -> Result<SignalSent> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                let signal = client.signal(&id, event, &payload).await?;
                Ok(SignalSent { run: id.to_string(), signal: signal.0, event: event.to_owned() })
            }
            Backend::Http(remote) => remote.signal(id, event, &payload).await.map_err(remote_error),
        }
    }

    /// Starts a run of `workflow` as `options` (built from the flags) describe it.
    pub(crate) async fn start(&self, workflow: &str, options: StartOptions) -> Result<StartedRun> {
        match self {
            Backend::Store(client) => Ok(views::started(&client.start_with(workflow, options).await?)),
            Backend::Http(remote) => remote.start(workflow, &options).await.map_err(remote_error),
        }
    }

    /// Cancels run `id`, for `reason` when one is given.
    pub(crate) async fn cancel(&self, id: &str, reason: Option<&str>) -> Result<Outcome> {
        match (self, reason) {
            (Backend::Store(client), reason) => {
                let id = RunId::new(id);
                let outcome = match reason {
                    Some(reason) => client.cancel_because(&id, reason).await?,
                    None => client.cancel(&id).await?,
                };
                Ok(views::cancelled(&id, outcome))
            }
            (Backend::Http(remote), Some(reason)) => remote.cancel_because(id, reason).await.map_err(remote_error),
            (Backend::Http(remote), None) => remote.cancel(id).await.map_err(remote_error),
        }
    }

    pub(crate) async fn pause(&self, id: &str) -> Result<Outcome> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                Ok(views::paused(&id, client.pause(&id).await?))
            }
            Backend::Http(remote) => remote.pause(id).await.map_err(remote_error),
        }
    }

    pub(crate) async fn resume(&self, id: &str) -> Result<Outcome> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                client.resume(&id).await?;
                Ok(views::resumed(&id))
            }
            Backend::Http(remote) => remote.resume(id).await.map_err(remote_error),
        }
    }

    /// Restarts run `id` from `from_step`, for `reason` when one is given.
    pub(crate) async fn restart(&self, id: &str, from_step: &str, reason: Option<&str>) -> Result<views::Restarted> {
        match (self, reason) {
            (Backend::Store(client), reason) => {
                let restarted = match reason {
                    Some(reason) => client.restart_because(&RunId::new(id), from_step, reason).await?,
                    None => client.restart(&RunId::new(id), from_step).await?,
                };
                Ok(views::Restarted {
                    run: restarted.id().to_string(),
                    restarted_from: id.to_owned(),
                    from_step: from_step.to_owned(),
                })
            }
            (Backend::Http(remote), Some(reason)) => {
                remote.restart_because(id, from_step, reason).await.map_err(remote_error)
            }
            (Backend::Http(remote), None) => remote.restart(id, from_step).await.map_err(remote_error),
        }
    }

    /// Prunes ended runs; `older_than` as given (`90d`), checked here in both cases.
    pub(crate) async fn prune(&self, older_than: Option<String>, dry_run: bool) -> Result<Pruned> {
        let parsed: Option<Duration> = older_than
            .as_deref()
            .map(|text| {
                humantime::parse_duration(text)
                    .map_err(|_| anyhow::anyhow!("--older-than {text:?} is not a duration (try `30d` or `12h`)"))
            })
            .transpose()?;
        match self {
            Backend::Store(client) => {
                // Reported from the second batch on: a prune of one batch says nothing until done.
                let mut progress = crate::progress::Progress::new("pruning", "ended runs deleted", None);
                let (mut batches, mut deleted) = (0, 0);
                let runs = client
                    .prune_reporting(parsed, dry_run, &mut |batch| {
                        (batches, deleted) = (batches + 1, deleted + batch as u64);
                        if batches > 1 {
                            progress.set(deleted);
                        }
                    })
                    .await?;
                if batches > 1 {
                    progress.finish();
                }
                Ok(views::pruned(&runs, dry_run))
            }
            Backend::Http(remote) => {
                remote.prune(&cairn_client::PruneBody { older_than, dry_run }).await.map_err(remote_error)
            }
        }
    }

    /// The live workers, or (`all`, a store only) every recorded one.
    pub(crate) async fn workers(&self, all: bool) -> Result<Vec<views::WorkerView>> {
        match self {
            Backend::Store(client) => {
                let now = cairn::Timestamp::from_system_time(std::time::SystemTime::now());
                let workers = client.store().workers().await?;
                Ok(workers.iter().filter(|w| all || w.is_live_at(now)).map(|w| views::worker(w, now)).collect())
            }
            Backend::Http(_) if all => {
                anyhow::bail!("--all lists workers that are no longer live, which only the store records: drop --url")
            }
            Backend::Http(remote) => Ok(remote.workers().await.map_err(remote_error)?.workers),
        }
    }

    pub(crate) async fn workflows(&self) -> Result<Workflows> {
        match self {
            Backend::Store(client) => Ok(reads::workflows(client).await?),
            Backend::Http(remote) => remote.workflows().await.map_err(remote_error),
        }
    }

    /// A page of published events, newest first.
    pub(crate) async fn events(
        &self,
        topic: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<views::EventPage> {
        match self {
            Backend::Store(client) => {
                let cursor = cursor.map(cairn::store::EventCursor::decode).transpose()?;
                let query = cairn::store::EventQuery { topic: topic.map(str::to_owned), cursor, limit };
                Ok(views::event_page(&client.events(&query).await?))
            }
            Backend::Http(remote) => remote.events(topic, cursor, Some(limit)).await.map_err(remote_error),
        }
    }

    pub(crate) async fn publish(
        &self,
        topic: &str,
        payload: Box<RawValue>,
        id: Option<String>,
    ) -> Result<PublishedEvent> {
        match self {
            Backend::Store(client) => {
                let mut publish = client.publish(topic, &*payload);
                if let Some(id) = id {
                    publish = publish.id(id);
                }
                Ok(views::published(topic, &publish.await?))
            }
            Backend::Http(remote) => {
                let event = cairn_client::PublishBody { id, payload: Some(payload) };
                remote.publish(topic, &event).await.map_err(remote_error)
            }
        }
    }
}
