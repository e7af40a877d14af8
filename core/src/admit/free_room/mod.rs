//! Free room during one admission pass, and the reservation the head of the line holds in it.
//!
//! A copy of each schedulable node's free room (allocatable − used − reserved by the
//! extender, as the cache keeps it: `crate::model::Nodes::schedulable`) that the pass shrinks
//! as it admits groups, their sum, and the other queues' unused guarantees (room a queue may
//! not take). See [`super::plan`] for how the pass uses it,
//! and `Room::reserve` for how the head's reservation is chosen. Placing in one domain of a
//! topology level is in [`domains`], the head's reservation in [`reservation`]; the pass is
//! their only user, each pass with a room of its own.

mod domains;
mod reservation;

pub(super) use domains::{InstanceMisfit, InstanceNeed};

use std::collections::BTreeMap;
use std::rc::Rc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::model::topology::Domain;
use crate::model::{Resources, State};
use crate::policy::fit::{biggest_first, first_fit};

/// A level's label keys and the values a gang's members pinned: one domain of it to keep to.
pub(super) type InDomain<'a, 'k> = (&'a [&'k str], &'a [(&'k str, &'k str)]);

/// A domain as the (label, value) pairs its members' `nodeSelector`s gain.
pub(super) type Labelled<'s> = Vec<(&'s str, &'s str)>;

/// The domain `values` of the level `keys` as (label, value) pairs.
fn labelled<'s>(keys: &[&'s str], values: &[&'s str]) -> Labelled<'s> {
    keys.iter().copied().zip(values.iter().copied()).collect()
}

/// Free room during a pass.
pub(super) struct Room<'s> {
    /// Schedulable nodes by name, in name order; the indexes of `nodes`.
    pub names: Vec<&'s str>,
    allocatable: Vec<&'s Resources>,
    labels: Vec<&'s BTreeMap<String, String>>,
    /// Per schedulable node: allocatable − used − reserved − placed in this pass − held for
    /// the head.
    nodes: Vec<Resources>,
    /// Σ of the nodes' free room (each at least zero) − in flight − admitted in this pass −
    /// held for the head.
    total: Resources,
    /// Per queue slot: guarantee not covered by what it holds.
    unused_guarantee: Vec<Resources>,
    /// Σ of `unused_guarantee`.
    guaranteed: Resources,
    /// What the head's reservation holds, per node index (empty without a reservation).
    pub held: Vec<(usize, Resources)>,
    /// Σ of `held`.
    pub held_total: Resources,
    /// Per node of the reservation: what the head's members assigned there still lack (their
    /// requests beyond what is free now), i.e. what must free up before the head can start.
    pub lacking: Vec<(usize, Resources)>,
    /// What the head's members found free on their nodes but could not hold, because the
    /// queue's budget (free room less other queues' unused guarantees) ran out: what must
    /// free up anywhere, besides `lacking`, before the head can start.
    pub short: Resources,
    /// Per pod shape (requests) seen in this pass: the first node that may still fit it. Room
    /// only shrinks during a pass, so nodes before it stay too full for that shape, and a
    /// shape whose cursor reached the end fits nowhere, nor does any pod asking at least as
    /// much. This keeps a pass over thousands of groups on a full cluster from scanning every
    /// node for every group.
    cursors: Vec<(Resources, usize)>,
    /// Per queue slot: [`Room::available_to`] as last computed, while `total` and the
    /// guarantees have not changed since (thousands of groups are checked between two
    /// admissions).
    available: Vec<Option<Resources>>,
    /// Per topology level seen in this pass (its label keys): its domains and their nodes
    /// (labels do not change during a pass), and per domain the sum of its nodes'
    /// allocatable.
    levels: FxHashMap<Vec<&'s str>, Rc<Partition<'s>>>,
}

/// A level's domains (see [`topology::domains`]), each with its nodes and their allocatable
/// in all.
type Partition<'s> = BTreeMap<Domain<'s>, (Vec<usize>, Resources)>;

