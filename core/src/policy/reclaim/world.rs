//! What a reclaim plan has taken so far ([`World`]: the room and allocations as the verdicts so
//! far leave them), the victims a search may take ([`Take`], by [`Rule`]), and what taking
//! them changes. Written only by [`super::plan`]'s searches, one world per plan.

use super::{Input, Starved};
use crate::model::resources::{ResourceId, Resources};
use crate::policy::fit::first_fit;

/// The room and allocations as the verdicts so far leave them.
#[derive(Clone)]
pub(super) struct World {
    pub(super) nodes: Vec<Resources>,
    pub(super) allocated: Vec<Resources>,
    /// Per queue: what it holds less the victims taken, without the groups booked by earlier
    /// verdicts. The victim rules read this, so that room promised to a queue's waiting group
    /// never makes that queue's running gangs victims.
    pub(super) held: Vec<Resources>,
    pub(super) in_flight: Resources,
    /// Per gang, per member: taken by an earlier verdict.
    pub(super) taken: Vec<Vec<bool>>,
    /// Σ of the nodes' free room (each at least zero), kept up to date node by node: a pass
    /// may list thousands of starved groups.
    pub(super) free: Resources,
    /// Per queue: its guarantee less its allocation (each at least zero), and their sum, kept
    /// up to date queue by queue: every fit check subtracts the other queues' share of it.
    pub(super) unused: Vec<Resources>,
    pub(super) unused_total: Resources,
    /// Per queue and [`Rule`]: one of its groups already searched for victims in this plan.
    pub(super) searched: Vec<[bool; 3]>,
}

/// Whose gangs a starved group may take room from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    /// Reclaim: other queues' gangs, of queues above their deserved share.
    Reclaim,
    /// Priority preemption: its own queue's gangs of lower priority.
    Preempt,
    /// Elastic members of any gang: its own queue's, or (unless it waits for its queue's
    /// capability, which other queues' room does not change) another reclaimable queue's.
    Yield,
}

/// A candidate victim: some members of one gang.
#[derive(Debug, Clone)]
pub(super) struct Take {
    pub(super) gang: usize,
    pub(super) members: Vec<usize>,
    pub(super) whole: bool,
}

impl World {
    /// Nothing taken yet: the input's nodes and allocations, and the queues' unused guarantees.
    pub(super) fn new<K>(input: &Input<K>) -> World {
        let mut world = World {
            nodes: input.nodes.clone(),
            allocated: input.queues.iter().map(|q| q.allocated.clone()).collect(),
            held: input.queues.iter().map(|q| q.allocated.clone()).collect(),
            in_flight: input.in_flight.clone(),
            taken: input
                .gangs
                .iter()
                .map(|g| vec![false; g.members.len()])
                .collect(),
            free: Resources::new(),
            unused: Vec::new(),
            unused_total: Resources::new(),
            searched: vec![[false; 3]; input.queues.len()],
        };
        for node in &world.nodes {
            world.free.add(&node.positive());
        }
        for (queue, allocated) in input.queues.iter().zip(&world.allocated) {
            let unused = queue.guarantee.minus(allocated).positive();
            world.unused_total.add(&unused);
            world.unused.push(unused);
        }
        world
    }

    /// What `t` frees: the requests of its members not taken yet.
    pub(super) fn freed<K>(&self, input: &Input<K>, t: &Take) -> Resources {
        let mut out = Resources::new();
        for &m in &t.members {
            if !self.taken[t.gang][m] {
                out.add(&input.gangs[t.gang].members[m].requests);
            }
        }
        out
    }

    /// Whether taking `t` (for starved group `s`) frees some short resource and, for reclaim,
    /// keeps its queue at or above its guarantee in every resource and its deserved share in
    /// every short resource it frees (preemption moves room inside one queue: its share does
    /// not change); for the elastic yield, another queue's at or above its guarantee.
    pub(super) fn may_take<K>(
        &self,
        input: &Input<K>,
        t: &Take,
        s: &Starved<K>,
        short: &[ResourceId],
        rule: Rule,
    ) -> bool {
        let v = input.gangs[t.gang].queue;
        let queue = &input.queues[v];
        let freed = self.freed(input, t);
        if !short.iter().any(|&id| freed.amount(id) > 0) {
            return false;
        }
        if rule == Rule::Preempt || (rule == Rule::Yield && v == s.queue) {
            return true;
        }
        let after = self.held[v].minus(&freed);
        let above_guarantee = queue
            .guarantee
            .ids()
            .all(|(id, floor)| freed.amount(id) <= 0 || after.amount(id) >= floor);
        if rule == Rule::Yield {
            return above_guarantee;
        }
        let above_deserved = short
            .iter()
            .filter(|&&id| freed.amount(id) > 0)
            .all(|&id| after.amount(id) >= queue.deserved.amount(id));
        above_guarantee && above_deserved
    }

    /// Takes `t`'s members (or, with `take` false, puts back those taken by `t`).
    pub(super) fn take<K>(&mut self, input: &Input<K>, t: &Take, take: bool) {
        let gang = &input.gangs[t.gang];
        for &m in &t.members {
            if self.taken[t.gang][m] == take {
                continue;
            }
            self.taken[t.gang][m] = take;
            let member = &gang.members[m];
            self.free.sub_positive(&self.nodes[member.node]);
            if take {
                self.nodes[member.node].add(&member.requests);
                self.held[gang.queue].sub(&member.requests);
            } else {
                self.nodes[member.node].sub(&member.requests);
                self.held[gang.queue].add(&member.requests);
            }
            self.free.add_positive(&self.nodes[member.node]);
            self.allocate(input, gang.queue, &member.requests, !take);
        }
    }

