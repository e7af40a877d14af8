//! The admission webhooks over HTTP, without sockets: AdmissionReview requests go through the
//! real axum router with `oneshot`, and responses are compared in full, the base64 `patch`
//! decoded and compared as JSON.
//!
//! `tests/golden/admission/<name>.request.json` are AdmissionReviews as kube-apiserver 1.36
//! sends them, captured from the local control plane (`gangplank serve` logs every review body
//! at trace level: `GANGPLANK_LOG_LEVEL=gangplank::webhooks=trace`); the matching
//! `<name>.response.json` holds the expected answer with the patch written out as JSON under
//! `patch` (it is base64 on the wire). The other tests wrap one object in the same envelope
//! with [`review`] and check one rule each, by its message (`queue-weight-zero.response.json`
//! answers such a review: a real API server refuses weight 0 by the CRD's schema before it
//! would call the webhook).
//!
//! The rules by object: [`pods`], [`jobs`] (workloads and Jobs), [`pod_groups`], [`queues`];
//! here, the envelope, the wire's own errors (malformed JSON, wrong versions), the metrics,
//! and mutated reviews that must get a verdict or a 400, never a crash.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use gangplank::api::{PodGroupPhase, QueueState};
use gangplank::webhooks::lookup::{
    CapacityLookup, Lookup, NamespaceLookup, PodGroupLookup, PodGroupView, QueueLookup, QueueView,
    TopologyLookup,
};
use gangplank::webhooks::{self, Settings, StaticLookup, Webhooks};
use gangplank_core::model::{GroupKey, Resources, Topology};
use http_body_util::BodyExt;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower::ServiceExt;

#[path = "../fuzzing/mod.rs"]
mod fuzzing;
mod jobs;
mod pod_groups;
mod pods;
mod queues;

const MUTATE_WORKLOADS: &str = "/webhooks/mutate/workloads";

/// A JobSet labelled with `queue`, of a leader Job and a workers Job whose pod template has
/// `worker_labels`.
fn a_jobset(queue: &str, worker_labels: Value) -> Value {
    let job = |name: &str, labels: Value| {
        json!({"name": name, "template": {"spec": {"template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}})
    };
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "ml",
            "labels": {"scheduling.gangplank.dev/queue": queue}},
        "spec": {"replicatedJobs": [job("leader", Value::Null), job("workers", worker_labels)]}
    })
}

fn settings() -> Settings {
    Settings {
        gate_pods: true,
        place_arrivals: false,
        // Tests look up static data: nothing appears later, so do not wait for it.
        lookup_grace: Duration::ZERO,
        schedulers: gangplank_core::model::Schedulers::only(["default-scheduler".to_owned()]),
        limits: Default::default(),
    }
}

fn router_with(lookup: impl webhooks::ClusterLookup + 'static, settings: Settings) -> Router {
    webhooks::router(Arc::new(Webhooks::new(Arc::new(lookup), settings)))
}

/// Queues `default` (Open), `research` (Open) and `archive` (Closed); namespace `team` with the
/// default queue `research`; nodes of 128 CPUs, 1 TiB, 16 GPUs and 440 pods in all.
fn cluster() -> StaticLookup {
    StaticLookup {
        queues: vec![
            queue_view("default", QueueState::Open, None),
            queue_view("research", QueueState::Open, None),
            queue_view("archive", QueueState::Closed, None),
        ],
        pod_groups: Vec::new(),
        namespaces: vec![("team".into(), "research".into())],
        capacity: Resources::from([
            ("cpu", 128_000),
            ("memory", 1 << 40),
            ("nvidia.com/gpu", 16),
            ("pods", 440),
        ]),
        labelled: Vec::new(),
        unsynced: false,
        kubernetes_pod_groups: Vec::new(),
        kubernetes_trees: Vec::new(),
        topologies: Vec::new(),
    }
}

fn queue_view(name: &str, state: QueueState, parent: Option<&str>) -> QueueView {
    QueueView {
        name: name.into(),
        state,
        parent: parent.map(Into::into),
        namespaces: None,
    }
}

fn group_view(name: &str, queue: &str, phase: PodGroupPhase) -> PodGroupView {
    PodGroupView {
        namespace: "ml".into(),
        name: name.into(),
        queue: queue.into(),
        phase,
    }
}

fn router() -> Router {
    router_with(cluster(), settings())
}

fn golden(name: &str) -> Value {
    let path = format!(
        "{}/tests/golden/admission/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {path}: {e}"))
}

