//! The benchmark's cluster: 5,000 nodes, 50,000 bound pods, running and waiting gangs, built
//! deterministically through the cache's write path (see the bench's top doc).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use futures::future::BoxFuture;
use gangplank::cache::{Cache, LedgerWriter, Mirror, convert};
use gangplank::extender::{self, BindRequest, Binder};
use gangplank_core::claims::Settings;
use gangplank_core::model::{Claim, GroupKey, Node, Pod, PodGroup, Resources};
use gangplank_core::policy as policy_mod;
use gangplank_core::policy::constraints::Constraints;
use gangplank_core::policy::placement::Strategy;
use serde_json::{Value, json};

use crate::common::Lcg;

pub const NODES: usize = 5_000;
pub const PODS: usize = 50_000;
/// Nodes the scheduler samples at 5,000 nodes with its default `percentageOfNodesToScore`
/// (adaptive: 50% - nodes/125 = 10%): what a pass-through really receives on such a cluster.
pub const SAMPLED: usize = 500;
pub const MIB: i64 = 1 << 20;
pub const GIB: i64 = 1 << 30;
pub const NAMESPACES: usize = 10;
/// Members of the gang that fits only in part (8 GPUs each).
pub const PARTIAL: usize = 128;

pub fn node_name(i: usize) -> String {
    format!("kwok-node-{i}")
}

pub fn node(i: usize) -> Node {
    let zone = i % 4;
    let rack = (i / 4) % 8;
    let mut labels = std::collections::BTreeMap::new();
    for (k, v) in [
        ("kubernetes.io/hostname", node_name(i)),
        ("kubernetes.io/os", "linux".into()),
        ("kubernetes.io/arch", "amd64".into()),
        ("type", "kwok".into()),
        ("topology.kubernetes.io/zone", format!("zone-{zone}")),
        (
            "topology.gangplank.dev/rack",
            format!("zone-{zone}-rack-{rack}"),
        ),
        ("nvidia.com/gpu.present", "true".into()),
    ] {
        labels.insert(k.to_string(), v);
    }
    let taints = if i % 20 == 3 {
        vec![gangplank_core::model::Taint {
            key: "dedicated".into(),
            value: Some("infra".into()),
            effect: gangplank_core::model::TaintEffect::NoSchedule,
        }]
    } else {
        vec![]
    };
    Node {
        name: node_name(i),
        allocatable: allocatable(),
        labels,
        taints,
        unschedulable: i % 100 == 7,
        not_ready: false,
    }
}

pub fn allocatable() -> Resources {
    Resources::from([
        ("cpu", 32_000),
        ("memory", 256 * GIB),
        ("nvidia.com/gpu", 8),
        ("pods", 110),
    ])
}

/// Requests as the API writes them (`cpu`, `memory`, `nvidia.com/gpu`), for pod manifests.
#[derive(Clone, Copy)]
pub struct Shape {
    pub cpu_m: i64,
    pub memory: i64,
    pub gpu: i64,
}

impl Shape {
    pub fn requests(self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("cpu", format!("{}m", self.cpu_m)),
            ("memory", format!("{}Mi", self.memory / MIB)),
        ];
        if self.gpu > 0 {
            out.push(("nvidia.com/gpu", self.gpu.to_string()));
        }
        out
    }

    pub fn resources(self) -> Resources {
        Resources::from([
            ("cpu", self.cpu_m),
            ("memory", self.memory),
            ("nvidia.com/gpu", self.gpu),
            ("pods", 1),
        ])
    }
}

/// A pod manifest as the scheduler sends it: the captured request's pod with identity, group
/// label and requests replaced, the marker resource kept.
pub fn api_pod(
    template: &Value,
    namespace: &str,
    name: &str,
    group: Option<&str>,
    shape: Shape,
) -> Value {
    let mut pod = template.clone();
    let meta = &mut pod["metadata"];
    meta["namespace"] = namespace.into();
    meta["name"] = name.into();
    meta["generateName"] = Value::Null;
    meta["uid"] = format!("uid-{namespace}-{name}").into();
    let labels = meta["labels"].as_object_mut().expect("template has labels");
    labels.retain(|k, _| !k.starts_with("scheduling.") && !k.starts_with("batch."));
    if let Some(group) = group {
        labels.insert(
            "scheduling.gangplank.dev/pod-group".into(),
            group.to_string().into(),
        );
    }
    if let Some(map) = meta.as_object_mut() {
        map.retain(|_, v| !v.is_null());
        map.remove("ownerReferences");
    }
    let resources = &mut pod["spec"]["containers"][0]["resources"];
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    for (k, v) in shape.requests() {
        requests.insert(k.into(), v.clone().into());
        if k == "nvidia.com/gpu" {
            limits.insert(k.into(), v.into());
        }
    }
    requests.insert("scheduling.gangplank.dev/managed".into(), "1".into());
    limits.insert("scheduling.gangplank.dev/managed".into(), "1".into());
    *resources = json!({"requests": requests, "limits": limits});
    pod
}

