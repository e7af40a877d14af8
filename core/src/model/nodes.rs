//! Per-node records: the node as the API shows it, the three sums kept for it (`used`,
//! `reserved`, `claimed`) and the pods counted in `used`, in one record behind one name → index
//! map.
//!
//! Why one record: the extender judges one pod against every candidate node (5,000 in the
//! design's target) within a millisecond. With four maps keyed by node name, a candidate cost
//! four hash lookups, each chasing its key's heap string to compare it; with one record it costs
//! one lookup, and the node and its sums sit together. A record exists while anything refers to
//! the name: the node itself, or a non-zero sum (a pod bound to a node the cache has not seen
//! yet still counts, whatever the order of watch events). It is vacated when the last of these
//! goes, and its index is reused; nothing outside this table holds an index.
//!
//! Decision: each record also keeps what a gang plan reads of it for every node, recomputed
//! from the node and the sums on every write to the record (watch events and claims are rare
//! next to filter calls): `free` (allocatable minus the three sums, in the order a plan
//! subtracted them) and `open` (neither cordoned nor tainted against scheduling). A filter
//! call then judges a candidate from its record alone, without reading the node.
//!
//! The table also keeps, for the admission pass, the nodes that take new pods in name order
//! and the sum of their room outside claims (each node's at least zero): a pass starts from
//! them instead of sorting the nodes and working out every node's room each time (the
//! simulator runs tens of thousands of passes). Every write to a record updates both.

use std::ops::Index;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::objects::{Node, Pod, Resources};

/// One node's record.
#[derive(Debug, Clone, Default)]
pub struct NodeSlot {
    /// `None` while only sums refer to the name (the node is not known, or was deleted).
    pub node: Option<Arc<Node>>,
    /// Requests of the non-terminal pods bound to the node.
    pub used: Resources,
    /// Requests of the pods the scheduler assumed on the node, not yet shown bound.
    pub reserved: Resources,
    /// Capacity all gang claims hold on the node.
    pub claimed: Resources,
    /// The pods counted in `used`, so that a pass reads the pods of a few nodes without
    /// walking every pod. Shared with snapshots; copied on the first change after one.
    pub pods: Arc<Vec<Arc<Pod>>>,
    /// Allocatable minus `used`, `reserved` and `claimed`: the room nobody holds. Empty while
    /// the node is not known.
    pub free: Resources,
    /// Allocatable minus `used` and `reserved`: what a pod outside any gang claim could take.
    /// Empty while the node is not known.
    pub unreserved: Resources,
    /// What this record adds to [`Nodes::schedulable_room`] and
    /// [`Nodes::schedulable_capacity`] while its node takes new pods; `None` otherwise.
    counted: Option<Counted>,
    /// The node is known, not cordoned, and has no taint that keeps pods off
    /// (`NoSchedule`, `NoExecute`): any pod without a node selector or required node affinity
    /// may land on it.
    pub open: bool,
}

impl NodeSlot {
    /// Recomputes `free` and `open` after a write.
    fn refresh(&mut self) {
        let Some(node) = &self.node else {
            self.free = Resources::new();
            self.unreserved = Resources::new();
            self.open = false;
            return;
        };
        let mut unreserved = node.allocatable.clone();
        unreserved.sub(&self.used);
        unreserved.sub(&self.reserved);
        self.free = unreserved.minus(&self.claimed);
        self.unreserved = unreserved;
        self.open =
            !node.unschedulable && !node.taints.iter().any(|t| t.effect.blocks_scheduling());
    }

    fn is_vacant(&self) -> bool {
        self.node.is_none()
            && self.used.is_empty()
            && self.reserved.is_empty()
            && self.claimed.is_empty()
            && self.pods.is_empty()
    }
}

/// What a record adds to the sums over the nodes that take new pods.
#[derive(Debug, Clone)]
struct Counted {
    /// Its `unreserved`, at least zero.
    room: Resources,
    allocatable: Resources,
}

/// Which of a record's sums a write changes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sum {
    Reserved,
    Claimed,
}

