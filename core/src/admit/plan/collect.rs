//! Phase 1 of the pass: the waiting groups (and pods of a queue in no group) as
//! [`Candidate`]s, with what blocks any of them outright, what every queue's groups hold
//! (placed members, and released ones up to what their gang lacks for quorum), and what
//! running gangs' elastic members hold, node by node.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::decision::PodRef;
use crate::admit::groups::{Groups, Seen};
use crate::admit::why::Why;
use crate::limits;
use crate::model::{GroupKey, Levels, Member, Resources, State};

/// A group (or a queue-only pod) with gated members, found by [`collect`].
pub(super) struct Candidate<'s> {
    pub(super) queue: &'s str,
    /// Its queue's index in name order ([`share`] sets it); `usize::MAX` while unknown or
    /// when the queue does not exist.
    pub(super) slot: usize,
    pub(super) group: Option<&'s GroupKey>,
    pub(super) namespace: &'s str,
    /// The group's name, or the queue-only pod's.
    pub(super) name: &'s str,
    /// Its gated members; the first `missing` of them are what it needs for quorum.
    pub(super) gated: Vec<&'s Member>,
    pub(super) missing: usize,
    /// What releasing every gated member adds to the queue.
    pub(super) requests: Resources,
    pub(super) priority: i32,
    /// Creation time of its oldest gated member, in Unix seconds (0 when unknown).
    pub(super) created: i64,
    /// The PodGroup's own `maxWaitSeconds`.
    pub(super) max_wait: Option<i64>,
    /// The PodGroup's `expectedRuntimeSeconds`.
    pub(super) expected_runtime: Option<i64>,
    /// The levels its PodGroup's `topologyKey` and `preferredTopologyKey` allow, and the
    /// domain of the required level a member already runs in or names in its `nodeSelector`.
    pub(super) topology: Option<Where<'s>>,
    /// Why it cannot be considered at all (no PodGroup, too few members).
    pub(super) blocked: Option<Why>,
}

/// A candidate's identity for the pass's tie-breaks: namespace, name, whether it is a
/// queue-only pod, and its index in [`Book::candidates`] (which never decides: the rest is
/// unique).
pub(super) type Key<'s> = (&'s str, &'s str, bool, usize);

impl<'s> Candidate<'s> {
    pub(super) fn key(&self, i: usize) -> Key<'s> {
        (self.namespace, self.name, self.group.is_none(), i)
    }

    /// The requests of each gated member the gang needs placed to reach quorum.
    pub(super) fn need(&self) -> impl Iterator<Item = &'s Resources> + '_ {
        self.gated[..self.missing].iter().map(|m| &m.requests)
    }

    /// The sum of [`Candidate::need`].
    pub(super) fn needed(&self) -> Resources {
        let mut needed = Resources::new();
        self.need().for_each(|pod| needed.add(pod));
        needed
    }

    /// Its group's key, or its pod's as a group of one.
    pub(super) fn group_key(&self) -> GroupKey {
        match (self.group, self.gated.first()) {
            (Some(group), _) => group.clone(),
            (None, Some(member)) => GroupKey::lone(&member.pod),
            (None, None) => GroupKey::new(self.namespace, self.name),
        }
    }

    /// The pod of a queue in no group.
    pub(super) fn lone_pod(&self) -> Option<PodRef> {
        match (self.group, self.gated.first()) {
            (None, Some(member)) => Some(PodRef::of(&member.pod)),
            _ => None,
        }
    }
}

/// Phase 1's result.
#[derive(Default)]
pub(super) struct Book<'s> {
    /// Groups first, in key order (the cache keeps groups ordered), then queue-only pods in no
    /// particular order: the pass orders them by content ([`Candidate::key`]), and lists the
    /// groups left waiting by index, which is by key.
    pub(super) candidates: Vec<Candidate<'s>>,
    /// What each queue's groups hold, by queue name (queues that do not exist included).
    pub(super) allocated: FxHashMap<&'s str, Resources>,
    /// What each namespace's groups hold, by queue and namespace: for queues with namespace
    /// fair share only.
    pub(super) namespace_allocated: FxHashMap<&'s str, BTreeMap<String, Resources>>,
    /// Released members not yet placed (counted against free room, not any node).
    pub(super) in_flight: Resources,
    /// On a cluster that can grow, the requests of each of them: the pass places them on nodes
    /// before anything else, so that no gang is admitted into the room of new nodes that a gang
    /// admitted into them is on its way to (`crate::admit::plan::growth`).
    pub(super) in_flight_members: Vec<&'s Resources>,
    /// Groups whose `minResources` cover more members than `minMember` and whose released,
    /// unplaced members (placeholders included) fill that room ([`super::Decision::keeping`]).
    pub(super) keeping: Vec<GroupKey>,
    /// What elastic members hold: per gang with a PodGroup and more members bound than
    /// `minMember`, the newest of them beyond it, by node name, and their sum.
    pub(super) elastic_on: FxHashMap<&'s str, Resources>,
    pub(super) elastic: Resources,
}

