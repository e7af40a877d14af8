//! Free room during one admission pass, and the reservation the head of the line holds in it.
//!
//! A copy of each schedulable node's free room (allocatable − used − reserved by the
//! extender) that the pass shrinks as it admits groups, their sum, and the other queues'
//! unused guarantees (room a queue may not take). See [`super::plan`] for how the pass uses it,
//! and `Room::reserve` for how the head's reservation is chosen.

use std::collections::BTreeMap;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::admit::why::{DomainTried, LevelTried};
use crate::model::topology::{self, Domain};
use crate::model::{Resources, State};
use crate::policy::fit::{biggest_first, first_fit, size};

/// A level's label keys and the values a gang's members pinned: one domain of it to keep to.
pub(super) type Within<'a, 'k> = (&'a [&'k str], &'a [(&'k str, &'k str)]);

/// A domain as the (label, value) pairs its members' `nodeSelector`s gain.
pub(super) type Labelled<'s> = Vec<(&'s str, &'s str)>;

/// Where [`Room::place_in_reservation`] puts a group: its domain, if any, and its pods' nodes.
type Placed<'p, 's> = (Option<Labelled<'s>>, Vec<(usize, &'p Resources)>);

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
        let nodes: Vec<(
            &'s str,
            &'s Resources,
            Resources,
            &'s BTreeMap<String, String>,
        )> = state
            .schedulable_nodes()
            .into_iter()
            .map(|n| (n.name.as_str(), &n.allocatable, state.free_on(n), &n.labels))
            .collect();
        let mut total = Resources::new();
        for (_, _, free, _) in &nodes {
            total.add(&at_least_zero(free));
        }
        total.sub(in_flight);
        let mut room = Room {
            names: Vec::with_capacity(nodes.len()),
            allocatable: Vec::with_capacity(nodes.len()),
            labels: Vec::with_capacity(nodes.len()),
            nodes: Vec::with_capacity(nodes.len()),
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
        for (name, allocatable, free, labels) in nodes {
            room.names.push(name);
            room.allocatable.push(allocatable);
            room.labels.push(labels);
            room.nodes.push(free);
        }
        room
    }

    pub fn set_unused_guarantee(&mut self, slot: usize, guarantee: &Resources, held: &Resources) {
        if guarantee.is_empty() {
            return;
        }
        self.changed();
        self.guaranteed.sub(&self.unused_guarantee[slot]);
        let unused = at_least_zero(&guarantee.minus(held));
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
        let available = at_least_zero(&self.total.minus(&others));
        self.available[slot] = Some(available.clone());
        available
    }

    /// What is left for admissions on arrival ([`super::on_arrival`]): each node's free room, and
    /// the free total less every queue's unused guarantee.
    pub fn left_for_arrivals(&self) -> (Vec<Resources>, Resources) {
        let nodes = self.nodes.iter().map(at_least_zero).collect();
        (nodes, at_least_zero(&self.total.minus(&self.guaranteed)))
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
    /// they are going; a member that fits nowhere takes none. Placed
    /// `stand_ins` (node, requests) yield to them: a member preempts a stand-in, so their room
    /// counts as free for the members, and what the members take of it is no stand-in's to
    /// lend its gang any more.
    pub fn hold_in_flight(&mut self, members: &[&Resources], stand_ins: &[(&str, &Resources)]) {
        self.shift(stand_ins, true, false);
        for pod in biggest_first(members.iter().copied()) {
            if let Some(at) = self.nodes.iter().position(|free| pod.fits_in(free)) {
                self.nodes[at].sub(pod);
            }
        }
        self.shift(stand_ins, false, false);
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

    /// The domains of the level `keys` among schedulable nodes (see [`topology::domains`]),
    /// each with its nodes and their allocatable in all; made once per pass and level.
    fn level(&mut self, keys: &[&'s str]) -> Rc<Partition<'s>> {
        let (labels, allocatable) = (&self.labels, &self.allocatable);
        let partition = self.levels.entry(keys.to_vec()).or_insert_with(|| {
            let domains = topology::domains(labels.iter().copied(), keys, &[]);
            Rc::new(
                domains
                    .into_iter()
                    .map(|(domain, nodes)| {
                        let mut sum = Resources::new();
                        nodes.iter().for_each(|&at| sum.add(allocatable[at]));
                        (domain, (nodes, sum))
                    })
                    .collect(),
            )
        });
        Rc::clone(partition)
    }

    /// Where a group may go: with `within`, each domain of that level agreeing with its
    /// pinned values, as (label, value) pairs, with its nodes; without, every node.
    fn choices(
        &mut self,
        within: Option<Within<'_, 's>>,
    ) -> Vec<(Option<Labelled<'s>>, Vec<usize>)> {
        match within {
            None => vec![(None, (0..self.nodes.len()).collect())],
            Some((keys, pinned)) => self
                .level(keys)
                .iter()
                .filter(|(d, _)| topology::agrees(keys, d, pinned))
                .map(|(d, (nodes, _))| (Some(labelled(keys, d)), nodes.clone()))
                .collect(),
        }
    }

    /// Whether some domain of the level `keys` (agreeing with `pinned`) could hold every pod
    /// of `need` with nothing else running on its nodes. If none could: `None` when no node
    /// has the level's labels (or only other values than `pinned`), else a member that found
    /// no node left in the domain that held the most. A gang that fails this never fits one
    /// domain, and must neither head the line nor ask reclaim for room.
    pub fn domain_could_hold(
        &mut self,
        need: &[&Resources],
        keys: &[&'s str],
        pinned: &[(&str, &str)],
    ) -> Result<(), Option<Resources>> {
        let sum = need.iter().fold(Resources::new(), |mut sum, pod| {
            sum.add(pod);
            sum
        });
        let mut closest: Option<(usize, Resources)> = None;
        let level = self.level(keys);
        for (domain, (nodes, allocatable)) in level.iter() {
            if !topology::agrees(keys, domain, pinned) {
                continue;
            }
            let empty: Vec<Resources> = if sum.fits_in(allocatable) {
                nodes
                    .iter()
                    .map(|&at| self.allocatable[at].clone())
                    .collect()
            } else {
                Vec::new()
            };
            match first_fit(&empty, need.iter().copied()) {
                Ok(_) => return Ok(()),
                Err((placed, pod)) => {
                    if closest.as_ref().is_none_or(|(n, _)| placed > *n) {
                        closest = Some((placed, pod.clone()));
                    }
                }
            }
        }
        Err(closest.map(|(_, pod)| pod))
    }

    /// Places every pod of `need` like [`Room::place`], but all in one domain of the level
    /// `keys` (agreeing with `pinned`): the one that fits it tightest (least room left over,
    /// GPUs first), so that roomier domains stay free for larger gangs. Returns that domain as
    /// (label, value) pairs; or, changing nothing, the domains tried and what the closest
    /// lacked.
    pub fn place_in_domain(
        &mut self,
        need: &[&Resources],
        keys: &[&'s str],
        pinned: &[(&str, &str)],
    ) -> Result<Labelled<'s>, LevelTried> {
        type Fit<'l, 'p, 's> = (
            &'l Domain<'s>,
            &'l [usize],
            Vec<(usize, &'p Resources)>,
            Resources,
        );
        let level = self.level(keys);
        let mut best: Option<Fit<'_, '_, 's>> = None;
        let mut closest: Vec<DomainTried> = Vec::new();
        let mut tried = 0;
        for (domain, (nodes, _)) in level.iter() {
            if !topology::agrees(keys, domain, pinned) {
                continue;
            }
            tried += 1;
            let mut free: Vec<Resources> = nodes.iter().map(|&at| self.nodes[at].clone()).collect();
            let placed = first_fit(&free, need.iter().copied());
            let placed = match placed {
                Ok(placed) => placed,
                Err((placed, pod)) => {
                    if closest.len() < LevelTried::SHOWN
                        || closest.last().is_some_and(|d| placed > d.placed)
                    {
                        closest.push(DomainTried {
                            domain: topology::describe(keys, domain),
                            placed,
                            of: need.len(),
                            member: pod.clone(),
                        });
                        closest.sort_by_key(|d| std::cmp::Reverse(d.placed));
                        closest.truncate(LevelTried::SHOWN);
                    }
                    continue;
                }
            };
            for &(at, pod) in &placed {
                free[at].sub(pod);
            }
            let left = free.iter().fold(Resources::new(), |mut left, f| {
                left.add(&at_least_zero(f));
                left
            });
            if best
                .as_ref()
                .is_none_or(|(_, _, _, l)| size(&left) < size(l))
            {
                best = Some((domain, nodes, placed, left));
            }
        }
        let Some((domain, nodes, placed, _)) = best else {
            return Err(LevelTried {
                key: keys.last().copied().unwrap_or_default().to_owned(),
                domains: tried,
                closest,
            });
        };
        for (at, pod) in placed {
            self.nodes[nodes[at]].sub(pod);
        }
        for pod in need {
            self.total.sub(pod);
        }
        self.changed();
        Ok(labelled(keys, domain))
    }

    /// Places `need` like [`Room::place`], but also in the head's reservation: for a group
    /// expected to finish before the head could start. Takes the reservation last, node by
    /// node, so that what it leaves of it stays held. With `within` (a level's keys and the
    /// pinned values), all in one domain of it, which it returns as (label, value) pairs.
    pub fn place_in_reservation(
        &mut self,
        need: &[&Resources],
        within: Option<Within<'_, 's>>,
    ) -> Result<Option<Labelled<'s>>, Resources> {
        let pods = biggest_first(need.iter().copied());
        let mut with_held: Vec<Resources> = self.nodes.clone();
        for (at, held) in &self.held {
            with_held[*at].add(held);
        }
        let choices = self.choices(within);
        let mut missing: Option<Resources> = None;
        let mut chosen: Option<Placed<'_, 's>> = None;
        for (domain, nodes) in choices {
            let free: Vec<Resources> = nodes.iter().map(|&at| with_held[at].clone()).collect();
            match first_fit(&free, pods.iter().copied()) {
                Ok(placed) => {
                    let placed = placed.into_iter().map(|(i, pod)| (nodes[i], pod)).collect();
                    chosen = Some((domain, placed));
                    break;
                }
                Err((_, pod)) => missing = Some(pod.clone()),
            }
        }
        let Some((domain, placed)) = chosen else {
            return Err(
                missing.unwrap_or_else(|| pods.first().map(|p| (*p).clone()).unwrap_or_default())
            );
        };
        for (at, pod) in placed {
            // Free room first; what it lacks comes out of the reservation on that node.
            let from_free = at_least_zero(&self.nodes[at]).min_of(pod);
            let mut from_held = pod.minus(&from_free);
            self.nodes[at].sub(&from_free);
            self.total.sub(&from_free);
            self.changed();
            if let Some((_, held)) = self.held.iter_mut().find(|(i, _)| *i == at) {
                from_held = at_least_zero(&from_held);
                held.sub(&from_held);
                self.held_total.sub(&from_held);
            }
        }
        Ok(domain)
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

    /// Holds room for `need`, the gang at the head of the line that does not fit now, so that
    /// groups behind it cannot take it. Each member (biggest first) is assigned the node whose
    /// allocatable can hold it (after the members already assigned there) and that has the
    /// most of it free now (GPUs first, then CPU, then memory; ties to the first node by
    /// name): the nodes closest to fitting it, so it starts as soon as they free up. On that
    /// node the reservation holds what is free of the member's requests; room on other nodes,
    /// and beyond the member's requests, stays available to the groups behind it.
    ///
    /// Nodes for which `held_before` is true (the ones the same head held on the previous
    /// pass) come first, whatever is free on them: a reservation that moved to whichever node
    /// freed a little more would hand the room it held to the groups behind it, and the head
    /// would wait for them. So it stays put, and grows as its nodes free up.
    ///
    /// With `within` (the keys of a gang's required level and the values its members already
    /// pinned), the reservation lies inside one domain of that level that could hold the whole
    /// gang: the one it held before, else the one with the most of its requests free now.
    ///
    /// The reservation holds at most `budget` in all (what the head's queue may take: other
    /// queues' unused guarantees stay theirs).
    ///
    /// Returns false, holding nothing, when the gang could not fit even on empty nodes (a
    /// member larger than any node, or no domain large enough): a reservation would then
    /// block everyone for nothing.
    pub fn reserve(
        &mut self,
        need: &[&Resources],
        budget: &Resources,
        held_before: &dyn Fn(&str) -> bool,
        within: Option<Within<'_, 's>>,
    ) -> bool {
        let pods = biggest_first(need.iter().copied());
        let candidates = self.choices(within);
        let mut best: Option<Planned> = None;
        for (_, nodes) in &candidates {
            let plan = self.plan_reservation(nodes, &pods, budget, held_before);
            if let Some(plan) = plan
                && best.as_ref().is_none_or(|b| plan.preference > b.preference)
            {
                best = Some(plan);
            }
        }
        let Some(plan) = best else {
            return false;
        };
        let Planned {
            mut held,
            mut lacking,
            short,
            ..
        } = plan;
        for (at, h) in &held {
            self.nodes[*at].sub(h);
            self.total.sub(h);
            self.held_total.add(h);
        }
        self.changed();
        held.sort_by_key(|(at, _)| *at);
        lacking.sort_by_key(|(at, _)| *at);
        self.held = held;
        self.lacking = lacking;
        self.short = at_least_zero(&short);
        true
    }

    /// [`Room::reserve`]'s choice of nodes among `nodes` for `pods` (biggest first), changing
    /// nothing; `None` when they could not hold the pods even empty.
    fn plan_reservation(
        &self,
        nodes: &[usize],
        pods: &[&Resources],
        budget: &Resources,
        held_before: &dyn Fn(&str) -> bool,
    ) -> Option<Planned> {
        let mut budget = budget.clone();
        let mut capacity: Vec<(usize, Resources)> = Vec::new();
        let mut held: Vec<(usize, Resources)> = Vec::new();
        let mut free: Vec<(usize, Resources)> = Vec::new();
        let mut lacking: Vec<(usize, Resources)> = Vec::new();
        let mut short = Resources::new();
        let mut found = Resources::new();
        let mut kept = false;
        for &pod in pods {
            let mut best: Option<(usize, Preference)> = None;
            for &at in nodes {
                let left = find(&capacity, at).unwrap_or(self.allocatable[at]);
                if !pod.fits_in(left) {
                    continue;
                }
                let now = find(&free, at).unwrap_or(&self.nodes[at]);
                let score = (
                    held_before(self.names[at]),
                    size(&at_least_zero(now).min_of(pod)),
                );
                if best.is_none_or(|(_, b)| score > b) {
                    best = Some((at, score));
                }
            }
            let (at, (before, _)) = best?;
            kept |= before;
            // What is free of the member's requests here; the reservation holds it within the
            // budget. It lacks only what pods on the node must free: room the budget keeps for
            // other queues stays free, and is not lacking.
            let here = at_least_zero(find(&free, at).unwrap_or(&self.nodes[at])).min_of(pod);
            found.add(&here);
            let taken = here.min_of(&budget);
            budget.sub(&taken);
            short.add(&here.minus(&taken));
            let left = find(&capacity, at)
                .unwrap_or(self.allocatable[at])
                .minus(pod);
            let now = find(&free, at).unwrap_or(&self.nodes[at]).minus(&here);
            upsert(&mut capacity, at, left);
            upsert(&mut free, at, now);
            let lack = pod.minus(&here);
            match held.iter_mut().find(|(i, _)| *i == at) {
                Some((_, h)) => h.add(&taken),
                None => held.push((at, taken)),
            }
            match lacking.iter_mut().find(|(i, _)| *i == at) {
                Some((_, l)) => l.add(&lack),
                None => lacking.push((at, lack)),
            }
        }
        Some(Planned {
            held,
            lacking,
            short,
            preference: (kept, size(&found)),
        })
    }
}

/// A reservation [`Room::reserve`] may hold: per node what it holds and lacks, what the budget
/// left short, and how much it suits the head (it keeps nodes held before, then the most of
/// the head's requests free now).
struct Planned {
    held: Vec<(usize, Resources)>,
    lacking: Vec<(usize, Resources)>,
    short: Resources,
    preference: Preference,
}

/// How much a node suits a reserved member: held by the head before, then how much of the
/// member's requests it has free (see [`weight`]).
type Preference = (bool, (i64, i64, i64));

fn find(list: &[(usize, Resources)], at: usize) -> Option<&Resources> {
    list.iter().find(|(i, _)| *i == at).map(|(_, r)| r)
}

fn upsert(list: &mut Vec<(usize, Resources)>, at: usize, value: Resources) {
    match list.iter_mut().find(|(i, _)| *i == at) {
        Some((_, r)) => *r = value,
        None => list.push((at, value)),
    }
}

pub(super) fn at_least_zero(r: &Resources) -> Resources {
    let mut out = Resources::new();
    for (id, amount) in r.ids() {
        if amount > 0 {
            out.set_amount(id, amount);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::Node;

    fn requests((cpus, gib): (i64, i64)) -> Resources {
        Resources::from([("cpu", cpus * 1_000), ("memory", gib << 30)])
    }

    proptest! {
        /// The pass's placement, which skips nodes known too full for a shape, places every
        /// group where the one placement model does, group after group.
        #[test]
        fn the_pass_places_every_group_where_first_fit_does(
            nodes in prop::collection::vec((1i64..17, 1i64..33), 1..12),
            groups in prop::collection::vec(
                prop::collection::vec((1i64..5, 1i64..9), 1..6),
                1..12,
            ),
        ) {
            let mut state = State::default();
            for (i, &shape) in nodes.iter().enumerate() {
                state.apply_node(Node {
                    name: format!("n{i:02}"),
                    allocatable: requests(shape),
                    ..Default::default()
                });
            }
            let mut room = Room::new(&state, &Resources::new(), 0);
            let mut model: Vec<Resources> = nodes.iter().map(|&s| requests(s)).collect();
            for group in groups {
                let need: Vec<Resources> = group.into_iter().map(requests).collect();
                let placed = room.place(&need.iter().collect::<Vec<_>>());
                let expected = first_fit(&model, &need);
                prop_assert_eq!(placed.is_ok(), expected.is_ok());
                if let Ok(at) = expected {
                    for (node, pod) in at {
                        model[node].sub(pod);
                    }
                }
                prop_assert_eq!(&room.nodes, &model);
            }
        }
    }
}
