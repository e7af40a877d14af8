//! The admission webhooks through a real API server: the registrations in `webhooks/` (applied
//! by `e2e/up` through `webhooks/render.sh`) select the right objects, the patches apply, and
//! every validation rule refuses a bad object with its message, as `kubectl` would show it.
//! Also what happens while Gangplank is unreachable: plain pods are still created and
//! scheduled; gang pods are refused with an error that names Gangplank's webhook.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use gangplank::api::{PodGroup, Queue, labels};

use crate::support::{Cluster, Frozen, eventually, pod, run_dir, running, unique};

/// A cluster-scoped Queue that is deleted (webhooks permitting) when the test ends.
struct TestQueue {
    name: String,
    api: Api<Queue>,
}

impl TestQueue {
    async fn create(client: &Client, prefix: &str, spec: Value) -> TestQueue {
        let name = unique(prefix);
        let api: Api<Queue> = Api::all(client.clone());
        api.create(&PostParams::default(), &queue(&name, spec))
            .await
            .unwrap_or_else(|e| panic!("failed to create queue {name}: {e}"));
        TestQueue { name, api }
    }

    /// Sets the queue's status (as Gangplank's controller would).
    async fn set_status(&self, status: Value) {
        self.api
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .unwrap();
    }

    async fn delete(self) {
        crate::support::delete_queue(&self.api.clone().into_client(), &self.name).await;
    }
}

fn queue(name: &str, spec: Value) -> Queue {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn pod_group(name: &str, spec: Value) -> PodGroup {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn job(manifest: Value) -> Job {
    serde_json::from_value(manifest).expect("test job manifest is not a valid Job")
}

/// The message of a refused request, as kubectl prints it after "Error from server".
fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("expected the API server to refuse, got {other:?}"),
    }
}

/// Gangplank sees a change through its watches a moment after the API server stored it, so a
/// check that depends on such a change is retried, as a dry run that stores nothing, until the
/// API server's answer (the object, or the refusal's message) satisfies `expected`, for up to
/// 10 s. Returns that answer.
async fn once_seen<T: std::fmt::Debug>(
    what: &str,
    expected: impl Fn(&Result<T, String>) -> bool,
    mut attempt: impl AsyncFnMut() -> Result<T, kube::Error>,
) -> Result<T, String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let answer = match attempt().await {
            Ok(object) => Ok(object),
            Err(kube::Error::Api(status)) => Err(status.message),
            Err(e) => panic!("{what}: {e}"),
        };
        if expected(&answer) {
            return answer;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("{what}: still {answer:?} after 10 s");
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// `expected` for [`once_seen`]: refused with a message containing `text`.
fn refused_with<T>(text: &str) -> impl Fn(&Result<T, String>) -> bool + '_ {
    move |answer| matches!(answer, Err(message) if message.contains(text))
}

/// Dry-run write options: admission runs, nothing is stored.
fn dry_patch() -> PatchParams {
    PatchParams::default().dry_run()
}

/// Whether `e2e/up` started Gangplank with pod gating on.
fn gating(cluster: &Cluster) -> bool {
    cluster.env.get("GP_GATE_PODS").map(String::as_str) == Some("true")
}

