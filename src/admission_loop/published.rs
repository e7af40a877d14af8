//! What the last admission pass decided, published for the controller.
//!
//! Why: the controller's statuses (each waiting PodGroup's `Admitted` condition, each Queue's
//! shares and allocation) come from the same numbers as the admission loop's decisions, so
//! they are computed once: the loop publishes its [`PassOutcome`] after every pass and the
//! controller reads the latest one. A copy of the reclaim plan computed by the controller
//! would know nothing of the evictions in flight or refused, and its lines could differ from
//! what the loop did.
//!
//! Decisions:
//! - **The latest outcome only**, behind an [`Arc`] in a `tokio::sync::watch` channel: readers
//!   never wait for the loop, and the loop never waits for readers.
//! - **The controller passes again when an outcome is published** (it subscribes), so a status
//!   it wrote from an outcome older than its view of the cache is corrected by the next pass.
//! - **The controller waits for the first outcome** before its first pass, rather than write
//!   statuses without admission's numbers.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use gangplank_core::admit::plan::Decision;
use gangplank_core::model::GroupKey;

/// One admission pass's decision and what reclaim added to it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassOutcome {
    pub decision: Decision,
    /// For each starved group that waits for reclaim, what to add to its waiting reason
    /// ([`gangplank_core::admit::reclaim::ReclaimPlan::waiting`]).
    pub reclaim_waiting: BTreeMap<GroupKey, String>,
}

/// The slot the admission loop publishes its latest [`PassOutcome`] in; clones share it.
#[derive(Debug, Clone)]
pub struct Published(Arc<watch::Sender<Option<Arc<PassOutcome>>>>);

impl Default for Published {
    fn default() -> Self {
        Published(Arc::new(watch::Sender::new(None)))
    }
}

impl Published {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the latest outcome and wakes the subscribers, unless it is the same as the
    /// latest: the loop passes at least every few seconds, and a controller pass for the same
    /// numbers would only rewrite statuses (and race whoever else writes them).
    pub fn publish(&self, outcome: PassOutcome) {
        self.0.send_if_modified(|latest| {
            if latest.as_deref() == Some(&outcome) {
                return false;
            }
            *latest = Some(Arc::new(outcome));
            true
        });
    }

    /// The latest outcome; `None` before the first pass.
    pub fn latest(&self) -> Option<Arc<PassOutcome>> {
        self.0.borrow().clone()
    }

    /// Changes whenever an outcome is published.
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<PassOutcome>>> {
        self.0.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_see_each_outcome_published_after_they_subscribed() {
        let published = Published::new();
        assert_eq!(published.latest(), None);
        let mut changes = published.subscribe();
        let mut outcome = PassOutcome::default();
        outcome
            .reclaim_waiting
            .insert(GroupKey::new("ns", "a"), "waiting for reclaim".into());
        published.clone().publish(outcome.clone());
        changes.changed().await.expect("the sender lives");
        assert_eq!(published.latest().as_deref(), Some(&outcome));
        assert_eq!(changes.borrow_and_update().as_deref(), Some(&outcome));
        // The same outcome again wakes nobody.
        published.publish(outcome.clone());
        assert!(!changes.has_changed().expect("the sender lives"));
    }
}
