//! The status apply that nominates workers, built as Kueue v0.17.0 builds its own
//! (`PrepareWorkloadPatch` in pkg/workload/workload.go): Kueue writes a Workload's admission
//! status by server-side apply under the field manager [`FIELD_MANAGER`], and clears
//! `nominatedClusterNames` that way when a worker wins. A nomination must be written under the
//! same manager (a value another manager owned would outlive Kueue's clearing, and Kueue could
//! then not record the winner), and so must carry everything else that manager owns, at its
//! current value: an apply drops what its manager owned before and leaves out. The body holds
//! the object's `resourceVersion`, so an apply made from a stale read is refused (409) and the
//! next round reads again.

use serde_json::{Map, Value, json};

/// The field manager of Kueue's admission status writes.
pub const FIELD_MANAGER: &str = "kueue-admission";

/// The condition types Kueue's admission writes own (`admissionManagedConditions`).
const ADMISSION_CONDITIONS: [&str; 8] = [
    "QuotaReserved",
    "BlockedOnPreemptionGates",
    "Evicted",
    "Admitted",
    "Preempted",
    "Requeued",
    "DeactivationTarget",
    "Finished",
];

/// The apply body that sets `names` as `workload`'s (a Workload as the API returns it)
/// nominated workers and keeps the rest of its admission status as it is.
pub fn nomination(workload: &Value, names: &[String]) -> Value {
    let meta = &workload["metadata"];
    let current = &workload["status"];
    let mut status = Map::new();
    let mut keep = |key: &str, value: &Value| {
        if !value.is_null() {
            status.insert(key.to_owned(), value.clone());
        }
    };
    keep("admission", &current["admission"]);
    let requeue = &current["requeueState"];
    if !requeue["count"].is_null() || !requeue["requeueAt"].is_null() {
        keep("requeueState", requeue);
    }
    if current["admission"].is_null() {
        keep("resourceRequests", &current["resourceRequests"]);
    } else {
        keep("resourceRequests", &json!([]));
    }
    let conditions: Vec<Value> = current["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| ADMISSION_CONDITIONS.contains(&c["type"].as_str().unwrap_or_default()))
        .cloned()
        .collect();
    if !conditions.is_empty() {
        keep("conditions", &Value::Array(conditions));
    }
    keep(
        "accumulatedPastExecutionTimeSeconds",
        &current["accumulatedPastExecutionTimeSeconds"],
    );
    let evictions = &current["schedulingStats"]["evictions"];
    if !current["schedulingStats"].is_null() {
        keep(
            "schedulingStats",
            &json!({"evictions": evictions.as_array().cloned().unwrap_or_default()}),
        );
    }
    keep("clusterName", &current["clusterName"]);
    keep("unhealthyNodes", &current["unhealthyNodes"]);
    keep("preemptionGates", &current["preemptionGates"]);
    keep("admissionChecks", &current["admissionChecks"]);
    status.insert("nominatedClusterNames".into(), json!(names));
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "generation": meta["generation"],
            "labels": meta["labels"], "annotations": meta["annotations"],
        },
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nomination_keeps_the_admission_status_and_leaves_out_other_writers_conditions() {
        let workload = json!({
            "metadata": {"name": "job-train-1", "namespace": "ml", "uid": "u",
                "resourceVersion": "42", "generation": 1, "labels": {"a": "b"}},
            "spec": {"podSets": []},
            "status": {
                "admission": {"clusterQueue": "team", "podSetAssignments": []},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True"},
                    {"type": "PodsReady", "status": "False"}],
                "admissionChecks": [{"name": "mk", "state": "Pending", "message": ""}],
                "resourceRequests": [{"name": "main"}],
                "requeueState": {},
            }
        });
        let body = nomination(&workload, &["worker-2".to_owned()]);
        assert_eq!(body["metadata"]["resourceVersion"], "42");
        let status = &body["status"];
        assert_eq!(status["nominatedClusterNames"], json!(["worker-2"]));
        assert_eq!(status["admission"]["clusterQueue"], "team");
        assert_eq!(
            status["conditions"],
            json!([{"type": "QuotaReserved", "status": "True"}])
        );
        assert_eq!(status["admissionChecks"][0]["name"], "mk");
        assert_eq!(
            status["resourceRequests"],
            json!([]),
            "with an admission, as Kueue does"
        );
        assert!(
            status.get("requeueState").is_none(),
            "an empty one is left out"
        );
        assert!(status.get("clusterName").is_none());
    }
}
