//! Gang claims: capacity a gang holds while the scheduler places its members one at a time.
//!
//! The first time a member of a gang without quorum is filtered, the gang *claims* room for
//! every member it still needs, and only if all of them fit in what is free minus what other
//! gangs have claimed. A claim is a list of slots, one per member still to place, each on a
//! node (planned greedily, biggest member first, best fit for binpack or emptiest node for
//! spread). It is capacity, not a promise of nodes: the scheduler samples candidate nodes on
//! large clusters, so a member may land anywhere it fits without eating other gangs' claims,
//! and the claim gives up one slot when it does (`take_slot`). Two gangs that each need 60% of
//! the cluster can therefore never both hold half of it: the second one cannot claim until the
//! first one's capacity is released, and its members are filtered out meanwhile.
//!
//! A claim ends when the gang reaches quorum (its members are reserved or bound), when it
//! expires (no member filtered or reserved within the gang's schedule timeout: [`expire`], which
//! filter and bind call on their way and the extender's timer calls in a quiet cluster), or when
//! its PodGroup is deleted.
//!
//! Everything here is pure: it reads and writes a [`State`] and takes the time as an argument
//! (the adapters pass tokio's clock), so tests drive it step by step.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::limits;
use crate::model::{
    Claim, GroupKey, Node, NodeSlot, Pod, PodGroup, PodPhase, Reservation, ResourceId, Resources,
    Slot, State,
};
use crate::policy::constraints::{Constraints, feasible};
use crate::policy::fit::{first_fit, size};
use crate::policy::placement::Strategy;

/// How the verdict on one filter call is phrased to the scheduler. Borrows the candidates'
/// names: a call over thousands of nodes copies none of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict<'a> {
    /// In the candidates' order.
    pub passed: Vec<&'a str>,
    /// Nodes where preemption could help.
    pub failed: BTreeMap<&'a str, Why>,
    /// Nodes where nothing the scheduler can do helps.
    pub unresolvable: BTreeMap<&'a str, Why>,
}

impl<'a> Verdict<'a> {
    fn all_fail<S: AsRef<str>>(candidates: &'a [S], why: &str, unresolvable: bool) -> Self {
        let why = Why::from(why);
        // `collect` sorts and bulk-loads the map: cheaper than one insert per node.
        let failed = candidates
            .iter()
            .map(|n| (n.as_ref(), why.clone()))
            .collect();
        if unresolvable {
            Verdict {
                unresolvable: failed,
                ..Verdict::default()
            }
        } else {
            Verdict {
                failed,
                ..Verdict::default()
            }
        }
    }
}

/// Why a node fails, shared by every node that fails for the same reason (a refused gang
/// fails thousands of nodes with one message).
#[derive(Clone, PartialEq, Eq)]
pub struct Why(Arc<str>);

impl From<&str> for Why {
    fn from(why: &str) -> Self {
        Why(why.into())
    }
}

impl std::ops::Deref for Why {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for Why {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl std::fmt::Debug for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for Why {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// Why a filter or reservation cannot be answered at all (an extender `Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "pod {pod} names pod group {group}, which does not exist: create the PodGroup (minMember is the gang size) or remove the pod-group label"
    )]
    NoPodGroup { pod: String, group: GroupKey },
    #[error(
        "pod {pod} is not in Gangplank's cache yet (the pod watch lags behind the scheduler); the scheduler will retry"
    )]
    UnknownPod { pod: String },
    #[error(
        "pod {pod} does not carry the marker resource scheduling.gangplank.dev/managed, so Gangplank does not bind it: only pods of a group or queue, marked by Gangplank's mutating webhook, are bound here (with the every-pod scheduler configuration, start Gangplank with --bind-unmarked-pods=true)"
    )]
    NotManaged { pod: String },
    #[error("pod {pod} is already bound to node {node}")]
    AlreadyBound { pod: String, node: String },
    #[error(
        "pod {pod} still carries Gangplank's admission gate: its queue has not admitted it, so Gangplank does not bind it"
    )]
    NotAdmitted { pod: String },
    #[error(
        "pod {pod} carries the marker resource scheduling.gangplank.dev/managed but names no group or queue, so Gangplank's webhook did not put it there: Gangplank binds only pods of a group or queue; remove the marker from the pod's spec, or give it a queue"
    )]
    MarkedOutsideAnyQueue { pod: String },
    #[error(
        "pod {pod}'s spec.nodeSelector does not match node {node}'s labels ({label}), so Gangplank does not bind it there"
    )]
    NodeNotSelected {
        pod: String,
        node: String,
        label: String,
    },
    #[error("UID {uid} is the UID of pod {owner}, not of pod {pod}")]
    NotThisPod {
        pod: String,
        uid: String,
        owner: String,
    },
}

/// Settings of claim planning.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub strategy: Strategy,
    /// Upper bound on how long a claim and held binds last, whatever the PodGroup asks: must
    /// stay below the scheduler's `httpTimeout`.
    pub max_hold: Duration,
    /// Bind pods that do not carry the marker resource (`--bind-unmarked-pods`).
    pub bind_unmarked: bool,
}

impl Settings {
    /// How long `group` may go with no member placed before its claim and held binds end.
    pub fn timeout(&self, group: &PodGroup) -> Duration {
        group.schedule_timeout.min(self.max_hold)
    }
}