/// The pod a request carries, decoded and converted as the handler does it.
pub struct Member {
    pub manifest: Value,
    pub pod: Pod,
    pub constraints: Constraints,
}

impl Member {
    pub fn new(manifest: Value) -> Member {
        let api: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(manifest.clone()).expect("bench pod is a valid Pod");
        let pod = convert::pod(&api).expect("bench pod converts");
        let constraints = gangplank::cache::constraints::constraints_of(&api);
        Member {
            manifest,
            pod,
            constraints,
        }
    }

    pub fn key(&self) -> GroupKey {
        GroupKey::of(&self.pod).expect("a gang member")
    }

    /// A filter or prioritize request body for this pod over `names`.
    pub fn body(&self, names: &[String]) -> Bytes {
        Bytes::from(
            serde_json::to_vec(&json!({
                "Pod": self.manifest,
                "Nodes": null,
                "NodeNames": names,
            }))
            .unwrap(),
        )
    }

    pub fn bind_request(&self, node: &str) -> BindRequest {
        BindRequest {
            namespace: self.pod.namespace.clone(),
            name: self.pod.name.clone(),
            uid: self.pod.uid.clone(),
            node: node.into(),
        }
    }
}

/// A binder that binds nothing and always succeeds.
pub struct NoopBinder;

impl Binder for NoopBinder {
    fn bind<'a>(&'a self, _: &'a BindRequest) -> BoxFuture<'a, Result<(), extender::Error>> {
        Box::pin(async { Ok(()) })
    }
}

/// Claims and held binds must not lapse during a run of several minutes: their length does not
/// change what a call costs, only whether other gangs' claims still exist.
pub const SETTINGS: Settings = Settings {
    strategy: Strategy::Binpack,
    max_hold: Duration::from_secs(3600),
    bind_unmarked: false,
    hold_scheduler_gangs: false,
    gated_admission: false,
};

pub fn pod_group(namespace: &str, name: &str, min_member: u32) -> PodGroup {
    PodGroup {
        schedule_timeout: Duration::from_secs(3600),
        ..PodGroup::new(GroupKey::new(namespace, name), min_member, "default")
    }
}

/// The loaded cluster and the gangs the cases work on.
pub struct World {
    pub cache: Cache,
    pub ledger: LedgerWriter,
    pub names: Vec<String>,
    /// Gang of 16 with no claim: its claim is dropped before every call.
    pub planning: Member,
    /// Gang of 16 holding a live claim.
    pub claimed: Member,
    /// Gang of 16 that wants whole nodes: none is free, the plan fails at its first member.
    pub whole_nodes: Member,
    /// Gang of [`PARTIAL`] members of 8 GPUs where fewer nodes have 8 GPUs free: the plan places
    /// as many as fit before failing (the costliest refusal).
    pub partial: Member,
    pub partial_fitted: usize,
    /// A pod in no group.
    pub plain: Member,
    /// Gang of 16, for reserve and release (each call claims room for it first).
    pub reserving: Vec<Member>,
    /// Gang of 8, for bind to quorum through `Permits` (each call claims room for it first).
    pub quorum: Vec<Member>,
}

pub fn template() -> Value {
    let dir = env!("CARGO_MANIFEST_DIR");
    let captured = format!("{dir}/tests/golden/captured/filter.node-names.json");
    let golden = format!("{dir}/tests/golden/filter-node-names.request.json");
    let text = std::fs::read_to_string(&captured)
        .or_else(|_| std::fs::read_to_string(&golden))
        .expect("a filter request fixture under tests/golden");
    let mut request: Value = serde_json::from_str(&text).unwrap();
    request["Pod"].take()
}

