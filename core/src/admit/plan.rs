//! The admission pass ([`decide`]): which waiting groups leave the admission gate now, in
//! fair-share order, and why each of the others waits ([`Why`]); a pure function of the state
//! and the time. Its phases (collect, share, admit), the backfill reservation for the head of
//! the line, expected runtimes, `maxWaitSeconds` and its cost are explained in
//! `docs/decisions/admission-pass.md`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap;

use super::door::Door;
use super::groups::{Groups, Seen};
use super::room::Room;
pub use super::why::{Reason, Why};
use crate::limits;
use crate::model::{GroupKey, Member, Pod, Queue, Resources, State};
use crate::policy::fair_share::{self, QueueDemand};
use crate::policy::queue_order::{
    AdmissionPass, DominantShare, Options, QueueSnapshot, WaitingGroup,
};

/// One group (or group-of-one pod) to release, with the members still gated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// `None` for a pod with a queue but no group.
    pub group: Option<GroupKey>,
    /// Its queue.
    pub queue: String,
    pub pods: Vec<PodRef>,
    /// The UIDs of the placeholders admitted for a group admitted ahead of its members
    /// ([`crate::model::Ahead`]): the admission is recorded on the PodGroup, not on pods.
    pub placeholders: Vec<String>,
}

/// Enough of a pod to patch it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The gates on the pod as the cache saw them (the patch checks they did not change).
    pub gates: Vec<String>,
    /// The `nodeSelector` to give the pod as it is released (its own plus the topology domain
    /// admission chose for its group); `None`: leave it as it is.
    pub node_selector: Option<BTreeMap<String, String>>,
}

impl PodRef {
    fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            gates: pod.scheduling_gates.clone(),
            node_selector: None,
        }
    }

    /// Releasing `pod` into the domain `key`=`value`.
    fn into_domain(pod: &Pod, key: &str, value: &str) -> PodRef {
        let mut selector = pod.node_selector.clone();
        let missing = selector.insert(key.to_owned(), value.to_owned()).is_none();
        PodRef {
            node_selector: missing.then_some(selector),
            ..PodRef::of(pod)
        }
    }
}

/// A group that waits, and why, for status and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The group's key, or [`GroupKey::lone`] for a pod of a queue in no group.
    pub group: GroupKey,
    pub why: Why,
    /// The pod, for a pod of a queue in no group (it has no PodGroup to report on).
    pub pod: Option<PodRef>,
}

impl Waiting {
    /// The `Admitted` condition's reason.
    pub fn reason(&self) -> Reason {
        self.why.reason()
    }
}

/// One queue as the pass saw it: what the controller reports and the metrics export.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueReport {
    /// What its groups hold at the start of the pass (see the module docs).
    pub allocated: Resources,
    /// `allocated` plus what its waiting groups' gated members request.
    pub demand: Resources,
    /// Its deserved share of the cluster (the whole subtree's, for a parent).
    pub deserved: Resources,
    /// Groups (and queue-only pods) left waiting by this pass.
    pub waiting_groups: usize,
    /// Its guarantee as admission honours it: scaled down with every other queue's when
    /// together they exceed the cluster ([`fair_share::fitted_guarantees`]).
    pub guarantee: Resources,
    /// Set when its `parent` was not followed (a missing queue, or a cycle that concurrent
    /// updates made): it was shared out as a top-level queue.
    pub parent_ignored: Option<fair_share::ParentIgnored>,
}

/// Room held for the group at the head of the line (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub group: GroupKey,
    /// It waited past its `maxWaitSeconds`.
    pub overdue: bool,
    /// What it holds, per node, in node name order.
    pub nodes: Vec<(String, Resources)>,
    /// Per node of the reservation: what its members assigned there need beyond what is free
    /// there, i.e. what must free up there before it can start.
    pub lacking: Vec<(String, Resources)>,
    /// Per node of the reservation: what was free there in the pass's snapshot (allocatable
    /// less what is used and reserved; not less what the pass itself admitted). Room beyond it
    /// freed after the snapshot, and joins the reservation as it is recorded ([`super::hold`]).
    pub seen: Vec<(String, Resources)>,
}

/// What one admission pass decided.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Decision {
    /// In the order the pass admitted them (overdue groups, then fair-share order).
    pub admit: Vec<Admission>,
    /// Groups left waiting, by group key, then pods of a queue in no group left waiting.
    pub waiting: Vec<Waiting>,
    /// Every queue the cache knows, by name.
    pub queues: BTreeMap<String, QueueReport>,
    /// The head's reservation, if a group heads the line.
    pub hold: Option<Hold>,
    /// The groups of `waiting` that passed every check but free room, or but their queue's
    /// capability (`RoomWait::capped`), in the pass's order: what reclaim and priority
    /// preemption (`crate::admit::reclaim`) may make room for.
    pub short_of_room: Vec<RoomWait>,
    /// Released members not yet placed (counted against the free room, not any node).
    pub in_flight: Resources,
    /// Groups admitted into the head's reservation by their expected runtime.
    pub lent: Vec<GroupKey>,
    /// Room for admissions on arrival, when every group left waiting lacks only members
    /// ([`super::door`]).
    pub door: Option<Door>,
}

/// A group (or a pod of a queue in no group, keyed by [`GroupKey::lone`]) that waited only
/// for room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomWait {
    pub group: GroupKey,
    /// Shared by the queue's groups in one decision.
    pub queue: Arc<str>,
    /// The gated members it needs placed to reach quorum, one entry per pod.
    pub need: Vec<Resources>,
    /// What releasing every gated member adds to its queue.
    pub requests: Resources,
    pub priority: i32,
    /// It waits for its queue's capability, not room: only priority preemption inside its
    /// queue helps it.
    pub capped: bool,
    /// It is a pod of a queue in no group (`group` is its [`GroupKey::lone`]).
    pub lone: bool,
}

/// A group (or a queue-only pod) with gated members, found by [`collect`].
struct Candidate<'s> {
    queue: &'s str,
    /// Its queue's index in name order ([`share`] sets it); `usize::MAX` while unknown or
    /// when the queue does not exist.
    slot: usize,
    group: Option<&'s GroupKey>,
    namespace: &'s str,
    /// The group's name, or the queue-only pod's.
    name: &'s str,
    /// Its gated members; the first `missing` of them are what it needs for quorum.
    gated: Vec<&'s Member>,
    missing: usize,
    /// What releasing every gated member adds to the queue.
    requests: Resources,
    priority: i32,
    /// Creation time of its oldest gated member, in Unix seconds (0 when unknown).
    created: i64,
    /// The PodGroup's own `maxWaitSeconds`.
    max_wait: Option<i64>,
    /// The PodGroup's `expectedRuntimeSeconds`.
    expected_runtime: Option<i64>,
    /// The PodGroup's `topologyKey`, and the domain (value) a member already runs in or names
    /// in its `nodeSelector`, if any.
    topology: Option<(&'s str, Option<&'s str>)>,
    /// Why it cannot be considered at all (no PodGroup, too few members).
    blocked: Option<Why>,
}

/// A candidate's identity for the pass's tie-breaks: namespace, name, whether it is a
/// queue-only pod, and its index in [`Book::candidates`] (which never decides: the rest is
/// unique).
type Key<'s> = (&'s str, &'s str, bool, usize);

impl<'s> Candidate<'s> {
    fn key(&self, i: usize) -> Key<'s> {
        (self.namespace, self.name, self.group.is_none(), i)
    }

    /// The requests of each gated member the gang needs placed to reach quorum.
    fn need(&self) -> impl Iterator<Item = &'s Resources> + '_ {
        self.gated[..self.missing].iter().map(|m| &m.requests)
    }

    /// The sum of [`Candidate::need`].
    fn needed(&self) -> Resources {
        let mut needed = Resources::new();
        self.need().for_each(|pod| needed.add(pod));
        needed
    }

    /// Its group's key, or its pod's as a group of one.
    fn group_key(&self) -> GroupKey {
        match (self.group, self.gated.first()) {
            (Some(group), _) => group.clone(),
            (None, Some(member)) => GroupKey::lone(&member.pod),
            (None, None) => GroupKey::new(self.namespace, self.name),
        }
    }

    /// The pod of a queue in no group.
    fn lone_pod(&self) -> Option<PodRef> {
        match (self.group, self.gated.first()) {
            (None, Some(member)) => Some(PodRef::of(&member.pod)),
            _ => None,
        }
    }
}

/// Phase 1's result.
#[derive(Default)]
struct Book<'s> {
    /// Groups first, in key order (the cache keeps groups ordered), then queue-only pods in no
    /// particular order: the pass orders them by content ([`Candidate::key`]), and lists the
    /// groups left waiting by index, which is by key.
    candidates: Vec<Candidate<'s>>,
    /// What each queue's groups hold, by queue name (queues that do not exist included).
    allocated: FxHashMap<&'s str, Resources>,
    /// What each namespace's groups hold, by queue and namespace: for queues with namespace
    /// fair share only.
    namespace_allocated: FxHashMap<&'s str, BTreeMap<String, Resources>>,
    /// Released members not yet placed (counted against free room, not any node).
    in_flight: Resources,
}

/// Decides which gated pods to release (see the module docs).
pub fn decide(state: &State) -> Decision {
    decide_after(state, &|_| false)
}

/// [`decide`], counting the pods for which `released(uid)` is true as released although the
/// cache still shows them gated: the admission loop's patches that the watch has not shown
/// yet, so that a pass right after another does not hand out the same room twice.
pub fn decide_after(state: &State, released: &dyn Fn(&str) -> bool) -> Decision {
    decide_at(state, released, unix_now())
}

/// Now, in Unix seconds: the pass's clock.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// [`decide_after`] at `now`, in Unix seconds (waiting times and expected runtimes).
pub fn decide_at(state: &State, released: &dyn Fn(&str) -> bool, now: i64) -> Decision {
    decide_on(state, &Groups::of(state, released, now), now)
}

/// [`decide_at`] on the group facts of `state` already derived (the admission loop shares
/// them with reclaim's plan).
pub fn decide_on<'s>(state: &'s State, groups: &Groups<'s>, now: i64) -> Decision {
    let mut book = collect(state, groups);
    let shares = share(state, &mut book);
    admit(state, book, shares, now)
}

// ----- phase 1: collect

fn collect<'s>(state: &'s State, groups: &Groups<'s>) -> Book<'s> {
    let mut book = Book {
        candidates: Vec::with_capacity(groups.all.len()),
        ..Book::default()
    };
    for g in &groups.all {
        let members = groups.members(g);
        hold(
            state,
            &mut book,
            g.queue,
            g.namespace,
            members,
            g.min_member,
        );
        let Some(mut candidate) = candidate(g.queue, g.namespace, g.name, members, g.min_member)
        else {
            continue;
        };
        candidate.blocked = unserved(state, members);
        if let Some(key) = g.key {
            candidate.group = Some(key);
            candidate.blocked = candidate.blocked.take().or(match g.spec {
                None => Some(Why::PodGroupMissing { group: key.clone() }),
                Some(spec)
                    if members.len() < spec.min_member as usize
                        || !limits::gang_within_limit(spec.min_member) =>
                {
                    Some(Why::Members {
                        live: members.len(),
                        min_member: spec.min_member,
                    })
                }
                Some(_) => None,
            });
            candidate.max_wait = g.spec.and_then(|s| s.max_wait).map(seconds);
            candidate.expected_runtime = g.spec.and_then(|s| s.expected_runtime).map(seconds);
            candidate.topology = g
                .spec
                .and_then(|s| s.topology_key.as_deref())
                .map(|key| (key, domain_of(state, members, key)));
        }
        book.candidates.push(candidate);
    }
    book
}

/// A member, not yet placed, that names a scheduler nobody serves: its gang would never run.
fn unserved(state: &State, members: &[Seen]) -> Option<Why> {
    members.iter().filter(|m| !m.placed).find_map(|m| {
        let scheduler = state.schedulers.unserved(&m.member.pod)?;
        Some(Why::SchedulerNotServed {
            pod: m.member.pod.name.clone(),
            scheduler: scheduler.to_owned(),
        })
    })
}

