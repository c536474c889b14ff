//! Where a command's runs are: a store the command opens itself, or a running `cairn serve`
//! (`--url`). Each command is written once over [`Operations`], which the embedded client (on
//! a store) and the light client (on a server) both implement, so every command prints the
//! same text and the same `--json` either way; [`run`] is the one place that chooses.

use crate::store_args::{Access, StoreArgs};
use anyhow::Result;
use cairn::Client;
use cairn_api::Operations;
use cairn_api::views::{EntryView, RunDetail, SignalView};
use cairn_client::Client as Remote;
use clap::Args;
use serde::{Deserialize, Serialize};

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

/// A command that runs over either side's [`Operations`].
pub(crate) trait Command: Sized {
    /// Where its runs are, and what it does to a store it opens.
    fn target(&self) -> (&Target, Access);

    /// Does it.
    async fn execute<O: Operations>(self, ops: &O) -> Result<()>;
}

/// Runs `command` on its target: the store opened for what it does, or the server.
pub(crate) async fn run<C: Command>(command: C) -> Result<()> {
    let (target, access) = command.target();
    match &target.url {
        Some(url) => {
            let remote = Remote::new(url, target.token.clone())?;
            command.execute(&remote).await.map_err(hint)
        }
        None => {
            let client = Client::from_shared(target.store.open(access).await?);
            command.execute(&client).await
        }
    }
}

/// A refusal of the server, with what to do about a missing token.
fn hint(error: anyhow::Error) -> anyhow::Error {
    match error.downcast_ref::<cairn_client::Error>() {
        Some(refused @ cairn_client::Error::Api { status: 401, .. }) => {
            anyhow::anyhow!("{refused} (set CAIRN_TOKEN or --token)")
        }
        _ => error,
    }
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

impl Shown {
    /// Run `id`, its steps and its signals.
    pub(crate) async fn read<O: Operations>(ops: &O, id: &str) -> Result<Shown> {
        let run = ops.get(id).await?;
        let steps = ops.steps(id).await?;
        let signals = ops.signals(id).await?;
        Ok(Shown { run, journal: steps.journal, signals: signals.signals, vars: steps.vars })
    }
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
