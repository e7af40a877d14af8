//! Which waiting pods to release now, in fair-share order: a pure function of the cache's state.
//!
//! A pod that carries Gangplank's scheduling gate waits for its group to be admitted. One pass
//! ([`decide`]) runs in named phases:
//! 1. **collect**: per group (a pod with a queue but no group is a group of one), what it holds
//!    and what it waits for. A group *holds* the requests of its live members that are bound,
//!    reserved by the extender, or released and still on their way to quorum (released,
//!    unbound, unreserved, and no more of them than the gang still lacks to reach `minMember`).
//!    Counting released-but-unbound members is what keeps the next pass from admitting the same
//!    room twice; stopping at quorum keeps an elastic gang's extra members (which bind only if
//!    there happens to be room) from holding room forever.
//! 2. **share**: per queue, `allocated` = what its groups hold, `demand` = allocated plus what
//!    its waiting groups request; the cluster's capacity is the allocatable of its schedulable
//!    (not cordoned) nodes; `deserved` comes from [`fair_share::deserved_shares`]. The
//!    controller reports the same numbers in the Queue status ([`Decision::queues`]), so there
//!    is one computation of demand, capacity and shares.
//! 3. **admit**: walk the waiting groups in weighted-DRF order ([`AdmissionPass`]: queues by
//!    allocated over deserved, inside a queue by priority, then age) and admit a group, i.e.
//!    release all its gated members, when
//!    - its PodGroup exists and at least `minMember` live members exist;
//!    - its queue exists and is `Open`;
//!    - the queue's allocation plus what this pass admitted plus the group's requests stays
//!      within the queue's `capability`;
//!    - it fits what the cluster has free: the sum over schedulable nodes of allocatable −
//!      used − reserved, minus what is released and not yet placed, minus what this pass
//!      admitted, minus the unused guarantees of *other* queues (a guarantee is room others may
//!      not take, so an idle queue's first job finds it); and each member the gang needs for
//!      quorum is placed, greedily in this pass's copy of the nodes' free room, on a node with
//!      room for its requests (only resources: selectors, taints and affinity are the
//!      scheduler's and the extender's, which keep a gang whole if this rough check is wrong).
//!
//!    A group that is not admitted is skipped ([`AdmissionPass::skip_last`]) so its queue keeps
//!    its place, and the reason is recorded, with numbers, for the PodGroup's `Admitted`
//!    condition.
//!
//! Decisions:
//! - **Deserved decides order, capability and free room decide admission.** A queue may borrow
//!   idle capacity beyond its deserved share, up to its capability; with several queues
//!   waiting, DRF order hands out what frees up so that allocations converge to the shares.
//! - **A group that does not fit does not block the groups behind it** (in its queue or
//!   others). Without a reservation for the head this can delay a large gang behind a stream of
//!   small ones; backfill with reservations and `maxWaitSeconds` are left for later (issue 5).
//!   A group that waited only for room is listed in [`Decision::short_of_room`], for reclaim
//!   (`crate::admission::reclaim`) to take back room other queues borrowed.
//! - A group's priority is the highest `spec.priority` of its live members (the API server
//!   resolves each pod's priority class, and the webhook gives a group's pods its
//!   `priorityClassName`).
//! - Requests a waiting group adds are those of its gated members; the room it needs now is
//!   that of the gated members still missing for quorum (all of them for a new gang, one for a
//!   replacement member, none for extra members of a gang that has quorum).
//! - A group whose queue does not exist waits and says so; queues' parents only shape the
//!   shares (a parent's capability is not checked at admission yet).

use std::collections::{BTreeMap, HashMap};

use crate::cache::resources::{ResourceId, human};
use crate::cache::{GroupKey, Pod, Queue, Resources, State};
use crate::policy::fair_share::{self, QueueDemand};
use crate::policy::queue_order::{AdmissionPass, Options, QueueSnapshot, WaitingGroup};

/// One group (or group-of-one pod) to release, with the members still gated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// `None` for a pod with a queue but no group.
    pub group: Option<GroupKey>,
    pub pods: Vec<PodRef>,
}

/// Enough of a pod to patch it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The gates on the pod as the cache saw them (the patch checks they did not change).
    pub gates: Vec<String>,
}

impl PodRef {
    fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            gates: pod.scheduling_gates.clone(),
        }
    }
}

/// A group that waits, and why, for status and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub group: GroupKey,
    pub why: String,
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
}

