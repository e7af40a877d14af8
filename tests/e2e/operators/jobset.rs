//! JobSet v0.12.0 (`e2e/up --operators jobset`) as a gang of gangs: a JobSet annotated
//! `scheduling.gangplank.dev/min-replicas` whose replicated jobs are an inference service's
//! roles is one gang whose instances are its Jobs; it starts at its minimum of whole Jobs, grows
//! and yields a whole Job at a time, and JobSet's Job controller makes again the pods of a Job
//! that yielded, which wait whole. Pods carry kwok's completion delay so they keep running.
//! The cluster is `e2e/up`'s default: 4 nodes of 32 CPUs.

use std::collections::BTreeMap;

use gangplank::api::workloads::{JOBSET_JOB_INDEX_LABEL, JOBSET_REPLICATED_JOB_LABEL};
use gangplank::api::{PodGroup, QueueSpec, labels};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use super::operator_runs;
use crate::queues::{QueueGuard, create_queue};
use crate::sub_groups::{filler, train_bound_whole};
use crate::support::{Cluster, eventually};

/// A role: (replicated job, Jobs, pods a Job, CPUs a pod).
type Role = (&'static str, u32, u32, u32);

/// 4 prefill Jobs of 2 pods of 2 CPUs, 2 decode Jobs of 4 pods of 3 CPUs and a router of 2; the
/// service needs 2 prefill Jobs, 1 decode Job and the router (9 pods, 22 CPUs).
const SERVICE: [Role; 3] = [
    ("prefill", 4, 2, 2),
    ("decode", 2, 4, 3),
    ("router", 1, 1, 2),
];

/// The JobSet `svc` of [`SERVICE`] in `queue`, needing `min_replicas`.
fn service(queue: &str, min_replicas: &str) -> DynamicObject {
    let job = |(name, jobs, pods, cpu): Role| {
        json!({"name": name, "replicas": jobs, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 20,
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1h"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": name,
                    "image": "busybox", "resources": {"requests": {"cpu": cpu.to_string()}}}]}}}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "svc", "labels": {(labels::QUEUE_LABEL): queue},
            "annotations": {(labels::MIN_REPLICAS_ANNOTATION): min_replicas}},
        "spec": {"replicatedJobs": SERVICE.map(job)}
    }))
    .unwrap()
}

/// For each role, the bound pods (not being deleted) of each of its Jobs that has any, fewest
/// first.
async fn bound_jobs(pods: &Api<Pod>) -> BTreeMap<String, Vec<u32>> {
    let mut by_job: BTreeMap<(String, String), u32> = BTreeMap::new();
    for pod in pods.list(&Default::default()).await.unwrap().items {
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
            && pod.metadata.deletion_timestamp.is_none();
        let labels = pod.metadata.labels.unwrap_or_default();
        let (Some(role), Some(index)) = (
            labels.get(JOBSET_REPLICATED_JOB_LABEL),
            labels.get(JOBSET_JOB_INDEX_LABEL),
        ) else {
            continue;
        };
        if bound {
            *by_job.entry((role.clone(), index.clone())).or_default() += 1;
        }
    }
    let mut by_role: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for ((role, _), n) in by_job {
        by_role.entry(role).or_default().push(n);
    }
    by_role.values_mut().for_each(|v| v.sort_unstable());
    by_role
}

/// The pods each Job of `role` runs.
fn pods_of_a_job(role: &str) -> u32 {
    SERVICE.iter().find(|r| r.0 == role).unwrap().2
}

/// Whole Jobs bound: `(role, how many)`, each with all its pods.
fn whole(jobs: &[(&str, usize)]) -> BTreeMap<String, Vec<u32>> {
    jobs.iter()
        .map(|&(role, n)| (role.to_owned(), vec![pods_of_a_job(role); n]))
        .collect()
}

/// Whether every Job with a pod bound has all its pods bound, and at least the minimum runs.
fn whole_at_or_above_the_minimum(bound: &BTreeMap<String, Vec<u32>>) -> bool {
    let all_whole = bound
        .iter()
        .all(|(role, jobs)| jobs.iter().all(|n| *n == pods_of_a_job(role)));
    let count = |role: &str| bound.get(role).map_or(0, Vec::len);
    all_whole && count("prefill") >= 2 && count("decode") >= 1 && count("router") == 1
}

#[tokio::test]
#[ignore = "needs the local control plane: run e2e/test"]
async fn a_jobset_of_roles_starts_at_its_minimum_of_whole_jobs_then_grows_and_yields_whole_jobs() {
    let cluster = Cluster::connect().await;
    operator_runs(&cluster, "jobset");
    let queue = create_queue(&cluster.client, "serving", QueueSpec::default()).await;
    let _guard = QueueGuard(queue.clone());
    let ns = cluster.namespace("jobset-roles").await;
    let pods = ns.api::<Pod>();
    // One node of the four left: 32 CPUs.
    for name in ["filler-0", "filler-1", "filler-2"] {
        filler(&pods, name, 32).await;
    }
    let gvk = GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet");
    let jobsets: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        &ns.name,
        &ApiResource::from_gvk(&gvk),
    );
    jobsets
        .create(
            &PostParams::default(),
            &service(&queue, "prefill=2,decode=1"),
        )
        .await
        .unwrap();

    // The minimum (22 CPUs) and two prefill Jobs more (8) fit; a decode Job more (12) does not.
    let started = whole(&[("prefill", 4), ("decode", 1), ("router", 1)]);
    eventually(
        "the minimum and two prefill Jobs more bound whole",
        90,
        || async { (bound_jobs(&pods).await == started).then_some(()) },
    )
    .await;
    let group = ns.api::<PodGroup>().get("svc").await.unwrap();
    assert_eq!(group.spec.min_member, 9, "{:?}", group.spec);
    assert_eq!(group.spec.sub_group_policy.len(), 3, "{:?}", group.spec);

    // Room grows by a node: the last decode Job starts, whole.
    pods.delete("filler-0", &Default::default()).await.unwrap();
    let everything = whole(&[("prefill", 4), ("decode", 2), ("router", 1)]);
    eventually("every Job bound whole once a node frees", 60, || async {
        (bound_jobs(&pods).await == everything).then_some(())
    })
    .await;

    // A gang of the same queue needs 24 CPUs in 6-CPU pods, and 20 and 2 are left on the two
    // nodes: Jobs beyond the minimum yield, whole; the minimum stays.
    train_bound_whole(&ns.api::<PodGroup>(), &pods, Some(&queue)).await;
    let left = eventually(
        "the service back to whole Jobs at or above its minimum",
        30,
        || async {
            let bound = bound_jobs(&pods).await;
            whole_at_or_above_the_minimum(&bound).then_some(bound)
        },
    )
    .await;
    assert!(left != everything, "something yielded to train: {left:?}");
    ns.delete().await;
}
