//! The pods of a workload that makes them in stages (a JobSet whose jobs wait for others, a
//! LeaderWorkerSet started `LeaderReady`), as the pod specs it makes them from: read by
//! [`super::workloads`] and [`super::leader_worker_set`], summed into the room kept for them by
//! `crate::cache::convert::stage_requests`.

use serde_json::Value;

/// Each pod spec a workload makes pods from, with how many run from it at once.
pub type Stages<'a> = Vec<(u32, &'a Value)>;
