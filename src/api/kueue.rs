//! Kueue's `Workload` and `AdmissionCheck` (`kueue.x-k8s.io/v1beta2`, Kueue v0.17), with only
//! the fields Gangplank reads or writes.
//!
//! Beside Kueue, Kueue queues and Gangplank places (docs/kueue.md): a ClusterQueue that lists
//! an AdmissionCheck whose `controllerName` is [`CONTROLLER_NAME`] has each Workload it
//! reserves quota for wait on that check; the controller gives such a Workload a Gangplank
//! PodGroup of its name (`crate::controller::foreign_groups`), a gang of every pod its PodSets
//! count, admitted ahead of its pods once the whole gang fits, and marks the check `Ready`
//! then ([`check_state`]); Kueue then admits the Workload and starts its job, whose pods
//! Kueue annotates [`WORKLOAD_ANNOTATION`] and the pod webhook puts in that PodGroup.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PodGroup, PodGroupPhase, PodGroupStatus};

/// `apiVersion` of Kueue's kinds that Gangplank reads (the storage version of v0.17).
pub const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";

/// The `controllerName` of Gangplank's AdmissionCheck.
pub const CONTROLLER_NAME: &str = "scheduling.gangplank.dev/whole-gang";

/// The annotation Kueue writes on the pods of the Workload it admitted, naming it.
pub const WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/workload";

/// The label that puts a Job in a Kueue LocalQueue.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// A Workload's spec: its PodSets.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Workload",
    root = "KueueWorkload",
    status = "KueueWorkloadStatus",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct KueueWorkloadSpec {
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
    /// The priority Kueue gave it (from its WorkloadPriorityClass or PriorityClass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// One PodSet: `count` pods of `template`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub count: i32,
    #[serde(default)]
    #[schemars(skip)]
    pub template: PodTemplateSpec,
}

/// What Gangplank reads of a Workload's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KueueWorkloadStatus {
    #[serde(default)]
    #[schemars(skip)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    #[serde(default)]
    pub admission_checks: Vec<AdmissionCheckState>,
    /// On a MultiKueue manager: the worker MultiKueue chose (immutable once set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// On a MultiKueue manager: the workers a dispatcher nominated for a copy.
    #[serde(default)]
    pub nominated_cluster_names: Vec<String>,
}

/// The ClusterQueue that reserved quota for a Workload, and how many pods of each PodSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    #[serde(default)]
    pub cluster_queue: String,
    #[serde(default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// How many pods of the PodSet `name` the reservation counts (less than its `count` under
/// Kueue's partial admission).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
}

/// One admission check's state on a Workload (`Pending`, `Ready`, `Retry` or `Rejected`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub message: String,
}

/// An AdmissionCheck: cluster-scoped, naming the controller that runs it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "AdmissionCheck",
    root = "KueueAdmissionCheck",
    status = "KueueAdmissionCheckStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct KueueAdmissionCheckSpec {
    #[serde(default)]
    pub controller_name: String,
    /// The check's parameters object (MultiKueue's check names a MultiKueueConfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<CheckParameters>,
}

/// An AdmissionCheck's `spec.parameters`: a cluster-scoped object of the controller's own kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckParameters {
    #[serde(default)]
    pub api_group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// An AdmissionCheck's status: Kueue uses a ClusterQueue's checks only while `Active` is
/// `True`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KueueAdmissionCheckStatus {
    #[serde(default)]
    #[schemars(skip)]
    pub conditions: Vec<Condition>,
}

impl KueueWorkload {
    /// Whether Kueue reserved quota for it and it has not finished.
    pub fn has_quota_reserved(&self) -> bool {
        let Some(status) = &self.status else {
            return false;
        };
        let is_true = |kind: &str| {
            status
                .conditions
                .iter()
                .any(|c| c.type_ == kind && c.status == "True")
        };
        is_true("QuotaReserved") && !is_true("Finished")
    }

    /// Its check whose AdmissionCheck `ours` says is Gangplank's, if any.
    pub fn our_check(&self, ours: &dyn Fn(&str) -> bool) -> Option<&AdmissionCheckState> {
        let status = self.status.as_ref()?;
        status.admission_checks.iter().find(|c| ours(&c.name))
    }

    /// Every pod the reservation counts, in all.
    pub fn gang_size(&self) -> i64 {
        self.admitted_pod_sets()
            .map(|(_, count)| i64::from(count))
            .sum()
    }

    /// Why its gang can never be placed, when it is larger than Gangplank's largest gang: the
    /// message of a `Rejected` check.
    pub fn too_large(&self) -> Option<String> {
        let limit = gangplank_core::limits::MAX_MEMBERS;
        let size = self.gang_size();
        (size > i64::from(limit)).then(|| {
            format!(
                "a gang of {size} pods is larger than Gangplank's largest gang ({limit} pods): split the job, or lower its PodSets' counts"
            )
        })
    }

    /// Each PodSet with the pods the reservation counts for it (its `count`, or fewer under
    /// partial admission).
    pub fn admitted_pod_sets(&self) -> impl Iterator<Item = (&PodSet, i32)> {
        let assignments = self
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .map_or(&[][..], |a| &a.pod_set_assignments[..]);
        self.spec.pod_sets.iter().map(move |set| {
            let assigned = assignments
                .iter()
                .find(|a| a.name == set.name)
                .and_then(|a| a.count);
            (set, assigned.unwrap_or(set.count).max(0))
        })
    }
}

