//! Kubeflow Trainer v2 (`github.com/kubeflow/trainer/v2` v2.3.0 with JobSet v0.12.0,
//! `e2e/up --operators "jobset trainer"`): a TrainJob whose runtime runs a dataset initializer
//! and then its trainer nodes (JobSet `dependsOn`) is one gang in its queue, whether the
//! runtime's `podGroupPolicy` makes Trainer write a scheduler-plugins PodGroup, a Volcano one,
//! or nothing (Gangplank groups the TrainJob's JobSet). The initializer runs only once room for
//! the whole job is kept; the trainer nodes come when it finished and are bound whole.
//!
//! On kwok nothing runs: a pod of a Job without kwok's completion annotations succeeds as soon
//! as it runs (`e2e/kwok/stages.yaml`), which is what the initializer does here; the trainer
//! nodes carry `pod-complete.stage.kwok.x-k8s.io/delay: 1h` so they keep running.
//! The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use gangplank::api::{PodGroup, labels};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use serde_json::json;

use super::operator_runs;
use crate::queues::{
    QueueGuard, cap_cpu, cpu_cap, create_queue, delete_queue, waits_at_capability,
};
use crate::support::{Cluster, default_queue, eventually, holds_for, pod_group_collected};

/// Trainer's label on each step's Job: the step of the TrainJob it runs.
const STEP_LABEL: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
/// JobSet's label on each pod: the replicated job it belongs to (the runtime's step names).
const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";

/// The gang a runtime asks Trainer for (`spec.podGroupPolicy`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    /// None: Trainer writes no PodGroup.
    None,
    /// `coscheduling`: a scheduler-plugins PodGroup, its pods labelled with its name.
    Coscheduling,
    /// `volcano`: a Volcano PodGroup, its pods annotated with its name.
    Volcano,
}

fn resource(group: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1alpha1", kind))
}

/// A TrainingRuntime of a dataset initializer (1 CPU) and trainer nodes of 8 CPUs that wait for
/// it (`dependsOn`), with `policy`, in `queue` named where that policy lets a user name it: the
/// JobSet's label (no policy), Volcano's queue annotation, which Trainer copies into its
/// PodGroup (volcano), or the namespace's default queue (coscheduling, set by the caller).
fn runtime(name: &str, policy: Policy, queue: &str) -> DynamicObject {
    let mut jobset_meta = json!({"labels": {}, "annotations": {}});
    let mut node_pod = json!({"containers": [{"name": "node", "image": "busybox",
        "resources": {"requests": {"cpu": "8"}}}]});
    let init_pod = json!({"containers": [{"name": "dataset-initializer", "image": "busybox",
        "resources": {"requests": {"cpu": "1"}}}]});
    let mut spec = json!({"mlPolicy": {"numNodes": 1}});
    match policy {
        Policy::None => jobset_meta["labels"][labels::QUEUE_LABEL] = json!(queue),
        Policy::Coscheduling => {
            spec["podGroupPolicy"] = json!({"coscheduling": {"scheduleTimeoutSeconds": 300}})
        }
        Policy::Volcano => {
            spec["podGroupPolicy"] = json!({"volcano": {}});
            jobset_meta["annotations"]["scheduling.volcano.sh/queue-name"] = json!(queue);
            node_pod["schedulerName"] = json!("volcano");
        }
    }
    let mut init = init_pod;
    if policy == Policy::Volcano {
        init["schedulerName"] = json!("volcano");
    }
    spec["template"] = json!({"metadata": jobset_meta, "spec": {"replicatedJobs": [
        {"name": "dataset-initializer", "template": {
            "metadata": {"labels": {(STEP_LABEL): "dataset-initializer"}},
            "spec": {"template": {"spec": init}}}},
        {"name": "node", "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
         "template": {
            "metadata": {"labels": {(STEP_LABEL): "trainer"}},
            "spec": {"template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
                "spec": node_pod}}}}]}});
    serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

/// A TrainJob of `nodes` trainer nodes on the TrainingRuntime `runtime`.
fn train_job(name: &str, runtime: &str, nodes: u32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org",
            "kind": "TrainingRuntime"}, "trainer": {"numNodes": nodes}}
    }))
    .unwrap()
}

/// The namespace's pods of the runtime's `step` (`dataset-initializer` or `node`):
/// `(made, bound, succeeded)`.
async fn step(pods: &Api<Pod>, step: &str) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for pod in pods.list(&Default::default()).await.unwrap().items {
        let of_step = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REPLICATED_JOB_LABEL))
            .is_some_and(|s| s == step);
        if !of_step {
            continue;
        }
        counts.0 += 1;
        counts.1 += usize::from(pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()));
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        counts.2 += usize::from(phase == Some("Succeeded"));
    }
    counts
}

