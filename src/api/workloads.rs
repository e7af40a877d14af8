//! The workload kinds whose pods form one gang without any gang flag on their operator: a pod
//! of one of them, in a queue's scope, joins the group named after it, and the controller sizes
//! that group from the workload's spec (`crate::controller::workloads`).
//!
//! A pod (or a batch/v1 Job) belongs to a workload ([`of`]) when:
//! - its controller (ownerReference with `controller: true`) is of a kind listed here;
//! - or it carries JobSet's labels `jobset.sigs.k8s.io/jobset-name` and `jobset-uid` (JobSet's
//!   pods are controlled by its child Jobs, which JobSet labels so);
//! - or it carries the MPI operator's labels (`training.kubeflow.org/operator-name:
//!   mpi-operator` and `training.kubeflow.org/job-name`): its launcher runs as a batch/v1 Job
//!   the MPIJob controls, so the launcher pod's controller is that Job;
//! - or it carries spark-operator's labels (`sparkoperator.k8s.io/app-name` and
//!   `launched-by-spark-operator: "true"`): a Spark executor's controller is its driver pod;
//! - or it carries LWS's label `leaderworkerset.sigs.k8s.io/name` and the group label
//!   `scheduling.gangplank.dev/pod-group` of the same name, which the workload webhook writes on
//!   the pod templates of a LeaderWorkerSet that is a gang of its replicas
//!   ([`super::min_replicas`]; otherwise each replica is a gang of its own,
//!   [`super::leader_worker_set`]).
//!
//! Sizes, read from the spec as the operators define their workloads:
//! - Kubeflow training jobs (`kubeflow.org`: PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob,
//!   JAXJob): `spec.runPolicy.schedulingPolicy.minAvailable` when set, else the sum of
//!   `replicas` (1 when unset) over the job's `*ReplicaSpecs`;
//! - KubeRay's RayCluster (`ray.io`): its head plus each worker group's `minReplicas` (workers
//!   above that are elastic members);
//! - JobSet (`jobset.x-k8s.io`): over its `replicatedJobs`, `replicas` (1 when unset) times the
//!   pods each Job runs at once, `min(parallelism, completions)` (parallelism 1 when unset);
//! - spark-operator's SparkApplication (`sparkoperator.k8s.io`): its driver, with the room of
//!   the driver and the executors it starts with kept for it ([`super::spark::room`]);
//! - LeaderWorkerSet (`leaderworkerset.x-k8s.io`), grouped whole only as above: `replicas`
//!   times `leaderWorkerTemplate.size`.

use gangplank_core::model::Resources;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::min_replicas::{self, Problem, Replicas, Tree};
pub use super::stages::Stages;
use super::{leader_worker_set, spark};

/// JobSet's labels on its child Jobs and their pods.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
pub const JOBSET_UID_LABEL: &str = "jobset.sigs.k8s.io/jobset-uid";
/// JobSet's labels on a child Job's pods: its replicated job, and its index among that one's Jobs.
pub const JOBSET_REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
pub const JOBSET_JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";
const JOBSET_API_VERSION: &str = "jobset.x-k8s.io/v1alpha2";
/// The MPI operator's labels on its launcher and worker pods.
pub const KUBEFLOW_OPERATOR_LABEL: &str = "training.kubeflow.org/operator-name";
pub const KUBEFLOW_JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
const MPI_OPERATOR: &str = "mpi-operator";
const MPI_JOB_API_VERSION: &str = "kubeflow.org/v2beta1";

/// A workload kind Gangplank groups by.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// API group, as in an ownerReference's `apiVersion` before the `/`.
    pub group: &'static str,
    pub kind: &'static str,
    /// Resource name, for the API path.
    pub plural: &'static str,
    size: fn(&Value) -> Option<u32>,
    pod_metadata: fn(&Value) -> Vec<Vec<String>>,
    stages: fn(&Value) -> Option<Stages<'_>>,
    room: fn(&Value) -> Option<Result<Resources, String>>,
    replicas: fn(&Value) -> min_replicas::Read,
    /// Its pods join its group only by the group label the workload webhook writes on its pod
    /// templates when it is a gang of its replicas ([`Kind::named_by_group_label`]).
    group_label: bool,
}

