//! The cluster model at the design's scale: 5,000 nodes and 100,000 pods, built the way the
//! watches build it (each API object decoded from JSON, converted, applied to the cache), and
//! the process's resident memory before and after. The design's target (docs/DESIGN.md): under
//! 300 MiB resident at this scale.
//!
//! Nodes carry the labels and status a kubelet reports (zone, rack, hostname, instance type,
//! allocatable with 8 GPUs, a Ready condition); pods carry a few labels, an owner, one
//! container with requests, a node and a Running status. One pod in ten is a member of a gang
//! of 8 with its PodGroup; the rest belong to no group. What the model keeps of them is what
//! scheduling needs, not the objects: the objects are dropped after conversion, as the watches
//! drop them.
//!
//! Run: `cargo bench --bench scale`. It prints the time to apply everything, the resident
//! memory of the empty process (the baseline) and of the loaded cache, and the time of one
//! snapshot of it.

use std::hint::black_box;
use std::time::Instant;

use gangplank::cache::{Cache, convert};
use gangplank_core::model::{GroupKey, PodGroup};
use serde_json::{Value, json};

mod common;
use common::Lcg;

const NODES: usize = 5_000;
const PODS: usize = 100_000;
const GANG: usize = 8;
const MIB: f64 = 1024.0 * 1024.0;

/// `VmRSS` of this process, in bytes.
fn resident() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024.0
}

fn node(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": format!("node-{i:05}"),
            "uid": format!("node-uid-{i:05}"),
            "labels": {
                "kubernetes.io/hostname": format!("node-{i:05}"),
                "topology.kubernetes.io/zone": format!("zone-{}", i % 4),
                "example.com/rack": format!("rack-{}", i / 40),
                "node.kubernetes.io/instance-type": "gpu-8x",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "allocatable": {
                "cpu": "32", "memory": "256Gi", "pods": "110",
                "ephemeral-storage": "500Gi", "nvidia.com/gpu": "8",
            },
            "capacity": {
                "cpu": "32", "memory": "256Gi", "pods": "110",
                "ephemeral-storage": "500Gi", "nvidia.com/gpu": "8",
            },
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

fn pod(i: usize, rng: &mut Lcg) -> Value {
    // One pod in ten is a gang member: gang g holds pods 80g, 80g + 10, ..., 80g + 70.
    let gang = i.is_multiple_of(10).then_some(i / (10 * GANG));
    let group = gang.map(|g| format!("gang-{g:05}"));
    let namespace = format!("ns-{}", gang.unwrap_or(i) % 20);
    let mut labels = json!({"app": format!("app-{}", i % 100), "team": format!("team-{}", i % 7)});
    if let Some(group) = &group {
        labels["scheduling.gangplank.dev/pod-group"] = group.clone().into();
    }
    let cpu = format!("{}m", 100 * (1 + rng.below(40)));
    let memory = format!("{}Mi", 128 * (1 + rng.below(64)));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i:06}"),
            "namespace": namespace,
            "uid": format!("pod-uid-{i:06}"),
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": format!("rs-{}", i / 10), "uid": format!("rs-uid-{}", i / 10),
                "controller": true,
            }],
            "creationTimestamp": "2026-11-25T00:00:00Z",
        },
        "spec": {
            "nodeName": format!("node-{:05}", rng.below(NODES as u64)),
            "priority": 0,
            "containers": [{
                "name": "main",
                "image": "registry.example.com/team/app:1.0",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }],
        },
        "status": {"phase": "Running", "startTime": "2026-11-25T00:00:05Z"},
    })
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (cache, mut mirror) = Cache::new();
    let baseline = resident();
    let started = Instant::now();
    for i in 0..NODES {
        let api: k8s_openapi::api::core::v1::Node = serde_json::from_value(node(i)).unwrap();
        mirror.apply_node(convert::node(&api).unwrap());
    }
    let mut rng = Lcg(5);
    for g in 0..PODS / 10 / GANG {
        mirror.apply_pod_group(PodGroup::new(
            GroupKey::new(format!("ns-{}", g % 20), format!("gang-{g:05}")),
            GANG as u32,
            "default",
        ));
    }
    for i in 0..PODS {
        let api: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(pod(i, &mut rng)).unwrap();
        mirror.apply_pod(convert::pod(&api).unwrap());
    }
    let applied = started.elapsed();
    let loaded = resident();
    let started = Instant::now();
    let snapshot = black_box(cache.snapshot());
    let snapshot_time = started.elapsed();
    assert_eq!(snapshot.nodes().len(), NODES);
    assert_eq!(snapshot.pods().len(), PODS);
    assert!(snapshot.groups().values().all(|g| g.members.len() == GANG));
    println!("| what | figure |\n|---|---|");
    println!("| nodes, pods | {NODES}, {PODS} |");
    println!(
        "| decoded, converted and applied in | {:.2} s |",
        applied.as_secs_f64()
    );
    println!(
        "| resident, empty process (baseline) | {:.0} MiB |",
        baseline / MIB
    );
    println!("| resident, cache loaded | {:.0} MiB |", loaded / MIB);
    println!(
        "| the cache's share | {:.0} MiB |",
        (loaded - baseline) / MIB
    );
    println!(
        "| one snapshot | {:.2} ms |",
        snapshot_time.as_secs_f64() * 1e3
    );
}