/// Filters `candidates` for `pod` (already converted from the request), creating or refreshing
/// its gang's claim. A pod with a queue but no group (a group of one) lands only in room no
/// gang has claimed, like a gang's elastic extras: admission counted on that, and a backfill
/// head's reservation is a claim. Pods in neither pass through untouched.
pub fn filter<'a, S: AsRef<str>>(
    state: &mut State,
    pod: &Pod,
    constraints: &Constraints,
    candidates: &'a [S],
    settings: &Settings,
    now: Instant,
) -> Result<Verdict<'a>, Error> {
    let Some(key) = GroupKey::of(pod) else {
        if pod.queue.is_some() {
            expire(state, now);
            return Ok(per_node(state, pod, candidates, &FxHashSet::default()));
        }
        return Ok(Verdict {
            passed: candidates.iter().map(AsRef::as_ref).collect(),
            ..Verdict::default()
        });
    };
    expire(state, now);
    let group = spec(state, pod, &key)?;
    let placed = placed_members(state, &key, &pod.uid);
    if let Some(max) = group.max_member
        && placed >= max as usize
    {
        let why = format!("gang {key} already has maxMember={max} members placed");
        return Ok(Verdict::all_fail(candidates, &why, true));
    }
    if placed >= group.min_member as usize {
        // Quorum: extra (elastic) members take only room nobody has claimed.
        return Ok(per_node(state, pod, candidates, &FxHashSet::default()));
    }
    if !limits::gang_within_limit(group.min_member) {
        let why = too_large(&key, group.min_member);
        state.set_wait_reason(&key, Some(why.clone()));
        return Ok(Verdict::all_fail(candidates, &why, true));
    }
    let deadline = now + settings.timeout(&group);
    if let Some(claim) = state.ledger.claims.get_mut(&key) {
        // Only the deadline moves: the slots, and so the per-node sums, stay as they are.
        claim.deadline = Some(deadline);
    } else {
        let needed = group.min_member as usize - placed;
        let shapes = member_shapes(state, &key, pod, needed);
        let lent = state.ledger.lent.contains(&key);
        match plan(state, &shapes, constraints, settings.strategy, lent) {
            Ok(slots) => {
                state.set_wait_reason(&key, None);
                state.set_claim(
                    &key,
                    Claim {
                        slots,
                        deadline: Some(deadline),
                        ..Default::default()
                    },
                )
            }
            Err(fitted) => {
                let never = !fits_on_empty(state, &shapes, constraints);
                let why = waiting_message(&key, &group, &shapes, placed, fitted, never);
                // Kept for the PodGroup's status (the controller reads it).
                state.set_wait_reason(&key, Some(why.clone()));
                return Ok(Verdict::all_fail(candidates, &why, never));
            }
        }
    }
    // The nodes where a slot of the claim holds this pod, looked up once per candidate instead
    // of scanning every slot per candidate.
    let claim = &state.ledger.claims[&key];
    let tightest = holding(claim, &pod.requests, true);
    let verdict = per_node(state, pod, candidates, &tightest);
    if verdict.passed.is_empty() {
        // None of the tightest slots' nodes is a candidate: any slot that holds the pod will do.
        let any = holding(claim, &pod.requests, false);
        if any.len() > tightest.len() {
            return Ok(per_node(state, pod, candidates, &any));
        }
    }
    Ok(verdict)
}

/// Why the gang `key` of `min_member` is never placed: it is larger than [`limits::MAX_MEMBERS`]
/// (a PodGroup written before the limit, which the webhook refuses now).
fn too_large(key: &GroupKey, min_member: u32) -> String {
    format!(
        "gang {key} has minMember {min_member}, more than Gangplank's largest gang ({}): it is never placed; lower spec.minMember",
        limits::MAX_MEMBERS
    )
}

/// The nodes where a slot of `claim` holds a pod asking `requests`; with `tightest`, only
/// those of the smallest such slots ([`size`]). A gang's members differ (a launcher and its
/// workers, a Ray head without the workers' init container), and a small member that took a
/// big member's slot would leave the big one only a slot too small for it.
pub fn holding<'c>(claim: &'c Claim, requests: &Resources, tightest: bool) -> FxHashSet<&'c str> {
    let covering = claim.slots.iter().filter(|s| requests.fits_in(&s.requests));
    let smallest = covering.clone().map(|s| size(&s.requests)).min();
    covering
        .filter(|s| !tightest || Some(size(&s.requests)) == smallest)
        .map(|s| s.node.as_str())
        .collect()
}

/// Records that the scheduler assumed `uid` on `node` (the bind call) and moves the gang's
/// claim accordingly. Returns the pod's group and whether the gang now has quorum.
pub fn reserve(
    state: &mut State,
    uid: &str,
    display: &str,
    node: &str,
    settings: &Settings,
    now: Instant,
) -> Result<Option<(PodGroup, bool)>, Error> {
    let pod = state
        .pods
        .get(uid)
        .cloned()
        .ok_or_else(|| Error::UnknownPod {
            pod: display.to_owned(),
        })?;
    bindable(&pod, uid, display, settings)?;
    selects(state, &pod, display, node)?;
    let Some(key) = GroupKey::of(&pod) else {
        return Ok(None);
    };
    let group = spec(state, &pod, &key)?;
    state.reserve(
        uid,
        Reservation {
            node: node.to_owned(),
            requests: pod.requests.clone(),
            group: Some(key.clone()),
        },
    );
    take_slot(
        state,
        &key,
        &pod.requests,
        node,
        now + settings.timeout(&group),
    );
    let quorum = placed_members(state, &key, "") >= group.min_member as usize;
    if quorum {
        state.drop_claim(&key);
    }
    Ok(Some((group, quorum)))
}

/// Refuses a bind the scheduler serving Gangplank would not ask for: a pod other than the one
/// `uid` names (`display` is `namespace/name`), a pod already bound, or one without the marker
/// resource (unless `settings.bind_unmarked`).
fn bindable(pod: &Pod, uid: &str, display: &str, settings: &Settings) -> Result<(), Error> {
    let same = display
        .strip_prefix(pod.namespace.as_str())
        .and_then(|rest| rest.strip_prefix('/'))
        == Some(pod.name.as_str());
    if !same {
        return Err(Error::NotThisPod {
            pod: display.to_owned(),
            uid: uid.to_owned(),
            owner: format!("{}/{}", pod.namespace, pod.name),
        });
    }
    if let Some(node) = &pod.node_name {
        return Err(Error::AlreadyBound {
            pod: display.to_owned(),
            node: node.clone(),
        });
    }
    if !pod.marked && !settings.bind_unmarked {
        return Err(Error::NotManaged {
            pod: display.to_owned(),
        });
    }
    if pod.awaits_admission() {
        return Err(Error::NotAdmitted {
            pod: display.to_owned(),
        });
    }
    if !settings.bind_unmarked && pod.pod_group.is_none() && pod.queue.is_none() {
        return Err(Error::MarkedOutsideAnyQueue {
            pod: display.to_owned(),
        });
    }
    Ok(())
}

