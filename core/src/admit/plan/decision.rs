//! What one admission pass decides ([`Decision`]): the groups it releases, those it leaves
//! waiting and why, each queue's report, and the room it holds for the head of the line.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::admit::why::{Reason, Why};
use crate::model::arrivals::Door;
use crate::model::{GroupKey, Pod, Resources};
use crate::policy::fair_share;

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
    /// The pod had annotations as the cache saw it: the release adds Gangplank's record of
    /// admission to them, or else creates them.
    pub annotated: bool,
}

impl PodRef {
    pub(super) fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            gates: pod.scheduling_gates.clone(),
            node_selector: None,
            annotated: pod.annotated,
        }
    }

    /// Releasing `pod` into the domain of these (label, value) pairs.
    pub(super) fn into_domain(pod: &Pod, domain: &[(&str, &str)]) -> PodRef {
        let mut selector = pod.node_selector.clone();
        let mut missing = false;
        for (key, value) in domain {
            missing |= selector
                .insert((*key).to_owned(), (*value).to_owned())
                .is_none();
        }
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
    /// freed after the snapshot, and joins the reservation as it is recorded ([`crate::admit::after_pass`]).
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
    /// capability (`RoomWait::capped`), in the pass's order, short of members for quorum
    /// (not a gang's elastic members alone): what the elastic yield, reclaim and priority
    /// preemption (`crate::admit::reclaim`) may make room for.
    pub short_of_room: Vec<RoomWait>,
    /// Members that came gated into the room their group's admission keeps for members to
    /// come, while it holds (the webhook did not let them in: it did not see the admission
    /// yet, or a follower gated them): counted as released by this pass (in `in_flight` and
    /// their queue's allocation, [`crate::admit::groups::Seen::into_kept_room`]), their gates
    /// to be removed like those of `admit`, without another admission.
    pub into_kept_room: Vec<PodRef>,
    /// Released members not yet placed (counted against the free room, not any node).
    pub in_flight: Resources,
    /// What the elastic members of running gangs (bound members beyond `minMember`, the
    /// newest) hold at the start of the pass: room that yields to any gang's minimum.
    pub elastic: Resources,
    /// Groups admitted into the head's reservation by their expected runtime.
    pub lent: Vec<GroupKey>,
    /// Groups whose `minResources` cover more members than `minMember` and whose members fill
    /// that room (placeholders released, or members released and not placed yet): counted
    /// before the head reserved, as pieces of an estimated shape, so their members may be
    /// placed in its reservation (`crate::model::Ledger::keeping`).
    pub keeping: Vec<GroupKey>,
    /// Room for admissions on arrival, when every group left waiting lacks only members
    /// ([`crate::admit::on_arrival`]).
    pub door: Option<Door>,
    /// Gangs the cluster grows for, each with the stand-in pods it should have
    /// ([`crate::model::growth`]); empty when the cluster cannot grow.
    pub grow: Vec<GrowthAsk>,
    /// Stand-in pods no gang needs any more: to delete.
    pub unwanted_stand_ins: Vec<PodRef>,
    /// Gangs admitted into the room of their stand-ins, which stay until the gang is bound:
    /// per gang, the claim its members are placed in (node, requests), one slot per member.
    pub stand_in_claims: Vec<(GroupKey, Vec<(String, Resources)>)>,
    /// Gangs whose stand-ins stayed unplaced past the growth timeout in this pass: to record
    /// as given up (their stand-ins are in `unwanted_stand_ins`).
    pub growth_timed_out: Vec<GroupKey>,
}

impl Decision {
    /// The groups it admits with room kept for members to come (with placeholders): the
    /// admissions the loop records on their PodGroups ([`crate::admit::kept`]).
    pub fn admitted_with_room_kept(&self) -> Vec<GroupKey> {
        self.admit
            .iter()
            .filter(|a| !a.placeholders.is_empty())
            .filter_map(|a| a.group.clone())
            .collect()
    }
}

/// A gang the cluster grows for: one stand-in pod per member it needs for quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrowthAsk {
    pub group: GroupKey,
    pub queue: Arc<str>,
    /// A gated member, whose scheduling constraints (node selector, affinity, tolerations) the
    /// stand-ins copy.
    pub model: PodRef,
    /// The requests of each stand-in, by index ([`crate::model::growth::stand_in_name`]).
    pub members: Vec<Resources>,
    /// The indexes of `members` whose stand-in does not exist.
    pub missing: Vec<usize>,
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
    /// It fits only inside one domain of its required topology level. `None`: anywhere.
    pub within: Option<Within>,
    /// The first members of `need` as whole instances, in order, each kept to one domain of
    /// its sub-group's level (`None`: anywhere). Empty: `need` as one.
    pub instances: Vec<(usize, Option<Within>)>,
}

/// A required topology level's label keys, and the values a gang's members pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Within {
    pub keys: Vec<String>,
    pub pinned: Vec<(String, String)>,
}

/// The growth decision as the pass makes it ([`super::growth`]): the asks so far, and the
/// groups that grow; the [`Decision`] carries the asks.
#[derive(Debug, Default)]
pub(super) struct Growing {
    /// Groups with stand-ins when the pass began: they count against `at_once` wherever they
    /// come in the order.
    pub(super) before: usize,
    pub(super) asks: Vec<GrowthAsk>,
    /// The groups of `asks`: their stand-ins are kept.
    pub(super) kept: FxHashSet<GroupKey>,
    /// Gangs whose stand-ins stayed unplaced past the timeout in this pass.
    pub(super) timed_out: Vec<GroupKey>,
}
