//! The ledger: what Gangplank decided itself and the API does not show (reservations of pods
//! the scheduler asked to bind, gang claims, groups lent room of the head's reservation, why a
//! gang waits, the door for admissions on arrival and the gangs admitted through it, growths
//! asked and given up), and its write path.
//!
//! Everyone reads it through [`super::State::ledger`] ([`Ledger`]'s accessors); it changes only
//! through [`LedgerMut`], the one split borrow of the state that [`super::State::ledger_mut`]
//! gives: the ledger with the node records whose `reserved` and `claimed` sums its writes keep
//! in step ([`super::nodes::NodeSlot`]), and what those writes read of the mirror (which groups
//! exist, how the cluster grows). Its writers, each through the cache's `LedgerWriter` in the
//! running process: the extender's filter (`crate::claims::filter`: claims, wait reasons), bind
//! and Permit (`crate::claims::binds`: reservations), the claim-expiry timer
//! (`crate::claims::expiry`), the admission loop after each pass (`crate::admit::after_pass`:
//! the head's reservation, lent groups, the door; and the growths asked, refused and given up),
//! the mutating pod webhook (`crate::admit::on_arrival`: arrivals), and the start and end of a
//! leader's term ([`LedgerMut::forget`]).
//!
//! Soft state: a restart loses it and the scheduler's retries and the next admission pass make
//! it again. Its entries end when the mirror shows what they were waiting for: a reserved pod
//! bound or gone, a claimed group gone (`State::apply_pod`, `State::delete_pod_group`, through
//! the same [`LedgerMut`]).

use std::time::Instant;

use rustc_hash::{FxHashMap, FxHashSet};

use super::arrivals::{ARRIVAL_ROOM_KEPT, Arrival, Door};
use super::group::Group;
use super::growth::{Growth, GrowthAsked, GrowthFailed};
use super::nodes::{Nodes, Sum};
use super::objects::{GroupKey, Resources};

/// Gangplank's own decisions, by what they name.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// By pod UID.
    pub(super) reservations: FxHashMap<String, Reservation>,
    pub(super) claims: FxHashMap<GroupKey, Claim>,
    /// Groups the admission pass lent room of the head's reservation (by their expected
    /// runtime): their claims may be planned in the reservation (see [`Claim::reservation`]).
    pub(super) lent: FxHashSet<GroupKey>,
    /// Groups whose `minResources` cover more members than `minMember` and whose members fill
    /// that room (placeholders released, or members released and not placed yet,
    /// [`super::owed`]), as the last admission pass saw them: the pass counted that room as
    /// taken before it made the head's reservation, so their members may be placed in the
    /// reservation too (the room was laid out as pieces of an estimated shape, and the members
    /// may need it on other nodes).
    pub(super) keeping: FxHashSet<GroupKey>,
    /// Why the extender last refused to claim room for a gang (written by
    /// `crate::claims::filter`, cleared when a claim succeeds): the controller shows it in the
    /// PodGroup's `Scheduled` condition while the gang waits.
    pub(super) wait_reasons: FxHashMap<GroupKey, String>,
    /// Room the last admission pass left for admissions on arrival ([`Door`]);
    /// `None` while something waits.
    pub(super) door: Option<Door>,
    /// Gangs admitted on arrival, by group: their later members are created ungated too.
    pub(super) arrivals: FxHashMap<GroupKey, Arrival>,
    /// Members of groups whose admission keeps room for members still to come (admitted
    /// ahead, or on their `minResources`) that the webhook let in ungated, by pod name, with
    /// what they ask and when, until the watch shows them (or [`ARRIVAL_ROOM_KEPT`] passes):
    /// pods created at once all find the same members and room owed, and only as many as it
    /// keeps room for may pass.
    pub(super) ahead_arrivals: FxHashMap<GroupKey, Vec<AheadArrival>>,
    /// Growths the admission loop gave up, by group: the gang waits without asking again until
    /// the record is [`super::growth::Growth::timeout_secs`] old ([`super::growth`]).
    pub(super) growth_failed: FxHashMap<GroupKey, GrowthFailed>,
    /// Growths asked by the last pass, by group (written by the admission loop after each pass).
    pub(super) growth_asked: FxHashMap<GroupKey, GrowthAsked>,
}

