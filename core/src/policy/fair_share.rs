//! Deserved shares ([`deserved_shares`]): how much of the cluster each queue deserves, resource
//! by resource, by weighted water-filling: guarantees first (scaled down together when they do
//! not fit), the rest by weight up to each queue's capability and demand, in integers, down a
//! hierarchy of queues. The yardstick of the admission order, reclaim and the Queue status.
//! The rules and their reasons are in `docs/decisions/fair-share.md`.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::resources::{Capability, ResourceId, Resources};

/// Why deserved shares could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("failed to compute deserved shares: queue {0} is listed more than once")]
    DuplicateQueue(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One queue as the share computation sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueDemand {
    pub name: String,
    /// The parent queue's name; `None` for a top-level queue.
    pub parent: Option<String>,
    /// Relative share among siblings; 0 is read as 1 (the CRD refuses it anyway).
    pub weight: u32,
    /// Reserved minimum per resource (missing: none).
    pub guarantee: Resources,
    /// Hard maximum per resource (missing: none).
    pub capability: Capability,
    /// What the queue's own admitted and waiting groups request, not its children's.
    pub demand: Resources,
}

impl QueueDemand {
    /// A top-level queue of weight 1 with no guarantee, no capability and no demand.
    pub fn new(name: impl Into<String>) -> Self {
        QueueDemand {
            name: name.into(),
            parent: None,
            weight: 1,
            guarantee: Resources::new(),
            capability: Capability::unbounded(),
            demand: Resources::new(),
        }
    }
}

/// What stopped a queue's deserved share, for one resource, where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// It deserves everything it asks for.
    Demand,
    /// Its capability (or an ancestor's, through the roll-up) stops it below what it asks for.
    Capability,
    /// The capacity at its level ran out: it got its guarantee plus its weighted part of the
    /// rest (possibly nothing).
    Weight,
    /// The guarantees at its level add up to more than there is to share: every guarantee was
    /// scaled down in proportion and nothing else was shared.
    OverGuaranteed,
}

impl Bound {
    /// A short fixed name, for metrics and status reasons.
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Demand => "demand",
            Bound::Capability => "capability",
            Bound::Weight => "weight",
            Bound::OverGuaranteed => "over_guaranteed",
        }
    }
}

/// Why a queue's `parent` was not followed (the queue is treated as top-level).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParentIgnored {
    /// No queue of that name exists.
    Missing,
    /// Following parents from this queue comes back to it.
    Cycle,
}

/// One queue's deserved share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// What the queue and its descendants deserve together (for a queue without children: what
    /// its groups deserve).
    pub deserved: Resources,
    /// The part of `deserved` for the queue's own groups (equal to `deserved` without children).
    pub own: Resources,
    /// For each resource some queue demands, in id order: what stopped `deserved` there.
    pub bounds: Vec<(ResourceId, Bound)>,
    /// Set when the queue's `parent` was not followed.
    pub parent_ignored: Option<ParentIgnored>,
}

impl Share {
    /// What stopped `deserved` for `id`; `None` when no queue demands it.
    pub fn bound(&self, id: ResourceId) -> Option<Bound> {
        self.bounds.iter().find(|(r, _)| *r == id).map(|(_, b)| *b)
    }
}

