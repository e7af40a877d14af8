//! Phase 3's running state: one [`Pass`] tries each group, in the order [`super::order`] picks,
//! against its queue's (and its parents') capability, fair share and the free room, reserving
//! room for the head of the line and lending it to groups that end before the head could start.
//!
//! Elastic members (beyond `minMember` of a gang that has quorum) are tried after every group
//! short of its quorum, and get no room while a gang waits for room that the running elastic
//! members hold (`Pass::yielding`): reclaim's elastic yield evicts those for it, and their
//! owner's replacements must not take the room they free.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::backfill;
use super::candidate::Candidate;
use super::collect::Book;
use super::decision::Growing;
use super::share::Shares;
use crate::admit::free_room::{Labelled, Room};
use crate::admit::why::Why;
use crate::model::growth::placed_stand_ins;
use crate::model::{GroupKey, Queue, Resources, State};
use crate::policy::fair_share;
use crate::policy::queue_order::DominantShare;

/// A dominant share of exactly the deserved share.
pub(super) const FAIR: DominantShare = DominantShare {
    allocated: 1,
    deserved: 1,
    resource: None,
};

/// The admit phase's running state.
pub(super) struct Pass<'s> {
    pub(super) state: &'s State,
    pub(super) now: i64,
    pub(super) room: Room<'s>,
    /// Queues by slot (name order).
    pub(super) queues: Vec<&'s Queue>,
    /// Their names, shared by the reasons and room waits of their groups.
    pub(super) names: Vec<Arc<str>>,
    /// Per queue slot: what it holds, this pass's admissions included.
    pub(super) held: Vec<Resources>,
    /// Per queue slot: its guarantee as the pass honours it (see [`super::QueueReport::guarantee`]).
    pub(super) guarantees: Vec<Resources>,
    /// Per queue slot: the slots of its parent, grandparent, ... (see [`ancestry`]).
    pub(super) ancestors: Vec<Vec<usize>>,
    /// Per queue slot: what it and every queue below it hold, this pass's admissions
    /// included: what a parent's capability bounds.
    pub(super) subtree: Vec<Resources>,
    /// The head, and whether it is overdue.
    pub(super) head: Option<(&'s GroupKey, bool)>,
    /// When the head could start at the earliest (Unix seconds), once asked.
    pub(super) shadow: Option<i64>,
    pub(super) admitted: Vec<usize>,
    /// Those of `admitted` placed in the head's reservation.
    pub(super) lent: Vec<usize>,
    /// Per admitted group with a topology: the domain chosen for it, as (label, value) pairs
    /// its members' `nodeSelector`s gain.
    pub(super) domains: FxHashMap<usize, Vec<(&'s str, &'s str)>>,
    /// Per admitted gang whose instances each keep to a domain: per instance of
    /// [`Candidate::instance_levels`] released, its domain (`None`: no level).
    pub(super) instance_domains: FxHashMap<usize, Vec<Option<Labelled<'s>>>>,
    /// The first queue below its fair share whose group this pass left waiting for room that
    /// reclaim could free (see `reclaimable`): while there is one, queues at or above their
    /// share admit nothing (what they took, reclaim would take back for it).
    pub(super) starved: Option<usize>,
    /// What queues hold above their deserved shares at the start of the pass: the most that
    /// reclaim could free.
    pub(super) reclaimable: Resources,
    /// Per admitted candidate of extra members only (its gang has quorum): how many of its
    /// gated members, in order, fit and are released.
    pub(super) extras: FxHashMap<usize, usize>,
    /// The first gang left waiting for room that would fit if the running elastic members were
    /// gone (by the sum, then node by node): while there is one, no elastic member is released.
    pub(super) yielding: Option<GroupKey>,
    /// Per queue slot: one of its gangs was checked for [`Pass::yielding`] (one per queue, as
    /// reclaim searches victims for one group of a queue per pass).
    yield_checked: Vec<bool>,
    /// What running elastic members hold, by node name, and in all ([`super::collect::Book`]).
    elastic_on: FxHashMap<&'s str, Resources>,
    elastic: Resources,
    /// Released elastic members not placed yet ([`super::collect::Book::beyond_quorum`]),
    /// until the first elastic candidate takes their room: gangs' minimums may use it, further
    /// elastic members may not. `None` once taken.
    pub(super) elastic_in_flight: Option<Vec<&'s Resources>>,
    /// Growth asked in this pass ([`super::growth`]).
    pub(super) growing: Growing,
}

