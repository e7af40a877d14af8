//! Requests captured from a real kube-scheduler (`tests/golden/captured/`, written by
//! `e2e/capture-golden`; see the README there) fed through the extender's router, against a cache
//! built to match the cluster they were captured on: three kwok nodes of 32 CPUs, 256Gi and 8
//! GPUs, the gang `ml/train` (pods `train-0` and `train-1`, one CPU and one GPU each), and for
//! the preemption one low-priority filler per node and the high-priority pod `ml/urgent`.
//!
//! Each test checks the whole answer as JSON: every Go field name present, `null` exactly where
//! the scheduler itself sends null, and decisions that follow from the cache (claims, scores,
//! victims, held binds).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::future::BoxFuture;
use gangplank::cache::{Cache, Mirror, convert};
use gangplank::extender::{self, BindRequest, Binder, Extender};
use gangplank_core::claims::Settings;
use gangplank_core::model::{GroupKey, PodGroup, PodPhase, Resources};
use gangplank_core::policy::placement::Strategy;
use http_body_util::BodyExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower::ServiceExt;

const NODES: [&str; 3] = ["kwok-node-0", "kwok-node-1", "kwok-node-2"];

/// A binder that records what it was asked and succeeds.
#[derive(Default)]
struct FakeBinder {
    calls: Mutex<Vec<BindRequest>>,
}

impl Binder for FakeBinder {
    fn bind<'a>(&'a self, request: &'a BindRequest) -> BoxFuture<'a, Result<(), extender::Error>> {
        self.calls.lock().unwrap().push(request.clone());
        Box::pin(async { Ok(()) })
    }
}

fn captured_text(name: &str) -> String {
    let path = format!(
        "{}/tests/golden/captured/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn captured(name: &str) -> Value {
    serde_json::from_str(&captured_text(name)).unwrap()
}

/// The two ways the scheduler talks to an extender, and the fixtures captured in each.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `nodeCacheCapable: true`.
    NodeNames,
    /// `nodeCacheCapable: false`.
    Nodes,
}

impl Mode {
    fn fixture(self, verb: &str) -> String {
        let suffix = match (self, verb) {
            (Mode::NodeNames, "preempt") => "meta-victims",
            (Mode::Nodes, "preempt") => "victims",
            (Mode::NodeNames, _) => "node-names",
            (Mode::Nodes, _) => "nodes",
        };
        format!("{verb}.{suffix}.json")
    }
}

/// The kwok nodes as the API server described them to the scheduler (the full Node objects of
/// the `nodeCacheCapable: false` capture), converted as the node watcher would.
fn nodes() -> Vec<gangplank_core::model::Node> {
    captured("filter.nodes.json")["Nodes"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(n.clone()).unwrap();
            convert::node(&node).unwrap()
        })
        .collect()
}

/// The pod a captured request carries, as the pod watcher would store it.
fn pod_of(manifest: &Value) -> gangplank_core::model::Pod {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(manifest.clone()).unwrap();
    convert::pod(&pod).unwrap()
}

/// The gang's member `train-0` as captured in `mode`, and its sibling `train-1` (same spec).
fn members(mode: Mode) -> (gangplank_core::model::Pod, gangplank_core::model::Pod) {
    let train_0 = pod_of(&captured(&mode.fixture("filter"))["Pod"]);
    let train_1 = gangplank_core::model::Pod {
        uid: "train-1-uid".into(),
        name: "train-1".into(),
        ..train_0.clone()
    };
    (train_0, train_1)
}

/// The capture cluster: nodes, the PodGroup `ml/train` of `min_member` (30 s schedule timeout,
/// as the capture script creates it) and its two members, pending.
fn cluster(mode: Mode, min_member: u32) -> (Cache, Mirror) {
    let (cache, mut mirror) = Cache::new();
    for node in nodes() {
        mirror.apply_node(node);
    }
    mirror.apply_pod_group(PodGroup {
        schedule_timeout: Duration::from_secs(30),
        ..PodGroup::new(GroupKey::new("ml", "train"), min_member, "default")
    });
    let (train_0, train_1) = members(mode);
    mirror.apply_pod(train_0);
    mirror.apply_pod(train_1);
    (cache, mirror)
}

fn router(cache: Cache, binder: Arc<FakeBinder>) -> Router {
    let settings = Settings {
        strategy: Strategy::Binpack,
        max_hold: Duration::from_secs(60),
        bind_unmarked: false,
        hold_scheduler_gangs: false,
        gated_admission: false,
    };
    extender::router(Arc::new(Extender::new(cache, binder, settings)))
}

