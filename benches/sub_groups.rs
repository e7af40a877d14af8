//! Gangs of sub-groups in the admission pass (`admit::plan::decide` with the group facts it
//! reads): 10,000 waiting instances in 100 queues on 1,000 nodes, as 1,000 gangs of sub-groups
//! of 10 instances each (a minimum of 5, the rest elastic), beside the same pods as 10,000 flat
//! gangs, one per instance, in the same run. The question is what splitting members into
//! instances costs the pass; figures are in docs/ (the performance page), not here.
//!
//! Inputs are deterministic (an LCG): each gang's instances are alike (1 to 4 members of 1 to
//! 4 CPUs), queues of weights 1 to 4, demand well beyond the cluster, and 3,000 running flat
//! gangs so that the free room is fragmented as on a busy cluster.
//!
//! Run: `cargo bench --bench sub_groups` (add `-- --quick` for a short run).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gangplank_core::model::State;
use gangplank_core::model::sub_groups::SubGroup;
use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, Queue, Resources};

mod common;
use common::Lcg;

const QUEUES: usize = 100;
const GANGS: usize = 1_000;
const INSTANCES: usize = 10;
const GIB: i64 = 1 << 30;

/// 1,000 nodes of 32 CPUs, 100 queues, 3,000 running flat gangs, and the waiting instances:
/// with `split`, gang g holds instances 10g to 10g+9; else each instance is its own gang.
fn state(split: bool) -> State {
    let mut rng = Lcg(17);
    let mut s = State::default();
    for n in 0..1_000 {
        s.apply_node(Node {
            name: format!("node-{n:04}"),
            allocatable: Resources::from([("cpu", 32_000), ("memory", 128 * GIB), ("pods", 110)]),
            ..Node::default()
        });
    }
    for i in 0..QUEUES {
        let mut q = Queue::new(format!("queue-{i:03}"));
        q.weight = 1 + rng.below(4) as u32;
        s.apply_queue(q);
    }
    let mut uid = 0usize;
    for g in 0..3_000 {
        let key = GroupKey::new("busy", format!("busy-{g:04}"));
        let size = 1 + rng.below(8) as u32;
        s.apply_pod_group(PodGroup::new(key.clone(), size, "queue-000"));
        for m in 0..size {
            uid += 1;
            let node = Some(format!("node-{:04}", uid % 1_000));
            s.apply_pod(common::member(uid, &key, m, node, 1_000));
        }
    }
    for g in 0..GANGS {
        let queue = format!("queue-{:03}", rng.below(QUEUES as u64));
        let namespace = format!("team-{:02}", rng.below(20));
        let size = 1 + rng.below(4) as u32;
        let cpu = 1_000 * (1 + rng.below(4) as i64);
        let created = 1_700_000_000 + rng.below(86_400) as i64;
        let tree = GroupKey::new(namespace.clone(), format!("svc-{g:04}"));
        if split {
            s.apply_pod_group(PodGroup {
                sub_groups: vec![SubGroup {
                    name: "instance".into(),
                    size,
                    min_count: INSTANCES as u32 / 2,
                    selector: BTreeMap::new(),
                    match_label_keys: vec!["instance".into()],
                    topology_key: None,
                }],
                ..PodGroup::new(tree.clone(), size * INSTANCES as u32 / 2, queue.clone())
            });
        }
        for i in 0..INSTANCES {
            let key = if split {
                tree.clone()
            } else {
                let flat = GroupKey::new(namespace.clone(), format!("svc-{g:04}-{i}"));
                s.apply_pod_group(PodGroup::new(flat.clone(), size, queue.clone()));
                flat
            };
            for m in 0..size {
                uid += 1;
                let labels = BTreeMap::from([("instance".to_owned(), i.to_string())]);
                s.apply_pod(Pod {
                    created,
                    labels: Arc::new(labels),
                    ..common::member(uid, &key, i as u32 * size + m, None, cpu)
                });
            }
        }
    }
    s
}

fn bench_pass(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission_pass_sub_groups");
    group.throughput(Throughput::Elements((GANGS * INSTANCES) as u64));
    for (split, name) in [(false, "flat_gangs"), (true, "gangs_of_sub_groups")] {
        let state = state(split);
        let label = format!(
            "{}_instances_{QUEUES}_queues_1000_nodes/{name}",
            GANGS * INSTANCES
        );
        group.bench_function(label, |b| {
            b.iter(|| common::admission_pass(black_box(&state)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_pass);
criterion_main!(benches);