impl Kind {
    /// The gang size `object` (the workload, as JSON) asks for; `None` when its spec does not
    /// say (a field of the wrong type, or no replicas at all).
    pub fn size(&self, object: &Value) -> Option<u32> {
        (self.size)(object.get("spec")?).filter(|n| *n >= 1)
    }

    /// The paths (object keys and array indices, from the root of `object`) of the metadata
    /// of each pod template the workload's operator makes its pods from: where the `labels`
    /// and `annotations` it copies onto them stand.
    pub fn pod_metadata(&self, object: &Value) -> Vec<Vec<String>> {
        (self.pod_metadata)(object)
    }

    /// When the workload's pods come in stages (a JobSet some of whose replicated jobs wait
    /// for others, `dependsOn`), each pod spec it makes pods from, with how many run from it
    /// at once; `None` when they all come at once, or its spec does not say.
    pub fn stages<'a>(&self, object: &'a Value) -> Option<Stages<'a>> {
        (self.stages)(object.get("spec")?)
    }

    /// The gang of gangs the workload's `scheduling.gangplank.dev/min-replicas` annotation asks
    /// for ([`min_replicas`]); `None` without the annotation.
    pub fn tree(&self, meta: &ObjectMeta, object: &Value) -> Option<Result<Tree, Problem>> {
        let replicas = object.get("spec").and_then(self.replicas);
        min_replicas::tree(meta, self.kind, replicas)
    }

    /// Whether its pods join its group only by the label `scheduling.gangplank.dev/pod-group`
    /// naming it, which the workload webhook writes on its pod templates when the workload is a
    /// gang of its replicas (a LeaderWorkerSet: without it each replica is a gang of its own).
    pub fn named_by_group_label(&self) -> bool {
        self.group_label
    }

    /// The room a workload whose first pods make the others asks for in all, when its spec
    /// says so without pod templates (a Spark application); the error names the field that
    /// cannot be read.
    pub fn room(&self, object: &Value) -> Option<Result<Resources, String>> {
        (self.room)(object.get("spec")?)
    }
}

fn all_at_once(_: &Value) -> Option<Stages<'_>> {
    None
}

fn no_replicas(_: &Value) -> min_replicas::Read {
    None
}

fn templates_say(_: &Value) -> Option<Result<Resources, String>> {
    None
}

const fn kubeflow(kind: &'static str, plural: &'static str) -> Kind {
    Kind {
        group: "kubeflow.org",
        kind,
        plural,
        size: kubeflow_size,
        pod_metadata: kubeflow_pod_metadata,
        stages: all_at_once,
        room: templates_say,
        replicas: no_replicas,
        group_label: false,
    }
}

/// Every kind Gangplank groups by.
pub const KINDS: [Kind; 10] = [
    kubeflow("PyTorchJob", "pytorchjobs"),
    kubeflow("TFJob", "tfjobs"),
    kubeflow("MPIJob", "mpijobs"),
    kubeflow("XGBoostJob", "xgboostjobs"),
    kubeflow("PaddleJob", "paddlejobs"),
    kubeflow("JAXJob", "jaxjobs"),
    Kind {
        group: "ray.io",
        kind: "RayCluster",
        plural: "rayclusters",
        size: ray_cluster_size,
        pod_metadata: ray_cluster_pod_metadata,
        stages: all_at_once,
        room: templates_say,
        replicas: no_replicas,
        group_label: false,
    },
    Kind {
        group: "jobset.x-k8s.io",
        kind: "JobSet",
        plural: "jobsets",
        size: jobset_size,
        pod_metadata: jobset_pod_metadata,
        stages: jobset_stages,
        room: templates_say,
        replicas: jobset_replicas,
        group_label: false,
    },
    Kind {
        group: "sparkoperator.k8s.io",
        kind: "SparkApplication",
        plural: "sparkapplications",
        size: |_| Some(1),
        pod_metadata: spark_pod_metadata,
        stages: all_at_once,
        room: |spec| Some(spark::room(spec)),
        replicas: no_replicas,
        group_label: false,
    },
    Kind {
        group: "leaderworkerset.x-k8s.io",
        kind: leader_worker_set::KIND,
        plural: leader_worker_set::PLURAL,
        size: leader_worker_set::size,
        pod_metadata: leader_worker_set::pod_metadata,
        stages: leader_worker_set::stages,
        room: templates_say,
        replicas: leader_worker_set::replicas,
        group_label: true,
    },
];