async fn post(router: &Router, verb: &str, body: String) -> Value {
    let request = Request::post(format!("/scheduler/{verb}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{verb} answer is not JSON ({e}): {text}"))
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

#[test]
fn captured_requests_have_the_shape_the_protocol_describes() {
    let args = ["NodeNames", "Nodes", "Pod"];
    let names = captured("filter.node-names.json");
    let full = captured("filter.nodes.json");
    for request in [&names, &captured("prioritize.node-names.json")] {
        assert_eq!(keys(request), args);
        assert_eq!(request["Nodes"], Value::Null);
        assert_eq!(request["NodeNames"], json!(NODES));
    }
    for request in [&full, &captured("prioritize.nodes.json")] {
        assert_eq!(keys(request), args);
        assert_eq!(request["NodeNames"], Value::Null);
        let items = request["Nodes"]["items"].as_array().unwrap();
        let names: Vec<&str> = items
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, NODES);
    }
    let preempt = ["NodeNameToMetaVictims", "NodeNameToVictims", "Pod"];
    let meta = captured("preempt.meta-victims.json");
    assert_eq!(keys(&meta), preempt);
    assert_eq!(meta["NodeNameToVictims"], Value::Null);
    assert_eq!(
        keys(&meta["NodeNameToMetaVictims"]["kwok-node-0"]),
        ["NumPDBViolations", "Pods"]
    );
    let victims = captured("preempt.victims.json");
    assert_eq!(keys(&victims), preempt);
    assert_eq!(victims["NodeNameToMetaVictims"], Value::Null);
    assert_eq!(
        keys(&victims["NodeNameToVictims"]["kwok-node-0"]),
        ["NumPDBViolations", "Pods"]
    );
    let bind = captured("bind.json");
    assert_eq!(keys(&bind), ["Node", "PodName", "PodNamespace", "PodUID"]);
    // Only pods with the marker resource reach Gangplank (managedResources).
    for request in [&names, &full, &meta, &victims] {
        let requests = &request["Pod"]["spec"]["containers"][0]["resources"]["requests"];
        assert_eq!(requests["scheduling.gangplank.dev/managed"], "1");
    }
}

#[tokio::test]
async fn filter_with_node_names_keeps_every_node_and_claims_room_for_the_whole_gang() {
    let cache = cluster(Mode::NodeNames, 2).0;
    let router = router(cache.clone(), Arc::default());
    let answer = post(&router, "filter", captured_text("filter.node-names.json")).await;
    assert_eq!(
        answer,
        json!({
            "Nodes": null,
            "NodeNames": NODES,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": ""
        })
    );
    let slots: Vec<String> = cache.read(|s| {
        s.ledger().claims()[&GroupKey::new("ml", "train")]
            .slots
            .iter()
            .map(|slot| slot.node.clone())
            .collect()
    });
    assert_eq!(
        slots,
        ["kwok-node-0", "kwok-node-0"],
        "binpack: both members on one node"
    );
}

#[tokio::test]
async fn filter_with_full_nodes_answers_the_passing_nodes_in_full_and_says_why_the_others_fail() {
    let (cache, mut mirror) = cluster(Mode::Nodes, 2);
    // Something outside the gang holds every GPU of kwok-node-1.
    mirror.apply_pod(gangplank_core::model::Pod {
        uid: "gpu-hog".into(),
        namespace: "other".into(),
        name: "gpu-hog".into(),
        node_name: Some("kwok-node-1".into()),
        phase: PodPhase::Running,
        requests: Resources::from([("nvidia.com/gpu", 8), ("pods", 1)]),
        ..Default::default()
    });
    let router = router(cache, Arc::default());
    let request = captured("filter.nodes.json");
    let answer = post(&router, "filter", captured_text("filter.nodes.json")).await;
    // The passing nodes come back as sent, plus `apiVersion` and `kind`: k8s-openapi always
    // writes them, the scheduler leaves them out (its cached objects have an empty TypeMeta), and
    // its decoder takes them either way.
    let typed = |node: &Value| {
        let mut node = node.clone();
        node["apiVersion"] = "v1".into();
        node["kind"] = "Node".into();
        node
    };
    let items = request["Nodes"]["items"].as_array().unwrap();
    assert_eq!(
        answer,
        json!({
            "Nodes": {
                "apiVersion": "v1",
                "kind": "NodeList",
                "metadata": request["Nodes"]["metadata"],
                "items": [typed(&items[0]), typed(&items[2])]
            },
            "NodeNames": ["kwok-node-0", "kwok-node-2"],
            "FailedNodes": {"kwok-node-1": "insufficient nvidia.com/gpu"},
            "FailedAndUnresolvableNodes": {},
            "Error": ""
        })
    );
}

