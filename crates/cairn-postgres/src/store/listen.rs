//! Wake-ups: the LISTEN connection, and the notifications a store sends when runs end or are signalled.

use super::prelude::*;
use super::sql::Sql;
use super::sql::backend;

/// What the schema's notification channel reports, and the task listening to it (started on
/// first use; it ends with the last store clone).
pub(super) struct Wakeups {
    /// Bumped when runs may have become ready.
    pub(super) sender: watch::Sender<u64>,
    /// Runs that ended or were signalled.
    pub(super) notices: tokio::sync::broadcast::Sender<Notice>,
    pub(super) task: std::sync::OnceLock<tokio::task::AbortHandle>,
}

/// The payload of a notification that runs ended: this line, then one id per line.
pub(super) const ENDED: &str = "ended";

/// The payload of a notification that a run was signalled: this line, then its id.
pub(super) const SIGNALLED: &str = "signalled\n";

/// Most bytes of ids in one notification (PostgreSQL's payload limit is 8000 bytes).
pub(super) const ENDED_PAYLOAD: usize = 7000;

impl Wakeups {
    pub(super) fn new() -> Wakeups {
        Wakeups {
            sender: watch::Sender::new(0),
            notices: tokio::sync::broadcast::channel(4096).0,
            task: std::sync::OnceLock::new(),
        }
    }

    pub(super) fn bump(&self) {
        self.sender.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// One notification's payload: a wake-up, a signalled run, or the runs that ended.
    pub(super) fn received(&self, payload: &str) {
        // Nobody listening is fine.
        if let Some(ids) = payload.strip_prefix(ENDED) {
            for id in ids.lines().filter(|id| !id.is_empty()) {
                let _ = self.notices.send(Notice::Ended(RunId::new(id)));
            }
            return;
        }
        self.bump();
        if let Some(id) = payload.strip_prefix(SIGNALLED) {
            let _ = self.notices.send(Notice::Signalled(RunId::new(id)));
        }
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }
}

/// Tells every listening worker, at commit, that runs may have become ready (`payload` empty,
/// or [`SIGNALLED`] and the run's id).
pub(super) async fn notify(client: &impl GenericClient, sql: &Sql, payload: &str) -> Result<(), StoreError> {
    let statement = client.prepare_cached(&sql.notify).await.map_err(backend)?;
    client.execute(&statement, &[&sql.schema, &payload]).await.map_err(backend)?;
    Ok(())
}

/// Tells every listening process that these runs ended (after they committed; a report lost to a
/// crash here only makes waiters fall back to reading the store).
pub(super) async fn notify_ended(client: &impl GenericClient, sql: &Sql, ids: &[RunId]) {
    if ids.is_empty() {
        return;
    }
    let Ok(statement) = client.prepare_cached(&sql.notify).await else { return };
    let mut payload = String::from(ENDED);
    for (i, id) in ids.iter().enumerate() {
        payload.push('\n');
        payload.push_str(id.as_str());
        if i + 1 == ids.len() || payload.len() + ids[i + 1].as_str().len() >= ENDED_PAYLOAD {
            let _ = client.execute(&statement, &[&sql.schema, &payload]).await;
            payload.truncate(ENDED.len());
        }
    }
}

/// Keeps a connection listening on the schema's channel and bumps the wake-up counter on each
/// notification (and once after every (re)connection, since notifications sent meanwhile were
/// missed). The connection is driven here, so aborting this task closes it; it also ends when
/// the last store clone is gone.
pub(super) async fn listen(config: tokio_postgres::Config, channel: String, wakeups: std::sync::Weak<Wakeups>) {
    // `false` once the stores are gone.
    let deliver = |payload: Option<&str>| match wakeups.upgrade() {
        Some(wakeups) => {
            match payload {
                Some(payload) => wakeups.received(payload),
                // (Re)connected: anything may have happened meanwhile.
                None => {
                    wakeups.bump();
                    let _ = wakeups.notices.send(Notice::Missed);
                }
            }
            true
        }
        None => false,
    };
    loop {
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let statement = format!("LISTEN \"{channel}\"");
            let listen = client.batch_execute(&statement);
            tokio::pin!(listen);
            let mut listening = false;
            loop {
                tokio::select! {
                    done = &mut listen, if !listening => {
                        if done.is_err() || !deliver(None) {
                            break;
                        }
                        listening = true;
                    }
                    message = std::future::poll_fn(|cx| connection.poll_message(cx)) => match message {
                        Some(Ok(AsyncMessage::Notification(note))) => {
                            if !deliver(Some(note.payload())) {
                                return;
                            }
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    },
                }
            }
        }
        if wakeups.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
