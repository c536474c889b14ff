//! Lease heartbeats on a connection of their own: a beat never waits for a pooled connection
//! behind the appends, claims and reads it protects.

use super::prelude::*;
use super::sql::{Sql, backend};
use std::sync::Mutex;
use tokio_postgres::{Client, Statement};

/// The heartbeat connection and its prepared statements.
pub(super) struct BeatConnection {
    client: Client,
    statements: Statements,
}

/// The statements of a beat: the batch, one lease by itself, and a run's pending request.
struct Statements {
    batch: Statement,
    one: Statement,
    pending: Statement,
}

/// Where a store's heartbeat connection stands.
#[derive(Default)]
enum State {
    /// None yet, or the last one failed or was given up on.
    #[default]
    Closed,
    /// Being opened on a task of its own.
    Opening,
    Ready(Arc<BeatConnection>),
}

/// The slot of a store's heartbeat connection, shared by its clones. It is opened by the first
/// beat or claim (a store that never executes runs never opens it), and opened again at once
/// after a beat on it failed or was given up unanswered (the connection may be stalled). While
/// it opens (several round trips: with 300 ms each way, seconds), beats go out on pooled
/// connections as before.
#[derive(Default, Clone)]
pub(super) struct BeatSlot(Arc<Mutex<State>>);

impl BeatSlot {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The open connection; when there is none, it is opened on a task of its own.
    pub(super) fn ready(&self, config: &tokio_postgres::Config, sql: &Arc<Sql>) -> Option<Arc<BeatConnection>> {
        let mut state = self.state();
        match &*state {
            State::Ready(beats) => return Some(Arc::clone(beats)),
            State::Opening => return None,
            State::Closed => *state = State::Opening,
        }
        let (slot, config, sql) = (self.clone(), config.clone(), Arc::clone(sql));
        tokio::spawn(async move {
            let opened = open(&config, &sql).await;
            let mut state = slot.state();
            *state = match opened {
                Ok(beats) => State::Ready(Arc::new(beats)),
                Err(error) => {
                    tracing::debug!("cairn-postgres: cannot open the heartbeat connection: {error}");
                    State::Closed
                }
            };
        });
        None
    }

    /// Closes `beats` if it is still the slot's connection.
    fn close(&self, beats: &Arc<BeatConnection>) {
        let mut state = self.state();
        if matches!(&*state, State::Ready(current) if Arc::ptr_eq(current, beats)) {
            *state = State::Closed;
        }
    }
}

/// Closes the connection of a beat dropped before its answer, or failed.
struct Closes<'a> {
    slot: &'a BeatSlot,
    beats: &'a Arc<BeatConnection>,
    answered: bool,
}

impl Drop for Closes<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.slot.close(self.beats);
        }
    }
}

async fn open(config: &tokio_postgres::Config, sql: &Sql) -> Result<BeatConnection, StoreError> {
    // Bounded as a pooled connection is (the config's timeout covers the socket's connect only).
    let limit = config.get_connect_timeout().copied().unwrap_or(std::time::Duration::from_secs(10));
    let connecting = tokio::time::timeout(limit, config.connect(NoTls));
    let (client, connection) = connecting
        .await
        .map_err(|_| StoreError::backend(format!("no answer from the server within {limit:?}")))?
        .map_err(backend)?;
    // Driven here until the client is dropped or the server goes away.
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!("cairn-postgres heartbeat connection: {error}");
        }
    });
    // Prepared together, in one round trip.
    let (batch, one, pending) = tokio::try_join!(
        client.prepare(&sql.heartbeat_batch),
        client.prepare(&sql.heartbeat),
        client.prepare(&sql.pending)
    )
    .map_err(backend)?;
    Ok(BeatConnection { client, statements: Statements { batch, one, pending } })
}

