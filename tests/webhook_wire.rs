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

mod fuzzing;

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
async fn a_pod_with_the_coscheduling_label_gets_our_label_the_gate_and_the_marker() {
    assert_golden(router(), MUTATE_PODS, "pod-coscheduling-label").await;
}

#[tokio::test]
async fn a_job_pod_created_by_generate_name_joins_the_group_of_its_job() {
    assert_golden(router(), MUTATE_PODS, "pod-of-a-job").await;
}

#[tokio::test]
async fn a_pod_already_labelled_gated_and_marked_is_admitted_unchanged() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["schedulingGates"] = json!([{"name": "scheduling.gangplank.dev/admission"}]);
    let markers = json!({"scheduling.gangplank.dev/managed": "1",
        "scheduling.gangplank.dev/placement": "1"});
    pod["spec"]["containers"][0]["resources"] =
        json!({"requests": markers.clone(), "limits": markers});
    allowed_unchanged(&post(router(), MUTATE_PODS, &create("pods", pod)).await);
}

#[tokio::test]
async fn a_gated_pod_created_with_gangplanks_record_of_admission_loses_the_record() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["metadata"]["annotations"] =
        json!({"scheduling.gangplank.dev/admitted": "2026-11-28T00:00:00Z", "team": "a"});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.contains(&json!({"op": "remove",
            "path": "/metadata/annotations/scheduling.gangplank.dev~1admitted"})),
        "{ops:?}"
    );
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "{ops:?}"
    );
}

#[tokio::test]
async fn a_pod_that_names_no_group_or_queue_is_admitted_unchanged() {
    let pod = a_pod(json!({"app": "web"}));
    allowed_unchanged(&post(router(), MUTATE_PODS, &create("pods", pod)).await);
}

#[tokio::test]
async fn the_gate_is_added_beside_other_gates_and_only_at_create() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["schedulingGates"] = json!([{"name": "example.com/quota"}]);
    let answer = post(router(), MUTATE_PODS, &create("pods", pod.clone())).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/spec/schedulingGates/-",
            "value": {"name": "scheduling.gangplank.dev/admission"}})
    );
    allowed_unchanged(&post(router(), MUTATE_PODS, &update("pods", pod.clone(), pod)).await);
}

#[tokio::test]
async fn with_gating_off_a_pod_gets_labels_and_markers_but_no_gate() {
    let router = router_with(
        cluster(),
        Settings {
            gate_pods: false,
            ..settings()
        },
    );
    let pod = a_pod(json!({"scheduling.x-k8s.io/pod-group": "g"}));
    let answer = post(router, MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        patch(&answer),
        &json!(
            [
                vec![
                    json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "g"})
                ],
                both_markers()
            ]
            .concat()
        )
    );
}

/// Admits every gang on arrival.
struct OpenDoor;

impl webhooks::Arrivals for OpenDoor {
    fn admit_on_arrival(&self, _: &GroupKey, _: &str, _: &Resources) -> bool {
        true
    }
}

/// Admits every gang on arrival, and counts the calls (each takes room in the leader's ledger).
#[derive(Default)]
struct CountingDoor(AtomicUsize);

impl webhooks::Arrivals for CountingDoor {
    fn admit_on_arrival(&self, _: &GroupKey, _: &str, _: &Resources) -> bool {
        self.0.fetch_add(1, Ordering::SeqCst);
        true
    }
}