    /// Adds `amount` to queue `q`'s allocation (or, with `add` false, takes it away).
    pub(super) fn allocate<K>(
        &mut self,
        input: &Input<K>,
        q: usize,
        amount: &Resources,
        add: bool,
    ) {
        if add {
            self.allocated[q].add(amount);
        } else {
            self.allocated[q].sub(amount);
        }
        if input.queues[q].guarantee.is_empty() {
            return;
        }
        self.unused_total.sub(&self.unused[q]);
        self.unused[q].set_lack(&input.queues[q].guarantee, &self.allocated[q]);
        self.unused_total.add(&self.unused[q]);
    }

    /// What a group of queue `q` may take in all: the free total less pods in flight and the
    /// other queues' unused guarantees.
    pub(super) fn available_to(&self, q: usize) -> Resources {
        let mut total = self.free.clone();
        total.sub(&self.in_flight);
        total.sub(&self.unused_total);
        total.add(&self.unused[q]);
        total
    }

    /// `None` when `s` fits the room and its queue's capability; else the short resources:
    /// those of the room (see the module docs), or else those its queue's capability lacks.
    pub(super) fn shortfall<K>(&self, input: &Input<K>, s: &Starved<K>) -> Option<Vec<ResourceId>> {
        if let Some(short) = self.misfit(s) {
            return Some(short);
        }
        let after = self.allocated[s.queue].plus(&s.requests);
        let over: Vec<ResourceId> = input.queues[s.queue]
            .capability
            .iter()
            .filter(|&(id, limit)| after.amount(id) > limit)
            .map(|(id, _)| id)
            .collect();
        (!over.is_empty()).then_some(over)
    }

    /// `None` when `s`'s need fits the room for its queue; else the short resources (see the
    /// module docs).
    pub(super) fn misfit<K>(&self, s: &Starved<K>) -> Option<Vec<ResourceId>> {
        let mut sum = Resources::new();
        for pod in &s.need {
            sum.add(pod);
        }
        let available = self.available_to(s.queue);
        let short: Vec<ResourceId> = sum
            .shortfall(&available)
            .into_iter()
            .map(|(name, _)| ResourceId::of(name))
            .collect();
        if !short.is_empty() {
            return Some(short);
        }
        let (_, pod) = fit_gang(&self.nodes, s).err()?;
        let scarce: Vec<ResourceId> = pod
            .ids()
            .filter(|&(id, amount)| self.nodes.iter().all(|n| n.amount(id) < amount))
            .map(|(id, _)| id)
            .collect();
        Some(if scarce.is_empty() {
            pod.ids()
                .filter(|(_, a)| *a > 0)
                .map(|(id, _)| id)
                .collect()
        } else {
            scarce
        })
    }

    /// Books the room of a group that fits.
    pub(super) fn admit<K>(&mut self, input: &Input<K>, s: &Starved<K>) {
        // It fits, so every member is placed.
        for (at, pod) in fit_gang(&self.nodes, s).unwrap_or_default() {
            self.free.sub_positive(&self.nodes[at]);
            self.nodes[at].sub(pod);
            self.free.add_positive(&self.nodes[at]);
        }
        self.allocate(input, s.queue, &s.requests, true);
    }
}

/// Where each pod of `s`'s need goes on `nodes`: each of its instances whole inside one of
/// its own domains, then the rest inside one of `s`'s domains ([`fit_within`]); or the pod
/// that found no node, and how many were placed before it.
pub(super) fn fit_gang<'a, K>(
    nodes: &[Resources],
    s: &'a Starved<K>,
) -> Result<Vec<(usize, &'a Resources)>, (usize, &'a Resources)> {
    if s.instances.is_empty() {
        return fit_within(nodes, &s.need, s.domains.as_deref());
    }
    let mut free = nodes.to_vec();
    let mut placed: Vec<(usize, &'a Resources)> = Vec::with_capacity(s.need.len());
    let mut rest = &s.need[..];
    for instance in &s.instances {
        let (members, after) = rest.split_at(instance.members.min(rest.len()));
        let fits = fit_within(&free, members, instance.domains.as_deref())
            .map_err(|(n, pod)| (placed.len() + n, pod))?;
        for &(at, pod) in &fits {
            free[at].sub(pod);
        }
        placed.extend(fits);
        rest = after;
    }
    let fits = fit_within(&free, rest, s.domains.as_deref())
        .map_err(|(n, pod)| (placed.len() + n, pod))?;
    placed.extend(fits);
    Ok(placed)
}

/// Where each pod of `need` goes ([`first_fit`]) on `nodes`, all inside one of `domains`
/// (lists of indexes in `nodes`; `None`: anywhere), or the pod that found no node in the
/// domain that held the most.
pub(super) fn fit_within<'a>(
    nodes: &[Resources],
    need: &'a [Resources],
    domains: Option<&[Vec<usize>]>,
) -> Result<Vec<(usize, &'a Resources)>, (usize, &'a Resources)> {
    let Some(domains) = domains else {
        return first_fit(nodes, need);
    };
    let mut closest: Option<(usize, &'a Resources)> = None;
    for domain in domains {
        let free: Vec<Resources> = domain.iter().map(|&at| nodes[at].clone()).collect();
        match first_fit(&free, need) {
            Ok(placed) => {
                return Ok(placed
                    .into_iter()
                    .map(|(i, pod)| (domain[i], pod))
                    .collect());
            }
            Err((placed, pod)) => {
                if closest.is_none_or(|(n, _)| placed > n) {
                    closest = Some((placed, pod));
                }
            }
        }
    }
    match (closest, need.first()) {
        (Some(closest), _) => Err(closest),
        (None, Some(pod)) => Err((0, pod)),
        (None, None) => Ok(Vec::new()),
    }
}
