//! The figures a platform team compares between configurations, from one [`Outcome`]: per
//! queue, waits (p50, p90, p99), jobs finished, evictions and the share held against the share
//! deserved; cluster-wide, the makespan and the utilisation of each resource; and the jobs that
//! waited longest, with the last reason they waited for.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Job;
use super::outcome::Outcome;

/// One queue's figures; waits in seconds from arrival to start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSummary {
    pub queue: String,
    pub jobs: usize,
    pub started: usize,
    pub finished: usize,
    /// Deleted before they started (a trace's cancelled rows).
    pub withdrawn: usize,
    /// Neither started nor deleted when the run ended.
    pub never_started: usize,
    pub wait_p50_seconds: Option<i64>,
    pub wait_p90_seconds: Option<i64>,
    pub wait_p99_seconds: Option<i64>,
    pub evictions: u32,
    /// Over the samples, time-weighted: what it held of its deserved share, by its dominant
    /// resource (allocated / deserved, the largest over the resources it deserves any of).
    pub share_held: Option<f64>,
}

/// One job among the longest waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LongWait {
    /// Its index in the input.
    #[serde(skip)]
    pub index: usize,
    /// `namespace/name`.
    pub job: String,
    pub queue: String,
    /// To the end of the run for a job that never started.
    pub wait_seconds: i64,
    pub started: bool,
    pub why: Option<String>,
}

/// Everything compared between configurations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub queues: Vec<QueueSummary>,
    /// From the first arrival to the last finish.
    pub makespan: i64,
    /// Per resource the cluster offers: the mean over the samples (time-weighted) of what
    /// bound pods request against what the nodes offer.
    pub utilisation: BTreeMap<String, f64>,
    /// The longest waits, longest first.
    pub longest: Vec<LongWait>,
    pub evictions: u32,
    pub finished: usize,
}

/// How many of the longest waits a summary keeps.
pub const LONGEST: usize = 10;

/// The `p`th percentile (nearest rank) of `sorted`.
fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Sums up `outcome`, the run of `jobs`.
pub fn summarise(jobs: &[Job], outcome: &Outcome) -> Summary {
    let mut by_queue: BTreeMap<&str, (QueueSummary, Vec<i64>)> = BTreeMap::new();
    let mut longest = Vec::new();
    let first = jobs.iter().map(Job::arrival).min().unwrap_or(0);
    let mut last_finish = first;
    for (j, (job, done)) in jobs.iter().zip(&outcome.jobs).enumerate() {
        let (q, waits) = by_queue.entry(job.queue.as_str()).or_insert_with(|| {
            (
                QueueSummary {
                    queue: job.queue.clone(),
                    ..QueueSummary::default()
                },
                Vec::new(),
            )
        });
        q.jobs += 1;
        q.evictions += done.evictions;
        if let Some(end) = done.finished {
            q.finished += 1;
            last_finish = last_finish.max(end);
        }
        let wait = match done.wait(job.arrival()) {
            Some(wait) => {
                q.started += 1;
                waits.push(wait);
                wait
            }
            None if done.deleted.is_some() => {
                q.withdrawn += 1;
                continue;
            }
            None => {
                q.never_started += 1;
                outcome.end - job.arrival()
            }
        };
        longest.push(LongWait {
            index: j,
            job: format!("{}/{}", job.namespace, job.name),
            queue: job.queue.clone(),
            wait_seconds: wait,
            started: done.started.is_some(),
            why: done.why.clone(),
        });
    }
    let shares = shares_held(outcome);
    let mut queues = Vec::with_capacity(by_queue.len());
    for (name, (mut q, mut waits)) in by_queue {
        waits.sort_unstable();
        q.wait_p50_seconds = percentile(&waits, 50.0);
        q.wait_p90_seconds = percentile(&waits, 90.0);
        q.wait_p99_seconds = percentile(&waits, 99.0);
        q.share_held = shares.get(name).copied();
        queues.push(q);
    }
    longest.sort_by(|a, b| {
        b.wait_seconds
            .cmp(&a.wait_seconds)
            .then(a.index.cmp(&b.index))
    });
    longest.truncate(LONGEST);
    Summary {
        evictions: queues.iter().map(|q| q.evictions).sum(),
        finished: queues.iter().map(|q| q.finished).sum(),
        queues,
        makespan: last_finish - first,
        utilisation: utilisation(outcome),
        longest,
    }
}

/// Each sample weighs the time until the next one (the last: until the run's end).
fn weights(outcome: &Outcome) -> impl Iterator<Item = (usize, f64)> + '_ {
    let samples = &outcome.samples;
    (0..samples.len()).map(move |i| {
        let until = samples.get(i + 1).map_or(outcome.end, |s| s.at);
        (i, (until - samples[i].at).max(0) as f64)
    })
}

fn utilisation(outcome: &Outcome) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (name, offered) in outcome.capacity.iter() {
        if offered <= 0 {
            continue;
        }
        let (mut used, mut total) = (0.0, 0.0);
        for (i, weight) in weights(outcome) {
            used += outcome.samples[i].used.get(name) as f64 / offered as f64 * weight;
            total += weight;
        }
        if total > 0.0 {
            out.insert(name.to_owned(), used / total);
        }
    }
    out
}

fn shares_held(outcome: &Outcome) -> BTreeMap<&str, f64> {
    let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (i, weight) in weights(outcome) {
        for q in &outcome.samples[i].queues {
            let held = q
                .deserved
                .iter()
                .filter(|(_, deserved)| *deserved > 0)
                .map(|(name, deserved)| q.allocated.get(name) as f64 / deserved as f64)
                .fold(None, |max: Option<f64>, r| {
                    Some(max.map_or(r, |m| m.max(r)))
                });
            if let Some(held) = held {
                let sum = sums.entry(&q.queue).or_default();
                sum.0 += held * weight;
                sum.1 += weight;
            }
        }
    }
    sums.into_iter()
        .filter(|(_, (_, total))| *total > 0.0)
        .map(|(name, (held, total))| (name, held / total))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let waits: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&waits, 50.0), Some(50));
        assert_eq!(percentile(&waits, 99.0), Some(99));
        assert_eq!(percentile(&[7], 90.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