#[tokio::test]
async fn a_dry_run_pod_is_gated_as_if_nothing_were_admitted_on_arrival_and_takes_no_room() {
    let door = Arc::new(CountingDoor::default());
    let webhooks = Webhooks::new(Arc::new(cluster()), settings()).with_arrivals(door.clone());
    let router = webhooks::router(Arc::new(webhooks));
    let pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    let mut review = create("pods", pod.clone());
    review["request"]["dryRun"] = json!(true);
    let answer = post(router.clone(), MUTATE_PODS, &review).await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "a dry run shows the gate: {ops:?}"
    );
    assert_eq!(door.0.load(Ordering::SeqCst), 0, "a dry run took room");
    // The same pod for real is admitted on arrival, and takes its room.
    let answer = post(router, MUTATE_PODS, &create("pods", pod)).await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        !ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "{ops:?}"
    );
    assert_eq!(door.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_member_naming_resource_claims_is_gated_even_while_gangs_are_admitted_on_arrival() {
    let door = Arc::new(CountingDoor::default());
    let webhooks = Webhooks::new(Arc::new(cluster()), settings()).with_arrivals(door.clone());
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["resourceClaims"] = json!([{"name": "gpus", "resourceClaimTemplateName": "t"}]);
    let answer = post(
        webhooks::router(Arc::new(webhooks)),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"),
        "its devices are counted by the cache, not here: {ops:?}"
    );
    assert_eq!(door.0.load(Ordering::SeqCst), 0, "it took room on arrival");
}

/// The patch for a member of `g` created while every gang is admitted on arrival, less the
/// record of its admission, which every such patch must carry (checked here).
async fn arrival_patch(settings: Settings, priority: Option<i32>) -> Value {
    let webhooks = Webhooks::new(Arc::new(cluster()), settings).with_arrivals(Arc::new(OpenDoor));
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    if let Some(priority) = priority {
        pod["spec"]["priority"] = json!(priority);
    }
    let answer = post(
        webhooks::router(Arc::new(webhooks)),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    let mut ops = patch(&answer).as_array().unwrap().clone();
    let record = ops
        .iter()
        .position(|op| {
            op["op"] == "add"
                && op["path"] == "/metadata/annotations"
                && op["value"]["scheduling.gangplank.dev/admitted"].is_string()
        })
        .unwrap_or_else(|| panic!("no record of the admission on arrival: {ops:?}"));
    ops.remove(record);
    Value::Array(ops)
}

#[tokio::test]
async fn a_member_of_a_gang_admitted_on_arrival_gets_no_gate_and_only_the_binding_marker() {
    assert_eq!(
        arrival_patch(settings(), None).await,
        json!([
            {"op": "add", "path": "/spec/containers/0/resources/requests",
                "value": {"scheduling.gangplank.dev/managed": "0"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits",
                "value": {"scheduling.gangplank.dev/managed": "0"}}
        ])
    );
}

#[tokio::test]
async fn with_place_arrivals_a_member_admitted_on_arrival_gets_both_markers() {
    let settings = Settings {
        place_arrivals: true,
        ..settings()
    };
    assert_eq!(arrival_patch(settings, None).await, json!(both_markers()));
}

#[tokio::test]
async fn a_member_admitted_on_arrival_that_may_preempt_gets_both_markers() {
    assert_eq!(
        arrival_patch(settings(), Some(1000)).await,
        json!(both_markers())
    );
}

#[tokio::test]
async fn a_pod_naming_a_scheduler_nobody_serves_is_gated_even_at_an_open_door_and_warned() {
    let webhooks = Webhooks::new(Arc::new(cluster()), settings()).with_arrivals(Arc::new(OpenDoor));
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "g"}));
    pod["spec"]["schedulerName"] = json!("nobody");
    let answer = post(
        webhooks::router(Arc::new(webhooks)),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    let ops = patch(&answer).as_array().unwrap().clone();
    assert!(
        ops.iter().any(|op| op["path"] == "/spec/schedulingGates"
            && op["value"] == json!([{"name": "scheduling.gangplank.dev/admission"}])),
        "{ops:?}"
    );
    let warnings = &answer["response"]["warnings"];
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.starts_with("spec.schedulerName \"nobody\" is not a scheduler")),
        "{warnings}"
    );
}

/// The patch operations that give a pod without resources each marker, at zero units.
fn both_markers() -> Vec<Value> {
    serde_json::from_value(json!([
            {"op": "add", "path": "/spec/containers/0/resources/requests",
                "value": {"scheduling.gangplank.dev/managed": "0"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits",
                "value": {"scheduling.gangplank.dev/managed": "0"}},
            {"op": "add", "path": "/spec/containers/0/resources/requests/scheduling.gangplank.dev~1placement",
                "value": "0"},
            {"op": "add", "path": "/spec/containers/0/resources/limits/scheduling.gangplank.dev~1placement",
                "value": "0"}
    ]))
    .unwrap()
}

#[tokio::test]
async fn a_lone_marker_request_gets_a_limit_of_the_same_amount() {
    let mut pod = a_pod(json!({"scheduling.gangplank.dev/queue": "research"}));
    pod["spec"]["schedulingGates"] = json!([{"name": "scheduling.gangplank.dev/admission"}]);
    pod["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "1",
        "scheduling.gangplank.dev/managed": "2", "scheduling.gangplank.dev/placement": "1"}});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        patch(&answer),
        &json!([
            {"op": "add", "path": "/spec/containers/0/resources/limits",
                "value": {"scheduling.gangplank.dev/managed": "2"}},
            {"op": "add", "path": "/spec/containers/0/resources/limits/scheduling.gangplank.dev~1placement",
                "value": "1"}
        ])
    );
}

#[tokio::test]
async fn a_pod_in_a_namespace_with_a_default_queue_gets_that_queue_and_no_group() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["namespace"] = json!("team");
    let mut review = create("pods", pod);
    review["request"]["namespace"] = json!("team");
    let answer = post(router(), MUTATE_PODS, &review).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1queue", "value": "research"})
    );
    assert!(
        !patch(&answer).to_string().contains("pod-group"),
        "a group of one gets no group label"
    );
}

#[tokio::test]
async fn volcano_annotations_become_our_labels() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["annotations"] = json!({
        "scheduling.k8s.io/group-name": "spark-app",
        "scheduling.volcano.sh/queue-name": "research"});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        patch(&answer).as_array().unwrap()[..2],
        [
            json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "spark-app"}),
            json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1queue", "value": "research"})
        ]
    );
}

#[tokio::test]
async fn a_pod_naming_a_kubernetes_pod_group_in_its_scheduling_group_joins_that_group() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["namespace"] = json!("team");
    pod["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
    let mut review = create("pods", pod);
    review["request"]["namespace"] = json!("team");
    let answer = post(router(), MUTATE_PODS, &review).await;
    assert_eq!(
        patch(&answer)[0],
        json!({"op": "add", "path": "/metadata/labels/scheduling.gangplank.dev~1pod-group", "value": "train"})
    );
}

