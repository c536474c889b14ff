//! What every runs stream shows beside its own page, read once per interval for all of them.

use crate::error::ApiError;
use cairn::api as ops;
use cairn::{Client, LiveWorkers};
use cairn_api::views;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What every runs stream shows beside its own page: the live workers, the workflows and the
/// workers' view. Read once per interval for all the streams open, however many filters they
/// have (each stream read them itself before: 100 streams, 400 reads a second).
#[derive(Clone, Default)]
pub(crate) struct Overview(Arc<tokio::sync::Mutex<Option<Arc<Shared>>>>);

/// One reading of the [`Overview`], and when it was read.
pub(crate) struct Shared {
    at: Instant,
    pub(crate) live: LiveWorkers,
    pub(crate) workflows: views::Workflows,
    pub(crate) workers: views::Workers,
}

impl Overview {
    /// The overview read within `fresh_for`, or read now (one reader at a time: the streams
    /// that ask meanwhile wait for its answer and share it).
    pub(crate) async fn read(&self, client: &Client, fresh_for: Duration) -> Result<Arc<Shared>, ApiError> {
        let mut held = self.0.lock().await;
        if let Some(shared) = held.as_ref().filter(|shared| shared.at.elapsed() < fresh_for) {
            return Ok(Arc::clone(shared));
        }
        let live = async { Ok::<_, ops::OperationError>(client.live_workers().await?) };
        let (live, workflows) = tokio::try_join!(live, ops::workflows(client))?;
        let workers = ops::workers(client, &live).await?;
        let shared = Arc::new(Shared { at: Instant::now(), live, workflows, workers });
        *held = Some(Arc::clone(&shared));
        Ok(shared)
    }
}