pub(super) fn collect<'s>(state: &'s State, groups: &Groups<'s>) -> Book<'s> {
    let mut book = Book {
        candidates: Vec::with_capacity(groups.all.len()),
        ..Book::default()
    };
    for g in &groups.all {
        let members = groups.members(g);
        let quorum = g.live_quorum();
        let in_flight = hold(state, &mut book, g.queue, g.namespace, members, quorum);
        // Its room beyond minMember was laid out as pieces of an estimated shape.
        if in_flight
            && g.gang > g.min_member
            && let Some(key) = g.key
        {
            book.keeping.push(key.clone());
        }
        if g.spec.is_some() {
            elastic(&mut book, members, quorum);
        }
        let Some(mut candidate) = candidate(g.queue, g.namespace, g.name, members, quorum) else {
            continue;
        };
        candidate.blocked = unserved(state, members);
        if let Some(key) = g.key {
            candidate.group = Some(key);
            candidate.blocked = candidate.blocked.take().or(match g.spec {
                None => Some(Why::PodGroupMissing { group: key.clone() }),
                Some(spec)
                    if g.present < spec.min_member as usize
                        || !limits::gang_within_limit(spec.min_member) =>
                {
                    Some(Why::Members {
                        live: g.present - g.succeeded as usize,
                        succeeded: g.succeeded,
                        min_member: spec.min_member,
                    })
                }
                Some(_) => None,
            });
            candidate.max_wait = g.spec.and_then(|s| s.max_wait).map(seconds);
            candidate.expected_runtime = g.spec.and_then(|s| s.expected_runtime).map(seconds);
            candidate.topology = g.spec.and_then(|s| {
                let levels = Levels::of(
                    s.topology_key.as_deref(),
                    s.preferred_topology_key.as_deref(),
                    state.topologies(),
                )?;
                let pinned = if levels.required {
                    domain_of(state, members, levels.widest())
                } else {
                    Vec::new()
                };
                Some(Where { levels, pinned })
            });
        }
        book.candidates.push(candidate);
    }
    book
}

/// A member, not yet placed, that names a scheduler nobody serves: its gang would never run.
fn unserved(state: &State, members: &[Seen]) -> Option<Why> {
    members.iter().filter(|m| !m.placed).find_map(|m| {
        let scheduler = state.schedulers().unserved(&m.member.pod)?;
        Some(Why::SchedulerNotServed {
            pod: m.member.pod.name.clone(),
            scheduler: scheduler.to_owned(),
        })
    })
}

