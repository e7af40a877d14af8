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
//! - `conditions`: `ParentIgnored` (status True) while the admission pass does not follow the
//!   queue's `spec.parent`, because no queue has that name (reason `ParentMissing`) or following
//!   parents from it comes back to it (`ParentCycle`: the webhook refuses cycles, but two
//!   concurrent updates can each pass its check); the queue is then shared out as a top-level
//!   queue, and the condition says so. Absent otherwise.
//!
//! Amounts are written as a user would write them (`cpu: 1500m`, `memory: 4Gi`), and a
//! resource at zero is left out, so the same usage always produces the same status and an
//! unchanged queue is never written.

use crate::api::labels::DEFAULT_QUEUE;
use crate::api::{Queue, QueueSpec, QueueStatus, ResourceList};
use gangplank_core::admit::plan::QueueReport;
use gangplank_core::model::resources::{Resources, human};
use gangplank_core::policy::fair_share::ParentIgnored;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::observe::{GroupCounts, QueueUsage};

/// Type of the condition a queue whose parent is not followed carries.
pub const PARENT_IGNORED: &str = "ParentIgnored";

/// The status a queue should have (see the module docs): `queue` as stored (its parent, and
/// its conditions' transition times to keep), its usage and share, and `now` for a condition
/// that appears.
pub fn queue_status(
    queue: &Queue,
    usage: &QueueUsage,
    report: Option<&QueueReport>,
    counts: GroupCounts,
    now: &Time,
) -> QueueStatus {
    let deserved = report.map(|r| r.deserved.clone()).unwrap_or_default();
    let parent = queue.spec.parent.as_deref().unwrap_or_default();
    let ignored = report.and_then(|r| r.parent_ignored).map(|why| {
        let (reason, message) = match why {
            ParentIgnored::Missing => (
                "ParentMissing",
                format!("no queue is named {parent:?} (spec.parent), so this queue is shared out as a top-level queue; create that queue or change spec.parent"),
            ),
            ParentIgnored::Cycle => (
                "ParentCycle",
                format!("following spec.parent from this queue ({parent:?}, then its parents) comes back to it, so every queue on that cycle is shared out as a top-level queue; change spec.parent of one of them"),
            ),
        };
        let kept = queue
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == PARENT_IGNORED))
            .filter(|c| c.reason == reason)
            .map(|c| c.last_transition_time.clone());
        Condition {
            type_: PARENT_IGNORED.to_owned(),
            status: "True".to_owned(),
            reason: reason.to_owned(),
            message,
            last_transition_time: kept.unwrap_or_else(|| now.clone()),
            observed_generation: None,
        }
    });
    QueueStatus {
        allocated: resource_list(&usage.allocated),
        deserved: resource_list(&deserved),
        pending: counts.pending + usage.lone.pending,
        admitted: counts.admitted + usage.lone.admitted,
        running: counts.running + usage.lone.running,
        conditions: ignored.into_iter().collect(),
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
    use crate::api::{PodGroupPhase, labels};

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
        let report = QueueReport {
            deserved: Resources::from([("cpu", 6_000), ("memory", 8 << 30), ("pods", 8)]),
            ..QueueReport::default()
        };
        let status = queue_status(&queue(None), &usage, Some(&report), counts, &now());
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
        let status = queue_status(&queue(None), &usage, None, counts, &now());
        assert_eq!(
            (status.pending, status.admitted, status.running),
            (21, 1, 21)
        );
    }

    #[test]
    fn an_idle_queue_reports_nothing_allocated_or_deserved() {
        let status = queue_status(
            &queue(None),
            &QueueUsage::default(),
            None,
            GroupCounts::default(),
            &now(),
        );
        assert_eq!(status, QueueStatus::default());
    }

    fn queue(parent: Option<&str>) -> Queue {
        Queue::new(
            "vision",
            QueueSpec {
                parent: parent.map(Into::into),
                ..QueueSpec::default()
            },
        )
    }

    fn now() -> Time {
        Time("2026-11-26T10:00:00Z".parse().unwrap())
    }

    #[test]
    fn a_queue_whose_parent_is_not_followed_says_why_and_keeps_the_time_it_first_said_so() {
        let cycle = QueueReport {
            parent_ignored: Some(ParentIgnored::Cycle),
            ..QueueReport::default()
        };
        let mut stored = queue(Some("research"));
        let status = queue_status(
            &stored,
            &QueueUsage::default(),
            Some(&cycle),
            GroupCounts::default(),
            &now(),
        );
        let condition = &status.conditions[0];
        assert_eq!(
            (
                condition.type_.as_str(),
                condition.status.as_str(),
                condition.reason.as_str()
            ),
            (PARENT_IGNORED, "True", "ParentCycle")
        );
        assert!(
            condition.message.contains("\"research\""),
            "{}",
            condition.message
        );

        stored.status = Some(status.clone());
        let later = Time("2026-11-26T11:00:00Z".parse().unwrap());
        let again = queue_status(
            &stored,
            &QueueUsage::default(),
            Some(&cycle),
            GroupCounts::default(),
            &later,
        );
        assert_eq!(again, status, "unchanged, so not written again");

        let missing = QueueReport {
            parent_ignored: Some(ParentIgnored::Missing),
            ..QueueReport::default()
        };
        let moved = queue_status(
            &stored,
            &QueueUsage::default(),
            Some(&missing),
            GroupCounts::default(),
            &later,
        );
        assert_eq!(moved.conditions[0].reason, "ParentMissing");
        assert_eq!(moved.conditions[0].last_transition_time, later);
        let fixed = queue_status(
            &stored,
            &QueueUsage::default(),
            None,
            GroupCounts::default(),
            &later,
        );
        assert!(fixed.conditions.is_empty());
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
