//! Backfill's clock: when the head of the line could start at the earliest (its shadow
//! time), from when what runs on its reserved nodes is expected to end. A group whose expected
//! runtime ends before then may borrow the head's reservation.

use super::candidate::seconds;
use crate::admit::free_room::Room;
use crate::model::{GroupKey, Pod, Resources, State};

/// The time by which the pods on the head's reserved nodes are expected to have freed what
/// the head still lacks there (the latest such node), and pods anywhere what its queue's
/// budget could not hold ([`Room::short`], with what the nodes lack: the budget grows by what
/// ends anywhere). A pod whose start or whose group's runtime is unknown may end any moment.
pub(super) fn shadow_time(state: &State, room: &Room, now: i64) -> i64 {
    let end = |pod: &Pod| {
        let runtime = GroupKey::of(pod)
            .and_then(|k| state.groups().get(&k))
            .and_then(|g| g.spec.as_ref())
            .and_then(|s| s.expected_runtime)
            .map(seconds);
        match (pod.started, runtime) {
            (Some(started), Some(runtime)) => started.saturating_add(runtime).max(now),
            _ => now,
        }
    };
    let ending = |nodes: &[&str]| -> Vec<(i64, &Resources)> {
        nodes
            .iter()
            .flat_map(|node| state.pods_on(node))
            .map(|pod| (end(pod), &pod.requests))
            .collect()
    };
    let mut shadow = now;
    for (at, lack) in room.lacking.iter().filter(|(_, lack)| !lack.is_empty()) {
        shadow = shadow.max(freed_by(ending(&[room.names[*at]]), lack, now));
    }
    if !room.short.is_empty() {
        let mut lack = room.short.clone();
        room.lacking.iter().for_each(|(_, l)| lack.add(l));
        shadow = shadow.max(freed_by(ending(&room.names), &lack, now));
    }
    shadow
}

/// When `pods` (expected end, requests), ending in order, have freed `lack`: the end of the
/// last one needed (of the last one, if they never free it all).
fn freed_by(mut pods: Vec<(i64, &Resources)>, lack: &Resources, now: i64) -> i64 {
    pods.sort_by_key(|(end, _)| *end);
    let mut freed = Resources::new();
    let mut at = now;
    for (end, requests) in pods {
        if lack.fits_in(&freed) {
            break;
        }
        freed.add(requests);
        at = end;
    }
    at
}