impl Ledger {
    /// Reservations, by pod UID.
    pub fn reservations(&self) -> &FxHashMap<String, Reservation> {
        &self.reservations
    }

    /// Gang claims (and the head's reservation), by group.
    pub fn claims(&self) -> &FxHashMap<GroupKey, Claim> {
        &self.claims
    }

    /// Groups lent room of the head's reservation.
    pub fn lent(&self) -> &FxHashSet<GroupKey> {
        &self.lent
    }

    /// Groups whose members fill room their `minResources` keep, as the last pass saw them.
    pub fn keeping(&self) -> &FxHashSet<GroupKey> {
        &self.keeping
    }

    /// Why the extender last refused to claim room for a gang, by group.
    pub fn wait_reasons(&self) -> &FxHashMap<GroupKey, String> {
        &self.wait_reasons
    }

    /// The door for admissions on arrival; `None` while something waits.
    pub fn door(&self) -> Option<&Door> {
        self.door.as_ref()
    }

    /// Gangs admitted on arrival, by group.
    pub fn arrivals(&self) -> &FxHashMap<GroupKey, Arrival> {
        &self.arrivals
    }

    /// Growths given up, by group.
    pub fn growth_failed(&self) -> &FxHashMap<GroupKey, GrowthFailed> {
        &self.growth_failed
    }

    /// Growths asked by the last pass, by group.
    pub fn growth_asked(&self) -> &FxHashMap<GroupKey, GrowthAsked> {
        &self.growth_asked
    }

    /// Members of groups admitted ahead let in ungated and not shown yet, by group.
    pub fn ahead_arrivals(&self) -> &FxHashMap<GroupKey, Vec<AheadArrival>> {
        &self.ahead_arrivals
    }
}

/// A member let in ungated into the room its group's admission keeps, not shown yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AheadArrival {
    pub pod: String,
    pub requests: Resources,
    pub at: Instant,
}

/// A pod the scheduler asked the extender to bind, not yet shown bound by the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub node: String,
    pub requests: Resources,
    pub group: Option<GroupKey>,
}

/// Capacity a gang holds on nodes while its members are being placed: one slot per member
/// still to be placed, each on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claim {
    pub slots: Vec<Slot>,
    /// When the claim lapses unless a member is filtered or reserved again.
    pub deadline: Option<std::time::Instant>,
    /// Of a reservation only: per node, what the head's members assigned there need beyond
    /// what the slots hold. Room that frees on such a node (a pod there finishes or goes)
    /// joins the claim at once, up to this (`State::apply_pod`), so it cannot go to a group
    /// released for room elsewhere before the next admission pass sees it.
    pub lacking: Vec<Slot>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub node: String,
    pub requests: Resources,
}

impl Claim {
    /// A claim without a deadline is the reservation of the group at the head of the
    /// admission line (`crate::admit`), not a gang being placed.
    pub fn reservation(&self) -> bool {
        self.deadline.is_none()
    }

    /// Its deadline has passed at `now` (a reservation has none).
    pub fn expired(&self, now: std::time::Instant) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }

    /// What the claim holds, per node.
    pub fn per_node(&self) -> FxHashMap<&str, Resources> {
        let mut held: FxHashMap<&str, Resources> = FxHashMap::default();
        for slot in &self.slots {
            held.entry(&slot.node).or_default().add(&slot.requests);
        }
        held
    }

    /// What the claim holds on `node`.
    pub fn on(&self, node: &str) -> Resources {
        let mut total = Resources::new();
        for slot in self.slots.iter().filter(|s| s.node == node) {
            total.add(&slot.requests);
        }
        total
    }
}

/// The ledger borrowed to write ([`super::State::ledger_mut`]), with the node records its writes
/// keep in step and what they read of the mirror; every write of the ledger is a method here.
pub struct LedgerMut<'s> {
    ledger: &'s mut Ledger,
    nodes: &'s mut Nodes,
    groups: &'s imbl::OrdMap<GroupKey, Group>,
    growth: Option<&'s Growth>,
}

