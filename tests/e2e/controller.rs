//! The controller through a real API server: a Job that names a queue gets its PodGroup, whose
//! status (and its queue's) follows the Job to completion; hand-made PodGroups are left alone;
//! pods naming a missing group get it or an Event that says what is missing; the default
//! queue exists. The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};

use gangplank::api::{PodGroup, PodGroupPhase, Queue, QueueSpec, labels};

use crate::support::{
    Cluster, TestNamespace, events_about, eventually, gangplank_ctl, managed_pod,
    pod_group_collected, repo_dir,
};

/// A cluster-scoped Queue of the test's own, so its status counts only the test's groups.
struct TestQueue {
    name: String,
    api: Api<Queue>,
}

impl TestQueue {
    async fn create(client: &Client, prefix: &str) -> TestQueue {
        let name = crate::support::unique(prefix);
        let api: Api<Queue> = Api::all(client.clone());
        api.create(
            &PostParams::default(),
            &Queue::new(&name, QueueSpec::default()),
        )
        .await
        .unwrap_or_else(|e| panic!("failed to create queue {name}: {e}"));
        TestQueue { name, api }
    }

    async fn get(&self) -> Queue {
        self.api.get(&self.name).await.unwrap()
    }

    async fn delete(self) {
        crate::support::delete_queue(&self.api.clone().into_client(), &self.name).await;
    }
}

/// Whether `e2e/up` registered the webhooks (it does once `webhooks/render.sh` exists).
fn webhooks_registered() -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(repo_dir().join("webhooks/render.sh"))
        .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// A Job of `parallelism` pods of `cpu` CPUs in `queue`, each running `run_for` before it
/// succeeds.
fn job(name: &str, queue: &str, parallelism: i32, cpu: u32, run_for: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {(labels::QUEUE_LABEL): queue}},
        "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": run_for}},
                "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu.to_string()}}}]}}}
    }))
    .unwrap()
}

async fn phase_of(groups: &Api<PodGroup>, name: &str) -> Option<PodGroupPhase> {
    Some(groups.get(name).await.ok()?.status?.phase)
}

/// The resource version a pod was created at: etcd's revision, which grows with every write.
fn creation_revision(pod: &Pod) -> u64 {
    let version = pod.metadata.resource_version.as_deref().unwrap_or_default();
    version.parse().unwrap_or(u64::MAX)
}

/// Pods by name as first seen, that is as created.
type FirstSeen = std::sync::Arc<std::sync::Mutex<BTreeMap<String, Pod>>>;

