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
            self.open = false;
            return;
        };
        let mut free = node.allocatable.clone();
        free.sub(&self.used);
        free.sub(&self.reserved);
        free.sub(&self.claimed);
        self.free = free;
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
        self.slots[i].refresh();
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
        self.slots[i].refresh();
        self.vacate_if_unused(name, i);
    }

    pub(crate) fn add(&mut self, name: &str, sum: Sum, amount: &Resources) {
        let i = self.slot_index(name);
        sum.of(&mut self.slots[i]).add(amount);
        self.slots[i].refresh();
        self.vacate_if_unused(name, i);
    }

    pub(crate) fn sub(&mut self, name: &str, sum: Sum, amount: &Resources) {
        if let Some(&i) = self.index.get(name) {
            sum.of(&mut self.slots[i]).sub(amount);
            self.slots[i].refresh();
            self.vacate_if_unused(name, i);
        }
    }

    /// Counts `pod` as running on `name`: its requests in `used`, the pod in `pods`.
    pub(crate) fn place_pod(&mut self, name: &str, pod: &Arc<Pod>) {
        let i = self.slot_index(name);
        let slot = &mut self.slots[i];
        slot.used.add(&pod.requests);
        Arc::make_mut(&mut slot.pods).push(pod.clone());
        slot.refresh();
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
        slot.refresh();
        self.vacate_if_unused(name, i);
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
}
