//! The cluster as Gangplank sees it: the mirrored objects, the indexes over them, and the
//! ledger of what Gangplank decided itself ([`Ledger`]: reservations, claims).
//!
//! Besides the mirrored objects (nodes, pods, PodGroups, Queues), the state keeps the indexes
//! every decision needs, updated incrementally on each write so that reads are O(1):
//! - `used` per node: the requests of the non-terminal pods bound to it, the same sum the
//!   scheduler keeps (a node unknown yet still gets an entry, so the order of watch events
//!   does not matter), and those pods ([`State::pods_on`]);
//! - `members` per group: which pods name it, by UID, with the pods themselves and what an
//!   admission pass reads of each ([`Member`]), so a pass over every group's members looks
//!   nothing up by UID and reads no pod;
//! - `queue_only`: the pods that name a queue but no group (an admission pass visits them as
//!   groups of one without scanning every pod);
//! - `reserved` per node: pods the extender has been asked to bind there (the scheduler has
//!   *assumed* them) but that the API does not show bound yet. A reservation ends when the
//!   pod's watch event shows it bound (its requests then count in `used`), when it is
//!   released, or when the pod is deleted;
//! - `claimed` per node: capacity held by gang claims (see [`crate::claims`]), summed.
//!
//! The three per-node sums live with the node in one record ([`Nodes`]), so a candidate node
//! costs one lookup by name.
//!
//! Its fields are private to the model: code outside reads them through accessors
//! ([`State::nodes`], [`State::groups`], [`State::ledger`], ...) and changes them only through
//! the named writes here (`apply_*`, `delete_*`) and, for the ledger, through
//! [`State::ledger_mut`] ([`super::ledger`]), which keep the
//! indexes and sums in step. In the running process the cache (`gangplank::cache`) is their
//! only caller.
//!
//! Free room on a node for a pod of gang G is `allocatable - used - reserved - claimed by
//! other gangs`. Keeping those four apart is what lets a restart rebuild everything: `used` is
//! derived from the API alone, and reservations and claims are soft state that the scheduler
//! re-creates by retrying.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::group::{Group, Member};
use super::growth::Growth;
use super::ledger::{Ledger, LedgerMut};
use super::nodes::Nodes;
use super::objects::{GroupKey, Node, Pod, PodGroup, Queue, Resources, Schedulers};
use super::topology::Topology;

/// Pods by UID: a persistent map, so that a snapshot of the state shares it.
pub type PodMap =
    imbl::GenericHashMap<String, Arc<Pod>, rustc_hash::FxBuildHasher, imbl::shared_ptr::ArcK>;

#[derive(Debug, Clone, Default)]
pub struct State {
    /// Nodes and, per node, `used`, `reserved` and `claimed`.
    pub(super) nodes: Nodes,
    pub(super) pods: PodMap,
    /// By key, in key order: a pass over every group (admission, reclaim) visits them in a
    /// deterministic order without sorting them.
    pub(super) groups: imbl::OrdMap<GroupKey, Group>,
    /// Pods that name a queue and no group, by UID.
    pub(super) queue_only: imbl::OrdMap<String, Member>,
    /// Queues by name: admission reads their weights and bounds, the controller their shares.
    pub(super) queues: FxHashMap<String, Arc<Queue>>,
    /// Topologies by name: the levels gangs may be placed at.
    pub(super) topologies: BTreeMap<String, Topology>,
    /// What Gangplank decided itself: reservations, claims, lent groups, wait reasons.
    pub(super) ledger: Ledger,
    /// The scheduler names served, set when the cache is made.
    pub(super) schedulers: Schedulers,
    /// How the cluster grows; `None`: it cannot ([`super::growth`]). Set when the cache is made.
    pub(super) growth: Option<Growth>,
    /// Stand-in pods (in [`Growth::namespace`]) by the group they stand in for, by UID.
    pub(super) stand_ins: imbl::OrdMap<GroupKey, imbl::OrdMap<String, Arc<Pod>>>,
}

/// The node whose `used` counts `pod`: its node while it has not finished.
fn counted_on(pod: &Pod) -> Option<&str> {
    pod.node_name
        .as_deref()
        .filter(|_| !pod.phase.is_terminal())
}

static NOTHING: std::sync::LazyLock<Resources> = std::sync::LazyLock::new(Resources::new);

impl State {
    // ----- the parts, read-only (each changes only through the named writes below and, for the
    // ledger, through [`State::ledger_mut`])

