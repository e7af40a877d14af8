//! Fair-share benchmarks: deserved shares for 100 queues × 5 resources, one admission
//! ordering pass over 10,000 waiting groups in 100 queues, and one whole admission pass
//! (`admit::plan::decide` with the group facts it reads: usage, shares, order, quota and room
//! checks) over a cache of 1,000 nodes, 100 queues and 10,000 waiting groups. Figures and their
//! history are in docs/ (the performance page), not here.
//!
//! The design's target is a full ordering pass over 10,000 waiting groups in 100 queues under
//! 20 ms. Inputs are built deterministically (an LCG, no randomness between runs) outside the
//! timed part: queues of weights 1 to 4, some with guarantees and capabilities, demand well
//! beyond the cluster on most resources; groups of mixed sizes over 20 namespaces, three
//! priorities and spread-out creation times.
//!
//! Also reclaim (`admit::reclaim::plan`) after such a pass, when some queues with groups
//! short of room are below their deserved share (a victim search per such queue), and when
//! none is and no such group outranks a running gang of its queue (the common case, which
//! skips building reclaim's input).
//!
//! Run: `cargo bench --bench fair_share` (add `-- --quick` for a short run).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gangplank::clock::unix_now;
use gangplank_core::admit::groups::{Groups, Unshown};
use gangplank_core::admit::plan;
use gangplank_core::admit::reclaim;
use gangplank_core::model::State;
use gangplank_core::model::resources::Capability;
use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, Queue, Resources, Topology};
use gangplank_core::policy::fair_share::{QueueDemand, deserved_shares};
use gangplank_core::policy::queue_order::{Options, QueueSnapshot, WaitingGroup, admission_order};

mod common;
use common::Lcg;

const QUEUES: usize = 100;
const GROUPS: usize = 10_000;
const NAMESPACES: usize = 20;
const GIB: i64 = 1 << 30;
const RESOURCES: [&str; 5] = [
    "cpu",
    "memory",
    "nvidia.com/gpu",
    "ephemeral-storage",
    "example.com/fpga",
];

/// A 1,000-node cluster's allocatable.
fn cluster() -> Resources {
    Resources::from([
        ("cpu", 1_000 * 32_000),
        ("memory", 1_000 * 128 * GIB),
        ("nvidia.com/gpu", 800),
        ("ephemeral-storage", 1_000 * 500 * GIB),
        ("example.com/fpga", 64),
    ])
}

fn amounts(rng: &mut Lcg, scale: [i64; 5]) -> Resources {
    let mut r = Resources::new();
    for (name, max) in RESOURCES.iter().zip(scale) {
        r.set(name, max * rng.below(101) as i64 / 100);
    }
    r
}

/// 100 queues; with `parents`, ten top-level queues of nine children each (and no demand of
/// their own).
fn queues(parents: bool) -> Vec<QueueDemand> {
    let mut rng = Lcg(7);
    let big = [
        1_000 * 32_000 / 20,
        1_000 * 128 * GIB / 20,
        800 / 20,
        1_000 * 500 * GIB / 20,
        64 / 20,
    ];
    (0..QUEUES)
        .map(|i| {
            let mut q = QueueDemand::new(format!("queue-{i:03}"));
            q.weight = 1 + rng.below(4) as u32;
            q.demand = amounts(&mut rng, big);
            if i % 5 == 0 {
                q.guarantee = amounts(&mut rng, big.map(|x| x / 10));
            }
            if i % 7 == 0 {
                let mut cap = Capability::unbounded();
                cap.set("cpu", 16_000 * (1 + rng.below(8) as i64));
                cap.set("nvidia.com/gpu", rng.below(16) as i64);
                q.capability = cap;
            }
            if parents {
                if i % 10 == 0 {
                    q.demand = Resources::new();
                } else {
                    q.parent = Some(format!("queue-{:03}", i / 10 * 10));
                }
            }
            q
        })
        .collect()
}

fn bench_deserved(c: &mut Criterion) {
    let cluster = cluster();
    let mut group = c.benchmark_group("deserved_shares");
    group.throughput(Throughput::Elements(QUEUES as u64));
    for (name, parents) in [("flat", false), ("ten_parents_of_nine", true)] {
        let queues = queues(parents);
        group.bench_function(format!("{QUEUES}_queues_5_resources/{name}"), |b| {
            b.iter(|| deserved_shares(black_box(&cluster), black_box(&queues)))
        });
    }
    group.finish();
}

