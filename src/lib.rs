//! Gangplank: gang scheduling, queues and fair share for the stock kube-scheduler.
//!
//! Everything lives in this library so tests and benchmarks reach it; `main.rs` only parses the
//! command line. See `shared/DESIGN.md` for the map; each module's docs say why it exists.

pub mod admission_loop;
pub mod api;
pub mod cache;
pub mod config;
pub mod controller;
pub mod crdgen;
pub mod dashboard;
pub mod events;
pub mod extender;
pub mod health;
pub mod metrics;
pub mod server;
pub mod stores;
pub mod telemetry;
pub mod tls;
pub mod webhooks;
