//! What the benchmarks share. Each bench compiles this module on its own and uses a part of it.
#![allow(dead_code)]

/// A small deterministic generator (an LCG), so every run sees the same cluster.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

use gangplank_core::admit::groups::{Groups, Unshown};
use gangplank_core::admit::plan;
use gangplank_core::model::names::ADMISSION_GATE;
use gangplank_core::model::{GroupKey, Pod, PodPhase, Resources, State};

const GIB: i64 = 1 << 30;

/// Member `index` of the group `key`, with `uid`, asking for `cpu` millicores and as many GiB
/// per core: running on `node`, or waiting behind the admission gate when `node` is `None`.
pub fn member(uid: usize, key: &GroupKey, index: u32, node: Option<String>, cpu: i64) -> Pod {
    let running = node.is_some();
    Pod {
        uid: format!("uid-{uid}"),
        namespace: key.namespace.to_string(),
        name: format!("{}-{index}", key.name),
        node_name: node,
        phase: if running {
            PodPhase::Running
        } else {
            PodPhase::Pending
        },
        requests: Resources::from([("cpu", cpu), ("memory", cpu * GIB / 1_000), ("pods", 1)]),
        pod_group: Some(key.name.to_string()),
        scheduling_gates: if running {
            vec![]
        } else {
            vec![ADMISSION_GATE.to_owned()]
        },
        ..Pod::default()
    }
}

/// One admission pass over `state` now, with the group facts it reads: how many groups it
/// admits.
pub fn admission_pass(state: &State) -> usize {
    let now = gangplank::clock::unix_now();
    plan::decide(state, &Groups::of(state, Unshown::none(), now), now)
        .admit
        .len()
}