impl<'s> Room<'s> {
    /// The free room of `state`'s schedulable nodes, minus `in_flight` (released members not
    /// placed yet), with `queues` slots of guarantees (set them with
    /// [`Room::set_unused_guarantee`]).
    pub fn new(state: &'s State, in_flight: &Resources, queues: usize) -> Room<'s> {
        let schedulable = state.nodes().schedulable();
        let count = schedulable.len();
        let mut total = state.nodes().schedulable_room().clone();
        total.sub(in_flight);
        let mut room = Room {
            names: Vec::with_capacity(count),
            allocatable: Vec::with_capacity(count),
            labels: Vec::with_capacity(count),
            nodes: Vec::with_capacity(count),
            total,
            unused_guarantee: vec![Resources::new(); queues],
            guaranteed: Resources::new(),
            held: Vec::new(),
            held_total: Resources::new(),
            lacking: Vec::new(),
            short: Resources::new(),
            cursors: Vec::new(),
            available: vec![None; queues],
            levels: FxHashMap::default(),
        };
        for (node, slot) in schedulable {
            room.names.push(&node.name);
            room.allocatable.push(&node.allocatable);
            room.labels.push(&node.labels);
            room.nodes.push(slot.unreserved.clone());
        }
        room
    }

    pub fn set_unused_guarantee(&mut self, slot: usize, guarantee: &Resources, held: &Resources) {
        if guarantee.is_empty() {
            return;
        }
        self.changed();
        self.guaranteed.sub(&self.unused_guarantee[slot]);
        let unused = guarantee.minus(held).at_least_zero();
        self.guaranteed.add(&unused);
        self.unused_guarantee[slot] = unused;
    }

    /// What a group of queue `slot` may take: the free total minus others' unused guarantees.
    pub fn available_to(&mut self, slot: usize) -> Resources {
        if let Some(available) = &self.available[slot] {
            return available.clone();
        }
        let mut others = self.guaranteed.clone();
        others.sub(&self.unused_guarantee[slot]);
        let available = self.total.minus(&others).at_least_zero();
        self.available[slot] = Some(available.clone());
        available
    }

    /// What is left for admissions on arrival ([`super::on_arrival`]) once the released members
    /// `beyond` (not counted yet) are placed where first fit puts them: each node's free room,
    /// and the free total less every queue's unused guarantee. The pass's last use of the
    /// room: it takes the nodes' room.
    pub fn left_for_arrivals(&mut self, beyond: &[&Resources]) -> (Vec<Resources>, Resources) {
        let mut nodes = std::mem::take(&mut self.nodes);
        nodes.iter_mut().for_each(Resources::clamp_at_zero);
        let mut total = self.total.minus(&self.guaranteed);
        for pod in biggest_first(beyond.iter().copied()) {
            total.sub(pod);
            if let Some(at) = nodes.iter().position(|n| pod.fits_in(n)) {
                nodes[at].sub(pod);
            }
        }
        (nodes, total.at_least_zero())
    }

    /// Forgets what [`Room::available_to`] computed: the free total or a guarantee changed.
    fn changed(&mut self) {
        self.available.iter_mut().for_each(|a| *a = None);
    }

    /// Places every pod of `need` on some node (biggest first, first fit), or says which
    /// request finds no node. Changes nothing unless all are placed.
    pub fn place(&mut self, need: &[&Resources]) -> Result<(), Resources> {
        let pods = biggest_first(need.iter().copied());
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
        self.changed();
        Ok(())
    }

    /// Takes the room of released members not placed yet (`members`, already counted against
    /// the total) from the nodes first fit would put them on, so that no group is placed where
    /// they are going; a member that fits nowhere takes none. The nodes the head's reservation
    /// held (`reserved`) come last: the extender keeps members not lent room there out of the
    /// room held on them, so they go elsewhere where they can. Placed `stand_ins` (node, requests) yield to them: a
    /// member preempts a stand-in, so their room counts as free for the members, and what the
    /// members take of it is no stand-in's to lend its gang any more.
    pub fn hold_in_flight(
        &mut self,
        members: &[&Resources],
        stand_ins: &[(&str, &Resources)],
        reserved: &FxHashSet<&str>,
    ) {
        self.shift(stand_ins, true, false);
        for pod in biggest_first(members.iter().copied()) {
            let outside = if reserved.is_empty() {
                None
            } else {
                (0..self.nodes.len())
                    .find(|&at| !reserved.contains(self.names[at]) && pod.fits_in(&self.nodes[at]))
            };
            if let Some(at) = outside.or_else(|| self.first_fit(pod)) {
                self.nodes[at].sub(pod);
            }
        }
        self.shift(stand_ins, false, false);
    }

    /// Takes the room of released members not placed yet beyond their gang's quorum (not
    /// counted against the total, as elastic members yield to any gang's minimum) from the
    /// total and the nodes first fit would put them on: further elastic members must not be
    /// released into it.
    pub fn hold_elastic_in_flight(&mut self, members: &[&Resources]) {
        for pod in biggest_first(members.iter().copied()) {
            self.total.sub(pod);
            if let Some(at) = self.first_fit(pod) {
                self.nodes[at].sub(pod);
            }
        }
        self.changed();
    }

    /// Adds (`give`) or takes back the room of `pods` (node name, requests) to their nodes
    /// among the schedulable ones: a growing gang's stand-ins' room, lent to it alone
    /// ([`super::plan`]'s growth).
    pub fn lend(&mut self, pods: &[(&str, &Resources)], give: bool) {
        self.shift(pods, give, true);
    }

    /// [`Room::lend`] on the nodes alone (`total` too with `with_total`).
    fn shift(&mut self, pods: &[(&str, &Resources)], give: bool, with_total: bool) {
        for (node, requests) in pods {
            let Ok(at) = self.names.binary_search(node) else {
                continue;
            };
            if give {
                self.nodes[at].add(requests);
                if with_total {
                    self.total.add(requests);
                }
                // That node has room again: every shape may look at it again.
                for (_, cursor) in &mut self.cursors {
                    *cursor = (*cursor).min(at);
                }
            } else {
                self.nodes[at].sub(requests);
                if with_total {
                    self.total.sub(requests);
                }
            }
            self.changed();
        }
    }

    /// Whether every pod of `need` would fit (first fit, as [`Room::place`]) with `extra` added
    /// to the free room of the node of each name, and, with `held`, the head's reservation
    /// too. Changes nothing.
    pub fn fits_with(
        &self,
        need: &[&Resources],
        extra: &rustc_hash::FxHashMap<&str, Resources>,
        held: bool,
    ) -> bool {
        let mut nodes = self.nodes.clone();
        for (at, name) in self.names.iter().enumerate() {
            if let Some(more) = extra.get(name) {
                nodes[at].add(more);
            }
        }
        if held {
            for (at, h) in &self.held {
                nodes[*at].add(h);
            }
        }
        first_fit(&nodes, need.iter().copied()).is_ok()
    }

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

#[cfg(test)]
mod tests;
