//! Builders shared by the claims' tests: a cluster of equal nodes, gangs and their members,
//! and a filter over every node.

use std::time::{Duration, Instant};

use crate::claims::{FilterVerdict, Settings, filter};
use crate::model::{Claim, GroupKey, Node, Pod, PodGroup, PodPhase, Resources, Slot, State};
use crate::policy::constraints::Constraints;
use crate::policy::placement::Strategy;

pub(super) const SETTINGS: Settings = Settings {
    strategy: Strategy::Binpack,
    max_hold: Duration::from_secs(60),
    bind_unmarked: false,
};

pub(super) fn cluster(nodes: usize, cpu: i64) -> State {
    let mut s = State::default();
    for i in 0..nodes {
        s.apply_node(Node {
            name: format!("n{i}"),
            allocatable: Resources::from([("cpu", cpu * 1000), ("pods", 110)]),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
            not_ready: false,
        });
    }
    s
}

pub(super) fn group(s: &mut State, name: &str, min: u32) -> GroupKey {
    let key = GroupKey::new("ns", name);
    s.apply_pod_group(PodGroup {
        schedule_timeout: Duration::from_secs(30),
        ..PodGroup::new(key.clone(), min, "default")
    });
    key
}

pub(super) fn member(s: &mut State, group: &str, i: usize, cpu: i64) -> Pod {
    let pod = Pod {
        uid: format!("{group}-{i}"),
        namespace: "ns".into(),
        name: format!("{group}-{i}"),
        node_name: None,
        phase: PodPhase::Pending,
        requests: Resources::from([("cpu", cpu * 1000), ("pods", 1)]),
        pod_group: Some(group.into()),
        queue: None,
        priority: 0,
        marked: true,
        ..Default::default()
    };
    s.apply_pod(pod.clone());
    pod
}

pub(super) fn names(s: &State) -> Vec<String> {
    let mut v: Vec<String> = s.nodes().keys().cloned().collect();
    v.sort();
    v
}

/// The group `head` holding a reservation of `cpu` millicores on n0.
pub(super) fn reserve_on_n0(s: &mut State, cpu: i64) -> GroupKey {
    let head = group(s, "head", 1);
    s.set_claim(
        &head,
        Claim {
            slots: vec![Slot {
                node: "n0".into(),
                requests: Resources::from([("cpu", cpu), ("pods", 1)]),
            }],
            deadline: None,
            ..Default::default()
        },
    );
    head
}

/// Filters over every node. The verdict borrows the names; a test keeps them to its end.
pub(super) fn run(s: &mut State, pod: &Pod, now: Instant) -> FilterVerdict<'static> {
    let candidates = Box::leak(names(s).into_boxed_slice());
    filter(s, pod, &Constraints::default(), candidates, &SETTINGS, now).unwrap()
}