#[tokio::test]
async fn a_pod_whose_priority_differs_from_its_kubernetes_pod_group_s_is_refused_naming_both() {
    let lookup = StaticLookup {
        kubernetes_pod_groups: vec![("team".into(), "train".into(), 1000)],
        ..cluster()
    };
    let member = |priority: i32| {
        let mut pod = a_pod(json!({}));
        pod["metadata"]["namespace"] = json!("team");
        pod["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
        pod["spec"]["priority"] = json!(priority);
        pod["spec"]["priorityClassName"] = json!(if priority == 0 { "" } else { "high" });
        let mut review = create("pods", pod);
        review["request"]["namespace"] = json!("team");
        review
    };
    let router = router_with(lookup, settings());
    let answer = post(router.clone(), MUTATE_PODS, &member(0)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.priority: 0 (priorityClassName \"\") differs from 1000, the priority of PodGroup team/train of scheduling.k8s.io: the scheduler places no pod whose priority differs from its PodGroup's, so this one would wait for ever; give it the PodGroup's priorityClassName"
    );
    let answer = post(router, MUTATE_PODS, &member(1000)).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn a_volcano_group_name_that_cannot_name_a_pod_group_is_refused() {
    let mut pod = a_pod(json!({}));
    pod["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "Spark_App"});
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.k8s.io/group-name]: must be at most 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit, got \"Spark_App\""
    );
}

#[tokio::test]
async fn a_pod_of_a_group_or_queue_created_on_a_node_is_refused_naming_the_field() {
    for labels in [
        json!({"scheduling.x-k8s.io/pod-group": "g"}),
        json!({"scheduling.gangplank.dev/queue": "research"}),
    ] {
        let mut pod = a_pod(labels);
        pod["spec"]["nodeName"] = json!("kwok-node-0");
        let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
        assert!(
            denial(&answer, 422)
                .starts_with("spec.nodeName: a pod of a group or queue is placed by the scheduler"),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn before_namespaces_are_listed_a_pod_naming_nothing_is_refused_with_a_retry_message() {
    let router = router_with(
        StaticLookup {
            unsynced: true,
            ..cluster()
        },
        settings(),
    );
    let answer = post(router, MUTATE_PODS, &create("pods", a_pod(json!({})))).await;
    assert_eq!(
        denial(&answer, 503),
        "Gangplank has not finished listing Namespaces yet; retry in a few seconds"
    );
    assert_eq!(answer["response"]["status"]["reason"], "ServiceUnavailable");
}

// ---- pods: the queue check (in the mutating call)

#[tokio::test]
async fn a_pod_of_a_group_in_a_closed_queue_is_refused() {
    let lookup = StaticLookup {
        pod_groups: vec![group_view("gang", "archive", PodGroupPhase::Pending)],
        ..cluster()
    };
    let pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "gang"}));
    let answer = post(
        router_with(lookup, settings()),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    assert_eq!(
        denial(&answer, 403),
        "metadata.labels[scheduling.gangplank.dev/pod-group] (PodGroup ml/gang has spec.queue \"archive\"): queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

#[tokio::test]
async fn a_replacement_member_of_an_admitted_group_in_a_closed_queue_is_admitted() {
    let lookup = StaticLookup {
        pod_groups: vec![group_view("gang", "archive", PodGroupPhase::Running)],
        ..cluster()
    };
    let pod = a_pod(json!({"scheduling.gangplank.dev/pod-group": "gang"}));
    let answer = post(
        router_with(lookup, settings()),
        MUTATE_PODS,
        &create("pods", pod),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn a_pod_of_no_group_in_a_closed_queue_is_refused() {
    let pod = a_pod(json!({"scheduling.gangplank.dev/queue": "archive"}));
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        denial(&answer, 403),
        "metadata.labels[scheduling.gangplank.dev/queue]: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

#[tokio::test]
async fn a_pod_naming_a_queue_that_does_not_exist_is_refused() {
    let pod = a_pod(json!({"scheduling.gangplank.dev/queue": "nope"}));
    let answer = post(router(), MUTATE_PODS, &create("pods", pod)).await;
    assert_eq!(
        denial(&answer, 404),
        "metadata.labels[scheduling.gangplank.dev/queue]: queue \"nope\" does not exist; name an existing queue (kubectl get queues)"
    );
}

#[tokio::test]
async fn a_pod_in_an_open_queue_or_a_group_not_created_yet_is_admitted() {
    for labels in [
        json!({"scheduling.gangplank.dev/queue": "research"}),
        json!({"scheduling.gangplank.dev/pod-group": "later"}),
    ] {
        let answer = post(router(), MUTATE_PODS, &create("pods", a_pod(labels))).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
}

// ---- workloads

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

#[tokio::test]
async fn a_workload_naming_a_queue_puts_it_on_every_pod_template_that_names_none() {
    let jobset = a_jobset(
        "research",
        json!({"scheduling.gangplank.dev/queue": "default"}),
    );
    let answer = post(router(), MUTATE_WORKLOADS, &create("jobsets", jobset)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add",
            "path": "/spec/replicatedJobs/0/template/spec/template/metadata/labels",
            "value": {"scheduling.gangplank.dev/queue": "research"}}])
    );

    let pytorch = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml",
            "labels": {"scheduling.gangplank.dev/queue": "research"}},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"template": {"metadata": {"labels": {"app": "x"}}, "spec": {}}},
            "Worker": {"replicas": 3, "template": {"spec": {}}}}}
    });
    let answer = post(router(), MUTATE_WORKLOADS, &create("pytorchjobs", pytorch)).await;
    assert_eq!(
        patch(&answer),
        &json!([
            {"op": "add",
                "path": "/spec/pytorchReplicaSpecs/Master/template/metadata/labels/scheduling.gangplank.dev~1queue",
                "value": "research"},
            {"op": "add", "path": "/spec/pytorchReplicaSpecs/Worker/template/metadata",
                "value": {"labels": {"scheduling.gangplank.dev/queue": "research"}}}
        ])
    );
}