#[tokio::test]
async fn a_gang_that_can_never_fit_is_refused_on_every_node_as_unresolvable() {
    let router = router(cluster(Mode::NodeNames, 100).0, Arc::default());
    let answer = post(&router, "filter", captured_text("filter.node-names.json")).await;
    let why = "gang ml/train (minMember 100) can never fit: it needs 100 more pods of \
               {cpu: 1, memory: 1Gi, pods: 1, nvidia.com/gpu: 1} and the nodes this pod may use \
               hold only 24 even when empty";
    assert_eq!(
        answer,
        json!({
            "Nodes": null,
            "NodeNames": [],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {
                "kwok-node-0": why, "kwok-node-1": why, "kwok-node-2": why
            },
            "Error": ""
        })
    );
}

/// After filter claimed both slots on kwok-node-0, prioritize sends the member there: the
/// claimed node scores the maximum, the others what binpack gives one small pod on an empty
/// node (0 of 10).
async fn prioritize_prefers_the_claimed_node(mode: Mode) {
    let router = router(cluster(mode, 2).0, Arc::default());
    post(&router, "filter", captured_text(&mode.fixture("filter"))).await;
    let answer = post(
        &router,
        "prioritize",
        captured_text(&mode.fixture("prioritize")),
    )
    .await;
    assert_eq!(
        answer,
        json!([
            {"Host": "kwok-node-0", "Score": 10},
            {"Host": "kwok-node-1", "Score": 0},
            {"Host": "kwok-node-2", "Score": 0}
        ]),
        "{mode:?}"
    );
}

#[tokio::test]
async fn prioritize_with_node_names_prefers_the_node_of_the_gangs_claim() {
    prioritize_prefers_the_claimed_node(Mode::NodeNames).await;
}

#[tokio::test]
async fn prioritize_with_full_nodes_prefers_the_node_of_the_gangs_claim() {
    prioritize_prefers_the_claimed_node(Mode::Nodes).await;
}

/// The victims the scheduler proposed, node by node, as (node, UID).
fn proposed(request: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(meta) = request["NodeNameToMetaVictims"].as_object() {
        for (node, victims) in meta {
            for pod in victims["Pods"].as_array().unwrap() {
                out.push((node.clone(), pod["UID"].as_str().unwrap().to_owned()));
            }
        }
    }
    if let Some(full) = request["NodeNameToVictims"].as_object() {
        for (node, victims) in full {
            for pod in victims["Pods"].as_array().unwrap() {
                let uid = pod["metadata"]["uid"].as_str().unwrap();
                out.push((node.clone(), uid.to_owned()));
            }
        }
    }
    out
}

/// The capture cluster after the fillers were bound: one low-priority pod (golden-low, 100) per
/// node, with the UIDs the scheduler proposes as victims; `group` puts the filler on the named
/// node into a gang instead.
fn filled_cluster(request: &Value, gang_on: Option<&str>) -> (Cache, Mirror) {
    let (cache, mut mirror) = cluster(Mode::NodeNames, 2);
    for (i, (node, uid)) in proposed(request).into_iter().enumerate() {
        let in_gang = gang_on == Some(node.as_str());
        mirror.apply_pod(gangplank_core::model::Pod {
            uid,
            namespace: "ml".into(),
            name: format!("filler-{i}"),
            node_name: Some(node),
            phase: PodPhase::Running,
            requests: Resources::from([("cpu", 30_000), ("nvidia.com/gpu", 1), ("pods", 1)]),
            priority: 100,
            pod_group: in_gang.then(|| "fill".to_owned()),
            ..Default::default()
        });
    }
    (cache, mirror)
}

/// Every proposed victim has a lower priority than ml/urgent (golden-high, 1000) and belongs to
/// no gang: every node is kept with its victims, answered in the Meta form.
async fn preempt_keeps_every_node(mode: Mode) {
    let request = captured(&mode.fixture("preempt"));
    assert_eq!(request["Pod"]["metadata"]["name"], "urgent");
    assert_eq!(request["Pod"]["spec"]["priority"], 1000);
    let router = router(filled_cluster(&request, None).0, Arc::default());
    let answer = post(&router, "preempt", captured_text(&mode.fixture("preempt"))).await;
    let mut expected = serde_json::Map::new();
    for (node, uid) in proposed(&request) {
        expected.insert(node, json!({"Pods": [{"UID": uid}], "NumPDBViolations": 0}));
    }
    assert_eq!(expected.len(), 3);
    assert_eq!(
        answer,
        json!({"NodeNameToMetaVictims": expected}),
        "{mode:?}"
    );
}

#[tokio::test]
async fn preempt_with_meta_victims_keeps_every_node_whose_victim_has_lower_priority() {
    preempt_keeps_every_node(Mode::NodeNames).await;
}