/// Records every pod of the namespace as first seen (its state at creation) from a watch
/// started now, until the task is aborted.
fn record_pods_as_created(ns: &TestNamespace) -> (tokio::task::JoinHandle<()>, FirstSeen) {
    let first_seen = FirstSeen::default();
    let pods: Api<Pod> = ns.api();
    let task = tokio::spawn({
        let first_seen = first_seen.clone();
        async move {
            let mut stream = std::pin::pin!(watcher(pods, watcher::Config::default()));
            while let Some(Ok(event)) = stream.next().await {
                if let watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) = event {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    first_seen.lock().unwrap().entry(name).or_insert(pod);
                }
            }
        }
    });
    (task, first_seen)
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_labelled_job_gets_its_pod_group_and_both_statuses_follow_it_to_completion() {
    let cluster = Cluster::connect().await;
    let queue = TestQueue::create(&cluster.client, "ctrl-job").await;
    let ns = cluster.namespace("ctrl-job").await;
    let (watch, first_seen) = record_pods_as_created(&ns);
    let jobs = ns.api::<Job>();
    let groups = ns.api::<PodGroup>();
    let created = jobs
        .create(
            &PostParams::default(),
            &job("train", &queue.name, 3, 2, "10s"),
        )
        .await
        .unwrap();

    let group = eventually("the Job's PodGroup", 30, || async {
        groups.get_opt("train").await.ok().flatten()
    })
    .await;
    assert_eq!(group.spec.min_member, 3);
    assert_eq!(group.spec.queue.as_deref(), Some(queue.name.as_str()));
    let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "Job");
    assert_eq!(Some(&owner.uid), created.metadata.uid.as_ref());
    assert_eq!(owner.controller, Some(true));

    let running = eventually("the PodGroup to be Running", 60, || async {
        let group = groups.get("train").await.ok()?;
        let status = group.status?;
        (status.phase == PodGroupPhase::Running).then_some(status)
    })
    .await;
    assert_eq!(
        (running.admitted, running.scheduled, running.running),
        (3, 3, 3)
    );
    let scheduled = running
        .conditions
        .iter()
        .find(|c| c.type_ == "Scheduled")
        .unwrap();
    assert_eq!(scheduled.status, "True");
    let queue_status = eventually("the queue to count one running group", 20, || async {
        let status = queue.get().await.status?;
        (status.running == 1).then_some(status)
    })
    .await;
    assert_eq!(queue_status.allocated["cpu"].0, "6");
    assert_eq!(queue_status.allocated["pods"].0, "3");
    assert_eq!(queue_status.pending, 0);

    if webhooks_registered() {
        let first_seen = first_seen.lock().unwrap().clone();
        let mut members: Vec<&Pod> = first_seen.values().collect();
        assert_eq!(members.len(), 3, "{:?}", first_seen.keys());
        members.sort_by_key(|pod| creation_revision(pod));
        // Gated, or admitted on arrival (the Job's PodGroup was known when the pod came and the
        // cluster had room). Once one member arrives ungated the gang is admitted, so every
        // later member does too; members created before the PodGroup reached Gangplank's
        // cache arrive gated and admission releases them.
        let mut admitted_at = None;
        for (index, pod) in members.iter().enumerate() {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let labels_of = pod.metadata.labels.as_ref().unwrap();
            assert_eq!(labels_of[labels::POD_GROUP_LABEL], "train", "{name}");
            let gates: Vec<&str> = pod
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .into_iter()
                .flatten()
                .map(|g| g.name.as_str())
                .collect();
            match (admitted_at, gates.as_slice()) {
                (None, []) => admitted_at = Some(index),
                (None, [labels::ADMISSION_GATE]) | (Some(_), []) => {}
                _ => panic!(
                    "{name} (member {index} as created) arrived with gates {gates:?}; \
                     the gang was admitted at member {admitted_at:?}"
                ),
            }
        }
    } else {
        eprintln!("webhooks are not registered (no webhooks/render.sh): not checking gates");
    }
    watch.abort();

    let completed = eventually("the PodGroup to be Completed", 60, || async {
        let status = groups.get("train").await.ok()?.status?;
        (status.phase == PodGroupPhase::Completed).then_some(status)
    })
    .await;
    assert_eq!((completed.succeeded, completed.running), (3, 0));
    let queue_status = eventually("the queue to hold nothing", 20, || async {
        let status = queue.get().await.status?;
        (status.running == 0 && status.allocated.is_empty()).then_some(status)
    })
    .await;
    assert!(queue_status.deserved.is_empty(), "{queue_status:?}");

    // Inqueue may be skipped: a gang that fits is often bound before its status is written.
    let reasons = events_about(&cluster.client, &ns.name, "train").await;
    for reason in ["PodGroupCreated", "Running", "Completed"] {
        assert!(
            reasons.contains_key(reason),
            "no {reason} event in {reasons:?}"
        );
    }
    assert!(
        reasons["PodGroupCreated"].contains("minMember 3 from spec.parallelism"),
        "{reasons:?}"
    );
    // At least a write for Running (its first status when the gang started within the two
    // seconds a change stands before it is written) and one for Completed, ten seconds later.
    let metrics = cluster.gangplank_metrics().await;
    let writes = metrics.sum(
        "gangplank_controller_status_writes_total",
        &[("kind", "podgroup"), ("outcome", "ok")],
    );
    assert!(writes >= 2.0, "{writes} PodGroup status writes counted");

    jobs.delete(
        "train",
        &DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Background),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    eventually(
        "the garbage collector to delete the PodGroup",
        30,
        || async {
            groups
                .get_opt("train")
                .await
                .ok()
                .and_then(|g| g.is_none().then_some(()))
        },
    )
    .await;
    ns.delete().await;
    queue.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_gang_that_cannot_fit_waits_for_admission_and_its_status_says_why() {
    let cluster = Cluster::connect().await;
    let queue = TestQueue::create(&cluster.client, "ctrl-big").await;
    let ns = cluster.namespace("ctrl-big").await;
    let groups = ns.api::<PodGroup>();
    // Five whole nodes' worth on four nodes: each pod fits somewhere, the gang never does, so
    // admission keeps it gated and says why.
    ns.api::<Job>()
        .create(
            &PostParams::default(),
            &job("big", &queue.name, 5, 32, "1s"),
        )
        .await
        .unwrap();

    let admitted = eventually(
        "the admission loop's reason in the PodGroup's status",
        60,
        || async {
            let status = groups.get("big").await.ok()?.status?;
            let admitted = status
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Admitted")?;
            // Before the cache has the PodGroup, the reason is that it has none.
            (status.phase == PodGroupPhase::Pending
                && admitted.status == "False"
                && admitted.message.starts_with("does not fit now"))
            .then_some(admitted)
        },
    )
    .await;
    assert_eq!(admitted.reason, "DoesNotFit");
    assert!(
        admitted
            .message
            .starts_with("does not fit now: cpu 160 needed"),
        "{}",
        admitted.message
    );
    let status = groups.get("big").await.unwrap().status.unwrap();
    assert_eq!((status.admitted, status.scheduled), (0, 0));
    let queue_status = eventually("the queue to count one pending group", 20, || async {
        let status = queue.get().await.status?;
        (status.pending == 1 && status.deserved.contains_key("cpu")).then_some(status)
    })
    .await;
    assert!(queue_status.allocated.is_empty(), "{queue_status:?}");
    // Its demand (160 CPUs) is more than the cluster's 128: it deserves at most all of it.
    let deserved: f64 = queue_status.deserved["cpu"].0.parse().unwrap();
    assert!(deserved > 0.0 && deserved <= 128.0, "{queue_status:?}");
    ns.delete().await;
    queue.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_hand_made_pod_group_of_the_jobs_name_is_left_alone_with_a_warning_on_the_job() {
    let cluster = Cluster::connect().await;
    let queue = TestQueue::create(&cluster.client, "ctrl-mine").await;
    let ns = cluster.namespace("ctrl-mine").await;
    let groups = ns.api::<PodGroup>();
    let mut spec = gangplank::api::PodGroupSpec::with_min_member(1);
    spec.queue = Some(queue.name.clone());
    groups
        .create(&PostParams::default(), &PodGroup::new("mine", spec))
        .await
        .unwrap();
    ns.api::<Job>()
        .create(
            &PostParams::default(),
            &job("mine", &queue.name, 2, 1, "1s"),
        )
        .await
        .unwrap();

    let warning = eventually("a PodGroupConflict event on the Job", 30, || async {
        events_about(&cluster.client, &ns.name, "mine")
            .await
            .remove("PodGroupConflict")
    })
    .await;
    assert!(
        warning.contains("already exists and is not owned by this Job"),
        "{warning}"
    );
    let group = groups.get("mine").await.unwrap();
    assert_eq!(group.spec.min_member, 1, "the user's spec is kept");
    assert!(group.metadata.owner_references.is_none(), "not adopted");
    ns.delete().await;
    queue.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn pods_naming_a_missing_group_wait_with_an_event_or_get_it_when_they_give_the_gang_size() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("ctrl-orphans").await;
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    pods.create(
        &PostParams::default(),
        &managed_pod("lonely", Some("ghost"), 1, json!({})),
    )
    .await
    .unwrap();
    let sized = json!({"annotations": {(labels::MIN_MEMBER_ANNOTATION): "2"}});
    for name in ["ring-0", "ring-1"] {
        pods.create(
            &PostParams::default(),
            &managed_pod(name, Some("ring"), 1, sized.clone()),
        )
        .await
        .unwrap();
    }

    let missing = eventually("a PodGroupMissing event on the pod", 30, || async {
        events_about(&cluster.client, &ns.name, "lonely")
            .await
            .remove("PodGroupMissing")
    })
    .await;
    assert!(
        missing.starts_with(&format!("PodGroup {}/ghost does not exist", ns.name)),
        "{missing}"
    );
    assert!(missing.contains(labels::MIN_MEMBER_ANNOTATION), "{missing}");
    assert!(groups.get_opt("ghost").await.unwrap().is_none());

    let ring = eventually("the PodGroup the ring's pods asked for", 30, || async {
        groups.get_opt("ring").await.ok().flatten()
    })
    .await;
    assert_eq!(ring.spec.min_member, 2);
    assert_eq!(ring.spec.queue.as_deref(), Some(labels::DEFAULT_QUEUE));
    eventually("the ring to run", 60, || async {
        (phase_of(&groups, "ring").await? == PodGroupPhase::Running).then_some(())
    })
    .await;
    let lonely = pods.get("lonely").await.unwrap();
    assert!(
        lonely.spec.unwrap().node_name.is_none(),
        "a pod without its PodGroup stays pending"
    );
    // Gangplank creates the group, so deleting it is the user's: no owner to collect it.
    let _ = groups.delete("ring", &DeleteParams::default()).await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn pods_of_a_stateful_set_that_give_the_gang_size_get_a_pod_group_it_owns_and_takes_along() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("ctrl-owned").await;
    let groups = ns.api::<PodGroup>();
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), &ns.name);
    let set: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ring"},
        "spec": {"replicas": 2, "podManagementPolicy": "Parallel", "serviceName": "ring",
            "selector": {"matchLabels": {"app": "ring"}},
            "template": {
                "metadata": {"labels": {"app": "ring", (labels::POD_GROUP_LABEL): "ring"},
                    "annotations": {(labels::MIN_MEMBER_ANNOTATION): "2"}},
                "spec": {"containers": [{"name": "main", "image": "busybox",
                    "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap();
    let set = sets.create(&PostParams::default(), &set).await.unwrap();

    let ring = eventually("the PodGroup the set's pods asked for", 30, || async {
        groups.get_opt("ring").await.ok().flatten()
    })
    .await;
    assert_eq!(ring.spec.min_member, 2);
    let owner = &ring.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("StatefulSet", set.metadata.uid.as_deref().unwrap())
    );
    eventually("the ring to run", 60, || async {
        (phase_of(&groups, "ring").await? == PodGroupPhase::Running).then_some(())
    })
    .await;

    sets.delete("ring", &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, "ring", "its StatefulSet").await;
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn the_default_queue_is_created_at_start_up_when_missing() {
    let cluster = Cluster::connect().await;
    let queues: Api<Queue> = Api::all(cluster.client.clone());
    eventually("the default queue", 30, || async {
        queues.get_opt(labels::DEFAULT_QUEUE).await.ok().flatten()
    })
    .await;
    // Nothing may hold it for the deletion to be allowed: wait for other tests' groups to end.
    eventually("the default queue to be deleted", 60, || async {
        queues
            .delete(labels::DEFAULT_QUEUE, &DeleteParams::default())
            .await
            .ok()
    })
    .await;
    eventually("the default queue to be gone", 30, || async {
        queues
            .get_opt(labels::DEFAULT_QUEUE)
            .await
            .ok()
            .and_then(|q| q.is_none().then_some(()))
    })
    .await;
    gangplank_ctl("restart");
    let queue = eventually("the default queue to be created again", 30, || async {
        queues.get_opt(labels::DEFAULT_QUEUE).await.ok().flatten()
    })
    .await;
    assert_eq!(queue.spec, QueueSpec::default());
    let status: Value = serde_json::to_value(
        eventually("the default queue's status", 30, || async {
            queues.get(labels::DEFAULT_QUEUE).await.ok()?.status
        })
        .await,
    )
    .unwrap();
    assert_eq!(status["pending"], 0, "{status}");
}
