//! Stopping gracefully: when the process is asked to stop.

/// Resolves when the process is asked to stop (SIGTERM or Ctrl-C): long-running commands then
/// shut their engine down gracefully.
pub(crate) async fn stop_requested() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
