//! Gang scheduling: all members of a group placed, or none bound.
//!
//! The scheduler places pods one at a time and knows nothing of gangs; Gangplank keeps gangs
//! whole from the extender's seat in two steps:
//! - [`claims`]: at filter time, a gang claims capacity for all the members it still needs
//!   before any member may pass, and other gangs' members cannot use that capacity. This is
//!   what prevents two half-placed gangs from deadlocking each other.
//! - the bind verb acts as the scheduler framework's Permit (`crate::extender::permit`): bind
//!   calls are held until reserved plus bound members reach `minMember`, then all Bindings are
//!   created together; on the gang's timeout every held call is answered with an error, so the
//!   scheduler frees the pods and retries them. No gang is ever bound partially.

pub mod claims;