impl Sum {
    fn of(self, slot: &mut NodeSlot) -> &mut Resources {
        match self {
            Sum::Reserved => &mut slot.reserved,
            Sum::Claimed => &mut slot.claimed,
        }
    }
}

/// The records, by node name. Reads look like a map of the known nodes (`get`, `len`,
/// `values`, …); the sums are read through [`Nodes::slot`].
#[derive(Debug, Clone, Default)]
pub struct Nodes {
    index: FxHashMap<String, usize>,
    slots: Vec<NodeSlot>,
    /// Indexes of vacated records, reused first.
    vacant: Vec<usize>,
    /// How many records hold a node.
    known: usize,
    /// How many times a node stopped taking new pods, lost allocatable or left, or a pod
    /// outside every admission took room on one.
    shrunk: u64,
    /// The records whose node takes new pods, by node name.
    schedulable: Vec<usize>,
    /// Σ of their `unreserved`, each at least zero.
    schedulable_room: Resources,
    /// Σ of their allocatable.
    schedulable_capacity: Resources,
}

impl Nodes {
    /// The record of `name`, known node or not.
    #[inline]
    pub fn slot(&self, name: &str) -> Option<&NodeSlot> {
        self.index.get(name).map(|&i| &self.slots[i])
    }

    /// The known node `name`.
    #[inline]
    pub fn get(&self, name: &str) -> Option<&Arc<Node>> {
        self.slot(name).and_then(|s| s.node.as_ref())
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// How many nodes are known.
    pub fn len(&self) -> usize {
        self.known
    }

    pub fn is_empty(&self) -> bool {
        self.known == 0
    }

    /// The known nodes, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &Arc<Node>> + '_ {
        self.slots.iter().filter_map(|s| s.node.as_ref())
    }