/// Every queue's deserved share of `capacity` (the cluster's allocatable), by queue name.
///
/// See the module docs for the rules and the cost.
pub fn deserved_shares(
    capacity: &Resources,
    queues: &[QueueDemand],
) -> Result<BTreeMap<String, Share>> {
    let tree = Tree::build(queues)?;
    let n = tree.queues.len();
    let resources: Vec<ResourceId> = queues
        .iter()
        .flat_map(|q| q.demand.ids())
        .filter(|(id, amount)| *amount > 0 && !id.is_marker())
        .map(|(id, _)| id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    let mut deserved = vec![Resources::new(); n];
    let mut own = vec![Resources::new(); n];
    let mut bounds = vec![Vec::with_capacity(resources.len()); n];
    let mut work = Work::new(n);
    for &id in &resources {
        tree.share(id, i128::from(capacity.amount(id)), &mut work);
        for i in 0..n {
            deserved[i].set_amount(id, narrow(work.alloc[i]));
            own[i].set_amount(id, narrow(work.own[i]));
            bounds[i].push((id, work.bound[i]));
        }
    }

    Ok(tree
        .queues
        .iter()
        .zip(deserved)
        .zip(own)
        .zip(bounds)
        .zip(&tree.ignored)
        .map(|((((q, deserved), own), bounds), ignored)| {
            (
                q.name.clone(),
                Share {
                    deserved,
                    own,
                    bounds,
                    parent_ignored: *ignored,
                },
            )
        })
        .collect())
}

/// Shares never exceed the capacity, an `i64`; saturate rather than panic if that ever broke.
/// The guarantees admission may hold back, per queue: `guarantees` (by queue, each with the
/// queues above it in `ancestors`, nearest first) scaled down, resource by resource and all by
/// the same factor, so that what they reserve together never exceeds `capacity`. A guarantee
/// larger than the cluster would otherwise keep every other queue waiting on an idle cluster.
/// What they reserve together is the sum over top-level queues of the larger of a queue's own
/// guarantee and what its children's reserve, as [`deserved_shares`] rolls them up.
pub fn fitted_guarantees(
    guarantees: &[&Resources],
    ancestors: &[Vec<usize>],
    capacity: &Resources,
) -> Vec<Resources> {
    let mut out: Vec<Resources> = guarantees.iter().map(|g| (*g).clone()).collect();
    let mut by_depth: Vec<usize> = (0..guarantees.len()).collect();
    by_depth.sort_by_key(|&q| std::cmp::Reverse(ancestors[q].len()));
    let ids: std::collections::BTreeSet<ResourceId> = guarantees
        .iter()
        .flat_map(|g| g.ids().filter(|(_, amount)| *amount > 0).map(|(id, _)| id))
        .collect();
    for id in ids {
        let mut rolled: Vec<i128> = guarantees
            .iter()
            .map(|g| i128::from(g.amount(id).max(0)))
            .collect();
        let mut children = vec![0i128; guarantees.len()];
        let mut total = 0i128;
        for &q in &by_depth {
            rolled[q] = rolled[q].max(children[q]);
            match ancestors[q].first() {
                Some(&parent) => children[parent] += rolled[q],
                None => total += rolled[q],
            }
        }
        let available = i128::from(capacity.amount(id).max(0));
        if total > available {
            for (g, q) in out.iter_mut().zip(guarantees) {
                let scaled = i128::from(q.amount(id).max(0)) * available / total;
                g.set_amount(id, narrow(scaled));
            }
        }
    }
    out
}

fn narrow(x: i128) -> i64 {
    i64::try_from(x).unwrap_or(if x < 0 { 0 } else { i64::MAX })
}

/// The queues, sorted by name, with their effective parents.
struct Tree<'a> {
    queues: Vec<&'a QueueDemand>,
    ignored: Vec<Option<ParentIgnored>>,
    children: Vec<Vec<usize>>,
    roots: Vec<usize>,
    /// Every queue, each parent before its children.
    preorder: Vec<usize>,
}

impl<'a> Tree<'a> {
    fn build(input: &'a [QueueDemand]) -> Result<Self> {
        let mut queues: Vec<&QueueDemand> = input.iter().collect();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = queues.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(Error::DuplicateQueue(w[0].name.clone()));
        }
        let n = queues.len();
        let index = |name: &str| queues.binary_search_by(|q| q.name.as_str().cmp(name)).ok();

        let mut ignored = vec![None; n];
        let mut parent: Vec<Option<usize>> = queues
            .iter()
            .zip(&mut ignored)
            .map(|(q, ignored)| {
                let p = q.parent.as_deref()?;
                let found = index(p);
                if found.is_none() {
                    *ignored = Some(ParentIgnored::Missing);
                }
                found
            })
            .collect();

