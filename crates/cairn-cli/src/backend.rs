//! Where a command's runs are: a store the command opens itself, or a running `cairn serve`
//! (`--url`). Both answer with the HTTP API's views, so every command prints the same text and
//! the same `--json` either way.

use crate::remote::{Remote, encode};
use crate::store_args::StoreArgs;
use anyhow::Result;
use cairn::{Client, PageCursor, RunFilter, RunId, RunStatus};
use cairn_http::reads;
use cairn_http::views::{
    self, EntryView, Outcome, Pruned, PublishedEvent, RunDetail, RunPage, SignalSent, SignalView, Signals, StartedRun,
    Steps, Workflows,
};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;
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
    /// The server, or the store opened (`create`: an SQLite file may be created).
    pub(crate) async fn connect(&self, create: bool) -> Result<Backend> {
        match &self.url {
            Some(url) => Ok(Backend::Http(Remote::new(url, self.token.clone())?)),
            None => Ok(Backend::Store(Client::from_shared(self.store.open(create).await?))),
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
    /// `FIELD=VALUE` filters on the input.
    pub(crate) input: Vec<String>,
    pub(crate) cursor: Option<String>,
    /// 1 to 1,000.
    pub(crate) limit: usize,
}

/// `--input FIELD=VALUE` arguments as `("input.FIELD", "VALUE")`, the API's parameters.
fn input_pairs(given: &[String]) -> Result<Vec<(String, &str)>> {
    given
        .iter()
        .map(|pair| {
            let (field, value) =
                pair.split_once('=').ok_or_else(|| anyhow::anyhow!("--input {pair:?} is not FIELD=VALUE"))?;
            Ok((format!("input.{field}"), value))
        })
        .collect()
}

/// `id`'s run on the server, and the path of its routes.
async fn run_route(remote: &Remote, id: &str) -> Result<(RunDetail, String)> {
    let run: RunDetail = remote.call("GET", &format!("/v1/runs/{}", encode(id)), None).await?;
    let path = format!("/v1/workflows/{}/runs/{}", encode(&run.listed.run.workflow), encode(id));
    Ok((run, path))
}

/// How `runs start` starts a run, besides its workflow and input.
#[derive(Debug, Default)]
pub(crate) struct StartAsk {
    /// The run's id (default: a new one).
    pub(crate) id: Option<String>,
    /// Same key → the existing run.
    pub(crate) idempotency_key: Option<String>,
    /// The version to pin.
    pub(crate) version: Option<u32>,
    /// Its priority (default 0).
    pub(crate) priority: Option<i32>,
    /// The key it is served fairly by.
    pub(crate) fairness_key: Option<String>,
    /// Debounce it: key, quiet time and maximum wait, as given (`2s`).
    pub(crate) debounce: Option<DebounceAsk>,
}

/// How `runs start --debounce` debounces a start, its durations as given.
#[derive(Debug)]
pub(crate) struct DebounceAsk {
    pub(crate) key: String,
    pub(crate) quiet: String,
    pub(crate) max_wait: Option<String>,
}

impl DebounceAsk {
    /// The debounce asked for; a duration that does not parse is refused.
    fn parse(&self) -> Result<cairn::Debounce> {
        let duration = |flag: &str, text: &str| {
            humantime::parse_duration(text)
                .map_err(|_| anyhow::anyhow!("{flag} {text:?} is not a duration (try `2s` or `5m`)"))
        };
        let mut debounce = cairn::Debounce::new(&self.key, duration("--quiet", &self.quiet)?);
        if let Some(max_wait) = &self.max_wait {
            debounce = debounce.max_wait(duration("--max-wait", max_wait)?);
        }
        Ok(debounce)
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
                        let pairs = input_pairs(&query.input)?;
                        let pairs = pairs.iter().map(|(name, value)| (name.as_str(), *value));
                        Some(views::input_filter(pairs).map_err(anyhow::Error::msg)?)
                    }
                };
                let filter = RunFilter {
                    input_contains,
                    workflow: query.workflow.clone(),
                    status,
                    cursor: query.cursor.as_deref().map(PageCursor::decode).transpose()?,
                    limit: Some(query.limit),
                    ..RunFilter::default()
                };
                Ok(reads::run_page(client, &filter, query.stranded, &live).await?)
            }
            Backend::Http(remote) => {
                let mut params = vec![format!("limit={}", query.limit)];
                let given = [("workflow", &query.workflow), ("status", &query.status), ("cursor", &query.cursor)];
                params.extend(given.iter().filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", encode(v)))));
                if query.stranded {
                    params.push("stranded=true".into());
                }
                for (name, value) in input_pairs(&query.input)? {
                    params.push(format!("{}={}", encode(&name), encode(value)));
                }
                remote.call("GET", &format!("/v1/runs?{}", params.join("&")), None).await
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
                let (run, path) = run_route(remote, id).await?;
                let steps: Steps = remote.call("GET", &format!("{path}/steps"), None).await?;
                let signals: Signals = remote.call("GET", &format!("{path}/signals"), None).await?;
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
            Backend::Http(remote) => {
                let (_, path) = run_route(remote, id).await?;
                remote.call("GET", &format!("{path}/steps"), None).await
            }
        }
    }

    pub(crate) async fn signal(&self, id: &str, event: &str, payload: Box<RawValue>) -> Result<SignalSent> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                let signal = client.signal(&id, event, &payload).await?;
                Ok(SignalSent { run: id.to_string(), signal: signal.0, event: event.to_owned() })
            }
            Backend::Http(remote) => {
                let (_, path) = run_route(remote, id).await?;
                remote.call("POST", &format!("{path}/signals/{}", encode(event)), Some(payload.get().to_owned())).await
            }
        }
    }

    pub(crate) async fn start(&self, workflow: &str, input: Box<RawValue>, ask: StartAsk) -> Result<StartedRun> {
        let StartAsk { id, idempotency_key, version, priority, fairness_key, debounce } = ask;
        match self {
            Backend::Store(client) => {
                let mut start = client.start(workflow, &*input);
                if let Some(id) = id {
                    start = start.id(id);
                }
                if let Some(key) = idempotency_key {
                    start = start.idempotency_key(key);
                }
                if let Some(version) = version {
                    start = start.version(version);
                }
                if let Some(priority) = priority {
                    start = start.priority(priority);
                }
                if let Some(key) = fairness_key {
                    start = start.fairness_key(key);
                }
                if let Some(debounce) = &debounce {
                    start = start.debounce(debounce.parse()?);
                }
                Ok(views::started(&start.await?))
            }
            Backend::Http(remote) => {
                let debounce = debounce.map(|d| json!({"key": d.key, "quiet": d.quiet, "maxWait": d.max_wait}));
                let body = json!({"input": input, "id": id, "idempotencyKey": idempotency_key, "version": version,
                                  "priority": priority, "fairnessKey": fairness_key, "debounce": debounce});
                let path = format!("/v1/workflows/{}/runs", encode(workflow));
                remote.call("POST", &path, Some(body.to_string())).await
            }
        }
    }

    pub(crate) async fn cancel(&self, id: &str) -> Result<Outcome> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                Ok(Outcome::cancel(&id, client.cancel(&id).await?))
            }
            Backend::Http(remote) => {
                let (_, path) = run_route(remote, id).await?;
                remote.call("DELETE", &path, None).await
            }
        }
    }

    pub(crate) async fn pause(&self, id: &str) -> Result<Outcome> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                Ok(Outcome::pause(&id, client.pause(&id).await?))
            }
            Backend::Http(remote) => {
                let (_, path) = run_route(remote, id).await?;
                remote.call("POST", &format!("{path}/pause"), None).await
            }
        }
    }

    pub(crate) async fn resume(&self, id: &str) -> Result<Outcome> {
        match self {
            Backend::Store(client) => {
                let id = RunId::new(id);
                client.resume(&id).await?;
                Ok(Outcome::resumed(&id))
            }
            Backend::Http(remote) => {
                let (_, path) = run_route(remote, id).await?;
                remote.call("POST", &format!("{path}/resume"), None).await
            }
        }
    }

    pub(crate) async fn restart(&self, id: &str, from_step: &str) -> Result<views::Restarted> {
        match self {
            Backend::Store(client) => {
                let restarted = client.restart(&RunId::new(id), from_step).await?;
                Ok(views::Restarted {
                    run: restarted.id().to_string(),
                    restarted_from: id.to_owned(),
                    from_step: from_step.to_owned(),
                })
            }
            Backend::Http(remote) => {
                let (_, path) = run_route(remote, id).await?;
                remote
                    .call("POST", &format!("{path}/restart"), Some(json!({ "fromStep": from_step }).to_string()))
                    .await
            }
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
                let body = json!({ "olderThan": older_than, "dryRun": dry_run });
                remote.call("POST", "/v1/runs/prune", Some(body.to_string())).await
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
            Backend::Http(remote) => Ok(remote.call::<views::Workers>("GET", "/v1/workers", None).await?.workers),
        }
    }

    pub(crate) async fn workflows(&self) -> Result<Workflows> {
        match self {
            Backend::Store(client) => Ok(views::workflows(&client.workflow_counts().await?)),
            Backend::Http(remote) => remote.call("GET", "/v1/workflows", None).await,
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
                let body = json!({ "id": id, "payload": payload });
                remote.call("POST", &format!("/v1/events/{}", encode(topic)), Some(body.to_string())).await
            }
        }
    }
}