/// Renews the leases of `request`, on the heartbeat connection in `slot` when it is open and on
/// a connection of `pool` while it opens: for each run, whether it is held and whether a
/// cancellation and a pause were requested.
pub(super) async fn heartbeat(
    slot: &BeatSlot,
    pool: &Pool,
    (config, sql): (&tokio_postgres::Config, &Arc<Sql>),
    request: &HeartbeatRequest,
) -> Result<Vec<LeaseStatus>, StoreError> {
    let Some(beats) = slot.ready(config, sql) else {
        let client = pool.get().await.map_err(backend)?;
        let (batch, one, pending) = tokio::try_join!(
            client.prepare_cached(&sql.heartbeat_batch),
            client.prepare_cached(&sql.heartbeat),
            client.prepare_cached(&sql.pending)
        )
        .map_err(backend)?;
        return beat(&client, &Statements { batch, one, pending }, request).await;
    };
    let mut closes = Closes { slot, beats: &beats, answered: false };
    let statuses = beat(&beats.client, &beats.statements, request).await;
    closes.answered = statuses.is_ok();
    statuses
}

async fn beat(
    client: &Client,
    statements: &Statements,
    request: &HeartbeatRequest,
) -> Result<Vec<LeaseStatus>, StoreError> {
    let until = request.lease_until.as_millis();
    let ids: Vec<&str> = request.runs.iter().map(|(id, _)| id.as_str()).collect();
    let epochs: Vec<i64> = request.runs.iter().map(|(_, epoch)| *epoch as i64).collect();
    let rows = client.query(&statements.batch, &[&until, &ids, &epochs, &request.owner]).await.map_err(backend)?;
    let mut answered = HashMap::with_capacity(rows.len());
    for row in &rows {
        let id: String = row.try_get(0).map_err(backend)?;
        let pending = Request::from_parts(row.try_get(2).map_err(backend)?, row.try_get(3).map_err(backend)?)?;
        answered.insert(id, (row.try_get(1).map_err(backend)?, pending));
    }
    // The rows the batch skipped (another transaction held them: an append of this worker's, as
    // a rule) are renewed one statement each, sent together: each waits for its own row only, so
    // the waits overlap instead of adding up (with 300 ms each way, an append holds its rows for
    // 600 ms), and no statement holds one row while waiting for another.
    let skipped: Vec<&(RunId, u64)> =
        request.runs.iter().filter(|(id, _)| !answered.contains_key(id.as_str())).collect();
    let singles =
        futures::future::join_all(skipped.iter().map(|(id, epoch)| beat_one(client, statements, id, *epoch, request)))
            .await;
    for ((run_id, _), answer) in skipped.into_iter().zip(singles) {
        answered.insert(run_id.as_str().to_owned(), answer?);
    }
    let mut out = Vec::with_capacity(request.runs.len());
    for (run_id, _) in &request.runs {
        let (held, pending) = answered.remove(run_id.as_str()).unwrap_or_default();
        out.push(LeaseStatus { run_id: run_id.clone(), held, pending });
    }
    Ok(out)
}

/// One lease extended by itself (waiting for its row, which the batch skipped because another
/// transaction held it): whether it is held, and which cancel or pause waits for it.
async fn beat_one(
    client: &Client,
    statements: &Statements,
    run_id: &RunId,
    epoch: u64,
    request: &HeartbeatRequest,
) -> Result<(bool, Option<Request>), StoreError> {
    let params: [&(dyn ToSql + Sync); 4] =
        [&request.lease_until.as_millis(), &run_id.as_str(), &(epoch as i64), &request.owner];
    if let Some(row) = client.query_opt(&statements.one, &params).await.map_err(backend)? {
        return Ok((true, Request::from_parts(row.try_get(0).map_err(backend)?, row.try_get(1).map_err(backend)?)?));
    }
    match client.query_opt(&statements.pending, &[&run_id.as_str()]).await.map_err(backend)? {
        Some(row) => {
            Ok((false, Request::from_parts(row.try_get(0).map_err(backend)?, row.try_get(1).map_err(backend)?)?))
        }
        None => Ok((false, None)),
    }
}