#[tokio::test]
async fn a_workload_naming_a_closed_missing_or_invalid_queue_is_refused_naming_its_label() {
    for (queue, code, says) in [
        ("archive", 403, "is Closed"),
        ("nowhere", 404, "does not exist"),
        ("Not_A_Name", 422, "lowercase"),
    ] {
        let answer = post(
            router(),
            MUTATE_WORKLOADS,
            &create("jobsets", a_jobset(queue, Value::Null)),
        )
        .await;
        let message = denial(&answer, code);
        assert!(
            message.contains("metadata.labels[scheduling.gangplank.dev/queue]"),
            "{message}"
        );
        assert!(message.contains(says), "{message}");
    }
}

// ---- jobs

#[tokio::test]
async fn a_job_with_a_queue_gets_its_group_and_queue_on_the_pod_template() {
    assert_golden(router(), MUTATE_JOBS, "job-with-queue").await;
}

#[tokio::test]
async fn a_job_created_with_generate_name_gets_only_the_queue_on_its_template() {
    let mut job = a_job(json!({}), json!({}));
    job["metadata"]["name"] = Value::Null;
    job["metadata"]["generateName"] = json!("train-");
    let answer = post(router(), MUTATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/template/metadata/labels",
            "value": {"scheduling.gangplank.dev/queue": "research"}}])
    );
}

#[tokio::test]
async fn a_job_of_a_jobset_gets_only_the_queue_so_its_pods_join_the_jobset() {
    let mut job = a_job(json!({}), json!({}));
    job["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = json!("train");
    job["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] = json!("u1");
    let answer = post(router(), MUTATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/template/metadata/labels",
            "value": {"scheduling.gangplank.dev/queue": "research"}}])
    );
}

#[tokio::test]
async fn a_min_member_above_parallelism_is_refused() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 2}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most spec.parallelism (2), the number of pods the Job runs at once, got 4"
    );
}

#[tokio::test]
async fn a_job_whose_gang_would_be_beyond_the_limit_is_refused_naming_the_field_and_the_limit() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "2147483647"}),
        json!({"parallelism": 2147483647}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most 10000, Gangplank's largest gang, got 2147483647"
    );
    let job = a_job(json!({}), json!({"parallelism": 2147483647}));
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.parallelism (the gang size, as metadata.annotations[scheduling.gangplank.dev/min-member] is absent): must be at most 10000, Gangplank's largest gang, got 2147483647; set metadata.annotations[scheduling.gangplank.dev/min-member] to a gang size within it"
    );
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "100"}),
        json!({"parallelism": 2147483647}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    allowed_unchanged(&answer);
}

#[tokio::test]
async fn a_min_member_above_completions_is_refused_naming_completions() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "3"}),
        json!({"parallelism": 4, "completions": 2}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most spec.completions (2), the number of pods the Job runs at once, got 3"
    );
}

#[tokio::test]
async fn a_min_member_that_is_not_a_positive_integer_is_refused() {
    for value in ["0", "-1", "four", "2.5", ""] {
        let job = a_job(
            json!({"scheduling.gangplank.dev/min-member": value}),
            json!({"parallelism": 4}),
        );
        let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
        assert_eq!(
            denial(&answer, 422),
            format!(
                "metadata.annotations[scheduling.gangplank.dev/min-member]: must be a positive integer, got {value:?}"
            )
        );
    }
}

#[tokio::test]
async fn lowering_parallelism_below_min_member_is_refused_but_pausing_at_zero_is_not() {
    let old = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 4}),
    );
    let lowered = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 3}),
    );
    let answer = post(
        router(),
        VALIDATE_JOBS,
        &update("jobs", old.clone(), lowered),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        "metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most spec.parallelism (3), the number of pods the Job runs at once, got 4"
    );
    let paused = a_job(
        json!({"scheduling.gangplank.dev/min-member": "4"}),
        json!({"parallelism": 0}),
    );
    allowed_unchanged(&post(router(), VALIDATE_JOBS, &update("jobs", old, paused)).await);
}

#[tokio::test]
async fn a_template_naming_another_queue_than_its_job_is_refused() {
    let mut job = a_job(json!({}), json!({}));
    job["spec"]["template"]["metadata"]["labels"] =
        json!({"scheduling.gangplank.dev/queue": "default"});
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.template.metadata.labels[scheduling.gangplank.dev/queue]: must be the Job's own queue \"research\" (metadata.labels[scheduling.gangplank.dev/queue]) or absent, got \"default\""
    );
}

