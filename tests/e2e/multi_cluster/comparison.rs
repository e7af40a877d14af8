//! MultiKueue alone beside MultiKueue with Gangplank on its workers, on the same three clusters
//! (`e2e/multikueue compare` runs it once with Gangplank and once with the workers in
//! `--mode baseline`, the stock scheduler alone; docs/multi-cluster.md has the figures). Four
//! Jobs of 4 pods x 16 CPUs, each pod done 15 s after it starts, sent to the manager at once;
//! worker-1 has 40 CPUs free in pieces of 8 and 32 (a gang of 64 never fits it), worker-2 64.
//! A measurement: it asserts only that with Gangplank no gang is ever partly placed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gangplank::api::kueue::KueueWorkload;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};

use super::{MultiKueue, WORKERS, placed_by_gangplank, record_copies};
use crate::operators::kueue::job;
use crate::sub_groups::filler;

const JOBS: usize = 4;
const PODS: usize = 4;

/// What one Job went through, seen from both workers.
#[derive(Default)]
struct JobTimes {
    first_bound: Option<Duration>,
    whole: Option<Duration>,
    /// The longest time some, not all, of its pods were bound.
    partial: Duration,
    partial_since: Option<Duration>,
    workers: BTreeSet<String>,
}

#[tokio::test]
#[ignore = "a measurement on the local MultiKueue clusters: run e2e/multikueue compare"]
async fn four_jobs_sent_at_once_to_workers_of_uneven_room() {
    let clusters = MultiKueue::connect().await;
    let with_gangplank = placed_by_gangplank(&clusters.workers[0]);
    let queue = clusters.queue("mk-compare").await;
    filler(&queue.worker_pods("worker-1"), "filler", 24).await;
    let copies: Vec<_> = queue
        .worker_namespaces
        .iter()
        .map(|ns| record_copies(ns.api::<KueueWorkload>()))
        .collect();
    let started = Instant::now();
    for i in 0..JOBS {
        let mut job = job(&format!("job-{i}"), &queue.name, PODS as u32, 16);
        let template = &mut job.spec.as_mut().unwrap().template;
        template.metadata.as_mut().unwrap().annotations = Some(
            [(
                "pod-complete.stage.kwok.x-k8s.io/delay".to_owned(),
                "15s".to_owned(),
            )]
            .into(),
        );
        queue.submit(&job).await;
    }

    let mut times: BTreeMap<String, JobTimes> = BTreeMap::new();
    let deadline = Duration::from_secs(300);
    while started.elapsed() < deadline
        && times.values().filter(|t| t.whole.is_some()).count() < JOBS
    {
        let now = started.elapsed();
        let mut bound: BTreeMap<String, (usize, BTreeSet<String>)> = BTreeMap::new();
        for worker in WORKERS {
            let of_jobs = ListParams::default().labels("job-name");
            for pod in queue.worker_pods(worker).list(&of_jobs).await.unwrap() {
                let job = pod.labels()["job-name"].clone();
                let entry = bound.entry(job).or_default();
                if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
                    entry.0 += 1;
                    entry.1.insert(worker.to_owned());
                }
            }
        }
        for (job, (count, workers)) in bound {
            let t = times.entry(job).or_default();
            t.workers.extend(workers);
            if count > 0 && t.first_bound.is_none() {
                t.first_bound = Some(now);
            }
            if count >= PODS && t.whole.is_none() {
                t.whole = Some(now);
            }
            let partly = count > 0 && count < PODS;
            match (partly, t.partial_since) {
                (true, None) => t.partial_since = Some(now),
                (false, Some(since)) => {
                    t.partial = t.partial.max(now - since);
                    t.partial_since = None;
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let end = started.elapsed();
    for t in times.values_mut() {
        if let Some(since) = t.partial_since.take() {
            t.partial = t.partial.max(end - since);
        }
    }

    let copies: usize = copies.iter().map(|c| c.lock().unwrap().len()).sum();
    let partial: Vec<_> = times
        .iter()
        .filter(|(_, t)| t.partial >= Duration::from_secs(5))
        .collect();
    let mode = match (with_gangplank, clusters.dispatched_by_gangplank()) {
        (false, _) => "MultiKueue alone (stock scheduler on the workers, all-at-once dispatcher)",
        (true, false) => "Gangplank on the workers, Kueue's all-at-once dispatcher",
        (true, true) => "Gangplank on the workers and as the dispatcher",
    };
    println!("\n{mode}: {JOBS} Jobs of {PODS} pods x 16 CPUs");
    println!(
        "  Workload copies made on workers: {copies} ({:.1} per Job)",
        copies as f64 / JOBS as f64
    );
    for (job, t) in &times {
        println!(
            "  {job}: first pod bound {}, whole {}, longest partly bound {:.1}s, on {:?}",
            seconds(t.first_bound),
            seconds(t.whole),
            t.partial.as_secs_f64(),
            t.workers
        );
    }
    println!(
        "  Jobs partly bound for 5 s or more: {} of {JOBS}; whole by {:.0}s: {}",
        partial.len(),
        end.as_secs_f64(),
        times.values().filter(|t| t.whole.is_some()).count()
    );
    if with_gangplank {
        assert!(
            partial.is_empty(),
            "a gang partly placed: {:?}",
            partial.iter().map(|p| p.0).collect::<Vec<_>>()
        );
        assert!(
            times.values().all(|t| t.workers.len() == 1),
            "a Job on both workers"
        );
    }

    queue
        .worker_pods("worker-1")
        .delete("filler", &DeleteParams::default())
        .await
        .unwrap();
    queue.delete(&clusters).await;
}

fn seconds(at: Option<Duration>) -> String {
    at.map_or("never".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()))
}