/// Sets a PodGroup's phase, as Gangplank's controller would.
async fn set_phase(groups: &Api<PodGroup>, name: &str, phase: &str) {
    groups
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": phase}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_labelled_job_gets_its_group_on_every_pod_and_runs_to_completion() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-job").await;
    let queue = TestQueue::create(&cluster.client, "jobs", json!({})).await;
    let jobs = ns.api::<Job>();
    jobs.create(
        &PostParams::default(),
        &job(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "labels": {labels::QUEUE_LABEL: queue.name},
                "annotations": {labels::MIN_MEMBER_ANNOTATION: "2"}},
            "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": "500m"}}}]}}}
        })),
    )
    .await
    .unwrap();

    let stored = jobs.get("train").await.unwrap();
    let template_labels = stored
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .labels
        .unwrap();
    assert_eq!(template_labels[labels::POD_GROUP_LABEL], "train");
    assert_eq!(template_labels[labels::QUEUE_LABEL], queue.name);

    let pods = ns.api::<Pod>();
    let members = eventually("the Job's two pods", 60, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 2).then_some(list.items)
    })
    .await;
    for member in &members {
        let meta = &member.metadata;
        assert_eq!(
            meta.labels.as_ref().unwrap()[labels::POD_GROUP_LABEL],
            "train"
        );
        let spec = member.spec.as_ref().unwrap();
        let resources = spec.containers[0].resources.as_ref().unwrap();
        assert_eq!(
            resources.requests.as_ref().unwrap()[labels::MANAGED_RESOURCE].0,
            "0"
        );
        assert_eq!(
            resources.limits.as_ref().unwrap()[labels::MANAGED_RESOURCE].0,
            "0"
        );
        // Whether the pods arrived gated is checked from a watch in the controller's test:
        // here the controller's PodGroup can be admitted before the pods are listed. Nor is the
        // placement marker checked: a pod created gated carries it, one admitted on arrival
        // does not (`--place-arrivals`); the coscheduling-label test below checks it on a pod
        // whose group has no PodGroup yet.
    }
    let group = eventually("the Job's PodGroup, made by the controller", 30, || async {
        ns.api::<PodGroup>().get_opt("train").await.ok().flatten()
    })
    .await;
    assert_eq!(group.spec.min_member, 2);
    eventually("job train to complete", 120, || async {
        let status = jobs.get("train").await.ok()?.status?;
        (status.succeeded == Some(2)).then_some(())
    })
    .await;
    ns.delete().await;
    queue.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_with_the_coscheduling_label_is_normalised_marked_and_scheduled_through_gangplank() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-alias").await;
    let pods = ns.api::<Pod>();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "worker", "labels": {labels::SCHEDULER_PLUGINS_POD_GROUP_LABEL: "sweep"}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "1"}}}]}
        })),
    )
    .await
    .unwrap();
    let stored = pods.get("worker").await.unwrap();
    assert_eq!(
        stored.metadata.labels.as_ref().unwrap()[labels::POD_GROUP_LABEL],
        "sweep"
    );
    let spec = stored.spec.unwrap();
    let gates: Vec<String> = spec
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.clone())
        .collect();
    let expected_gates: Vec<String> = if gating(&cluster) {
        vec![labels::ADMISSION_GATE.to_owned()]
    } else {
        Vec::new()
    };
    assert_eq!(gates, expected_gates);
    let requests = spec.containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(requests[labels::MANAGED_RESOURCE].0, "0");
    assert_eq!(requests[labels::PLACEMENT_RESOURCE].0, "0");
    if gating(&cluster) {
        // The group has no PodGroup yet, so the pod waits for one.
        ns.api::<PodGroup>()
            .create(
                &PostParams::default(),
                &pod_group("sweep", json!({"minMember": 1})),
            )
            .await
            .unwrap();
    }
    let placed = running(&pods, "worker", 60).await;
    assert!(placed.spec.unwrap().node_name.is_some());
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_group_without_a_queue_gets_the_default_queue() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-pg-default").await;
    let groups = ns.api::<PodGroup>();
    let created = groups
        .create(
            &PostParams::default(),
            &pod_group("g", json!({"minMember": 2})),
        )
        .await
        .unwrap();
    assert_eq!(created.spec.queue.as_deref(), Some(labels::DEFAULT_QUEUE));
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn queue_rules_refuse_bad_queues_with_their_messages() {
    let cluster = Cluster::connect().await;
    let queues: Api<Queue> = Api::all(cluster.client.clone());
    let pp = PostParams::default();

    // The CRD's schema refuses weight 0 before any webhook sees it.
    let message = refusal(
        queues
            .create(&pp, &queue(&unique("w"), json!({"weight": 0})))
            .await,
    );
    assert!(
        message.contains("spec.weight") && message.contains("greater than or equal to 1"),
        "{message}"
    );

    let message = refusal(
        queues
            .create(
                &pp,
                &queue(
                    &unique("g"),
                    json!({"capability": {"cpu": "8"}, "guarantee": {"cpu": "16"}}),
                ),
            )
            .await,
    );
    assert!(
        message.ends_with("denied the request: spec.guarantee[cpu]: must not exceed spec.capability[cpu] (8), got 16"),
        "{message}"
    );

    // The cluster is e2e/up's default: 4 nodes of 32 CPUs.
    let message = refusal(
        queues
            .create(
                &pp,
                &queue(&unique("hog"), json!({"guarantee": {"cpu": "1e18"}})),
            )
            .await,
    );
    assert!(
        message.ends_with("denied the request: spec.guarantee[cpu]: must not exceed what the cluster's schedulable nodes hold (128), got 1e18; a guarantee is room no other queue may use"),
        "{message}"
    );

    let message = refusal(
        queues
            .create(
                &pp,
                &queue(&unique("orphan"), json!({"parent": "no-such-queue"})),
            )
            .await,
    );
    assert!(
        message.ends_with("spec.parent: queue \"no-such-queue\" does not exist; name an existing queue (kubectl get queues) or leave spec.parent unset for a top-level queue"),
        "{message}"
    );

    let top = TestQueue::create(&cluster.client, "top", json!({})).await;
    let child = TestQueue::create(&cluster.client, "child", json!({"parent": top.name})).await;
    let message = refusal(
        queues
            .patch(
                &top.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"parent": child.name}})),
            )
            .await,
    );
    assert!(
        message.contains(&format!(
            "spec.parent: \"{}\" would make a cycle of parents: {} → {} → {}",
            child.name, top.name, child.name, top.name
        )),
        "{message}"
    );
    let refused = format!(
        "queue \"{}\" cannot be deleted while queues name it as their spec.parent: {}",
        top.name, child.name
    );
    let dry_delete = kube::api::DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    once_seen(
        "deleting the parent of a queue",
        refused_with(&refused),
        async || queues.delete(&top.name, &dry_delete).await,
    )
    .await
    .unwrap_err();
    child.delete().await;
    top.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_queue_holding_an_admitted_group_can_be_neither_closed_nor_deleted() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-queue-held").await;
    let queue = TestQueue::create(&cluster.client, "held", json!({})).await;
    let groups = ns.api::<PodGroup>();
    groups
        .create(
            &PostParams::default(),
            &pod_group("gang", json!({"minMember": 2, "queue": queue.name})),
        )
        .await
        .unwrap();
    set_phase(&groups, "gang", "Running").await;

    let close = Patch::Merge(json!({"spec": {"state": "Closed"}}));
    let holds = format!("1 admitted PodGroup ({}/gang)", ns.name);
    let message = once_seen(
        "closing a queue with a running group",
        refused_with(&holds),
        async || queue.api.patch(&queue.name, &dry_patch(), &close).await,
    )
    .await
    .unwrap_err();
    assert!(
        message.ends_with(&format!(
            "spec.state: cannot close queue \"{}\" while it holds {holds}; wait until they finish, then close it",
            queue.name
        )),
        "{message}"
    );
    let message = refusal(
        queue
            .api
            .delete(&queue.name, &DeleteParams::default().dry_run())
            .await,
    );
    assert!(message.contains(&holds), "{message}");

    // The queue's own status counts too, for groups Gangplank has not seen. Gangplank's
    // controller puts back the status it computes (no running group) soon after the test writes
    // its own, so each attempt writes it again before asking.
    set_phase(&groups, "gang", "Completed").await;
    once_seen(
        "closing a queue whose status counts a running group",
        refused_with("while it holds 1 admitted PodGroup;"),
        async || {
            queue.set_status(json!({"running": 1})).await;
            queue.api.patch(&queue.name, &dry_patch(), &close).await
        },
    )
    .await
    .unwrap_err();
    queue.set_status(json!({"running": 0})).await;
    once_seen(
        "closing a queue whose groups finished",
        Result::is_ok,
        async || queue.api.patch(&queue.name, &dry_patch(), &close).await,
    )
    .await
    .unwrap();
    queue
        .api
        .patch(&queue.name, &PatchParams::default(), &close)
        .await
        .expect("a queue whose groups finished can be closed");
    ns.delete().await;
    queue.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn pod_group_rules_refuse_bad_groups_with_their_messages() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-pg-rules").await;
    let groups = ns.api::<PodGroup>();
    let pp = PostParams::default();

    // A field of the wrong type reaches the mutating webhook before the schema is checked:
    // the user reads the field and the type, not "rejected our request for an unknown reason".
    let kubectl = crate::support::run_dir().join("bin/kubectl");
    let mut create = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(crate::support::run_dir().join("kubeconfig"))
        .args(["create", "-n", &ns.name, "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("failed to run kubectl");
    std::io::Write::write_all(
        create.stdin.as_mut().unwrap(),
        br#"{"apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "typo"}, "spec": {"minMember": "3"}}"#,
    )
    .unwrap();
    let output = create.wait_with_output().unwrap();
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "a minMember of \"3\" was admitted"
    );
    assert!(
        message.contains("spec.minMember: invalid type: string \"3\", expected i32"),
        "{message}"
    );

    // Schema and CEL rules of the CRD answer first for sizes.
    let message = refusal(
        groups
            .create(&pp, &pod_group("zero", json!({"minMember": 0})))
            .await,
    );
    assert!(message.contains("spec.minMember"), "{message}");
    let message = refusal(
        groups
            .create(
                &pp,
                &pod_group("small", json!({"minMember": 4, "maxMember": 2})),
            )
            .await,
    );
    assert!(
        message.contains("maxMember must be at least minMember"),
        "{message}"
    );
    let message = refusal(
        groups
            .create(
                &pp,
                &pod_group(
                    "spread",
                    json!({"minMember": 2, "topologyKey": "zone/of/node"}),
                ),
            )
            .await,
    );
    assert!(
        message.contains("spec.topologyKey: must be a label key"),
        "{message}"
    );

    let message = refusal(
        groups
            .create(
                &pp,
                &pod_group("lost", json!({"minMember": 1, "queue": "no-such-queue"})),
            )
            .await,
    );
    assert!(
        message.ends_with("spec.queue: queue \"no-such-queue\" does not exist; name an existing queue (kubectl get queues)"),
        "{message}"
    );

    let closed = TestQueue::create(&cluster.client, "closed", json!({"state": "Closed"})).await;
    let message = refusal(
        groups
            .create(
                &pp,
                &pod_group("late", json!({"minMember": 1, "queue": closed.name})),
            )
            .await,
    );
    assert!(
        message.ends_with(&format!(
            "spec.queue: queue \"{}\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)",
            closed.name
        )),
        "{message}"
    );

    groups
        .create(&pp, &pod_group("running", json!({"minMember": 3})))
        .await
        .unwrap();
    set_phase(&groups, "running", "Running").await;
    // The webhook reads the phase from the stored object itself: no waiting needed.
    let message = refusal(
        groups
            .patch(
                "running",
                &dry_patch(),
                &Patch::Merge(json!({"spec": {"minMember": 2}})),
            )
            .await,
    );
    assert!(
        message.contains("spec.minMember: cannot change from 3 to 2 while the group is Running"),
        "{message}"
    );
    ns.delete().await;
    closed.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn job_rules_refuse_a_gang_size_the_job_cannot_reach_and_a_topology_key_that_is_no_label_key()
{
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-job-rules").await;
    let jobs = ns.api::<Job>();
    let bad = |name: &str, min_member: &str| {
        job(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {labels::QUEUE_LABEL: "default"},
                "annotations": {labels::MIN_MEMBER_ANNOTATION: min_member}},
            "spec": {"parallelism": 2, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}]}}}
        }))
    };
    let message = refusal(jobs.create(&PostParams::default(), &bad("big", "4")).await);
    assert!(
        message.ends_with("metadata.annotations[scheduling.gangplank.dev/min-member]: must be at most spec.parallelism (2), the number of pods the Job runs at once, got 4"),
        "{message}"
    );
    let message = refusal(
        jobs.create(&PostParams::default(), &bad("word", "four"))
            .await,
    );
    assert!(
        message.ends_with("metadata.annotations[scheduling.gangplank.dev/min-member]: must be a positive integer, got \"four\""),
        "{message}"
    );
    let mut spaced = bad("spaced", "2");
    spaced.metadata.annotations.as_mut().unwrap().insert(
        labels::TOPOLOGY_KEY_ANNOTATION.to_owned(),
        "rack name".to_owned(),
    );
    let message = refusal(jobs.create(&PostParams::default(), &spaced).await);
    assert!(
        message.contains(
            "metadata.annotations[scheduling.gangplank.dev/topology-key]: must be a label key"
        ),
        "{message}"
    );
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_pod_of_a_group_in_a_closed_queue_is_refused() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-closed-pod").await;
    let queue = TestQueue::create(&cluster.client, "closing", json!({})).await;
    let groups = ns.api::<PodGroup>();
    groups
        .create(
            &PostParams::default(),
            &pod_group("gang", json!({"minMember": 2, "queue": queue.name})),
        )
        .await
        .unwrap();
    queue
        .api
        .patch(
            &queue.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"state": "Closed"}})),
        )
        .await
        .unwrap();
    let member = pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "member", "labels": {labels::POD_GROUP_LABEL: "gang"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }));
    let pods = ns.api::<Pod>();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let message = once_seen(
        "a pod of a group in a closed queue",
        refused_with("is Closed"),
        async || pods.create(&dry_run, &member).await,
    )
    .await
    .unwrap_err();
    assert!(
        message.ends_with(&format!(
            "metadata.labels[scheduling.gangplank.dev/pod-group] (PodGroup {}/gang has spec.queue \"{}\"): queue \"{}\" is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)",
            ns.name, queue.name, queue.name
        )),
        "{message}"
    );
    ns.delete().await;
    queue.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn while_gangplank_hangs_plain_pods_run_and_gang_pods_are_refused_naming_gangplank() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-down").await;
    let pods = ns.api::<Pod>();
    let frozen = Frozen::gangplank();

    pods.create(
        &PostParams::default(),
        &pod(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}
        })),
    )
    .await
    .expect("a plain pod is created while Gangplank is down");
    let message = refusal(
        pods.create(
            &PostParams::default(),
            &pod(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "gang", "labels": {labels::POD_GROUP_LABEL: "g"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}
            })),
        )
        .await,
    );
    assert!(
        message.contains("failed calling webhook \"pods-by-group.gangplank.dev\""),
        "{message}"
    );
    running(&pods, "plain", 60).await;
    drop(frozen);
    ns.delete().await;
}