impl<'s> LedgerMut<'s> {
    pub(super) fn new(
        ledger: &'s mut Ledger,
        nodes: &'s mut Nodes,
        groups: &'s imbl::OrdMap<GroupKey, Group>,
        growth: Option<&'s Growth>,
    ) -> Self {
        LedgerMut {
            ledger,
            nodes,
            groups,
            growth,
        }
    }
    /// Lets another member of the gang `key` in ungated if the gang was admitted on arrival
    /// ([`Arrival::let_in_another`]); `None` when it was not.
    pub fn let_in_another(&mut self, key: &GroupKey, requests: &Resources) -> Option<bool> {
        let arrival = self.ledger.arrivals.get_mut(key)?;
        Some(arrival.let_in_another(requests))
    }

    /// How many members of the group `key` (whose admission keeps room) were let in ungated
    /// within [`ARRIVAL_ROOM_KEPT`] before `now` and are not among the `shown` ones yet, and
    /// what they ask in all; the others are forgotten.
    pub fn recent_ahead_arrivals(
        &mut self,
        key: &GroupKey,
        shown: &[&str],
        now: Instant,
    ) -> (usize, Resources) {
        let recent = self.ledger.ahead_arrivals.entry(key.clone()).or_default();
        recent.retain(|a| {
            now.saturating_duration_since(a.at) < ARRIVAL_ROOM_KEPT
                && !shown.contains(&a.pod.as_str())
        });
        let mut asked = Resources::new();
        recent.iter().for_each(|a| asked.add(&a.requests));
        (recent.len(), asked)
    }

    /// Records that the member `name` of the group `key` (whose admission keeps room), asking
    /// `requests`, was let in ungated.
    pub fn note_ahead_arrival(
        &mut self,
        key: &GroupKey,
        name: &str,
        requests: &Resources,
        now: Instant,
    ) {
        let recent = self.ledger.ahead_arrivals.entry(key.clone()).or_default();
        recent.push(AheadArrival {
            pod: name.to_owned(),
            requests: requests.clone(),
            at: now,
        });
    }

