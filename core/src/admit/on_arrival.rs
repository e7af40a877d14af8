//! Admission on arrival: while nothing waits, a new gang is admitted when its first member is
//! created, so its members are created without the admission gate and nobody has to remove
//! it later (one pod update and its watch events saved per member).
//!
//! The pass leaves a [`Door`] when every group it left waiting lacks only members (nothing
//! waits for room, quota, its queue or its share, and no group heads the line): the room it
//! left free, node by node, less every queue's unused guarantee and the room of members
//! released beyond their gang's quorum and not placed yet (an elastic gang's growth, which the
//! pass counts nowhere). The mutating webhook asks [`admit`] for each new pod of a group; the
//! first
//! member of a gang whose `minMember` copies of it fit in the door is admitted, and the door
//! shrinks by them until the next pass makes a new one. A pass counts the room of the gangs
//! let in before it began as in flight until the watch shows their members (they may not be
//! in its snapshot yet), and its door leaves out those let in while it decided, so no room is
//! handed out twice, past a queue's capability or another queue's guarantee. A node that
//! stops taking pods, loses allocatable or leaves after the pass, or a pod in no group and of
//! no queue (which no pass counts) that takes room on a node, shuts the door until the next
//! pass, so no gang is let in on room that is gone. Groups with a
//! `topologyKey` or `preferredTopologyKey` (their domain is chosen at release), elastic groups,
//! gangs of sub-groups (the pass chooses their instances) and groups of a queue with a
//! capability (on it or an ancestor) always take the gate.
//!
//! What an arrival costs if the estimate is wrong: members are estimated as copies of the first
//! one, so only `minMember` members, none larger than the first, are created ungated
//! ([`Arrival::let_in_another`]); a larger or an extra member takes the gate and waits for
//! the pass like any pod, and the room the door counted is all the gang can take past it.
//! Arrivals carry no placing marker by default, so the extender's filter does not see them:
//! this bound, not filter, is what keeps them inside the room the door counted.

use std::sync::Arc;
use std::time::Instant;

use crate::limits;
use crate::model::arrivals::{Arrival, Door};
use crate::model::{GroupKey, PodGroup, Resources, State, owed};
use crate::policy::fit::first_fit;

/// Whether a new member of the gang `key`, asking `requests`, is created without the
/// admission gate: its gang was admitted on arrival and has a place left for it
/// ([`Arrival::let_in_another`]), or this is its first member and the door lets `minMember`
/// copies of it in, which admits the gang. Only a gang whose PodGroup the model knows,
/// without a topology key, not elastic, without sub-groups, and whose `minResources` those
/// copies cover. Also a member of a group whose admission keeps room for members still to come
/// ([`crate::model::owed`]: admitted ahead, or on its `minResources`) while that admission
/// holds at `wall` (Unix seconds) and the room is kept for it ([`into_kept_room`]).
pub fn admit(
    state: &mut State,
    key: &GroupKey,
    name: &str,
    requests: &Resources,
    now: Instant,
    wall: i64,
) -> bool {
    if let Some(let_in) = state.ledger_mut().let_in_another(key, requests) {
        return let_in;
    }
    let Some(group) = state.groups().get(key) else {
        return false;
    };
    let Some(spec) = group.spec.clone() else {
        return false;
    };
    if spec.ahead || spec.admission_holds_at(wall) {
        return into_kept_room(state, &spec, name, requests, now, wall);
    }
    let elastic = spec.max_member.is_some_and(|max| max > spec.min_member);
    let first = !group.members.values().any(|m| m.live);
    let too_large = !limits::gang_within_limit(spec.min_member);
    let topology = spec.topology_key.is_some() || spec.preferred_topology_key.is_some();
    let split = !spec.sub_groups.is_empty();
    if topology || elastic || split || !first || too_large {
        return false;
    }
    let need = vec![requests.clone(); spec.min_member as usize];
    let mut asked = Resources::new();
    need.iter().for_each(|r| asked.add(r));
    if !owed::owed(&spec.min_resources, &asked).is_empty() {
        // More is owed than its copies ask: the pass admits it on its `minResources`.
        return false;
    }
    let shrunk = state.nodes().shrunk();
    let Some(door) = state.ledger_mut().door_mut() else {
        return false;
    };
    if !door.counted_on_current_nodes(shrunk) || !let_in(door, &spec.queue, &need) {
        return false;
    }
    state
        .ledger_mut()
        .note_arrival(key, Arrival::new(spec.queue.clone(), need, now));
    true
}

/// Whether the member `name` of `spec`'s group, asking `requests`, is let into the room the
/// group's admission keeps for members still to come: while it holds at `wall`, fewer than
/// `minMember` members came or were let in since (counting those that Succeeded), or what
/// `minResources` still owe, less what the members let in and not shown yet ask, holds it.
fn into_kept_room(
    state: &mut State,
    spec: &PodGroup,
    name: &str,
    requests: &Resources,
    now: Instant,
    wall: i64,
) -> bool {
    if !spec.admission_holds_at(wall) {
        return false;
    }
    let Some(group) = state.groups().get(&spec.key) else {
        return false;
    };
    let shown: Vec<String> = group.members.values().map(|m| m.pod.name.clone()).collect();
    let (came, came_requests) = group.came();
    let came_requests = came_requests.clone();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    let (recent, asked) = state
        .ledger_mut()
        .recent_ahead_arrivals(&spec.key, &shown, now);
    let owed = owed::owed(&spec.min_resources, &came_requests.plus(&asked));
    let admit = (came as usize).saturating_add(recent) < spec.min_member as usize
        || (!owed.is_empty() && owed::within(requests, &owed, &spec.min_resources));
    if admit {
        state
            .ledger_mut()
            .note_ahead_arrival(&spec.key, name, requests, now);
    }
    admit
}

