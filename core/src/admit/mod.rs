//! The admission pass and what follows it:
//! - [`pass()`]: one pass, as the admission loop and the simulator both run it;
//! - [`groups`]: what the pass and reclaim read of each group, derived once per snapshot;
//! - [`kept`]: the admission loop's record of the admissions with room kept for members to
//!   come that it made, which the pass counts until the snapshot shows them;
//! - [`plan`]: which waiting groups may leave the admission gate now, in fair-share order,
//!   and why each of the others waits; [`free_room`]: the free room it places them in;
//!   [`why`]: the reasons, with their numbers;
//! - [`after_pass`]: what a pass leaves in the ledger (the head's reservation, the groups lent
//!   room in it, and the door for admissions on arrival while nothing waits);
//! - [`on_arrival`]: admission on arrival, through that door;
//! - [`reclaim`]: what to evict for the groups that wait only for room.

pub mod after_pass;
pub mod free_room;
pub mod groups;
pub mod kept;
pub mod on_arrival;
mod pass;
pub mod plan;
pub mod reclaim;
pub mod why;

pub use pass::{Evicting, MIN_PASS_INTERVAL, Passed, pass};