impl<'s> Pass<'s> {
    /// The pass over `book`'s candidates, every queue starting from what it holds.
    pub(super) fn new(state: &'s State, book: &Book<'s>, shares: &Shares, now: i64) -> Self {
        let by_slot: Vec<&Queue> = shares
            .queues
            .keys()
            .map(|n| state.queues()[n].as_ref())
            .collect();
        let held: Vec<Resources> = shares
            .queues
            .values()
            .map(|r| r.allocated.clone())
            .collect();
        let ancestors = ancestry(&by_slot);
        let by_slot_len = by_slot.len();
        let guarantees = fair_share::fitted_guarantees(
            &by_slot.iter().map(|q| &q.guarantee).collect::<Vec<_>>(),
            &ancestors,
            &shares.capacity,
        );
        let mut room = Room::new(state, &book.in_flight, by_slot.len());
        let stand_ins: Vec<(&str, &Resources)> =
            placed_stand_ins(state.stand_ins().values().flat_map(|pods| pods.values())).collect();
        room.hold_in_flight(&book.in_flight_members, &stand_ins, &reserved_before(state));
        for (slot, guarantee) in guarantees.iter().enumerate() {
            room.set_unused_guarantee(slot, guarantee, &held[slot]);
        }
        let mut subtree = held.clone();
        for (slot, parents) in ancestors.iter().enumerate() {
            for &p in parents {
                subtree[p].add(&held[slot]);
            }
        }
        let mut reclaimable = Resources::new();
        for report in shares.queues.values() {
            reclaimable.add(&report.allocated.minus(&report.deserved).positive());
        }
        Pass {
            state,
            now,
            room,
            queues: by_slot,
            names: shares
                .queues
                .keys()
                .map(|n| Arc::from(n.as_str()))
                .collect(),
            held,
            guarantees,
            ancestors,
            subtree,
            head: None,
            shadow: None,
            admitted: Vec::new(),
            lent: Vec::new(),
            domains: FxHashMap::default(),
            instance_domains: FxHashMap::default(),
            starved: None,
            reclaimable,
            extras: FxHashMap::default(),
            yielding: None,
            yield_checked: vec![false; by_slot_len],
            elastic_on: book.elastic_on.clone(),
            elastic: book.elastic.clone(),
            elastic_in_flight: Some(book.beyond_quorum.clone()),
            growing: Growing {
                before: state
                    .stand_ins()
                    .keys()
                    .chain(state.ledger().growth_asked().keys())
                    .collect::<rustc_hash::FxHashSet<_>>()
                    .len(),
                ..Growing::default()
            },
        }
    }

