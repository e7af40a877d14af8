//! Extender benchmarks: filter, prioritize and bind bookkeeping for one pod over 5,000 candidate
//! nodes of a loaded cache, as decision functions and through the HTTP handlers.
//!
//! The design's targets (docs/DESIGN.md, "Performance targets"): filter and prioritize for one
//! pod over 5,000 candidate nodes under 1 ms at p99 in process; pass-through for pods in no group
//! under 50 µs. Criterion reports means and medians, not tails, so this bench first runs its own
//! measurement: every case is called `GP_BENCH_SAMPLES` times (default 2,000) after a warm-up,
//! each call timed alone with `Instant`, and p50, p99, mean and max are printed as a table. The
//! same closures then run under criterion. Baselines in the same run: the JSON decode of the
//! request alone (by serde into owned types; by serde borrowed, with the pod left raw; and as
//! the handlers read it, `extender::decode_args`, which splits the body by a plain scan), and
//! the pass-through paths (the floor of any call over the same body).
//!
//! The cluster is deterministic (an LCG, no randomness between runs), built only through the
//! cache's write path (`Cache::apply_node`, `apply_pod`, `apply_pod_group`) and the gang code
//! (`gang::claims::filter` creates the live claims):
//! - 5,000 nodes of 32 CPU, 256Gi, 8 GPUs and 110 pods, labelled with zone and rack; one in 20
//!   tainted `dedicated=infra:NoSchedule`, one in 100 cordoned;
//! - 50,000 bound pods of varied requests (a tenth of a core to 4 cores, 128Mi to 8Gi, a third
//!   with 1 to 4 GPUs) spread at random, about ten a node, so utilisation ranges from nearly
//!   empty to full and fewer than a hundred nodes have all 8 GPUs free;
//! - 200 running gangs of 8 (members among those pods), 100 waiting gangs of 8 pending members,
//!   50 of which hold a live claim, and the gangs the cases below filter.
//!
//! HTTP bodies are the captured scheduler request (`tests/golden/captured/filter.node-names.json`,
//! or the hand-written golden request before captures exist) with the pod's identity, group
//! label and requests replaced and 5,000 `NodeNames`.
//!
//! Reading the numbers: the gang paths are memory-bound (per candidate, one hash lookup by node
//! name into the cache's node records, then that record's free room and sums; a plan reads every
//! record once), so they swing with whatever
//! else runs on the machine far more than the pass-through paths do. `decide/*` calls the same function on the
//! same candidate list back to back, with the cache's lines warm; `http/*` adds the decode and
//! encode and their allocations, which also evict those lines, and is the figure to compare with
//! the target. Compare runs only from the same session, and report the load they ran under.
//!
//! Run: `cargo bench --bench extender` (the table comes first; add a criterion filter such as
//! `-- http/` to run only some cases, `GP_BENCH_SAMPLES=500` for a shorter table, `-- --quick`
//! for a short criterion run, `GP_BENCH_CRITERION=0` for the table alone).
//!
//! For a comparison the load cannot blur, count instructions: keep both bench binaries
//! (`target/release/deps/extender-*`) and run each as `GP_BENCH_SAMPLES=20
//! GP_BENCH_CRITERION=0 valgrind --tool=callgrind <binary> --bench <case>`, once more with a
//! filter that matches no case (the cluster alone), and subtract; divide by the calls (20 plus
//! 2 warm-up per case). That count includes the bench's own checks of each answer; for the
//! handler's work alone (decode, decide, encode) of an `http/*` case, collect only inside the
//! handler: `valgrind --tool=callgrind --collect-atstart=no
//! '--toggle-collect=<F as axum::handler::Handler<*>>::call::{{closure}}' <binary> --bench <case>`
//! and divide the total by the calls.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode, header};
use criterion::Criterion;
use futures::future::BoxFuture;
use gangplank::cache::{Cache, LedgerWriter, Mirror, convert};
use gangplank::extender::wire::{ExtenderArgs, ExtenderArgsRef, HostScore};
use gangplank::extender::{self, BindRequest, Binder, Extender, Permits};
use gangplank_core::claims::Settings;
use gangplank_core::model::{Claim, GroupKey, Node, Pod, PodGroup, Resources};
use gangplank_core::policy as policy_mod;
use gangplank_core::policy::constraints::Constraints;
use gangplank_core::policy::placement::Strategy;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;
use common::Lcg;