    /// The door for admissions on arrival, to take room from; `None` while something waits.
    pub fn door_mut(self) -> Option<&'s mut Door> {
        self.ledger.door.as_mut()
    }

    /// Records the gang `key` admitted on arrival.
    pub fn note_arrival(&mut self, key: &GroupKey, arrival: Arrival) {
        self.ledger.arrivals.insert(key.clone(), arrival);
    }

    /// Forgets arrivals (on arrival, or of groups admitted ahead) older than
    /// [`ARRIVAL_ROOM_KEPT`] at `now` or whose group is gone, and arrivals on arrival whose
    /// members the model shows, all it was admitted for: from then on a pass counts the members
    /// themselves, and a gang evicted later is not counted again for members that are gone.
    pub fn forget_arrivals_before(&mut self, now: Instant) {
        let groups = self.groups;
        self.ledger.arrivals.retain(|key, a| {
            let Some(group) = groups.get(key) else {
                return false;
            };
            let shown = group
                .members
                .values()
                .filter(|m| m.live && !m.gated)
                .count();
            now.saturating_duration_since(a.at) < ARRIVAL_ROOM_KEPT && shown < a.need.len()
        });
        self.ledger.ahead_arrivals.retain(|key, recent| {
            recent.retain(|a| now.saturating_duration_since(a.at) < ARRIVAL_ROOM_KEPT);
            !recent.is_empty() && groups.contains_key(key)
        });
    }

    /// Records that the growth of the gang `key` was given up, and forgets the records that
    /// are [`super::growth::Growth::timeout_secs`] old at `record.at` or whose group is gone.
    pub fn note_growth_failed(&mut self, key: &GroupKey, record: GrowthFailed) {
        let timeout = self.growth.map_or(0, |g| g.timeout_secs);
        let groups = self.groups;
        let now = record.at;
        self.ledger
            .growth_failed
            .retain(|k, r| now.saturating_sub(r.at) < timeout && groups.contains_key(k));
        self.ledger.growth_failed.insert(key.clone(), record);
    }

    /// Records the growths a pass asked for (`asked`) at `now`: each keeps the time it was
    /// first asked; the others are forgotten.
    pub fn note_growth_asked<'g>(&mut self, asked: impl Iterator<Item = &'g GroupKey>, now: i64) {
        let mut kept = FxHashMap::default();
        for group in asked {
            let record = self
                .ledger
                .growth_asked
                .remove(group)
                .unwrap_or(GrowthAsked {
                    since: now,
                    refused: None,
                });
            kept.insert(group.clone(), record);
        }
        self.ledger.growth_asked = kept;
    }

    /// Records that the API server refused a stand-in of the growing gang `group`, saying
    /// `why`.
    pub fn note_stand_in_refused(&mut self, group: &GroupKey, why: String) {
        if let Some(asked) = self.ledger.growth_asked.get_mut(group) {
            asked.refused = Some(why);
        }
    }

    /// Replaces the door for admissions on arrival.
    pub fn set_door(&mut self, door: Option<Door>) {
        self.ledger.door = door;
    }

    /// Records groups lent room of the head's reservation.
    pub fn lend(&mut self, groups: impl IntoIterator<Item = GroupKey>) {
        self.ledger.lent.extend(groups);
    }

    /// Replaces the groups whose members fill room their `minResources` keep.
    pub fn set_keeping(&mut self, groups: impl IntoIterator<Item = GroupKey>) {
        self.ledger.keeping = groups.into_iter().collect();
    }

    /// Forgets every group lent room: the reservation it came from is no longer the head's.
    pub fn clear_lent(&mut self) {
        self.ledger.lent.clear();
    }

    /// Moves the deadline of the claim of `key`, if it has one: the slots, and so the per-node
    /// sums, stay as they are. Whether it had a claim.
    pub fn extend_claim(&mut self, key: &GroupKey, deadline: Instant) -> bool {
        let Some(claim) = self.ledger.claims.get_mut(key) else {
            return false;
        };
        claim.deadline = Some(deadline);
        true
    }

    /// Records why the gang `key` cannot be placed now (`None`: it can). Only groups the model
    /// knows keep a reason.
    pub fn set_wait_reason(&mut self, key: &GroupKey, why: Option<String>) {
        match why {
            Some(why) if self.groups.contains_key(key) => {
                self.ledger.wait_reasons.insert(key.clone(), why);
            }
            _ => {
                self.ledger.wait_reasons.remove(key);
            }
        }
    }

    /// Records that the scheduler assumed `pod` on `node`. Idempotent.
    pub fn reserve(&mut self, uid: &str, reservation: Reservation) {
        self.release(uid);
        self.nodes
            .add(&reservation.node, Sum::Reserved, &reservation.requests);
        self.ledger.reservations.insert(uid.to_owned(), reservation);
    }

    /// Ends a reservation (bound, failed, timed out or deleted). Idempotent.
    pub fn release(&mut self, uid: &str) -> Option<Reservation> {
        let reservation = self.ledger.reservations.remove(uid)?;
        self.nodes
            .sub(&reservation.node, Sum::Reserved, &reservation.requests);
        Some(reservation)
    }

    /// Replaces the claim of `key` (an empty claim is dropped).
    pub fn set_claim(&mut self, key: &GroupKey, claim: Claim) {
        self.drop_claim(key);
        if claim.slots.is_empty() {
            return;
        }
        for slot in &claim.slots {
            self.nodes.add(&slot.node, Sum::Claimed, &slot.requests);
        }
        self.ledger.claims.insert(key.clone(), claim);
    }

    /// Turns the reservation of `key`, whose group admission is releasing now, into the claim
    /// of a gang being placed (with `deadline`): each node's slot grows by what the head still
    /// lacked there, as far as the node has room nobody else holds. Dropping the reservation
    /// instead would leave its room open, between the release and the gang's first filter, to
    /// pods the same pass released (a pod in no group has no claim of its own to keep it
    /// elsewhere, and the scheduler favours emptier nodes). No-op unless `key` holds a
    /// reservation.
    pub fn place_reservation(&mut self, key: &GroupKey, deadline: std::time::Instant) {
        if !self.ledger.claims.get(key).is_some_and(Claim::reservation) {
            return;
        }
        self.fill_lacking(key, &[]);
        if let Some(claim) = self.ledger.claims.get_mut(key) {
            claim.lacking.clear();
            claim.deadline = Some(deadline);
        }
    }

    /// Grows each slot of the claim of `key` by what the head lacks on its node, as far as the
    /// node has room nobody else holds now; on a node listed in `seen` (what an admission pass
    /// saw free there: allocatable less used and reserved), only by what freed since. What it
    /// still lacks stays in `lacking`. A pass decides on a snapshot, so room that freed on a
    /// reserved node after it (and joined the old claim at once) is taken again as its
    /// decision replaces the claim; room the pass saw free and left out (other queues'
    /// guarantees) stays out.
    pub fn fill_lacking(&mut self, key: &GroupKey, seen: &[(String, Resources)]) {
        let Some(claim) = self.ledger.claims.get(key) else {
            return;
        };
        let mut claim = claim.clone();
        for lack in &mut claim.lacking {
            let Some(slot) = self.nodes.slot(&lack.node) else {
                continue;
            };
            let mut grown = slot.free.positive().min_of(&lack.requests);
            if let Some((_, then)) = seen.iter().find(|(node, _)| *node == lack.node) {
                let Some(node) = slot.node.as_ref() else {
                    continue;
                };
                // What a pod outside any claim could take there now (`State::free_on`).
                let mut free = node.allocatable.clone();
                free.sub(&slot.used);
                free.sub(&slot.reserved);
                let freed = free.minus(then);
                grown = grown.min_of(&freed.positive());
            }
            lack.requests.sub(&grown);
            grow(&mut claim.slots, &lack.node, grown);
        }
        claim.slots.retain(|s| !s.requests.is_empty());
        claim.lacking.retain(|l| !l.requests.is_empty());
        self.set_claim(key, claim);
    }

    /// Adds room `freed` on `node` (a pod there finished or went) to the reservation that
    /// lacks room there, up to what it lacks and what is now free of everything else. Room
    /// that frees because a reservation ends is not handed over: it was promised to the pod
    /// that held it, which the scheduler retries.
    pub(super) fn hand_to_reservation(&mut self, node: &str, freed: &Resources) {
        let Some(slot) = self.nodes.slot(node) else {
            return;
        };
        let Some(allocatable) = slot.node.as_ref().map(|n| &n.allocatable) else {
            return;
        };
        let mut free = allocatable.minus(&slot.used);
        free.sub(&slot.reserved);
        free.sub(&slot.claimed);
        let Some(claim) = self
            .ledger
            .claims
            .values_mut()
            .find(|c| c.lacking.iter().any(|l| l.node == node))
        else {
            return;
        };
        let lack = claim
            .lacking
            .iter_mut()
            .find(|l| l.node == node)
            .expect("found above");
        let taken = free.positive().min_of(freed).min_of(&lack.requests);
        if taken.is_empty() {
            return;
        }
        lack.requests.sub(&taken);
        grow(&mut claim.slots, node, taken.clone());
        self.nodes.add(node, Sum::Claimed, &taken);
    }

    /// Forgets every decision of the ledger (a new leader's term starts from none: the
    /// scheduler retries what an earlier term held, and the next admission pass decides again).
    pub fn forget(&mut self) {
        let claims: Vec<GroupKey> = self.ledger.claims.keys().cloned().collect();
        for key in &claims {
            self.drop_claim(key);
        }
        let reserved: Vec<String> = self.ledger.reservations.keys().cloned().collect();
        for uid in &reserved {
            self.release(uid);
        }
        *self.ledger = Ledger::default();
    }

    /// Drops the claim of `key` (its group is gone, placed, or its claim lapsed); what it held.
    pub fn drop_claim(&mut self, key: &GroupKey) -> Option<Claim> {
        let claim = self.ledger.claims.remove(key)?;
        for slot in &claim.slots {
            self.nodes.sub(&slot.node, Sum::Claimed, &slot.requests);
        }
        Some(claim)
    }
}

/// Adds `by` to the slot on `node`, or a new slot there.
fn grow(slots: &mut Vec<Slot>, node: &str, by: Resources) {
    match slots.iter_mut().find(|s| s.node == node) {
        Some(slot) => slot.requests.add(&by),
        None => slots.push(Slot {
            node: node.to_owned(),
            requests: by,
        }),
    }
}