/// The pod's `spec.nodeSelector` matches `node`, when the model knows the node (one the
/// watch has not shown yet is left to the scheduler, which has checked it): a caller of bind
/// cannot put a pod on a node the pod does not select.
fn selects(state: &State, pod: &Pod, display: &str, node: &str) -> Result<(), Error> {
    let Some(known) = state.nodes.get(node) else {
        return Ok(());
    };
    match pod
        .node_selector
        .iter()
        .find(|(k, v)| known.labels.get(k.as_str()) != Some(v))
    {
        None => Ok(()),
        Some((k, v)) => Err(Error::NodeNotSelected {
            pod: display.to_owned(),
            node: node.to_owned(),
            label: format!("{k}={v}"),
        }),
    }
}

/// Forgets the reservations of `uids` and the gang's claim: the held binds failed or timed
/// out, so the scheduler frees the pods and retries them.
pub fn release(state: &mut State, key: &GroupKey, uids: &[String]) {
    for uid in uids {
        state.release(uid);
    }
    state.drop_claim(key);
}

/// Members bound (running, or succeeded: they ran as part of the gang) or reserved, other than
/// `except`. A member that succeeded still counts: a gang whose binds were cut short (its
/// leader died between two members' binds) and whose bound members then finished must bind the
/// rest, not wait for a quorum it already had.
pub fn placed_members(state: &State, key: &GroupKey, except: &str) -> usize {
    state.group(key).map_or(0, |g| {
        g.members
            .iter()
            .filter(|(uid, m)| {
                *uid != except
                    && ((m.live && state.holds_room(uid, m))
                        || (m.bound && m.pod.phase == PodPhase::Succeeded))
            })
            .count()
    })
}

fn spec(state: &State, pod: &Pod, key: &GroupKey) -> Result<PodGroup, Error> {
    state
        .group(key)
        .and_then(|g| g.spec.as_deref())
        .cloned()
        .ok_or_else(|| Error::NoPodGroup {
            pod: format!("{}/{}", pod.namespace, pod.name),
            group: key.clone(),
        })
}

/// Whether some claim's deadline has passed at `now`: [`expire`] would change something.
pub fn any_expired(state: &State, now: Instant) -> bool {
    state.ledger.claims.values().any(|c| c.expired(now))
}

/// Drops every claim whose deadline has passed at `now` (no member placed within the gang's
/// timeout, or a head's reservation that outlived its own); returns how many. Filter and bind
/// call it on their way, and a timer calls it in a quiet cluster.
pub fn expire(state: &mut State, now: Instant) -> usize {
    let expired: Vec<GroupKey> = state
        .ledger
        .claims
        .iter()
        .filter(|(_, c)| c.expired(now))
        .map(|(k, _)| k.clone())
        .collect();
    for key in &expired {
        tracing::info!(group = %key, "gang claim expired: no member placed within its timeout");
        state.drop_claim(key);
    }
    expired.len()
}

/// Judges each candidate node for `pod`: a node passes where the pod fits in its own gang's
/// slot there (`own_slot`: the nodes where one holds it), or else in room that no gang has
/// claimed. One lookup per candidate, no allocation but the answer's; nodes failing for the
/// same reason share its text.
fn per_node<'a, S: AsRef<str>>(
    state: &State,
    pod: &Pod,
    candidates: &'a [S],
    own_slot: &FxHashSet<&str>,
) -> Verdict<'a> {
    let requests = &pod.requests;
    let mut passed = Vec::with_capacity(candidates.len());
    let mut failed = Vec::new();
    let mut reasons = Reasons::default();
    for name in candidates {
        let name = name.as_ref();
        let Some(slot) = state.nodes.slot(name).filter(|slot| slot.node.is_some()) else {
            failed.push((name, reasons.unknown()));
            continue;
        };
        // `free` is allocatable minus used, reserved and claimed; plus `claimed`, the room
        // outside any claim.
        if requests.fits_in(&slot.free) || own_slot.contains(name) {
            passed.push(name);
        } else if requests.fits_in_with(&slot.free, &slot.claimed) {
            failed.push((name, reasons.claimed()));
        } else {
            failed.push((
                name,
                reasons.insufficient(requests, &slot.free, &slot.claimed),
            ));
        }
    }
    Verdict {
        passed,
        // Built in one go (sorted, then bulk-loaded): cheaper than thousands of inserts.
        failed: failed.into_iter().collect(),
        unresolvable: BTreeMap::new(),
    }
}

/// The reasons of one `per_node` call, each written once.
#[derive(Default)]
struct Reasons {
    unknown: Option<Why>,
    claimed: Option<Why>,
    /// By the set of resources short (a bit per resource id).
    insufficient: Vec<(u64, Why)>,
}

impl Reasons {
    fn unknown(&mut self) -> Why {
        self.unknown
            .get_or_insert_with(|| Why::from("node is not in Gangplank's cache yet"))
            .clone()
    }

    fn claimed(&mut self) -> Why {
        self.claimed
            .get_or_insert_with(|| Why::from("room is claimed by other gangs"))
            .clone()
    }

