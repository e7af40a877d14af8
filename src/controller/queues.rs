//! A Queue's status from its pods and PodGroups, and the `default` Queue created at start-up.
//!
//! - `allocated`: the requests of the queue's pods that are bound and not finished: members of
//!   the queue's PodGroups, and pods that name the queue but no group.
//! - `deserved`: the queue's deserved share as the admission pass computes it
//!   ([`gangplank_core::admit::plan::QueueReport`]: weighted water-filling of the schedulable nodes'
//!   allocatable over every queue's demand), so the status shows the number that orders
//!   admission. It is a report, not an input: admission recomputes it from the cache.
//! - `pending`, `admitted`, `running`: the queue's PodGroups in phase Pending, Inqueue and
//!   Running, as the controller computes them in the same pass (so the counts agree with the
//!   PodGroups' phases once both are written), plus its live pods in no group, each a group of
//!   one: pending while gated, admitted once released, running once bound. Groups in phase
//!   Unknown are in none of them.
//! - `conditions` are left to whoever sets them; the controller writes none.
//!
//! Amounts are written as a user would write them (`cpu: 1500m`, `memory: 4Gi`), and a
//! resource at zero is left out, so the same usage always produces the same status and an
//! unchanged queue is never written.

use crate::api::labels::DEFAULT_QUEUE;
use crate::api::{PodGroupPhase, Queue, QueueSpec, QueueStatus, ResourceList};
use gangplank_core::model::resources::{Resources, human};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::observe::QueueUsage;

/// PodGroups of one queue by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub pending: i32,
    pub admitted: i32,
    pub running: i32,
}

impl GroupCounts {
    pub fn add(&mut self, phase: PodGroupPhase) {
        match phase {
            PodGroupPhase::Pending => self.pending += 1,
            PodGroupPhase::Inqueue => self.admitted += 1,
            PodGroupPhase::Running => self.running += 1,
            PodGroupPhase::Completed | PodGroupPhase::Failed | PodGroupPhase::Unknown => {}
        }
    }
}

/// The status a queue should have (without conditions, see the module docs).
pub fn queue_status(usage: &QueueUsage, deserved: &Resources, counts: GroupCounts) -> QueueStatus {
    QueueStatus {
        allocated: resource_list(&usage.allocated),
        deserved: resource_list(deserved),
        pending: counts.pending + usage.lone.pending,
        admitted: counts.admitted + usage.lone.admitted,
        running: counts.running + usage.lone.running,
        conditions: Vec::new(),
    }
}

/// A resource list as a user would write it, without zero amounts or the marker resources.
pub fn resource_list(resources: &Resources) -> ResourceList {
    resources
        .ids()
        .filter(|(id, amount)| *amount > 0 && !id.is_marker())
        .map(|(id, amount)| (id.name().to_owned(), Quantity(human(id.name(), amount))))
        .collect()
}

/// The queue Gangplank creates at start-up when it is missing: `manifests/default-queue.yaml`.
pub fn default_queue() -> Queue {
    Queue::new(DEFAULT_QUEUE, QueueSpec::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::labels;

    fn quantities(pairs: &[(&str, &str)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    #[test]
    fn allocated_is_what_bound_pods_hold_and_deserved_the_share_given() {
        let usage = QueueUsage {
            allocated: Resources::from([("cpu", 4_000), ("memory", 4 << 30), ("pods", 4)]),
            waiting: Resources::from([("cpu", 4_000), ("memory", 4 << 30), ("pods", 4)]),
            lone: GroupCounts::default(),
        };
        let counts = GroupCounts {
            pending: 1,
            admitted: 0,
            running: 1,
        };
        let deserved = Resources::from([("cpu", 6_000), ("memory", 8 << 30), ("pods", 8)]);
        let status = queue_status(&usage, &deserved, counts);
        assert_eq!(
            status.allocated,
            quantities(&[("cpu", "4"), ("memory", "4Gi"), ("pods", "4")])
        );
        assert_eq!(
            status.deserved,
            quantities(&[("cpu", "6"), ("memory", "8Gi"), ("pods", "8")])
        );
        assert_eq!((status.pending, status.admitted, status.running), (1, 0, 1));
    }

    #[test]
    fn pods_in_no_group_count_as_groups_of_one() {
        let usage = QueueUsage {
            lone: GroupCounts {
                pending: 20,
                admitted: 1,
                running: 19,
            },
            ..QueueUsage::default()
        };
        let counts = GroupCounts {
            pending: 1,
            admitted: 0,
            running: 2,
        };
        let status = queue_status(&usage, &Resources::new(), counts);
        assert_eq!(
            (status.pending, status.admitted, status.running),
            (21, 1, 21)
        );
    }

    #[test]
    fn an_idle_queue_reports_nothing_allocated_or_deserved() {
        let status = queue_status(
            &QueueUsage::default(),
            &Resources::new(),
            GroupCounts::default(),
        );
        assert_eq!(status, QueueStatus::default());
    }

    #[test]
    fn amounts_are_written_as_a_user_would_and_the_markers_are_left_out() {
        let list = resource_list(&Resources::from([
            ("cpu", 1_500),
            ("memory", 1 << 20),
            (labels::MANAGED_RESOURCE, 3),
            (labels::PLACEMENT_RESOURCE, 1),
            ("pods", 0),
        ]));
        assert_eq!(list, quantities(&[("cpu", "1500m"), ("memory", "1Mi")]));
    }

    #[test]
    fn only_pending_inqueue_and_running_groups_are_counted() {
        let mut counts = GroupCounts::default();
        for phase in [
            PodGroupPhase::Pending,
            PodGroupPhase::Inqueue,
            PodGroupPhase::Inqueue,
            PodGroupPhase::Running,
            PodGroupPhase::Unknown,
            PodGroupPhase::Completed,
            PodGroupPhase::Failed,
        ] {
            counts.add(phase);
        }
        assert_eq!(
            counts,
            GroupCounts {
                pending: 1,
                admitted: 2,
                running: 1
            }
        );
    }

    #[test]
    fn the_default_queue_is_named_default_with_the_default_spec() {
        let queue = default_queue();
        assert_eq!(queue.metadata.name.as_deref(), Some("default"));
        assert_eq!(queue.spec, QueueSpec::default());
    }
}