const NODES: usize = 5_000;
const PODS: usize = 50_000;
/// Nodes the scheduler samples at 5,000 nodes with its default `percentageOfNodesToScore`
/// (adaptive: 50% - nodes/125 = 10%): what a pass-through really receives on such a cluster.
const SAMPLED: usize = 500;
const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;
const NAMESPACES: usize = 10;
/// Members of the gang that fits only in part (8 GPUs each).
const PARTIAL: usize = 128;

fn node_name(i: usize) -> String {
    format!("kwok-node-{i}")
}

fn node(i: usize) -> Node {
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

fn allocatable() -> Resources {
    Resources::from([
        ("cpu", 32_000),
        ("memory", 256 * GIB),
        ("nvidia.com/gpu", 8),
        ("pods", 110),
    ])
}

/// Requests as the API writes them (`cpu`, `memory`, `nvidia.com/gpu`), for pod manifests.
#[derive(Clone, Copy)]
struct Shape {
    cpu_m: i64,
    memory: i64,
    gpu: i64,
}

impl Shape {
    fn requests(self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("cpu", format!("{}m", self.cpu_m)),
            ("memory", format!("{}Mi", self.memory / MIB)),
        ];
        if self.gpu > 0 {
            out.push(("nvidia.com/gpu", self.gpu.to_string()));
        }
        out
    }

    fn resources(self) -> Resources {
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
fn api_pod(
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
struct Member {
    manifest: Value,
    pod: Pod,
    constraints: Constraints,
}

impl Member {
    fn new(manifest: Value) -> Member {
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

    fn key(&self) -> GroupKey {
        GroupKey::of(&self.pod).expect("a gang member")
    }

    /// A filter or prioritize request body for this pod over `names`.
    fn body(&self, names: &[String]) -> Bytes {
        Bytes::from(
            serde_json::to_vec(&json!({
                "Pod": self.manifest,
                "Nodes": null,
                "NodeNames": names,
            }))
            .unwrap(),
        )
    }

    fn bind_request(&self, node: &str) -> BindRequest {
        BindRequest {
            namespace: self.pod.namespace.clone(),
            name: self.pod.name.clone(),
            uid: self.pod.uid.clone(),
            node: node.into(),
        }
    }
}

/// A binder that binds nothing and always succeeds.
struct NoopBinder;

impl Binder for NoopBinder {
    fn bind<'a>(&'a self, _: &'a BindRequest) -> BoxFuture<'a, Result<(), extender::Error>> {
        Box::pin(async { Ok(()) })
    }
}

/// Claims and held binds must not lapse during a run of several minutes: their length does not
/// change what a call costs, only whether other gangs' claims still exist.
const SETTINGS: Settings = Settings {
    strategy: Strategy::Binpack,
    max_hold: Duration::from_secs(3600),
    bind_unmarked: false,
};

fn pod_group(namespace: &str, name: &str, min_member: u32) -> PodGroup {
    PodGroup {
        schedule_timeout: Duration::from_secs(3600),
        ..PodGroup::new(GroupKey::new(namespace, name), min_member, "default")
    }
}

/// The loaded cluster and the gangs the cases work on.
struct World {
    cache: Cache,
    ledger: LedgerWriter,
    names: Vec<String>,
    /// Gang of 16 with no claim: its claim is dropped before every call.
    planning: Member,
    /// Gang of 16 holding a live claim.
    claimed: Member,
    /// Gang of 16 that wants whole nodes: none is free, the plan fails at its first member.
    whole_nodes: Member,
    /// Gang of [`PARTIAL`] members of 8 GPUs where fewer nodes have 8 GPUs free: the plan places
    /// as many as fit before failing (the costliest refusal).
    partial: Member,
    partial_fitted: usize,
    /// A pod in no group.
    plain: Member,
    /// Gang of 16, for reserve and release (each call claims room for it first).
    reserving: Vec<Member>,
    /// Gang of 8, for bind to quorum through `Permits` (each call claims room for it first).
    quorum: Vec<Member>,
}

fn template() -> Value {
    let dir = env!("CARGO_MANIFEST_DIR");
    let captured = format!("{dir}/tests/golden/captured/filter.node-names.json");
    let golden = format!("{dir}/tests/golden/filter-node-names.request.json");
    let text = std::fs::read_to_string(&captured)
        .or_else(|_| std::fs::read_to_string(&golden))
        .expect("a filter request fixture under tests/golden");
    let mut request: Value = serde_json::from_str(&text).unwrap();
    request["Pod"].take()
}

fn build() -> World {
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
fn members(
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
fn claim_for(cache: &Cache, member: &Member, names: &[String], now: Instant) -> Claim {
    cache
        .ledger()
        .claim(&member.pod, &member.constraints, names, &SETTINGS, now)
        .unwrap();
    cache.read(|s| s.ledger().claims()[&member.key()].clone())
}

/// The prioritize decision for a gang member as `extender::handlers::prioritize` makes it,
/// under the cache's read lock.
fn prioritize<'a>(cache: &Cache, pod: &Pod, candidates: &'a [String]) -> Vec<HostScore<'a>> {
    cache.read(|s| extender::handlers::gang_scores(s, pod, candidates, SETTINGS.strategy))
}

/// One benchmark case: each call runs one untimed reset (if any) and one timed call, and
/// returns the time of the call alone.
struct Case<'a> {
    name: String,
    call: Box<dyn FnMut() -> Duration + 'a>,
}

fn case<'a>(name: impl Into<String>, call: impl FnMut() -> Duration + 'a) -> Case<'a> {
    Case {
        name: name.into(),
        call: Box::new(call),
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> Duration {
    let started = Instant::now();
    black_box(f());
    started.elapsed()
}

/// Posts `body` to the router and reads the whole answer; returns the time of that alone.
fn post(
    rt: &tokio::runtime::Runtime,
    router: &Router,
    verb: &str,
    body: &Bytes,
    expect: impl FnOnce(&[u8]),
) -> Duration {
    let request = Request::post(format!("/scheduler/{verb}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.clone()))
        .unwrap();
    let (elapsed, status, bytes) = rt.block_on(async {
        let started = Instant::now();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (started.elapsed(), status, bytes)
    });
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    expect(&bytes);
    elapsed
}

fn filter_result(bytes: &[u8]) -> extender::wire::ExtenderFilterResult {
    serde_json::from_slice(bytes).expect("a filter answer")
}

fn cases<'a>(w: &'a World, rt: &'a tokio::runtime::Runtime) -> Vec<Case<'a>> {
    let names = &w.names;
    let sampled: Vec<String> = names.iter().step_by(NODES / SAMPLED).cloned().collect();
    let router = extender::router(Arc::new(Extender::new(
        w.cache.clone(),
        Arc::new(NoopBinder),
        SETTINGS,
    )));
    let cache = &w.cache;
    let ledger = &w.ledger;
    let filter = move |m: &Member| {
        ledger
            .claim(&m.pod, &m.constraints, names, &SETTINGS, Instant::now())
            .unwrap()
    };
    let drop_claim = move |m: &Member| {
        ledger.release_gang(&m.key(), &[]);
    };

    let mut out = Vec::new();

    // ----- decision functions
    out.push(case("decide/filter/no-group", move || {
        timed(|| filter(&w.plain))
    }));
    out.push(case("decide/filter/gang-plans-claim", move || {
        drop_claim(&w.planning);
        timed(|| {
            let v = filter(&w.planning);
            assert!(!v.passed.is_empty());
            v
        })
    }));
    out.push(case("decide/filter/gang-has-claim", move || {
        timed(|| filter(&w.claimed))
    }));
    out.push(case(
        "decide/filter/gang-does-not-fit/first-member",
        move || {
            timed(|| {
                let v = filter(&w.whole_nodes);
                assert_eq!(v.failed.len(), NODES);
                v
            })
        },
    ));
    out.push(case(
        format!(
            "decide/filter/gang-does-not-fit/after-{}-of-{PARTIAL}",
            w.partial_fitted
        ),
        move || {
            timed(|| {
                let v = filter(&w.partial);
                assert_eq!(v.failed.len(), NODES);
                v
            })
        },
    ));
    out.push(case("decide/prioritize/gang-has-claim", move || {
        timed(|| prioritize(cache, &w.claimed.pod, names))
    }));

    // ----- bind bookkeeping
    // Each call starts from the gang's claim made again as its first filter makes it; the
    // member binds on the node of the claim's first slot.
    let reserving = &w.reserving;
    let reset_reserving = move || -> String {
        ledger.release_gang(&reserving[0].key(), &[reserving[0].pod.uid.clone()]);
        claim_for(cache, &reserving[0], names, Instant::now()).slots[0]
            .node
            .clone()
    };
    let reserve = move |node: &str| {
        ledger
            .reserve(
                &reserving[0].pod.uid,
                "ml/train-reserving-0",
                node,
                &SETTINGS,
                Instant::now(),
            )
            .unwrap()
    };
    out.push(case("bind/claims::reserve", move || {
        let node = reset_reserving();
        timed(|| reserve(&node))
    }));
    out.push(case("bind/claims::release", move || {
        let node = reset_reserving();
        reserve(&node);
        timed(|| ledger.release_gang(&reserving[0].key(), &[reserving[0].pod.uid.clone()]))
    }));

    let quorum = &w.quorum;
    let permits = Arc::new(Permits::new(cache.ledger(), Arc::new(NoopBinder), SETTINGS));
    let uids: Vec<String> = quorum.iter().map(|m| m.pod.uid.clone()).collect();
    let key = quorum[0].key();
    out.push(case("bind/permits/8th-member-reaches-quorum", move || {
        ledger.release_gang(&key, &uids);
        let claim = claim_for(cache, &quorum[0], names, Instant::now());
        let requests: Vec<BindRequest> = quorum
            .iter()
            .zip(claim.slots.iter().cycle())
            .map(|(m, slot)| m.bind_request(&slot.node))
            .collect();
        rt.block_on(async {
            let (last, held) = requests.split_last().unwrap();
            let handles: Vec<_> = held
                .iter()
                .cloned()
                .map(|r| {
                    let permits = permits.clone();
                    tokio::spawn(async move { permits.bind(r).await })
                })
                .collect();
            while permits.held() < held.len() {
                tokio::task::yield_now().await;
            }
            let started = Instant::now();
            permits.bind(last.clone()).await.unwrap();
            let elapsed = started.elapsed();
            for h in handles {
                h.await.unwrap().unwrap();
            }
            elapsed
        })
    }));

    // ----- through the HTTP router: decode, decide, encode
    let all = |m: &Member| m.body(names);
    let plain_body = all(&w.plain);
    let plain_sampled = w.plain.body(&sampled);
    out.push(case("baseline/json-decode-only/5000-names", {
        let body = plain_body.clone();
        move || timed(|| serde_json::from_slice::<ExtenderArgs>(&body).unwrap())
    }));
    out.push(case("baseline/json-decode-only/500-names", {
        let body = plain_sampled.clone();
        move || timed(|| serde_json::from_slice::<ExtenderArgs>(&body).unwrap())
    }));
    for (label, body) in [("5000", plain_body.clone()), ("500", plain_sampled.clone())] {
        out.push(case(format!("baseline/decode-args/{label}-names"), {
            let body = body.clone();
            move || {
                timed(|| {
                    extender::decode_args(extender::Verb::Filter, &body)
                        .unwrap()
                        .pod
                        .get()
                        .len()
                })
            }
        }));
        out.push(case(
            format!("baseline/json-decode-borrowed/{label}-names"),
            {
                move || {
                    timed(|| {
                        serde_json::from_slice::<ExtenderArgsRef>(&body)
                            .unwrap()
                            .pod
                            .get()
                            .len()
                    })
                }
            },
        ));
    }
    for (label, body) in [("5000", plain_body.clone()), ("500", plain_sampled)] {
        let router = router.clone();
        let count = if label == "5000" { NODES } else { SAMPLED };
        out.push(case(format!("http/filter/no-group/{label}-names"), {
            let router = router.clone();
            let body = body.clone();
            move || {
                post(rt, &router, "filter", &body, |b| {
                    assert_eq!(filter_result(b).node_names.unwrap().len(), count)
                })
            }
        }));
        out.push(case(format!("http/prioritize/no-group/{label}-names"), {
            move || post(rt, &router, "prioritize", &body, |_| {})
        }));
    }
    let planning_body = all(&w.planning);
    out.push(case("http/filter/gang-plans-claim", {
        let router = router.clone();
        move || {
            drop_claim(&w.planning);
            post(rt, &router, "filter", &planning_body, |b| {
                assert!(!filter_result(b).node_names.unwrap().is_empty())
            })
        }
    }));
    let claimed_body = all(&w.claimed);
    out.push(case("http/filter/gang-has-claim", {
        let router = router.clone();
        let body = claimed_body.clone();
        move || post(rt, &router, "filter", &body, |_| {})
    }));
    out.push(case("http/prioritize/gang-has-claim", {
        let router = router.clone();
        move || post(rt, &router, "prioritize", &claimed_body, |_| {})
    }));
    // What the scheduler really sends at 5,000 nodes: a sample of 500 (filter), and prioritize
    // only over what passed filter.
    let claimed_sampled = w.claimed.body(&sampled);
    out.push(case("http/filter/gang-has-claim/500-names", {
        let router = router.clone();
        let body = claimed_sampled.clone();
        move || post(rt, &router, "filter", &body, |_| {})
    }));
    out.push(case("http/prioritize/gang-has-claim/500-names", {
        let router = router.clone();
        move || post(rt, &router, "prioritize", &claimed_sampled, |_| {})
    }));
    let whole_body = all(&w.whole_nodes);
    out.push(case("http/filter/gang-does-not-fit/first-member", {
        let router = router.clone();
        move || {
            post(rt, &router, "filter", &whole_body, |b| {
                assert_eq!(filter_result(b).failed_nodes.len(), NODES)
            })
        }
    }));
    let partial_body = all(&w.partial);
    out.push(case(
        format!(
            "http/filter/gang-does-not-fit/after-{}-of-{PARTIAL}",
            w.partial_fitted
        ),
        {
            let router = router.clone();
            move || post(rt, &router, "filter", &partial_body, |_| {})
        },
    ));
    let bind_plain = Bytes::from(
        serde_json::to_vec(&json!({
            "PodName": "plain", "PodNamespace": "etl", "PodUID": "uid-etl-plain",
            "Node": names[1],
        }))
        .unwrap(),
    );
    out.push(case("http/bind/no-group", {
        let router = router.clone();
        move || {
            post(rt, &router, "bind", &bind_plain, |b| {
                assert_eq!(b, br#"{"Error":""}"#)
            })
        }
    }));
    out
}

/// The criterion filter given on the command line (`cargo bench --bench extender -- FILTER`),
/// so the table shows the same cases criterion runs.
fn filter_arg() -> Option<String> {
    const WITH_VALUE: [&str; 16] = [
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--output-format",
        "--profile-time",
        "--color",
        "--format",
        "--plotting-backend",
    ];
    let mut args = std::env::args().skip(1);
    let mut filter = None;
    while let Some(arg) = args.next() {
        if WITH_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filter = Some(arg);
        }
    }
    filter
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Runs every selected case `samples` times, one call timed at a time, and prints p50/p99.
fn print_percentiles(cases: &mut [Case<'_>], samples: usize, filter: Option<&str>) {
    println!(
        "\nper-call latency, {samples} calls per case after {} warm-up calls, each timed alone with Instant",
        samples / 10
    );
    println!(
        "{:<52} {:>11} {:>11} {:>11} {:>11}",
        "case", "p50", "p99", "mean", "max"
    );
    for c in cases.iter_mut() {
        if filter.is_some_and(|f| !c.name.contains(f)) {
            continue;
        }
        for _ in 0..samples / 10 {
            (c.call)();
        }
        let mut times: Vec<Duration> = (0..samples).map(|_| (c.call)()).collect();
        times.sort();
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        println!(
            "{:<52} {:>11} {:>11} {:>11} {:>11}",
            c.name,
            micros(percentile(&times, 50.0)),
            micros(percentile(&times, 99.0)),
            micros(mean),
            micros(*times.last().unwrap()),
        );
    }
    println!();
}

fn main() {
    let test_mode = std::env::args().any(|a| a == "--test" || a == "--list");
    let started = Instant::now();
    let world = build();
    let (bound, groups, claims) = world.cache.read(|s| {
        let with_pods = s.nodes().slots().filter(|n| !n.used.is_empty()).count();
        (with_pods, s.groups().len(), s.ledger().claims().len())
    });
    if !test_mode {
        println!(
            "cluster: {} nodes ({} with pods), {} pods, {} groups, {} live claims; built in {:?}",
            world.cache.node_count(),
            bound,
            world.cache.pod_count(),
            groups,
            claims,
            started.elapsed()
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut cases = cases(&world, &rt);
    let filter = filter_arg();
    let samples = std::env::var("GP_BENCH_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    if !test_mode && samples > 0 {
        print_percentiles(&mut cases, samples, filter.as_deref());
    }

    if std::env::var("GP_BENCH_CRITERION").is_ok_and(|v| v == "0") {
        return;
    }
    let mut criterion = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = criterion.benchmark_group("extender_5000_nodes");
    for c in cases.iter_mut() {
        group.bench_function(&c.name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| (c.call)()).sum())
        });
    }
    group.finish();
    criterion.final_summary();
}
