//! Groups named after a workload Gangplank groups by (`crate::api::workloads`: a Kubeflow
//! training job, an MPIJob, a RayCluster, a JobSet, a SparkApplication) get their PodGroup from
//! the workload itself: its operator runs with no gang flag, so nobody else writes one.
//!
//! The pod webhook puts such a workload's pods in the group named after it; while that group
//! has no PodGroup, the controller reads the workload (one GET, not a watch: only workloads
//! whose pods wait are read) and creates a PodGroup of the workload's name, owned by it
//! (`controller: true`, so deleted with it), with `minMember` from the workload's spec and the
//! queue named on the workload (label `scheduling.gangplank.dev/queue` or Volcano's queue
//! annotation), else on its pods, else its namespace's default, else `default`. A workload
//! whose first pods make the others gets `minResources` too, so that its room is kept while
//! they run: the requests of all its pods when its spec gives them in stages (a JobSet whose
//! jobs wait for others), else the room its spec asks for (a Spark application's driver and
//! executors). A JobSet annotated `scheduling.gangplank.dev/min-replicas` gets a gang of gangs
//! instead: `subGroupPolicy` and `minMember` from the annotation (`crate::api::min_replicas`).
//! A workload whose spec gives no size, whose room cannot be read, or whose annotation does not
//! fit its spec, leaves its pods waiting, with a `PodGroupMissing` Event saying so.

use kube::api::DynamicObject;

use super::batch_v1_jobs::made;
use super::observe::Asked;
use super::orphans::OrphanPlan;
use crate::api::labels::MIN_REPLICAS_ANNOTATION;
use crate::api::workloads::Kind;
use crate::api::{PodGroupSpec, labels, workloads};
use crate::cache::convert::stage_requests;
use crate::controller::queues::resource_list;
use gangplank_core::model::{GroupKey, Workload};

/// What to do for the group `key`, whose pods asked `asked` and are controlled by `workload`,
/// read as `object` (or the error reading it), in a namespace whose default queue is
/// `namespace_queue`.
pub fn plan(
    key: &GroupKey,
    asked: &Asked,
    workload: &Workload,
    object: Result<&DynamicObject, &str>,
    namespace_queue: Option<&str>,
) -> Option<OrphanPlan> {
    if asked.waiting.is_empty() {
        return None;
    }
    let kind = workloads::kind_of(&workload.api_version, &workload.kind)?;
    let missing = |why: String| {
        Some(OrphanPlan::Missing {
            pods: asked.waiting.clone(),
            message: format!(
                "PodGroup {key} does not exist, so this pod waits: Gangplank makes it from {} {}/{}, but {why}. Create a PodGroup named {} in namespace {} (spec.minMember is the gang size) instead.",
                workload.kind, key.namespace, workload.name, key.name, key.namespace
            ),
        })
    };
    let (object, uid) = match object {
        Ok(object) => match object.metadata.uid.as_deref() {
            Some(uid) if workload.uid.is_empty() || uid == workload.uid => (object, uid),
            _ => return missing("it was replaced by another of that name".to_owned()),
        },
        Err(why) => return missing(format!("it could not be read ({why})")),
    };
    let Some(size) = kind.size(&object.data) else {
        return missing("its spec gives no gang size".to_owned());
    };
    let meta = &object.metadata;
    let queue = labels::queue_of(meta.labels.as_ref(), meta.annotations.as_ref())
        .or(asked.queue.as_deref())
        .or(namespace_queue)
        .unwrap_or(labels::DEFAULT_QUEUE)
        .to_owned();
    let mut spec = PodGroupSpec::with_min_member(i32::try_from(size).unwrap_or(i32::MAX));
    let in_stages = match shape(kind, object, &mut spec) {
        Ok(in_stages) => in_stages,
        Err(why) => return missing(why),
    };
    let w = workload;
    let owner = (
        w.api_version.as_str(),
        w.kind.as_str(),
        w.name.as_str(),
        uid,
    );
    let mut group = made(&key.name, &key.namespace, spec, &queue, Some(owner));
    if in_stages {
        group.set_members_in_stages();
    }
    Some(OrphanPlan::Create(Box::new(group)))
}

