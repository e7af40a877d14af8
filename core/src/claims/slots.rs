//! Where a new claim's slots go: the shapes of the members still to place, and a greedy plan of
//! one slot per member on the feasible nodes, in what is free and unclaimed (or lent to the
//! gang from the head's reservation); members whose `nodeSelector` differs from the filtered
//! pod's (a gang's instances each in a domain of its own) on the nodes theirs allows. Reads the
//! [`State`]; the filter stores the plan.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use rustc_hash::FxHashMap;

use crate::model::{GroupKey, Node, NodeSlot, Pod, Resources, Slot, State};
use crate::policy::constraints::{Constraints, feasible};
use crate::policy::fit::{first_fit, size};
use crate::policy::placement::Strategy;

/// The requests of the `needed` members to place: this pod, then the other members not placed
/// yet, those admission released before those it holds at the gate (a gang of sub-groups'
/// instances beyond its minimum, an elastic gang's extras), biggest first; members not created
/// yet are assumed to look like this pod. Each with the `nodeSelector` its member carries.
pub(super) fn member_shapes<'s>(
    state: &'s State,
    key: &GroupKey,
    pod: &'s Pod,
    needed: usize,
) -> Vec<(Resources, &'s BTreeMap<String, String>)> {
    let mut others: Vec<(bool, Resources, &'s BTreeMap<String, String>)> = state
        .members(key)
        .filter(|p| p.uid != pod.uid && p.node_name.is_none() && !p.phase.is_terminal())
        .filter(|p| !state.ledger().reservations().contains_key(&p.uid))
        .map(|p| (p.awaits_admission(), p.requests.clone(), &p.node_selector))
        .collect();
    others.sort_by_key(|(gated, r, _)| (*gated, Reverse(size(r))));
    let own = (pod.requests.clone(), &pod.node_selector);
    let mut shapes = vec![own.clone()];
    shapes.extend(
        others
            .into_iter()
            .take(needed.saturating_sub(1))
            .map(|(_, r, selector)| (r, selector)),
    );
    while shapes.len() < needed {
        shapes.push(own.clone());
    }
    shapes.sort_by_key(|(r, _)| std::cmp::Reverse(size(r)));
    shapes
}

/// `shapes` split by the `nodeSelector` their members carry, this pod's part first, each part
/// with the constraints it is placed under: this pod's, with the part's `nodeSelector` in place
/// of its own. The members of a gang whose instances each keep to a domain carry their
/// instance's (`crate::model::sub_groups::SubGroup::topology_key`), those of any other gang
/// this pod's: one part.
pub(super) fn by_node_selector(
    shapes: Vec<(Resources, &BTreeMap<String, String>)>,
    own: &BTreeMap<String, String>,
    constraints: &Constraints,
) -> Vec<(Constraints, Vec<Resources>)> {
    let mut parts: Vec<(&BTreeMap<String, String>, Vec<Resources>)> = vec![(own, Vec::new())];
    for (requests, selector) in shapes {
        match parts.iter_mut().find(|(s, _)| *s == selector) {
            Some((_, part)) => part.push(requests),
            None => parts.push((selector, vec![requests])),
        }
    }
    parts
        .into_iter()
        .filter(|(_, part)| !part.is_empty())
        .map(|(selector, part)| {
            if selector == own {
                return (constraints.clone(), part);
            }
            let constraints = Constraints {
                node_selector: selector
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                ..constraints.clone()
            };
            (constraints, part)
        })
        .collect()
}

/// [`plan`] for each part of [`by_node_selector`] in turn: all their slots, or how many shapes
/// fitted before one did not.
pub(super) fn plan_parts(
    state: &State,
    parts: &[(Constraints, Vec<Resources>)],
    strategy: Strategy,
    lent: bool,
) -> Result<Vec<Slot>, usize> {
    let mut slots = Vec::new();
    for (constraints, shapes) in parts {
        match plan(state, shapes, constraints, strategy, lent) {
            Ok(part) => slots.extend(part),
            Err(fitted) => return Err(slots.len() + fitted),
        }
    }
    Ok(slots)
}

/// Places `shapes` greedily on feasible nodes in what is free and unclaimed. Returns the slots,
/// or how many shapes fitted before one did not.
///
/// Each shape goes to the node that fits it best (least left over for binpack, most for
/// spread), ties broken by node name so the plan is deterministic. Members of a gang mostly
/// share one shape, so for a run of `m` equal shapes one pass over the nodes' records keeps
/// the `m` best in a bounded heap, and only the node just used is re-keyed: only those `m`
/// can be chosen before the run ends, since every other node keeps its key. The choice is the
/// same as a scan of the nodes by name for the first smallest key. Per node the pass reads
/// only its record (`free`, `open`); the node itself only when names break a tie, or for
/// constraints beyond cordons and taints. What the plan takes is kept aside for the nodes it
/// used, not copied for every node.
pub(super) fn plan(
    state: &State,
    shapes: &[Resources],
    constraints: &Constraints,
    strategy: Strategy,
    lent: bool,
) -> Result<Vec<Slot>, usize> {
    // A gang the admission pass lent reserved room may plan in it.
    let reservation = lent
        .then(|| state.ledger().claims().values().find(|c| c.reservation()))
        .flatten();
    let unconstrained = constraints.is_unconstrained();
    // What a node has for the plan before it places anything there.
    let room = |node: &Node, slot: &'_ NodeSlot| -> Resources {
        let mut free = slot.free.clone();
        for lent in reservation.into_iter().flat_map(|c| &c.slots) {
            if lent.node == node.name {
                free.add(&lent.requests);
            }
        }
        free
    };
    let key = |free: &Resources, shape: &Resources| {
        let left = leftover(free, shape);
        match strategy {
            Strategy::Binpack => left,
            Strategy::Spread => -left,
        }
    };
    // What is left on the nodes the plan used, by position in `known()`.
    let mut used: FxHashMap<usize, Resources> = FxHashMap::default();
    let mut slots = Vec::with_capacity(shapes.len());
    let mut start = 0;
    while start < shapes.len() {
        let shape = &shapes[start];
        let run = shapes[start..].iter().take_while(|s| *s == shape).count();
        // The run's `run` best nodes, worst on top.
        let mut best: BinaryHeap<Candidate> = BinaryHeap::with_capacity(run + 1);
        for (i, (node, slot)) in state.nodes().known().enumerate() {
            if !(unconstrained && slot.open) && feasible(node, constraints).is_err() {
                continue;
            }
            let lent_here;
            let free = match used.get(&i) {
                Some(left) => left,
                None if reservation.is_none() => &slot.free,
                None => {
                    lent_here = room(node, slot);
                    &lent_here
                }
            };
            if !shape.fits_in(free) {
                continue;
            }
            let candidate = Candidate {
                key: key(free, shape),
                node,
                slot,
                i,
            };
            if best.len() < run {
                best.push(candidate);
            } else if let Some(mut worst) = best.peek_mut()
                && candidate < *worst
            {
                *worst = candidate;
            }
        }
        let mut heap: BinaryHeap<Reverse<Candidate>> = best.into_iter().map(Reverse).collect();
        for placed in start..start + run {
            let Some(Reverse(chosen)) = heap.pop() else {
                return Err(placed);
            };
            let Candidate { node, slot, i, .. } = chosen;
            let free = used.entry(i).or_insert_with(|| room(node, slot));
            free.sub(shape);
            if shape.fits_in(free) {
                heap.push(Reverse(Candidate {
                    key: key(free, shape),
                    ..chosen
                }));
            }
            slots.push(Slot {
                node: node.name.clone(),
                requests: shape.clone(),
            });
        }
        start += run;
    }
    Ok(slots)
}