/// The workload a pod or Job belongs to (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub kind: &'static Kind,
    /// As an ownerReference spells it: the group and the version to read the workload with.
    pub api_version: String,
    pub name: String,
    /// Empty when only the name is known (an MPI launcher's pod, a Spark executor whose
    /// references do not name its application).
    pub uid: String,
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        (self.group, self.kind) == (other.group, other.kind)
    }
}

impl Eq for Kind {}

/// The workload the object of `meta` (a pod or a batch/v1 Job) belongs to, if any.
pub fn of(meta: &ObjectMeta) -> Option<Owner> {
    let owned = super::controller(meta).and_then(|o| {
        Some(Owner {
            kind: kind_of(&o.api_version, &o.kind)?,
            api_version: o.api_version.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        })
    });
    let labelled = || {
        let labels = meta.labels.as_ref()?;
        let label = |key: &str| labels.get(key).filter(|v| !v.is_empty());
        if let (Some(name), Some(uid)) = (label(JOBSET_NAME_LABEL), label(JOBSET_UID_LABEL)) {
            return Some(Owner {
                kind: kind_of(JOBSET_API_VERSION, "JobSet")?,
                api_version: JOBSET_API_VERSION.to_owned(),
                name: name.clone(),
                uid: uid.clone(),
            });
        }
        if let (Some(name), Some("true")) = (
            label(spark::APP_NAME_LABEL),
            label(spark::LAUNCHED_LABEL).map(String::as_str),
        ) {
            let uid = meta.owner_references.iter().flatten().find(|o| {
                o.kind == "SparkApplication"
                    && o.name == *name
                    && o.api_version.starts_with("sparkoperator.k8s.io/")
            });
            return Some(Owner {
                kind: kind_of(spark::API_VERSION, "SparkApplication")?,
                api_version: spark::API_VERSION.to_owned(),
                name: name.clone(),
                uid: uid.map(|o| o.uid.clone()).unwrap_or_default(),
            });
        }
        if let Some(name) = label(leader_worker_set::NAME_LABEL)
            && label(super::labels::POD_GROUP_LABEL) == Some(name)
        {
            return Some(Owner {
                kind: kind_of(leader_worker_set::API_VERSION, leader_worker_set::KIND)?,
                api_version: leader_worker_set::API_VERSION.to_owned(),
                name: name.clone(),
                uid: String::new(),
            });
        }
        let name = label(KUBEFLOW_JOB_NAME_LABEL)?;
        (label(KUBEFLOW_OPERATOR_LABEL).map(String::as_str) == Some(MPI_OPERATOR)).then(|| Owner {
            kind: kind_of(MPI_JOB_API_VERSION, "MPIJob").expect("a known kind"),
            api_version: MPI_JOB_API_VERSION.to_owned(),
            name: name.clone(),
            uid: String::new(),
        })
    };
    owned.or_else(labelled).filter(|o| !o.name.is_empty())
}

/// The kind an ownerReference of `api_version` and `kind` names, if Gangplank groups by it.
pub fn kind_of(api_version: &str, kind: &str) -> Option<&'static Kind> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    KINDS.iter().find(|k| k.group == group && k.kind == kind)
}