    /// Admits candidate `i` of queue `slot` if it may and fits, or says why not. `share` is
    /// its queue's dominant share when it was picked (`None` for an overdue group); `overdue`
    /// is `(waited, maxWait)` for one.
    #[expect(
        clippy::result_large_err,
        reason = "refusal is the common outcome and its reason is kept: boxing would allocate once per waiting group"
    )]
    pub(super) fn consider(
        &mut self,
        i: usize,
        c: &Candidate<'s>,
        slot: usize,
        share: Option<DominantShare>,
        overdue: Option<(i64, i64)>,
    ) -> Result<(), Why> {
        let queue = self.queues[slot];
        if let Some(why) = over_capability(queue, &self.held[slot], &c.requests) {
            return Err(why);
        }
        for &p in &self.ancestors[slot] {
            if let Some(why) = over_capability(self.queues[p], &self.subtree[p], &c.requests) {
                return Err(why);
            }
        }
        if c.follows_release {
            self.admitted(i, c, slot);
            return Ok(());
        }
        if let (Some(share), Some(starved)) = (share, self.starved)
            && share >= FAIR
            && starved != slot
        {
            return Err(Why::Yields {
                queue: self.names[slot].clone(),
                share,
                starved: self.names[starved].clone(),
            });
        }
        let elastic_only = c.missing == 0 && c.group.is_some();
        if elastic_only && let Some(group) = &self.yielding {
            return Err(Why::ElasticYields {
                group: group.clone(),
            });
        }
        // Whether reclaim could make room for it, judged on the room before this candidate
        // takes any of it for a reservation.
        let reclaim_helps = share.is_some_and(|share| share < FAIR)
            && self.starved.is_none()
            && c.needed()
                .fits_in(&self.room.available_to(slot).plus(&self.reclaimable));
        // Whether the elastic members' room could: checked as reclaim_helps, and then node by
        // node once it is refused.
        let elastic_helps = !elastic_only
            && self.yielding.is_none()
            && !self.yield_checked[slot]
            && !self.elastic.is_empty()
            && c.needed()
                .fits_in(&self.room.available_to(slot).plus(&self.elastic));
        let lent = self.lend_stand_ins(c);
        let refusal = self.place(i, c, slot, share, overdue);
        if refusal.is_err() {
            self.take_back(&lent);
        }
        if elastic_helps
            && let Err(why) = &refusal
            && why.reason().short_of_room()
        {
            self.yield_checked[slot] = true;
            let head = self
                .head
                .is_some_and(|(head, _)| c.group.is_some_and(|g| g == head));
            if self
                .room
                .fits_with(&c.need().collect::<Vec<_>>(), &self.elastic_on, head)
            {
                self.yielding = Some(c.group_key());
            }
        }
        if reclaim_helps
            && refusal
                .as_ref()
                .is_err_and(|why| why.reason().short_of_room())
        {
            self.starved = Some(slot);
            // The head's lacking room comes back as soon as reclaim's evictions are done, not
            // when what runs there was expected to end: none of it may be lent.
            if self.head.is_some_and(|(head, _)| c.group == Some(head)) {
                self.shadow = Some(self.now);
            }
        }
        refusal
    }

    /// The rest of [`Pass::consider`]: room for candidate `i`, a reservation, or why not.
    #[expect(
        clippy::result_large_err,
        reason = "as for consider: the refusal's reason is kept"
    )]
    fn place(
        &mut self,
        i: usize,
        c: &Candidate<'s>,
        slot: usize,
        share: Option<DominantShare>,
        overdue: Option<(i64, i64)>,
    ) -> Result<(), Why> {
        let required = c.topology.as_ref().filter(|w| w.levels.required);
        if c.missing == 0 && required.is_none() {
            return self.place_extras(i, c, slot);
        }
        // No domain to place it in, now or after anything finishes: it must not head the line.
        if let Some(w) = required
            && let Err(member) = self.room.domain_could_hold(
                &c.need().collect::<Vec<_>>(),
                w.levels.widest(),
                &w.pinned,
            )
        {
            return Err(Why::NoDomain {
                key: w.levels.widest().join(" and "),
                pinned: w.pinned(),
                member,
            });
        }
        if let Some(why) = self.an_instance_never_fits(c) {
            return Err(why);
        }
        let needed = c.needed();
        let available = self.room.available_to(slot);
        // Why it does not fit the free room, built only once the pass knows it waits (moving
        // what it reports rather than copying it for every waiting group).
        let member = if !needed.fits_in(&available) {
            None
        } else {
            match self.fit_now(i, c) {
                Ok(()) => {
                    self.admitted(i, c, slot);
                    return Ok(());
                }
                Err(why) => Some(why),
            }
        };
        if let Some(why) = self.growth_wait(c, slot, || {
            refused(needed.clone(), available.clone(), member.clone())
        }) {
            return Err(why);
        }
        if self.head.is_none()
            && let Some(group) = c.group
            && self
                .room
                .reserve(&Pass::reserved_parts(c, required), &available, &|node| {
                    held_before(self.state, group, node)
                })
        {
            self.head = Some((group, overdue.is_some()));
            return Err(Why::Reserved {
                overdue,
                nodes: self.room.held.len(),
                held: self.room.held_total.clone(),
                room: Box::new(refused(needed, available, member)),
            });
        }
        if let Some((head, _)) = self.head
            && needed.fits_in(&available.plus(&self.room.held_total))
        {
            // A gang whose instances keep to domains is placed instance by instance
            // (`fit_instances`), never into the reservation.
            if let Some(runtime) = c.expected_runtime
                && c.instance_levels.iter().all(|l| l.keys.is_empty())
                && self.now.saturating_add(runtime) <= self.shadow()
                && let Ok(domain) = self.room.place_in_reservation(
                    &c.need().collect::<Vec<_>>(),
                    required.map(|w| (w.levels.widest(), w.pinned.as_slice())),
                )
            {
                if let Some(domain) = domain {
                    self.domains.insert(i, domain);
                }
                self.admitted(i, c, slot);
                self.lent.push(i);
                return Ok(());
            }
            return Err(Why::Behind {
                head: head.clone(),
                held: self.room.held_total.clone(),
                room: Box::new(refused(needed, available, member)),
            });
        }
        let refused = refused(needed, available, member);
        match share {
            Some(share) if share >= FAIR => Err(Why::OverShare {
                queue: self.names[slot].clone(),
                share,
                room: Box::new(refused),
            }),
            _ => Err(refused),
        }
    }

    /// Places what candidate `i` needs for quorum in the free room as its topology asks (one
    /// domain for the gang, or for each instance), recording the domains; else why not.
    #[expect(
        clippy::result_large_err,
        reason = "as for consider: the refusal's reason is kept"
    )]
    fn fit_now(&mut self, i: usize, c: &Candidate<'s>) -> Result<(), Why> {
        let need: Vec<&Resources> = c.need().collect();
        let Some(w) = &c.topology else {
            if !c.instance_levels.is_empty() {
                return self.fit_instances(i, c);
            }
            return self
                .room
                .place(&need)
                .map_err(|member| Why::NoNode { member });
        };
        let mut tried = Vec::with_capacity(w.levels.tiers.len());
        for keys in &w.levels.tiers {
            match self.room.place_in_domain(&need, keys, &w.pinned) {
                Ok(domain) => {
                    self.domains.insert(i, domain);
                    return Ok(());
                }
                Err(level) => tried.push(level),
            }
        }
        if w.levels.required {
            return Err(Why::NoDomainRoom {
                tried,
                pinned: w.pinned(),
            });
        }
        self.room
            .place(&need)
            .map_err(|member| Why::NoNode { member })
    }

    /// Extra members of a gang that has quorum: as many of them, in order, as fit the free
    /// room (each on some node) are released, a gang of sub-groups' whole instances at a
    /// time ([`Candidate::instances`]); they never head the line. Released all at once
    /// without room, they would race in the scheduler with gangs admitted for that room.
    #[expect(
        clippy::result_large_err,
        reason = "as for consider: the refusal's reason is kept"
    )]
    fn place_extras(&mut self, i: usize, c: &Candidate<'s>, slot: usize) -> Result<(), Why> {
        if let Some(members) = self.elastic_in_flight.take() {
            self.room.hold_elastic_in_flight(&members);
        }
        let available = self.room.available_to(slot);
        let mut taken = Resources::new();
        let mut released = 0;
        // Whole instances of a gang of sub-groups, else one member at a time.
        let ones;
        let units: &[usize] = if c.instances.is_empty() {
            ones = vec![1; c.gated.len()];
            &ones
        } else {
            &c.instances
        };
        let mut domains = Vec::new();
        for (n, &unit) in units.iter().enumerate() {
            let members = &c.gated[released..released + unit];
            let need: Vec<&Resources> = members.iter().map(|m| &m.requests).collect();
            let mut with = taken.clone();
            need.iter().for_each(|r| with.add(r));
            if !with.fits_in(&available) {
                break;
            }
            let Ok(domain) = self.place_instance(&need, c.instance_levels.get(n)) else {
                break;
            };
            domains.push(domain);
            taken = with;
            released += unit;
        }
        if !c.instance_levels.is_empty() {
            self.instance_domains.insert(i, domains);
        }
        if released == 0 {
            let first = c
                .gated
                .first()
                .map(|m| m.requests.clone())
                .unwrap_or_default();
            return Err(refused(
                first.clone(),
                available,
                Some(Why::NoNode { member: first }),
            ));
        }
        self.extras.insert(i, released);
        self.admitted_with(i, slot, &taken);
        Ok(())
    }

    fn admitted(&mut self, i: usize, c: &Candidate<'s>, slot: usize) {
        self.admitted_with(i, slot, &c.requests);
    }

    /// Records candidate `i` of queue `slot` admitted, holding `requests`.
    fn admitted_with(&mut self, i: usize, slot: usize, requests: &Resources) {
        self.hold_quota(slot, requests);
        self.room
            .set_unused_guarantee(slot, &self.guarantees[slot], &self.held[slot]);
        self.admitted.push(i);
    }

    /// Counts `requests` as held by queue `slot` and its ancestors.
    pub(super) fn hold_quota(&mut self, slot: usize, requests: &Resources) {
        self.held[slot].add(requests);
        for &p in &self.ancestors[slot] {
            self.subtree[p].add(requests);
        }
    }

    /// When the head could start at the earliest (see the module docs), computed once.
    fn shadow(&mut self) -> i64 {
        if let Some(at) = self.shadow {
            return at;
        }
        let at = backfill::shadow_time(self.state, &self.room, self.now);
        self.shadow = Some(at);
        at
    }
}

