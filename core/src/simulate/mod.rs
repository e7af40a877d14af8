//! What-if simulation: a cluster's work replayed in virtual time through the same code the live
//! process runs: the admission pass, reclaim's plan and what a pass leaves in the ledger
//! ([`crate::admit`]), and, for each released pod, the extender's filter, scores and bind
//! bookkeeping ([`crate::claims`]) standing in for the stock scheduler's cycle. Nothing here
//! decides anything itself: it creates the objects a cluster would see (PodGroups, gated pods),
//! applies what each pass decides, and records when each job waited, started and finished.
//!
//! - [`Setup`] and [`Job`]: what a run starts from (the cluster, the scheduler's settings) and
//!   the work, as plain values (the `gangplank` crate builds them from a configuration's file,
//!   a trace and a recording);
//! - [`engine::run`]: the event loop; [`outcome`]: what it records;
//! - [`summary`]: per-queue figures of an outcome (waits, shares, utilisation, evictions).
//!
//! What is modelled and what is not: `docs/simulate.md`.

pub mod engine;
pub mod outcome;
pub mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::sub_groups::SubGroup;
use crate::model::{Node, Queue, Resources};
use crate::policy::Constraints;

pub use engine::run;
pub use outcome::{JobOutcome, Outcome, Sample};
pub use summary::{LongWait, QueueSummary, Summary, summarise};

/// One unit of work: a gang (a PodGroup and its members) or a lone pod of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Unique within its namespace: the PodGroup's name, and its pods' prefix.
    pub name: String,
    pub namespace: String,
    pub queue: String,
    /// When it is submitted, in milliseconds of virtual time.
    pub arrival_ms: i64,
    /// Each member's requests.
    pub members: Vec<Resources>,
    /// `minMember` of its PodGroup; ignored for a lone pod.
    pub min_member: u32,
    /// A PodGroup and its members; `false`: one pod of a queue in no group.
    pub gang: bool,
    pub priority: i32,
    /// How long its members run once bound, in milliseconds.
    pub runtime_ms: i64,
    /// Each member's own runtime in milliseconds, in `members`' order, where they differ (a
    /// recording's members finish a second or two apart); empty: every member runs
    /// `runtime_ms`.
    pub runtimes_ms: Vec<i64>,
    /// Deleted at this time (in milliseconds) wherever it is (waiting or running), as a user
    /// cancels: a trace's row that was deleted before it ever ran.
    pub deleted_at_ms: Option<i64>,
    /// The PodGroup's expected runtime (what backfill reads), if its owner declares one.
    pub expected_runtime: Option<Duration>,
    /// Its PodGroup's sub-groups (a gang of gangs: whole instances, a minimum of them); empty:
    /// none.
    pub sub_groups: Vec<SubGroup>,
    /// Each member's labels, in `members`' order: what sub-groups split members by. Empty:
    /// none.
    pub labels: Vec<Arc<BTreeMap<String, String>>>,
    /// Where each member may run, in `members`' order (a trace row's `gpu_spec`: nodes of those
    /// GPU models), as the scheduler's filters check it; empty: anywhere.
    pub constraints: Vec<Arc<Constraints>>,
}

/// What one run starts from: a cluster's nodes and queues, how its scheduler places pods and
/// how fast, where virtual time starts and how often it is sampled. A configuration (the
/// `gangplank` crate's) as the engine runs it.
#[derive(Debug, Clone)]
pub struct Setup {
    pub nodes: Vec<Node>,
    pub queues: Vec<Queue>,
    /// How claims are planned and binds held, as `gangplank serve`'s flags set them
    /// (`--placement`, `--max-bind-hold-seconds`, ...): the caller gives serve's defaults and
    /// the what-if's changes.
    pub settings: crate::claims::Settings,
    /// The instant virtual time 0 stands for: the core reads no clock, so the caller gives
    /// the origin of the deadlines the ledger keeps (claims, the head's reservation).
    pub origin: Instant,
    /// How often, in virtual seconds, each queue's allocation and deserved share are sampled.
    pub sample_every: i64,
    /// The scheduler's throughput: at most this many pods placed per virtual second (it
    /// places one pod at a time); `None`: as many as are released.
    pub binds_per_second: Option<u32>,
}

/// The whole second of a time in milliseconds (a [`Job`]'s times), as the core and the
/// [`Outcome`] count time.
pub fn second_of(ms: i64) -> i64 {
    ms.div_euclid(1_000)
}

/// Whole `seconds` in the milliseconds a [`Job`] counts.
pub fn millis_of(seconds: i64) -> i64 {
    seconds.saturating_mul(1_000)
}

impl Job {
    /// Where member `index` may run, if anything limits it.
    pub fn constraints_of(&self, index: usize) -> Option<&Constraints> {
        self.constraints.get(index).map(Arc::as_ref)
    }

    /// How long member `index` runs once bound, in milliseconds.
    pub fn runtime_ms_of(&self, index: usize) -> i64 {
        self.runtimes_ms
            .get(index)
            .copied()
            .unwrap_or(self.runtime_ms)
    }

    /// The whole second of virtual time it is submitted in, as the [`Outcome`] counts time.
    pub fn arrival(&self) -> i64 {
        second_of(self.arrival_ms)
    }

    /// What all its members request together.
    pub fn requests(&self) -> Resources {
        let mut sum = Resources::new();
        for member in &self.members {
            sum.add(member);
        }
        sum
    }
}

#[cfg(test)]
mod tests;
