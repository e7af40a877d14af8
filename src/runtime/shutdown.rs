//! The parts of `gangplank serve` that are still running (watches, servers, loops), so that a
//! shutdown that does not finish in time ends the process with an error naming what hangs,
//! instead of hanging with the Lease held. Each running part's guard is the only writer of its
//! own count.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The names of the parts running now, counted (two parts may share a name).
#[derive(Debug, Clone, Default)]
pub struct Parts(Arc<Mutex<BTreeMap<&'static str, usize>>>);

impl Parts {
    /// Runs `part` under `name`: it counts as running until it ends or is dropped.
    pub async fn run<F: Future>(&self, name: &'static str, part: F) -> F::Output {
        let _running = Running::start(self, name);
        part.await
    }

    /// The names of the parts running now, in order.
    pub fn running(&self) -> Vec<&'static str> {
        self.counts().keys().copied().collect()
    }

    /// Pending until `deadline` has passed since `shutdown`; then the error to end the process
    /// with, naming the parts still running.
    pub async fn overdue(&self, shutdown: &CancellationToken, deadline: Duration) -> anyhow::Error {
        shutdown.cancelled().await;
        tokio::time::sleep(deadline).await;
        anyhow::anyhow!(
            "still running {} s after the shutdown signal, exiting without them: {}",
            deadline.as_secs(),
            self.running().join(", ")
        )
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, usize>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One running part's entry, removed when the part ends.
struct Running {
    parts: Parts,
    name: &'static str,
}

impl Running {
    fn start(parts: &Parts, name: &'static str) -> Running {
        *parts.counts().entry(name).or_default() += 1;
        Running {
            parts: parts.clone(),
            name,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut counts = self.parts.counts();
        if let Some(count) = counts.get_mut(self.name) {
            *count -= 1;
            if *count == 0 {
                counts.remove(self.name);
            }
        }
        tracing::debug!(part = self.name, "stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_secs(25);

    #[tokio::test(start_paused = true)]
    async fn a_part_that_does_not_stop_at_shutdown_is_named_once_the_deadline_passes() {
        let (parts, shutdown) = (Parts::default(), CancellationToken::new());
        let stops = parts.run("metrics server", shutdown.clone().cancelled_owned());
        let hangs = parts.run("batch job controller", std::future::pending::<()>());
        let everything = async { tokio::join!(stops, hangs) };
        shutdown.cancel();
        let error = tokio::select! {
            _ = everything => panic!("a part that never ends ended"),
            error = parts.overdue(&shutdown, DEADLINE) => error,
        };
        assert_eq!(
            error.to_string(),
            "still running 25 s after the shutdown signal, exiting without them: batch job controller"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn there_is_no_deadline_before_the_shutdown_signal() {
        let (parts, shutdown) = (Parts::default(), CancellationToken::new());
        let overdue = parts.overdue(&shutdown, DEADLINE);
        let waited = tokio::time::timeout(DEADLINE * 10, overdue).await;
        assert!(waited.is_err(), "the deadline passed without a shutdown");
    }

    #[test]
    fn parts_that_share_a_name_count_as_running_until_the_last_one_ends() {
        let parts = Parts::default();
        let first = Running::start(&parts, "extender");
        let second = Running::start(&parts, "extender");
        drop(first);
        assert_eq!(parts.running(), ["extender"]);
        drop(second);
        assert!(parts.running().is_empty());
    }
}