    /// Nodes and, per node, `used`, `reserved` and `claimed`.
    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// Every pod, by UID.
    pub fn pods(&self) -> &PodMap {
        &self.pods
    }

    /// Groups by key, in key order.
    pub fn groups(&self) -> &imbl::OrdMap<GroupKey, Group> {
        &self.groups
    }

    /// Pods that name a queue and no group, by UID.
    pub fn queue_only(&self) -> &imbl::OrdMap<String, Member> {
        &self.queue_only
    }

    /// Topologies by name.
    pub fn topologies(&self) -> &BTreeMap<String, Topology> {
        &self.topologies
    }

    /// Queues by name.
    pub fn queues(&self) -> &FxHashMap<String, Arc<Queue>> {
        &self.queues
    }

    /// What Gangplank decided itself.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The ledger to write, split from the rest of the state with the node records its writes
    /// keep in step ([`LedgerMut`]; its writers are named in [`super::ledger`]).
    pub fn ledger_mut(&mut self) -> LedgerMut<'_> {
        LedgerMut::new(
            &mut self.ledger,
            &mut self.nodes,
            &self.groups,
            self.growth.as_ref(),
        )
    }

    /// The scheduler names served.
    pub fn schedulers(&self) -> &Schedulers {
        &self.schedulers
    }

    /// Sets the scheduler names served (when the cache is made).
    pub fn set_schedulers(&mut self, schedulers: Schedulers) {
        self.schedulers = schedulers;
    }

    /// How the cluster grows; `None`: it cannot.
    pub fn growth(&self) -> Option<&Growth> {
        self.growth.as_ref()
    }

    /// Sets how the cluster grows (when the cache is made, before any pod is applied).
    pub fn set_growth(&mut self, growth: Option<Growth>) {
        self.growth = growth;
    }

    /// Stand-in pods by the group they stand in for ([`super::growth`]).
    pub fn stand_ins(&self) -> &imbl::OrdMap<GroupKey, imbl::OrdMap<String, Arc<Pod>>> {
        &self.stand_ins
    }

    // ----- reads

    /// The non-terminal pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> &[Arc<Pod>] {
        self.nodes.slot(node).map_or(&[], |s| s.pods.as_slice())
    }

    /// Requests of the non-terminal pods bound to `node`.
    pub fn used_on(&self, node: &str) -> &Resources {
        self.nodes.slot(node).map_or(&NOTHING, |s| &s.used)
    }

    /// Requests of the pods reserved on `node` and not yet shown bound.
    pub fn reserved_on(&self, node: &str) -> &Resources {
        self.nodes.slot(node).map_or(&NOTHING, |s| &s.reserved)
    }

    /// Capacity all gang claims hold on `node`.
    pub fn claimed_on(&self, node: &str) -> &Resources {
        self.nodes.slot(node).map_or(&NOTHING, |s| &s.claimed)
    }

    /// Allocatable minus used minus reserved: what a pod outside any gang claim could take.
    pub fn free_on(&self, node: &Node) -> Resources {
        match self.nodes.slot(&node.name) {
            Some(slot) if slot.node.is_some() => slot.unreserved.clone(),
            Some(slot) => node.allocatable.minus(&slot.used).minus(&slot.reserved),
            None => node.allocatable.clone(),
        }
    }

    /// The nodes that take new pods ([`Node::takes_new_pods`]), by name: the order in which
    /// the admission pass and reclaim place a gang's members.
    pub fn schedulable_nodes(&self) -> Vec<&Node> {
        self.nodes.schedulable().map(|(node, _)| node).collect()
    }

    /// The allocatable of the nodes that take new pods: what fair share divides.
    pub fn schedulable_capacity(&self) -> Resources {
        self.nodes.schedulable_capacity().clone()
    }

    pub fn group(&self, key: &GroupKey) -> Option<&Group> {
        self.groups.get(key)
    }

    /// The group's members, in UID order.
    pub fn members<'a>(&'a self, key: &GroupKey) -> impl Iterator<Item = &'a Arc<Pod>> + 'a {
        self.groups
            .get(key)
            .into_iter()
            .flat_map(|g| g.members.values().map(|m| &m.pod))
    }

    /// Whether member `m` (UID `uid`) holds room on a node: bound, or reserved by the extender.
    pub fn holds_room(&self, uid: &str, m: &Member) -> bool {
        m.bound || self.ledger.reservations.contains_key(uid)
    }

    /// Members bound to a node (by the API) that have not finished.
    pub fn bound_members(&self, key: &GroupKey) -> usize {
        self.members(key)
            .filter(|p| p.node_name.is_some() && !p.phase.is_terminal())
            .count()
    }

    /// Members reserved by the extender and not yet shown bound.
    pub fn reserved_members(&self, key: &GroupKey) -> usize {
        self.members(key)
            .filter(|p| p.node_name.is_none() && self.ledger.reservations.contains_key(&p.uid))
            .count()
    }

    // ----- the write path: watch events. Each returns whether it changed anything: an object
    // equal to the one held, or the delete of one not held, changes nothing.

    pub fn apply_node(&mut self, node: Node) -> bool {
        if self.nodes.get(&node.name).is_some_and(|n| **n == node) {
            return false;
        }
        self.nodes.insert(node);
        true
    }

    pub fn delete_node(&mut self, name: &str) -> bool {
        let known = self.nodes.contains_key(name);
        self.nodes.remove(name);
        known
    }

    /// Inserts or replaces a pod, keeping `used`, group membership and reservations in step. A
    /// pod keeps the queue it was first seen with, and its group unless that group has no
    /// PodGroup yet (see the comment inside).
    pub fn apply_pod(&mut self, mut pod: Pod) -> bool {
        if let Some(seen) = self.pods.get(&pod.uid) {
            // A pod's group and queue are those it was first seen with: its requests count in
            // that queue until it is gone, whatever its labels say later. A pod at Gangplank's
            // gate in a group with no PodGroup is never released and counts nowhere: it follows
            // its labels, as the controller moves a pod made before its tree of
            // CompositePodGroups into the tree's gang.
            let waits_for_a_pod_group = seen.awaits_admission()
                && pod.awaits_admission()
                && GroupKey::of(seen)
                    .and_then(|key| self.groups.get(&key))
                    .is_some_and(|group| group.spec.is_none());
            if !waits_for_a_pod_group {
                pod.pod_group.clone_from(&seen.pod_group);
            }
            pod.queue.clone_from(&seen.queue);
            if **seen == pod {
                return false;
            }
        }
        let pod = Arc::new(pod);
        let old = self.pods.insert(pod.uid.clone(), pod.clone());
        if let Some(old) = &old {
            self.forget(old);
        }
        if let Some(node) = counted_on(&pod) {
            self.nodes.place_pod(node, &pod);
            // A pod no admission counted (in no group, of no queue) took room the last pass
            // may have left to arrivals.
            let newly = old.as_deref().and_then(counted_on) != Some(node);
            if newly && pod.pod_group.is_none() && pod.queue.is_none() {
                self.nodes.room_taken();
            }
        }
        if let Some(old) = &old
            && let Some(node) = counted_on(old)
            && counted_on(&pod) != Some(node)
        {
            self.ledger_mut().hand_to_reservation(node, &old.requests);
        }
        if let Some(key) = self.stands_in_for(&pod) {
            self.stand_ins
                .entry(key.clone())
                .or_default()
                .insert(pod.uid.clone(), pod.clone());
        } else if let Some(key) = GroupKey::of(&pod) {
            let group = self.groups.entry(key).or_default();
            group.insert(pod.uid.clone(), Member::of(pod.clone()));
            group.refresh_owed();
        } else if pod.queue.is_some() {
            self.queue_only
                .insert(pod.uid.clone(), Member::of(pod.clone()));
        }
        if pod.node_name.is_some() || pod.phase.is_terminal() {
            self.ledger_mut().release(&pod.uid);
        }
        true
    }

    pub fn delete_pod(&mut self, uid: &str) -> bool {
        let old = self.pods.remove(uid);
        if let Some(old) = &old {
            self.forget(old);
            if let Some(node) = counted_on(old) {
                self.ledger_mut().hand_to_reservation(node, &old.requests);
            }
        }
        self.ledger_mut().release(uid).is_some() || old.is_some()
    }

    /// The group `pod` stands in for: only a pod of Gangplank's own namespace is believed.
    fn stands_in_for<'p>(&self, pod: &'p Pod) -> Option<&'p GroupKey> {
        let growth = self.growth.as_ref()?;
        pod.stand_in_for
            .as_ref()
            .filter(|_| *pod.namespace == *growth.namespace)
    }

    /// Undoes what `apply_pod` recorded for `old`.
    fn forget(&mut self, old: &Pod) {
        if let Some(node) = counted_on(old) {
            self.nodes.unplace_pod(node, old);
        }
        if let Some(key) = self.stands_in_for(old) {
            if let Some(stand_ins) = self.stand_ins.get_mut(key) {
                stand_ins.remove(&old.uid);
                if stand_ins.is_empty() {
                    self.stand_ins.remove(key);
                }
            }
        } else if let Some(key) = GroupKey::of(old)
            && let Some(group) = self.groups.get_mut(&key)
        {
            group.remove(&old.uid);
            group.refresh_owed();
            if group.members.is_empty() && group.spec.is_none() {
                self.groups.remove(&key);
                self.ledger_mut().set_wait_reason(&key, None);
            }
        } else if old.queue.is_some() {
            self.queue_only.remove(&old.uid);
        }
    }

    pub fn apply_pod_group(&mut self, group: PodGroup) -> bool {
        let held = self.groups.get(&group.key).and_then(|g| g.spec.as_deref());
        if held == Some(&group) {
            return false;
        }
        let key = group.key.clone();
        let entry = self.groups.entry(key).or_default();
        entry.spec = Some(Arc::new(group));
        // Made again for the new spec (its shape or age may differ).
        entry.placeholders = Arc::from([]);
        entry.refresh_owed();
        true
    }

    pub fn delete_pod_group(&mut self, key: &GroupKey) -> bool {
        let mut known = false;
        if let Some(group) = self.groups.get_mut(key) {
            known = group.spec.take().is_some();
            group.refresh_owed();
            if group.members.is_empty() {
                self.groups.remove(key);
            }
        }
        let mut ledger = self.ledger_mut();
        ledger.set_wait_reason(key, None);
        ledger.drop_claim(key).is_some() || known
    }

    pub fn apply_queue(&mut self, queue: Queue) -> bool {
        if self.queues.get(&queue.name).is_some_and(|q| **q == queue) {
            return false;
        }
        self.queues.insert(queue.name.clone(), Arc::new(queue));
        true
    }

    pub fn delete_queue(&mut self, name: &str) -> bool {
        self.queues.remove(name).is_some()
    }

    pub fn apply_topology(&mut self, topology: Topology) -> bool {
        if self.topologies.get(&topology.name) == Some(&topology) {
            return false;
        }
        self.topologies.insert(topology.name.clone(), topology);
        true
    }

    pub fn delete_topology(&mut self, name: &str) -> bool {
        self.topologies.remove(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Claim, PodPhase, Reservation, Slot};
    use crate::testing::{PodBuilder, node_of, pod};

    #[test]
    fn node_usage_follows_binding_completion_and_deletion() {
        let mut s = State::default();
        s.apply_pod(pod("a").cpu(1000));
        assert!(s.used_on("n1").is_empty());
        s.apply_pod(pod("a").cpu(1000).bound_to("n1"));
        s.apply_pod(pod("b").cpu(500).bound_to("n1"));
        assert_eq!(
            s.used_on("n1"),
            &Resources::from([("cpu", 1500), ("pods", 2)])
        );
        s.apply_pod(Pod {
            phase: PodPhase::Succeeded,
            ..pod("a").cpu(1000).bound_to("n1")
        });
        assert_eq!(
            s.used_on("n1"),
            &Resources::from([("cpu", 500), ("pods", 1)])
        );
        s.delete_pod("b");
        assert!(s.used_on("n1").is_empty());
        assert!(s.nodes.slot("n1").is_none(), "empty records are removed");
    }

    #[test]
    fn a_reservation_ends_when_the_api_shows_the_pod_bound() {
        let mut s = State::default();
        let key = GroupKey::new("ns", "g");
        s.apply_pod(pod("a").cpu(1000).in_group("g"));
        let requests = s.pods["a"].requests.clone();
        s.ledger_mut().reserve(
            "a",
            Reservation {
                node: "n1".into(),
                requests: requests.clone(),
                group: Some(key.clone()),
            },
        );
        assert_eq!(s.reserved_on("n1"), &requests);
        assert_eq!((s.reserved_members(&key), s.bound_members(&key)), (1, 0));

        s.apply_pod(pod("a").cpu(1000).bound_to("n1").in_group("g"));
        assert!(s.reserved_on("n1").is_empty());
        assert_eq!(s.used_on("n1"), &requests);
        assert_eq!((s.reserved_members(&key), s.bound_members(&key)), (0, 1));
    }

    #[test]
    fn room_freeing_on_a_reserved_node_joins_the_reservation_up_to_what_it_lacks() {
        let mut s = State::default();
        s.apply_node(node_of(
            "n1",
            Resources::from([("cpu", 8_000), ("pods", 10)]),
        ));
        s.apply_pod(pod("a").cpu(4_000).bound_to("n1"));
        s.apply_pod(pod("b").cpu(3_000).bound_to("n1"));
        s.apply_pod(pod("c").cpu(1_000).bound_to("n1"));
        let head = GroupKey::new("ns", "head");
        // The head needs 6 CPUs on n1 and holds nothing yet: n1 is full.
        s.ledger_mut().set_claim(
            &head,
            Claim {
                slots: vec![Slot {
                    node: "n1".into(),
                    requests: Resources::from([("pods", 1)]),
                }],
                deadline: None,
                lacking: vec![Slot {
                    node: "n1".into(),
                    requests: Resources::from([("cpu", 6_000)]),
                }],
            },
        );
        let held = |s: &State| s.ledger.claims[&head].on("n1").get("cpu");

        // A pod that finishes frees its room; the reservation takes all of it.
        let mut done = pod("a").cpu(4_000).bound_to("n1");
        done.phase = PodPhase::Succeeded;
        s.apply_pod(done);
        assert_eq!(held(&s), 4_000);
        assert_eq!(s.claimed_on("n1").get("cpu"), 4_000);
        // A deleted pod frees 3 CPUs, of which the reservation lacks only 2.
        s.delete_pod("b");
        assert_eq!(held(&s), 6_000);
        assert_eq!(s.claimed_on("n1").get("cpu"), 6_000);
        assert_eq!(s.ledger.claims[&head].lacking[0].requests.get("cpu"), 0);
        // Nothing more is taken once it lacks nothing.
        s.delete_pod("c");
        assert_eq!(held(&s), 6_000);

        // Room a reservation frees stays with the pod the scheduler retries.
        s.apply_pod(pod("d").cpu(2_000));
        let requests = s.pods["d"].requests.clone();
        s.ledger_mut().reserve(
            "d",
            Reservation {
                node: "n1".into(),
                requests,
                group: None,
            },
        );
        s.ledger.claims.get_mut(&head).unwrap().lacking[0].requests =
            Resources::from([("cpu", 2_000)]);
        s.ledger_mut().release("d");
        assert_eq!(held(&s), 6_000);
        // Nor does room on a node the reservation does not lack anything on.
        s.apply_pod(pod("e").cpu(1_000).bound_to("n2"));
        s.delete_pod("e");
        assert!(s.claimed_on("n2").is_empty());
    }

    #[test]
    fn a_released_heads_reservation_becomes_its_claim_with_what_it_lacked_where_room_is() {
        let mut s = State::default();
        for name in ["n1", "n2"] {
            s.apply_node(node_of(
                name,
                Resources::from([("cpu", 8_000), ("pods", 10)]),
            ));
        }
        // n2 still runs 5 of the 8 CPUs: only 3 of the 6 the head lacks there are free.
        s.apply_pod(pod("busy").cpu(5_000).bound_to("n2"));
        let head = GroupKey::new("ns", "head");
        let slot = |node: &str, cpu| Slot {
            node: node.into(),
            requests: Resources::from([("cpu", cpu)]),
        };
        s.ledger_mut().set_claim(
            &head,
            Claim {
                slots: vec![slot("n1", 2_000)],
                deadline: None,
                lacking: vec![slot("n1", 6_000), slot("n2", 6_000)],
            },
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        s.ledger_mut().place_reservation(&head, deadline);
        let claim = &s.ledger.claims[&head];
        assert!(!claim.reservation());
        assert_eq!(claim.deadline, Some(deadline));
        assert!(claim.lacking.is_empty());
        assert_eq!(claim.on("n1").get("cpu"), 8_000);
        assert_eq!(claim.on("n2").get("cpu"), 3_000, "all n2 had free");
        assert_eq!(s.claimed_on("n1").get("cpu"), 8_000);
        assert_eq!(s.claimed_on("n2").get("cpu"), 3_000);

        // A claim with a deadline is a gang being placed: left as it is.
        s.ledger_mut()
            .place_reservation(&head, deadline + std::time::Duration::from_secs(5));
        assert_eq!(s.ledger.claims[&head].deadline, Some(deadline));
    }

    #[test]
    fn claims_add_up_per_node_and_vanish_when_dropped() {
        let mut s = State::default();
        let slot = |node: &str, cpu| Slot {
            node: node.into(),
            requests: Resources::from([("cpu", cpu)]),
        };
        let (g1, g2) = (GroupKey::new("ns", "g1"), GroupKey::new("ns", "g2"));
        s.ledger_mut().set_claim(
            &g1,
            Claim {
                slots: vec![slot("n1", 1000), slot("n1", 1000), slot("n2", 500)],
                ..Default::default()
            },
        );
        s.ledger_mut().set_claim(
            &g2,
            Claim {
                slots: vec![slot("n1", 250)],
                ..Default::default()
            },
        );
        assert_eq!(s.claimed_on("n1").get("cpu"), 2250);
        assert_eq!(s.ledger.claims[&g1].on("n1").get("cpu"), 2000);
        s.ledger_mut().set_claim(
            &g1,
            Claim {
                slots: vec![slot("n2", 100)],
                ..Default::default()
            },
        );
        assert_eq!(s.claimed_on("n1").get("cpu"), 250);
        assert_eq!(s.claimed_on("n2").get("cpu"), 100);
        s.delete_pod_group(&g1);
        s.ledger_mut().drop_claim(&g2);
        assert!(s.nodes.slots().all(|n| n.claimed.is_empty()));
    }

    #[test]
    fn a_pod_keeps_the_group_and_queue_it_was_first_seen_in_whatever_its_labels_say_later() {
        let mut s = State::default();
        let key = GroupKey::new("ns", "g");
        s.apply_pod(pod("a").cpu(1).in_group("g"));
        s.apply_pod(pod("b").cpu(1).in_group("g"));
        assert_eq!(s.members(&key).count(), 2);
        s.apply_pod(pod("b").cpu(1).in_group("other"));
        s.apply_pod(Pod {
            queue: Some("elsewhere".into()),
            ..pod("a").cpu(1)
        });
        assert_eq!(s.members(&key).count(), 2, "relabelled, still members");
        assert_eq!(s.pods["a"].queue, None);
        assert!(s.group(&GroupKey::new("ns", "other")).is_none());
        s.delete_pod("a");
        s.delete_pod("b");
        assert!(
            s.group(&key).is_none(),
            "a group with no spec and no members is forgotten"
        );
    }

    #[test]
    fn a_gated_pod_of_a_group_with_no_pod_group_follows_its_labels_into_another_group() {
        let mut s = State::default();
        let (leaf, root) = (GroupKey::new("ns", "leaf"), GroupKey::new("ns", "root"));
        s.apply_pod(pod("a").cpu(1).gated().in_group("leaf"));
        s.apply_pod(pod("a").cpu(1).gated().in_group("root"));
        assert!(s.group(&leaf).is_none(), "the group it left is forgotten");
        assert_eq!(s.members(&root).count(), 1);

        s.apply_pod_group(PodGroup::new(root.clone(), 1, "q"));
        s.apply_pod(pod("a").cpu(1).gated().in_group("leaf"));
        assert_eq!(s.members(&root).count(), 1, "its group has a PodGroup now");
    }

    #[test]
    fn members_and_queue_only_pods_follow_every_update() {
        let mut s = State::default();
        let key = GroupKey::new("ns", "g");
        let queued = |uid: &str, node: Option<&str>, group: Option<&str>| Pod {
            node_name: node.map(Into::into),
            pod_group: group.map(Into::into),
            ..pod(uid)
                .in_queue("q")
                .gated()
                .priority(7)
                .created(100)
                .cpu(500)
        };
        s.apply_pod(queued("q", None, None));
        assert!(s.queue_only["q"].gated && s.queue_only["q"].live);
        assert_eq!(s.queue_only["q"].requests.get("cpu"), 500);
        s.delete_pod("q");
        assert!(s.queue_only.is_empty(), "a deleted pod leaves the index");
        s.apply_pod(queued("a", None, Some("g")));
        let m = &s.groups[&key].members["a"];
        assert_eq!(
            (m.gated, m.bound, m.priority, m.created),
            (true, false, 7, 100)
        );
        s.apply_pod(Pod {
            scheduling_gates: vec![],
            phase: PodPhase::Succeeded,
            ..queued("a", Some("n1"), Some("g"))
        });
        let m = &s.groups[&key].members["a"];
        assert_eq!((m.gated, m.bound, m.live), (false, true, false));
        s.apply_pod(queued("b", None, None));
        s.apply_pod(pod("c").cpu(1));
        assert_eq!(
            s.queue_only.keys().collect::<Vec<_>>(),
            ["b"],
            "no queue, no entry"
        );
        s.delete_pod("b");
        assert!(s.queue_only.is_empty());
    }
}