pub(super) fn seconds(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Adds what `members` (of `namespace`, a gang needing `quorum` of them placed) hold to
/// `queue`'s allocation (see the module docs); whether any of them is in flight (released,
/// not placed yet, and counted).
fn hold<'s>(
    state: &State,
    book: &mut Book<'s>,
    queue: &'s str,
    namespace: &str,
    members: &[Seen<'s>],
    quorum: u32,
) -> bool {
    let mut held = Resources::new();
    let mut placed = 0u32;
    let mut short = 0usize;
    let mut released = Resources::new();
    for m in members {
        if m.placed {
            held.add(&m.member.requests);
            placed += 1;
        } else if !m.gated {
            short += 1;
        }
    }
    // Released members count up to what the gang still lacks for quorum.
    let mut left = (quorum.saturating_sub(placed) as usize).min(short);
    for m in members {
        if left == 0 {
            break;
        }
        // Released to a scheduler nobody serves, it will never be placed: it holds no room.
        if !m.placed && !m.gated && state.schedulers().unserved(&m.member.pod).is_none() {
            released.add(&m.member.requests);
            if state.growth().is_some() {
                book.in_flight_members.push(&m.member.requests);
            }
            left -= 1;
        }
    }
    let in_flight = !released.is_empty();
    held.add(&released);
    book.in_flight.add(&released);
    if held.is_empty() {
        return in_flight;
    }
    book.allocated.entry(queue).or_default().add(&held);
    if state
        .queues()
        .get(queue)
        .is_some_and(|q| q.namespace_fair_share)
    {
        book.namespace_allocated
            .entry(queue)
            .or_default()
            .entry(namespace.to_owned())
            .or_default()
            .add(&held);
    }
    in_flight
}

/// Adds what the elastic members of a gang of `members` hold to `book` (see [`Book::elastic`]):
/// those bound beyond the `quorum` it needs, newest first, as reclaim's elastic yield takes
/// them.
fn elastic<'s>(book: &mut Book<'s>, members: &[Seen<'s>], quorum: u32) {
    let mut bound: Vec<&'s Member> = members
        .iter()
        .filter(|m| m.placed && m.member.pod.node_name.is_some())
        .map(|m| m.member)
        .collect();
    let Some(extras) = bound.len().checked_sub(quorum as usize) else {
        return;
    };
    if extras == 0 {
        return;
    }
    bound.sort_unstable_by(|a, b| {
        (std::cmp::Reverse(a.created), &a.pod.uid).cmp(&(std::cmp::Reverse(b.created), &b.pod.uid))
    });
    for m in &bound[..extras] {
        if let Some(node) = m.pod.node_name.as_deref() {
            book.elastic_on.entry(node).or_default().add(&m.requests);
            book.elastic.add(&m.requests);
        }
    }
}

/// The waiting part of a group (or a queue-only pod) called `name` in `namespace` that needs
/// `quorum` of its live `members` placed, if any member is gated; the caller fills in what
/// only a PodGroup says.
fn candidate<'s>(
    queue: &'s str,
    namespace: &'s str,
    name: &'s str,
    members: &[Seen<'s>],
    quorum: u32,
) -> Option<Candidate<'s>> {
    if !members.iter().any(|m| m.gated) {
        return None;
    }
    let mut gated: Vec<&'s Member> = Vec::with_capacity(members.len());
    let mut requests = Resources::new();
    let mut created = i64::MAX;
    for m in members.iter().filter(|m| m.gated).map(|m| m.member) {
        gated.push(m);
        requests.add(&m.requests);
        created = created.min(m.created);
    }
    let released = members.len() - gated.len();
    let missing = (quorum as usize).saturating_sub(released).min(gated.len());
    Some(Candidate {
        queue,
        slot: usize::MAX,
        group: None,
        namespace,
        name,
        missing,
        requests,
        priority: members.iter().map(|m| m.member.priority).max().unwrap_or(0),
        created,
        max_wait: None,
        expected_runtime: None,
        topology: None,
        blocked: None,
        gated,
    })
}

/// Where a gang with a topology may go: its [`Levels`], and the values of its required level's
/// keys that a member already runs in or names in its `nodeSelector` (it must join them).
#[derive(Debug, Clone)]
pub(super) struct Where<'s> {
    pub(super) levels: Levels<'s>,
    pub(super) pinned: Vec<(&'s str, &'s str)>,
}

impl Where<'_> {
    /// The pinned domain as reasons name it, if any.
    pub(super) fn pinned(&self) -> Option<String> {
        (!self.pinned.is_empty()).then(|| {
            let (keys, values): (Vec<&str>, Vec<&str>) = self.pinned.iter().copied().unzip();
            crate::model::topology::describe(&keys, &values)
        })
    }
}

/// Per key of `keys`, the value a running member's node has for it, else one a member names
/// in its `nodeSelector`.
fn domain_of<'s>(
    state: &'s State,
    members: &[Seen<'s>],
    keys: &[&'s str],
) -> Vec<(&'s str, &'s str)> {
    keys.iter()
        .filter_map(|&key| {
            let running = members.iter().find_map(|m| {
                let node = state.nodes().get(m.member.pod.node_name.as_deref()?)?;
                node.labels.get(key).map(String::as_str)
            });
            let value = running.or_else(|| {
                members
                    .iter()
                    .find_map(|m| m.member.pod.node_selector.get(key).map(String::as_str))
            })?;
            Some((key, value))
        })
        .collect()
}
