//! Reclaim: which running gangs to evict so that a group waiting for room gets it ([`plan`]):
//! first elastic members (beyond a gang's `minMember`, or a gang of sub-groups' whole
//! instances beyond its minimum) of any queue, which yield to any gang's minimum; then whole gangs of queues above their deserved share, for a queue below its share;
//! then whole gangs of lower priority of the group's own queue. A pure function of an [`Input`]
//! built by `crate::admit::reclaim`; never a gang below its `minMember`, never a queue below
//! its share (reclaim) or guarantee, only what the group needs and never for nothing. The
//! rules, why reclaim happens at admission rather than in the preempt verb, and the search's
//! cost are in `docs/decisions/reclaim.md`. The search is in [`search`], what it has taken so
//! far in [`world`].

mod search;
mod world;

use std::fmt::Debug;

use search::serve;
use world::World;

use crate::model::resources::{Capability, Resources};

/// A queue as reclaim sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReclaimQueue {
    pub name: String,
    /// What its groups hold, not counting pods being evicted.
    pub allocated: Resources,
    pub deserved: Resources,
    pub guarantee: Resources,
    pub reclaimable: bool,
    pub capability: Capability,
}

/// A placed member of a running gang.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub uid: String,
    /// Index in [`Input::nodes`].
    pub node: usize,
    pub requests: Resources,
    pub created: i64,
}

/// A running gang that may be a victim: its placed members, none being evicted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gang<K> {
    pub key: K,
    /// Index in [`Input::queues`].
    pub queue: usize,
    pub min_member: u32,
    pub priority: i32,
    pub created: i64,
    pub members: Vec<Member>,
    /// Its elastic extras as whole instances (a gang of sub-groups,
    /// `crate::model::sub_groups`): indexes in `members`, the youngest instance first, each
    /// taken whole. `None`: each member beyond `minMember` on its own, the youngest first.
    pub instances: Option<Vec<Vec<usize>>>,
}

/// A group that waited for room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starved<K> {
    pub key: K,
    /// Index in [`Input::queues`].
    pub queue: usize,
    /// The members it needs placed to reach quorum, one entry per pod.
    pub need: Vec<Resources>,
    /// What admitting it adds to its queue.
    pub requests: Resources,
    /// Its priority: it may preempt running gangs of its own queue of lower priority.
    pub priority: i32,
    /// It waits because its queue reached its capability: only preemption inside its queue
    /// can make room for it.
    pub capped: bool,
    /// The domains of its required topology level it may go into, each as indexes in
    /// [`Input::nodes`]: it fits only inside one. `None`: anywhere.
    pub domains: Option<Vec<Vec<usize>>>,
    /// The first members of `need` as whole instances, in order, each of which fits only
    /// inside one of its own domains (a sub-group's `topologyKey`). Empty: `need` as one.
    pub instances: Vec<InstanceDomains>,
}

/// An instance of a starved group: how many of its `need` (in order) it takes, and the
/// domains it may go into, each as indexes in [`Input::nodes`] (`None`: anywhere).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceDomains {
    pub members: usize,
    pub domains: Option<Vec<Vec<usize>>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input<K> {
    pub queues: Vec<ReclaimQueue>,
    /// Free room per schedulable node, counting pods being evicted as gone.
    pub nodes: Vec<Resources>,
    /// Pods released and not yet on a node, and pods admitted by the same pass: room taken
    /// from the total but from no node in particular.
    pub in_flight: Resources,
    pub gangs: Vec<Gang<K>>,
    /// In the order to serve them.
    pub starved: Vec<Starved<K>>,
}

/// Pods of one gang to evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eviction<K> {
    pub gang: K,
    /// Index in [`Input::queues`].
    pub queue: usize,
    /// UIDs.
    pub pods: Vec<String>,
    /// All the gang's placed members (else only elastic extras beyond `minMember`).
    pub whole: bool,
}

/// What reclaim decided for one starved group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReclaimVerdict<K> {
    /// It fits once the pods already being evicted are gone: nothing more to evict.
    Fits,
    /// Evict these elastic members (beyond `minMember`, at most one entry per gang, of any
    /// queue: its own, or another reclaimable one kept at its guarantee), then it fits.
    Yield(Vec<Eviction<K>>),
    /// Evict these (at most one entry per gang, of queues above their deserved share), then
    /// it fits.
    Reclaim(Vec<Eviction<K>>),
    /// Evict these (at most one entry per gang, of its own queue and of lower priority), then
    /// it fits.
    Preempt(Vec<Eviction<K>>),
    /// No reclaim, and why (for logs; its admission reason stands).
    No(String),
}

/// One verdict per starved group, in the input's order.
pub fn plan<K: Clone + Ord + Debug>(input: &Input<K>) -> Vec<(K, ReclaimVerdict<K>)> {
    let mut world = World::new(input);
    let mut order: Vec<usize> = (0..input.gangs.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&input.gangs[a], &input.gangs[b]);
        (a.priority, std::cmp::Reverse(a.created), &a.key).cmp(&(
            b.priority,
            std::cmp::Reverse(b.created),
            &b.key,
        ))
    });
    input
        .starved
        .iter()
        .map(|s| (s.key.clone(), serve(input, &order, &mut world, s)))
        .collect()
}

/// Whether a starved group's queue, holding what `queue` says plus the group's `requests`,
/// stays within its deserved share of some resource the group `need`s room for. When this is false for every starved
/// group, [`plan`] evicts nothing: a group's short resources are among those it needs room
/// for, and a queue's allocation only shrinks once some group reclaimed from it.
pub fn may_reclaim(queue: &ReclaimQueue, need: &[Resources], requests: &Resources) -> bool {
    let after = queue.allocated.plus(requests);
    need.iter()
        .flat_map(|pod| pod.ids())
        .any(|(id, amount)| amount > 0 && after.amount(id) <= queue.deserved.amount(id))
}

#[cfg(test)]
mod tests;
