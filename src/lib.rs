//! Gangplank: gang scheduling, queues and fair share for the stock kube-scheduler.
//!
//! This crate holds the adapters and the process: the watches that feed the cluster model, the
//! extender, the webhooks, the admission loop, the controller, and the process's plumbing under
//! them all ([`runtime`]: metrics, probes, TLS, the servers' bounds, the Lease). The
//! model and every decision live in the `gangplank-core` crate, which knows no Kubernetes or
//! HTTP types. `main.rs` only parses the command line; `docs/DESIGN.md` is the map.

pub mod admission_loop;
pub mod api;
pub mod batch;
pub mod cache;
pub mod cli;
pub mod config;
pub mod controller;
pub mod crdgen;
pub mod dashboard;
pub mod events;
pub mod extender;
pub mod multikueue;
pub mod runtime;
pub mod server;
pub mod simulate;
#[cfg(test)]
mod testing;
pub mod webhooks;

// The runtime's modules where the adapters and the tests name them.
pub use runtime::{
    build, clock, connections, fence, health, leader, metrics, shutdown, telemetry, tls,
};
