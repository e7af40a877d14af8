//! The admission pass, decided on small clusters: the builders here, the cases by subject.

mod arrivals;
mod backfill;
mod order;
mod topology;

use super::*;
use crate::admit::on_arrival;
use crate::model::names::ADMISSION_GATE;
use crate::model::{GroupKey, Pod, Queue, Resources};
use crate::model::{Node, PodGroup, PodPhase, Reservation, ResourceId};
use crate::policy::fair_share::Capability;
use crate::testing::{decide_after, decide_at, decide_now};
use std::time::Duration;

pub(super) fn pod(uid: &str, group: Option<&str>, gated: bool, created: i64) -> Pod {
    Pod {
        uid: uid.into(),
        namespace: "ns".into(),
        name: uid.into(),
        pod_group: group.map(Into::into),
        queue: Some("q".into()),
        scheduling_gates: if gated {
            vec![ADMISSION_GATE.into()]
        } else {
            vec![]
        },
        created,
        requests: Resources::from([("cpu", 1_000), ("pods", 1)]),
        ..Default::default()
    }
}

pub(super) fn group_in(s: &mut State, name: &str, min: u32, queue: &str) {
    s.apply_pod_group(PodGroup {
        schedule_timeout: Duration::from_secs(60),
        ..PodGroup::new(GroupKey::new("ns", name), min, queue)
    });
}

pub(super) fn group(s: &mut State, name: &str, min: u32) {
    group_in(s, name, min, "q");
}

/// `count` gated pods of `cpu` millicores in group `name` of `queue`, created at `created`.
pub(super) fn gang(s: &mut State, name: &str, queue: &str, count: u32, cpu: i64, created: i64) {
    group_in(s, name, count, queue);
    for i in 0..count {
        s.apply_pod(Pod {
            requests: Resources::from([("cpu", cpu), ("pods", 1)]),
            ..pod(&format!("{name}-{i}"), Some(name), true, created)
        });
    }
}

pub(super) fn node(s: &mut State, name: &str, cpu: i64) {
    s.apply_node(Node {
        name: name.into(),
        allocatable: Resources::from([("cpu", cpu), ("pods", 110)]),
        labels: Default::default(),
        taints: vec![],
        unschedulable: false,
        not_ready: false,
    });
}

/// One open queue `q` and one node of 8 CPUs.
pub(super) fn cluster() -> State {
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    node(&mut s, "n1", 8_000);
    s
}

pub(super) fn admitted(d: &Decision) -> Vec<String> {
    d.admit
        .iter()
        .map(|a| match &a.group {
            Some(g) => g.name.to_string(),
            None => a.pods[0].name.clone(),
        })
        .collect()
}

pub(super) fn waiting<'d>(d: &'d Decision, name: &str) -> &'d Waiting {
    d.waiting
        .iter()
        .find(|w| &*w.group.name == name)
        .unwrap_or_else(|| panic!("{name} is not waiting: {d:?}"))
}

pub(super) fn why(d: &Decision, name: &str) -> String {
    waiting(d, name).why.to_string()
}

pub(super) fn reason(d: &Decision, name: &str) -> Reason {
    waiting(d, name).reason()
}

/// Binds every released, unbound pod to `n1`, as the scheduler would.
pub(super) fn bind_released(s: &mut State) {
    let released: Vec<Pod> = s
        .pods()
        .values()
        .filter(|p| !p.awaits_admission() && p.node_name.is_none())
        .map(|p| p.as_ref().clone())
        .collect();
    for p in released {
        s.apply_pod(Pod {
            node_name: Some("n1".into()),
            phase: PodPhase::Running,
            ..p
        });
    }
}

/// Releases what `d` admits, as the admission loop's patches would.
pub(super) fn release(s: &mut State, d: &Decision) {
    for a in &d.admit {
        for p in &a.pods {
            let pod = s.pods()[&p.uid].as_ref().clone();
            s.apply_pod(Pod {
                scheduling_gates: vec![],
                ..pod
            });
        }
    }
}

pub(super) const NOW: i64 = 1_700_000_000;

/// A running pod of `cpu` millicores on `node` in queue `q`, in `group` if given (which
/// must exist), started at `started`.
pub(super) fn running(
    s: &mut State,
    uid: &str,
    group: Option<&str>,
    node: &str,
    cpu: i64,
    started: i64,
) {
    s.apply_pod(Pod {
        node_name: Some(node.into()),
        phase: PodPhase::Running,
        requests: Resources::from([("cpu", cpu), ("pods", 1)]),
        started: Some(started),
        ..pod(uid, group, false, started)
    });
}
