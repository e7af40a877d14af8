//! Helpers for the core's unit tests: the clock the production callers pass in, and the
//! admission pass on the group facts of a state as the admission loop derives them.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::admit::groups::Groups;
use crate::admit::plan::{Decision, decide};
use crate::model::State;

/// Now, in Unix seconds.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The pass now, with nothing released that the cache still shows gated.
pub fn decide_now(state: &State) -> Decision {
    decide_at(state, &|_| false, unix_now())
}

/// The pass now, counting the pods for which `released(uid)` is true as released.
pub fn decide_after(state: &State, released: &dyn Fn(&str) -> bool) -> Decision {
    decide_at(state, released, unix_now())
}

/// The pass at `now`, counting the pods for which `released(uid)` is true as released.
pub fn decide_at(state: &State, released: &dyn Fn(&str) -> bool, now: i64) -> Decision {
    decide(state, &Groups::of(state, released, now), now)
}
