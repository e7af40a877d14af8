//! The admission pass and what follows it:
//! - [`groups`]: what the pass and reclaim read of each group, derived once per snapshot;
//! - [`plan`]: which waiting groups may leave the admission gate now, in fair-share order,
//!   and why each of the others waits; [`room`]: the free room it places them in; [`why`]:
//!   the reasons, with their numbers;
//! - [`hold`]: what a pass leaves in the ledger (the head's reservation, and the [`door`] for
//!   admissions on arrival while nothing waits);
//! - [`reclaim`]: what to evict for the groups that wait only for room.

pub mod door;
pub mod groups;
pub mod hold;
pub mod plan;
pub mod reclaim;
pub mod room;
pub mod why;