/// SHA-256 fingerprint of the certificate Gangplank serves on its HTTPS port.
fn served_certificate(cluster: &Cluster) -> String {
    let address = cluster
        .url("GANGPLANK_WEBHOOK_URL")
        .trim_start_matches("https://")
        .to_owned();
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {address} -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256"
        ))
        .output()
        .expect("failed to run openssl");
    let fingerprint = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        fingerprint.contains("Fingerprint="),
        "no certificate from {address}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    fingerprint
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn rotating_the_serving_certificate_drops_no_webhook_request() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("webhook-rotation").await;
    let pods = ns.api::<Pod>();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let member = pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "member", "labels": {labels::POD_GROUP_LABEL: "g"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}
    }));
    let before = served_certificate(&cluster);

    // Webhook requests go on, one after another, from before the new certificate is written
    // until after it is served.
    let gated = gating(&cluster);
    let sent = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let requests = tokio::spawn({
        let (pods, sent, stop) = (pods.clone(), sent.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                let n = sent.load(Ordering::SeqCst);
                let created = pods
                    .create(&dry_run, &member)
                    .await
                    .map_err(|e| format!("webhook request {n} failed during the rotation: {e}"))?;
                if gated && created.spec.unwrap().scheduling_gates.is_none() {
                    return Err(format!("webhook request {n} was not mutated"));
                }
                sent.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Ok::<_, String>(())
        }
    });
    eventually("a webhook request passes before the rotation", 30, || {
        let passed = sent.load(Ordering::SeqCst) > 0 || requests.is_finished();
        async move { passed.then_some(()) }
    })
    .await;

    // A new serving certificate from the same CA, written in place as cert-manager would.
    let status =
        std::process::Command::new(crate::support::repo_dir().join("webhooks/gen-certs.sh"))
            .arg(run_dir().join("pki/gangplank"))
            .args(["localhost", "127.0.0.1"])
            .status()
            .expect("failed to run webhooks/gen-certs.sh");
    assert!(status.success());

    eventually("Gangplank serves the new certificate", 30, || {
        let changed = served_certificate(&cluster) != before;
        async move { changed.then_some(()) }
    })
    .await;
    let at_rotation = sent.load(Ordering::SeqCst);
    eventually(
        "five more webhook requests pass after the rotation",
        30,
        || {
            let passed = sent.load(Ordering::SeqCst) >= at_rotation + 5 || requests.is_finished();
            async move { passed.then_some(()) }
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    requests
        .await
        .expect("the request loop panicked")
        .unwrap_or_else(|e| panic!("{e}"));
    ns.delete().await;
}