/// Sets on `spec` what the workload `object` asks beyond its size: the gang of gangs of its
/// annotation, else the room kept for all its pods when they come in stages (then `Ok(true)`),
/// else the room its spec asks for. `Err` says why it cannot be read.
fn shape(kind: &Kind, object: &DynamicObject, spec: &mut PodGroupSpec) -> Result<bool, String> {
    if let Some(tree) = kind.tree(&object.metadata, &object.data) {
        let tree = tree.map_err(|problem| {
            format!("its annotation {MIN_REPLICAS_ANNOTATION} does not fit its spec: {problem}")
        })?;
        spec.min_member = tree.min_member;
        spec.sub_group_policy = tree.policy;
        return Ok(false);
    }
    if let Some(stages) = kind.stages(&object.data) {
        let requests = stage_requests(&stages)
            .map_err(|why| format!("a pod template of it cannot be read ({why})"))?;
        spec.min_resources = resource_list(&requests);
        return Ok(true);
    }
    if let Some(room) = kind.room(&object.data) {
        let room = room.map_err(|why| format!("its spec cannot be read: {why}"))?;
        spec.min_resources = resource_list(&room);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodGroup;
    use crate::controller::observe::PodRef;
    use serde_json::json;

    fn ray() -> Workload {
        Workload {
            api_version: "ray.io/v1".into(),
            kind: "RayCluster".into(),
            name: "ray".into(),
            uid: "ray-uid".into(),
        }
    }

    /// The JobSet `name`, as its pods name it.
    fn jobset(name: &str) -> Workload {
        Workload {
            api_version: "jobset.x-k8s.io/v1alpha2".into(),
            kind: "JobSet".into(),
            name: name.into(),
            uid: "js-uid".into(),
        }
    }

    /// The group's `minResources`, as `(resource, quantity)`.
    fn min_resources(group: &PodGroup) -> Vec<(String, String)> {
        group
            .spec
            .min_resources
            .iter()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect()
    }

    fn asked() -> Asked {
        Asked {
            waiting: vec![PodRef {
                namespace: "ml".into(),
                name: "ray-head".into(),
                uid: "p0".into(),
            }],
            ..Asked::default()
        }
    }

    fn object(labels: serde_json::Value, spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "ray", "namespace": "ml", "uid": "ray-uid", "labels": labels},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn a_ray_cluster_gets_a_gang_of_its_head_and_minimum_workers_owned_by_it() {
        let key = GroupKey::new("ml", "ray");
        let cluster = object(
            json!({(labels::QUEUE_LABEL): "research"}),
            json!({"workerGroupSpecs": [{"minReplicas": 3}]}),
        );
        let Some(OrphanPlan::Create(group)) =
            plan(&key, &asked(), &ray(), Ok(&cluster), Some("team"))
        else {
            panic!("expected a PodGroup");
        };
        assert_eq!(group.spec.min_member, 4);
        assert_eq!(group.spec.queue.as_deref(), Some("research"));
        let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("RayCluster", "ray-uid", Some(true))
        );

        let unlabelled = object(json!({}), json!({"workerGroupSpecs": [{"minReplicas": 3}]}));
        let Some(OrphanPlan::Create(group)) =
            plan(&key, &asked(), &ray(), Ok(&unlabelled), Some("team"))
        else {
            panic!("expected a PodGroup");
        };
        assert_eq!(group.spec.queue.as_deref(), Some("team"));
    }

    #[test]
    fn a_jobset_whose_trainer_nodes_wait_for_its_initializer_is_admitted_ahead_on_all_it_asks() {
        let key = GroupKey::new("ml", "train");
        let jobset = jobset("train");
        let pod = |cpu: &str| {
            json!({"template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}})
        };
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml", "uid": "js-uid"},
            "spec": {"replicatedJobs": [
                {"name": "dataset-initializer", "template": {"spec": pod("1")}},
                {"name": "node", "replicas": 4, "template": {"spec": pod("8")},
                 "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}]}]}
        }))
        .unwrap();
        let Some(OrphanPlan::Create(group)) = plan(&key, &asked(), &jobset, Ok(&object), None)
        else {
            panic!("expected a PodGroup");
        };
        assert_eq!(group.spec.min_member, 5);
        assert_eq!(
            min_resources(&group),
            [("cpu".into(), "33".into()), ("memory".into(), "5Gi".into())]
        );
        assert!(group.admitted_ahead_of_members(), "{:?}", group.metadata);

        let mut at_once = object.clone();
        at_once.data["spec"]["replicatedJobs"][1]
            .as_object_mut()
            .unwrap()
            .remove("dependsOn");
        let Some(OrphanPlan::Create(group)) = plan(&key, &asked(), &jobset, Ok(&at_once), None)
        else {
            panic!("expected a PodGroup");
        };
        assert!(group.spec.min_resources.is_empty());
        assert!(!group.admitted_ahead_of_members());
    }

    #[test]
    fn a_jobset_annotated_with_min_replicas_is_a_gang_of_its_jobs_at_that_minimum() {
        let key = GroupKey::new("serving", "svc");
        let jobset = jobset("svc");
        let job = |name: &str, replicas: u32, pods: u32| {
            json!({"name": name, "replicas": replicas, "template": {"spec": {
                "parallelism": pods, "completions": pods,
                "template": {"spec": {"containers": [{"name": "c"}]}}}}})
        };
        let mut object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "svc", "namespace": "serving", "uid": "js-uid",
                "annotations": {(MIN_REPLICAS_ANNOTATION): "prefill=2,decode=1"}},
            "spec": {"replicatedJobs": [job("prefill", 4, 2), job("decode", 2, 4), job("router", 1, 1)]}
        }))
        .unwrap();
        let Some(OrphanPlan::Create(group)) = plan(&key, &asked(), &jobset, Ok(&object), None)
        else {
            panic!("expected a PodGroup");
        };
        assert_eq!(
            group.spec.min_member, 9,
            "2×2 prefill, 1×4 decode, the router"
        );
        let policy = crate::testing::sub_group_sizes(&group.spec.sub_group_policy);
        assert_eq!(
            policy,
            [("prefill", 2, 2), ("decode", 4, 1), ("router", 1, 1)]
        );
        assert_eq!(
            group.spec.sub_group_policy[0].match_label_keys,
            [workloads::JOBSET_JOB_INDEX_LABEL]
        );
        assert!(group.spec.min_resources.is_empty());

        object.data["spec"]["replicatedJobs"][1]["dependsOn"] =
            json!([{"name": "prefill", "status": "Ready"}]);
        let Some(OrphanPlan::Missing { message, .. }) =
            plan(&key, &asked(), &jobset, Ok(&object), None)
        else {
            panic!("expected the pods told why");
        };
        assert!(
            message.contains(MIN_REPLICAS_ANNOTATION) && message.contains("dependsOn"),
            "{message}"
        );
    }

    #[test]
    fn a_spark_application_is_its_driver_with_the_room_of_its_executors_kept() {
        let key = GroupKey::new("ml", "etl");
        let app = Workload {
            api_version: "sparkoperator.k8s.io/v1beta2".into(),
            kind: "SparkApplication".into(),
            name: "etl".into(),
            uid: "app-uid".into(),
        };
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "etl", "namespace": "ml", "uid": "app-uid"},
            "spec": {"driver": {"cores": 4, "memory": "1g", "memoryOverhead": "1g"},
                     "executor": {"instances": 3, "cores": 8, "memory": "3g", "memoryOverhead": "1g"}}
        }))
        .unwrap();
        let Some(OrphanPlan::Create(group)) = plan(&key, &asked(), &app, Ok(&object), Some("etl"))
        else {
            panic!("expected a PodGroup");
        };
        assert_eq!(group.spec.min_member, 1);
        assert_eq!(
            min_resources(&group),
            [
                ("cpu".into(), "28".into()),
                ("memory".into(), "14Gi".into())
            ]
        );
        assert!(!group.admitted_ahead_of_members(), "the driver is its gang");

        let mut odd = object.clone();
        odd.data["spec"]["executor"]["memory"] = json!("3.5g");
        let Some(OrphanPlan::Missing { message, .. }) =
            plan(&key, &asked(), &app, Ok(&odd), Some("etl"))
        else {
            panic!("expected the pods told why");
        };
        assert!(message.contains("spec.executor.memory"), "{message}");
    }

    #[test]
    fn a_workload_that_cannot_be_read_or_sized_leaves_its_pods_told_why() {
        let key = GroupKey::new("ml", "ray");
        let message = |p: Option<OrphanPlan>| match p {
            Some(OrphanPlan::Missing { message, .. }) => message,
            other => panic!("expected an event, got {other:?}"),
        };
        let why = message(plan(&key, &asked(), &ray(), Err("forbidden"), None));
        assert!(why.contains("could not be read (forbidden)"), "{why}");
        let odd = object(
            json!({}),
            json!({"workerGroupSpecs": [{"minReplicas": "three"}]}),
        );
        let why = message(plan(&key, &asked(), &ray(), Ok(&odd), None));
        assert!(why.contains("its spec gives no gang size"), "{why}");
        let other = Workload {
            uid: "another".into(),
            ..ray()
        };
        let cluster = object(json!({}), json!({}));
        let why = message(plan(&key, &asked(), &other, Ok(&cluster), None));
        assert!(why.contains("replaced"), "{why}");
    }

    #[test]
    fn a_workload_known_by_name_only_is_owned_by_the_object_read() {
        let key = GroupKey::new("ml", "ray");
        let by_name = Workload {
            uid: String::new(),
            ..ray()
        };
        let cluster = object(json!({}), json!({"workerGroupSpecs": [{"minReplicas": 1}]}));
        let Some(OrphanPlan::Create(group)) = plan(&key, &asked(), &by_name, Ok(&cluster), None)
        else {
            panic!("expected a PodGroup");
        };
        let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.uid, "ray-uid");
    }
}
