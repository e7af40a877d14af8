use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::model::Queue;
use crate::model::sub_groups::SubGroup;
use crate::policy::Strategy;
use crate::testing::node;

fn cpus(n: i64) -> Resources {
    Resources::from([("cpu", n * 1_000)])
}

/// A gang of `members` pods of `cpu` CPUs arriving at `arrival` and running `runtime` (in
/// seconds).
fn gang(name: &str, queue: &str, members: u32, cpu: i64, arrival: i64, runtime: i64) -> Job {
    Job {
        name: name.to_owned(),
        namespace: "team".to_owned(),
        queue: queue.to_owned(),
        arrival_ms: arrival * 1_000,
        members: (0..members).map(|_| cpus(cpu)).collect(),
        min_member: members,
        gang: true,
        priority: 0,
        runtime_ms: runtime * 1_000,
        runtimes_ms: Vec::new(),
        deleted_at_ms: None,
        expected_runtime: None,
        sub_groups: Vec::new(),
        constraints: Vec::new(),
        labels: Vec::new(),
    }
}

fn setup(nodes: usize, cpu: i64, queues: Vec<Queue>) -> Setup {
    Setup {
        nodes: (0..nodes)
            .map(|i| node(format!("n{i}"), cpu * 1_000))
            .collect(),
        queues,
        settings: crate::claims::Settings {
            strategy: Strategy::Binpack,
            max_hold: std::time::Duration::from_secs(300),
            bind_unmarked: false,
            hold_scheduler_gangs: false,
            gated_admission: true,
        },
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
    let out = run(&setup(2, 8, vec![Queue::new("q")]), &jobs);
    assert_eq!(out.jobs[0].started, Some(0));
    assert_eq!(out.jobs[0].finished, Some(100));
    assert_eq!(out.jobs[1].started, Some(100));
    assert_eq!(out.jobs[1].finished, Some(150));
    assert_eq!(out.admission_order, vec![0, 1]);
    assert_eq!(out.end, 150);
    let why = out.jobs[1].why.as_deref().unwrap();
    assert!(why.contains("cpu"), "{why}");
}

/// An inference service of 4 prefill instances of 2 members of 2 CPUs and 2 decode instances
/// of 4 members of 3 CPUs, needing 2 prefill and 1 decode (8 members, 20 CPUs; 40 all of it).
fn service(arrival: i64) -> Job {
    let sub_group = |name: &str, size: u32, min_count: u32| SubGroup {
        name: name.into(),
        size,
        min_count,
        selector: BTreeMap::from([("role".into(), name.into())]),
        match_label_keys: vec!["instance".into()],
        topology_key: None,
    };
    let member = |role: &str, instance: usize| {
        Arc::new(BTreeMap::from([
            ("role".to_owned(), role.to_owned()),
            ("instance".to_owned(), instance.to_string()),
        ]))
    };
    Job {
        sub_groups: vec![sub_group("prefill", 2, 2), sub_group("decode", 4, 1)],
        labels: (0..8)
            .map(|m| member("prefill", m / 2))
            .chain((0..8).map(|m| member("decode", m / 4)))
            .collect(),
        members: (0..8)
            .map(|_| cpus(2))
            .chain((0..8).map(|_| cpus(3)))
            .collect(),
        min_member: 8,
        ..gang("svc", "serving", 16, 0, arrival, 1_000)
    }
}

#[test]
fn a_gang_of_sub_groups_starts_at_its_minimum_and_grows_when_a_training_gang_finishes() {
    // Two nodes of 22 CPUs; the training gang takes one until 100. A pod asking nothing
    // arrives at 10, so that the queues are sampled then.
    let probe = Job {
        gang: false,
        members: vec![Resources::default()],
        ..gang("probe", "training", 1, 0, 10, 1)
    };
    let jobs = [gang("train", "training", 2, 11, 0, 100), service(1), probe];
    let queues = vec![Queue::new("training"), Queue::new("serving")];
    let out = run(&setup(2, 22, queues), &jobs);
    assert_eq!(out.jobs[1].started, Some(1), "its minimum, beside training");
    let serving = |t: i64| {
        let sample = out.samples.iter().find(|s| s.at == t).unwrap();
        let queue = sample.queues.iter().find(|q| &*q.queue == "serving");
        queue.map_or(0, |q| q.allocated.get("cpu"))
    };
    // Members one by one would hold 22 (every prefill member, two of decode's).
    assert_eq!(
        serving(10),
        20_000,
        "the minimum, whole instances, and no more"
    );
    assert_eq!(
        serving(100),
        40_000,
        "every instance once training finished"
    );
    assert_eq!(out.jobs[1].finished, Some(1_100));
}

#[test]
fn a_gang_is_placed_whole_or_not_at_all() {
    // Room for three of four members: nothing of the gang runs, the small job beside it does.
    let jobs = [
        gang("big", "q", 4, 4, 0, 100),
        gang("small", "q", 1, 4, 1, 10),
    ];
    let out = run(&setup(3, 4, vec![Queue::new("q")]), &jobs);
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
    let out = run(&setup(4, 8, vec![capped]), &jobs);
    assert_eq!(out.jobs[0].started, None);
    assert!(out.jobs[0].why.as_deref().unwrap().contains("capability"));
    let out = run(&setup(4, 8, vec![Queue::new("q")]), &jobs);
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
    let out = run(&setup(4, 8, vec![Queue::new("a"), Queue::new("b")]), &jobs);
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
fn what_happens_inside_one_second_happens_in_its_order_with_a_pass_between() {
    // The hog ends at 5.050 s; "zeta" arrives at 5.200 and "alpha" at 5.700, each wanting the
    // whole node. A pass runs after each (at most every 100 ms), so zeta, there first, takes
    // it; alpha, first by name in one instant, waits for it.
    let mut zeta = gang("zeta", "q", 1, 8, 0, 10);
    zeta.arrival_ms = 5_200;
    let mut alpha = gang("alpha", "q", 1, 8, 0, 10);
    alpha.arrival_ms = 5_700;
    let mut hog = gang("hog", "q", 1, 8, 0, 0);
    hog.runtime_ms = 5_050;
    let jobs = [hog, alpha, zeta];
    let out = run(&setup(1, 8, vec![Queue::new("q")]), &jobs);
    assert_eq!(out.jobs[2].started, Some(5));
    assert_eq!(out.jobs[1].started, Some(15));
    assert_eq!(out.admission_order, vec![0, 2, 1]);
}

#[test]
fn a_job_deleted_while_it_waits_is_withdrawn_and_frees_nothing_it_never_held() {
    let mut late = gang("late", "q", 1, 8, 1, 10);
    late.deleted_at_ms = Some(5_000);
    let jobs = [gang("hog", "q", 1, 8, 0, 100), late];
    let out = run(&setup(1, 8, vec![Queue::new("q")]), &jobs);
    assert_eq!(out.jobs[1].started, None);
    assert_eq!(out.jobs[1].deleted, Some(5));
    assert_eq!(summarise(&jobs, &out).queues[0].withdrawn, 1);
}

#[test]
fn utilisation_is_what_bound_pods_use_over_time() {
    // Half the cluster for the whole run.
    let jobs = [gang("half", "q", 1, 4, 0, 100)];
    let mut s = setup(1, 8, vec![Queue::new("q")]);
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
    let mut s = setup(1, 16, vec![Queue::new("q")]);
    s.binds_per_second = Some(4);
    let out = run(&s, &jobs);
    assert_eq!(out.jobs[0].admitted, Some(0));
    assert_eq!(out.jobs[0].started, Some(2));
}

#[test]
fn members_run_only_on_the_nodes_their_constraints_allow() {
    use crate::policy::constraints::{LabelOperator, LabelRequirement, NodeSelectorTerm};
    // Two nodes of 8 CPUs, of GPU models A and B; gangs of two members of 8 CPUs.
    let mut s = setup(2, 8, vec![Queue::new("q")]);
    for (node, model) in s.nodes.iter_mut().zip(["A", "B"]) {
        node.labels.insert("gpu-model".into(), model.into());
    }
    let on = |models: &[&str]| {
        Arc::new(Constraints {
            required_node_affinity: Some(vec![NodeSelectorTerm {
                match_expressions: vec![LabelRequirement {
                    key: "gpu-model".into(),
                    operator: LabelOperator::In(models.iter().map(|m| (*m).to_owned()).collect()),
                }],
                match_fields: Vec::new(),
                invalid: None,
            }]),
            ..Constraints::default()
        })
    };
    let mut a_or_b = gang("a-or-b", "q", 2, 8, 0, 100);
    a_or_b.constraints = vec![on(&["A", "B"]); 2];
    let mut only_a = gang("only-a", "q", 2, 8, 200, 100);
    only_a.constraints = vec![on(&["A"]); 2];
    let out = run(&s, &[a_or_b, only_a]);
    assert_eq!(out.jobs[0].started, Some(0));
    assert_eq!(
        out.jobs[1].started, None,
        "two members of 8 CPUs, and one node of model A"
    );
}