/// What one admission pass decided.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Decision {
    /// In the order the pass admitted them (fair-share order).
    pub admit: Vec<Admission>,
    /// Groups left waiting, by group key.
    pub waiting: Vec<Waiting>,
    /// Every queue the cache knows, by name.
    pub queues: BTreeMap<String, QueueReport>,
    /// The groups of `waiting` that passed every check but free room, in the pass's order:
    /// what reclaim (`crate::admission::reclaim`) may make room for.
    pub short_of_room: Vec<RoomWait>,
    /// Released members not yet placed (counted against the free room, not any node).
    pub in_flight: Resources,
}

/// A group that waited only for room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomWait {
    pub group: GroupKey,
    pub queue: String,
    /// The gated members it needs placed to reach quorum, one entry per pod.
    pub need: Vec<Resources>,
    /// What releasing every gated member adds to its queue.
    pub requests: Resources,
}

/// A group (or a queue-only pod) with gated members, found by [`collect`].
struct Candidate {
    queue: String,
    group: Option<GroupKey>,
    namespace: String,
    pods: Vec<PodRef>,
    /// What releasing every gated member adds to the queue.
    requests: Resources,
    /// The gated members the gang needs placed to reach quorum, one entry per pod.
    need: Vec<Resources>,
    priority: i32,
    created: i64,
    /// Why it cannot be considered at all (no PodGroup, too few members).
    blocked: Option<String>,
}

/// Phase 1's result.
#[derive(Default)]
struct Book {
    candidates: Vec<Candidate>,
    /// What each queue's groups hold, by queue name (queues that do not exist included).
    allocated: BTreeMap<String, Resources>,
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
    let book = collect(state, released);
    let shares = share(state, &book);
    admit(state, book, shares)
}

// ----- phase 1: collect

fn collect(state: &State, released: &dyn Fn(&str) -> bool) -> Book {
    let gated = |p: &Pod| p.awaits_admission() && !released(&p.uid);
    let mut book = Book::default();
    let mut keys: Vec<&GroupKey> = state.groups.keys().collect();
    keys.sort();
    for key in keys {
        let group = &state.groups[key];
        let members = state.live_members(group);
        let queue = State::queue_of(group, &members).to_owned();
        let min_member = group.spec.as_ref().map_or(1, |s| s.min_member);
        hold(state, &mut book, &queue, &members, min_member, &gated);
        let blocked = match &group.spec {
            None => Some(format!(
                "no PodGroup {key}: create one (minMember is the gang size), or label a Job with a queue so that Gangplank creates it"
            )),
            Some(spec) if members.len() < spec.min_member as usize => Some(format!(
                "{} of minMember {} pods exist; waiting for the rest before releasing any",
                members.len(),
                spec.min_member
            )),
            Some(_) => None,
        };
        if let Some(candidate) = candidate(
            queue,
            Some(key.clone()),
            &members,
            min_member,
            blocked,
            &gated,
        ) {
            book.candidates.push(candidate);
        }
    }
    let mut solos: Vec<&Pod> = state
        .pods
        .values()
        .map(|p| p.as_ref())
        .filter(|p| p.pod_group.is_none() && !p.phase.is_terminal())
        .filter(|p| p.queue.is_some())
        .collect();
    solos.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    for pod in solos {
        let queue = pod.queue.clone().unwrap_or_default();
        hold(state, &mut book, &queue, &[pod], 1, &gated);
        if let Some(candidate) = candidate(queue, None, &[pod], 1, None, &gated) {
            book.candidates.push(candidate);
        }
    }
    book
}

/// Adds what `members` hold to `queue`'s allocation (see the module docs).
fn hold(
    state: &State,
    book: &mut Book,
    queue: &str,
    members: &[&Pod],
    min_member: u32,
    gated: &dyn Fn(&Pod) -> bool,
) {
    let mut held = Resources::new();
    let mut placed = 0u32;
    let mut released = Vec::new();
    for pod in members {
        if pod.node_name.is_some() || state.reservations.contains_key(&pod.uid) {
            held.add(&pod.requests);
            placed += 1;
        } else if !gated(pod) {
            released.push(*pod);
        }
    }
    let short = min_member.saturating_sub(placed) as usize;
    for pod in released.into_iter().take(short) {
        held.add(&pod.requests);
        book.in_flight.add(&pod.requests);
    }
    if !held.is_empty() {
        book.allocated
            .entry(queue.to_owned())
            .or_default()
            .add(&held);
    }
}

