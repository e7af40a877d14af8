//! The extender over HTTP, without sockets: requests go through the real axum router with
//! `oneshot`, bodies are the golden fixtures in `tests/golden/` (the exact wire format of a
//! stock kube-scheduler: capitalised Go field names, `null` for nil), and responses are
//! compared as JSON with the golden answers.
//!
//! The fixtures were written by hand from `shared/PROTOCOL.md` and the Go types; the e2e
//! harness can replace the requests with captured ones (`gangplank serve --capture-dir`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::future::BoxFuture;
use gangplank::cache::{Cache, Mirror};
use gangplank::extender::{self, BindRequest, Binder, Extender};
use gangplank_core::admit::plan::{Decision, Hold};
use gangplank_core::claims::Settings;
use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, PodPhase, Resources};
use gangplank_core::policy::placement::Strategy;
use http_body_util::BodyExt;
use pretty_assertions::assert_eq;
use serde_json::Value;
use tower::ServiceExt;

mod fuzzing;

/// A binder that records what it was asked and answers as told.
#[derive(Default)]
struct FakeBinder {
    calls: Mutex<Vec<BindRequest>>,
    refuse_with: Option<String>,
}

impl Binder for FakeBinder {
    fn bind<'a>(&'a self, request: &'a BindRequest) -> BoxFuture<'a, Result<(), extender::Error>> {
        self.calls.lock().unwrap().push(request.clone());
        let result = match &self.refuse_with {
            Some(why) => Err(request.failed(why.clone())),
            None => Ok(()),
        };
        Box::pin(async move { result })
    }
}

/// The cluster the fixtures talk about: nodes kwok-node-1..3 with room, and the fixtures' pod
/// `ml/train-worker-1` in gang `ml/train` of one member (so it binds at once).
fn fixture_cache() -> (Cache, Mirror) {
    let (cache, mut mirror) = Cache::new();
    for i in 1..=3 {
        mirror.apply_node(Node {
            name: format!("kwok-node-{i}"),
            allocatable: Resources::from([
                ("cpu", 32_000),
                ("memory", 256 << 30),
                ("nvidia.com/gpu", 8),
                ("pods", 110),
            ]),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
            not_ready: false,
        });
    }
    mirror.apply_pod_group(PodGroup {
        schedule_timeout: Duration::from_secs(60),
        ..PodGroup::new(GroupKey::new("ml", "train"), 1, "research")
    });
    mirror.apply_pod(Pod {
        uid: "6b1d7c1e-3f0a-4a57-9a55-2f4f6f0e8b11".into(),
        namespace: "ml".into(),
        name: "train-worker-1".into(),
        node_name: None,
        phase: PodPhase::Pending,
        requests: Resources::from([
            ("cpu", 500),
            ("memory", 1 << 30),
            ("nvidia.com/gpu", 1),
            ("pods", 1),
        ]),
        pod_group: Some("train".into()),
        queue: Some("research".into()),
        priority: 0,
        marked: true,
        ..Default::default()
    });
    // The preempt fixtures' victims: plain batch pods of priority 0.
    for (i, node) in [(1, "kwok-node-1"), (2, "kwok-node-1"), (3, "kwok-node-2")] {
        mirror.apply_pod(Pod {
            uid: format!("9a8b7c6d-0000-4000-8000-00000000000{i}"),
            namespace: "batch".into(),
            name: format!("filler-{i}"),
            node_name: Some(node.into()),
            phase: PodPhase::Running,
            requests: Resources::from([("cpu", 8_000), ("pods", 1)]),
            queue: Some("batch".into()),
            ..Default::default()
        });
    }
    (cache, mirror)
}

fn extender_with(binder: Arc<FakeBinder>) -> Extender {
    extender_over(fixture_cache().0, binder)
}

fn extender_over(cache: Cache, binder: Arc<FakeBinder>) -> Extender {
    let settings = Settings {
        strategy: Strategy::Binpack,
        max_hold: Duration::from_secs(60),
        bind_unmarked: false,
        hold_scheduler_gangs: false,
        gated_admission: false,
    };
    Extender::new(cache, binder, settings)
}

