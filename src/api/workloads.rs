//! The workload kinds whose pods form one gang without any gang flag on their operator: a pod
//! controlled by one of them, in a queue's scope, joins the group named after it, and the
//! controller sizes that group from the workload's spec (`crate::controller::workloads`).
//!
//! Sizes, read from the spec as the operators define their workloads:
//! - Kubeflow training jobs (`kubeflow.org`: PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob,
//!   JAXJob): `spec.runPolicy.schedulingPolicy.minAvailable` when set, else the sum of
//!   `replicas` (1 when unset) over the job's `*ReplicaSpecs`;
//! - KubeRay's RayCluster (`ray.io`): its head plus each worker group's `minReplicas` (workers
//!   above that are elastic members).

use serde_json::Value;

/// A workload kind Gangplank groups by.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// API group, as in an ownerReference's `apiVersion` before the `/`.
    pub group: &'static str,
    pub kind: &'static str,
    /// Resource name, for the API path.
    pub plural: &'static str,
    size: fn(&Value) -> Option<u32>,
}

impl Kind {
    /// The gang size `object` (the workload, as JSON) asks for; `None` when its spec does not
    /// say (a field of the wrong type, or no replicas at all).
    pub fn size(&self, object: &Value) -> Option<u32> {
        (self.size)(object.get("spec")?).filter(|n| *n >= 1)
    }
}

const fn kubeflow(kind: &'static str, plural: &'static str) -> Kind {
    Kind {
        group: "kubeflow.org",
        kind,
        plural,
        size: kubeflow_size,
    }
}

/// Every kind Gangplank groups by.
pub const KINDS: [Kind; 7] = [
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
    },
];

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
    fn a_ray_cluster_is_its_head_and_its_workers_minimum() {
        let spec = json!({"headGroupSpec": {}, "workerGroupSpecs": [
            {"minReplicas": 3, "replicas": 5}, {"groupName": "small"}]});
        assert_eq!(size("ray.io/v1", "RayCluster", spec), Some(4));
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