/// The story of every policy: a TrainJob of 4 trainer nodes (32 CPUs, and 1 for the
/// initializer) in a queue of its own whose capability holds only 24 CPUs waits whole: its
/// initializer is made but not bound, no trainer node exists, and its PodGroup in that queue
/// says why. Given room (40 CPUs), the initializer runs and succeeds, then the four trainer
/// nodes come and are bound, all of them; the gang is the TrainJob's 5 pods. Deleting the
/// TrainJob deletes its PodGroup.
async fn a_train_job_runs_whole_in_its_queue(policy: Policy) {
    let cluster = &Cluster::connect().await;
    operator_runs(cluster, "trainer");
    let queue = create_queue(&cluster.client, "trainer", cpu_cap("24")).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("trainer").await;
    match policy {
        Policy::Coscheduling => default_queue(cluster, &ns.name, &queue).await,
        // Pods that carry only Volcano's annotation reach Gangplank's webhook in a namespace
        // with a default queue; the group's queue is still its Volcano PodGroup's.
        Policy::Volcano => default_queue(cluster, &ns.name, labels::DEFAULT_QUEUE).await,
        Policy::None => {}
    }
    let pods = ns.api::<Pod>();
    let groups = ns.api::<PodGroup>();
    let runtimes: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &ns.name,
        &resource("trainer.kubeflow.org", "TrainingRuntime"),
    );
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &ns.name,
        &resource("trainer.kubeflow.org", "TrainJob"),
    );
    runtimes
        .create(
            &Default::default(),
            &runtime("init-then-train", policy, &queue),
        )
        .await
        .unwrap();
    // Trainer's webhook looks the runtime up in its own cache, which may not have seen it yet;
    // a client applying both retries, as this does.
    eventually(
        "the TrainJob accepted once Trainer sees its runtime",
        30,
        || async {
            match jobs
                .create(&Default::default(), &train_job("llm", "init-then-train", 4))
                .await
            {
                Ok(_) => Some(()),
                Err(kube::Error::Api(status))
                    if status.message.contains("must be created before") =>
                {
                    None
                }
                Err(error) => panic!("the TrainJob refused: {error}"),
            }
        },
    )
    .await;

    // The group is the TrainJob's (its PodGroup's name, or its JobSet's, which Trainer names
    // after it).
    waits_at_capability(&groups, "llm", &queue, "24").await;
    let gang = groups.get("llm").await.unwrap();
    assert_eq!(
        (gang.spec.min_member, gang.spec.queue.as_deref()),
        (5, Some(queue.as_str())),
        "the initializer and the four trainer nodes, in the queue named"
    );
    assert!(gang.admitted_ahead_of_members(), "{:?}", gang.metadata);
    eventually("the initializer's pod made", 60, || async {
        (step(&pods, "dataset-initializer").await.0 == 1).then_some(())
    })
    .await;
    holds_for(
        10,
        "the initializer unbound and no trainer node made",
        async || {
            step(&pods, "dataset-initializer").await.1 == 0 && step(&pods, "node").await.0 == 0
        },
    )
    .await;

    cap_cpu(cluster, &queue, "40").await;
    eventually("the initializer bound and succeeded", 90, || async {
        (step(&pods, "dataset-initializer").await == (1, 1, 1)).then_some(())
    })
    .await;
    eventually("the four trainer nodes bound", 120, || async {
        let (made, bound, _) = step(&pods, "node").await;
        (made == 4 && bound == 4).then_some(())
    })
    .await;

    jobs.delete("llm", &DeleteParams::background())
        .await
        .unwrap();
    pod_group_collected(&groups, "llm", "its TrainJob").await;
    runtimes
        .delete("init-then-train", &DeleteParams::default())
        .await
        .unwrap();
    ns.delete().await;
    delete_queue(&cluster.client, &queue).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_train_job_with_an_initializer_and_no_gang_policy_runs_whole_in_its_job_set_s_queue() {
    a_train_job_runs_whole_in_its_queue(Policy::None).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_train_job_with_an_initializer_and_a_coscheduling_policy_runs_whole_in_its_namespace_s_queue()
 {
    a_train_job_runs_whole_in_its_queue(Policy::Coscheduling).await;
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_train_job_with_an_initializer_and_a_volcano_policy_runs_whole_in_its_volcano_queue() {
    a_train_job_runs_whole_in_its_queue(Policy::Volcano).await;
}
