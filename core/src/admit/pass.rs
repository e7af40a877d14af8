//! One admission pass, as the admission loop runs it on a snapshot and the simulator on its
//! virtual cluster: the group facts of the state, the decision on them, and reclaim's plan
//! after it. What follows a pass (the ledger's record, the releases, the evictions) is each
//! caller's own: the loop writes to the API server, the simulator to its model.

use std::time::Duration;

use super::groups::{Groups, Unshown};
use super::plan::{self, Decision};
use super::reclaim::{self, ReclaimPlan};
use crate::model::{GroupKey, State};

/// Shortest time between two passes, however often the cluster changes: the admission loop
/// gathers what changed meanwhile into the next pass, and the simulator's engine runs its
/// passes on the same cadence.
pub const MIN_PASS_INTERVAL: Duration = Duration::from_millis(100);

/// What reclaim must leave alone: pods whose eviction was requested (`evicting(uid)`) and
/// gangs left alone for now (`refused(group)`).
#[derive(Clone, Copy)]
pub struct Evicting<'a> {
    pub evicting: &'a dyn Fn(&str) -> bool,
    pub refused: &'a dyn Fn(&GroupKey) -> bool,
}

impl Evicting<'_> {
    /// Nothing being evicted or left alone (the simulator evicts at once).
    pub fn none() -> Evicting<'static> {
        Evicting {
            evicting: &|_| false,
            refused: &|_| false,
        }
    }
}

/// A pass's decision and reclaim's plan after it.
pub struct Passed {
    pub decision: Decision,
    pub reclaims: ReclaimPlan,
}

/// One pass over `state` at `now` (Unix seconds), counting what the caller wrote and the state
/// does not show yet (`unshown`).
pub fn pass(state: &State, unshown: Unshown<'_>, evicting: Evicting<'_>, now: i64) -> Passed {
    let groups = Groups::of(state, unshown, now);
    let decision = plan::decide(state, &groups, now);
    let reclaims = reclaim::plan(
        state,
        &groups,
        &decision,
        evicting.evicting,
        evicting.refused,
    );
    Passed { decision, reclaims }
}
