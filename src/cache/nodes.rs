//! Per-node records: the node as the API shows it and the three sums kept for it (`used`,
//! `reserved`, `claimed`), in one record behind one name → index map.
//!
//! Why one record: the extender judges one pod against every candidate node (5,000 in the
//! design's target) within a millisecond. With four maps keyed by node name, a candidate cost
//! four hash lookups, each chasing its key's heap string to compare it; with one record it costs
//! one lookup, and the node and its sums sit together. A record exists while anything refers to
//! the name: the node itself, or a non-zero sum (a pod bound to a node the cache has not seen
//! yet still counts, whatever the order of watch events). It is vacated when the last of these
//! goes, and its index is reused; nothing outside this table holds an index.

use std::ops::Index;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::model::{Node, Resources};

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
}

impl NodeSlot {
    fn is_vacant(&self) -> bool {
        self.node.is_none()
            && self.used.is_empty()
            && self.reserved.is_empty()
            && self.claimed.is_empty()
    }
}

/// Which of a record's sums a write changes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sum {
    Used,
    Reserved,
    Claimed,
}

impl Sum {
    fn of(self, slot: &mut NodeSlot) -> &mut Resources {
        match self {
            Sum::Used => &mut slot.used,
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

    /// Records `node`, replacing the node of the same name.
    pub(crate) fn insert(&mut self, node: Node) {
        let i = self.slot_index(&node.name);
        if self.slots[i].node.replace(Arc::new(node)).is_none() {
            self.known += 1;
        }
    }

    /// Forgets the node `name`; its sums stay while pods still count there.
    pub(crate) fn remove(&mut self, name: &str) {
        let Some(&i) = self.index.get(name) else {
            return;
        };
        if self.slots[i].node.take().is_some() {
            self.known -= 1;
        }
        self.vacate_if_unused(name, i);
    }

    pub(crate) fn add(&mut self, name: &str, sum: Sum, amount: &Resources) {
        let i = self.slot_index(name);
        sum.of(&mut self.slots[i]).add(amount);
        self.vacate_if_unused(name, i);
    }

    pub(crate) fn sub(&mut self, name: &str, sum: Sum, amount: &Resources) {
        if let Some(&i) = self.index.get(name) {
            sum.of(&mut self.slots[i]).sub(amount);
            self.vacate_if_unused(name, i);
        }
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

    fn node(name: &str) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources::from([("cpu", 1000)]),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
        }
    }

    #[test]
    fn a_record_lives_while_its_node_or_a_sum_refers_to_it_and_its_index_is_reused() {
        let mut nodes = Nodes::default();
        let cpu = Resources::from([("cpu", 500)]);
        nodes.add("n1", Sum::Used, &cpu);
        assert_eq!((nodes.len(), nodes.get("n1").is_none()), (0, true));
        assert_eq!(nodes.slot("n1").unwrap().used, cpu);

        nodes.insert(node("n1"));
        nodes.sub("n1", Sum::Used, &cpu);
        assert_eq!(nodes.len(), 1);
        assert!(nodes.slot("n1").unwrap().used.is_empty());

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

        nodes.insert(node("n2"));
        assert_eq!(nodes.slots.len(), 1, "n2 reuses n1's record");
        assert_eq!(nodes.keys().collect::<Vec<_>>(), ["n2"]);
        assert!(nodes.slot("n2").unwrap().used.is_empty());
    }
}