    /// The known nodes with their records, in no particular order.
    pub fn known(&self) -> impl Iterator<Item = (&Node, &NodeSlot)> + '_ {
        self.slots
            .iter()
            .filter_map(|s| Some((s.node.as_deref()?, s)))
    }

    /// The names of the known nodes, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &String> + '_ {
        self.values().map(|n| &n.name)
    }

    /// The nodes that take new pods ([`Node::takes_new_pods`]) with their records, by name.
    pub fn schedulable(&self) -> impl ExactSizeIterator<Item = (&Node, &NodeSlot)> + '_ {
        self.schedulable.iter().map(|&i| {
            let slot = &self.slots[i];
            let node = slot
                .node
                .as_deref()
                .expect("a schedulable record holds its node");
            (node, slot)
        })
    }

    /// Σ of the room outside claims ([`NodeSlot::unreserved`], at least zero) of the nodes
    /// that take new pods.
    pub fn schedulable_room(&self) -> &Resources {
        &self.schedulable_room
    }

    /// Σ of the allocatable of the nodes that take new pods: what fair share divides.
    pub fn schedulable_capacity(&self) -> &Resources {
        &self.schedulable_capacity
    }

    /// Every record that holds something, known node or not.
    pub fn slots(&self) -> impl Iterator<Item = &NodeSlot> + '_ {
        self.index.values().map(|&i| &self.slots[i])
    }

    /// How many times a node stopped taking new pods, lost allocatable or left, or a pod
    /// outside every admission (in no group, of no queue) took room on one: room counted from
    /// the nodes as they were before may no longer exist.
    pub fn shrunk(&self) -> u64 {
        self.shrunk
    }

    /// Records that a pod no admission counted took room on a node ([`Nodes::shrunk`]).
    pub(crate) fn room_taken(&mut self) {
        self.shrunk += 1;
    }

    /// Records `node`, replacing the node of the same name.
    pub(crate) fn insert(&mut self, node: Node) {
        let i = self.slot_index(&node.name);
        let lost_room = |was: &Node| {
            was.takes_new_pods()
                && (!node.takes_new_pods() || !was.allocatable.fits_in(&node.allocatable))
        };
        if self.slots[i].node.as_deref().is_some_and(lost_room) {
            self.shrunk += 1;
        }
        if self.slots[i].node.replace(Arc::new(node)).is_none() {
            self.known += 1;
        }
        self.refresh(i);
    }

    /// Forgets the node `name`; its sums stay while pods still count there.
    pub(crate) fn remove(&mut self, name: &str) {
        let Some(&i) = self.index.get(name) else {
            return;
        };
        if let Some(node) = self.slots[i].node.take() {
            self.known -= 1;
            if node.takes_new_pods() {
                self.shrunk += 1;
            }
        }
        self.refresh(i);
        self.vacate_if_unused(name, i);
    }

    pub(crate) fn add(&mut self, name: &str, sum: Sum, amount: &Resources) {
        let i = self.slot_index(name);
        sum.of(&mut self.slots[i]).add(amount);
        self.refresh(i);
        self.vacate_if_unused(name, i);
    }

    pub(crate) fn sub(&mut self, name: &str, sum: Sum, amount: &Resources) {
        if let Some(&i) = self.index.get(name) {
            sum.of(&mut self.slots[i]).sub(amount);
            self.refresh(i);
            self.vacate_if_unused(name, i);
        }
    }

    /// Counts `pod` as running on `name`: its requests in `used`, the pod in `pods`.
    pub(crate) fn place_pod(&mut self, name: &str, pod: &Arc<Pod>) {
        let i = self.slot_index(name);
        let slot = &mut self.slots[i];
        slot.used.add(&pod.requests);
        Arc::make_mut(&mut slot.pods).push(pod.clone());
        self.refresh(i);
    }

    /// Undoes [`Nodes::place_pod`].
    pub(crate) fn unplace_pod(&mut self, name: &str, pod: &Pod) {
        let Some(&i) = self.index.get(name) else {
            return;
        };
        let slot = &mut self.slots[i];
        slot.used.sub(&pod.requests);
        let pods = Arc::make_mut(&mut slot.pods);
        if let Some(at) = pods.iter().position(|p| p.uid == pod.uid) {
            pods.swap_remove(at);
        }
        self.refresh(i);
        self.vacate_if_unused(name, i);
    }

    /// Recomputes record `i` after a write, and what it adds to the schedulable nodes.
    fn refresh(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        let was = slot.counted.take();
        slot.refresh();
        if let Some(was) = &was {
            self.schedulable_room.sub(&was.room);
            self.schedulable_capacity.sub(&was.allocatable);
        }
        if let Some(node) = slot.node.as_deref().filter(|n| n.takes_new_pods()) {
            let counted = Counted {
                room: slot.unreserved.at_least_zero(),
                allocatable: node.allocatable.clone(),
            };
            self.schedulable_room.add(&counted.room);
            self.schedulable_capacity.add(&counted.allocatable);
            slot.counted = Some(counted);
            if was.is_none() {
                let at = self.schedulable_at(i).unwrap_err();
                self.schedulable.insert(at, i);
            }
        } else if was.is_some() {
            // Its node may be gone already: found by index, not by name.
            self.schedulable.retain(|&j| j != i);
        }
    }

    /// Where record `i`, whose node is known, goes among the schedulable records (by name).
    fn schedulable_at(&self, i: usize) -> Result<usize, usize> {
        let name = |j: usize| self.slots[j].node.as_deref().map(|n| n.name.as_str());
        self.schedulable
            .binary_search_by(|&j| name(j).cmp(&name(i)))
    }

    fn slot_index(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = match self.vacant.pop() {
            Some(i) => i,
            None => {
                self.slots.push(NodeSlot::default());
                self.slots.len() - 1
            }
        };
        self.index.insert(name.to_owned(), i);
        i
    }

    fn vacate_if_unused(&mut self, name: &str, i: usize) {
        if self.slots[i].is_vacant() {
            self.slots[i] = NodeSlot::default();
            self.index.remove(name);
            self.vacant.push(i);
        }
    }
}

impl Index<&str> for Nodes {
    type Output = Node;