/// The waiting part of a group, if any member is gated.
fn candidate(
    queue: String,
    group: Option<GroupKey>,
    members: &[&Pod],
    min_member: u32,
    blocked: Option<String>,
    is_gated: &dyn Fn(&Pod) -> bool,
) -> Option<Candidate> {
    let gated: Vec<&Pod> = members.iter().copied().filter(|p| is_gated(p)).collect();
    let first = gated.first()?;
    let mut requests = Resources::new();
    for pod in &gated {
        requests.add(&pod.requests);
    }
    let released = members.len() - gated.len();
    let missing = (min_member as usize)
        .saturating_sub(released)
        .min(gated.len());
    Some(Candidate {
        queue,
        namespace: first.namespace.clone(),
        group,
        need: gated
            .iter()
            .take(missing)
            .map(|p| p.requests.clone())
            .collect(),
        pods: gated.iter().map(|p| PodRef::of(p)).collect(),
        requests,
        priority: members.iter().map(|p| p.priority).max().unwrap_or(0),
        created: gated.iter().map(|p| p.created).min().unwrap_or(0),
        blocked,
    })
}

// ----- phase 2: share

/// Capacity, demand and deserved share per queue the cache knows.
struct Shares {
    queues: BTreeMap<String, QueueReport>,
    /// What each queue's own groups deserve (the admission order's yardstick).
    own: BTreeMap<String, Resources>,
}

fn share(state: &State, book: &Book) -> Shares {
    let mut capacity = Resources::new();
    for node in state.nodes.values().filter(|n| !n.unschedulable) {
        capacity.add(&node.allocatable);
    }
    let mut queues: BTreeMap<String, QueueReport> = BTreeMap::new();
    for name in state.queues.keys() {
        let allocated = book.allocated.get(name).cloned().unwrap_or_default();
        queues.insert(
            name.clone(),
            QueueReport {
                demand: allocated.clone(),
                allocated,
                ..QueueReport::default()
            },
        );
    }
    for c in &book.candidates {
        if let Some(report) = queues.get_mut(&c.queue) {
            report.demand.add(&c.requests);
        }
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
        }
        own.insert(name, share.own);
    }
    Shares { queues, own }
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

/// Free room during the pass.
struct Room {
    /// Per schedulable node, by name: allocatable − used − reserved − placed in this pass.
    nodes: Vec<Resources>,
    /// Σ of the nodes' free room (each at least zero) − in flight − admitted in this pass.
    total: Resources,
    /// Per queue (by its index in name order): guarantee not covered by what it holds.
    unused_guarantee: Vec<Resources>,
    /// Σ of `unused_guarantee`.
    guaranteed: Resources,
    /// Per pod shape (requests) seen in this pass: the first node that may still fit it. Room
    /// only shrinks during a pass, so nodes before it stay too full for that shape, and a
    /// shape whose cursor reached the end fits nowhere, nor does any pod asking at least as
    /// much. This keeps a pass over thousands of groups on a full cluster from scanning every
    /// node for every group.
    cursors: Vec<(Resources, usize)>,
}

impl Room {
    fn new(state: &State, book: &Book, queues: &BTreeMap<String, QueueReport>) -> Room {
        let nodes: Vec<Resources> = state
            .schedulable_nodes()
            .into_iter()
            .map(|node| state.free_on(node))
            .collect();
        let mut total = Resources::new();
        for free in &nodes {
            total.add(&at_least_zero(free));
        }
        total.sub(&book.in_flight);
        let mut room = Room {
            nodes,
            total,
            unused_guarantee: vec![Resources::new(); queues.len()],
            guaranteed: Resources::new(),
            cursors: Vec::new(),
        };
        for (slot, (name, report)) in queues.iter().enumerate() {
            room.set_unused_guarantee(slot, &state.queues[name].guarantee, &report.allocated);
        }
        room
    }

    fn set_unused_guarantee(&mut self, slot: usize, guarantee: &Resources, held: &Resources) {
        if guarantee.is_empty() {
            return;
        }
        self.guaranteed.sub(&self.unused_guarantee[slot]);
        let unused = at_least_zero(&guarantee.minus(held));
        self.guaranteed.add(&unused);
        self.unused_guarantee[slot] = unused;
    }

    /// What a group of `queue` may take: the free total minus others' unused guarantees.
    fn available_to(&self, slot: usize) -> Resources {
        let mut others = self.guaranteed.clone();
        others.sub(&self.unused_guarantee[slot]);
        at_least_zero(&self.total.minus(&others))
    }

