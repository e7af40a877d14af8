//! Builders shared by this crate's unit tests: the model's nodes, pods and PodGroups as the
//! tests' clusters hold them, in namespace `ns`; and [`sub_group_sizes`], how tests read a
//! PodGroup's sub-groups. Each builds the plain object; a test says
//! what differs with struct update syntax (`Pod { queue: Some("q".into()), ..pod("p0", 100) }`).

use std::time::Duration;

use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, Resources};

/// A ready, schedulable node `name` of `cpu` millicores with room for `pods` pods.
pub fn node(name: &str, cpu: i64, pods: i64) -> Node {
    Node {
        name: name.into(),
        allocatable: Resources::from([("cpu", cpu), ("pods", pods)]),
        ..Node::default()
    }
}

/// The pending pod `uid`, also its name, asking `cpu` millicores and one pod.
pub fn pod(uid: &str, cpu: i64) -> Pod {
    Pod {
        uid: uid.into(),
        namespace: "ns".into(),
        name: uid.into(),
        requests: Resources::from([("cpu", cpu), ("pods", 1)]),
        ..Pod::default()
    }
}

/// The PodGroup `ns/name` of gang size `min_member` in `queue`, whose schedule times out after
/// `timeout`.
pub fn pod_group(name: &str, min_member: u32, queue: &str, timeout: Duration) -> PodGroup {
    PodGroup {
        schedule_timeout: timeout,
        ..PodGroup::new(GroupKey::new("ns", name), min_member, queue)
    }
}

/// Each sub-group of `policy` as `(name, subGroupSize, minSubGroups)`.
pub fn sub_group_sizes(policy: &[crate::api::pod_group::SubGroupPolicy]) -> Vec<(&str, i32, i32)> {
    policy
        .iter()
        .map(|p| (p.name.as_str(), p.sub_group_size, p.min_sub_groups))
        .collect()
}
