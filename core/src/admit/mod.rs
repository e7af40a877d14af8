//! The admission pass: which waiting groups may leave the admission gate now, in fair-share
//! order, and why each of the others waits ([`plan`]); what it leaves in the ledger ([`hold`]); the free room a pass places groups in
//! ([`room`]); the reasons, with their numbers ([`why`]); what to evict for the groups that
//! wait only for room ([`reclaim`]).

pub mod hold;
pub mod plan;
pub mod reclaim;
pub mod room;
pub mod why;