    /// Places every pod of `need` on some node (biggest first, first fit), or says which
    /// request finds no node. Changes nothing unless all are placed.
    fn place(&mut self, need: &[Resources]) -> Result<(), Resources> {
        let mut pods: Vec<&Resources> = need.iter().collect();
        pods.sort_by_key(|r| {
            std::cmp::Reverse((r.amount(ResourceId::GPU), r.amount(ResourceId::CPU)))
        });
        let mut placed: Vec<(usize, &Resources)> = Vec::with_capacity(pods.len());
        for pod in pods {
            match self.first_fit(pod) {
                Some(at) => {
                    self.nodes[at].sub(pod);
                    placed.push((at, pod));
                }
                None => {
                    for (at, undo) in placed {
                        self.nodes[at].add(undo);
                        // That node has room again: every shape may look at it again.
                        for (_, cursor) in &mut self.cursors {
                            *cursor = (*cursor).min(at);
                        }
                    }
                    return Err(pod.clone());
                }
            }
        }
        for pod in need {
            self.total.sub(pod);
        }
        Ok(())
    }
}

impl Room {
    /// The first node with room for `pod`, scanning from its shape's cursor.
    fn first_fit(&mut self, pod: &Resources) -> Option<usize> {
        let end = self.nodes.len();
        let hopeless = self
            .cursors
            .iter()
            .any(|(shape, cursor)| *cursor == end && shape.fits_in(pod));
        if hopeless {
            return None;
        }
        let slot = match self.cursors.iter().position(|(shape, _)| shape == pod) {
            Some(slot) => slot,
            None => {
                self.cursors.push((pod.clone(), 0));
                self.cursors.len() - 1
            }
        };
        let start = self.cursors[slot].1;
        let found = self.nodes[start..]
            .iter()
            .position(|free| pod.fits_in(free))
            .map(|i| start + i);
        self.cursors[slot].1 = found.unwrap_or(end);
        found
    }
}

fn at_least_zero(r: &Resources) -> Resources {
    let mut out = Resources::new();
    for (id, amount) in r.ids() {
        if amount > 0 {
            out.set_amount(id, amount);
        }
    }
    out
}

fn admit(state: &State, book: Book, shares: Shares) -> Decision {
    let Shares { mut queues, own } = shares;
    let mut room = Room::new(state, &book, &queues);
    let mut decision = Decision::default();
    let mut snapshots: BTreeMap<&str, QueueSnapshot<usize>> = BTreeMap::new();
    let mut waiting: Vec<(usize, String)> = Vec::new();
    // Queues by index in name order, so that the pass looks nothing up by name.
    let slot_of: HashMap<&str, usize> = queues
        .keys()
        .enumerate()
        .map(|(slot, name)| (name.as_str(), slot))
        .collect();
    let by_slot: Vec<&Queue> = queues.keys().map(|n| state.queues[n].as_ref()).collect();
    let slots: Vec<usize> = book
        .candidates
        .iter()
        .map(|c| slot_of.get(c.queue.as_str()).copied().unwrap_or(usize::MAX))
        .collect();
    for (i, c) in book.candidates.iter().enumerate() {
        let why = match (&c.blocked, state.queues.get(&c.queue)) {
            (Some(why), _) => Some(why.clone()),
            (None, None) => Some(format!(
                "queue {} does not exist: create it, or name an existing queue with the label scheduling.gangplank.dev/queue",
                c.queue
            )),
            (None, Some(q)) if !q.open => Some(format!(
                "queue {} is Closed: it admits nothing until its spec.state is Open again",
                c.queue
            )),
            (None, Some(q)) => {
                snapshots
                    .entry(q.name.as_str())
                    .or_insert_with(|| QueueSnapshot {
                        priority: q.priority,
                        allocated: queues[&q.name].allocated.clone(),
                        ..QueueSnapshot::new(
                            q.name.clone(),
                            own.get(&q.name).cloned().unwrap_or_default(),
                        )
                    })
                    .waiting
                    .push(WaitingGroup {
                        key: i,
                        namespace: c.namespace.clone(),
                        requests: c.requests.clone(),
                        priority: c.priority,
                        created: c.created,
                    });
                None
            }
        };
        if let Some(why) = why {
            waiting.push((i, why));
        }
    }

    let snapshots: Vec<QueueSnapshot<usize>> = snapshots.into_values().collect();
    let mut held: Vec<Resources> = queues.values().map(|r| r.allocated.clone()).collect();
    let mut admitted = Vec::new();
    let mut short_of_room = vec![false; book.candidates.len()];
    let mut pass = AdmissionPass::new(&snapshots, Options::default());
    while let Some(pick) = pass.next() {
        let c = &book.candidates[pick.group.key];
        let slot = slots[pick.group.key];
        let queue = by_slot[slot];
        match judge(&room, slot, queue, &held[slot], c) {
            Ok(()) => {}
            Err((why, room_only)) => {
                pass.skip_last();
                short_of_room[pick.group.key] = room_only;
                waiting.push((pick.group.key, why));
                continue;
            }
        }
        if let Err(pod) = room.place(&c.need) {
            pass.skip_last();
            short_of_room[pick.group.key] = true;
            waiting.push((
                pick.group.key,
                format!(
                    "does not fit now: no schedulable node has room for a member requesting {pod}"
                ),
            ));
            continue;
        }
        held[slot].add(&c.requests);
        room.set_unused_guarantee(slot, &queue.guarantee, &held[slot]);
        admitted.push(pick.group.key);
    }

    let mut candidates: Vec<Option<Candidate>> = book.candidates.into_iter().map(Some).collect();
    for i in admitted {
        if let Some(c) = candidates[i].take() {
            decision.admit.push(Admission {
                group: c.group,
                pods: c.pods,
            });
        }
    }
    for (i, why) in waiting {
        let Some(c) = candidates[i].take() else {
            continue;
        };
        if let Some(report) = queues.get_mut(&c.queue) {
            report.waiting_groups += 1;
        }
        if let Some(group) = c.group {
            if short_of_room[i] {
                decision.short_of_room.push(RoomWait {
                    group: group.clone(),
                    queue: c.queue,
                    need: c.need,
                    requests: c.requests,
                });
            }
            decision.waiting.push(Waiting { group, why });
        }
    }
    decision.waiting.sort_by(|a, b| a.group.cmp(&b.group));
    decision.queues = queues;
    decision.in_flight = book.in_flight;
    decision
}