/// Why a group does not fit the free room: the sum of what it `needed` exceeds what was
/// `available` to it, or else why its members could not be `placed` (no node, no domain).
fn refused(needed: Resources, available: Resources, placed: Option<Why>) -> Why {
    placed.unwrap_or(Why::Room { needed, available })
}

/// Whether `group` held room on `node` as the head of the line after the previous pass (the
/// loop keeps a head's reservation as a claim without a deadline, see [`super`]).
fn held_before(state: &State, group: &GroupKey, node: &str) -> bool {
    state
        .ledger()
        .claims()
        .get(group)
        .is_some_and(|c| c.reservation() && c.slots.iter().any(|s| s.node == node))
}

/// The nodes on which the head of the line held room after the previous pass.
fn reserved_before(state: &State) -> FxHashSet<&str> {
    state
        .ledger()
        .claims()
        .values()
        .filter(|c| c.reservation())
        .flat_map(|c| c.slots.iter().map(|s| s.node.as_str()))
        .collect()
}

/// Per queue (by slot): the slots of its ancestors, nearest first. A parent that does not
/// exist ends the chain, and so does a cycle (which the webhook refuses).
fn ancestry(queues: &[&Queue]) -> Vec<Vec<usize>> {
    let slot_of: FxHashMap<&str, usize> = queues
        .iter()
        .enumerate()
        .map(|(slot, q)| (q.name.as_str(), slot))
        .collect();
    queues
        .iter()
        .enumerate()
        .map(|(slot, q)| {
            let mut chain: Vec<usize> = Vec::new();
            let mut parent = q.parent.as_deref();
            while let Some(&p) = parent.and_then(|name| slot_of.get(name)) {
                if p == slot || chain.contains(&p) {
                    break;
                }
                chain.push(p);
                parent = queues[p].parent.as_deref();
            }
            chain
        })
        .collect()
}

/// The capability bounds `queue` would exceed, holding `holds`, by taking `requests`.
fn over_capability(queue: &Queue, holds: &Resources, requests: &Resources) -> Option<Why> {
    let over: Vec<_> = queue
        .capability
        .iter()
        .filter(|(id, limit)| holds.amount(*id).saturating_add(requests.amount(*id)) > *limit)
        .map(|(id, limit)| (id, holds.amount(id), requests.amount(id), limit))
        .collect();
    (!over.is_empty()).then(|| Why::Capability {
        queue: queue.name.clone(),
        over,
    })
}