    /// The known node `name`; panics if there is none (tests and lookups of names just listed).
    fn index(&self, name: &str) -> &Node {
        self.get(name)
            .unwrap_or_else(|| panic!("node {name} is not in the cache"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::node_of;

    #[test]
    fn a_record_lives_while_its_node_or_a_sum_refers_to_it_and_its_index_is_reused() {
        let mut nodes = Nodes::default();
        let cpu = Resources::from([("cpu", 500)]);
        let pod = Arc::new(Pod {
            uid: "p1".into(),
            requests: cpu.clone(),
            ..Pod::default()
        });
        nodes.place_pod("n1", &pod);
        assert_eq!((nodes.len(), nodes.get("n1").is_none()), (0, true));
        assert_eq!(nodes.slot("n1").unwrap().used, cpu);
        assert_eq!(nodes.slot("n1").unwrap().pods.len(), 1);

        nodes.insert(node_of("n1", Resources::from([("cpu", 1_000)])));
        nodes.unplace_pod("n1", &pod);
        assert_eq!(nodes.len(), 1);
        assert!(nodes.slot("n1").unwrap().used.is_empty());
        assert!(nodes.slot("n1").unwrap().pods.is_empty());

        nodes.add("n1", Sum::Claimed, &cpu);
        nodes.remove("n1");
        assert_eq!(nodes.len(), 0);
        assert_eq!(
            nodes.slot("n1").unwrap().claimed,
            cpu,
            "the claim still holds"
        );
        nodes.sub("n1", Sum::Claimed, &cpu);
        assert!(nodes.slot("n1").is_none(), "nothing refers to n1 any more");

        nodes.insert(node_of("n2", Resources::from([("cpu", 1_000)])));
        assert_eq!(nodes.slots.len(), 1, "n2 reuses n1's record");
        assert_eq!(nodes.keys().collect::<Vec<_>>(), ["n2"]);
        assert!(nodes.slot("n2").unwrap().used.is_empty());
    }

    #[test]
    fn free_and_open_follow_every_write_to_the_record() {
        let mut nodes = Nodes::default();
        let cpu = |m| Resources::from([("cpu", m)]);
        nodes.add("n1", Sum::Reserved, &cpu(100));
        assert_eq!(
            (
                nodes.slot("n1").unwrap().free.is_empty(),
                nodes.slot("n1").unwrap().open
            ),
            (true, false)
        );
        nodes.insert(node_of("n1", Resources::from([("cpu", 1_000)])));
        nodes.add("n1", Sum::Reserved, &cpu(200));
        nodes.add("n1", Sum::Claimed, &cpu(300));
        let slot = nodes.slot("n1").unwrap();
        assert_eq!((slot.free.clone(), slot.open), (cpu(400), true));
        nodes.sub("n1", Sum::Claimed, &cpu(300));
        assert_eq!(nodes.slot("n1").unwrap().free, cpu(700));

        let mut cordoned = node_of("n1", Resources::from([("cpu", 1_000)]));
        cordoned.unschedulable = true;
        nodes.insert(cordoned);
        assert!(!nodes.slot("n1").unwrap().open);
        let mut tainted = node_of("n1", Resources::from([("cpu", 1_000)]));
        tainted.taints = vec![crate::model::Taint {
            key: "k".into(),
            value: None,
            effect: crate::model::TaintEffect::PreferNoSchedule,
        }];
        nodes.insert(tainted.clone());
        assert!(
            nodes.slot("n1").unwrap().open,
            "PreferNoSchedule keeps no pod off"
        );
        tainted.taints[0].effect = crate::model::TaintEffect::NoExecute;
        nodes.insert(tainted);
        assert!(!nodes.slot("n1").unwrap().open);
        nodes.remove("n1");
        assert!(
            nodes.slot("n1").unwrap().free.is_empty(),
            "n1's sums stay, its room goes"
        );
    }

    /// A write to the records, as the cache's watches and the ledger make them.
    #[derive(Debug, Clone)]
    enum Write {
        Node {
            node: usize,
            cpu: i64,
            cordoned: bool,
            not_ready: bool,
        },
        NodeGone(usize),
        Place {
            pod: usize,
            node: usize,
            cpu: i64,
        },
        Unplace {
            pod: usize,
        },
        Add {
            node: usize,
            claimed: bool,
            cpu: i64,
        },
        Sub {
            node: usize,
            claimed: bool,
            cpu: i64,
        },
    }

    fn write() -> impl proptest::strategy::Strategy<Value = Write> {
        use proptest::prelude::*;
        prop_oneof![
            (0..6usize, 0..4_000i64, any::<bool>(), any::<bool>()).prop_map(
                |(node, cpu, cordoned, not_ready)| Write::Node {
                    node,
                    cpu,
                    cordoned,
                    not_ready
                }
            ),
            (0..6usize).prop_map(Write::NodeGone),
            (0..20usize, 0..6usize, 0..2_000i64).prop_map(|(pod, node, cpu)| Write::Place {
                pod,
                node,
                cpu
            }),
            (0..20usize).prop_map(|pod| Write::Unplace { pod }),
            (0..6usize, any::<bool>(), 0..1_000i64)
                .prop_map(|(node, claimed, cpu)| { Write::Add { node, claimed, cpu } }),
            (0..6usize, any::<bool>(), 0..1_000i64)
                .prop_map(|(node, claimed, cpu)| { Write::Sub { node, claimed, cpu } }),
        ]
    }

    /// What the schedulable nodes and their room are, worked out from the records.
    fn recomputed(nodes: &Nodes) -> (Vec<String>, Vec<Resources>, Resources, Resources) {
        let mut known: Vec<(&Node, &NodeSlot)> = nodes
            .known()
            .filter(|(node, _)| node.takes_new_pods())
            .collect();
        known.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        let (mut total, mut capacity) = (Resources::new(), Resources::new());
        let mut rooms = Vec::new();
        for (node, slot) in &known {
            let room = node.allocatable.minus(&slot.used).minus(&slot.reserved);
            total.add(&room.at_least_zero());
            capacity.add(&node.allocatable);
            rooms.push(room);
        }
        let names = known.iter().map(|(n, _)| n.name.clone()).collect();
        (names, rooms, total, capacity)
    }

    fn kept(nodes: &Nodes) -> (Vec<String>, Vec<Resources>, Resources, Resources) {
        let (names, rooms) = nodes
            .schedulable()
            .map(|(n, slot)| (n.name.clone(), slot.unreserved.clone()))
            .unzip();
        let sums = (nodes.schedulable_room(), nodes.schedulable_capacity());
        (names, rooms, sums.0.clone(), sums.1.clone())
    }

    proptest::proptest! {
        #[test]
        fn the_kept_schedulable_nodes_room_and_capacity_equal_the_recomputed_after_any_writes(
            writes in proptest::collection::vec(write(), 0..80)
        ) {
            let mut nodes = Nodes::default();
            let mut placed: Vec<Option<(String, Pod)>> = vec![None; 20];
            let cpu = |m| Resources::from([("cpu", m)]);
            let sum = |claimed| if claimed { Sum::Claimed } else { Sum::Reserved };
            for w in writes {
                match w {
                    Write::Node { node, cpu: m, cordoned, not_ready } => nodes.insert(Node {
                        unschedulable: cordoned,
                        not_ready,
                        ..node_of(format!("n{node}"), cpu(m))
                    }),
                    Write::NodeGone(node) => nodes.remove(&format!("n{node}")),
                    Write::Place { pod, node, cpu: m } => {
                        if placed[pod].is_none() {
                            let p = Pod { uid: format!("p{pod}"), requests: cpu(m), ..Pod::default() };
                            nodes.place_pod(&format!("n{node}"), &Arc::new(p.clone()));
                            placed[pod] = Some((format!("n{node}"), p));
                        }
                    }
                    Write::Unplace { pod } => {
                        if let Some((node, p)) = placed[pod].take() {
                            nodes.unplace_pod(&node, &p);
                        }
                    }
                    Write::Add { node, claimed, cpu: m } => {
                        nodes.add(&format!("n{node}"), sum(claimed), &cpu(m))
                    }
                    Write::Sub { node, claimed, cpu: m } => {
                        nodes.sub(&format!("n{node}"), sum(claimed), &cpu(m))
                    }
                }
                proptest::prop_assert_eq!(kept(&nodes), recomputed(&nodes));
            }
        }
    }
}