#[tokio::test]
async fn a_job_whose_topology_key_annotation_is_not_a_label_key_is_refused() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/topology-key": "rack name"}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert!(
        denial(&answer, 422).starts_with(
            "metadata.annotations[scheduling.gangplank.dev/topology-key]: must be a label key"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn a_job_whose_preferred_topology_key_annotation_is_not_a_label_key_is_refused() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/preferred-topology-key": "rack/of/node"}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert!(
        denial(&answer, 422).starts_with(
            "metadata.annotations[scheduling.gangplank.dev/preferred-topology-key]: must be a label key"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn a_new_job_in_a_closed_queue_is_refused() {
    let mut job = a_job(json!({}), json!({}));
    job["metadata"]["labels"] = json!({"scheduling.gangplank.dev/queue": "archive"});
    let answer = post(router(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert_eq!(
        denial(&answer, 403),
        "metadata.labels[scheduling.gangplank.dev/queue]: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

#[tokio::test]
async fn a_reachable_min_member_in_an_open_queue_is_admitted() {
    let job = a_job(
        json!({"scheduling.gangplank.dev/min-member": "2"}),
        json!({"parallelism": 4}),
    );
    allowed_unchanged(&post(router(), VALIDATE_JOBS, &create("jobs", job)).await);
}

// ---- podgroups

#[tokio::test]
async fn a_pod_group_without_a_queue_gets_the_default_queue() {
    assert_golden(router(), MUTATE_PODGROUPS, "podgroup-without-queue").await;
}

#[tokio::test]
async fn a_pod_group_takes_its_queue_from_its_label_then_its_namespace() {
    let mut labelled = a_pod_group(json!({"minMember": 2}), None);
    labelled["metadata"]["labels"] = json!({"scheduling.gangplank.dev/queue": "archive"});
    let answer = post(router(), MUTATE_PODGROUPS, &create("podgroups", labelled)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/queue", "value": "archive"}])
    );

    let mut review = create("podgroups", a_pod_group(json!({"minMember": 2}), None));
    review["request"]["namespace"] = json!("team");
    let answer = post(router(), MUTATE_PODGROUPS, &review).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/queue", "value": "research"}])
    );
}

#[tokio::test]
async fn an_update_without_a_queue_keeps_the_queue_the_group_had() {
    let old = a_pod_group(json!({"minMember": 2, "queue": "research"}), None);
    let mut new = a_pod_group(json!({"minMember": 3}), None);
    new["metadata"]["labels"] = json!({"scheduling.gangplank.dev/queue": "archive"});
    let answer = post(router(), MUTATE_PODGROUPS, &update("podgroups", old, new)).await;
    assert_eq!(
        patch(&answer),
        &json!([{"op": "add", "path": "/spec/queue", "value": "research"}])
    );
}

#[tokio::test]
async fn a_pod_group_that_names_its_queue_is_not_changed() {
    let group = a_pod_group(json!({"minMember": 2, "queue": "research"}), None);
    allowed_unchanged(&post(router(), MUTATE_PODGROUPS, &create("podgroups", group)).await);
}

#[tokio::test]
async fn gang_sizes_below_one_or_above_the_elastic_bound_are_refused_together() {
    let group = a_pod_group(json!({"minMember": 0, "maxMember": -1}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.minMember: must be at least 1, got 0; spec.maxMember: must be at least spec.minMember (0) or unset, got -1"
    );
    let group = a_pod_group(json!({"minMember": 4, "maxMember": 2}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.maxMember: must be at least spec.minMember (4) or unset, got 2"
    );
}

#[tokio::test]
async fn a_pod_group_of_min_member_beyond_the_limit_is_refused_naming_the_field_and_the_limit() {
    let group = a_pod_group(
        json!({"minMember": 2147483647, "maxMember": 2147483647}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.minMember: must be at most 10000, Gangplank's largest gang, got 2147483647; spec.maxMember: must be at most 10000, Gangplank's largest gang, got 2147483647"
    );
    let group = a_pod_group(json!({"minMember": 10000, "maxMember": 10000}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    allowed_unchanged(&answer);
}

#[tokio::test]
async fn a_pod_group_whose_preferred_topology_key_is_not_a_label_key_is_refused_naming_the_field() {
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "topology.kubernetes.io/zone", "preferredTopologyKey": "rack name"}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert!(
        denial(&answer, 422).starts_with("spec.preferredTopologyKey: must be a label key"),
        "{answer}"
    );
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "topology.kubernetes.io/zone", "preferredTopologyKey": "example.com/rack"}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    allowed_unchanged(&answer);
}

/// [`cluster`] with a Topology `dc` of levels zone, block and rack.
fn with_racks() -> Router {
    let lookup = StaticLookup {
        topologies: vec![Topology {
            name: "dc".into(),
            levels: ["zone", "block", "rack"].map(String::from).to_vec(),
        }],
        ..cluster()
    };
    router_with(lookup, settings())
}

#[tokio::test]
async fn a_preferred_topology_level_wider_than_the_required_one_is_refused_naming_the_topology() {
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "rack", "preferredTopologyKey": "zone"}),
        None,
    );
    let answer = post(
        with_racks(),
        VALIDATE_PODGROUPS,
        &create("podgroups", group),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        "spec.preferredTopologyKey: must be at or below the required level rack, but Topology dc lists zone above it (levels, widest first: zone, block, rack); choose a narrower preferred level or a wider required one"
    );
    let group = a_pod_group(
        json!({"minMember": 2, "topologyKey": "zone", "preferredTopologyKey": "rack"}),
        None,
    );
    let answer = post(
        with_racks(),
        VALIDATE_PODGROUPS,
        &create("podgroups", group),
    )
    .await;
    allowed_unchanged(&answer);
    let job = a_job(
        json!({"scheduling.gangplank.dev/topology-key": "block",
               "scheduling.gangplank.dev/preferred-topology-key": "zone"}),
        json!({}),
    );
    let answer = post(with_racks(), VALIDATE_JOBS, &create("jobs", job)).await;
    assert!(
        denial(&answer, 422).starts_with(
            "metadata.annotations[scheduling.gangplank.dev/preferred-topology-key]: must be at or below the required level block"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn waiting_and_running_times_below_one_second_are_refused() {
    let group = a_pod_group(
        json!({"minMember": 1, "maxWaitSeconds": 0, "expectedRuntimeSeconds": -5}),
        None,
    );
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.maxWaitSeconds: must be at least 1 (seconds) or unset, got 0; spec.expectedRuntimeSeconds: must be at least 1 (seconds) or unset, got -5"
    );
    let queue = a_queue("team", json!({"maxWaitSeconds": 0}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.maxWaitSeconds: must be at least 1 (seconds) or unset, got 0"
    );
}

#[tokio::test]
async fn a_pod_group_in_a_missing_or_closed_queue_is_refused() {
    let group = a_pod_group(json!({"minMember": 1, "queue": "nope"}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 404),
        "spec.queue: queue \"nope\" does not exist; name an existing queue (kubectl get queues)"
    );
    let group = a_pod_group(json!({"minMember": 1, "queue": "archive"}), None);
    let answer = post(router(), VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    assert_eq!(
        denial(&answer, 403),
        "spec.queue: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
}

/// The cluster, with queue `team-a` open only to namespaces labelled `team: a` (`a-train`).
fn cluster_with_a_team_queue() -> StaticLookup {
    let mut lookup = cluster();
    lookup.queues.push(QueueView {
        namespaces: Some(serde_json::from_value(json!({"matchLabels": {"team": "a"}})).unwrap()),
        ..queue_view("team-a", QueueState::Open, None)
    });
    lookup.labelled = vec![(
        "a-train".into(),
        BTreeMap::from([("team".into(), "a".into())]),
    )];
    lookup
}

#[tokio::test]
async fn pods_and_groups_of_a_namespace_a_queue_does_not_select_are_refused() {
    let router = || router_with(cluster_with_a_team_queue(), settings());
    let group = a_pod_group(json!({"minMember": 1, "queue": "team-a"}), None);
    let answer = post(
        router(),
        VALIDATE_PODGROUPS,
        &create("podgroups", group.clone()),
    )
    .await;
    assert!(
        denial(&answer, 403).starts_with(
            "spec.queue: queue \"team-a\" admits work only from namespaces matching its spec.namespaceSelector (team=a), and namespace \"ml\" does not match"
        ),
        "{answer}"
    );
    let pod = a_pod(json!({"scheduling.gangplank.dev/queue": "team-a"}));
    let answer = post(router(), MUTATE_PODS, &create("pods", pod.clone())).await;
    assert!(
        denial(&answer, 403).contains("namespace \"ml\" does not match"),
        "{answer}"
    );

    let mut review = create("podgroups", group);
    review["request"]["namespace"] = json!("a-train");
    review["request"]["object"]["metadata"]["namespace"] = json!("a-train");
    allowed_unchanged(&post(router(), VALIDATE_PODGROUPS, &review).await);
    let mut review = create("pods", pod);
    review["request"]["namespace"] = json!("a-train");
    review["request"]["object"]["metadata"]["namespace"] = json!("a-train");
    let answer = post(router(), MUTATE_PODS, &review).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
}

#[tokio::test]
async fn the_gang_of_a_running_group_cannot_change_size_or_queue() {
    let old = a_pod_group(
        json!({"minMember": 4, "queue": "research"}),
        Some("Running"),
    );
    let new = a_pod_group(json!({"minMember": 2, "queue": "default"}), Some("Running"));
    let answer = post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await;
    assert_eq!(
        denial(&answer, 403),
        "spec.minMember: cannot change from 4 to 2 while the group is Running; spec.queue: cannot change from \"research\" to \"default\" while the group is Running; its gang was admitted as it is; wait until the group finishes, or delete it and create a new one"
    );
}

#[tokio::test]
async fn the_gang_of_a_group_admitted_ahead_cannot_grow_before_its_status_says_so() {
    let mut old = a_pod_group(
        json!({"minMember": 2, "queue": "research"}),
        Some("Pending"),
    );
    old["metadata"]["annotations"] =
        json!({"scheduling.gangplank.dev/admitted-ahead": "2026-11-28T08:00:00Z"});
    let mut new = old.clone();
    new["spec"]["minMember"] = json!(50);
    let answer = post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await;
    assert!(
        denial(&answer, 403).starts_with(
            "spec.minMember: cannot change from 2 to 50 while the group is admitted ahead of its members"
        ),
        "{answer}"
    );
}

#[tokio::test]
async fn a_waiting_group_may_change_its_gang_and_a_running_one_its_other_fields() {
    let old = a_pod_group(
        json!({"minMember": 4, "queue": "research"}),
        Some("Pending"),
    );
    let new = a_pod_group(json!({"minMember": 2, "queue": "default"}), Some("Pending"));
    allowed_unchanged(&post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await);
    let old = a_pod_group(
        json!({"minMember": 4, "queue": "research"}),
        Some("Running"),
    );
    let new = a_pod_group(
        json!({"minMember": 4, "queue": "research", "maxMember": 8}),
        Some("Running"),
    );
    allowed_unchanged(&post(router(), VALIDATE_PODGROUPS, &update("podgroups", old, new)).await);
}

#[tokio::test]
async fn a_group_moving_into_a_closed_queue_is_refused_but_one_staying_there_is_not() {
    let old = a_pod_group(json!({"minMember": 1, "queue": "research"}), None);
    let moved = a_pod_group(json!({"minMember": 1, "queue": "archive"}), None);
    let answer = post(
        router(),
        VALIDATE_PODGROUPS,
        &update("podgroups", old, moved.clone()),
    )
    .await;
    assert_eq!(
        denial(&answer, 403),
        "spec.queue: queue \"archive\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
    );
    let mut relabelled = moved.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    allowed_unchanged(
        &post(
            router(),
            VALIDATE_PODGROUPS,
            &update("podgroups", moved, relabelled),
        )
        .await,
    );
}

// ---- queues

#[tokio::test]
async fn a_queue_of_weight_zero_is_refused() {
    let queue = a_queue("q", json!({"weight": 0}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        answer,
        golden("queue-weight-zero.response.json"),
        "the whole answer"
    );
}

#[tokio::test]
async fn a_pod_group_field_of_the_wrong_type_is_a_denial_naming_the_field_not_a_400() {
    for (min_member, problem) in [
        (json!("3"), "invalid type: string \"3\", expected i32"),
        (
            json!(2147483648u64),
            "invalid value: integer `2147483648`, expected i32",
        ),
    ] {
        let group = a_pod_group(json!({"minMember": min_member}), None);
        let answer = post(router(), MUTATE_PODGROUPS, &create("podgroups", group)).await;
        assert_eq!(
            denial(&answer, 422),
            format!("spec.minMember: {problem} (not what a PodGroup holds there)")
        );
    }
}

#[tokio::test]
async fn a_guarantee_larger_than_the_cluster_is_refused_and_one_that_fits_is_admitted() {
    let huge = a_queue(
        "hog",
        json!({"guarantee": {"cpu": "1e18", "memory": "1Gi"}}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", huge)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.guarantee[cpu]: must not exceed what the cluster's schedulable nodes hold (128), got 1e18; a guarantee is room no other queue may use"
    );
    let fits = a_queue(
        "fits",
        json!({"guarantee": {"cpu": "128", "memory": "1Gi"}}),
        json!({}),
    );
    allowed_unchanged(&post(router(), VALIDATE_QUEUES, &create("queues", fits)).await);
}

#[tokio::test]
async fn a_guarantee_above_the_capability_is_refused_per_resource() {
    let queue = a_queue(
        "q",
        json!({"capability": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 4},
            "guarantee": {"cpu": "8000m", "memory": "65Gi", "nvidia.com/gpu": "4.5", "pods": "10"}}),
        json!({}),
    );
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.guarantee[memory]: must not exceed spec.capability[memory] (64Gi), got 65Gi; spec.guarantee[nvidia.com/gpu]: must not exceed spec.capability[nvidia.com/gpu] (4), got 4.5"
    );
}

#[tokio::test]
async fn a_parent_that_does_not_exist_or_is_the_queue_itself_is_refused() {
    let queue = a_queue("q", json!({"parent": "nope"}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 404),
        "spec.parent: queue \"nope\" does not exist; name an existing queue (kubectl get queues) or leave spec.parent unset for a top-level queue"
    );
    let queue = a_queue("q", json!({"parent": "q"}), json!({}));
    let answer = post(router(), VALIDATE_QUEUES, &create("queues", queue)).await;
    assert_eq!(
        denial(&answer, 422),
        "spec.parent: a queue cannot be its own parent"
    );
}

#[tokio::test]
async fn a_parent_below_the_queue_is_refused_as_a_cycle() {
    let lookup = StaticLookup {
        queues: vec![
            queue_view("org", QueueState::Open, None),
            queue_view("team", QueueState::Open, Some("org")),
            queue_view("squad", QueueState::Open, Some("team")),
        ],
        ..cluster()
    };
    let old = a_queue("org", json!({}), json!({}));
    let new = a_queue("org", json!({"parent": "squad"}), json!({}));
    let answer = post(
        router_with(lookup, settings()),
        VALIDATE_QUEUES,
        &update("queues", old, new),
    )
    .await;
    assert_eq!(
        denial(&answer, 422),
        "spec.parent: \"squad\" would make a cycle of parents: org → squad → team → org; name a queue that is not below \"org\""
    );
}

#[tokio::test]
async fn a_queue_with_admitted_groups_cannot_be_closed_and_the_message_names_them() {
    let lookup = StaticLookup {
        pod_groups: vec![
            group_view("a", "research", PodGroupPhase::Running),
            group_view("b", "research", PodGroupPhase::Inqueue),
            group_view("c", "research", PodGroupPhase::Pending),
            group_view("d", "research", PodGroupPhase::Completed),
        ],
        ..cluster()
    };
    let old = a_queue("research", json!({"state": "Open"}), json!({}));
    let new = a_queue("research", json!({"state": "Closed"}), json!({}));
    let answer = post(
        router_with(lookup, settings()),
        VALIDATE_QUEUES,
        &update("queues", old, new),
    )
    .await;
    assert_eq!(
        denial(&answer, 403),
        "spec.state: cannot close queue \"research\" while it holds 2 admitted PodGroups (ml/a, ml/b); wait until they finish, then close it"
    );
}

#[tokio::test]
async fn a_queue_whose_status_counts_admitted_groups_cannot_be_closed() {
    let old = a_queue("research", json!({"state": "Open"}), json!({"running": 1}));
    let new = a_queue(
        "research",
        json!({"state": "Closed"}),
        json!({"running": 1}),
    );
    let answer = post(router(), VALIDATE_QUEUES, &update("queues", old, new)).await;
    assert_eq!(
        denial(&answer, 403),
        "spec.state: cannot close queue \"research\" while it holds 1 admitted PodGroup; wait until they finish, then close it"
    );
}

/// The answer to deleting queue `research` where `lookup` is what Gangplank sees.
async fn deleting_research(lookup: StaticLookup) -> Value {
    let queue = a_queue("research", json!({}), json!({}));
    post(
        router_with(lookup, settings()),
        VALIDATE_QUEUES,
        &review("queues", "DELETE", Value::Null, queue),
    )
    .await
}

#[tokio::test]
async fn a_queue_that_groups_use_cannot_be_deleted() {
    let lookup = StaticLookup {
        pod_groups: vec![
            group_view("a", "research", PodGroupPhase::Running),
            group_view("c", "research", PodGroupPhase::Pending),
        ],
        ..cluster()
    };
    assert_eq!(
        denial(&deleting_research(lookup).await, 403),
        "queue \"research\" cannot be deleted while PodGroups use it: 1 admitted PodGroup (ml/a) and 1 waiting (ml/c); wait until they finish, or move waiting groups to another queue (spec.queue), then delete it"
    );
}

#[tokio::test]
async fn a_queue_that_other_queues_name_as_parent_cannot_be_deleted() {
    let lookup = StaticLookup {
        queues: vec![
            queue_view("research", QueueState::Open, None),
            queue_view("vision", QueueState::Open, Some("research")),
            queue_view("nlp", QueueState::Open, Some("research")),
        ],
        ..cluster()
    };
    assert_eq!(
        denial(&deleting_research(lookup).await, 403),
        "queue \"research\" cannot be deleted while queues name it as their spec.parent: nlp, vision; give them another parent or none first, then delete it"
    );
}

#[tokio::test]
async fn an_unused_queue_can_be_closed_and_deleted() {
    let old = a_queue("research", json!({"state": "Open"}), json!({}));
    let new = a_queue("research", json!({"state": "Closed"}), json!({}));
    allowed_unchanged(
        &post(
            router(),
            VALIDATE_QUEUES,
            &update("queues", old.clone(), new),
        )
        .await,
    );
    allowed_unchanged(
        &post(
            router(),
            VALIDATE_QUEUES,
            &review("queues", "DELETE", Value::Null, old),
        )
        .await,
    );
}

// ---- lookups that catch up

/// Knows queue `fresh` only from the third lookup on, like a watch that delivers it late.
#[derive(Default)]
struct LateQueue(AtomicUsize);

impl QueueLookup for LateQueue {
    fn queue(&self, name: &str) -> Lookup<Option<QueueView>> {
        let seen = self.0.fetch_add(1, Ordering::SeqCst) >= 2;
        Ok((seen && name == "fresh").then(|| queue_view("fresh", QueueState::Open, None)))
    }

    fn children(&self, _: &str) -> Lookup<Vec<String>> {
        Ok(Vec::new())
    }
}

impl PodGroupLookup for LateQueue {
    fn pod_group(&self, _: &str, _: &str) -> Lookup<Option<PodGroupView>> {
        Ok(None)
    }
    fn unfinished_pod_groups_in(&self, _: &str) -> Lookup<Vec<PodGroupView>> {
        Ok(Vec::new())
    }
    fn kubernetes_pod_group_priority(&self, _: &str, _: &str) -> Option<i32> {
        None
    }
}

impl CapacityLookup for LateQueue {
    fn schedulable_capacity(&self) -> Lookup<Resources> {
        Ok(Resources::new())
    }
}

impl TopologyLookup for LateQueue {
    fn topologies(&self) -> Lookup<BTreeMap<String, Topology>> {
        Ok(BTreeMap::new())
    }
}

impl NamespaceLookup for LateQueue {
    fn namespace_labels(&self, _: &str) -> Lookup<Option<BTreeMap<String, String>>> {
        Ok(None)
    }
}

#[tokio::test(start_paused = true)]
async fn a_queue_created_a_moment_before_its_first_group_is_found() {
    let router = router_with(
        LateQueue::default(),
        Settings {
            lookup_grace: Duration::from_secs(1),
            ..settings()
        },
    );
    let group = a_pod_group(json!({"minMember": 1, "queue": "fresh"}), None);
    allowed_unchanged(&post(router, VALIDATE_PODGROUPS, &create("podgroups", group)).await);
}

#[tokio::test(start_paused = true)]
async fn a_queue_that_never_appears_is_refused_after_the_grace() {
    let router = router_with(
        cluster(),
        Settings {
            lookup_grace: Duration::from_secs(1),
            ..settings()
        },
    );
    let started = tokio::time::Instant::now();
    let group = a_pod_group(json!({"minMember": 1, "queue": "nope"}), None);
    let answer = post(router, VALIDATE_PODGROUPS, &create("podgroups", group)).await;
    denial(&answer, 404);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited <= Duration::from_secs(1),
        "{waited:?}"
    );
}

// ---- the wire

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