/// Whether a group of `queue`, which holds `holds`, may take what `c` requests: the queue's
/// capability, then the free room. An error says why, and whether only room is short.
fn judge(
    room: &Room,
    slot: usize,
    queue: &Queue,
    holds: &Resources,
    c: &Candidate,
) -> Result<(), (String, bool)> {
    let after = holds.plus(&c.requests);
    let over: Vec<String> = queue
        .capability
        .iter()
        .filter(|(id, limit)| after.amount(*id) > *limit)
        .map(|(id, limit)| {
            let name = id.name();
            format!(
                "{name} {} held + {} requested > capability {}",
                human(name, holds.amount(id)),
                human(name, c.requests.amount(id)),
                human(name, limit)
            )
        })
        .collect();
    if !over.is_empty() {
        return Err((
            format!(
                "queue {} has reached its capability: {}",
                queue.name,
                over.join(", ")
            ),
            false,
        ));
    }
    let mut needed = Resources::new();
    for pod in &c.need {
        needed.add(pod);
    }
    let available = room.available_to(slot);
    let short = needed.shortfall(&available);
    if !short.is_empty() {
        let what: Vec<String> = short
            .iter()
            .map(|(name, _)| {
                format!(
                    "{name} {} needed, {} free",
                    human(name, needed.get(name)),
                    human(name, available.get(name))
                )
            })
            .collect();
        return Err((
            format!(
                "does not fit now: {} (free room counts other queues' unused guarantees as taken)",
                what.join(", ")
            ),
            true,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::labels::ADMISSION_GATE;
    use crate::cache::{Node, PodGroup, PodPhase, Reservation};
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
            key: GroupKey::new("ns", name),
            min_member: min,
            max_member: None,
            queue: queue.into(),
            schedule_timeout: Duration::from_secs(60),
            min_resources: Resources::new(),
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
                Some(g) => g.name.clone(),
                None => a.pods[0].name.clone(),
            })
            .collect()
    }

    fn why<'d>(d: &'d Decision, name: &str) -> &'d str {
        &d.waiting
            .iter()
            .find(|w| w.group.name == name)
            .unwrap_or_else(|| panic!("{name} is not waiting: {d:?}"))
            .why
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
        assert!(why(&d, "b").starts_with("does not fit now: cpu 6 needed, 2 free"));
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
            "does not fit now: no schedulable node has room for a member requesting cpu: 6, pods: 1"
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
        assert!(why(&d, "c").starts_with("does not fit now: cpu 2 needed, 0 free"));
        release(&mut s, &d);
        bind_released(&mut s);
        gang(&mut s, "first", "reserved", 2, 2_000, 9);
        assert_eq!(admitted(&decide(&s)), vec!["first"]);
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
}
