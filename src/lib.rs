//! Gangplank: gang scheduling, queues and fair share for the stock kube-scheduler.
//!
//! This crate holds the adapters and the process: the watches that feed the cluster model, the
//! extender, the webhooks, the admission loop, the controller, metrics and the servers. The
//! model and every decision live in the `gangplank-core` crate, which knows no Kubernetes or
//! HTTP types. `main.rs` only parses the command line; `docs/DESIGN.md` is the map.

pub mod admission_loop;
pub mod api;
pub mod batch;
pub mod cache;
pub mod cli;
pub mod clock;
pub mod config;
pub mod connections;
pub mod controller;
pub mod crdgen;
pub mod dashboard;
pub mod events;
pub mod extender;
pub mod fence;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod server;
pub mod shutdown;
pub mod telemetry;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod webhooks;