/// A node a plan may choose, ordered by key, then name (then position, which never decides:
/// names are unique).
#[derive(Clone, Copy)]
struct Candidate<'a> {
    key: i64,
    node: &'a Node,
    slot: &'a NodeSlot,
    i: usize,
}

impl Ord for Candidate<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key
            .cmp(&other.key)
            .then_with(|| self.node.name.cmp(&other.node.name))
            .then(self.i.cmp(&other.i))
    }
}

impl PartialOrd for Candidate<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Candidate<'_> {}

/// Whether all of `shapes` fit on the feasible nodes if they were empty: if not, the gang can
/// never run on this cluster as it is. Placed by [`first_fit`], in the nodes' record order.
pub(super) fn fits_on_empty(
    state: &State,
    shapes: &[Resources],
    constraints: &Constraints,
) -> bool {
    let empty: Vec<Resources> = feasible_nodes(state, constraints)
        .map(|n| n.allocatable.clone())
        .collect();
    first_fit(&empty, shapes).is_ok()
}

fn feasible_nodes<'a>(
    state: &'a State,
    constraints: &'a Constraints,
) -> impl Iterator<Item = &'a Node> + 'a {
    let unconstrained = constraints.is_unconstrained();
    state
        .nodes()
        .known()
        .filter(move |(node, slot)| {
            (unconstrained && slot.open) || feasible(node, constraints).is_ok()
        })
        .map(|(node, _)| node)
}