fn seconds(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Adds what `members` (of `namespace`) hold to `queue`'s allocation (see the module docs).
fn hold<'s>(
    state: &State,
    book: &mut Book<'s>,
    queue: &'s str,
    namespace: &str,
    members: &[Seen],
    min_member: u32,
) {
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
    let mut left = (min_member.saturating_sub(placed) as usize).min(short);
    for m in members {
        if left == 0 {
            break;
        }
        // Released to a scheduler nobody serves, it will never be placed: it holds no room.
        if !m.placed && !m.gated && state.schedulers.unserved(&m.member.pod).is_none() {
            released.add(&m.member.requests);
            left -= 1;
        }
    }
    held.add(&released);
    book.in_flight.add(&released);
    if held.is_empty() {
        return;
    }
    book.allocated.entry(queue).or_default().add(&held);
    if state
        .queues
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
}

/// The waiting part of a group (or a queue-only pod) called `name` in `namespace`, if any
/// member is gated; the caller fills in what only a PodGroup says.
fn candidate<'s>(
    queue: &'s str,
    namespace: &'s str,
    name: &'s str,
    members: &[Seen<'s>],
    min_member: u32,
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
    let missing = (min_member as usize)
        .saturating_sub(released)
        .min(gated.len());
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

/// The value of the label `key` that `members` are already tied to: that of the node one runs
/// on, or else the one a member's `nodeSelector` names.
fn domain_of<'s>(state: &'s State, members: &[Seen<'s>], key: &str) -> Option<&'s str> {
    let running = members.iter().find_map(|m| {
        let node = state.nodes.get(m.member.pod.node_name.as_deref()?)?;
        node.labels.get(key).map(String::as_str)
    });
    running.or_else(|| {
        members
            .iter()
            .find_map(|m| m.member.pod.node_selector.get(key).map(String::as_str))
    })
}

// ----- phase 2: share

/// Capacity, demand and deserved share per queue the cache knows.
struct Shares {
    /// Allocatable of the nodes that take new pods.
    capacity: Resources,
    queues: BTreeMap<String, QueueReport>,
    /// What each queue's own groups deserve (the admission order's yardstick).
    own: BTreeMap<String, Resources>,
}

/// Also sets each candidate's queue slot.
fn share(state: &State, book: &mut Book) -> Shares {
    let capacity = state.schedulable_capacity();
    let mut queues: BTreeMap<String, QueueReport> = BTreeMap::new();
    for name in state.queues.keys() {
        let allocated = book
            .allocated
            .get(name.as_str())
            .cloned()
            .unwrap_or_default();
        queues.insert(
            name.clone(),
            QueueReport {
                demand: allocated.clone(),
                allocated,
                ..QueueReport::default()
            },
        );
    }
    // Slots instead of names from here on: the pass looks nothing up by name per group.
    let slot_of: FxHashMap<&str, usize> = queues
        .keys()
        .enumerate()
        .map(|(slot, name)| (name.as_str(), slot))
        .collect();
    let mut waiting = vec![Resources::new(); queues.len()];
    for c in &mut book.candidates {
        if let Some(&slot) = slot_of.get(c.queue) {
            c.slot = slot;
            waiting[slot].add(&c.requests);
        }
    }
    for (report, waiting) in queues.values_mut().zip(&waiting) {
        report.demand.add(waiting);
    }
    let demands: Vec<QueueDemand> = state
        .queues
        .values()
        .map(|q| demand_of(q, queues[&q.name].demand.clone()))
        .collect();
    // Names are unique in the cache, the only error `deserved_shares` has: unreachable, and
    // an empty result would only leave every queue deserving nothing.
    let shares = fair_share::deserved_shares(&capacity, &demands).unwrap_or_default();
    let mut own = BTreeMap::new();
    for (name, share) in shares {
        if let Some(report) = queues.get_mut(&name) {
            report.deserved = share.deserved;
            report.parent_ignored = share.parent_ignored;
        }
        own.insert(name, share.own);
    }
    Shares {
        capacity,
        queues,
        own,
    }
}

fn demand_of(queue: &Queue, demand: Resources) -> QueueDemand {
    QueueDemand {
        name: queue.name.clone(),
        parent: queue.parent.clone(),
        weight: queue.weight,
        guarantee: queue.guarantee.clone(),
        capability: queue.capability.clone(),
        demand,
    }
}

// ----- phase 3: admit

/// A dominant share of exactly the deserved share.
const FAIR: DominantShare = DominantShare {
    allocated: 1,
    deserved: 1,
    resource: None,
};

/// The admit phase's running state.
struct Pass<'s> {
    state: &'s State,
    now: i64,
    room: Room<'s>,
    /// Queues by slot (name order).
    queues: Vec<&'s Queue>,
    /// Their names, shared by the reasons and room waits of their groups.
    names: Vec<Arc<str>>,
    /// Per queue slot: what it holds, this pass's admissions included.
    held: Vec<Resources>,
    /// Per queue slot: its guarantee as the pass honours it (see [`QueueReport::guarantee`]).
    guarantees: Vec<Resources>,
    /// Per queue slot: the slots of its parent, grandparent, ... (see [`ancestry`]).
    ancestors: Vec<Vec<usize>>,
    /// Per queue slot: what it and every queue below it hold, this pass's admissions
    /// included: what a parent's capability bounds.
    subtree: Vec<Resources>,
    /// The head, and whether it is overdue.
    head: Option<(&'s GroupKey, bool)>,
    /// When the head could start at the earliest (Unix seconds), once asked.
    shadow: Option<i64>,
    admitted: Vec<usize>,
    /// Those of `admitted` placed in the head's reservation.
    lent: Vec<usize>,
    /// Per admitted group with a `topologyKey`: the domain (the key's value) chosen for it.
    domains: FxHashMap<usize, &'s str>,
    /// The first queue below its fair share whose group this pass left waiting for room that
    /// reclaim could free (see `reclaimable`): while there is one, queues at or above their
    /// share admit nothing (what they took, reclaim would take back for it).
    starved: Option<usize>,
    /// What queues hold above their deserved shares at the start of the pass: the most that
    /// reclaim could free.
    reclaimable: Resources,
    /// Per admitted candidate of extra members only (its gang has quorum): how many of its
    /// gated members, in order, fit and are released.
    extras: FxHashMap<usize, usize>,
}

impl<'s> Pass<'s> {
    /// Admits candidate `i` of queue `slot` if it may and fits, or says why not. `share` is
    /// its queue's dominant share when it was picked (`None` for an overdue group); `overdue`
    /// is `(waited, maxWait)` for one.
    #[expect(
        clippy::result_large_err,
        reason = "refusal is the common outcome and its reason is kept: boxing would allocate once per waiting group"
    )]
    fn consider(
        &mut self,
        i: usize,
        c: &Candidate<'s>,
        slot: usize,
        share: Option<DominantShare>,
        overdue: Option<(i64, i64)>,
    ) -> Result<(), Why> {
        let queue = self.queues[slot];
        if let Some(why) = over_capability(queue, &self.held[slot], &c.requests) {
            return Err(why);
        }
        for &p in &self.ancestors[slot] {
            if let Some(why) = over_capability(self.queues[p], &self.subtree[p], &c.requests) {
                return Err(why);
            }
        }
        if let (Some(share), Some(starved)) = (share, self.starved)
            && share >= FAIR
            && starved != slot
        {
            return Err(Why::Yields {
                queue: self.names[slot].clone(),
                share,
                starved: self.names[starved].clone(),
            });
        }
        // Whether reclaim could make room for it, judged on the room before this candidate
        // takes any of it for a reservation.
        let reclaim_helps = share.is_some_and(|share| share < FAIR)
            && self.starved.is_none()
            && c.needed()
                .fits_in(&self.room.available_to(slot).plus(&self.reclaimable));
        let refusal = self.place(i, c, slot, share, overdue);
        if reclaim_helps
            && refusal
                .as_ref()
                .is_err_and(|why| why.reason().short_of_room())
        {
            self.starved = Some(slot);
            // The head's lacking room comes back as soon as reclaim's evictions are done, not
            // when what runs there was expected to end: none of it may be lent.
            if self.head.is_some_and(|(head, _)| c.group == Some(head)) {
                self.shadow = Some(self.now);
            }
        }
        refusal
    }

    /// The rest of [`Pass::consider`]: room for candidate `i`, a reservation, or why not.
    #[expect(
        clippy::result_large_err,
        reason = "as for consider: the refusal's reason is kept"
    )]
    fn place(
        &mut self,
        i: usize,
        c: &Candidate<'s>,
        slot: usize,
        share: Option<DominantShare>,
        overdue: Option<(i64, i64)>,
    ) -> Result<(), Why> {
        if c.missing == 0 && c.topology.is_none() {
            return self.place_extras(i, c, slot);
        }
        // No node to place it on, now or after anything finishes: it must not head the line.
        if let Some((key, pinned)) = c.topology
            && !self.room.has_domain(key, pinned)
        {
            return Err(Why::NoDomain {
                key: key.to_owned(),
                pinned: pinned.map(str::to_owned),
                member: None,
            });
        }
        let needed = c.needed();
        let available = self.room.available_to(slot);
        // Why it does not fit the free room, built only once the pass knows it waits (moving
        // what it reports rather than copying it for every waiting group).
        let member = if !needed.fits_in(&available) {
            None
        } else {
            let need: Vec<&Resources> = c.need().collect();
            match c.topology {
                None => match self.room.place(&need) {
                    Ok(()) => {
                        self.admitted(i, c, slot);
                        return Ok(());
                    }
                    Err(member) => Some(Why::NoNode { member }),
                },
                Some((key, pinned)) => match self.room.place_in_domain(&need, key, pinned) {
                    Ok(domain) => {
                        self.domains.insert(i, domain);
                        self.admitted(i, c, slot);
                        return Ok(());
                    }
                    Err(member) => Some(Why::NoDomain {
                        key: key.to_owned(),
                        pinned: pinned.map(str::to_owned),
                        member,
                    }),
                },
            }
        };
        if self.head.is_none()
            && let Some(group) = c.group
            && self
                .room
                .reserve(&c.need().collect::<Vec<_>>(), &available, &|node| {
                    held_before(self.state, group, node)
                })
        {
            self.head = Some((group, overdue.is_some()));
            return Err(Why::Reserved {
                overdue,
                nodes: self.room.held.len(),
                held: self.room.held_total.clone(),
                room: Box::new(refused(needed, available, member)),
            });
        }
        if let Some((head, _)) = self.head
            && needed.fits_in(&available.plus(&self.room.held_total))
        {
            if let Some(runtime) = c.expected_runtime
                && c.topology.is_none()
                && self.now.saturating_add(runtime) <= self.shadow()
                && self
                    .room
                    .place_in_reservation(&c.need().collect::<Vec<_>>())
                    .is_ok()
            {
                self.admitted(i, c, slot);
                self.lent.push(i);
                return Ok(());
            }
            return Err(Why::Behind {
                head: head.clone(),
                held: self.room.held_total.clone(),
                room: Box::new(refused(needed, available, member)),
            });
        }
        let refused = refused(needed, available, member);
        match share {
            Some(share) if share >= FAIR => Err(Why::OverShare {
                queue: self.names[slot].clone(),
                share,
                room: Box::new(refused),
            }),
            _ => Err(refused),
        }
    }

    /// Extra members of a gang that has quorum: as many of them, in order, as fit the free
    /// room (each on some node) are released; they never head the line. Released all at once
    /// without room, they would race in the scheduler with gangs admitted for that room.
    #[expect(
        clippy::result_large_err,
        reason = "as for consider: the refusal's reason is kept"
    )]
    fn place_extras(&mut self, i: usize, c: &Candidate<'s>, slot: usize) -> Result<(), Why> {
        let available = self.room.available_to(slot);
        let mut taken = Resources::new();
        let mut released = 0;
        for member in &c.gated {
            let with = taken.plus(&member.requests);
            if !with.fits_in(&available) || self.room.place(&[&member.requests]).is_err() {
                break;
            }
            taken = with;
            released += 1;
        }
        if released == 0 {
            let first = c
                .gated
                .first()
                .map(|m| m.requests.clone())
                .unwrap_or_default();
            return Err(refused(
                first.clone(),
                available,
                Some(Why::NoNode { member: first }),
            ));
        }
        self.extras.insert(i, released);
        self.admitted_with(i, slot, &taken);
        Ok(())
    }

    fn admitted(&mut self, i: usize, c: &Candidate<'s>, slot: usize) {
        self.admitted_with(i, slot, &c.requests);
    }

    /// Records candidate `i` of queue `slot` admitted, holding `requests`.
    fn admitted_with(&mut self, i: usize, slot: usize, requests: &Resources) {
        self.held[slot].add(requests);
        for &p in &self.ancestors[slot] {
            self.subtree[p].add(requests);
        }
        self.room
            .set_unused_guarantee(slot, &self.guarantees[slot], &self.held[slot]);
        self.admitted.push(i);
    }

    /// When the head could start at the earliest (see the module docs), computed once.
    fn shadow(&mut self) -> i64 {
        if let Some(at) = self.shadow {
            return at;
        }
        let at = shadow_time(self.state, &self.room, self.now);
        self.shadow = Some(at);
        at
    }
}

