//! The admission pass: which waiting groups may leave the admission gate now, in fair-share
//! order, and why each of the others waits ([`plan`]); the free room a pass places groups in
//! ([`room`]); the reasons, with their numbers ([`why`]).

pub mod plan;
pub mod room;
pub mod why;
