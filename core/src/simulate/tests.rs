use std::time::Instant;

use super::*;
use crate::model::Queue;
use crate::testing::node;

fn cpus(n: i64) -> Resources {
    Resources::from([("cpu", n * 1_000)])
}

fn gang(name: &str, queue: &str, members: u32, cpu: i64, arrival: i64, runtime: i64) -> Job {
    Job {
        name: name.to_owned(),
        namespace: "team".to_owned(),
        queue: queue.to_owned(),
        arrival,
        members: (0..members).map(|_| cpus(cpu)).collect(),
        min_member: members,
        gang: true,
        priority: 0,
        runtime,
        runtimes: Vec::new(),
        deleted_at: None,
        expected_runtime: None,
    }
}

fn scenario(nodes: usize, cpu: i64, queues: Vec<Queue>) -> Scenario {
    Scenario {
        nodes: (0..nodes)
            .map(|i| node(format!("n{i}"), cpu * 1_000))
            .collect(),
        queues,
        strategy: Strategy::Binpack,
        origin: Instant::now(),
        sample_every: 10,
        binds_per_second: None,
    }
}

#[test]
fn a_gang_that_does_not_fit_beside_a_running_one_starts_when_that_one_finishes() {
    let jobs = [
        gang("first", "q", 4, 4, 0, 100),
        gang("second", "q", 4, 4, 10, 50),
    ];
    let out = run(&scenario(2, 8, vec![Queue::new("q")]), &jobs);
    assert_eq!(out.jobs[0].started, Some(0));
    assert_eq!(out.jobs[0].finished, Some(100));
    assert_eq!(out.jobs[1].started, Some(100));
    assert_eq!(out.jobs[1].finished, Some(150));
    assert_eq!(out.admission_order, vec![0, 1]);
    assert_eq!(out.end, 150);
    let why = out.jobs[1].why.as_deref().unwrap();
    assert!(why.contains("cpu"), "{why}");
}

#[test]
fn a_gang_is_placed_whole_or_not_at_all() {
    // Room for three of four members: nothing of the gang runs, the small job beside it does.
    let jobs = [
        gang("big", "q", 4, 4, 0, 100),
        gang("small", "q", 1, 4, 1, 10),
    ];
    let out = run(&scenario(3, 4, vec![Queue::new("q")]), &jobs);
    assert_eq!(out.jobs[0].started, None);
    assert_eq!(out.jobs[1].started, Some(1));
    let summary = summarise(&jobs, &out);
    assert_eq!(summary.queues[0].never_started, 1);
    assert_eq!(summary.longest[0].job, "team/big");
}

#[test]
fn a_queue_capped_below_a_gang_never_starts_it_and_a_raised_cap_does() {
    let mut capped = Queue::new("q");
    capped.capability.set("cpu", 8_000);
    let jobs = [gang("g", "q", 4, 4, 0, 10)];
    let out = run(&scenario(4, 8, vec![capped]), &jobs);
    assert_eq!(out.jobs[0].started, None);
    assert!(out.jobs[0].why.as_deref().unwrap().contains("capability"));
    let out = run(&scenario(4, 8, vec![Queue::new("q")]), &jobs);
    assert_eq!(out.jobs[0].started, Some(0));
}

#[test]
fn reclaim_evicts_a_queue_over_its_share_for_one_below_it_and_the_victim_starts_again() {
    // "a" takes the whole cluster while "b" has nothing; b's gang arrives and reclaims half.
    let jobs = [
        gang("a1", "a", 2, 8, 0, 1_000),
        gang("a2", "a", 2, 8, 0, 1_000),
        gang("b1", "b", 2, 8, 5, 100),
    ];
    let out = run(
        &scenario(4, 8, vec![Queue::new("a"), Queue::new("b")]),
        &jobs,
    );
    assert!(out.jobs[2].started.is_some_and(|s| s < 1_000), "{out:?}");
    let evicted: u32 = out.jobs[..2].iter().map(|j| j.evictions).sum();
    assert_eq!(evicted, 1);
    assert!(
        out.jobs.iter().all(|j| j.finished.is_some()),
        "{:?}",
        out.jobs
    );
    assert_eq!(summarise(&jobs, &out).evictions, 1);
}

#[test]
fn a_job_deleted_while_it_waits_is_withdrawn_and_frees_nothing_it_never_held() {
    let mut late = gang("late", "q", 1, 8, 1, 10);
    late.deleted_at = Some(5);
    let jobs = [gang("hog", "q", 1, 8, 0, 100), late];
    let out = run(&scenario(1, 8, vec![Queue::new("q")]), &jobs);
    assert_eq!(out.jobs[1].started, None);
    assert_eq!(out.jobs[1].deleted, Some(5));
    assert_eq!(summarise(&jobs, &out).queues[0].withdrawn, 1);
}

#[test]
fn utilisation_is_what_bound_pods_use_over_time() {
    // Half the cluster for the whole run.
    let jobs = [gang("half", "q", 1, 4, 0, 100)];
    let mut s = scenario(1, 8, vec![Queue::new("q")]);
    s.sample_every = 1;
    let out = run(&s, &jobs);
    let summary = summarise(&jobs, &out);
    assert_eq!(summary.makespan, 100);
    let cpu = summary.utilisation["cpu"];
    assert!((cpu - 0.5).abs() < 1e-9, "{cpu}");
}

#[test]
fn the_scheduler_places_at_most_its_throughput_each_second() {
    // 10 members at 4 pods a second: the gang reaches quorum in its third second.
    let jobs = [gang("g", "q", 10, 1, 0, 100)];
    let mut s = scenario(1, 16, vec![Queue::new("q")]);
    s.binds_per_second = Some(4);
    let out = run(&s, &jobs);
    assert_eq!(out.jobs[0].admitted, Some(0));
    assert_eq!(out.jobs[0].started, Some(2));
}
