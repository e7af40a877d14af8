//! The admission pass, decided on small clusters: the helpers that read and apply a decision
//! here (the builders are `crate::testing`'s), the cases by subject.

mod arrivals;
mod backfill;
mod growth;
mod in_flight;
mod instance_topology;
mod kept_room;
mod min_resources;
mod order;
mod sub_groups;
mod topology;

use super::*;
use crate::admit::kept::Kept;
use crate::admit::on_arrival;
use crate::model::names::ADMISSION_GATE;
use crate::model::resources::Capability;
use crate::model::{GroupKey, Pod, Queue, Resources};
use crate::model::{Node, PodGroup, PodPhase, Reservation, ResourceId};
use crate::testing::{
    PodBuilder, cluster, decide_after, decide_at, decide_kept, decide_now, gang, node, pod,
    pod_group,
};
use std::time::Duration;

/// Sets `name`'s expected runtime (and keeps the rest of its spec).
pub(super) fn expect_runtime(s: &mut State, name: &str, seconds: u64) {
    let key = GroupKey::new("ns", name);
    let spec = s.groups()[&key].spec.as_deref().unwrap().clone();
    s.apply_pod_group(PodGroup {
        expected_runtime: Some(Duration::from_secs(seconds)),
        ..spec
    });
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

/// The nodes the head's reservation holds, in name order.
pub(super) fn held_nodes(d: &Decision) -> Vec<&str> {
    d.hold
        .as_ref()
        .map(|h| h.nodes.iter().map(|(n, _)| n.as_str()).collect())
        .unwrap_or_default()
}

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
    let pod = pod(uid).in_queue("q").cpu(cpu).created(started);
    s.apply_pod(Pod {
        pod_group: group.map(Into::into),
        started: Some(started),
        ..pod.running_on(node)
    });
}
