//! Flow control through a [`Client`]: concurrency rules.

use crate::{Client, ClientError, ConcurrencyRule};

impl Client {
    /// Stores a concurrency rule, replacing the workflow's earlier one; runs that waited for its
    /// slots and fit a larger limit are admitted at once. Applies to runs created from now on
    /// (earlier runs keep the key, or the freedom, they were created with).
    ///
    /// ```
    /// use cairn::{Client, ConcurrencyRule, MemoryStore};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let client = Client::new(MemoryStore::new());
    /// client.put_concurrency(&ConcurrencyRule::per_workflow("export", 3)).await?;
    /// assert!(client.put_concurrency(&ConcurrencyRule::per_workflow("export", 0)).await.is_err());
    /// assert_eq!(client.concurrency_rules().await?[0].limit, 3);
    /// assert!(client.delete_concurrency("export").await?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn put_concurrency(&self, rule: &ConcurrencyRule) -> Result<(), ClientError> {
        rule.check().map_err(ClientError::InvalidConcurrency)?;
        self.store.put_concurrency(rule).await?;
        Ok(())
    }

    /// Deletes a workflow's concurrency rule (every run that waited for a slot is admitted);
    /// whether it had one.
    pub async fn delete_concurrency(&self, workflow: &str) -> Result<bool, ClientError> {
        Ok(self.store.delete_concurrency(workflow).await?)
    }

    /// Every concurrency rule, by workflow.
    pub async fn concurrency_rules(&self) -> Result<Vec<ConcurrencyRule>, ClientError> {
        Ok(self.store.concurrency_rules().await?)
    }
}
