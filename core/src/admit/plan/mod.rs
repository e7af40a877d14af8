//! The admission pass ([`decide`]): which waiting groups leave the admission gate now, in
//! fair-share order, and why each of the others waits ([`Why`]); a pure function of the state,
//! the group facts derived from it and the time. One file per phase:
//! - `collect`: the waiting groups and what every queue holds;
//! - `share`: each queue's deserved share of the cluster;
//! - `order`: overdue groups first, then weighted DRF, each group tried by the
//!   `pass` against capabilities, fair share and free room (reserving room for
//!   the head of the line, lending it by `backfill` shadow time), and on a cluster that can
//!   grow asking for room with stand-in pods (`growth`), a gang's instances each in a domain of
//!   their own (`instances`);
//! - `report`: the [`Decision`] the pass leaves (`decision` holds its types).
//!
//! The phases, the backfill reservation, expected runtimes, `maxWaitSeconds` and their cost are
//! explained in `docs/decisions/admission-pass.md`.

mod backfill;
mod candidate;
mod collect;
mod decision;
mod growth;
mod instances;
mod order;
mod pass;
mod report;
mod share;
#[cfg(test)]
mod tests;

pub use super::why::{Reason, Why};
pub use decision::{
    Admission, Decision, GrowthAsk, Hold, PodRef, QueueReport, RoomWait, Waiting, Within,
};

use super::groups::Groups;
use crate::model::State;

/// Decides which gated pods to release at `now` (Unix seconds), on the group facts of `state`
/// (derived once per snapshot and shared with reclaim's plan).
pub fn decide<'s>(state: &'s State, groups: &Groups<'s>, now: i64) -> Decision {
    let mut book = collect::collect(state, groups);
    let shares = share::share(state, &mut book);
    let mut pass = pass::Pass::new(state, &book, &shares, now);
    let waits = order::order(&mut pass, &book, &shares);
    report::report(pass, book, shares, waits)
}
