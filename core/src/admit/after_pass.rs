//! What an admission pass leaves in the ledger: the head's reservation, kept between passes as
//! a claim without a deadline, the groups lent room in it, the groups whose members fill room
//! their `minResources` keep (which may be placed in it too), the door for admissions on
//! arrival ([`super::on_arrival`]), and the claims of gangs admitted into their stand-ins'
//! room ([`crate::model::growth`]). Why the reservation is a claim:
//! [`docs/decisions/admission-pass.md`](../../../docs/decisions/admission-pass.md).

use std::time::Instant;

use crate::model::{Claim, GroupKey, Resources, Slot, State};

use super::plan::{Admission, Decision, Hold};

/// Records `decision` in the ledger, where the previous pass held `before`; `at` is now.
pub fn record(state: &mut State, before: Option<&Hold>, decision: &Decision, at: Instant) {
    if decision.hold.as_ref() != before || !decision.lent.is_empty() {
        hold_room(state, before, decision.hold.as_ref(), &decision.admit, at);
        state.ledger_mut().lend(decision.lent.iter().cloned());
    }
    state
        .ledger_mut()
        .set_keeping(decision.keeping.iter().cloned());
    super::on_arrival::open(state, decision.door.clone(), at);
    for (group, slots) in &decision.stand_in_claims {
        stand_in_claim(state, group, slots, at);
    }
}

/// The claim of a gang admitted into the room of its stand-ins (kept until it is bound):
/// its members are placed there, and no other gang's filter takes that room meanwhile. It
/// lasts the group's `scheduleTimeout`, as any claim for placement.
fn stand_in_claim(state: &mut State, group: &GroupKey, slots: &[(String, Resources)], at: Instant) {
    let Some(timeout) = state
        .group(group)
        .and_then(|g| g.spec.as_deref())
        .map(|spec| spec.schedule_timeout)
    else {
        return;
    };
    if state.ledger().claims().contains_key(group) {
        return;
    }
    let slots = slots
        .iter()
        .map(|(node, requests)| Slot {
            node: node.clone(),
            requests: requests.clone(),
        })
        .collect();
    state.ledger_mut().set_claim(
        group,
        Claim {
            slots,
            deadline: Some(at + timeout),
            lacking: Vec::new(),
        },
    );
}

/// Replaces the claim that holds the head's reservation (`before`) with `now`'s. When the
/// old head is among the groups `admitted` now, its reservation becomes its claim for
/// placement ([`crate::model::LedgerMut::place_reservation`], lasting its `scheduleTimeout` unless a member is
/// filtered) instead of ending.
fn hold_room(
    state: &mut State,
    before: Option<&Hold>,
    now: Option<&Hold>,
    admitted: &[Admission],
    at: Instant,
) {
    let reservation = |s: &State, key| s.ledger().claims().get(key).is_some_and(Claim::reservation);
    if before.map(|h| &h.group) != now.map(|h| &h.group) {
        // Room lent out of the old head's reservation is no longer anyone's to lend.
        state.ledger_mut().clear_lent();
    }
    if let Some(before) = before
        && reservation(state, &before.group)
    {
        let timeout = state
            .group(&before.group)
            .and_then(|g| g.spec.as_deref())
            .map(|spec| spec.schedule_timeout);
        match timeout {
            Some(timeout)
                if admitted
                    .iter()
                    .any(|a| a.group.as_ref() == Some(&before.group)) =>
            {
                state
                    .ledger_mut()
                    .place_reservation(&before.group, at + timeout)
            }
            _ => {
                state.ledger_mut().drop_claim(&before.group);
            }
        }
    }
    if let Some(now) = now
        && !state.ledger().claims().contains_key(&now.group)
    {
        let slots = |per_node: &[(String, Resources)]| {
            per_node
                .iter()
                .map(|(node, requests)| Slot {
                    node: node.clone(),
                    requests: requests.clone(),
                })
                .collect()
        };
        state.ledger_mut().set_claim(
            &now.group,
            Claim {
                slots: slots(&now.nodes),
                deadline: None,
                lacking: slots(&now.lacking),
            },
        );
        state.ledger_mut().fill_lacking(&now.group, &now.seen);
    }
}