/// Why a group does not fit the free room: the sum of what it `needed` exceeds what was
/// `available` to it, or else why its members could not be `placed` (no node, no domain).
fn refused(needed: Resources, available: Resources, placed: Option<Why>) -> Why {
    placed.unwrap_or(Why::Room { needed, available })
}

/// Whether `group` held room on `node` as the head of the line after the previous pass (the
/// loop keeps a head's reservation as a claim without a deadline, see [`super`]).
fn held_before(state: &State, group: &GroupKey, node: &str) -> bool {
    state
        .ledger
        .claims
        .get(group)
        .is_some_and(|c| c.reservation() && c.slots.iter().any(|s| s.node == node))
}

/// The time by which the pods on the head's reserved nodes are expected to have freed what
/// the head still lacks there (the latest such node), and pods anywhere what its queue's
/// budget could not hold ([`Room::short`], with what the nodes lack: the budget grows by what
/// ends anywhere). A pod whose start or whose group's runtime is unknown may end any moment.
fn shadow_time(state: &State, room: &Room, now: i64) -> i64 {
    let end = |pod: &Pod| {
        let runtime = GroupKey::of(pod)
            .and_then(|k| state.groups.get(&k))
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

/// Per queue (by slot): the slots of its ancestors, nearest first. A parent that does not
/// exist ends the chain, and so does a cycle (which the webhook refuses).
fn ancestry(queues: &[&Queue]) -> Vec<Vec<usize>> {
    let slot_of: FxHashMap<&str, usize> = queues
        .iter()
        .enumerate()
        .map(|(slot, q)| (q.name.as_str(), slot))
        .collect();
    queues
        .iter()
        .enumerate()
        .map(|(slot, q)| {
            let mut chain: Vec<usize> = Vec::new();
            let mut parent = q.parent.as_deref();
            while let Some(&p) = parent.and_then(|name| slot_of.get(name)) {
                if p == slot || chain.contains(&p) {
                    break;
                }
                chain.push(p);
                parent = queues[p].parent.as_deref();
            }
            chain
        })
        .collect()
}

/// The capability bounds `queue` would exceed, holding `holds`, by taking `requests`.
fn over_capability(queue: &Queue, holds: &Resources, requests: &Resources) -> Option<Why> {
    let over: Vec<_> = queue
        .capability
        .iter()
        .filter(|(id, limit)| holds.amount(*id).saturating_add(requests.amount(*id)) > *limit)
        .map(|(id, limit)| (id, holds.amount(id), requests.amount(id), limit))
        .collect();
    (!over.is_empty()).then(|| Why::Capability {
        queue: queue.name.clone(),
        over,
    })
}

fn admit(state: &State, book: Book, shares: Shares, now: i64) -> Decision {
    let Shares {
        capacity,
        queues,
        own,
    } = shares;
    let (names, mut reports): (Vec<String>, Vec<QueueReport>) = queues.into_iter().unzip();
    let by_slot: Vec<&Queue> = names.iter().map(|n| state.queues[n].as_ref()).collect();
    let held: Vec<Resources> = reports.iter().map(|r| r.allocated.clone()).collect();
    let ancestors = ancestry(&by_slot);
    let guarantees = fair_share::fitted_guarantees(
        &by_slot.iter().map(|q| &q.guarantee).collect::<Vec<_>>(),
        &ancestors,
        &capacity,
    );
    let mut room = Room::new(state, &book.in_flight, by_slot.len());
    for (slot, guarantee) in guarantees.iter().enumerate() {
        room.set_unused_guarantee(slot, guarantee, &held[slot]);
    }
    let mut subtree = held.clone();
    for (slot, parents) in ancestors.iter().enumerate() {
        for &p in parents {
            subtree[p].add(&held[slot]);
        }
    }
    let mut reclaimable = Resources::new();
    for report in &reports {
        reclaimable.add(&report.allocated.minus(&report.deserved).positive());
    }
    let mut pass = Pass {
        state,
        now,
        room,
        queues: by_slot,
        names: names.iter().map(|n| Arc::from(n.as_str())).collect(),
        held,
        guarantees,
        ancestors,
        subtree,
        head: None,
        shadow: None,
        admitted: Vec::new(),
        lent: Vec::new(),
        domains: FxHashMap::default(),
        starved: None,
        reclaimable,
        extras: FxHashMap::default(),
    };
    let candidates = &book.candidates;
    // Why each candidate left waiting waits (by candidate), and those in the pass's order.
    let mut whys: Vec<Option<Why>> = vec![None; candidates.len()];
    let mut waited: Vec<usize> = Vec::with_capacity(candidates.len());
    let mut wait = |i: usize, why: Why| {
        whys[i] = Some(why);
        waited.push(i);
    };
    // Per candidate: whether the pass considers it (its queue exists and is open).
    let mut open = vec![false; candidates.len()];
    // `(deadline, key, waited, maxWait)` of the overdue ones.
    let mut overdue: Vec<(i64, Key, i64, i64)> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        if let Some(why) = &c.blocked {
            wait(i, why.clone());
            continue;
        }
        let Some(&queue) = pass.queues.get(c.slot) else {
            let queue = c.queue.to_owned();
            wait(i, Why::QueueMissing { queue });
            continue;
        };
        if !queue.open {
            let queue = queue.name.clone();
            wait(i, Why::QueueClosed { queue });
            continue;
        }
        let max_wait = c.max_wait.or(queue.max_wait.map(seconds));
        if let Some(max_wait) = max_wait
            && c.created > 0
            && now - c.created > max_wait
        {
            overdue.push((c.created + max_wait, c.key(i), now - c.created, max_wait));
        } else {
            open[i] = true;
        }
    }

    // Overdue groups first, the most overdue first (then by key).
    overdue.sort_unstable();
    for &(_, key, waited, max_wait) in &overdue {
        let i = key.3;
        let c = &candidates[i];
        if let Err(why) = pass.consider(i, c, c.slot, None, Some((waited, max_wait))) {
            wait(i, why);
        }
    }

    // Then weighted DRF, each queue starting from what it holds after the overdue ones.
    let mut snapshots: Vec<Option<QueueSnapshot<Key>>> = vec![None; pass.queues.len()];
    for (i, c) in candidates.iter().enumerate() {
        if !open[i] {
            continue;
        }
        let queue = pass.queues[c.slot];
        snapshots[c.slot]
            .get_or_insert_with(|| QueueSnapshot {
                priority: queue.priority,
                allocated: pass.held[c.slot].clone(),
                namespace_fair_share: queue.namespace_fair_share,
                namespace_allocated: book
                    .namespace_allocated
                    .get(queue.name.as_str())
                    .cloned()
                    .unwrap_or_default(),
                ..QueueSnapshot::new(
                    queue.name.clone(),
                    own.get(&queue.name).cloned().unwrap_or_default(),
                )
            })
            .waiting
            .push(WaitingGroup {
                key: c.key(i),
                // Read only with namespace fair share: no copy per group otherwise.
                namespace: if queue.namespace_fair_share {
                    c.namespace.to_owned()
                } else {
                    String::new()
                },
                requests: c.requests.clone(),
                priority: c.priority,
                created: c.created,
            });
    }
    let snapshots: Vec<QueueSnapshot<Key>> = snapshots.into_iter().flatten().collect();
    let mut order = AdmissionPass::new(&snapshots, Options::default());
    while let Some(pick) = order.next() {
        let i = pick.group.key.3;
        let c = &candidates[i];
        if let Err(why) = pass.consider(i, c, c.slot, Some(pick.queue_share), None) {
            order.skip_last();
            wait(i, why);
        }
    }

    let mut decision = Decision {
        hold: pass.head.map(|(group, overdue)| Hold {
            group: group.clone(),
            overdue,
            nodes: pass
                .room
                .held
                .iter()
                .map(|(at, held)| (pass.room.names[*at].to_owned(), held.clone()))
                .collect(),
            lacking: pass
                .room
                .lacking
                .iter()
                .map(|(at, lack)| (pass.room.names[*at].to_owned(), lack.clone()))
                .collect(),
            seen: pass
                .room
                .held
                .iter()
                .filter_map(|(at, _)| {
                    let name = pass.room.names[*at];
                    let node = state.nodes.slot(name)?.node.as_ref()?;
                    Some((name.to_owned(), state.free_on(node)))
                })
                .collect(),
        }),
        ..Decision::default()
    };
    for &i in &pass.admitted {
        let c = &candidates[i];
        let released = pass.extras.get(&i).map_or(&c.gated[..], |&n| &c.gated[..n]);
        let (placeholders, gated): (Vec<&Member>, Vec<&Member>) =
            released.iter().partition(|m| m.pod.is_placeholder());
        let pods = match (c.topology, pass.domains.get(&i)) {
            (Some((key, _)), Some(value)) => gated
                .iter()
                .map(|m| PodRef::into_domain(&m.pod, key, value))
                .collect(),
            _ => gated.iter().map(|m| PodRef::of(&m.pod)).collect(),
        };
        decision.admit.push(Admission {
            group: c.group.cloned(),
            queue: c.queue.to_owned(),
            pods,
            placeholders: placeholders.iter().map(|m| m.pod.uid.clone()).collect(),
        });
    }
    for &i in &waited {
        let c = &candidates[i];
        let reason = whys[i].as_ref().map(Why::reason);
        let capped = reason == Some(Reason::CapabilityReached);
        let listed = capped || reason.is_some_and(Reason::short_of_room);
        if listed {
            decision.short_of_room.push(RoomWait {
                group: c.group_key(),
                queue: pass.names[c.slot].clone(),
                need: c.need().cloned().collect(),
                requests: c.requests.clone(),
                priority: c.priority,
                capped,
                lone: c.group.is_none(),
            });
        }
    }
    decision.in_flight = book.in_flight.clone();
    decision.lent = pass
        .lent
        .iter()
        .filter_map(|&i| candidates[i].group.cloned())
        .collect();
    // By group key, which is by index for groups (see [`Book::candidates`]).
    let mut order = waited;
    order.sort_unstable();
    decision.waiting.reserve(order.len());
    for i in order {
        let c = &candidates[i];
        if let Some(report) = reports.get_mut(c.slot) {
            report.waiting_groups += 1;
        }
        if let Some(why) = whys[i].take() {
            decision.waiting.push(Waiting {
                group: c.group_key(),
                why,
                pod: c.lone_pod(),
            });
        }
    }
    for (report, guarantee) in reports.iter_mut().zip(pass.guarantees) {
        report.guarantee = guarantee;
    }
    let only_members_lack = decision.hold.is_none()
        && decision.waiting.iter().all(|w| {
            matches!(
                w.why,
                Why::Members { .. } | Why::PodGroupMissing { .. } | Why::SchedulerNotServed { .. }
            )
        });
    if only_members_lack {
        let by_slot = &pass.queues;
        let uncapped = |slot: usize| by_slot[slot].capability.is_unbounded();
        let queues = by_slot
            .iter()
            .enumerate()
            .filter(|&(slot, q)| {
                q.open && uncapped(slot) && pass.ancestors[slot].iter().all(|&a| uncapped(a))
            })
            .map(|(_, q)| q.name.clone())
            .collect();
        let (nodes, total) = pass.room.left_for_arrivals();
        decision.door = Some(Door::new(nodes, total, queues, state.nodes.shrunk()));
    }
    decision.queues = names.into_iter().zip(reports).collect();
    decision
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::names::ADMISSION_GATE;
    use crate::model::{Node, PodGroup, PodPhase, Reservation, ResourceId};
    use crate::policy::fair_share::Capability;
    use std::time::Duration;

    fn pod(uid: &str, group: Option<&str>, gated: bool, created: i64) -> Pod {
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

    fn group_in(s: &mut State, name: &str, min: u32, queue: &str) {
        s.apply_pod_group(PodGroup {
            schedule_timeout: Duration::from_secs(60),
            ..PodGroup::new(GroupKey::new("ns", name), min, queue)
        });
    }

    fn group(s: &mut State, name: &str, min: u32) {
        group_in(s, name, min, "q");
    }

    /// `count` gated pods of `cpu` millicores in group `name` of `queue`, created at `created`.
    fn gang(s: &mut State, name: &str, queue: &str, count: u32, cpu: i64, created: i64) {
        group_in(s, name, count, queue);
        for i in 0..count {
            s.apply_pod(Pod {
                requests: Resources::from([("cpu", cpu), ("pods", 1)]),
                ..pod(&format!("{name}-{i}"), Some(name), true, created)
            });
        }
    }

    fn node(s: &mut State, name: &str, cpu: i64) {
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
    fn cluster() -> State {
        let mut s = State::default();
        s.apply_queue(Queue::new("q"));
        node(&mut s, "n1", 8_000);
        s
    }

    fn admitted(d: &Decision) -> Vec<String> {
        d.admit
            .iter()
            .map(|a| match &a.group {
                Some(g) => g.name.to_string(),
                None => a.pods[0].name.clone(),
            })
            .collect()
    }

    fn waiting<'d>(d: &'d Decision, name: &str) -> &'d Waiting {
        d.waiting
            .iter()
            .find(|w| &*w.group.name == name)
            .unwrap_or_else(|| panic!("{name} is not waiting: {d:?}"))
    }

    fn why(d: &Decision, name: &str) -> String {
        waiting(d, name).why.to_string()
    }

    fn reason(d: &Decision, name: &str) -> Reason {
        waiting(d, name).reason()
    }

    /// Binds every released, unbound pod to `n1`, as the scheduler would.
    fn bind_released(s: &mut State) {
        let released: Vec<Pod> = s
            .pods
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
    fn release(s: &mut State, d: &Decision) {
        for a in &d.admit {
            for p in &a.pods {
                let pod = s.pods[&p.uid].as_ref().clone();
                s.apply_pod(Pod {
                    scheduling_gates: vec![],
                    ..pod
                });
            }
        }
    }

    #[test]
    fn a_pass_that_leaves_groups_waiting_only_for_members_opens_the_door_to_uncapped_open_queues() {
        let mut s = cluster();
        let mut capped = Queue::new("capped");
        capped.capability.set("cpu", 4_000);
        s.apply_queue(capped);
        let mut closed = Queue::new("closed");
        closed.open = false;
        s.apply_queue(closed);
        group(&mut s, "g", 3);
        s.apply_pod(pod("a", Some("g"), true, 10));
        let mut door = decide(&s).door.expect("only members are missing");
        assert!(!door.admit("capped", &[Resources::from([("cpu", 1)])]));
        assert!(!door.admit("closed", &[Resources::from([("cpu", 1)])]));
        assert!(door.admit("q", &vec![Resources::from([("cpu", 1_000)]); 8]));
        assert!(
            !door.admit("q", &[Resources::from([("cpu", 1)])]),
            "the 8 CPUs of n1 are taken"
        );
    }

    #[test]
    fn a_group_waiting_for_room_closes_the_door() {
        let mut s = cluster();
        gang(&mut s, "big", "q", 3, 4_000, 10);
        let d = decide(&s);
        assert_eq!(reason(&d, "big"), Reason::DoesNotFit);
        assert_eq!(d.door, None);
    }

    #[test]
    fn the_first_member_admits_its_gang_on_arrival_and_its_later_members_follow_it() {
        let now = std::time::Instant::now();
        let cpu = Resources::from([("cpu", 2_000), ("pods", 1)]);
        let mut s = cluster();
        group(&mut s, "g", 3);
        group(&mut s, "late", 2);
        s.apply_pod(pod("late-0", Some("late"), true, 1));
        let mut zoned = PodGroup::new(GroupKey::new("ns", "zoned"), 1, "q");
        zoned.topology_key = Some("zone".into());
        s.apply_pod_group(zoned);
        let d = decide(&s);
        crate::admit::hold::record(&mut s, None, &d, now);

        let g = GroupKey::new("ns", "g");
        assert!(
            s.admit_on_arrival(&g, "p", &cpu, now, 0),
            "3 × 2 of 8 CPUs fit"
        );
        assert!(
            s.admit_on_arrival(&g, "p", &cpu, now, 0),
            "a later member of g"
        );
        assert!(
            !s.admit_on_arrival(&GroupKey::new("ns", "late"), "p", &cpu, now, 0),
            "late's first member arrived gated"
        );
        assert!(!s.admit_on_arrival(&GroupKey::new("ns", "zoned"), "p", &cpu, now, 0));
        assert!(!s.admit_on_arrival(&GroupKey::new("ns", "unknown"), "p", &cpu, now, 0));
        group(&mut s, "h", 2);
        assert!(
            !s.admit_on_arrival(&GroupKey::new("ns", "h"), "p", &cpu, now, 0),
            "2 of 8 CPUs are left"
        );

        // The next pass does not see g's members yet: its door keeps their room out.
        let d = decide(&s);
        crate::admit::hold::record(&mut s, None, &d, now);
        assert!(!s.admit_on_arrival(&GroupKey::new("ns", "h"), "p", &cpu, now, 0));
        let later = now + crate::admit::door::ARRIVAL_ROOM_KEPT;
        crate::admit::hold::record(&mut s, None, &d, later);
        assert!(s.admit_on_arrival(&GroupKey::new("ns", "h"), "p", &cpu, later, 0));
    }

    #[test]
    fn a_gang_admitted_on_arrival_lets_in_min_member_pods_no_larger_than_its_first_and_gates_the_rest()
     {
        let now = std::time::Instant::now();
        let nothing = Resources::from([("pods", 1)]);
        let gpus = Resources::from([("cpu", 1_000), ("nvidia.com/gpu", 8), ("pods", 1)]);
        let mut s = cluster();
        group(&mut s, "g", 2);
        let d = decide(&s);
        crate::admit::hold::record(&mut s, None, &d, now);
        let g = GroupKey::new("ns", "g");
        assert!(
            s.admit_on_arrival(&g, "first", &nothing, now, 0),
            "two pods asking nothing fit"
        );
        assert!(
            !s.admit_on_arrival(&g, "big", &gpus, now, 0),
            "a member larger than the first takes the gate"
        );
        assert!(s.admit_on_arrival(&g, "second", &nothing, now, 0));
        for i in 0..50 {
            assert!(
                !s.admit_on_arrival(&g, &format!("extra-{i}"), &nothing, now, 0),
                "members beyond minMember take the gate"
            );
        }
    }

    #[test]
    fn a_node_that_goes_not_ready_after_the_pass_shuts_the_door_until_the_next_pass() {
        let now = std::time::Instant::now();
        let cpu = Resources::from([("cpu", 2_000), ("pods", 1)]);
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        group(&mut s, "g", 3);
        let d = decide(&s);
        crate::admit::hold::record(&mut s, None, &d, now);
        let mut not_ready = s.nodes["n2"].clone();
        not_ready.not_ready = true;
        s.apply_node(not_ready.clone());
        let g = GroupKey::new("ns", "g");
        assert!(
            !s.admit_on_arrival(&g, "p", &cpu, now, 0),
            "the door counted n2's room"
        );

        let d = decide(&s);
        crate::admit::hold::record(&mut s, None, &d, now);
        assert!(
            s.admit_on_arrival(&g, "p", &cpu, now, 0),
            "3 × 2 of n1's 8 CPUs fit"
        );

        s.apply_node(not_ready);
        group(&mut s, "h", 1);
        assert!(
            s.admit_on_arrival(&GroupKey::new("ns", "h"), "p", &cpu, now, 0),
            "an update that takes no room away leaves the door open"
        );
        s.delete_node("n1");
        group(&mut s, "i", 1);
        assert!(!s.admit_on_arrival(&GroupKey::new("ns", "i"), "p", &cpu, now, 0));
    }
    #[test]
    fn a_gang_is_released_only_once_min_member_pods_exist_and_then_all_at_once() {
        let mut s = cluster();
        group(&mut s, "g", 3);
        s.apply_pod(pod("a", Some("g"), true, 10));
        s.apply_pod(pod("b", Some("g"), true, 11));
        let d = decide(&s);
        assert!(d.admit.is_empty());
        assert_eq!(
            why(&d, "g"),
            "2 of minMember 3 pods exist; waiting for the rest before releasing any"
        );
        s.apply_pod(pod("c", Some("g"), true, 12));
        let d = decide(&s);
        let uids: Vec<&str> = d.admit[0].pods.iter().map(|p| p.uid.as_str()).collect();
        assert_eq!(uids, vec!["a", "b", "c"]);
    }

    #[test]
    fn a_gang_without_a_pod_group_waits_and_says_what_to_create() {
        let mut s = cluster();
        s.apply_pod(pod("a", Some("ghost"), true, 1));
        let d = decide(&s);
        assert!(d.admit.is_empty());
        assert!(why(&d, "ghost").starts_with("no PodGroup ns/ghost: create one"));
    }

    #[test]
    fn a_pod_with_a_queue_but_no_group_is_released_alone() {
        let mut s = cluster();
        s.apply_pod(pod("solo", None, true, 5));
        s.apply_pod(pod("free", None, false, 1));
        let d = decide(&s);
        assert_eq!(d.admit.len(), 1);
        assert_eq!(d.admit[0].group, None);
        assert_eq!(d.admit[0].pods[0].uid, "solo");
    }

    #[test]
    fn finished_members_do_not_count_and_released_groups_are_oldest_first() {
        let mut s = cluster();
        group(&mut s, "new", 1);
        group(&mut s, "old", 2);
        s.apply_pod(pod("n", Some("new"), true, 50));
        s.apply_pod(pod("o1", Some("old"), true, 10));
        s.apply_pod(Pod {
            phase: PodPhase::Succeeded,
            ..pod("o2", Some("old"), false, 10)
        });
        assert_eq!(decide(&s).admit.len(), 1, "old has one live member of two");
        s.apply_pod(pod("o3", Some("old"), false, 11));
        assert_eq!(admitted(&decide(&s)), vec!["old", "new"]);
    }

    #[test]
    fn capability_caps_a_queue_even_when_the_cluster_is_idle() {
        let mut s = cluster();
        s.apply_queue(Queue {
            capability: Capability::from([("cpu", 4_000)]),
            ..Queue::new("q")
        });
        gang(&mut s, "a", "q", 2, 2_000, 1);
        gang(&mut s, "b", "q", 2, 2_000, 2);
        let d = decide(&s);
        assert_eq!(admitted(&d), vec!["a"]);
        assert_eq!(
            why(&d, "b"),
            "queue q has reached its capability: cpu 4 held + 4 requested > capability 4"
        );
        // Admitted but not bound yet still counts: the next pass does not admit b either.
        release(&mut s, &d);
        assert!(decide(&s).admit.is_empty());
        bind_released(&mut s);
        assert!(decide(&s).admit.is_empty());
        assert_eq!(decide(&s).queues["q"].allocated.get("cpu"), 4_000);
    }

    #[test]
    fn pods_just_released_count_as_released_before_the_watch_shows_it() {
        let mut s = cluster();
        gang(&mut s, "a", "q", 2, 3_000, 1);
        gang(&mut s, "b", "q", 2, 3_000, 2);
        let d = decide(&s);
        assert_eq!(admitted(&d), vec!["a"]);
        let patched = |uid: &str| uid.starts_with("a-");
        let d = decide_after(&s, &patched);
        assert!(d.admit.is_empty(), "a's room is not handed to b: {d:?}");
        assert_eq!(reason(&d, "b"), Reason::Reserved, "b heads the line");
        assert!(why(&d, "b").ends_with(
            "does not fit now: cpu 6 needed, 2 free (free room counts other queues' unused guarantees as taken)"
        ));
    }

    #[test]
    fn a_queue_borrows_idle_capacity_beyond_its_deserved_share() {
        let mut s = cluster();
        s.apply_queue(Queue::new("other"));
        gang(&mut s, "a", "q", 2, 2_000, 1);
        gang(&mut s, "b", "q", 2, 2_000, 2);
        let d = decide(&s);
        assert_eq!(admitted(&d), vec!["a", "b"], "other asks for nothing");
        assert_eq!(d.queues["q"].deserved.get("cpu"), 8_000);
    }

    #[test]
    fn a_group_that_does_not_fit_now_waits_with_the_numbers_and_smaller_ones_pass() {
        let mut s = cluster();
        gang(&mut s, "big", "q", 3, 3_000, 1);
        gang(&mut s, "small", "q", 2, 1_000, 2);
        let d = decide(&s);
        assert_eq!(admitted(&d), vec!["small"]);
        assert_eq!(
            why(&d, "big"),
            "does not fit now: cpu 9 needed, 8 free (free room counts other queues' unused guarantees as taken)"
        );
    }

    #[test]
    fn a_not_ready_or_unreachable_node_is_neither_free_room_nor_shared() {
        let mut s = cluster();
        s.apply_node(Node {
            name: "gone".into(),
            allocatable: Resources::from([("cpu", 8_000), ("pods", 110)]),
            not_ready: true,
            ..Node::default()
        });
        s.apply_node(Node {
            name: "cut-off".into(),
            allocatable: Resources::from([("cpu", 8_000), ("pods", 110)]),
            taints: vec![crate::model::Taint {
                key: "node.kubernetes.io/unreachable".into(),
                value: None,
                effect: crate::model::TaintEffect::NoExecute,
            }],
            ..Node::default()
        });
        gang(&mut s, "big", "q", 1, 9_000, 1);
        let d = decide(&s);
        assert_eq!(reason(&d, "big"), Reason::DoesNotFit);
        assert_eq!(
            d.queues["q"].deserved.get("cpu"),
            8_000,
            "only n1 is shared"
        );
    }

    #[test]
    fn each_member_must_fit_on_some_node_not_only_in_the_sum() {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        // Two members of 5 CPUs leave 3 on each node: 6 free in all, but nowhere 6 together.
        gang(&mut s, "wide", "q", 2, 5_000, 1);
        gang(&mut s, "tall", "q", 1, 6_000, 2);
        let d = decide(&s);
        assert_eq!(admitted(&d), vec!["wide"]);
        assert_eq!(
            why(&d, "tall"),
            "first in line: holds a reservation of cpu: 3, pods: 1 on 1 nodes that groups behind it may not take; does not fit now: no schedulable node has room for a member requesting cpu: 6, pods: 1"
        );
    }

    #[test]
    fn a_guarantee_stays_available_to_an_idle_queues_first_job() {
        let mut s = cluster();
        s.apply_queue(Queue {
            guarantee: Resources::from([("cpu", 4_000)]),
            ..Queue::new("reserved")
        });
        for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
            gang(&mut s, name, "q", 1, 2_000, i as i64);
        }
        let d = decide(&s);
        assert_eq!(admitted(&d), vec!["a", "b"], "4 of 8 CPUs are reserved");
        assert_eq!(reason(&d, "c"), Reason::Reserved);
        assert!(
            why(&d, "c").contains("holds a reservation of pods: 1 on 1 nodes"),
            "the head holds none of the guaranteed room: {}",
            why(&d, "c")
        );
        assert!(why(&d, "c").contains("does not fit now: cpu 2 needed, 0 free"));
        assert_eq!(reason(&d, "d"), Reason::DoesNotFit);
        release(&mut s, &d);
        bind_released(&mut s);
        gang(&mut s, "first", "reserved", 2, 2_000, 9);
        assert_eq!(admitted(&decide(&s)), vec!["first"]);
    }

    #[test]
    fn a_guarantee_larger_than_the_cluster_holds_back_no_more_than_the_cluster() {
        let mut s = cluster();
        s.apply_queue(Queue {
            guarantee: Resources::from([("cpu", 1_000_000_000_000_000_000)]),
            ..Queue::new("hog")
        });
        s.apply_queue(Queue {
            guarantee: Resources::from([("cpu", 4_000)]),
            ..Queue::new("reserved")
        });
        gang(&mut s, "a", "q", 1, 1_000, 1);
        let d = decide(&s);
        // The two guarantees, scaled to fit the cluster's 8 CPUs together, leave less than
        // a CPU: the group waits, but the hog's guarantee is no longer a quintillion.
        assert!(admitted(&d).is_empty());
        let hog = &d.queues["hog"].guarantee;
        let reserved = &d.queues["reserved"].guarantee;
        assert!(
            hog.get("cpu") + reserved.get("cpu") <= 8_000,
            "{hog:?} {reserved:?}"
        );
        assert!(reserved.get("cpu") < 4_000, "scaled by the same factor");
    }

    #[test]
    fn a_higher_priority_group_goes_before_older_ones_in_its_queue() {
        let mut s = cluster();
        s.apply_queue(Queue {
            capability: Capability::from([("cpu", 2_000)]),
            ..Queue::new("q")
        });
        gang(&mut s, "old", "q", 2, 1_000, 1);
        gang(&mut s, "urgent", "q", 2, 1_000, 5);
        let high = s.pods["urgent-1"].as_ref().clone();
        s.apply_pod(Pod {
            priority: 1_000,
            ..high
        });
        let d = decide(&s);
        assert_eq!(admitted(&d), vec!["urgent"]);
        assert!(why(&d, "old").starts_with("queue q has reached its capability"));
    }

    #[test]
    fn weights_of_two_to_one_interleave_picks_two_to_one() {
        let mut s = State::default();
        node(&mut s, "n1", 12_000);
        s.apply_queue(Queue {
            weight: 2,
            ..Queue::new("heavy")
        });
        s.apply_queue(Queue::new("light"));
        for i in 0..12 {
            gang(&mut s, &format!("h{i:02}"), "heavy", 1, 1_000, i);
            gang(&mut s, &format!("l{i:02}"), "light", 1, 1_000, i);
        }
        let d = decide(&s);
        let order = admitted(&d);
        assert_eq!(order.len(), 12, "12 CPUs, 1 CPU each");
        let heavy = order.iter().filter(|n| n.starts_with('h')).count();
        assert_eq!((heavy, order.len() - heavy), (8, 4));
        let first_six: String = order[..6].iter().map(|n| &n[..1]).collect();
        assert_eq!(first_six.matches('h').count(), 4, "{order:?}");
        assert_eq!(d.queues["heavy"].deserved.get("cpu"), 8_000);
        assert_eq!(d.queues["light"].deserved.get("cpu"), 4_000);
        assert_eq!(d.queues["heavy"].waiting_groups, 4);
    }

    /// A group of `min` admitted ahead of its members on `cpu` millicores in all, created at
    /// 0, admitted at `admitted_at`.
    fn ahead(s: &mut State, name: &str, min: u32, cpu: i64, admitted_at: Option<i64>) {
        s.apply_pod_group(PodGroup {
            schedule_timeout: Duration::from_secs(60),
            ahead: Some(crate::model::Ahead {
                share: Resources::from([("cpu", cpu), ("pods", i64::from(min))]).part(min),
                created: 0,
                admitted_at,
            }),
            ..PodGroup::new(GroupKey::new("ns", name), min, "q")
        });
    }

    #[test]
    fn a_group_admitted_ahead_is_admitted_on_its_min_resources_before_its_pods_exist() {
        let mut s = cluster();
        ahead(&mut s, "vc", 4, 6_000, None);
        let d = decide_at(&s, &|_| false, 10);
        assert_eq!(admitted(&d), ["vc"]);
        assert!(d.admit[0].pods.is_empty());
        assert_eq!(d.admit[0].placeholders.len(), 4);

        // Too big for the node: it waits for room like any gang.
        let mut s = cluster();
        ahead(&mut s, "big", 4, 9_000, None);
        let d = decide_at(&s, &|_| false, 10);
        assert!(d.admit.is_empty());
        assert!(d.waiting[0].reason().short_of_room(), "{:?}", d.waiting);
    }

    #[test]
    fn members_of_a_group_admitted_ahead_created_at_once_pass_ungated_only_up_to_min_member() {
        let mut s = cluster();
        ahead(&mut s, "vc", 4, 6_000, Some(100));
        let (vc, cpu) = (GroupKey::new("ns", "vc"), Resources::from([("cpu", 1_500)]));
        let now = std::time::Instant::now();
        // Eight members created before the watch shows any: the first four pass.
        let passed: Vec<bool> = (0..8)
            .map(|i| s.admit_on_arrival(&vc, &format!("vc-{i}"), &cpu, now, 120))
            .collect();
        assert_eq!(passed, [true, true, true, true, false, false, false, false]);
        // Once the watch shows them, they count as live members, not twice.
        for i in 0..4 {
            s.apply_pod(pod(&format!("vc-{i}"), Some("vc"), false, 110));
        }
        assert!(!s.admit_on_arrival(&vc, "vc-4", &cpu, now, 120));
    }

    #[test]
    fn arrivals_of_groups_admitted_ahead_are_forgotten_after_a_pass_once_old_or_gone() {
        let mut s = cluster();
        ahead(&mut s, "vc", 4, 6_000, Some(100));
        ahead(&mut s, "gone", 4, 6_000, Some(100));
        let cpu = Resources::from([("cpu", 1_500)]);
        let now = std::time::Instant::now();
        for name in ["vc", "gone"] {
            assert!(s.admit_on_arrival(&GroupKey::new("ns", name), "p", &cpu, now, 120));
        }
        s.delete_pod_group(&GroupKey::new("ns", "gone"));
        s.set_door(None, now);
        assert_eq!(
            s.ledger.ahead_arrivals.len(),
            1,
            "a deleted group's are forgotten"
        );
        s.set_door(None, now + crate::admit::door::ARRIVAL_ROOM_KEPT);
        assert!(
            s.ledger.ahead_arrivals.is_empty(),
            "{:?}",
            s.ledger.ahead_arrivals
        );
    }

    #[test]
    fn an_admission_ahead_keeps_its_room_until_it_lapses() {
        let mut s = cluster();
        ahead(&mut s, "vc", 4, 6_000, Some(100));
        gang(&mut s, "next", "q", 1, 4_000, 50);
        // Admitted at 100 with a timeout of 60: its 6 CPUs are taken until 160.
        let d = decide_at(&s, &|_| false, 150);
        assert!(d.admit.is_empty(), "{:?}", d.admit);
        assert_eq!(d.in_flight.get("cpu"), 6_000);
        // Its members are created without the gate while it holds; not after it lapsed.
        let (vc, cpu) = (GroupKey::new("ns", "vc"), Resources::from([("cpu", 1_500)]));
        let now = std::time::Instant::now();
        assert!(s.admit_on_arrival(&vc, "p", &cpu, now, 150));
        assert!(!s.admit_on_arrival(&vc, "p", &cpu, now, 161));
        // One member created: it and three placeholders hold the room.
        s.apply_pod(Pod {
            scheduling_gates: vec![],
            requests: Resources::from([("cpu", 1_500), ("pods", 1)]),
            ..pod("vc-0", Some("vc"), false, 120)
        });
        let d = decide_at(&s, &|_| false, 150);
        assert!(d.admit.is_empty());
        assert_eq!(d.in_flight.get("cpu"), 6_000);
        // Lapsed with a member: only the member counts, so the next gang fits.
        let d = decide_at(&s, &|_| false, 161);
        assert_eq!(admitted(&d), ["next"]);
        assert_eq!(d.in_flight.get("cpu"), 1_500);
    }

    #[test]
    fn a_lapsed_admission_ahead_without_members_waits_again() {
        let mut s = cluster();
        ahead(&mut s, "vc", 4, 6_000, Some(100));
        let d = decide_at(&s, &|_| false, 161);
        assert_eq!(admitted(&d), ["vc"]);
        assert_eq!(d.admit[0].placeholders.len(), 4);
        // Recorded but not yet seen: the pass counts the placeholders released.
        let d = decide_at(&s, &|uid| uid.starts_with("placeholder:"), 161);
        assert!(d.admit.is_empty());
        assert_eq!(d.in_flight.get("cpu"), 6_000);
    }

    #[test]
    fn a_gang_whose_member_names_an_unserved_scheduler_waits_and_holds_no_room() {
        let mut s = cluster();
        s.schedulers = crate::model::Schedulers::only(["default-scheduler".to_owned()]);
        gang(&mut s, "astray", "q", 2, 3_000, 10);
        s.apply_pod(Pod {
            scheduler: Some("nobody".into()),
            requests: Resources::from([("cpu", 3_000), ("pods", 1)]),
            ..pod("astray-1", Some("astray"), true, 10)
        });
        gang(&mut s, "next", "q", 2, 4_000, 20);
        let d = decide_at(&s, &|_| false, 30);
        assert_eq!(admitted(&d), ["next"]);
        let why = &d.waiting[0];
        assert_eq!(why.reason(), Reason::SchedulerNotServed);
        assert!(why.why.to_string().contains("\"nobody\""), "{}", why.why);
        assert!(d.door.is_some(), "it does not keep others from arriving");

        // Released to it all the same (by an older Gangplank), it holds no room either.
        let mut s = cluster();
        s.schedulers = crate::model::Schedulers::only(["default-scheduler".to_owned()]);
        group(&mut s, "astray", 1);
        s.apply_pod(Pod {
            scheduler: Some("nobody".into()),
            requests: Resources::from([("cpu", 6_000), ("pods", 1)]),
            ..pod("astray-0", Some("astray"), false, 10)
        });
        gang(&mut s, "next", "q", 1, 6_000, 20);
        let d = decide_at(&s, &|_| false, 30);
        assert_eq!(admitted(&d), ["next"]);
        assert_eq!(d.in_flight.get("cpu"), 0);
    }

    #[test]
    fn a_closed_queue_admits_nothing_and_a_missing_queue_says_so() {
        let mut s = cluster();
        s.apply_queue(Queue {
            open: false,
            ..Queue::new("q")
        });
        gang(&mut s, "g", "q", 1, 1_000, 1);
        gang(&mut s, "lost", "nowhere", 1, 1_000, 1);
        let d = decide(&s);
        assert!(d.admit.is_empty());
        assert_eq!(
            why(&d, "g"),
            "queue q is Closed: it admits nothing until its spec.state is Open again"
        );
        assert!(why(&d, "lost").starts_with("queue nowhere does not exist"));
    }

    #[test]
    fn reserved_and_released_members_hold_room_until_quorum_but_elastic_extras_do_not() {
        let mut s = cluster();
        gang(&mut s, "g", "q", 2, 2_000, 1);
        for extra in ["g-2", "g-3"] {
            s.apply_pod(Pod {
                requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
                ..pod(extra, Some("g"), true, 1)
            });
        }
        let d = decide(&s);
        assert_eq!(d.admit[0].pods.len(), 4, "every gated member is released");
        release(&mut s, &d);
        assert_eq!(decide(&s).queues["q"].allocated.get("cpu"), 4_000);
        s.reserve(
            "g-0",
            Reservation {
                node: "n1".into(),
                requests: s.pods["g-0"].requests.clone(),
                group: Some(GroupKey::new("ns", "g")),
            },
        );
        assert_eq!(decide(&s).queues["q"].allocated.get("cpu"), 4_000);
        bind_released(&mut s);
        assert_eq!(decide(&s).queues["q"].allocated.get("cpu"), 8_000);
    }

    const NOW: i64 = 1_700_000_000;

    /// A running pod of `cpu` millicores on `node` in queue `q`, in `group` if given (which
    /// must exist), started at `started`.
    fn running(s: &mut State, uid: &str, group: Option<&str>, node: &str, cpu: i64, started: i64) {
        s.apply_pod(Pod {
            node_name: Some(node.into()),
            phase: PodPhase::Running,
            requests: Resources::from([("cpu", cpu), ("pods", 1)]),
            started: Some(started),
            ..pod(uid, group, false, started)
        });
    }

    /// Queue `q` runs `big` (6 CPUs on n1, 2 on n2, two nodes of 8) and has `more` (2 CPUs)
    /// waiting; queue `other` has a gang of two members of `cpu` waiting.
    fn borrower_and_starved(cpu: i64) -> State {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        s.apply_queue(Queue::new("other"));
        group_in(&mut s, "big", 2, "q");
        running(&mut s, "big-0", Some("big"), "n1", 6_000, NOW - 100);
        running(&mut s, "big-1", Some("big"), "n2", 2_000, NOW - 100);
        gang(&mut s, "more", "q", 1, 2_000, NOW - 50);
        gang(&mut s, "starved", "other", 2, cpu, NOW - 40);
        for i in 0..2 {
            let mut pod = (*s.pods[&format!("starved-{i}")]).clone();
            pod.queue = Some("other".into());
            s.apply_pod(pod);
        }
        s
    }

    #[test]
    fn a_queue_above_its_share_admits_nothing_while_a_queue_below_waits_for_room_reclaim_frees() {
        // One 4-CPU member fits on n2 and heads the line there; `more` would fit beside it.
        let s = borrower_and_starved(4_000);
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), Vec::<String>::new());
        assert_eq!(reason(&d, "more"), Reason::QueueOverShare);
        assert!(
            why(&d, "more").contains("while queue other, below its share, waits for room"),
            "{}",
            why(&d, "more")
        );
    }

    #[test]
    fn a_queue_above_its_share_still_borrows_room_no_reclaim_could_give_the_waiting_queue() {
        let s = borrower_and_starved(9_000);
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), vec!["more"]);
    }

    #[test]
    fn extra_members_of_a_gang_with_quorum_are_released_only_as_many_as_fit() {
        let mut s = cluster();
        s.apply_queue(Queue::new("other"));
        group_in(&mut s, "wide", 1, "q");
        running(&mut s, "wide-0", Some("wide"), "n1", 2_000, NOW - 100);
        for i in 1..4 {
            s.apply_pod(Pod {
                requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
                ..pod(&format!("wide-{i}"), Some("wide"), true, NOW - 50)
            });
        }
        gang(&mut s, "share", "other", 2, 2_000, NOW - 40);
        for i in 0..2 {
            let mut member = (*s.pods[&format!("share-{i}")]).clone();
            member.queue = Some("other".into());
            s.apply_pod(member);
        }
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), vec!["share", "wide"]);
        let wide = d
            .admit
            .iter()
            .find(|a| a.group.as_ref().is_some_and(|g| g.name.as_ref() == "wide"))
            .unwrap();
        let pods: Vec<&str> = wide.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            pods,
            ["wide-1"],
            "6 CPUs free, 4 of them for share: one extra fits"
        );
    }

    #[test]
    fn a_parent_queues_capability_bounds_its_children_together() {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        s.apply_queue(Queue {
            capability: crate::policy::fair_share::Capability::from([("cpu", 8_000)]),
            ..Queue::new("org")
        });
        for team in ["t1", "t2"] {
            s.apply_queue(Queue {
                parent: Some("org".into()),
                ..Queue::new(team)
            });
        }
        group_in(&mut s, "run", 1, "t1");
        s.apply_pod(Pod {
            node_name: Some("n1".into()),
            phase: PodPhase::Running,
            requests: Resources::from([("cpu", 6_000), ("pods", 1)]),
            ..pod("run-0", Some("run"), false, NOW - 100)
        });
        gang(&mut s, "small", "t2", 1, 2_000, NOW - 60);
        gang(&mut s, "big", "t2", 1, 4_000, NOW - 50);
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(
            admitted(&d),
            vec!["small"],
            "6 + 2 CPUs fill org's capability"
        );
        assert_eq!(reason(&d, "big"), Reason::CapabilityReached);
        assert!(
            why(&d, "big").starts_with(
                "queue org has reached its capability: cpu 8 held + 4 requested > capability 8"
            ),
            "{}",
            why(&d, "big")
        );
    }

    #[test]
    fn with_namespace_fair_share_the_namespace_holding_less_of_the_queue_goes_first() {
        let in_ns = |uid: &str, ns: &str, gated: bool, created: i64| Pod {
            namespace: ns.into(),
            requests: Resources::from([("cpu", 4_000), ("pods", 1)]),
            ..pod(uid, None, gated, created)
        };
        let mut s = cluster();
        s.apply_pod(Pod {
            node_name: Some("n1".into()),
            phase: PodPhase::Running,
            ..in_ns("a-running", "a", false, NOW - 500)
        });
        s.apply_pod(in_ns("a-old", "a", true, NOW - 100));
        s.apply_pod(in_ns("b-new", "b", true, NOW - 10));
        assert_eq!(
            admitted(&decide_at(&s, &|_| false, NOW)),
            vec!["a-old"],
            "oldest first by default"
        );
        s.apply_queue(Queue {
            namespace_fair_share: true,
            ..Queue::new("q")
        });
        assert_eq!(
            admitted(&decide_at(&s, &|_| false, NOW)),
            vec!["b-new"],
            "namespace a already holds half the queue"
        );
    }

    /// Nodes `a1`, `a2` in zone `a` and `b1`, `b2` in zone `b`, of 8 CPUs each, with `used`
    /// CPUs taken on each by running pods in no group.
    fn zones(used: [i64; 4]) -> State {
        let mut s = State::default();
        s.apply_queue(Queue::new("q"));
        for ((name, zone), used) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")]
            .into_iter()
            .zip(used)
        {
            node(&mut s, name, 8_000);
            let labels = [("zone".to_owned(), zone.to_owned())].into();
            let n = s.nodes.get(name).unwrap().as_ref().clone();
            s.apply_node(Node { labels, ..n });
            if used > 0 {
                running(&mut s, &format!("on-{name}"), None, name, used, NOW - 10);
            }
        }
        s
    }

    fn with_topology(s: &mut State, name: &str, key: &str) {
        let group = GroupKey::new("ns", name);
        let spec = s.groups[&group].spec.as_deref().unwrap().clone();
        s.apply_pod_group(PodGroup {
            topology_key: Some(key.into()),
            ..spec
        });
    }

    #[test]
    fn a_gang_with_a_topology_key_goes_whole_into_the_tightest_domain_that_fits_it() {
        // Zone a has 4 + 8 CPUs free, zone b 6 + 6: three members of 4 CPUs fit only in a.
        let mut s = zones([4_000, 0, 2_000, 2_000]);
        gang(&mut s, "g", "q", 3, 4_000, NOW - 60);
        with_topology(&mut s, "g", "zone");
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), vec!["g"]);
        for pod in &d.admit[0].pods {
            assert_eq!(
                pod.node_selector,
                Some([("zone".to_owned(), "a".to_owned())].into()),
                "{pod:?}"
            );
        }
        // Two members fit in both zones: the one with less room left over is chosen.
        let mut s = zones([0, 0, 2_000, 2_000]);
        gang(&mut s, "g", "q", 2, 4_000, NOW - 60);
        with_topology(&mut s, "g", "zone");
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(
            d.admit[0].pods[0].node_selector,
            Some([("zone".to_owned(), "b".to_owned())].into())
        );
        // Without a topology key, nothing is added.
        let mut s = zones([0, 0, 0, 0]);
        gang(&mut s, "g", "q", 2, 4_000, NOW - 60);
        assert_eq!(
            decide_at(&s, &|_| false, NOW).admit[0].pods[0].node_selector,
            None
        );
    }

    #[test]
    fn a_gang_split_over_domains_waits_and_says_why() {
        // 6 + 6 CPUs free in zone a, 4 + 4 in zone b: three members of 4 CPUs fit the
        // cluster, not one zone.
        let mut s = zones([2_000, 2_000, 4_000, 4_000]);
        gang(&mut s, "g", "q", 3, 4_000, NOW - 60);
        with_topology(&mut s, "g", "zone");
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(reason(&d, "g"), Reason::Reserved);
        assert!(
            why(&d, "g").contains("no single domain of zone has room for every member (a member requesting cpu: 4, pods: 1 finds no node in any)"),
            "{}",
            why(&d, "g")
        );
        let mut s = zones([0, 0, 0, 0]);
        gang(&mut s, "g", "q", 1, 1_000, NOW - 60);
        with_topology(&mut s, "g", "rack");
        let d = decide_at(&s, &|_| false, NOW);
        assert!(
            why(&d, "g").contains("no schedulable node has the label rack"),
            "{}",
            why(&d, "g")
        );
    }

    #[test]
    fn a_gang_whose_topology_key_no_node_has_waits_without_holding_room_for_itself() {
        // The whole cluster (4 x 8 CPUs) would be its reservation; nothing can ever place it.
        let mut s = zones([0, 0, 0, 0]);
        gang(&mut s, "nowhere", "q", 4, 8_000, NOW - 60);
        with_topology(&mut s, "nowhere", "rack");
        gang(&mut s, "later", "q", 2, 4_000, NOW - 30);
        let d = decide_at(&s, &|_| false, NOW);
        assert!(
            why(&d, "nowhere").contains("no schedulable node has the label rack"),
            "{}",
            why(&d, "nowhere")
        );
        assert_eq!(d.hold, None, "no reservation for a gang no node can take");
        assert_eq!(admitted(&d), vec!["later"]);
    }

    #[test]
    fn members_of_a_gang_already_running_in_a_domain_join_it() {
        // The elastic gang's first member runs in zone b; zone a has more room.
        let mut s = zones([0, 0, 4_000, 4_000]);
        group_in(&mut s, "g", 1, "q");
        with_topology(&mut s, "g", "zone");
        running(&mut s, "g-0", Some("g"), "b1", 2_000, NOW - 30);
        s.apply_pod(Pod {
            requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
            ..pod("g-1", Some("g"), true, NOW - 20)
        });
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(
            d.admit[0].pods[0].node_selector,
            Some([("zone".to_owned(), "b".to_owned())].into())
        );
    }

    /// Sets `name`'s expected runtime (and keeps the rest of its spec).
    fn expect_runtime(s: &mut State, name: &str, seconds: u64) {
        let key = GroupKey::new("ns", name);
        let spec = s.groups[&key].spec.as_deref().unwrap().clone();
        s.apply_pod_group(PodGroup {
            expected_runtime: Some(Duration::from_secs(seconds)),
            ..spec
        });
    }

    /// Two nodes of 8 CPUs: n1 full, n2 half used by `busy` (4 CPUs started 50 s ago), and
    /// `big` (one member of 8 CPUs, the oldest) waiting.
    fn big_waits_behind_busy() -> State {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        running(&mut s, "fill", None, "n1", 8_000, NOW - 500);
        group(&mut s, "busy", 1);
        running(&mut s, "busy-0", Some("busy"), "n2", 4_000, NOW - 50);
        gang(&mut s, "big", "q", 1, 8_000, NOW - 300);
        s
    }

    #[test]
    fn the_head_holds_the_room_it_needs_and_smaller_groups_take_only_the_rest() {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        running(&mut s, "fill-1", None, "n1", 6_000, NOW - 500);
        running(&mut s, "fill-2", None, "n2", 4_000, NOW - 500);
        gang(&mut s, "big", "q", 1, 8_000, NOW - 300);
        gang(&mut s, "s1", "q", 1, 2_000, NOW - 200);
        gang(&mut s, "s2", "q", 1, 2_000, NOW - 100);
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), vec!["s1"], "s1 fits where big cannot go");
        assert_eq!(
            d.hold,
            Some(Hold {
                group: GroupKey::new("ns", "big"),
                overdue: false,
                nodes: vec![("n2".into(), Resources::from([("cpu", 4_000), ("pods", 1)]))],
                lacking: vec![("n2".into(), Resources::from([("cpu", 4_000)]))],
                seen: vec![(
                    "n2".into(),
                    Resources::from([("cpu", 4_000), ("pods", 109)])
                )],
            }),
            "big waits on the node closest to fitting it"
        );
        assert_eq!(reason(&d, "big"), Reason::Reserved);
        assert_eq!(reason(&d, "s2"), Reason::BehindReservation);
        assert_eq!(
            why(&d, "s2"),
            "behind a reservation for ns/big, which holds cpu: 4, pods: 1 until it fits; does not fit now: cpu 2 needed, 0 free (free room counts other queues' unused guarantees as taken)"
        );
    }

    #[test]
    fn the_head_keeps_the_nodes_it_held_when_another_frees_a_little_more() {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        running(&mut s, "fill-1", None, "n1", 6_000, NOW - 500);
        running(&mut s, "fill-2", None, "n2", 4_000, NOW - 500);
        gang(&mut s, "big", "q", 1, 8_000, NOW - 300);
        // The loop kept last pass's reservation on n1 (as a claim without a deadline); n2 now
        // has more free, but moving there would hand n1's room to the groups behind.
        s.set_claim(
            &GroupKey::new("ns", "big"),
            crate::model::Claim {
                slots: vec![crate::model::Slot {
                    node: "n1".into(),
                    requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
                }],
                deadline: None,
                ..Default::default()
            },
        );
        let d = decide_at(&s, &|_| false, NOW);
        let hold = d.hold.expect("big heads the line");
        assert_eq!(
            hold.nodes,
            vec![("n1".into(), Resources::from([("cpu", 2_000), ("pods", 1)]))]
        );
    }

    #[test]
    fn a_group_that_could_not_fit_even_on_empty_nodes_holds_nothing() {
        let mut s = cluster();
        gang(&mut s, "huge", "q", 1, 9_000, NOW - 300);
        gang(&mut s, "small", "q", 1, 2_000, NOW - 100);
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), vec!["small"]);
        assert_eq!(d.hold, None);
        assert_eq!(reason(&d, "huge"), Reason::DoesNotFit);
    }

    #[test]
    fn a_group_expected_to_finish_before_the_head_could_start_backfills_its_reservation() {
        let mut s = big_waits_behind_busy();
        expect_runtime(&mut s, "busy", 100);
        for (name, runtime, created) in [
            ("quick", Some(30), 1),
            ("slow", Some(60), 2),
            ("unsure", None, 3),
        ] {
            gang(&mut s, name, "q", 1, 2_000, NOW - 100 + created);
            if let Some(runtime) = runtime {
                expect_runtime(&mut s, name, runtime);
            }
        }
        let d = decide_at(&s, &|_| false, NOW);
        // busy frees its 4 CPUs 50 s from now: big cannot start before then.
        assert_eq!(
            admitted(&d),
            vec!["quick"],
            "30 s ends before big could start"
        );
        assert_eq!(
            reason(&d, "slow"),
            Reason::BehindReservation,
            "60 s would delay big"
        );
        assert_eq!(reason(&d, "unsure"), Reason::BehindReservation);
        assert_eq!(
            d.hold.unwrap().nodes,
            vec![("n2".into(), Resources::from([("cpu", 2_000), ("pods", 1)]))],
            "quick took 2 of the 4 CPUs held"
        );
    }

    /// Queue `q` runs `busy` (all 8 CPUs of n1, for another `left` seconds) and has `big` (8
    /// CPUs) and `quick` (2 CPUs for 30 s) waiting; n2 is free, but queue `g`'s unused
    /// guarantee keeps 4 of its CPUs: big is short of budget, not of room on its node.
    fn big_waits_for_budget(left: u64) -> Decision {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        s.apply_queue(Queue {
            guarantee: Resources::from([("cpu", 4_000)]),
            ..Queue::new("g")
        });
        group_in(&mut s, "busy", 1, "q");
        running(&mut s, "busy-0", Some("busy"), "n1", 8_000, NOW - 50);
        expect_runtime(&mut s, "busy", 50 + left);
        gang(&mut s, "big", "q", 1, 8_000, NOW - 300);
        gang(&mut s, "quick", "q", 1, 2_000, NOW - 100);
        expect_runtime(&mut s, "quick", 30);
        decide_at(&s, &|_| false, NOW)
    }

    #[test]
    fn a_head_short_of_its_queues_budget_lends_what_it_holds_until_enough_is_expected_to_end() {
        let d = big_waits_for_budget(50);
        assert_eq!(d.hold.as_ref().map(|h| &*h.group.name), Some("big"));
        assert_eq!(
            admitted(&d),
            vec!["quick"],
            "busy ends in 50 s, quick in 30"
        );
        let d = big_waits_for_budget(10);
        assert!(d.admit.is_empty(), "busy ends in 10 s: {d:?}");
        assert_eq!(reason(&d, "quick"), Reason::BehindReservation);
    }

    #[test]
    fn nothing_backfills_the_reservation_of_a_head_that_waits_for_reclaim() {
        let mut s = cluster();
        node(&mut s, "n2", 8_000);
        s.apply_queue(Queue::new("lender"));
        for (name, node, cpu) in [("fill", "n1", 8_000), ("busy", "n2", 4_000)] {
            group_in(&mut s, name, 1, "lender");
            running(
                &mut s,
                &format!("{name}-0"),
                Some(name),
                node,
                cpu,
                NOW - 50,
            );
            expect_runtime(&mut s, name, 100);
        }
        gang(&mut s, "big", "q", 1, 8_000, NOW - 300);
        gang(&mut s, "quick", "q", 1, 2_000, NOW - 100);
        expect_runtime(&mut s, "quick", 30);
        let d = decide_at(&s, &|_| false, NOW);
        // lender holds 12 CPUs of its 8 deserved: reclaim frees big's room now, not in 50 s.
        assert_eq!(d.hold.as_ref().map(|h| &*h.group.name), Some("big"));
        assert!(d.admit.is_empty(), "{d:?}");
        assert_eq!(reason(&d, "quick"), Reason::BehindReservation);
    }

    #[test]
    fn without_known_runtimes_of_what_runs_the_reservation_is_never_lent() {
        let mut s = big_waits_behind_busy();
        gang(&mut s, "quick", "q", 1, 2_000, NOW - 100);
        expect_runtime(&mut s, "quick", 1);
        let d = decide_at(&s, &|_| false, NOW);
        assert!(d.admit.is_empty(), "busy may end any moment: {d:?}");
        assert_eq!(reason(&d, "quick"), Reason::BehindReservation);
    }

    #[test]
    fn an_overdue_group_jumps_the_fair_share_order() {
        let mut s = cluster();
        s.apply_queue(Queue::new("fresh"));
        running(&mut s, "held", None, "n1", 4_000, NOW - 500);
        gang(&mut s, "late", "q", 1, 4_000, NOW - 100);
        gang(&mut s, "f", "fresh", 1, 4_000, NOW - 10);
        assert_eq!(
            admitted(&decide_at(&s, &|_| false, NOW)),
            vec!["f"],
            "fresh holds nothing"
        );
        s.apply_queue(Queue {
            max_wait: Some(Duration::from_secs(60)),
            ..Queue::new("q")
        });
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), vec!["late"], "waited 100 s of 60");
        assert_eq!(reason(&d, "f"), Reason::Reserved);
        assert_eq!(
            admitted(&decide_at(&s, &|_| false, NOW - 50)),
            vec!["f"],
            "not overdue yet"
        );
    }

    #[test]
    fn an_overdue_group_that_does_not_fit_holds_the_reservation_and_its_own_bound_wins() {
        let mut s = cluster();
        s.apply_queue(Queue::new("fresh"));
        s.apply_queue(Queue {
            max_wait: Some(Duration::from_secs(1_000)),
            ..Queue::new("q")
        });
        running(&mut s, "held", None, "n1", 4_000, NOW - 500);
        gang(&mut s, "late", "q", 1, 8_000, NOW - 100);
        gang(&mut s, "f", "fresh", 1, 4_000, NOW - 10);
        assert_eq!(
            admitted(&decide_at(&s, &|_| false, NOW)),
            vec!["f"],
            "within the queue's bound"
        );
        let key = GroupKey::new("ns", "late");
        let spec = s.groups[&key].spec.as_deref().unwrap().clone();
        s.apply_pod_group(PodGroup {
            max_wait: Some(Duration::from_secs(60)),
            ..spec
        });
        let d = decide_at(&s, &|_| false, NOW);
        assert!(d.admit.is_empty(), "{d:?}");
        assert_eq!(reason(&d, "late"), Reason::OverdueReserved);
        assert!(why(&d, "late").starts_with(
            "waited 100s, over its maxWaitSeconds 60: admitted next, before the fair-share order; holds a reservation of cpu: 4, pods: 1 on 1 nodes"
        ));
        assert_eq!(reason(&d, "f"), Reason::BehindReservation);
        assert!(d.hold.unwrap().overdue);
    }

    #[test]
    fn a_group_of_a_queue_at_its_share_that_does_not_fit_says_its_queue_is_over_share() {
        let mut s = cluster();
        s.apply_queue(Queue::new("other"));
        running(&mut s, "held", None, "n1", 6_000, NOW - 500);
        gang(&mut s, "more", "q", 1, 4_000, NOW - 100);
        gang(&mut s, "o", "other", 1, 4_000, NOW - 10);
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(
            reason(&d, "o"),
            Reason::Reserved,
            "other holds nothing: it goes first"
        );
        assert_eq!(reason(&d, "more"), Reason::QueueOverShare);
        assert!(
            why(&d, "more").starts_with("queue q holds cpu at 1.50 of deserved"),
            "{}",
            why(&d, "more")
        );
    }

    #[test]
    fn room_freeing_on_a_reserved_node_while_a_pass_runs_stays_reserved() {
        let at = std::time::Instant::now();
        let mut s = State::default();
        s.apply_queue(Queue::new("q"));
        group_in(&mut s, "fill", 2, "q");
        for n in ["n0", "n1"] {
            node(&mut s, n, 32_000);
            running(
                &mut s,
                &format!("fill-{n}"),
                Some("fill"),
                n,
                24_000,
                NOW - 10,
            );
        }
        gang(&mut s, "big", "q", 2, 32_000, NOW - 8);
        let first = decide_at(&s, &|_| false, NOW);
        crate::admit::hold::record(&mut s, None, &first, at);
        let finish = |s: &mut State, uid: &str| {
            let pod = s.pods[uid].as_ref().clone();
            s.apply_pod(Pod {
                phase: PodPhase::Succeeded,
                ..pod
            });
        };
        // The filler of n1 finishes and a pass starts on a snapshot; while it runs, the filler
        // of n0 finishes too, and its room joins the reservation at once.
        finish(&mut s, "fill-n1");
        let snapshot = s.clone();
        finish(&mut s, "fill-n0");
        assert_eq!(s.nodes.slot("n0").unwrap().free.get("cpu"), 0);
        let second = decide_at(&snapshot, &|_| false, NOW);
        assert_eq!(reason(&second, "big"), Reason::Reserved, "n0 was busy then");
        crate::admit::hold::record(&mut s, first.hold.as_ref(), &second, at);
        assert_eq!(
            s.nodes.slot("n0").unwrap().free.get("cpu"),
            0,
            "what freed on n0 after the snapshot stays in the reservation: {:?}",
            s.ledger.claims
        );
        let third = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&third), vec!["big"]);
    }

    /// n1 (8 CPUs) half used, queue g's unused guarantee of 4 CPUs, and `big` of queue q asking
    /// for the whole node.
    fn big_behind_a_guarantee() -> State {
        let mut s = cluster();
        s.apply_queue(Queue {
            guarantee: Resources::from([("cpu", 4_000)]),
            ..Queue::new("g")
        });
        running(&mut s, "half", None, "n1", 4_000, NOW - 10);
        gang(&mut s, "big", "q", 1, 8_000, NOW - 8);
        s
    }

    #[test]
    fn a_reservation_never_takes_room_another_queues_guarantee_keeps_even_after_a_pass() {
        let at = std::time::Instant::now();
        let mut s = big_behind_a_guarantee();
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(reason(&d, "big"), Reason::Reserved);
        crate::admit::hold::record(&mut s, None, &d, at);
        assert_eq!(
            s.nodes.slot("n1").unwrap().free.get("cpu"),
            4_000,
            "the 4 free CPUs are g's guarantee, not big's: {:?}",
            s.ledger.claims
        );
    }

    #[test]
    fn room_a_pass_admits_another_queue_into_does_not_count_as_freed_for_the_reservation() {
        let at = std::time::Instant::now();
        let mut s = big_behind_a_guarantee();
        // g's first job takes its guarantee, the 4 free CPUs, in the pass that reserves for big.
        gang(&mut s, "first", "g", 1, 4_000, NOW - 5);
        let d = decide_at(&s, &|_| false, NOW);
        assert_eq!(admitted(&d), vec!["first"]);
        assert_eq!(reason(&d, "big"), Reason::Reserved);
        crate::admit::hold::record(&mut s, None, &d, at);
        assert_eq!(
            s.nodes.slot("n1").unwrap().free.get("cpu"),
            4_000,
            "nothing freed on n1 since the snapshot: its free CPUs are first's, not big's: {:?}",
            s.ledger.claims
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// `(nodes' CPUs, queues' (weight, capability, guarantee), groups' (queue, size, CPU,
        /// created, running on node))`.
        type Input = (
            Vec<i64>,
            Vec<(u32, Option<i64>, Option<i64>)>,
            Vec<(usize, u32, i64, i64, Option<usize>)>,
        );

        fn inputs() -> impl Strategy<Value = Input> {
            (
                prop::collection::vec(2i64..=16, 1..5),
                prop::collection::vec(
                    (
                        1u32..5,
                        prop::option::of(0i64..=24),
                        prop::option::of(0i64..=8),
                    ),
                    1..4,
                ),
                prop::collection::vec(
                    (
                        0usize..4,
                        1u32..4,
                        1i64..=4,
                        0i64..50,
                        prop::option::of(0usize..4),
                    ),
                    0..14,
                ),
            )
        }

        /// The cluster `input` describes, its objects applied in order or reversed.
        fn build(input: &Input, reversed: bool) -> State {
            let (nodes, queues, groups) = input;
            let mut s = State::default();
            type Step = Box<dyn Fn(&mut State)>;
            let mut steps: Vec<Step> = Vec::new();
            for (i, cpu) in nodes.iter().enumerate() {
                let cpu = *cpu;
                steps.push(Box::new(move |s| node(s, &format!("n{i}"), cpu * 1_000)));
            }
            for (i, (weight, capability, guarantee)) in queues.iter().enumerate() {
                let queue = Queue {
                    weight: *weight,
                    capability: capability.map_or_else(Capability::unbounded, |c| {
                        Capability::from([("cpu", c * 1_000)])
                    }),
                    guarantee: guarantee
                        .map_or_else(Resources::new, |g| Resources::from([("cpu", g * 1_000)])),
                    ..Queue::new(format!("q{i}"))
                };
                steps.push(Box::new(move |s| {
                    s.apply_queue(queue.clone());
                }));
            }
            for (g, &(queue, size, cpu, created, on)) in groups.iter().enumerate() {
                let queue = format!("q{}", queue % queues.len());
                let on = on.map(|n| format!("n{}", n % nodes.len()));
                steps.push(Box::new(move |s| {
                    let name = format!("g{g}");
                    gang(s, &name, &queue, size, cpu * 1_000, created);
                    if let Some(node) = &on {
                        bind(s, &name, size, node);
                    }
                }));
            }
            if reversed {
                steps.reverse();
            }
            for step in steps {
                step(&mut s);
            }
            s
        }

        fn bind(s: &mut State, name: &str, size: u32, node: &str) {
            for i in 0..size {
                let p = s.pods[&format!("{name}-{i}")].as_ref().clone();
                s.apply_pod(Pod {
                    node_name: Some(node.into()),
                    phase: PodPhase::Running,
                    scheduling_gates: vec![],
                    ..p
                });
            }
        }

        fn admitted_requests(s: &State, d: &Decision, queue: &str) -> Resources {
            let mut sum = Resources::new();
            for a in &d.admit {
                let group = a.group.as_ref().and_then(|g| s.groups[g].spec.as_deref());
                if group.is_some_and(|g| g.queue == queue) {
                    for p in &a.pods {
                        sum.add(&s.pods[&p.uid].requests);
                    }
                }
            }
            sum
        }

        proptest! {
            #[test]
            fn the_decision_is_the_same_for_the_same_cluster_however_it_was_built(
                input in inputs()
            ) {
                let forward = decide_at(&build(&input, false), &|_| false, NOW);
                let backward = decide_at(&build(&input, true), &|_| false, NOW);
                prop_assert_eq!(forward, backward);
            }

            #[test]
            fn shares_stay_within_the_cluster_capabilities_and_guarantees(input in inputs()) {
                let s = build(&input, false);
                let d = decide_at(&s, &|_| false, NOW);
                let cluster: i64 = input.0.iter().sum::<i64>() * 1_000;
                let deserved: i64 = d.queues.values().map(|r| r.deserved.get("cpu")).sum();
                prop_assert!(deserved <= cluster, "{deserved} > {cluster}");
                let guaranteed: i64 = input.1.iter().filter_map(|q| q.2).sum::<i64>() * 1_000;
                for (name, report) in &d.queues {
                    let queue = &s.queues[name];
                    let cpu = report.deserved.get("cpu");
                    if let Some(limit) = queue.capability.limit(ResourceId::CPU) {
                        prop_assert!(cpu <= limit, "{name}: {cpu} > capability {limit}");
                    }
                    if guaranteed <= cluster {
                        let capability = queue.capability.limit(ResourceId::CPU).unwrap_or(i64::MAX);
                        let floor = queue
                            .guarantee
                            .get("cpu")
                            .min(report.demand.get("cpu"))
                            .min(capability);
                        prop_assert!(cpu >= floor, "{name}: {cpu} < guarantee {floor}");
                    }
                }
            }

            #[test]
            fn raising_a_weight_never_lowers_that_queues_share(
                input in inputs(), raise in 1u32..4
            ) {
                let before = decide_at(&build(&input, false), &|_| false, NOW);
                let mut heavier = input.clone();
                heavier.1[0].0 += raise;
                let after = decide_at(&build(&heavier, false), &|_| false, NOW);
                let (was, is) = (
                    before.queues["q0"].deserved.get("cpu"),
                    after.queues["q0"].deserved.get("cpu"),
                );
                prop_assert!(is >= was, "weight +{raise}: {was} -> {is}");
            }

            #[test]
            fn what_a_pass_admits_never_takes_a_queue_over_its_capability(input in inputs()) {
                let s = build(&input, false);
                let d = decide_at(&s, &|_| false, NOW);
                for (name, report) in &d.queues {
                    let admitted = admitted_requests(&s, &d, name);
                    if admitted.is_empty() {
                        continue;
                    }
                    if let Some(limit) = s.queues[name].capability.limit(ResourceId::CPU) {
                        let after = report.allocated.get("cpu") + admitted.get("cpu");
                        prop_assert!(after <= limit, "{name}: {after} > capability {limit}");
                    }
                }
            }

            #[test]
            fn what_a_pass_admits_fits_beside_the_heads_reservation(input in inputs()) {
                let s = build(&input, false);
                let d = decide_at(&s, &|_| false, NOW);
                let mut free = 0;
                for node in s.nodes.values() {
                    free += s.free_on(node).get("cpu").max(0);
                }
                let held: i64 = d.hold.iter().flat_map(|h| &h.nodes).map(|(_, r)| r.get("cpu")).sum();
                let admitted: i64 = d.queues.keys().map(|q| admitted_requests(&s, &d, q).get("cpu")).sum();
                prop_assert!(admitted + held <= free, "admitted {admitted} + held {held} > free {free}");
            }
        }
    }
}
