//! Placement benchmarks: node feasibility and scoring for one pod over a synthetic cluster.
//!
//! The design's target is extender filter and prioritize for one pod over 5,000 candidate nodes
//! under 1 ms (p99, in process); these measure the policy part of that budget. The cluster is
//! built deterministically (no randomness between runs) to look like a mixed batch cluster:
//! three node shapes, four zones, a tenth of the nodes tainted for GPUs, a few cordoned, and
//! usage spread over the whole range. Later benches (gang planning, fair share) should build on
//! [`cluster`] so numbers stay comparable.
//!
//! Run: `cargo bench --bench placement` (add `-- --quick` for a short run).

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gangplank_core::model::{Node, Resources, Taint, TaintEffect};
use gangplank_core::policy::constraints::{
    Constraints, LabelOperator, LabelRequirement, NodeSelectorTerm, Toleration, TolerationOperator,
};
use gangplank_core::policy::{Strategy, feasible, score};

mod common;
use common::Lcg;

const NODES: usize = 5_000;
const GIB: i64 = 1 << 30;

/// A node with the usage its pods already request.
struct Candidate {
    node: Node,
    used: Resources,
}

fn cluster(nodes: usize) -> Vec<Candidate> {
    let mut rng = Lcg(42);
    (0..nodes)
        .map(|i| {
            let gpu = i % 10 == 0;
            let (cpu, memory) = match i % 3 {
                0 => (16_000, 64 * GIB),
                1 => (32_000, 128 * GIB),
                _ => (64_000, 256 * GIB),
            };
            let mut allocatable =
                Resources::from([("cpu", cpu), ("memory", memory), ("pods", 110)]);
            let mut labels = BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), format!("node-{i}")),
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                (
                    "topology.kubernetes.io/zone".to_string(),
                    format!("zone-{}", i % 4),
                ),
                (
                    "node.kubernetes.io/instance-type".to_string(),
                    ["m-large", "m-xlarge", "m-2xlarge"][i % 3].to_string(),
                ),
            ]);
            let mut taints = Vec::new();
            if gpu {
                allocatable.set("nvidia.com/gpu", 8);
                labels.insert("nvidia.com/gpu.present".into(), "true".into());
                taints.push(Taint {
                    key: "nvidia.com/gpu".into(),
                    value: Some("present".into()),
                    effect: TaintEffect::NoSchedule,
                });
            }
            let share = |total: i64, rng: &mut Lcg| total * rng.below(101) as i64 / 100;
            let mut used = Resources::from([
                ("cpu", share(cpu, &mut rng)),
                ("memory", share(memory, &mut rng)),
                ("pods", rng.below(111) as i64),
            ]);
            if gpu {
                used.set("nvidia.com/gpu", rng.below(9) as i64);
            }
            Candidate {
                node: Node {
                    name: format!("node-{i}"),
                    allocatable,
                    labels,
                    taints,
                    unschedulable: i % 50 == 7,
                    not_ready: false,
                },
                used,
            }
        })
        .collect()
}

/// A gang worker that needs a GPU: tolerates the GPU taint, selects Linux, and requires two of
/// the four zones by affinity.
fn gpu_worker() -> (Constraints, Resources) {
    let constraints = Constraints {
        tolerations: vec![Toleration {
            key: Some("nvidia.com/gpu".into()),
            operator: TolerationOperator::Exists,
            effect: Some(TaintEffect::NoSchedule),
        }],
        node_selector: vec![("kubernetes.io/os".into(), "linux".into())],
        required_node_affinity: Some(vec![NodeSelectorTerm {
            match_expressions: vec![
                LabelRequirement {
                    key: "topology.kubernetes.io/zone".into(),
                    operator: LabelOperator::In(vec!["zone-0".into(), "zone-2".into()]),
                },
                LabelRequirement {
                    key: "nvidia.com/gpu.present".into(),
                    operator: LabelOperator::Exists,
                },
            ],
            ..Default::default()
        }]),
    };
    let request = Resources::from([
        ("cpu", 8_000),
        ("memory", 32 * GIB),
        ("nvidia.com/gpu", 2),
        ("pods", 1),
    ]);
    (constraints, request)
}

/// A CPU-only worker with no placement constraints.
fn plain_worker() -> (Constraints, Resources) {
    let request = Resources::from([("cpu", 2_000), ("memory", 4 * GIB), ("pods", 1)]);
    (Constraints::default(), request)
}

/// Feasibility then score for every node, as filter followed by prioritize would.
fn filter_and_score(
    nodes: &[Candidate],
    constraints: &Constraints,
    request: &Resources,
    strategy: Strategy,
) -> (usize, i64) {
    let mut feasible_nodes = 0;
    let mut total = 0;
    for c in nodes {
        if feasible(&c.node, constraints).is_ok() {
            feasible_nodes += 1;
            total += score(strategy, &c.node.allocatable, &c.used, request);
        }
    }
    (feasible_nodes, total)
}

fn bench_filter_and_score(c: &mut Criterion) {
    let nodes = cluster(NODES);
    let mut group = c.benchmark_group("feasible_and_score");
    group.throughput(Throughput::Elements(NODES as u64));
    for (name, (constraints, request)) in [("plain_pod", plain_worker()), ("gpu_pod", gpu_worker())]
    {
        for strategy in [Strategy::Binpack, Strategy::Spread] {
            group.bench_function(format!("{name}/{strategy}/{NODES}_nodes"), |b| {
                b.iter(|| {
                    filter_and_score(
                        black_box(&nodes),
                        black_box(&constraints),
                        black_box(&request),
                        strategy,
                    )
                })
            });
        }
    }
    group.finish();
}

fn bench_single_checks(c: &mut Criterion) {
    let nodes = cluster(NODES);
    let plain_node = &nodes[1].node;
    assert!(plain_node.taints.is_empty() && !plain_node.unschedulable);
    let (plain, request) = plain_worker();
    let (gpu, _) = gpu_worker();
    let mut group = c.benchmark_group("single");
    group.bench_function("feasible/unconstrained_pod/untainted_node", |b| {
        b.iter(|| feasible(black_box(plain_node), black_box(&plain)).is_ok())
    });
    group.bench_function("feasible/gpu_pod/gpu_node", |b| {
        b.iter(|| feasible(black_box(&nodes[0].node), black_box(&gpu)).is_ok())
    });
    group.bench_function("score/binpack/plain_pod", |b| {
        b.iter(|| {
            score(
                Strategy::Binpack,
                black_box(&plain_node.allocatable),
                black_box(&nodes[1].used),
                black_box(&request),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench_filter_and_score, bench_single_checks);
criterion_main!(benches);