fn count(value: Option<&Value>, absent: u32) -> Option<u32> {
    match value {
        None | Some(Value::Null) => Some(absent),
        Some(v) => u32::try_from(v.as_u64()?).ok(),
    }
}

fn kubeflow_size(spec: &Value) -> Option<u32> {
    let min_available = spec
        .pointer("/runPolicy/schedulingPolicy/minAvailable")
        .filter(|v| !v.is_null());
    if let Some(n) = min_available {
        return count(Some(n), 0);
    }
    let mut total = 0u32;
    for (key, replicas) in spec.as_object()? {
        if key.ends_with("ReplicaSpecs") {
            for replica in replicas.as_object()?.values() {
                total = total.checked_add(count(replica.get("replicas"), 1)?)?;
            }
        }
    }
    Some(total)
}

fn ray_cluster_size(spec: &Value) -> Option<u32> {
    let mut total = 1u32;
    let workers = spec.get("workerGroupSpecs").and_then(Value::as_array);
    for group in workers.into_iter().flatten() {
        total = total.checked_add(count(group.get("minReplicas"), 0)?)?;
    }
    Some(total)
}

/// `["spec", ...prefix, i, ...suffix]` for each index `i` of the array at `spec.prefix`.
fn each(object: &Value, prefix: &[&str], suffix: &[&str]) -> Vec<Vec<String>> {
    let path: Vec<&str> = std::iter::once("spec")
        .chain(prefix.iter().copied())
        .collect();
    let items = path
        .iter()
        .try_fold(object, |v, key| v.get(*key))
        .and_then(Value::as_array);
    (0..items.map_or(0, Vec::len))
        .map(|i| {
            let index = i.to_string();
            let tail = std::iter::once(index.as_str()).chain(suffix.iter().copied());
            path.iter()
                .copied()
                .chain(tail)
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn kubeflow_pod_metadata(object: &Value) -> Vec<Vec<String>> {
    let Some(spec) = object.get("spec").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut paths = Vec::new();
    for (key, replicas) in spec.iter().filter(|(k, _)| k.ends_with("ReplicaSpecs")) {
        for role in replicas.as_object().into_iter().flat_map(|r| r.keys()) {
            paths.push(
                ["spec", key, role, "template", "metadata"]
                    .map(str::to_owned)
                    .to_vec(),
            );
        }
    }
    paths
}

fn ray_cluster_pod_metadata(object: &Value) -> Vec<Vec<String>> {
    let head = ["spec", "headGroupSpec", "template", "metadata"]
        .map(str::to_owned)
        .to_vec();
    std::iter::once(head)
        .chain(each(
            object,
            &["workerGroupSpecs"],
            &["template", "metadata"],
        ))
        .collect()
}

fn jobset_pod_metadata(object: &Value) -> Vec<Vec<String>> {
    each(
        object,
        &["replicatedJobs"],
        &["template", "spec", "template", "metadata"],
    )
}

/// A SparkApplication's driver and executor specs hold their pods' labels and annotations
/// themselves (the operator passes them to spark-submit).
fn spark_pod_metadata(_: &Value) -> Vec<Vec<String>> {
    ["driver", "executor"]
        .map(|role| vec!["spec".to_owned(), role.to_owned()])
        .to_vec()
}

fn jobset_size(spec: &Value) -> Option<u32> {
    let mut total = 0u32;
    for job in spec.get("replicatedJobs")?.as_array()? {
        total = total.checked_add(jobset_pods_at_once(job)?)?;
    }
    Some(total)
}

/// The pods a replicated job runs at once: `replicas` (1 when unset) times
/// [`jobset_pods_of_a_job`].
fn jobset_pods_at_once(job: &Value) -> Option<u32> {
    count(job.get("replicas"), 1)?.checked_mul(jobset_pods_of_a_job(job)?)
}

/// The pods each Job of a replicated job runs at once: `min(parallelism, completions)`
/// (parallelism 1 when unset).
fn jobset_pods_of_a_job(job: &Value) -> Option<u32> {
    let spec = job.pointer("/template/spec");
    let parallelism = count(spec.and_then(|s| s.get("parallelism")), 1)?;
    let completions = count(spec.and_then(|s| s.get("completions")), u32::MAX)?;
    Some(parallelism.min(completions))
}

/// A JobSet's replicated jobs, each Job of one a replica; refused when they come in stages.
fn jobset_replicas(spec: &Value) -> min_replicas::Read {
    if jobset_stages(spec).is_some() {
        return Some(Err(Problem::InStages));
    }
    let read = |job: &Value| {
        let name = job.get("name")?.as_str()?.to_owned();
        Some(Replicas {
            selector: Some((JOBSET_REPLICATED_JOB_LABEL, name.clone())),
            name,
            count: count(job.get("replicas"), 1)?,
            pods: jobset_pods_of_a_job(job)?,
            instance_key: JOBSET_JOB_INDEX_LABEL,
        })
    };
    let jobs = spec.get("replicatedJobs").and_then(Value::as_array);
    Some(
        jobs.and_then(|jobs| jobs.iter().map(read).collect())
            .ok_or(Problem::Unreadable),
    )
}

fn jobset_stages(spec: &Value) -> Option<Stages<'_>> {
    let jobs = spec.get("replicatedJobs")?.as_array()?;
    let waits = |job: &Value| {
        job.get("dependsOn")
            .and_then(Value::as_array)
            .is_some_and(|d| !d.is_empty())
    };
    if !jobs.iter().any(waits) {
        return None;
    }
    jobs.iter()
        .map(|job| {
            let pods = job.pointer("/template/spec/template/spec")?;
            Some((jobset_pods_at_once(job)?, pods))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size(api_version: &str, kind: &str, spec: Value) -> Option<u32> {
        kind_of(api_version, kind)
            .expect("a known kind")
            .size(&json!({ "spec": spec }))
    }

    #[test]
    fn a_training_job_is_as_big_as_its_replicas_unless_its_policy_says_min_available() {
        let spec =
            json!({"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}});
        assert_eq!(size("kubeflow.org/v1", "PyTorchJob", spec), Some(4));
        let spec = json!({"tfReplicaSpecs": {"PS": {}, "Worker": {"replicas": 2}},
            "runPolicy": {"schedulingPolicy": {"minAvailable": 2}}});
        assert_eq!(size("kubeflow.org/v1", "TFJob", spec), Some(2));
        let spec = json!({"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {}}});
        assert_eq!(size("kubeflow.org/v2beta1", "MPIJob", spec), Some(2));
    }

    #[test]
    fn a_jobset_whose_jobs_wait_for_others_makes_its_pods_in_stages() {
        let kind = kind_of("jobset.x-k8s.io/v1alpha2", "JobSet").unwrap();
        let pod = |cpu: &str| json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
        let staged = json!({"spec": {"replicatedJobs": [
            {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": pod("1")}}}},
            {"name": "node", "replicas": 2, "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
             "template": {"spec": {"parallelism": 3, "template": {"spec": pod("8")}}}}]}});
        let stages = kind.stages(&staged).expect("in stages");
        assert_eq!(
            stages.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            [1, 6],
            "the initializer's one pod, then two Jobs of three"
        );
        assert_eq!(stages[1].1, &pod("8"));
        let at_once = json!({"spec": {"replicatedJobs": [
            {"name": "node", "dependsOn": [], "template": {"spec": {"template": {"spec": pod("8")}}}}]}});
        assert_eq!(kind.stages(&at_once), None);
        let ray = kind_of("ray.io/v1", "RayCluster").unwrap();
        assert_eq!(ray.stages(&staged), None);
    }

    #[test]
    fn a_ray_cluster_is_its_head_and_its_workers_minimum() {
        let spec = json!({"headGroupSpec": {}, "workerGroupSpecs": [
            {"minReplicas": 3, "replicas": 5}, {"groupName": "small"}]});
        assert_eq!(size("ray.io/v1", "RayCluster", spec), Some(4));
    }

    #[test]
    fn a_jobset_is_every_pod_its_jobs_run_at_once() {
        let spec = json!({"replicatedJobs": [
            {"name": "leader", "template": {"spec": {}}},
            {"name": "workers", "replicas": 2,
             "template": {"spec": {"parallelism": 3, "completions": 2}}}]});
        assert_eq!(size("jobset.x-k8s.io/v1alpha2", "JobSet", spec), Some(5));
    }

    #[test]
    fn each_kind_names_the_pod_metadata_its_operator_copies() {
        let templates = |api_version: &str, kind: &str, spec: Value| {
            kind_of(api_version, kind)
                .unwrap()
                .pod_metadata(&json!({ "spec": spec }))
                .into_iter()
                .map(|p| p.join("."))
                .collect::<Vec<_>>()
        };
        let spec = json!({"mpiReplicaSpecs": {"Launcher": {}, "Worker": {}}, "slotsPerWorker": 1});
        assert_eq!(
            templates("kubeflow.org/v2beta1", "MPIJob", spec),
            [
                "spec.mpiReplicaSpecs.Launcher.template.metadata",
                "spec.mpiReplicaSpecs.Worker.template.metadata"
            ]
        );
        let spec = json!({"headGroupSpec": {}, "workerGroupSpecs": [{}, {}]});
        assert_eq!(
            templates("ray.io/v1", "RayCluster", spec),
            [
                "spec.headGroupSpec.template.metadata",
                "spec.workerGroupSpecs.0.template.metadata",
                "spec.workerGroupSpecs.1.template.metadata"
            ]
        );
        let spec = json!({"replicatedJobs": [{"name": "leader"}]});
        assert_eq!(
            templates("jobset.x-k8s.io/v1alpha2", "JobSet", spec),
            ["spec.replicatedJobs.0.template.spec.template.metadata"]
        );
        assert_eq!(
            templates(
                "sparkoperator.k8s.io/v1beta2",
                "SparkApplication",
                json!({})
            ),
            ["spec.driver", "spec.executor"]
        );
        let lws = "leaderworkerset.x-k8s.io/v1";
        let spec = json!({"leaderWorkerTemplate": {"workerTemplate": {}}});
        assert_eq!(
            templates(lws, "LeaderWorkerSet", spec),
            ["spec.leaderWorkerTemplate.workerTemplate.metadata"]
        );
        let spec = json!({"leaderWorkerTemplate": {"leaderTemplate": {}, "workerTemplate": {}}});
        assert_eq!(
            templates(lws, "LeaderWorkerSet", spec),
            [
                "spec.leaderWorkerTemplate.leaderTemplate.metadata",
                "spec.leaderWorkerTemplate.workerTemplate.metadata"
            ]
        );
    }

    #[test]
    fn a_leader_worker_set_annotated_with_min_replicas_is_a_gang_of_whole_replicas() {
        let kind = kind_of("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet").unwrap();
        let annotated: ObjectMeta = serde_json::from_value(
            json!({"annotations": {(crate::api::labels::MIN_REPLICAS_ANNOTATION): "2"}}),
        )
        .unwrap();
        let mut set = json!({"spec": {"replicas": 4, "leaderWorkerTemplate": {"size": 3,
            "workerTemplate": {"spec": {}}}}});
        assert_eq!(
            kind.size(&set),
            Some(12),
            "flat: every pod of every replica"
        );
        let tree = kind.tree(&annotated, &set).unwrap().unwrap();
        assert_eq!(tree.min_member, 6);
        let policy = &tree.policy[0];
        assert_eq!(
            (
                policy.sub_group_size,
                policy.min_sub_groups,
                policy.label_selector.is_none()
            ),
            (3, 2, true)
        );
        assert_eq!(
            policy.match_label_keys,
            [leader_worker_set::GROUP_INDEX_LABEL]
        );
        set["spec"]["startupPolicy"] = json!("LeaderReady");
        assert_eq!(kind.tree(&annotated, &set), Some(Err(Problem::InStages)));
        assert_eq!(
            kind.stages(&set)
                .map(|s| s.iter().map(|(n, _)| *n).collect::<Vec<_>>()),
            Some(vec![4, 8]),
            "every leader, then every worker"
        );
    }

    fn meta(value: Value) -> ObjectMeta {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_pod_belongs_to_its_controller_or_to_the_workload_its_labels_name() {
        let worker = meta(json!({"ownerReferences": [{"apiVersion": "ray.io/v1",
            "kind": "RayCluster", "name": "ray", "uid": "u1", "controller": true}]}));
        let owner = of(&worker).unwrap();
        assert_eq!(
            (owner.kind.kind, owner.name.as_str(), owner.uid.as_str()),
            ("RayCluster", "ray", "u1")
        );

        let job_owned = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
            "uid": "j1", "controller": true}]);
        let jobset_pod = meta(json!({"ownerReferences": job_owned, "labels": {
            JOBSET_NAME_LABEL: "train", JOBSET_UID_LABEL: "s1"}}));
        let owner = of(&jobset_pod).unwrap();
        assert_eq!(
            (
                owner.kind.kind,
                owner.api_version.as_str(),
                owner.uid.as_str()
            ),
            ("JobSet", "jobset.x-k8s.io/v1alpha2", "s1")
        );

        let launcher = meta(json!({"ownerReferences": job_owned, "labels": {
            KUBEFLOW_OPERATOR_LABEL: "mpi-operator", KUBEFLOW_JOB_NAME_LABEL: "pi"}}));
        let owner = of(&launcher).unwrap();
        assert_eq!(
            (
                owner.kind.kind,
                owner.api_version.as_str(),
                owner.uid.as_str()
            ),
            ("MPIJob", "kubeflow.org/v2beta1", "")
        );

        let spark_labels = json!({spark::APP_NAME_LABEL: "etl", spark::LAUNCHED_LABEL: "true"});
        let executor = meta(json!({"labels": spark_labels, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "etl-driver", "uid": "d1", "controller": true},
            {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
             "name": "etl", "uid": "a1"}]}));
        let owner = of(&executor).unwrap();
        assert_eq!(
            (owner.kind.kind, owner.name.as_str(), owner.uid.as_str()),
            ("SparkApplication", "etl", "a1")
        );
        let not_launched = meta(json!({"labels": {spark::APP_NAME_LABEL: "etl"}}));
        assert_eq!(of(&not_launched), None);

        let sts_owned = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "svc",
            "uid": "s1", "controller": true}]);
        let lws_pod = |group: &str| {
            meta(json!({"ownerReferences": sts_owned, "labels": {
                (leader_worker_set::NAME_LABEL): "svc", (crate::api::labels::POD_GROUP_LABEL): group}}))
        };
        let owner = of(&lws_pod("svc")).unwrap();
        assert_eq!(
            (owner.kind.kind, owner.name.as_str(), owner.uid.as_str()),
            ("LeaderWorkerSet", "svc", "")
        );
        assert_eq!(of(&lws_pod("other")), None, "a replica's own gang");

        let training_operator_pod = meta(json!({"ownerReferences": job_owned, "labels": {
            KUBEFLOW_OPERATOR_LABEL: "pytorchjob-controller", KUBEFLOW_JOB_NAME_LABEL: "p"}}));
        assert_eq!(of(&training_operator_pod), None);
        assert_eq!(of(&meta(json!({"ownerReferences": job_owned}))), None);
    }

    #[test]
    fn a_spec_that_does_not_say_gives_no_size() {
        let spec = json!({"pytorchReplicaSpecs": {"Worker": {"replicas": "three"}}});
        assert_eq!(size("kubeflow.org/v1", "PyTorchJob", spec), None);
        assert_eq!(size("kubeflow.org/v1", "PyTorchJob", json!({})), None);
        assert!(kind_of("batch/v1", "Job").is_none());
        assert!(kind_of("example.com/v1", "PyTorchJob").is_none());
    }
}