async fn post_raw(router: Router, path: &str, body: impl Into<Body>) -> (StatusCode, String) {
    let request = Request::post(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// Posts a review and returns the answer with its patch decoded into JSON.
async fn post(router: Router, path: &str, review: &Value) -> Value {
    let (status, body) = post_raw(router, path, review.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut answer: Value = serde_json::from_str(&body).unwrap();
    if let Some(patch) = answer["response"].get("patch").and_then(Value::as_str) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("patch is base64");
        answer["response"]["patch"] = serde_json::from_slice(&bytes).expect("patch is JSON");
    }
    answer
}

/// Posts `<fixture>.request.json` and checks the answer is `<fixture>.response.json`.
async fn assert_golden(router: Router, path: &str, fixture: &str) {
    let answer = post(router, path, &golden(&format!("{fixture}.request.json"))).await;
    assert_eq!(answer, golden(&format!("{fixture}.response.json")));
}

/// An AdmissionReview v1 of `operation` on `object` (and `old`), as the API server wraps it.
fn review(resource: &str, operation: &str, object: Value, old: Value) -> Value {
    let (group, version, kind) = match resource {
        "pods" => ("", "v1", "Pod"),
        "jobs" => ("batch", "v1", "Job"),
        "podgroups" => ("scheduling.gangplank.dev", "v1alpha1", "PodGroup"),
        "queues" => ("scheduling.gangplank.dev", "v1alpha1", "Queue"),
        "jobsets" => ("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        "pytorchjobs" => ("kubeflow.org", "v1", "PyTorchJob"),
        "leaderworkersets" => ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
        other => panic!("no such resource {other}"),
    };
    let meta = if object.is_null() { &old } else { &object };
    let name = meta["metadata"]["name"].as_str().unwrap_or_default();
    let options_kind = match operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        _ => "DeleteOptions",
    };
    let mut request = json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": name,
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin",
            "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": old,
        "dryRun": false,
        "options": {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}
    });
    if resource != "queues" {
        request["namespace"] = json!("ml");
    }
    json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})
}

fn create(resource: &str, object: Value) -> Value {
    review(resource, "CREATE", object, Value::Null)
}

fn update(resource: &str, old: Value, object: Value) -> Value {
    review(resource, "UPDATE", object, old)
}

/// The denial message of an answer, after checking it is a denial with that HTTP code.
fn denial(answer: &Value, code: u16) -> String {
    let response = &answer["response"];
    assert_eq!(response["allowed"], false, "{answer}");
    assert_eq!(response["status"]["status"], "Failure");
    assert_eq!(response["status"]["code"], code, "{answer}");
    response["status"]["message"].as_str().unwrap().to_owned()
}

fn allowed_unchanged(answer: &Value) {
    assert_eq!(
        answer["response"],
        json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true}),
        "{answer}"
    );
}

fn patch(answer: &Value) -> &Value {
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert_eq!(answer["response"]["patchType"], "JSONPatch", "{answer}");
    &answer["response"]["patch"]
}

fn a_pod(labels: Value) -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "worker", "namespace": "ml", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {}}]}
    })
}

fn a_job(annotations: Value, spec: Value) -> Value {
    let mut job = json!({
        "kind": "Job", "apiVersion": "batch/v1",
        "metadata": {"name": "train", "namespace": "ml",
            "labels": {"scheduling.gangplank.dev/queue": "research"}, "annotations": annotations},
        "spec": {"template": {"metadata": {}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}}
    });
    for (k, v) in spec.as_object().unwrap() {
        job["spec"][k] = v.clone();
    }
    job
}

fn a_pod_group(spec: Value, phase: Option<&str>) -> Value {
    let mut group = json!({
        "kind": "PodGroup", "apiVersion": "scheduling.gangplank.dev/v1alpha1",
        "metadata": {"name": "gang", "namespace": "ml"}, "spec": spec
    });
    if let Some(phase) = phase {
        group["status"] = json!({"phase": phase});
    }
    group
}

fn a_queue(name: &str, spec: Value, status: Value) -> Value {
    json!({
        "kind": "Queue", "apiVersion": "scheduling.gangplank.dev/v1alpha1",
        "metadata": {"name": name}, "spec": spec, "status": status
    })
}

const MUTATE_PODS: &str = "/webhooks/mutate/pods";

const MUTATE_JOBS: &str = "/webhooks/mutate/jobs";

const VALIDATE_JOBS: &str = "/webhooks/validate/jobs";

const MUTATE_PODGROUPS: &str = "/webhooks/mutate/podgroups";

const VALIDATE_PODGROUPS: &str = "/webhooks/validate/podgroups";

const VALIDATE_QUEUES: &str = "/webhooks/validate/queues";

// ---- pods: mutation

#[tokio::test]
async fn malformed_json_is_a_400_naming_the_webhook() {
    let (status, body) = post_raw(router(), VALIDATE_QUEUES, "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.starts_with("failed to decode validate-queues AdmissionReview: key must be a string at line 1 column 2"),
        "{body}"
    );
}