pub fn build() -> World {
    let template = template();
    let (cache, mut mirror) = Cache::new();
    let names: Vec<String> = (0..NODES).map(node_name).collect();
    for i in 0..NODES {
        mirror.apply_node(node(i));
    }

    // Bound pods: the first 1,600 are members of 200 running gangs of 8.
    let mut rng = Lcg(7);
    let mut used: Vec<Resources> = vec![Resources::new(); NODES];
    let room = allocatable();
    for j in 0..PODS {
        let gpu = match rng.below(100) {
            0..=14 => 1,
            15..=26 => 2,
            27..=32 => 4,
            _ => 0,
        };
        let shape = Shape {
            cpu_m: rng.pick(&[100, 250, 500, 1000, 2000, 4000]),
            memory: rng.pick(&[128 * MIB, 512 * MIB, GIB, 2 * GIB, 4 * GIB, 8 * GIB]),
            gpu,
        };
        let requests = shape.resources();
        let start = rng.below(NODES as u64) as usize;
        let Some(n) = (0..NODES)
            .map(|k| (start + k) % NODES)
            .find(|&n| requests.fits_in_after(&room, &used[n]))
        else {
            continue;
        };
        used[n].add(&requests);
        let (namespace, group) = if j < 1600 {
            (
                format!("team-{}", (j / 8) % NAMESPACES),
                Some(format!("running-{}", j / 8)),
            )
        } else {
            (format!("team-{}", j % NAMESPACES), None)
        };
        let mut pod = Pod {
            uid: format!("bound-{j}"),
            namespace,
            name: format!("pod-{j}"),
            node_name: Some(names[n].clone()),
            phase: gangplank_core::model::PodPhase::Running,
            requests,
            pod_group: group,
            queue: None,
            priority: 0,
            ..Default::default()
        };
        pod.created = 1_700_000_000 + j as i64;
        mirror.apply_pod(pod);
    }
    for g in 0..200 {
        mirror.apply_pod_group(pod_group(
            &format!("team-{}", g % NAMESPACES),
            &format!("running-{g}"),
            8,
        ));
    }

    // Waiting gangs of 8 pending members; the first 50 hold a claim.
    let now = Instant::now();
    let waiting_shape = Shape {
        cpu_m: 2000,
        memory: 8 * GIB,
        gpu: 1,
    };
    for g in 0..100 {
        let namespace = format!("team-{}", g % NAMESPACES);
        let group = format!("waiting-{g}");
        mirror.apply_pod_group(pod_group(&namespace, &group, 8));
        let members = members(&mut mirror, &template, &namespace, &group, 8, waiting_shape);
        if g < 50 {
            let m = &members[0];
            let verdict = cache
                .ledger()
                .claim(&m.pod, &m.constraints, &names, &SETTINGS, now)
                .unwrap();
            assert!(!verdict.passed.is_empty(), "waiting gang {g} claims room");
        }
    }

    let gang_shape = Shape {
        cpu_m: 4000,
        memory: 32 * GIB,
        gpu: 2,
    };
    let mut gang = |name: &str, min: u32, shape: Shape| {
        mirror.apply_pod_group(pod_group("ml", name, min));
        members(&mut mirror, &template, "ml", name, min as usize, shape)
    };
    let planning = gang("train-planning", 16, gang_shape).swap_remove(0);
    let claimed = gang("train-claimed", 16, gang_shape).swap_remove(0);
    cache
        .ledger()
        .claim(&claimed.pod, &claimed.constraints, &names, &SETTINGS, now)
        .unwrap();
    let whole = Shape {
        cpu_m: 32_000,
        memory: 200 * GIB,
        gpu: 8,
    };
    let whole_nodes = gang("train-whole-nodes", 16, whole).swap_remove(0);
    let eight_gpus = Shape {
        cpu_m: 8000,
        memory: 64 * GIB,
        gpu: 8,
    };
    let partial = gang("train-partial", PARTIAL as u32, eight_gpus).swap_remove(0);
    let reserving = gang("train-reserving", 16, gang_shape);
    let quorum = gang("train-quorum", 8, gang_shape);

    let partial_fitted = cache.read(|s| {
        s.nodes()
            .values()
            .filter(|n| policy_mod::feasible(n, &partial.constraints).is_ok())
            .filter(|n| {
                let mut free = s.free_on(n);
                free.sub(s.claimed_on(&n.name));
                partial.pod.requests.fits_in(&free)
            })
            .count()
    });
    assert!(
        (1..PARTIAL).contains(&partial_fitted),
        "the partial gang must fit in part: {partial_fitted} nodes have room"
    );

    let plain = Member::new(api_pod(&template, "etl", "plain", None, gang_shape));
    mirror.apply_pod(plain.pod.clone());
    World {
        ledger: cache.ledger(),
        cache,
        names,
        planning,
        claimed,
        whole_nodes,
        partial,
        partial_fitted,
        plain,
        reserving,
        quorum,
    }
}

/// Creates `count` pending members of `group` in the cache and returns them.
pub fn members(
    mirror: &mut Mirror,
    template: &Value,
    namespace: &str,
    group: &str,
    count: usize,
    shape: Shape,
) -> Vec<Member> {
    (0..count)
        .map(|i| {
            let m = Member::new(api_pod(
                template,
                namespace,
                &format!("{group}-{i}"),
                Some(group),
                shape,
            ));
            mirror.apply_pod(m.pod.clone());
            m
        })
        .collect()
}

/// Filters `member` once so its gang claims room; returns the claim.
pub fn claim_for(cache: &Cache, member: &Member, names: &[String], now: Instant) -> Claim {
    cache
        .ledger()
        .claim(&member.pod, &member.constraints, names, &SETTINGS, now)
        .unwrap();
    cache.read(|s| s.ledger().claims()[&member.key()].clone())
}
