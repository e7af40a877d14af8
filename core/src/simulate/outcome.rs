//! What one simulation records: each job's admission, start, end and evictions, the order in
//! which jobs were admitted, and each queue's allocation and deserved share over time.

use std::sync::Arc;

use crate::model::Resources;

/// What happened to one job ([`super::Job`]), in virtual seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOutcome {
    /// When admission first released it.
    pub admitted: Option<i64>,
    /// When it first reached quorum on nodes (a lone pod: was bound).
    pub started: Option<i64>,
    /// When its members finished their runtime.
    pub finished: Option<i64>,
    /// When it was deleted before it finished ([`super::Job::deleted_at`]).
    pub deleted: Option<i64>,
    /// Times reclaim or preemption evicted it (each time it started again from the gate).
    pub evictions: u32,
    /// Its pods evicted, whole or as elastic members, in all.
    pub evicted_pods: u32,
    /// The last reason it waited for, as `gangplank why` words it.
    pub why: Option<String>,
}

impl JobOutcome {
    /// Seconds from `arrival` to its first start, if it started.
    pub fn wait(&self, arrival: i64) -> Option<i64> {
        self.started.map(|s| s - arrival)
    }
}

/// One queue at one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSample {
    pub queue: Arc<str>,
    /// What its groups held.
    pub allocated: Resources,
    /// Its deserved share of the cluster.
    pub deserved: Resources,
    /// Groups left waiting.
    pub waiting: usize,
}

/// The queues as the latest admission pass saw them, and what the cluster's pods used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub at: i64,
    pub queues: Vec<QueueSample>,
    /// What bound pods request, cluster-wide.
    pub used: Resources,
}

/// Everything one run records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// By the index of the job in the input.
    pub jobs: Vec<JobOutcome>,
    /// Job indexes in the order admission first released them.
    pub admission_order: Vec<usize>,
    pub samples: Vec<Sample>,
    /// What the schedulable nodes offer.
    pub capacity: Resources,
    /// Events handled (arrivals, ends, deletions, wake-ups).
    pub events: u64,
    /// Admission passes run.
    pub passes: u64,
    /// Time of the last event: when the last job finished, or nothing more happened.
    pub end: i64,
}