        // Break parent cycles: every queue on one becomes top-level.
        const NEW: u8 = 0;
        const ON_PATH: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; n];
        let mut path = Vec::new();
        for start in 0..n {
            path.clear();
            let mut at = Some(start);
            while let Some(i) = at {
                match state[i] {
                    DONE => break,
                    ON_PATH => {
                        let from = path.iter().position(|&p| p == i).unwrap_or(0);
                        for &c in &path[from..] {
                            parent[c] = None;
                            ignored[c] = Some(ParentIgnored::Cycle);
                        }
                        break;
                    }
                    _ => {
                        state[i] = ON_PATH;
                        path.push(i);
                        at = parent[i];
                    }
                }
            }
            for &p in &path {
                state[p] = DONE;
            }
        }

        let mut children = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, p) in parent.iter().enumerate() {
            match p {
                Some(p) => children[*p].push(i),
                None => roots.push(i),
            }
        }
        let mut preorder = Vec::with_capacity(n);
        let mut stack: Vec<usize> = roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            preorder.push(i);
            stack.extend(children[i].iter().rev());
        }
        Ok(Tree {
            queues,
            ignored,
            children,
            roots,
            preorder,
        })
    }

    /// Fills `work.alloc`, `work.own` and `work.bound` for one resource.
    fn share(&self, id: ResourceId, capacity: i128, work: &mut Work) {
        // Roll demand, guarantee and capability up, children before parents.
        for &i in self.preorder.iter().rev() {
            let q = self.queues[i];
            let own_demand = i128::from(q.demand.amount(id).max(0));
            let mut demand = own_demand;
            let mut guarantee = i128::from(q.guarantee.amount(id).max(0));
            let mut children_guarantee = 0;
            for &c in &self.children[i] {
                demand += work.claim[c].ceiling;
                children_guarantee += work.guarantee[c];
            }
            guarantee = guarantee.max(children_guarantee);
            let ceiling = match q.capability.limit(id) {
                Some(cap) => demand.min(i128::from(cap.max(0))),
                None => demand,
            };
            work.own_demand[i] = own_demand;
            work.guarantee[i] = guarantee;
            work.claim[i] = Claim {
                weight: i128::from(q.weight.max(1)),
                floor: guarantee.min(ceiling),
                ceiling,
                demand,
            };
        }

        // Split the capacity among the top-level queues, then each share among children.
        let claims: Vec<Claim> = self.roots.iter().map(|&r| work.claim[r]).collect();
        let (alloc, bounds) = water_fill(capacity, &claims);
        for (k, &r) in self.roots.iter().enumerate() {
            work.alloc[r] = alloc[k];
            work.bound[r] = bounds[k];
        }
        for &i in &self.preorder {
            if self.children[i].is_empty() {
                work.own[i] = work.alloc[i];
                continue;
            }
            let own = Claim {
                weight: 1,
                floor: 0,
                ceiling: work.own_demand[i],
                demand: work.own_demand[i],
            };
            let claims: Vec<Claim> = std::iter::once(own)
                .chain(self.children[i].iter().map(|&c| work.claim[c]))
                .collect();
            let (alloc, bounds) = water_fill(work.alloc[i], &claims);
            work.own[i] = alloc[0];
            for (k, &c) in self.children[i].iter().enumerate() {
                work.alloc[c] = alloc[k + 1];
                work.bound[c] = bounds[k + 1];
            }
        }
    }
}

/// Per-resource scratch space, one entry per queue (by sorted index).
struct Work {
    claim: Vec<Claim>,
    guarantee: Vec<i128>,
    own_demand: Vec<i128>,
    alloc: Vec<i128>,
    own: Vec<i128>,
    bound: Vec<Bound>,
}

impl Work {
    fn new(n: usize) -> Self {
        Work {
            claim: vec![Claim::default(); n],
            guarantee: vec![0; n],
            own_demand: vec![0; n],
            alloc: vec![0; n],
            own: vec![0; n],
            bound: vec![Bound::Demand; n],
        }
    }
}

/// One sibling's claim on its level's capacity, for one resource. `0 ≤ floor ≤ ceiling ≤ demand`.
#[derive(Clone, Copy, Debug, Default)]
struct Claim {
    weight: i128,
    /// `min(guarantee, ceiling)`.
    floor: i128,
    /// `min(capability, demand)`.
    ceiling: i128,
    demand: i128,
}

/// Weighted water-filling of `capacity` among `claims` (one level, one resource). Returns each
/// claim's share and what bounded it. Earlier claims win ties on leftover units.
fn water_fill(capacity: i128, claims: &[Claim]) -> (Vec<i128>, Vec<Bound>) {
    let capacity = capacity.max(0);
    let floors: i128 = claims.iter().map(|c| c.floor).sum();
    let mut alloc: Vec<i128> = Vec::with_capacity(claims.len());

    if floors > capacity {
        // Over-guaranteed: scale every floor down in proportion; nothing else is shared.
        alloc.extend(claims.iter().map(|c| c.floor * capacity / floors));
        let given: i128 = alloc.iter().sum();
        // Each floor > 0 lost less than one unit to rounding, and floor × capacity / floors <
        // floor, so one more unit never takes it above its floor.
        let eligible: Vec<usize> = (0..claims.len()).filter(|&i| claims[i].floor > 0).collect();
        hand_out_leftover(capacity - given, eligible, claims, &mut alloc);
        let bounds = claims
            .iter()
            .zip(&alloc)
            .map(|(c, &a)| bound_of(c, a, Bound::OverGuaranteed))
            .collect();
        return (alloc, bounds);
    }

    alloc.extend(claims.iter().map(|c| c.floor));
    let mut rest = capacity - floors;
    // Queues that want more than their floor, those that fill up first (least headroom per
    // unit of weight) first.
    let mut active: Vec<usize> = (0..claims.len())
        .filter(|&i| claims[i].ceiling > claims[i].floor)
        .collect();
    let headroom = |i: usize| claims[i].ceiling - claims[i].floor;
    active.sort_by(|&a, &b| {
        (headroom(a) * claims[b].weight)
            .cmp(&(headroom(b) * claims[a].weight))
            .then(a.cmp(&b))
    });
    let mut weight: i128 = active.iter().map(|&i| claims[i].weight).sum();
    let mut filled = 0;
    for &i in &active {
        // Its part of the rest by weight covers its headroom: it is capped, and what it does
        // not need stays in `rest` for the others. Otherwise neither it nor any queue after it
        // (more headroom per weight, same rest per weight) is capped.
        if headroom(i) * weight > rest * claims[i].weight {
            break;
        }
        alloc[i] += headroom(i);
        rest -= headroom(i);
        weight -= claims[i].weight;
        filled += 1;
    }
    let uncapped = &active[filled..];
    if !uncapped.is_empty() {
        let mut given = 0;
        for &i in uncapped {
            let part = rest * claims[i].weight / weight;
            alloc[i] += part;
            given += part;
        }
        // Fewer units left than uncapped queues; each is strictly below its ceiling by at least
        // one unit (its exact part is below its headroom), so one more never overshoots.
        hand_out_leftover(rest - given, uncapped.to_vec(), claims, &mut alloc);
    }
    let bounds = claims
        .iter()
        .zip(&alloc)
        .map(|(c, &a)| bound_of(c, a, Bound::Weight))
        .collect();
    (alloc, bounds)
}