#[tokio::test]
async fn preempt_with_full_victims_answers_in_the_meta_form() {
    preempt_keeps_every_node(Mode::Nodes).await;
}

#[tokio::test]
async fn preempt_drops_the_node_whose_victim_would_leave_its_gang_below_min_member() {
    let request = captured("preempt.meta-victims.json");
    let (cache, mut mirror) = filled_cluster(&request, Some("kwok-node-1"));
    // The filler on kwok-node-1 is one of two placed members of a gang of two.
    mirror.apply_pod_group(PodGroup {
        schedule_timeout: Duration::from_secs(30),
        ..PodGroup::new(GroupKey::new("ml", "fill"), 2, "default")
    });
    mirror.apply_pod(gangplank_core::model::Pod {
        uid: "fill-partner".into(),
        namespace: "ml".into(),
        name: "fill-partner".into(),
        node_name: Some("kwok-node-2".into()),
        phase: PodPhase::Running,
        requests: Resources::from([("cpu", 1_000), ("pods", 1)]),
        priority: 100,
        pod_group: Some("fill".into()),
        ..Default::default()
    });
    let router = router(cache, Arc::default());
    let answer = post(
        &router,
        "preempt",
        captured_text("preempt.meta-victims.json"),
    )
    .await;
    let mut expected = request["NodeNameToMetaVictims"].clone();
    expected.as_object_mut().unwrap().remove("kwok-node-1");
    assert_eq!(answer, json!({"NodeNameToMetaVictims": expected}));
}

#[tokio::test]
async fn preempt_drops_the_node_whose_victim_gangplank_does_not_know() {
    let request = captured("preempt.meta-victims.json");
    let (cache, mut mirror) = filled_cluster(&request, None);
    let unknown = proposed(&request)
        .into_iter()
        .find(|(node, _)| node == "kwok-node-2")
        .unwrap()
        .1;
    mirror.delete_pod(&unknown);
    let router = router(cache, Arc::default());
    let answer = post(
        &router,
        "preempt",
        captured_text("preempt.meta-victims.json"),
    )
    .await;
    let mut expected = request["NodeNameToMetaVictims"].clone();
    expected.as_object_mut().unwrap().remove("kwok-node-2");
    assert_eq!(answer, json!({"NodeNameToMetaVictims": expected}));
}

#[tokio::test]
async fn bind_of_the_member_that_completes_the_gang_creates_its_binding_at_once() {
    let (cache, mut mirror) = cluster(Mode::NodeNames, 2);
    let (_, train_1) = members(Mode::NodeNames);
    mirror.apply_pod(gangplank_core::model::Pod {
        node_name: Some("kwok-node-0".into()),
        phase: PodPhase::Running,
        ..train_1
    });
    let binder = Arc::new(FakeBinder::default());
    let router = router(cache, binder.clone());
    let request = captured("bind.json");
    let answer = post(&router, "bind", captured_text("bind.json")).await;
    assert_eq!(answer, json!({"Error": ""}));
    assert_eq!(
        *binder.calls.lock().unwrap(),
        vec![BindRequest {
            namespace: "ml".into(),
            name: "train-0".into(),
            uid: request["PodUID"].as_str().unwrap().into(),
            node: request["Node"].as_str().unwrap().into(),
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn bind_without_quorum_is_held_until_the_gang_times_out_and_binds_nothing() {
    let binder = Arc::new(FakeBinder::default());
    let router = router(cluster(Mode::NodeNames, 2).0, binder.clone());
    let started = tokio::time::Instant::now();
    let answer = post(&router, "bind", captured_text("bind.json")).await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(30),
        "the PodGroup's timeout"
    );
    assert_eq!(
        answer,
        json!({
            "Error": "failed to bind pod ml/train-0 to node kwok-node-0: gang ml/train: 1 of 2 \
                      members placed, and no other within 30s; released them so the scheduler \
                      retries the gang"
        })
    );
    assert!(binder.calls.lock().unwrap().is_empty());
}

#[test]
fn the_no_node_cache_config_is_the_shipped_one_but_for_node_cache_capable() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let shipped =
        std::fs::read_to_string(format!("{dir}/scheduler-config/gangplank.yaml")).unwrap();
    let copy =
        std::fs::read_to_string(format!("{dir}/e2e/config/gangplank-no-node-cache.yaml")).unwrap();
    // The copy starts with its own comment saying what it is for.
    let body = copy
        .split_once("\n# KubeSchedulerConfiguration")
        .map(|(_, rest)| format!("# KubeSchedulerConfiguration{rest}"))
        .expect("the copy keeps the shipped file's first line");
    assert_eq!(
        body,
        shipped.replace("  nodeCacheCapable: true\n", "  nodeCacheCapable: false\n")
    );
    assert_ne!(body, shipped);
}