    /// The reason for a node where `requests` does not fit in `free` plus `claimed`.
    fn insufficient(&mut self, requests: &Resources, free: &Resources, claimed: &Resources) -> Why {
        let room = |i: ResourceId| free.amount(i).saturating_add(claimed.amount(i));
        // Which resources are short, a bit per id; past id 63 the reason is not kept.
        let short = requests
            .ids()
            .filter(|&(i, need)| need > 0 && need > room(i))
            .try_fold(0u64, |mask, (i, _)| {
                (i.index() < 64).then(|| mask | 1 << i.index())
            });
        let known = short.and_then(|short| self.insufficient.iter().find(|(m, _)| *m == short));
        if let Some((_, why)) = known {
            return why.clone();
        }
        let why = Why::from(insufficient(requests, &free.plus(claimed)).as_str());
        if let Some(short) = short {
            self.insufficient.push((short, why.clone()));
        }
        why
    }
}

/// `insufficient cpu, nvidia.com/gpu`: the resources of which `requests` needs more than `free`
/// holds, in id order, written into one string.
fn insufficient(requests: &Resources, free: &Resources) -> String {
    let mut why = String::from("insufficient ");
    let mut first = true;
    for (id, need) in requests.ids() {
        if need > 0 && need > free.amount(id) {
            if !first {
                why.push_str(", ");
            }
            why.push_str(id.name());
            first = false;
        }
    }
    why
}