/// Whether a Kueue Workload controls `group` (Gangplank made it for one), so it is admitted
/// ahead of its members: Kueue starts the job only once the check says the gang fits.
pub fn controls(group: &PodGroup) -> bool {
    super::controller(&group.metadata)
        .is_some_and(|o| o.kind == "Workload" && o.api_version == API_VERSION)
}

/// What Gangplank's check says of a Workload whose PodGroup has the status `group` (as the
/// controller computes it) and gang `min_member`: `Ready` once the gang is admitted (its room
/// kept, or members released), else `Pending` with why it waits (the `Admitted` condition's
/// message).
pub fn check_state(group: &PodGroupStatus, min_member: i32) -> (&'static str, String) {
    if group.phase != PodGroupPhase::Pending {
        return (
            "Ready",
            format!(
                "Gangplank admitted the whole gang of {min_member} pods; its room is kept until they are placed"
            ),
        );
    }
    let why = group
        .conditions
        .iter()
        .find(|c| c.type_ == "Admitted")
        .map_or("waiting for Gangplank's admission", |c| c.message.as_str());
    ("Pending", format!("the whole gang does not fit yet: {why}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A Workload of two PodSets as Kueue v0.17 stores it, quota reserved for 3 of the 4
    /// workers (partial admission), Gangplank's check `gangplank` pending.
    fn workload(conditions: serde_json::Value) -> KueueWorkload {
        let template = |cpu: &str| {
            json!({"spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu}}}]}})
        };
        serde_json::from_value(json!({
            "apiVersion": API_VERSION, "kind": "Workload",
            "metadata": {"name": "job-train-5c4f2", "namespace": "ml", "uid": "w-uid"},
            "spec": {"queueName": "team", "podSets": [
                {"name": "launcher", "count": 1, "template": template("1")},
                {"name": "worker", "count": 4, "minCount": 2, "template": template("8")}]},
            "status": {"conditions": conditions,
                "admission": {"clusterQueue": "team", "podSetAssignments": [
                    {"name": "launcher", "count": 1, "flavors": {"cpu": "default"}},
                    {"name": "worker", "count": 3, "flavors": {"cpu": "default"}}]},
                "admissionChecks": [
                    {"name": "gangplank", "state": "Pending", "message": "",
                        "lastTransitionTime": "2026-12-07T06:00:00Z"},
                    {"name": "other", "state": "Ready", "message": "",
                        "lastTransitionTime": "2026-12-07T06:00:00Z"}]}
        }))
        .unwrap()
    }

    fn condition(kind: &str, status: &str) -> serde_json::Value {
        json!({"type": kind, "status": status, "reason": "R", "message": "",
            "lastTransitionTime": "2026-12-07T06:00:00Z"})
    }

    #[test]
    fn a_workload_counts_the_pods_its_reservation_counts_per_pod_set() {
        let w = workload(json!([condition("QuotaReserved", "True")]));
        let counts: Vec<(&str, i32)> = w
            .admitted_pod_sets()
            .map(|(set, n)| (set.name.as_str(), n))
            .collect();
        assert_eq!(counts, [("launcher", 1), ("worker", 3)]);
        assert!(w.has_quota_reserved());
        let check = w.our_check(&|name| name == "gangplank").unwrap();
        assert_eq!(check.state, "Pending");
        assert!(w.our_check(&|name| name == "mine").is_none());
    }

    #[test]
    fn a_gang_larger_than_gangplanks_largest_is_refused_saying_what_to_change() {
        let mut w = workload(json!([condition("QuotaReserved", "True")]));
        assert_eq!(w.gang_size(), 4);
        assert_eq!(w.too_large(), None);
        w.status.as_mut().unwrap().admission = None;
        w.spec.pod_sets[1].count = i32::MAX;
        assert_eq!(w.gang_size(), 1 + i64::from(i32::MAX));
        let why = w.too_large().unwrap();
        assert!(
            why.starts_with(
                "a gang of 2147483648 pods is larger than Gangplank's largest gang (10000 pods)"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_finished_workload_or_one_without_quota_has_none_reserved() {
        let finished = workload(json!([
            condition("QuotaReserved", "True"),
            condition("Finished", "True")
        ]));
        assert!(!finished.has_quota_reserved());
        assert!(!workload(json!([condition("QuotaReserved", "False")])).has_quota_reserved());
    }

    #[test]
    fn the_check_is_ready_once_the_gang_is_admitted_and_says_why_it_waits_before() {
        let mut status = PodGroupStatus {
            conditions: vec![Condition {
                type_: "Admitted".into(),
                status: "False".into(),
                reason: "WaitingForRoom".into(),
                message: "does not fit now: cpu 64 needed, 32 free".into(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            }],
            ..PodGroupStatus::default()
        };
        assert_eq!(
            check_state(&status, 4),
            (
                "Pending",
                "the whole gang does not fit yet: does not fit now: cpu 64 needed, 32 free"
                    .to_owned()
            )
        );
        status.phase = PodGroupPhase::Inqueue;
        let (state, message) = check_state(&status, 4);
        assert_eq!(state, "Ready");
        assert!(message.contains("whole gang of 4 pods"), "{message}");
    }
}