fn router_with(binder: Arc<FakeBinder>) -> Router {
    extender::router(Arc::new(extender_with(binder)))
}

fn router() -> Router {
    router_with(Arc::default())
}

fn golden(name: &str) -> String {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn golden_json(name: &str) -> Value {
    serde_json::from_str(&golden(name)).unwrap()
}

async fn post_as(
    router: Router,
    verb: &str,
    content_type: &str,
    body: impl Into<Body>,
) -> (StatusCode, String) {
    let request = Request::post(format!("/scheduler/{verb}"))
        .header(header::CONTENT_TYPE, content_type)
        .body(body.into())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    if status.is_success() {
        assert_eq!(
            response.headers().get(header::CONTENT_TYPE).unwrap(),
            "application/json",
            "a {verb} answer is labelled JSON"
        );
    }
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn post(router: Router, verb: &str, body: impl Into<Body>) -> (StatusCode, String) {
    post_as(router, verb, "application/json", body).await
}

/// Posts `<fixture>.request.json` and checks the answer is `<fixture>.response.json`.
async fn assert_golden(router: Router, verb: &str, fixture: &str) {
    let (status, body) = post(router, verb, golden(&format!("{fixture}.request.json"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let actual: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(actual, golden_json(&format!("{fixture}.response.json")));
}

#[tokio::test]
async fn filter_with_node_names_passes_every_node_and_answers_every_go_field() {
    assert_golden(router(), "filter", "filter-node-names").await;
}

#[tokio::test]
async fn filter_with_full_nodes_answers_the_passing_nodes_in_full() {
    assert_golden(router(), "filter", "filter-nodes").await;
}

#[tokio::test]
/// The fixture pod is a gang member with no claim yet: scores pack it where the filler pods
/// already use most (kwok-node-1 holds two, kwok-node-2 one, kwok-node-3 none).
async fn prioritize_answers_a_bare_array_that_packs_a_gang_member() {
    assert_golden(router(), "prioritize", "prioritize").await;
}

#[tokio::test]
async fn preempt_with_meta_victims_keeps_the_schedulers_victims() {
    assert_golden(router(), "preempt", "preempt-meta-victims").await;
}

#[tokio::test]
async fn preempt_with_full_victims_answers_in_the_meta_form() {
    assert_golden(router(), "preempt", "preempt-victims").await;
}

#[tokio::test]
async fn bind_creates_the_binding_for_that_pod_uid_and_node() {
    let binder = Arc::new(FakeBinder::default());
    assert_golden(router_with(binder.clone()), "bind", "bind").await;
    assert_eq!(
        *binder.calls.lock().unwrap(),
        vec![BindRequest {
            namespace: "ml".into(),
            name: "train-worker-1".into(),
            uid: "6b1d7c1e-3f0a-4a57-9a55-2f4f6f0e8b11".into(),
            node: "kwok-node-2".into(),
        }]
    );
}

#[tokio::test]
async fn a_bind_that_comes_before_the_pod_watch_shows_the_pod_waits_for_it_and_binds() {
    let (cache, mut mirror) = fixture_cache();
    let fixture = cache.read(|s| (*s.pods()["6b1d7c1e-3f0a-4a57-9a55-2f4f6f0e8b11"]).clone());
    mirror.delete_pod(&fixture.uid);
    let binder = Arc::new(FakeBinder::default());
    let router = extender::router(Arc::new(extender_over(cache, binder.clone())));
    let bind = post(router, "bind", golden("bind.request.json"));
    tokio::pin!(bind);
    assert!(
        futures::poll!(&mut bind).is_pending(),
        "the bind waits for the pod"
    );
    mirror.apply_pod(fixture);
    let (status, body) = bind.await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        golden_json("bind.response.json")
    );
    assert_eq!(binder.calls.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_refused_bind_puts_the_reason_in_error() {
    let binder = Arc::new(FakeBinder {
        refuse_with: Some("pods \"train-worker-1\" not found".into()),
        ..Default::default()
    });
    let (status, body) = post(router_with(binder), "bind", golden("bind.request.json")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        serde_json::json!({
            "Error": "failed to bind pod ml/train-worker-1 to node kwok-node-2: pods \"train-worker-1\" not found"
        })
    );
}

#[tokio::test]
async fn a_bind_of_a_pod_gangplank_does_not_manage_is_refused_and_binds_nothing() {
    let (cache, mut mirror) = fixture_cache();
    mirror.apply_pod(Pod {
        uid: "c0ffee00-0000-4000-8000-000000000001".into(),
        namespace: "kube-system".into(),
        name: "meant-for-another-scheduler".into(),
        requests: Resources::from([("cpu", 100), ("pods", 1)]),
        ..Default::default()
    });
    let binder = Arc::new(FakeBinder::default());
    let router = extender::router(Arc::new(extender_over(cache, binder.clone())));
    let (status, body) = post(
        router,
        "bind",
        r#"{"PodName":"meant-for-another-scheduler","PodNamespace":"kube-system","PodUID":"c0ffee00-0000-4000-8000-000000000001","Node":"kwok-node-1"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let error = serde_json::from_str::<Value>(&body).unwrap()["Error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.starts_with("failed to bind pod kube-system/meant-for-another-scheduler to node kwok-node-1: pod kube-system/meant-for-another-scheduler does not carry the marker resource scheduling.gangplank.dev/managed"),
        "{error}"
    );
    assert!(binder.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_bind_without_pod_name_or_node_says_which_field_is_empty_and_binds_nothing() {
    let binder = Arc::new(FakeBinder::default());
    let (_, body) = post(
        router_with(binder.clone()),
        "bind",
        r#"{"PodName":"","PodNamespace":"ml","PodUID":"u","Node":"n1"}"#,
    )
    .await;
    assert_eq!(body, r#"{"Error":"failed to bind pod: PodName is empty"}"#);

    let (_, body) = post(
        router_with(binder.clone()),
        "bind",
        r#"{"PodName":"p","PodNamespace":"ml","PodUID":"u","Node":null}"#,
    )
    .await;
    assert_eq!(body, r#"{"Error":"failed to bind pod: Node is empty"}"#);
    assert!(binder.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn malformed_json_is_a_400_naming_the_verb_and_the_position() {
    let (status, body) = post(router(), "filter", r#"{"Pod": {"metadata": "#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "failed to decode filter request: EOF while parsing a value at line 1 column 21\n"
    );
}

#[tokio::test]
async fn an_empty_body_is_a_400() {
    let (status, body) = post(router(), "bind", "").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "failed to decode bind request: EOF while parsing a value at line 1 column 0\n"
    );
}

#[tokio::test]
async fn a_body_of_the_wrong_shape_is_a_400_naming_the_field() {
    let (status, body) = post(router(), "prioritize", r#"{"Pod":{},"NodeNames":"n1"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.starts_with("failed to decode prioritize request: invalid type: string \"n1\""),
        "{body}"
    );

    let (status, body) = post(router(), "filter", r#"{"NodeNames":["n1"]}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.starts_with("failed to decode filter request: missing field `Pod`"),
        "{body}"
    );

    let (status, body) = post(router(), "preempt", r#"[1,2]"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.starts_with("failed to decode preempt request: "),
        "{body}"
    );
}

#[tokio::test]
async fn filter_without_any_candidate_list_is_a_400() {
    let (status, body) = post(
        router(),
        "filter",
        r#"{"Pod":{},"Nodes":null,"NodeNames":null}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "failed to decode filter request: Nodes and NodeNames are both null; one of them must list the candidate nodes\n"
    );
}

#[tokio::test]
async fn a_full_victim_without_uid_is_a_400() {
    let (status, body) = post(
        router(),
        "preempt",
        r#"{"Pod":{},"NodeNameToVictims":{"n1":{"Pods":[{"metadata":{"name":"v","namespace":"etl"}}],"NumPDBViolations":0}},"NodeNameToMetaVictims":null}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "failed to decode preempt request: victim pod etl/v on node n1 has no metadata.uid\n"
    );
}

#[tokio::test]
async fn a_json_body_with_the_wrong_content_type_is_still_served() {
    let (status, body) = post_as(
        router(),
        "filter",
        "text/plain",
        golden("filter-node-names.request.json"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        golden_json("filter-node-names.response.json")
    );
}

#[tokio::test]
async fn lowercase_keys_of_old_schedulers_are_answered_with_go_names() {
    let golden = golden_json("prioritize.request.json");
    let mut request = serde_json::Map::new();
    for (key, value) in golden.as_object().unwrap() {
        request.insert(key.to_lowercase(), value.clone());
    }
    assert!(request.contains_key("nodenames"), "{request:?}");
    let (status, body) = post(router(), "prioritize", Value::from(request).to_string()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        golden_json("prioritize.response.json")
    );
    assert!(body.contains(r#""Host":"#), "{body}");
}

#[tokio::test]
async fn preempt_with_no_victims_at_all_answers_an_empty_map() {
    let (status, body) = post(
        router(),
        "preempt",
        r#"{"Pod":{},"NodeNameToVictims":null,"NodeNameToMetaVictims":null}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, r#"{"NodeNameToMetaVictims":{}}"#);
}

#[tokio::test]
async fn only_post_is_served() {
    let response = router()
        .oneshot(
            Request::get("/scheduler/filter")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn every_request_is_counted_by_verb_and_outcome() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    // The test runtime is single-threaded, so a thread-local recorder sees every request.
    let _guard = metrics::set_default_local_recorder(&recorder);

    post(router(), "filter", golden("filter-node-names.request.json")).await;
    post(router(), "filter", "not json").await;
    let too_large = " ".repeat(gangplank::extender::MAX_BODY_BYTES + 1);
    let (status, _) = post(router(), "prioritize", too_large).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    post(
        router(),
        "bind",
        r#"{"PodName":"","PodNamespace":"ml","Node":"n1"}"#,
    )
    .await;

    let text = handle.render();
    for line in [
        r#"gangplank_extender_requests_total{verb="filter",outcome="ok"} 1"#,
        r#"gangplank_extender_requests_total{verb="filter",outcome="bad_request"} 1"#,
        r#"gangplank_extender_requests_total{verb="prioritize",outcome="too_large"} 1"#,
        r#"gangplank_extender_requests_total{verb="bind",outcome="error"} 1"#,
        r#"gangplank_extender_request_duration_seconds_count{verb="filter"} 2"#,
        r#"gangplank_extender_decision_wait_seconds_count{verb="filter"} 2"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[test]
fn every_verb_and_outcome_is_exported_before_the_first_request() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&[0.001, 1.0])
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, extender::register_metrics);
    handle.run_upkeep();
    let text = handle.render();
    for verb in ["filter", "prioritize", "preempt", "bind"] {
        for outcome in ["ok", "error", "bad_request"] {
            let line = format!(
                "gangplank_extender_requests_total{{verb=\"{verb}\",outcome=\"{outcome}\"}} 0"
            );
            assert!(text.contains(&line), "missing {line} in\n{text}");
        }
        let line =
            format!("gangplank_extender_request_duration_seconds_count{{verb=\"{verb}\"}} 0");
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
}

#[tokio::test]
async fn capture_saves_each_request_body_as_sent() {
    let dir = std::env::temp_dir().join(format!("gangplank-capture-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let extender = extender_with(Arc::new(FakeBinder::default()))
        .with_capture(extender::Capture::open(&dir).unwrap());
    let router = extender::router(Arc::new(extender));

    let filter = golden("filter-node-names.request.json");
    post(router.clone(), "filter", filter.clone()).await;
    post(router, "bind", "not json").await;

    assert_eq!(
        std::fs::read_to_string(dir.join("filter-1.json")).unwrap(),
        filter
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("bind-2.json")).unwrap(),
        "not json"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn preempt_drops_a_node_whose_victims_would_break_a_running_gang() {
    let (cache, mut mirror) = fixture_cache();
    mirror.apply_pod_group(PodGroup {
        schedule_timeout: Duration::from_secs(60),
        ..PodGroup::new(GroupKey::new("batch", "sim"), 2, "batch")
    });
    // Victim 3 on kwok-node-2 is one of two running members of gang batch/sim (the fixture's
    // plain pod of that UID is replaced: a pod keeps the group it was first seen in).
    mirror.delete_pod("9a8b7c6d-0000-4000-8000-000000000003");
    for (uid, node) in [
        ("9a8b7c6d-0000-4000-8000-000000000003", "kwok-node-2"),
        ("sim-2", "kwok-node-3"),
    ] {
        mirror.apply_pod(Pod {
            uid: uid.into(),
            namespace: "batch".into(),
            name: uid.into(),
            node_name: Some(node.into()),
            phase: PodPhase::Running,
            requests: Resources::from([("cpu", 8_000), ("pods", 1)]),
            pod_group: Some("sim".into()),
            ..Default::default()
        });
    }
    let settings = Settings {
        strategy: Strategy::Binpack,
        max_hold: Duration::from_secs(60),
        bind_unmarked: false,
        hold_scheduler_gangs: false,
        gated_admission: false,
    };
    let router = extender::router(Arc::new(Extender::new(
        cache,
        Arc::new(FakeBinder::default()),
        settings,
    )));
    let (status, body) = post(
        router,
        "preempt",
        golden("preempt-meta-victims.request.json"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let body: Value = serde_json::from_str(&body).unwrap();
    let nodes: Vec<&String> = body["NodeNameToMetaVictims"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(nodes, vec!["kwok-node-1"], "{body}");
}

#[tokio::test]
async fn a_pod_in_no_group_gets_no_scores_and_passes_every_node() {
    let mut request = golden_json("prioritize.request.json");
    request["Pod"]["metadata"]["labels"] = serde_json::json!({"app": "web"});
    let (_, body) = post(router(), "prioritize", request.to_string()).await;
    // No score on any node: the scheduler adds them up as if no extender were interested.
    assert_eq!(body, "[]");
    let (_, body) = post(router(), "filter", request.to_string()).await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["NodeNames"], request["NodeNames"]);
    assert_eq!(answer["FailedNodes"], serde_json::json!({}));
}

/// The fixture's cache with the head of the admission line holding the whole of each of
/// `nodes`, as the admission loop records it.
fn held_by_the_head(nodes: &[&str]) -> Cache {
    let (cache, mut mirror) = fixture_cache();
    let holder = GroupKey::new("ml", "head");
    mirror.apply_pod_group(PodGroup::new(holder.clone(), 1, "research"));
    let hold = Hold {
        group: holder,
        overdue: false,
        nodes: nodes
            .iter()
            .map(|&n| (n.into(), Resources::from([("cpu", 32_000), ("pods", 1)])))
            .collect(),
        lacking: vec![],
        seen: vec![],
    };
    let decision = Decision {
        hold: Some(hold),
        ..Default::default()
    };
    cache
        .ledger()
        .hold(None, &decision, std::time::Instant::now());
    cache
}

#[tokio::test]
async fn a_pod_of_a_queue_in_no_group_is_kept_out_of_room_a_gang_claimed() {
    let cache = held_by_the_head(&["kwok-node-1"]);
    let router = extender::router(Arc::new(extender_over(cache, Arc::default())));
    let mut request = golden_json("filter-node-names.request.json");
    request["Pod"]["metadata"]["labels"] =
        serde_json::json!({"scheduling.gangplank.dev/queue": "batch"});
    let (status, body) = post(router.clone(), "filter", request.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["NodeNames"],
        serde_json::json!(["kwok-node-2", "kwok-node-3"])
    );
    assert_eq!(
        answer["FailedNodes"],
        serde_json::json!({"kwok-node-1": "room is claimed by other gangs"})
    );
    assert_eq!(answer["Error"], "");

    // Neither a group nor a queue: every node, the claim notwithstanding.
    request["Pod"]["metadata"]["labels"] = serde_json::json!({"app": "web"});
    let (_, body) = post(router, "filter", request.to_string()).await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["NodeNames"], request["NodeNames"]);
}

/// Room Gangplank holds frees without an event the scheduler watches: refused on every node
/// for it, the pod is answered with an `Error`, which the scheduler tries again after its
/// backoff (docs/PROTOCOL.md), not a list of failed nodes, which can leave it 5 minutes.
#[tokio::test]
async fn a_pod_refused_on_every_node_for_room_held_is_answered_with_an_error_the_scheduler_retries()
{
    let cache = held_by_the_head(&["kwok-node-1", "kwok-node-2", "kwok-node-3"]);
    let router = extender::router(Arc::new(extender_over(cache, Arc::default())));
    let mut request = golden_json("filter-node-names.request.json");
    request["Pod"]["metadata"]["labels"] =
        serde_json::json!({"scheduling.gangplank.dev/queue": "batch"});
    let (status, body) = post(router, "filter", request.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["Error"],
        "no node for this pod in the room Gangplank leaves free (3 nodes: room is claimed by other gangs); the scheduler tries it again after its backoff"
    );
    assert_eq!(answer["NodeNames"], Value::Null);
}

#[tokio::test]
async fn a_member_naming_resource_claims_is_filtered_with_the_devices_the_cache_counted() {
    const GPU: &str = "deviceclass.resource.kubernetes.io/gpu.example.com";
    let (cache, mut mirror) = fixture_cache();
    // Only kwok-node-2 publishes devices of the class; the cache counted four for the member
    // (from its claim template, which the scheduler's request does not carry).
    let cached = |name: &str| cache.read(|s| Node::clone(&s.nodes()[name]));
    let mut with_devices = cached("kwok-node-2");
    with_devices.allocatable.set(GPU, 8);
    mirror.apply_node(with_devices);
    let uid = "6b1d7c1e-3f0a-4a57-9a55-2f4f6f0e8b11";
    let mut member = cache.read(|s| Pod::clone(&s.pods()[uid]));
    member.requests.set(GPU, 4);
    mirror.apply_pod(member);
    let router = extender::router(Arc::new(extender_over(cache, Arc::default())));

    let mut request = golden_json("filter-node-names.request.json");
    request["Pod"]["spec"]["resourceClaims"] =
        serde_json::json!([{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}]);

    // A member the cache has not counted yet fits nowhere, whatever it asks besides.
    let mut unseen = request.clone();
    unseen["Pod"]["metadata"]["uid"] = serde_json::json!("not-seen-yet");
    let (_, body) = post(router.clone(), "filter", unseen.to_string()).await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["NodeNames"], serde_json::json!([]), "{body}");
    assert!(
        answer["FailedAndUnresolvableNodes"]["kwok-node-2"]
            .as_str()
            .is_some_and(|why| why.contains("resource.gangplank.dev/unresolved-claims")),
        "{body}"
    );

    let (_, body) = post(router, "filter", request.to_string()).await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["NodeNames"],
        serde_json::json!(["kwok-node-2"]),
        "{body}"
    );
}

#[tokio::test]
async fn mutated_requests_get_an_answer_or_a_400_never_a_crash() {
    let (seed, cases) = fuzzing::budget(3_000);
    let mut noise = fuzzing::Noise::new(seed);
    let fixtures = [
        ("filter", "filter-nodes"),
        ("filter", "filter-node-names"),
        ("prioritize", "prioritize"),
        ("preempt", "preempt-victims"),
        ("preempt", "preempt-meta-victims"),
        ("bind", "bind"),
    ];
    for case in 0..cases {
        let (verb, fixture) = fixtures[case % fixtures.len()];
        let request = golden_json(&format!("{fixture}.request.json"));
        let body = fuzzing::mutate(&request, &mut noise);
        let sent = String::from_utf8_lossy(&body).into_owned();
        let (status, answer) = post(router(), verb, body).await;
        assert!(
            status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
            "seed {seed}, case {case}: {verb} answered {status} to {sent}: {answer}"
        );
        if status == StatusCode::OK {
            // RawValue checks the syntax at any depth: an answer echoes the request's nodes,
            // which may nest deeper than `Value`'s recursion limit.
            serde_json::from_str::<&serde_json::value::RawValue>(&answer)
                .unwrap_or_else(|e| panic!("seed {seed}, case {case}: not JSON ({e}): {answer}"));
        }
    }
}