/// A scalar for "how much room is left" after placing `shape` in `free`: the smallest share
/// left over the resources the shape asks for, in per-mille of what was free.
fn leftover(free: &Resources, shape: &Resources) -> i64 {
    shape
        .ids()
        .filter(|(_, need)| *need > 0)
        .map(|(id, need)| {
            let have = free.amount(id).max(1);
            (have - need) * 1000 / have
        })
        .min()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::claims::testing::*;
    use crate::testing::node_of;

    #[test]
    fn only_a_gang_lent_room_of_the_heads_reservation_may_claim_in_it() {
        let mut s = cluster(1, 8);
        reserve_on_n0(&mut s, 8_000);
        let lent = group(&mut s, "lent", 1);
        group(&mut s, "other", 1);
        let other = member(&mut s, "other", 0, 2);
        assert!(run(&mut s, &other, Instant::now()).passed.is_empty());

        s.ledger_mut().lend([lent.clone()]);
        let pod = member(&mut s, "lent", 0, 2);
        assert_eq!(run(&mut s, &pod, Instant::now()).passed, vec!["n0"]);
        assert_eq!(s.ledger().claims()[&lent].slots[0].node, "n0");
    }

    mod properties {
        use proptest::prelude::{any, prop, prop_assert_eq, proptest};

        use super::*;

        /// The plan as first written: nodes sorted by name, and for each shape a scan of every
        /// node for the first one with the smallest key. `plan` must choose exactly the same.
        fn plan_by_scan(
            state: &State,
            shapes: &[Resources],
            strategy: Strategy,
        ) -> Result<Vec<Slot>, usize> {
            let unconstrained = Constraints::default();
            let mut room: Vec<(&Node, Resources)> = feasible_nodes(state, &unconstrained)
                .map(|node| {
                    let mut free = state.free_on(node);
                    free.sub(state.claimed_on(&node.name));
                    (node, free)
                })
                .collect();
            room.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            let mut slots = Vec::new();
            for (placed, shape) in shapes.iter().enumerate() {
                let best = room
                    .iter_mut()
                    .filter(|(_, free)| shape.fits_in(free))
                    .min_by_key(|(_, free)| {
                        let left = leftover(free, shape);
                        match strategy {
                            Strategy::Binpack => left,
                            Strategy::Spread => -left,
                        }
                    });
                let Some((node, free)) = best else {
                    return Err(placed);
                };
                free.sub(shape);
                slots.push(Slot {
                    node: node.name.clone(),
                    requests: shape.clone(),
                });
            }
            Ok(slots)
        }

        proptest! {
            #[test]
            fn the_heap_plan_chooses_the_nodes_a_scan_by_name_would(
                used in prop::collection::vec((0i64..=16, 0i64..=8), 1..24),
                shapes in prop::collection::vec((1i64..=6, 0i64..=4), 1..12),
                spread in any::<bool>(),
            ) {
                let mut s = State::default();
                for (i, (cpu, gpu)) in used.iter().enumerate() {
                    s.apply_node(node_of(
                        format!("n{i}"),
                        Resources::from([("cpu", 16_000), ("nvidia.com/gpu", 8), ("pods", 110)]),
                    ));
                    s.apply_pod(Pod {
                        uid: format!("u{i}"),
                        namespace: "ns".into(),
                        name: format!("p{i}"),
                        node_name: Some(format!("n{i}")),
                        requests: Resources::from([
                            ("cpu", cpu * 1000),
                            ("nvidia.com/gpu", *gpu),
                            ("pods", 1),
                        ]),
                        ..Default::default()
                    });
                }
                // Runs of equal shapes, biggest first, as member_shapes orders them.
                let mut shapes: Vec<Resources> = shapes
                    .iter()
                    .map(|(cpu, gpu)| {
                        Resources::from([("cpu", cpu * 1000), ("nvidia.com/gpu", *gpu), ("pods", 1)])
                    })
                    .collect();
                shapes.sort_by_key(|r| std::cmp::Reverse(size(r)));
                let strategy = if spread { Strategy::Spread } else { Strategy::Binpack };
                prop_assert_eq!(
                    plan(&s, &shapes, &Constraints::default(), strategy, false),
                    plan_by_scan(&s, &shapes, strategy)
                );
            }
        }
    }
}