#[tokio::test]
async fn a_review_of_another_version_is_a_400() {
    let mut review = create("queues", a_queue("q", json!({}), json!({})));
    review["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, body) = post_raw(router(), VALIDATE_QUEUES, review.to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "failed to decode validate-queues AdmissionReview: expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got \"admission.k8s.io/v1beta1\" and \"AdmissionReview\"\n"
    );
}

#[tokio::test]
async fn a_review_without_the_object_its_operation_needs_is_a_400() {
    let review = review("queues", "DELETE", Value::Null, Value::Null);
    let (status, body) = post_raw(router(), VALIDATE_QUEUES, review.to_string()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "failed to decode validate-queues AdmissionReview: request.oldObject is missing for DELETE\n"
    );
}

#[tokio::test]
async fn only_post_is_served() {
    let request = Request::get(MUTATE_PODS).body(Body::empty()).unwrap();
    let response = router().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn every_request_is_counted_by_webhook_operation_and_outcome() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    // The test runtime is single-threaded, so a thread-local recorder sees every request.
    let _guard = metrics::set_default_local_recorder(&recorder);
    let labelled = a_pod(json!({"scheduling.x-k8s.io/pod-group": "g"}));
    post(router(), MUTATE_PODS, &create("pods", labelled)).await;
    post(router(), MUTATE_PODS, &create("pods", a_pod(json!({})))).await;
    let closed = a_pod(json!({"scheduling.gangplank.dev/queue": "archive"}));
    post(router(), MUTATE_PODS, &create("pods", closed)).await;
    post_raw(router(), VALIDATE_QUEUES, "[]").await;
    let text = handle.render();
    for series in [
        r#"gangplank_webhook_requests_total{webhook="mutate-pods",operation="CREATE",outcome="patched"} 1"#,
        r#"gangplank_webhook_requests_total{webhook="mutate-pods",operation="CREATE",outcome="allowed"} 1"#,
        r#"gangplank_webhook_requests_total{webhook="mutate-pods",operation="CREATE",outcome="denied"} 1"#,
        r#"gangplank_webhook_requests_total{webhook="validate-queues",operation="unknown",outcome="error"} 1"#,
        r#"gangplank_webhook_request_duration_seconds_count{webhook="mutate-pods"} 3"#,
    ] {
        assert!(text.contains(series), "{series} missing from\n{text}");
    }
}

#[test]
fn every_webhook_operation_and_outcome_is_exported_before_the_first_request() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, webhooks::register_metrics);
    let text = handle.render();
    for series in [
        r#"gangplank_webhook_requests_total{webhook="mutate-pods",operation="CREATE",outcome="patched"} 0"#,
        r#"gangplank_webhook_requests_total{webhook="validate-queues",operation="DELETE",outcome="denied"} 0"#,
        r#"gangplank_webhook_requests_total{webhook="validate-podgroups",operation="UPDATE",outcome="error"} 0"#,
    ] {
        assert!(text.contains(series), "{series} missing from\n{text}");
    }
    assert!(!text.contains(r#"webhook="mutate-pods",operation="DELETE""#));
}

// ---- fuzzing

#[tokio::test]
async fn mutated_reviews_get_a_verdict_or_a_400_never_a_crash() {
    let (seed, cases) = fuzzing::budget(3_000);
    let mut noise = fuzzing::Noise::new(seed);
    let golden_request = |name: &str| golden(&format!("{name}.request.json"));
    let reviews = [
        (MUTATE_PODS, golden_request("pod-coscheduling-label")),
        (MUTATE_PODS, golden_request("pod-of-a-job")),
        (MUTATE_JOBS, golden_request("job-with-queue")),
        (VALIDATE_JOBS, golden_request("job-with-queue")),
        (MUTATE_PODGROUPS, golden_request("podgroup-without-queue")),
        (VALIDATE_PODGROUPS, golden_request("podgroup-without-queue")),
        (
            VALIDATE_QUEUES,
            create("queues", a_queue("q", json!({"weight": 2}), json!({}))),
        ),
        (
            MUTATE_WORKLOADS,
            create("jobsets", a_jobset("research", Value::Null)),
        ),
    ];
    for case in 0..cases {
        let (path, review) = &reviews[case % reviews.len()];
        let body = fuzzing::mutate(review, &mut noise);
        let (status, answer) = post_raw(router(), path, body.clone()).await;
        let sent = String::from_utf8_lossy(&body);
        assert!(
            status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
            "seed {seed}, case {case}: {path} answered {status} to {sent}: {answer}"
        );
        if status == StatusCode::OK {
            let answer: Value = serde_json::from_str(&answer)
                .unwrap_or_else(|e| panic!("seed {seed}, case {case}: not JSON ({e}): {answer}"));
            assert!(
                answer["response"]["allowed"].is_boolean(),
                "seed {seed}, case {case}: {answer}"
            );
        }
    }
}