/// The requests of the `needed` members to place: this pod, then the other members not placed
/// yet, biggest first; members not created yet are assumed to look like this pod.
fn member_shapes(state: &State, key: &GroupKey, pod: &Pod, needed: usize) -> Vec<Resources> {
    let mut others: Vec<Resources> = state
        .members(key)
        .filter(|p| p.uid != pod.uid && p.node_name.is_none() && !p.phase.is_terminal())
        .filter(|p| !state.ledger.reservations.contains_key(&p.uid))
        .map(|p| p.requests.clone())
        .collect();
    others.sort_by_key(|r| std::cmp::Reverse(size(r)));
    let mut shapes = vec![pod.requests.clone()];
    shapes.extend(others.into_iter().take(needed.saturating_sub(1)));
    while shapes.len() < needed {
        shapes.push(pod.requests.clone());
    }
    shapes.sort_by_key(|r| std::cmp::Reverse(size(r)));
    shapes
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
fn plan(
    state: &State,
    shapes: &[Resources],
    constraints: &Constraints,
    strategy: Strategy,
    lent: bool,
) -> Result<Vec<Slot>, usize> {
    // A gang the admission pass lent reserved room may plan in it.
    let reservation = lent
        .then(|| state.ledger.claims.values().find(|c| c.reservation()))
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
        for (i, (node, slot)) in state.nodes.known().enumerate() {
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
fn fits_on_empty(state: &State, shapes: &[Resources], constraints: &Constraints) -> bool {
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
        .nodes
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

/// Gives up one slot of the gang's claim for a member reserved on `node`: the slot on that node
/// that holds the pod if there is one, else the smallest slot elsewhere that would have held
/// it, else the biggest slot.
fn take_slot(
    state: &mut State,
    key: &GroupKey,
    requests: &Resources,
    node: &str,
    deadline: Instant,
) {
    let Some(mut claim) = state.ledger.claims.get(key).cloned() else {
        return;
    };
    let covering = |s: &Slot| requests.fits_in(&s.requests);
    let index = claim
        .slots
        .iter()
        .position(|s| s.node == node && covering(s))
        .or_else(|| {
            claim
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| covering(s))
                .min_by_key(|(_, s)| size(&s.requests))
                .map(|(i, _)| i)
        })
        .or_else(|| {
            claim
                .slots
                .iter()
                .enumerate()
                .max_by_key(|(_, s)| size(&s.requests))
                .map(|(i, _)| i)
        });
    if let Some(i) = index {
        claim.slots.swap_remove(i);
    }
    if !covers(&claim.slots, &unplaced_shapes(state, key)) {
        // A member took a slot shaped for another: plan again at the next member's filter.
        tracing::debug!(group = %key, "gang claim no longer fits its unplaced members; planning again");
        state.drop_claim(key);
        return;
    }
    claim.deadline = Some(deadline);
    state.set_claim(key, claim);
}

/// The requests of the gang's members that are neither bound nor reserved, biggest first.
fn unplaced_shapes(state: &State, key: &GroupKey) -> Vec<Resources> {
    let mut shapes: Vec<Resources> = state
        .members(key)
        .filter(|p| p.node_name.is_none() && !p.phase.is_terminal())
        .filter(|p| !state.ledger.reservations.contains_key(&p.uid))
        .map(|p| p.requests.clone())
        .collect();
    shapes.sort_by_key(|r| std::cmp::Reverse(size(r)));
    shapes
}

/// Whether `slots` can hold the biggest `slots.len()` of `shapes` (biggest first), one each,
/// each in the smallest free slot that holds it.
fn covers(slots: &[Slot], shapes: &[Resources]) -> bool {
    let mut free: Vec<&Resources> = slots.iter().map(|s| &s.requests).collect();
    free.sort_by_key(|r| size(r));
    shapes.iter().take(slots.len()).all(|shape| {
        match free.iter().position(|slot| shape.fits_in(slot)) {
            Some(i) => {
                free.remove(i);
                true
            }
            None => false,
        }
    })
}

fn waiting_message(
    key: &GroupKey,
    group: &PodGroup,
    shapes: &[Resources],
    placed: usize,
    fitted: usize,
    never: bool,
) -> String {
    let shape = &shapes[0];
    let uniform = shapes.iter().all(|s| s == shape);
    let what = if uniform {
        format!("{} more pods of {{{shape}}}", shapes.len())
    } else {
        format!("{} more pods (the largest {{{shape}}})", shapes.len())
    };
    if never {
        format!(
            "gang {key} (minMember {}) can never fit: it needs {what} and the nodes this pod may use hold only {fitted} even when empty",
            group.min_member
        )
    } else {
        format!(
            "gang {key} waits for room: {placed}/{} members placed, needs {what}; only {fitted} fit in capacity not used or claimed by other gangs",
            group.min_member
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PodPhase;

    const SETTINGS: Settings = Settings {
        strategy: Strategy::Binpack,
        max_hold: Duration::from_secs(60),
        bind_unmarked: false,
    };

    fn cluster(nodes: usize, cpu: i64) -> State {
        let mut s = State::default();
        for i in 0..nodes {
            s.apply_node(Node {
                name: format!("n{i}"),
                allocatable: Resources::from([("cpu", cpu * 1000), ("pods", 110)]),
                labels: Default::default(),
                taints: vec![],
                unschedulable: false,
                not_ready: false,
            });
        }
        s
    }

    fn group(s: &mut State, name: &str, min: u32) -> GroupKey {
        let key = GroupKey::new("ns", name);
        s.apply_pod_group(PodGroup {
            schedule_timeout: Duration::from_secs(30),
            ..PodGroup::new(key.clone(), min, "default")
        });
        key
    }

    fn member(s: &mut State, group: &str, i: usize, cpu: i64) -> Pod {
        let pod = Pod {
            uid: format!("{group}-{i}"),
            namespace: "ns".into(),
            name: format!("{group}-{i}"),
            node_name: None,
            phase: PodPhase::Pending,
            requests: Resources::from([("cpu", cpu * 1000), ("pods", 1)]),
            pod_group: Some(group.into()),
            queue: None,
            priority: 0,
            marked: true,
            ..Default::default()
        };
        s.apply_pod(pod.clone());
        pod
    }

    fn names(s: &State) -> Vec<String> {
        let mut v: Vec<String> = s.nodes.keys().cloned().collect();
        v.sort();
        v
    }

    /// The group `head` holding a reservation of `cpu` millicores on n0.
    fn reserve_on_n0(s: &mut State, cpu: i64) -> GroupKey {
        let head = group(s, "head", 1);
        s.set_claim(
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
    fn run(s: &mut State, pod: &Pod, now: Instant) -> Verdict<'static> {
        let candidates = Box::leak(names(s).into_boxed_slice());
        filter(s, pod, &Constraints::default(), candidates, &SETTINGS, now).unwrap()
    }

    #[test]
    fn pods_in_no_group_pass_every_node_without_a_claim() {
        let mut s = cluster(3, 4);
        let pod = Pod {
            pod_group: None,
            ..member(&mut s, "x", 0, 100)
        };
        let v = run(&mut s, &pod, Instant::now());
        assert_eq!(v.passed.len(), 3);
        assert!(s.ledger.claims.is_empty());
    }

    #[test]
    fn a_pod_of_a_queue_in_no_group_lands_only_outside_claims_and_takes_none() {
        let mut s = cluster(2, 8);
        reserve_on_n0(&mut s, 6_000);
        let pod = Pod {
            pod_group: None,
            queue: Some("batch".into()),
            ..member(&mut s, "solo", 0, 4)
        };
        let v = run(&mut s, &pod, Instant::now());
        assert_eq!(v.passed, vec!["n1"]);
        assert_eq!(v.failed["n0"], "room is claimed by other gangs");
        assert_eq!(s.ledger.claims.len(), 1, "a group of one claims nothing");
        // Room beside the claim is still open to it.
        let small = Pod {
            uid: "small".into(),
            requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
            ..pod
        };
        assert_eq!(run(&mut s, &small, Instant::now()).passed, vec!["n0", "n1"]);
    }

    #[test]
    fn only_a_gang_lent_room_of_the_heads_reservation_may_claim_in_it() {
        let mut s = cluster(1, 8);
        reserve_on_n0(&mut s, 8_000);
        let lent = group(&mut s, "lent", 1);
        group(&mut s, "other", 1);
        let other = member(&mut s, "other", 0, 2);
        assert!(run(&mut s, &other, Instant::now()).passed.is_empty());

        s.ledger.lent.insert(lent.clone());
        let pod = member(&mut s, "lent", 0, 2);
        assert_eq!(run(&mut s, &pod, Instant::now()).passed, vec!["n0"]);
        assert_eq!(s.ledger.claims[&lent].slots[0].node, "n0");
    }

    #[test]
    fn a_gang_that_fits_claims_room_for_every_member_it_still_needs() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 4);
        let pod = member(&mut s, "g", 0, 4);
        let v = run(&mut s, &pod, Instant::now());
        assert_eq!(v.passed, vec!["n0", "n1"]);
        assert_eq!(s.ledger.claims[&key].slots.len(), 4);
        assert_eq!(
            s.claimed_on("n0").get("cpu") + s.claimed_on("n1").get("cpu"),
            16_000
        );
    }

    #[test]
    fn a_gang_of_eight_where_six_fit_is_refused_on_every_node_with_the_reason() {
        let mut s = cluster(3, 8);
        let key = group(&mut s, "big", 8);
        let pod = member(&mut s, "big", 0, 4);
        let v = run(&mut s, &pod, Instant::now());
        assert!(v.passed.is_empty());
        assert!(
            v.failed.is_empty(),
            "the cluster is too small even when empty"
        );
        assert_eq!(v.unresolvable.len(), 3);
        let why = &v.unresolvable["n0"];
        assert!(
            why.contains("gang ns/big (minMember 8) can never fit"),
            "{why}"
        );
        assert!(why.contains("hold only 6"), "{why}");
        assert!(!s.ledger.claims.contains_key(&key));
    }

    #[test]
    fn the_second_of_two_gangs_needing_sixty_percent_waits_whole() {
        let mut s = cluster(10, 4);
        group(&mut s, "a", 6);
        group(&mut s, "b", 6);
        let a0 = member(&mut s, "a", 0, 4);
        let b0 = member(&mut s, "b", 0, 4);
        let now = Instant::now();
        assert_eq!(
            run(&mut s, &a0, now).passed.len(),
            10,
            "a may use any free room"
        );
        assert_eq!(s.ledger.claims[&GroupKey::new("ns", "a")].slots.len(), 6);
        let v = run(&mut s, &b0, now);
        assert!(v.passed.is_empty(), "b must not take any of a's room");
        let why = &v.failed["n0"];
        assert!(
            why.contains("gang ns/b waits for room: 0/6 members placed"),
            "{why}"
        );
        assert!(why.contains("only 4 fit"), "{why}");
        let b = GroupKey::new("ns", "b");
        assert_eq!(
            s.ledger.wait_reasons.get(&b).map(String::as_str),
            Some(&**why),
            "the reason is kept for b's PodGroup status"
        );
        s.delete_pod_group(&GroupKey::new("ns", "a"));
        run(&mut s, &b0, now);
        assert_eq!(s.ledger.wait_reasons.get(&b), None, "b claimed room");
    }

    #[test]
    fn members_land_only_where_their_claim_or_unclaimed_room_is() {
        let mut s = cluster(4, 4);
        group(&mut s, "a", 2);
        group(&mut s, "b", 2);
        let now = Instant::now();
        let a0 = member(&mut s, "a", 0, 4);
        run(&mut s, &a0, now);
        let a_nodes: Vec<String> = s.ledger.claims[&GroupKey::new("ns", "a")]
            .slots
            .iter()
            .map(|s| s.node.clone())
            .collect();
        let b0 = member(&mut s, "b", 0, 4);
        let v = run(&mut s, &b0, now);
        for n in &a_nodes {
            assert_eq!(v.failed[n.as_str()], "room is claimed by other gangs");
        }
        assert_eq!(v.passed.len(), 2);
        let a1 = member(&mut s, "a", 1, 4);
        let v = run(&mut s, &a1, now);
        let mut passed = v.passed.clone();
        passed.sort();
        let mut expected = a_nodes.clone();
        expected.sort();
        assert_eq!(passed, expected, "a's members stay on a's claim");
    }

    #[test]
    fn reserving_members_moves_the_claim_and_quorum_ends_it() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 3);
        let now = Instant::now();
        let pods: Vec<Pod> = (0..3).map(|i| member(&mut s, "g", i, 2)).collect();
        run(&mut s, &pods[0], now);
        assert_eq!(s.ledger.claims[&key].slots.len(), 3);
        let r = reserve(&mut s, "g-0", "ns/g-0", "n1", &SETTINGS, now).unwrap();
        assert_eq!(r.map(|(_, q)| q), Some(false));
        assert_eq!(s.ledger.claims[&key].slots.len(), 2);
        assert_eq!(s.reserved_on("n1").get("cpu"), 2000);
        reserve(&mut s, "g-1", "ns/g-1", "n1", &SETTINGS, now).unwrap();
        let r = reserve(&mut s, "g-2", "ns/g-2", "n0", &SETTINGS, now).unwrap();
        assert_eq!(r.map(|(g, q)| (g.min_member, q)), Some((3, true)));
        assert!(!s.ledger.claims.contains_key(&key), "quorum ends the claim");
        assert!(s.nodes.slots().all(|n| n.claimed.is_empty()));
    }

    #[test]
    fn bind_refuses_a_pod_that_wrote_the_marker_itself_outside_any_group_or_queue() {
        let mut s = cluster(1, 8);
        s.apply_pod(Pod {
            uid: "forged".into(),
            namespace: "ns".into(),
            name: "forged".into(),
            marked: true,
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        });
        let now = Instant::now();
        let err = reserve(&mut s, "forged", "ns/forged", "n0", &SETTINGS, now).unwrap_err();
        assert!(matches!(err, Error::MarkedOutsideAnyQueue { .. }), "{err}");
        let every_pod = Settings {
            bind_unmarked: true,
            ..SETTINGS
        };
        assert_eq!(
            reserve(&mut s, "forged", "ns/forged", "n0", &every_pod, now),
            Ok(None),
            "with every pod sent to Gangplank, it binds every pod"
        );
    }

    #[test]
    fn bind_refuses_a_pod_still_at_the_gate() {
        let mut s = cluster(1, 8);
        s.apply_pod(Pod {
            uid: "waiting".into(),
            namespace: "ns".into(),
            name: "waiting".into(),
            queue: Some("default".into()),
            marked: true,
            scheduling_gates: vec![crate::model::names::ADMISSION_GATE.into()],
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        });
        let now = Instant::now();
        let err = reserve(&mut s, "waiting", "ns/waiting", "n0", &SETTINGS, now).unwrap_err();
        assert!(matches!(err, Error::NotAdmitted { .. }), "{err}");
        assert!(s.ledger.reservations.is_empty(), "nothing reserved");
    }

    #[test]
    fn bind_refuses_a_node_the_pods_selector_does_not_select() {
        let mut s = cluster(2, 8);
        let mut zoned = s.nodes.get("n1").unwrap().as_ref().clone();
        zoned.labels.insert("zone".into(), "a".into());
        s.apply_node(zoned);
        let pod = |uid: &str| Pod {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            queue: Some("default".into()),
            marked: true,
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        };
        s.apply_pod(Pod {
            node_selector: [("zone".to_owned(), "a".to_owned())].into(),
            ..pod("zoned")
        });
        let now = Instant::now();
        let err = reserve(&mut s, "zoned", "ns/zoned", "n0", &SETTINGS, now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pod ns/zoned's spec.nodeSelector does not match node n0's labels (zone=a), so Gangplank does not bind it there"
        );
        assert_eq!(
            reserve(&mut s, "zoned", "ns/zoned", "n1", &SETTINGS, now),
            Ok(None)
        );
        assert_eq!(
            reserve(&mut s, "zoned", "ns/zoned", "unseen", &SETTINGS, now),
            Ok(None),
            "a node the watch has not shown yet is the scheduler's word"
        );
    }

    #[test]
    fn a_pod_without_the_marker_is_not_bound_unless_unmarked_binds_are_allowed() {
        let mut s = cluster(1, 8);
        let plain = Pod {
            uid: "plain".into(),
            namespace: "kube-system".into(),
            name: "plain".into(),
            requests: Resources::from([("cpu", 1000), ("pods", 1)]),
            ..Default::default()
        };
        s.apply_pod(plain);
        let now = Instant::now();
        let err = reserve(&mut s, "plain", "kube-system/plain", "n0", &SETTINGS, now).unwrap_err();
        assert!(matches!(err, Error::NotManaged { .. }), "{err}");
        assert!(
            err.to_string().contains("--bind-unmarked-pods=true"),
            "{err}"
        );
        let every_pod = Settings {
            bind_unmarked: true,
            ..SETTINGS
        };
        let bound = reserve(&mut s, "plain", "kube-system/plain", "n0", &every_pod, now);
        assert_eq!(bound, Ok(None), "a pod in no group is bound at once");
    }

    #[test]
    fn a_bound_pod_or_another_pod_under_the_uid_is_refused_and_nothing_is_reserved() {
        let mut s = cluster(2, 8);
        group(&mut s, "g", 2);
        let mut bound = member(&mut s, "g", 0, 2);
        bound.node_name = Some("n1".into());
        s.apply_pod(bound);
        member(&mut s, "g", 1, 2);
        let now = Instant::now();
        let err = reserve(&mut s, "g-0", "ns/g-0", "n0", &SETTINGS, now).unwrap_err();
        assert_eq!(err.to_string(), "pod ns/g-0 is already bound to node n1");
        let err = reserve(&mut s, "g-1", "kube-system/victim", "n0", &SETTINGS, now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "UID g-1 is the UID of pod ns/g-1, not of pod kube-system/victim"
        );
        assert!(s.ledger.reservations.is_empty());
    }

    #[test]
    fn a_claim_expires_after_the_gang_timeout_and_frees_its_room() {
        let mut s = cluster(2, 4);
        group(&mut s, "a", 2);
        group(&mut s, "b", 2);
        let now = Instant::now();
        let a0 = member(&mut s, "a", 0, 4);
        run(&mut s, &a0, now);
        let b0 = member(&mut s, "b", 0, 4);
        assert!(run(&mut s, &b0, now).passed.is_empty());
        let later = now + Duration::from_secs(31);
        assert_eq!(run(&mut s, &b0, later).passed.len(), 2);
        assert!(!s.ledger.claims.contains_key(&GroupKey::new("ns", "a")));
    }

    #[test]
    fn expiry_without_any_filter_call_drops_only_the_claims_past_their_deadline() {
        let mut s = cluster(2, 8);
        let a = group(&mut s, "a", 2);
        let now = Instant::now();
        let a0 = member(&mut s, "a", 0, 4);
        run(&mut s, &a0, now);
        assert!(!any_expired(&s, now + Duration::from_secs(29)));
        assert_eq!(expire(&mut s, now + Duration::from_secs(29)), 0);
        assert!(s.ledger.claims.contains_key(&a));
        assert!(any_expired(&s, now + Duration::from_secs(30)));
        assert_eq!(expire(&mut s, now + Duration::from_secs(30)), 1);
        assert!(s.ledger.claims.is_empty());
        assert_eq!(s.claimed_on("n0").get("cpu"), 0);
    }

    #[test]
    fn release_forgets_reservations_and_the_claim() {
        let mut s = cluster(2, 8);
        let key = group(&mut s, "g", 3);
        let now = Instant::now();
        let p = member(&mut s, "g", 0, 2);
        member(&mut s, "g", 1, 2);
        run(&mut s, &p, now);
        reserve(&mut s, "g-0", "ns/g-0", "n0", &SETTINGS, now).unwrap();
        release(&mut s, &key, &["g-0".into()]);
        assert!(
            s.nodes
                .slots()
                .all(|n| n.reserved.is_empty() && n.claimed.is_empty())
        );
        assert!(s.ledger.reservations.is_empty());
    }

    #[test]
    fn elastic_members_beyond_quorum_take_only_unclaimed_room_up_to_max_member() {
        let mut s = cluster(4, 4);
        let key = group(&mut s, "e", 2);
        let mut spec = (*s.groups[&key].spec.clone().unwrap()).clone();
        spec.max_member = Some(3);
        s.apply_pod_group(spec);
        let now = Instant::now();
        for i in 0..2 {
            let mut p = member(&mut s, "e", i, 4);
            p.node_name = Some(format!("n{i}"));
            s.apply_pod(p);
        }
        let extra = member(&mut s, "e", 2, 4);
        let v = run(&mut s, &extra, now);
        assert_eq!(v.passed, vec!["n2", "n3"]);
        let mut p = extra.clone();
        p.node_name = Some("n2".into());
        s.apply_pod(p);
        let fourth = member(&mut s, "e", 3, 4);
        let v = run(&mut s, &fourth, now);
        assert_eq!(v.unresolvable.len(), 4, "{v:?}");
    }

    #[test]
    fn a_pod_naming_a_missing_group_gets_an_error_that_says_what_to_do() {
        let mut s = cluster(1, 4);
        let pod = member(&mut s, "ghost", 0, 1);
        let candidates = names(&s);
        let err = filter(
            &mut s,
            &pod,
            &Constraints::default(),
            &candidates,
            &SETTINGS,
            Instant::now(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("create the PodGroup"), "{err}");
    }

    #[test]
    fn members_that_succeeded_count_towards_quorum_and_failed_ones_do_not() {
        let mut s = cluster(2, 4);
        let key = group(&mut s, "g", 3);
        for (i, phase) in [PodPhase::Succeeded, PodPhase::Failed]
            .into_iter()
            .enumerate()
        {
            let mut done = member(&mut s, "g", i, 1);
            done.node_name = Some("n0".into());
            done.phase = phase;
            s.apply_pod(done);
        }
        assert_eq!(placed_members(&s, &key, ""), 1);
    }

    #[test]
    fn the_rest_of_a_gang_whose_bound_members_already_succeeded_reaches_quorum_without_them_running()
     {
        let mut s = cluster(2, 4);
        let key = group(&mut s, "g", 4);
        for i in 0..2 {
            let mut done = member(&mut s, "g", i, 1);
            done.node_name = Some("n0".into());
            done.phase = PodPhase::Succeeded;
            s.apply_pod(done);
        }
        let now = Instant::now();
        let third = member(&mut s, "g", 2, 1);
        run(&mut s, &third, now);
        let (_, quorum) = reserve(&mut s, "g-2", "ns/g-2", "n1", &SETTINGS, now)
            .unwrap()
            .unwrap();
        assert!(!quorum, "two succeeded and one reserved make three of four");
        let fourth = member(&mut s, "g", 3, 1);
        run(&mut s, &fourth, now);
        let (_, quorum) = reserve(&mut s, "g-3", "ns/g-3", "n1", &SETTINGS, now)
            .unwrap()
            .unwrap();
        assert!(quorum, "two succeeded and two reserved make four");
        assert!(!s.ledger.claims.contains_key(&key));
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
                    s.apply_node(Node {
                        name: format!("n{i}"),
                        allocatable: Resources::from([
                            ("cpu", 16_000),
                            ("nvidia.com/gpu", 8),
                            ("pods", 110),
                        ]),
                        labels: Default::default(),
                        taints: vec![],
                        unschedulable: false,
                        not_ready: false,
                    });
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

/// Gangs whose members differ in shape: a head of 32 CPUs and workers of 32 CPUs and 256 MiB
/// (KubeRay's workers carry an init container with memory), on four nodes of 32 CPUs.
#[cfg(test)]
mod mixed_shapes {
    use super::*;
    use crate::model::{Node, PodGroup, PodPhase};
    use std::time::Duration;

    fn node(i: usize) -> Node {
        Node {
            name: format!("n{i}"),
            allocatable: Resources::from([("cpu", 32_000), ("memory", 1 << 40), ("pods", 110)]),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
            not_ready: false,
        }
    }

    fn pod(i: usize, memory: i64) -> Pod {
        Pod {
            uid: format!("m{i}"),
            namespace: "ns".into(),
            name: format!("m{i}"),
            phase: PodPhase::Pending,
            requests: Resources::from([("cpu", 32_000), ("memory", memory), ("pods", 1)]),
            pod_group: Some("g".into()),
            marked: true,
            ..Default::default()
        }
    }

    /// The gang `g` of a head (`m0`) and three workers on four empty nodes, and the settings.
    fn gang() -> (State, Vec<Pod>, Settings) {
        let mut s = State::default();
        for i in 0..4 {
            s.apply_node(node(i));
        }
        let key = GroupKey::new("ns", "g");
        s.apply_pod_group(PodGroup {
            schedule_timeout: Duration::from_secs(30),
            ..PodGroup::new(key, 4, "default")
        });
        let pods: Vec<Pod> = (0..4)
            .map(|i| pod(i, if i == 0 { 0 } else { 256 << 20 }))
            .collect();
        for p in &pods {
            s.apply_pod(p.clone());
        }
        let settings = Settings {
            strategy: Strategy::Binpack,
            max_hold: Duration::from_secs(60),
            bind_unmarked: false,
        };
        (s, pods, settings)
    }

    /// The scheduler's part: each member in `order` is filtered over the nodes no earlier
    /// member was assumed on, and goes to the first that passes; its bind (the reservation)
    /// comes at once or after every member was filtered. Panics, naming the reasons, when a
    /// member finds no node.
    fn place(order: &[usize], bind_at_once: bool) {
        let (mut s, pods, settings) = gang();
        let now = Instant::now();
        let mut taken: Vec<String> = Vec::new();
        let mut to_bind = Vec::new();
        let bind = |s: &mut State, i: usize, node: &str| {
            reserve(s, &pods[i].uid, &format!("ns/m{i}"), node, &settings, now).unwrap();
        };
        for &i in order {
            let free: Vec<String> = (0..4)
                .map(|n| format!("n{n}"))
                .filter(|n| !taken.contains(n))
                .collect();
            let v = filter(
                &mut s,
                &pods[i],
                &Constraints::default(),
                &free,
                &settings,
                now,
            )
            .unwrap();
            let failed: Vec<_> = v.failed.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            let node = v
                .passed
                .first()
                .unwrap_or_else(|| panic!("order {order:?} at {i}: no node; {failed:?}"))
                .to_string();
            taken.push(node.clone());
            if bind_at_once {
                bind(&mut s, i, &node);
            } else {
                to_bind.push((i, node));
            }
        }
        for (i, node) in to_bind {
            bind(&mut s, i, &node);
        }
    }

    #[test]
    fn a_member_whose_tightest_slot_is_on_no_candidate_takes_a_bigger_slot() {
        let (mut s, pods, settings) = gang();
        let now = Instant::now();
        let every = ["n0", "n1", "n2", "n3"];
        // A worker plans the claim: three worker-shaped slots, then the head's on n3.
        let v = filter(
            &mut s,
            &pods[1],
            &Constraints::default(),
            &every,
            &settings,
            now,
        )
        .unwrap();
        assert!(!v.passed.is_empty());
        let head = |candidates: &[&'static str], s: &mut State| {
            filter(
                s,
                &pods[0],
                &Constraints::default(),
                candidates,
                &settings,
                now,
            )
            .unwrap()
            .passed
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
        };
        assert_eq!(
            head(&every, &mut s),
            ["n3"],
            "the head is steered to its own slot"
        );
        assert_eq!(head(&["n0", "n1"], &mut s), ["n0", "n1"]);
    }

    #[test]
    fn every_member_finds_a_node_whatever_the_order_and_whenever_the_binds_come() {
        for bind_at_once in [true, false] {
            for order in [
                [0, 1, 2, 3],
                [1, 0, 2, 3],
                [1, 2, 0, 3],
                [1, 2, 3, 0],
                [3, 2, 1, 0],
            ] {
                place(&order, bind_at_once);
            }
        }
    }
}