/// 100 queues holding part of what they deserve, 10,000 groups spread over them unevenly.
fn snapshots() -> Vec<QueueSnapshot> {
    let mut rng = Lcg(11);
    let cluster = cluster();
    let mut queues: Vec<QueueSnapshot> = (0..QUEUES)
        .map(|i| {
            let mut deserved = Resources::new();
            for (name, amount) in cluster.iter() {
                deserved.set(name, amount / QUEUES as i64 * (1 + rng.below(3) as i64));
            }
            let mut q = QueueSnapshot::new(format!("queue-{i:03}"), deserved.clone());
            q.priority = rng.below(3) as i32;
            for (name, amount) in deserved.iter() {
                q.allocated.set(name, amount * rng.below(120) as i64 / 100);
            }
            for n in 0..NAMESPACES {
                q.namespace_allocated.insert(
                    format!("team-{n:02}"),
                    Resources::from([("cpu", 1_000 * rng.below(64) as i64)]),
                );
            }
            q
        })
        .collect();
    let request = [32_000, 128 * GIB, 8, 100 * GIB, 1];
    for g in 0..GROUPS {
        // Skewed: low-numbered queues get more groups.
        let qi = (rng.below(QUEUES as u64) * rng.below(QUEUES as u64) / QUEUES as u64) as usize;
        let namespace = format!("team-{:02}", rng.below(NAMESPACES as u64));
        let mut requests = amounts(&mut rng, request);
        if rng.below(4) != 0 {
            requests.set("nvidia.com/gpu", 0);
            requests.set("example.com/fpga", 0);
        }
        queues[qi].waiting.push(WaitingGroup {
            key: GroupKey::new(namespace.clone(), format!("job-{g:05}")),
            namespace,
            requests,
            priority: [0, 0, 0, 100, 1_000][rng.below(5) as usize],
            created: 1_700_000_000 + rng.below(86_400) as i64,
        });
    }
    queues
}

fn bench_order(c: &mut Criterion) {
    let queues = snapshots();
    let mut group = c.benchmark_group("admission_order");
    group.throughput(Throughput::Elements(GROUPS as u64));
    for (name, namespace_fair_share) in [("plain", false), ("namespace_fair_share", true)] {
        let options = Options {
            namespace_fair_share,
        };
        group.bench_function(format!("{GROUPS}_groups_{QUEUES}_queues/{name}"), |b| {
            b.iter(|| admission_order(black_box(&queues), options).len())
        });
    }
    group.finish();
}

