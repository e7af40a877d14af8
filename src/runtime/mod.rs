//! The process's plumbing, under every adapter and importing none of them: which build this is
//! ([`build`]), the clock ([`clock`]), the metrics catalogue and exporter ([`metrics`]), logging ([`telemetry`]), TLS
//! and its reloads ([`tls`]), the bounds on each port's connections ([`connections`]) and the
//! serving of a port within them ([`port`]), the probes ([`health`]), the Lease election
//! ([`leader`]) and the fence that keeps a replica that no longer leads from writing
//! ([`fence`]), and which parts still run at shutdown ([`shutdown`]). What it needs of the
//! adapters comes in as values or closures (`health::Unsynced`, for one).
//!
//! Each module is also re-exported at the crate's root (`crate::metrics`, ...), where the
//! adapters and the tests name it.

pub mod build;
pub mod clock;
pub mod connections;
pub mod fence;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod port;
pub mod shutdown;
pub mod telemetry;
pub mod tls;
