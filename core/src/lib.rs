//! Gangplank's core: the cluster model and every scheduling decision, as plain Rust.
//!
//! Nothing here knows Kubernetes objects, HTTP, locks or an async runtime; this crate does not
//! depend on kube, k8s-openapi, axum or tokio, so the compiler keeps it that way. The adapters in
//! the `gangplank` crate translate watch events into [`model`] values and the decisions back into
//! API writes and extender answers.
//!
//! - [`model`]: nodes, pods, groups, queues and resources; [`model::State`] is the cluster as
//!   the watches last saw it plus what Gangplank itself holds (claims, reservations).
//! - [`policy`]: fair share, queue order, node fit and scores, preemption and reclaim.
//! - [`admit`]: the admission pass: which waiting groups may start now, and why the others wait.
//! - [`limits`]: the largest numbers accepted from users' objects.
//! - [`claims`]: the capacity a gang claims at filter time, so two half-placed gangs never
//!   deadlock.
//! - [`simulate`]: a cluster's work replayed through all of the above in virtual time.

pub mod admit;
pub mod claims;
pub mod limits;
pub mod model;
pub mod policy;
pub mod simulate;
#[cfg(test)]
mod testing;