/// One unit each to `eligible` claims, heaviest first, then in input order.
fn hand_out_leftover(
    mut leftover: i128,
    mut eligible: Vec<usize>,
    claims: &[Claim],
    alloc: &mut [i128],
) {
    eligible.sort_by(|&a, &b| claims[b].weight.cmp(&claims[a].weight).then(a.cmp(&b)));
    for i in eligible {
        if leftover <= 0 {
            break;
        }
        alloc[i] += 1;
        leftover -= 1;
    }
}

fn bound_of(claim: &Claim, alloc: i128, otherwise: Bound) -> Bound {
    if alloc >= claim.ceiling {
        if claim.ceiling >= claim.demand {
            Bound::Demand
        } else {
            Bound::Capability
        }
    } else {
        otherwise
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn queue(name: &str, weight: u32, demand: Resources) -> QueueDemand {
        QueueDemand {
            weight,
            demand,
            ..QueueDemand::new(name)
        }
    }

    fn child(name: &str, parent: &str, weight: u32, demand: Resources) -> QueueDemand {
        QueueDemand {
            parent: Some(parent.into()),
            ..queue(name, weight, demand)
        }
    }

    fn cpu(millis: i64) -> Resources {
        Resources::from([("cpu", millis)])
    }

    fn deserved_cpu(shares: &BTreeMap<String, Share>, name: &str) -> i64 {
        shares[name].deserved.get("cpu")
    }

    #[test]
    fn two_queues_weighted_two_to_one_split_a_contended_cluster_two_to_one() {
        let shares = deserved_shares(
            &cpu(90_000),
            &[queue("a", 2, cpu(1_000_000)), queue("b", 1, cpu(1_000_000))],
        )
        .unwrap();
        assert_eq!(deserved_cpu(&shares, "a"), 60_000);
        assert_eq!(deserved_cpu(&shares, "b"), 30_000);
        assert_eq!(shares["a"].bound(ResourceId::CPU), Some(Bound::Weight));
    }

    #[test]
    fn a_capped_queue_leaves_its_leftover_to_the_others_by_weight() {
        let mut capped = queue("a", 4, cpu(100_000));
        capped.capability = Capability::from([("cpu", 10_000)]);
        let shares = deserved_shares(
            &cpu(100_000),
            &[
                capped,
                queue("b", 2, cpu(100_000)),
                queue("c", 1, cpu(100_000)),
            ],
        )
        .unwrap();
        // Weights alone would give a 57,142; it may hold 10,000, the 90,000 left split 2:1.
        assert_eq!(deserved_cpu(&shares, "a"), 10_000);
        assert_eq!(deserved_cpu(&shares, "b"), 60_000);
        assert_eq!(deserved_cpu(&shares, "c"), 30_000);
        assert_eq!(shares["a"].bound(ResourceId::CPU), Some(Bound::Capability));
        assert_eq!(shares["b"].bound(ResourceId::CPU), Some(Bound::Weight));
    }

    #[test]
    fn a_queue_never_deserves_more_than_it_asks_for_and_the_rest_goes_to_the_others() {
        let shares = deserved_shares(
            &cpu(100_000),
            &[
                queue("small", 10, cpu(5_000)),
                queue("big", 1, cpu(500_000)),
            ],
        )
        .unwrap();
        assert_eq!(deserved_cpu(&shares, "small"), 5_000);
        assert_eq!(deserved_cpu(&shares, "big"), 95_000);
        assert_eq!(shares["small"].bound(ResourceId::CPU), Some(Bound::Demand));
    }

    #[test]
    fn the_cluster_is_not_all_shared_out_when_nobody_asks_for_it() {
        let shares = deserved_shares(
            &cpu(100_000),
            &[queue("a", 1, cpu(10_000)), queue("b", 1, cpu(0))],
        )
        .unwrap();
        assert_eq!(deserved_cpu(&shares, "a"), 10_000);
        assert_eq!(deserved_cpu(&shares, "b"), 0);
    }

    #[test]
    fn an_idle_queue_deserves_nothing_until_its_first_job_which_gets_its_guarantee() {
        let busy = queue("busy", 1, cpu(1_000_000));
        let mut idle = queue("idle", 1, Resources::new());
        idle.guarantee = cpu(20_000);
        let shares = deserved_shares(&cpu(100_000), &[busy.clone(), idle.clone()]).unwrap();
        assert_eq!(deserved_cpu(&shares, "busy"), 100_000);
        assert_eq!(deserved_cpu(&shares, "idle"), 0);

        // Its first job asks for 15 cores: all of it is guaranteed, ahead of the weights.
        idle.demand = cpu(15_000);
        let shares = deserved_shares(&cpu(100_000), &[busy.clone(), idle.clone()]).unwrap();
        assert_eq!(deserved_cpu(&shares, "idle"), 15_000);
        assert_eq!(deserved_cpu(&shares, "busy"), 85_000);

        // A bigger demand: the guarantee first, then half of the rest.
        idle.demand = cpu(1_000_000);
        let shares = deserved_shares(&cpu(100_000), &[busy, idle]).unwrap();
        assert_eq!(deserved_cpu(&shares, "idle"), 20_000 + 40_000);
        assert_eq!(deserved_cpu(&shares, "busy"), 40_000);
    }

    #[test]
    fn guarantees_beyond_the_cluster_are_scaled_down_in_proportion() {
        let mut a = queue("a", 1, cpu(100_000));
        a.guarantee = cpu(60_000);
        let mut b = queue("b", 5, cpu(100_000));
        b.guarantee = cpu(30_000);
        let c = queue("c", 1, cpu(100_000));
        let shares = deserved_shares(&cpu(45_000), &[a, b, c]).unwrap();
        assert_eq!(deserved_cpu(&shares, "a"), 30_000);
        assert_eq!(deserved_cpu(&shares, "b"), 15_000);
        assert_eq!(deserved_cpu(&shares, "c"), 0);
        for name in ["a", "b", "c"] {
            assert_eq!(
                shares[name].bound(ResourceId::CPU),
                Some(Bound::OverGuaranteed)
            );
        }
    }

    #[test]
    fn a_guarantee_above_the_capability_reserves_only_the_capability() {
        let mut a = queue("a", 1, cpu(100_000));
        a.guarantee = cpu(80_000);
        a.capability = Capability::from([("cpu", 30_000)]);
        let shares = deserved_shares(&cpu(100_000), &[a, queue("b", 1, cpu(100_000))]).unwrap();
        assert_eq!(deserved_cpu(&shares, "a"), 30_000);
        assert_eq!(deserved_cpu(&shares, "b"), 70_000);
    }

    #[test]
    fn each_resource_is_shared_on_its_own() {
        let gpu_team = queue(
            "gpu-team",
            1,
            Resources::from([("cpu", 8_000), ("nvidia.com/gpu", 16)]),
        );
        let cpu_team = queue("cpu-team", 1, Resources::from([("cpu", 200_000)]));
        let cluster = Resources::from([("cpu", 100_000), ("nvidia.com/gpu", 8)]);
        let shares = deserved_shares(&cluster, &[gpu_team, cpu_team]).unwrap();
        assert_eq!(shares["gpu-team"].deserved.get("nvidia.com/gpu"), 8);
        assert_eq!(shares["gpu-team"].deserved.get("cpu"), 8_000);
        assert_eq!(shares["cpu-team"].deserved.get("cpu"), 92_000);
        assert_eq!(shares["cpu-team"].deserved.get("nvidia.com/gpu"), 0);
        assert_eq!(
            shares["cpu-team"].bound(ResourceId::GPU),
            Some(Bound::Demand)
        );
    }

    #[test]
    fn leftover_whole_units_go_to_the_heaviest_queue_then_by_name() {
        let gpus = |n| Resources::from([("nvidia.com/gpu", n)]);
        let shares =
            deserved_shares(&gpus(3), &[queue("b", 1, gpus(8)), queue("a", 1, gpus(8))]).unwrap();
        assert_eq!(shares["a"].deserved.get("nvidia.com/gpu"), 2);
        assert_eq!(shares["b"].deserved.get("nvidia.com/gpu"), 1);

        let shares =
            deserved_shares(&gpus(3), &[queue("b", 2, gpus(8)), queue("a", 1, gpus(8))]).unwrap();
        assert_eq!(shares["a"].deserved.get("nvidia.com/gpu"), 1);
        assert_eq!(shares["b"].deserved.get("nvidia.com/gpu"), 2);
    }

    #[test]
    fn child_queues_split_their_parents_share_by_weight() {
        let queues = [
            queue("research", 1, Resources::new()),
            queue("prod", 1, cpu(1_000_000)),
            child("vision", "research", 3, cpu(1_000_000)),
            child("nlp", "research", 1, cpu(1_000_000)),
        ];
        let shares = deserved_shares(&cpu(80_000), &queues).unwrap();
        assert_eq!(deserved_cpu(&shares, "prod"), 40_000);
        assert_eq!(deserved_cpu(&shares, "research"), 40_000);
        assert_eq!(deserved_cpu(&shares, "vision"), 30_000);
        assert_eq!(deserved_cpu(&shares, "nlp"), 10_000);
        assert_eq!(shares["research"].own.get("cpu"), 0);
    }

    #[test]
    fn a_parent_capability_bounds_its_children_together() {
        let mut research = queue("research", 1, Resources::new());
        research.capability = Capability::from([("cpu", 20_000)]);
        let queues = [
            research,
            queue("prod", 1, cpu(1_000_000)),
            child("vision", "research", 1, cpu(1_000_000)),
            child("nlp", "research", 1, cpu(1_000_000)),
        ];
        let shares = deserved_shares(&cpu(100_000), &queues).unwrap();
        assert_eq!(deserved_cpu(&shares, "research"), 20_000);
        assert_eq!(deserved_cpu(&shares, "vision"), 10_000);
        assert_eq!(deserved_cpu(&shares, "nlp"), 10_000);
        assert_eq!(deserved_cpu(&shares, "prod"), 80_000);
        assert_eq!(
            shares["research"].bound(ResourceId::CPU),
            Some(Bound::Capability)
        );
    }

    #[test]
    fn a_parent_does_not_deserve_what_its_capped_children_cannot_use() {
        let mut vision = child("vision", "research", 1, cpu(1_000_000));
        vision.capability = Capability::from([("cpu", 5_000)]);
        let queues = [
            queue("research", 1, Resources::new()),
            queue("prod", 1, cpu(1_000_000)),
            vision,
        ];
        let shares = deserved_shares(&cpu(100_000), &queues).unwrap();
        assert_eq!(deserved_cpu(&shares, "research"), 5_000);
        assert_eq!(deserved_cpu(&shares, "prod"), 95_000);
    }

    #[test]
    fn a_childs_guarantee_is_reserved_at_every_level_above_it() {
        let mut nlp = child("nlp", "research", 1, cpu(30_000));
        nlp.guarantee = cpu(30_000);
        let queues = [
            queue("research", 1, Resources::new()),
            queue("prod", 9, cpu(1_000_000)),
            nlp,
        ];
        let shares = deserved_shares(&cpu(100_000), &queues).unwrap();
        assert_eq!(deserved_cpu(&shares, "nlp"), 30_000);
        assert_eq!(deserved_cpu(&shares, "research"), 30_000);
        assert_eq!(deserved_cpu(&shares, "prod"), 70_000);
    }

    #[test]
    fn a_parents_own_groups_compete_with_its_children_as_one_more_child_of_weight_one() {
        let queues = [
            queue("research", 5, cpu(1_000_000)),
            child("vision", "research", 2, cpu(1_000_000)),
            child("nlp", "research", 1, cpu(1_000_000)),
        ];
        let shares = deserved_shares(&cpu(40_000), &queues).unwrap();
        assert_eq!(deserved_cpu(&shares, "research"), 40_000);
        assert_eq!(shares["research"].own.get("cpu"), 10_000);
        assert_eq!(deserved_cpu(&shares, "vision"), 20_000);
        assert_eq!(deserved_cpu(&shares, "nlp"), 10_000);
        assert_eq!(shares["vision"].own, shares["vision"].deserved);
    }

    #[test]
    fn a_missing_parent_makes_a_top_level_queue_and_says_so() {
        let queues = [
            child("orphan", "gone", 1, cpu(1_000_000)),
            queue("b", 1, cpu(1_000_000)),
        ];
        let shares = deserved_shares(&cpu(10_000), &queues).unwrap();
        assert_eq!(deserved_cpu(&shares, "orphan"), 5_000);
        assert_eq!(
            shares["orphan"].parent_ignored,
            Some(ParentIgnored::Missing)
        );
        assert_eq!(shares["b"].parent_ignored, None);
    }

    #[test]
    fn a_parent_cycle_is_broken_and_every_queue_on_it_reported() {
        let queues = [
            child("a", "b", 1, cpu(1_000_000)),
            child("b", "a", 1, cpu(1_000_000)),
            child("c", "a", 1, cpu(1_000_000)),
            child("self", "self", 1, cpu(1_000_000)),
        ];
        let shares = deserved_shares(&cpu(30_000), &queues).unwrap();
        assert_eq!(shares["a"].parent_ignored, Some(ParentIgnored::Cycle));
        assert_eq!(shares["b"].parent_ignored, Some(ParentIgnored::Cycle));
        assert_eq!(shares["self"].parent_ignored, Some(ParentIgnored::Cycle));
        // c hangs under a, which is now top-level: a, b and self share the cluster.
        assert_eq!(shares["c"].parent_ignored, None);
        assert_eq!(deserved_cpu(&shares, "a"), 10_000);
        assert_eq!(deserved_cpu(&shares, "c"), 5_000);
        assert_eq!(deserved_cpu(&shares, "b"), 10_000);
        assert_eq!(deserved_cpu(&shares, "self"), 10_000);
    }

    #[test]
    fn a_queue_listed_twice_is_an_error() {
        let err =
            deserved_shares(&cpu(1), &[QueueDemand::new("a"), QueueDemand::new("a")]).unwrap_err();
        assert_eq!(err, Error::DuplicateQueue("a".into()));
        assert_eq!(
            err.to_string(),
            "failed to compute deserved shares: queue a is listed more than once"
        );
    }

    #[test]
    fn the_marker_resources_are_never_shared() {
        use crate::model::names::{MANAGED_RESOURCE, PLACEMENT_RESOURCE};
        let demand = Resources::from([
            ("cpu", 1_000),
            (MANAGED_RESOURCE, 3),
            (PLACEMENT_RESOURCE, 1),
        ]);
        let shares = deserved_shares(&cpu(10_000), &[queue("a", 1, demand)]).unwrap();
        assert_eq!(shares["a"].deserved, cpu(1_000));
        assert_eq!(shares["a"].bounds, vec![(ResourceId::CPU, Bound::Demand)]);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        const RESOURCES: [&str; 3] = ["cpu", "memory", "nvidia.com/gpu"];

        fn amounts(max: i64) -> impl Strategy<Value = Resources> {
            prop::collection::vec(0..=max, RESOURCES.len()).prop_map(|v| {
                let mut r = Resources::new();
                for (name, amount) in RESOURCES.iter().zip(v) {
                    r.set(name, amount);
                }
                r
            })
        }

        fn capability(max: i64) -> impl Strategy<Value = Capability> {
            prop::collection::vec(prop::option::of(0..=max), RESOURCES.len()).prop_map(|v| {
                let mut c = Capability::unbounded();
                for (name, limit) in RESOURCES.iter().zip(v) {
                    if let Some(limit) = limit {
                        c.set(name, limit);
                    }
                }
                c
            })
        }

        /// Up to eight queues; with `tree`, some name an earlier queue as parent.
        fn queues(tree: bool) -> impl Strategy<Value = Vec<QueueDemand>> {
            prop::collection::vec(
                (
                    1u32..6,
                    amounts(4_000),
                    capability(3_000),
                    amounts(3_000),
                    0usize..8,
                    prop::bool::weighted(if tree { 0.5 } else { 0.0 }),
                ),
                1..8,
            )
            .prop_map(|specs| {
                specs
                    .into_iter()
                    .enumerate()
                    .map(
                        |(i, (weight, demand, capability, guarantee, p, has_parent))| QueueDemand {
                            name: format!("q{i}"),
                            parent: (has_parent && i > 0).then(|| format!("q{}", p % i)),
                            weight,
                            guarantee,
                            capability,
                            demand,
                        },
                    )
                    .collect()
            })
        }

        fn total<'a>(shares: impl Iterator<Item = &'a Resources>) -> Resources {
            shares.fold(Resources::new(), |mut sum, r| {
                sum.add(r);
                sum
            })
        }

        fn top_level<'a>(
            queues: &'a [QueueDemand],
            shares: &'a BTreeMap<String, Share>,
        ) -> impl Iterator<Item = &'a Resources> {
            queues
                .iter()
                .filter(|q| q.parent.is_none())
                .map(|q| &shares[&q.name].deserved)
        }

        proptest! {
            #[test]
            fn shares_add_up_to_at_most_the_cluster_at_every_level(
                cluster in amounts(10_000),
                queues in queues(true),
            ) {
                let shares = deserved_shares(&cluster, &queues).unwrap();
                let roots = total(top_level(&queues, &shares));
                for name in RESOURCES {
                    prop_assert!(roots.get(name) <= cluster.get(name));
                }
                for parent in &queues {
                    let children = total(
                        queues
                            .iter()
                            .filter(|q| q.parent.as_deref() == Some(&parent.name))
                            .map(|q| &shares[&q.name].deserved),
                    );
                    let split = children.plus(&shares[&parent.name].own);
                    // Nothing is lost between a parent and its children.
                    prop_assert_eq!(&split, &shares[&parent.name].deserved);
                }
            }

            #[test]
            fn no_queue_deserves_more_than_its_capability_or_its_demand(
                cluster in amounts(10_000),
                queues in queues(true),
            ) {
                let shares = deserved_shares(&cluster, &queues).unwrap();
                for q in &queues {
                    let share = &shares[&q.name];
                    for name in RESOURCES {
                        let id = ResourceId::of(name);
                        prop_assert!(share.own.get(name) <= q.demand.get(name));
                        prop_assert!(share.own.get(name) >= 0);
                        if let Some(cap) = q.capability.limit(id) {
                            prop_assert!(share.deserved.get(name) <= cap);
                        }
                    }
                }
            }

            #[test]
            fn a_queue_asking_for_its_guarantee_gets_it_when_guarantees_fit(
                cluster in amounts(10_000),
                queues in queues(false),
            ) {
                let shares = deserved_shares(&cluster, &queues).unwrap();
                for name in RESOURCES {
                    let id = ResourceId::of(name);
                    let floor = |q: &QueueDemand| {
                        let g = q.guarantee.get(name).min(q.demand.get(name));
                        q.capability.limit(id).map_or(g, |cap| g.min(cap))
                    };
                    if queues.iter().map(floor).sum::<i64>() > cluster.get(name) {
                        continue;
                    }
                    for q in &queues {
                        prop_assert!(shares[&q.name].deserved.get(name) >= floor(q));
                    }
                }
            }

            #[test]
            fn raising_a_queues_weight_never_lowers_its_share(
                cluster in amounts(10_000),
                queues in queues(true),
                which in 0usize..8,
                extra in 1u32..10,
            ) {
                let which = which % queues.len();
                let before = deserved_shares(&cluster, &queues).unwrap();
                let mut heavier = queues.clone();
                heavier[which].weight += extra;
                let after = deserved_shares(&cluster, &heavier).unwrap();
                let name = &queues[which].name;
                for r in RESOURCES {
                    prop_assert!(
                        after[name].deserved.get(r) >= before[name].deserved.get(r),
                        "{} {}: {} -> {}", name, r, before[name].deserved.get(r), after[name].deserved.get(r)
                    );
                }
            }

            #[test]
            fn uncapped_queues_wanting_more_than_the_cluster_share_all_of_it(
                cluster in amounts(10_000),
                queues in queues(true),
            ) {
                let queues: Vec<QueueDemand> = queues
                    .into_iter()
                    .map(|q| QueueDemand { capability: Capability::unbounded(), ..q })
                    .collect();
                let shares = deserved_shares(&cluster, &queues).unwrap();
                let roots = total(top_level(&queues, &shares));
                let leaves = total(shares.values().map(|s| &s.own));
                let demand = total(queues.iter().map(|q| &q.demand));
                for name in RESOURCES {
                    if demand.get(name) >= cluster.get(name) {
                        prop_assert_eq!(roots.get(name), cluster.get(name));
                        prop_assert_eq!(leaves.get(name), cluster.get(name));
                    } else {
                        prop_assert_eq!(leaves.get(name), demand.get(name));
                    }
                }
            }

            #[test]
            fn shares_do_not_depend_on_the_order_queues_are_listed_in(
                cluster in amounts(10_000),
                (queues, shuffled) in queues(true)
                    .prop_flat_map(|q| (Just(q.clone()), Just(q).prop_shuffle())),
            ) {
                prop_assert_eq!(
                    deserved_shares(&cluster, &queues).unwrap(),
                    deserved_shares(&cluster, &shuffled).unwrap()
                );
            }
        }
    }

    #[test]
    fn guarantees_larger_than_the_cluster_are_scaled_to_fit_it_together() {
        let huge = Resources::from([("cpu", 1_000_000_000_000_000_000)]);
        let small = Resources::from([("cpu", 10_000)]);
        let capacity = Resources::from([("cpu", 128_000)]);
        let fitted = fitted_guarantees(&[&huge, &small], &[vec![], vec![]], &capacity);
        let total = fitted[0].get("cpu") + fitted[1].get("cpu");
        assert!(total <= 128_000, "{fitted:?}");
        assert!(fitted[0].get("cpu") > 127_000, "{fitted:?}");
    }

    #[test]
    fn guarantees_that_fit_and_children_inside_their_parent_are_left_alone() {
        let parent = Resources::from([("cpu", 60_000)]);
        let child = Resources::from([("cpu", 40_000)]);
        let other = Resources::from([("cpu", 20_000), ("memory", 1 << 30)]);
        let capacity = Resources::from([("cpu", 80_000), ("memory", 1 << 40)]);
        let fitted = fitted_guarantees(
            &[&parent, &child, &other],
            &[vec![], vec![0], vec![]],
            &capacity,
        );
        assert_eq!(fitted, vec![parent, child, other]);
    }
}
