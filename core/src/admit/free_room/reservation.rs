//! The head's reservation in the free room: placing a group that finishes before the head
//! could start inside the reservation ([`Room::place_in_reservation`]), and choosing the
//! reservation itself ([`Room::reserve`]): per node what the head holds and still lacks.

use super::{InDomain, Labelled, Room};
use crate::model::Resources;
use crate::policy::fit::{biggest_first, first_fit, size};

/// Where [`Room::place_in_reservation`] puts a group: its domain, if any, and its pods' nodes.
type Placed<'p, 's> = (Option<Labelled<'s>>, Vec<(usize, &'p Resources)>);

impl<'s> Room<'s> {
    /// Places `need` like [`Room::place`], but also in the head's reservation: for a group
    /// expected to finish before the head could start. Takes the reservation last, node by
    /// node, so that what it leaves of it stays held. With `within` (a level's keys and the
    /// pinned values), all in one domain of it, which it returns as (label, value) pairs.
    pub fn place_in_reservation(
        &mut self,
        need: &[&Resources],
        within: Option<InDomain<'_, 's>>,
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
            let from_free = self.nodes[at].at_least_zero().min_of(pod);
            let mut from_held = pod.minus(&from_free);
            self.nodes[at].sub(&from_free);
            self.total.sub(&from_free);
            self.changed();
            if let Some((_, held)) = self.held.iter_mut().find(|(i, _)| *i == at) {
                from_held = from_held.at_least_zero();
                held.sub(&from_held);
                self.held_total.sub(&from_held);
            }
        }
        Ok(domain)
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
    /// `need` comes in parts, each with its own `within`: a gang whose instances each keep to a
    /// domain reserves for each instance in turn, inside one domain of its level.
    ///
    /// The reservation holds at most `budget` in all (what the head's queue may take: other
    /// queues' unused guarantees stay theirs).
    ///
    /// Returns false, holding nothing, when the gang could not fit even on empty nodes (a
    /// member larger than any node, or no domain large enough): a reservation would then
    /// block everyone for nothing.
    pub fn reserve(
        &mut self,
        parts: &[(Vec<&Resources>, Option<InDomain<'_, 's>>)],
        budget: &Resources,
        held_before: &dyn Fn(&str) -> bool,
    ) -> bool {
        let mut draft = Draft::new(budget);
        for (need, within) in parts {
            let pods = biggest_first(need.iter().copied());
            let mut best: Option<Draft> = None;
            for (_, nodes) in &self.choices(*within) {
                let plan = self.plan_reservation(draft.clone(), nodes, &pods, held_before);
                if let Some(plan) = plan
                    && best
                        .as_ref()
                        .is_none_or(|b| plan.preference() > b.preference())
                {
                    best = Some(plan);
                }
            }
            let Some(plan) = best else {
                return false;
            };
            draft = plan;
        }
        let Draft {
            mut held,
            mut lacking,
            short,
            ..
        } = draft;
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
        self.short = short.at_least_zero();
        true
    }

    /// [`Room::reserve`]'s choice of nodes among `nodes` for `pods` (biggest first), after
    /// what `draft` holds already, changing nothing; `None` when they could not hold the pods
    /// even empty.
    fn plan_reservation(
        &self,
        mut draft: Draft,
        nodes: &[usize],
        pods: &[&Resources],
        held_before: &dyn Fn(&str) -> bool,
    ) -> Option<Draft> {
        for &pod in pods {
            let mut best: Option<(usize, Preference)> = None;
            for &at in nodes {
                let left = find(&draft.capacity, at).unwrap_or(self.allocatable[at]);
                if !pod.fits_in(left) {
                    continue;
                }
                let now = find(&draft.free, at).unwrap_or(&self.nodes[at]);
                let score = (
                    held_before(self.names[at]),
                    size(&now.at_least_zero().min_of(pod)),
                );
                if best.is_none_or(|(_, b)| score > b) {
                    best = Some((at, score));
                }
            }
            let (at, (before, _)) = best?;
            draft.kept |= before;
            // What is free of the member's requests here; the reservation holds it within the
            // budget. It lacks only what pods on the node must free: room the budget keeps for
            // other queues stays free, and is not lacking.
            let here = find(&draft.free, at)
                .unwrap_or(&self.nodes[at])
                .at_least_zero()
                .min_of(pod);
            draft.found.add(&here);
            let taken = here.min_of(&draft.budget);
            draft.budget.sub(&taken);
            draft.short.add(&here.minus(&taken));
            let left = find(&draft.capacity, at)
                .unwrap_or(self.allocatable[at])
                .minus(pod);
            let now = find(&draft.free, at)
                .unwrap_or(&self.nodes[at])
                .minus(&here);
            upsert(&mut draft.capacity, at, left);
            upsert(&mut draft.free, at, now);
            let lack = pod.minus(&here);
            match draft.held.iter_mut().find(|(i, _)| *i == at) {
                Some((_, h)) => h.add(&taken),
                None => draft.held.push((at, taken)),
            }
            match draft.lacking.iter_mut().find(|(i, _)| *i == at) {
                Some((_, l)) => l.add(&lack),
                None => draft.lacking.push((at, lack)),
            }
        }
        Some(draft)
    }
}

/// A reservation [`Room::reserve`] is drafting: per node what its members take of the node's
/// allocatable (`capacity`: what is left) and of its free room (`free`: what is left), what it
/// holds and lacks, what the budget has left and left short, and how much it suits the head.
#[derive(Clone)]
struct Draft {
    budget: Resources,
    capacity: Vec<(usize, Resources)>,
    free: Vec<(usize, Resources)>,
    held: Vec<(usize, Resources)>,
    lacking: Vec<(usize, Resources)>,
    short: Resources,
    /// What its members found free on their nodes.
    found: Resources,
    /// It keeps a node the head held before.
    kept: bool,
}

impl Draft {
    fn new(budget: &Resources) -> Draft {
        Draft {
            budget: budget.clone(),
            capacity: Vec::new(),
            free: Vec::new(),
            held: Vec::new(),
            lacking: Vec::new(),
            short: Resources::new(),
            found: Resources::new(),
            kept: false,
        }
    }

    /// How much it suits the head: it keeps nodes held before, then the most of the head's
    /// requests free now.
    fn preference(&self) -> Preference {
        (self.kept, size(&self.found))
    }
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