/// A cache state for a whole admission pass: 1,000 nodes of 32 CPUs and 128 GiB, 100 queues
/// (weights 1 to 4, every seventh with a CPU capability, every fifth with a guarantee), a
/// cluster about half full of bound gang members, and 10,000 gated groups of 1 to 8 pods
/// waiting, spread unevenly over the queues. With `topology`, the nodes are in 4 zones of 5
/// blocks of 10 racks of 5 nodes (a `Topology` of those three levels), and every group
/// requires a zone and prefers a rack.
fn admission_state(topology: bool) -> State {
    let mut rng = Lcg(13);
    let mut s = State::default();
    const LEVELS: [&str; 3] = ["zone", "block", "rack"];
    if topology {
        s.apply_topology(Topology {
            name: "dc".into(),
            levels: LEVELS.map(String::from).to_vec(),
        });
    }
    for n in 0..1_000 {
        let labels = if topology {
            let (zone, block, rack) = (n / 250, n / 50 % 5, n / 5 % 10);
            LEVELS
                .iter()
                .zip([zone, block, rack])
                .map(|(k, v)| ((*k).to_owned(), format!("{k}-{v}")))
                .collect()
        } else {
            Default::default()
        };
        s.apply_node(Node {
            name: format!("node-{n:04}"),
            allocatable: Resources::from([("cpu", 32_000), ("memory", 128 * GIB), ("pods", 110)]),
            labels,
            taints: vec![],
            unschedulable: false,
            not_ready: false,
        });
    }
    for i in 0..QUEUES {
        let mut q = Queue::new(format!("queue-{i:03}"));
        q.weight = 1 + rng.below(4) as u32;
        if i % 7 == 0 {
            q.capability = Capability::from([("cpu", 64_000 * (1 + rng.below(8) as i64))]);
        }
        if i % 5 == 0 {
            q.guarantee = Resources::from([("cpu", 16_000)]);
        }
        s.apply_queue(q);
    }
    let mut uid = 0usize;
    let mut add_group = |s: &mut State, rng: &mut Lcg, g: usize, bound: bool| {
        let qi = (rng.below(QUEUES as u64) * rng.below(QUEUES as u64) / QUEUES as u64) as usize;
        let namespace = format!("team-{:02}", rng.below(NAMESPACES as u64));
        let size = 1 + rng.below(8) as u32;
        let key = GroupKey::new(namespace.clone(), format!("job-{g:05}"));
        s.apply_pod_group(PodGroup {
            schedule_timeout: std::time::Duration::from_secs(60),
            topology_key: topology.then(|| "zone".to_owned()),
            preferred_topology_key: topology.then(|| "rack".to_owned()),
            ..PodGroup::new(key.clone(), size, format!("queue-{qi:03}"))
        });
        let cpu = 1_000 * (1 + rng.below(4) as i64);
        let created = 1_700_000_000 + rng.below(86_400) as i64;
        for m in 0..size {
            uid += 1;
            s.apply_pod(Pod {
                priority: [0, 0, 0, 100, 1_000][rng.below(5) as usize],
                created,
                ..common::member(
                    uid,
                    &key,
                    m,
                    bound.then(|| format!("node-{:04}", uid % 1_000)),
                    cpu,
                )
            });
        }
    };
    for g in 0..3_000 {
        add_group(&mut s, &mut rng, GROUPS + g, true);
    }
    for g in 0..GROUPS {
        add_group(&mut s, &mut rng, g, false);
    }
    s
}

/// The pass over [`admission_state`], and over the same with every group in a topology (the
/// baseline and the cost of levels, in the same run).
fn bench_admission_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission_pass");
    group.throughput(Throughput::Elements(GROUPS as u64));
    for (topology, name) in [(false, ""), (true, "/zone_required_rack_preferred")] {
        let state = admission_state(topology);
        group.bench_function(
            format!("{GROUPS}_groups_{QUEUES}_queues_1000_nodes{name}"),
            |b| b.iter(|| common::admission_pass(black_box(&state))),
        );
    }
    group.finish();
}

/// Reclaim after one admission pass over the same cache: the pass leaves thousands of groups
/// short of room, each of which reclaim considers (most are in queues at or above their
/// share, so they only cost the fit check).
fn bench_reclaim(c: &mut Criterion) {
    let state = admission_state(false);
    let now = unix_now();
    let groups = Groups::of(&state, Unshown::none(), now);
    let decision = plan::decide(&state, &groups, now);
    let mut group = c.benchmark_group("reclaim_after_pass");
    group.throughput(Throughput::Elements(decision.short_of_room.len() as u64));
    group.bench_function(
        format!("{}_groups_short_of_room", decision.short_of_room.len()),
        |b| {
            b.iter(|| {
                reclaim::plan(black_box(&state), &groups, &decision, &|_| false, &|_| {
                    false
                })
                .reclaims
                .len()
            })
        },
    );
    // The common case: no queue with a group short of room is below its deserved share (here
    // every share is made zero), and no such group outranks a running gang of its own queue
    // (here they all take the lowest priority), so the plan is known to be empty before the
    // costly part.
    let mut at_share = decision.clone();
    for report in at_share.queues.values_mut() {
        report.deserved = Resources::new();
    }
    for waiting in &mut at_share.short_of_room {
        waiting.priority = 0;
    }
    group.bench_function("no_queue_below_its_share", |b| {
        b.iter(|| {
            reclaim::plan(black_box(&state), &groups, &at_share, &|_| false, &|_| {
                false
            })
            .reclaims
            .len()
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_deserved,
    bench_order,
    bench_admission_pass,
    bench_reclaim
);
criterion_main!(benches);