/// Opens `door` (made by the pass that began at `now`) less the room of the arrivals let in
/// since ([`after`]), and forgets arrivals (on arrival, or of groups admitted ahead) older than
/// [`crate::model::arrivals::ARRIVAL_ROOM_KEPT`] or whose group is gone: the admission loop
/// calls it after each pass, so they do not pile up.
pub fn open(state: &mut State, door: Option<Door>, now: Instant) {
    state.ledger_mut().forget_arrivals_before(now);
    let door = door.and_then(|d| after(d, state.ledger().arrivals().values(), now));
    state.ledger_mut().set_door(door);
}

/// Takes room for `need` in `queue`, if the door lets it in.
pub fn let_in(door: &mut Door, queue: &str, need: &[Resources]) -> bool {
    if !door.queues.contains(queue) || need.is_empty() {
        return false;
    }
    let mut sum = Resources::new();
    need.iter().for_each(|r| sum.add(r));
    if !sum.fits_in(&door.total) {
        return false;
    }
    let Ok(placed) = first_fit(&door.nodes, need) else {
        return false;
    };
    let nodes = Arc::make_mut(&mut door.nodes);
    for (at, pod) in placed {
        nodes[at].sub(pod);
    }
    door.total.sub(&sum);
    true
}

/// This door, made by a pass that began at `since`, with the room of the `arrivals` let in
/// since then taken out; `None` when one of them no longer fits. The pass counted those let
/// in before it began itself ([`crate::admit::plan`]: in flight until the watch shows their
/// members).
pub fn after<'a>(
    mut door: Door,
    arrivals: impl IntoIterator<Item = &'a Arrival>,
    since: Instant,
) -> Option<Door> {
    for arrival in arrivals {
        if arrival.at <= since {
            continue;
        }
        let everyone = door.queues.insert(arrival.queue.clone());
        let fits = let_in(&mut door, &arrival.queue, &arrival.need);
        if everyone {
            door.queues.remove(&arrival.queue);
        }
        if !fits {
            return None;
        }
    }
    Some(door)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(millis: i64) -> Resources {
        Resources::from([("cpu", millis)])
    }

    fn door(nodes: &[i64], queues: &[&str]) -> Door {
        let nodes: Vec<Resources> = nodes.iter().map(|&m| cpu(m)).collect();
        let mut total = Resources::new();
        nodes.iter().for_each(|n| total.add(n));
        Door::new(
            nodes,
            total,
            queues.iter().map(|q| q.to_string()).collect(),
            0,
        )
    }

    #[test]
    fn a_gang_that_fits_node_by_node_is_let_in_and_the_door_shrinks_by_it() {
        let mut door = door(&[4_000, 4_000], &["a"]);
        assert!(let_in(&mut door, "a", &[cpu(3_000), cpu(3_000)]));
        assert!(
            !let_in(&mut door, "a", &[cpu(2_000)]),
            "1 CPU is left on each node"
        );
        assert!(let_in(&mut door, "a", &[cpu(1_000), cpu(1_000)]));
        assert!(!let_in(&mut door, "a", &[cpu(1)]));
    }

    #[test]
    fn a_gang_whose_sum_fits_but_whose_members_do_not_is_refused() {
        let mut door = door(&[2_000, 2_000], &["a"]);
        assert!(!let_in(&mut door, "a", &[cpu(3_000)]));
        assert!(let_in(&mut door, "a", &[cpu(2_000), cpu(2_000)]));
    }

    #[test]
    fn only_the_queues_the_pass_named_are_let_in() {
        let mut door = door(&[4_000], &["a"]);
        assert!(!let_in(&mut door, "capped", &[cpu(1)]));
        assert!(!let_in(&mut door, "a", &[]), "nothing to admit");
    }

    #[test]
    fn arrivals_let_in_while_the_pass_decided_take_their_room_in_its_door_and_earlier_ones_do_not()
    {
        let began = Instant::now();
        let during = Arrival::new(
            "capped".into(),
            vec![cpu(3_000)],
            began + std::time::Duration::from_millis(50),
        );
        let counted = Arrival::new("a".into(), vec![cpu(4_000)], began);
        let mut after = super::after(door(&[4_000], &["a"]), [&during, &counted], began)
            .expect("the arrival during the pass fits");
        assert!(
            !let_in(&mut after, "a", &[cpu(2_000)]),
            "3 of 4 CPU are the arrival's"
        );
        assert!(let_in(&mut after, "a", &[cpu(1_000)]));
        assert!(
            !let_in(&mut after, "capped", &[cpu(1)]),
            "the arrival's queue is not let in for it"
        );

        let too_big = Arrival {
            need: vec![cpu(5_000)],
            ..during
        };
        assert_eq!(
            super::after(door(&[4_000], &["a"]), [&too_big], began),
            None
        );
    }
}
