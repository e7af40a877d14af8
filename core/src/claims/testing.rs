//! Builders specific to the claims' tests, over `crate::testing`'s: the filter's settings, a
//! cluster of equal nodes (sized in CPUs), groups of the claims' queue and timeout, marked
//! members, a reservation on n0, and a filter over every node.

use std::time::{Duration, Instant};

use crate::claims::{FilterVerdict, Settings, filter};
use crate::model::{Claim, GroupKey, Pod, PodGroup, Resources, Slot, State};
use crate::policy::constraints::Constraints;
use crate::policy::placement::Strategy;
use crate::testing::{PodBuilder, node, pod, pod_group};

pub(super) const SETTINGS: Settings = Settings {
    strategy: Strategy::Binpack,
    max_hold: Duration::from_secs(60),
    bind_unmarked: false,
    hold_scheduler_gangs: false,
    gated_admission: false,
};

/// The nodes `n0`, `n1`, ... (`nodes` of them), each of `cpu` CPUs.
pub(super) fn cluster(nodes: usize, cpu: i64) -> State {
    let mut s = State::default();
    for i in 0..nodes {
        s.apply_node(node(format!("n{i}"), cpu * 1000));
    }
    s
}

/// The group `ns/name` of `min` members in queue `default`, with a schedule timeout of 30
/// seconds.
pub(super) fn group(s: &mut State, name: &str, min: u32) -> GroupKey {
    let group = PodGroup {
        schedule_timeout: Duration::from_secs(30),
        ..pod_group(name, min, "default")
    };
    let key = group.key.clone();
    s.apply_pod_group(group);
    key
}

/// The marked member `group-i` of `group`, asking for `cpu` CPUs, applied to `s`.
pub(super) fn member(s: &mut State, group: &str, i: usize, cpu: i64) -> Pod {
    let pod = pod(format!("{group}-{i}"))
        .in_group(group)
        .cpu(cpu * 1000)
        .marked();
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
    s.ledger_mut().set_claim(
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
