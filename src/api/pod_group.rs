//! The `PodGroup` custom resource: a gang of pods that is admitted, placed and bound all or
//! nothing, in one queue.
//!
//! The name and the spec follow scheduler-plugins' coscheduling PodGroup (`minMember`,
//! `minResources`, `scheduleTimeoutSeconds`) so that manifests written for it carry over, plus
//! what queues need (`queue`, `priorityClassName`, `maxWaitSeconds`) and an elastic upper bound
//! (`maxMember`). Pods join with the label `scheduling.gangplank.dev/pod-group: <name>` in the
//! PodGroup's namespace (see [`super::labels`] for the accepted aliases).
//!
//! `scheduleTimeoutSeconds` has no schema default on purpose: its useful range depends on the
//! cluster's scheduler configuration (held binds must answer within the extender's
//! `httpTimeout`), so the default, [`DEFAULT_SCHEDULE_TIMEOUT_SECONDS`], is applied by code
//! ([`PodGroupSpec::schedule_timeout`]) and is not frozen into every stored object.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ResourceList, conditions_schema, kubernetes_style, labels, resource_list_schema};

pub use gangplank_core::model::names::DEFAULT_SCHEDULE_TIMEOUT_SECONDS;

/// The gang: its size, resources, queue, priority and how long it may wait.
///
/// Members are scheduled all or nothing: none is bound until `minMember` of them have a node.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.gangplank.dev",
    version = "v1alpha1",
    kind = "PodGroup",
    namespaced,
    status = "PodGroupStatus",
    derive = "PartialEq",
    shortname = "pg",
    category = "gangplank",
    doc = "A gang of pods scheduled all or nothing: none is bound until minMember of them have a node. Pods join with the label scheduling.gangplank.dev/pod-group: <name>.",
    validation = (
        "size(self.metadata.name) <= 63",
        "PodGroup names are used as label values (scheduling.gangplank.dev/pod-group) and must be at most 63 characters"
    ),
    printcolumn(name = "MinMember", type_ = "integer", json_path = ".spec.minMember", description = "Gang size."),
    printcolumn(name = "Queue", type_ = "string", json_path = ".spec.queue", description = "Queue the group is admitted through."),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase", description = "Pending, Inqueue, Running, Completed, Failed or Unknown."),
    printcolumn(name = "Running", type_ = "integer", json_path = ".status.running", description = "Member pods running."),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "MaxMember", type_ = "integer", json_path = ".spec.maxMember", priority = 1, description = "Elastic upper bound."),
    printcolumn(name = "Admitted", type_ = "integer", json_path = ".status.admitted", priority = 1, description = "Member pods whose scheduling gate was removed."),
    printcolumn(name = "Scheduled", type_ = "integer", json_path = ".status.scheduled", priority = 1, description = "Member pods bound to a node."),
    printcolumn(name = "Succeeded", type_ = "integer", json_path = ".status.succeeded", priority = 1, description = "Member pods that succeeded."),
    printcolumn(name = "Failed", type_ = "integer", json_path = ".status.failed", priority = 1, description = "Member pods that failed."),
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.maxMember) || self.maxMember >= self.minMember",
    "message": "maxMember must be at least minMember",
    "fieldPath": ".maxMember",
    "reason": "FieldValueInvalid",
}]))]
pub struct PodGroupSpec {
    /// Gang size: how many member pods must be placed before any of them is bound. The group is
    /// admitted only once at least this many members exist and fit together. From 1 to
    /// 10,000.
    #[schemars(range(min = 1, max = gangplank_core::limits::MAX_MEMBERS))]
    pub min_member: i32,

    /// Elastic upper bound on the number of members. Members beyond `minMember` are admitted
    /// and bound one by one once the gang has quorum, when there is room, and are the first
    /// victims of reclaim. Must be at least `minMember`, and at most 10,000. Absent: no
    /// upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = gangplank_core::limits::MAX_MEMBERS))]
    pub max_member: Option<i32>,

    /// Resources the gang needs to start, per resource (usually the requests of `minMember`
    /// pods). When set, admission checks quota and fit against it before all member pods
    /// exist; otherwise against the requests of the members seen so far.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub min_resources: ResourceList,

    /// Queue the group is admitted through. When absent at creation, the mutating webhook sets
    /// it from the PodGroup's `scheduling.gangplank.dev/queue` label, else the namespace's,
    /// else `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,

    /// PriorityClass of the group, for the record (a batch/v1 Job's group copies its pod
    /// template's). Admission and preemption use the priority of its member pods (the highest
    /// among them), which the API server resolves from the pods' own `priorityClassName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// How long, in seconds, a gang without quorum may go with no member placed before the
    /// members that have a node are released and the group retries with backoff. Absent: 60,
    /// applied by Gangplank (not stored), and never longer than Gangplank's
    /// `--max-bind-hold-seconds`, which also bounds the whole wait from the first member placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub schedule_timeout_seconds: Option<i32>,

    /// Longest time, in seconds, the group should wait for admission. Waiting longer, it jumps
    /// the fair-share order: it is admitted next, and while it does not fit it holds a
    /// reservation that groups behind it may not take. Its queue's capability still applies.
    /// Takes precedence over the queue's `maxWaitSeconds`. Absent: the queue's value, or no
    /// bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_wait_seconds: Option<i32>,

    /// How long, in seconds, the gang is expected to run once started. With it, the group may
    /// be admitted into room reserved for a larger waiting group when it finishes before that
    /// group could start anyway (backfill). Absent: it only takes room no reservation holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub expected_runtime_seconds: Option<i32>,

    /// The required topology level, a node label (for example `topology.kubernetes.io/zone`):
    /// every member runs on nodes with the same value of it (and of every wider level of a
    /// Topology that lists it). Admission picks the domain where the whole gang fits, and adds
    /// the domain's labels to each member's `nodeSelector` as it releases them. Absent:
    /// members may go to any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,

    /// The preferred topology level, a node label narrower than `topologyKey` (for example a
    /// rack label): admission places the gang whole in one domain of it when one has room,
    /// else in one of the next wider level of its Topology, up to `topologyKey` (or, without
    /// it, anywhere). Absent: only `topologyKey` applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_topology_key: Option<String>,

    /// A gang of gangs: the members split into instances (a prefill or decode instance of an
    /// inference service, a slice of a multi-slice job), each needed whole, and how many whole
    /// instances of each sub-group the gang needs to start. `minMember` must be the sum of
    /// `minSubGroups × subGroupSize`. The fields are Volcano's (v1.14), so a Volcano PodGroup's
    /// policy carries over; only `labelSelector.matchLabels` selects. At most 16 sub-groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = gangplank_core::limits::MAX_SUB_GROUPS))]
    pub sub_group_policy: Vec<SubGroupPolicy>,
}

/// One sub-group of a gang: the members its `labelSelector` matches, split into instances by
/// the values of `matchLabelKeys`, each instance of `subGroupSize` members needed whole.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct SubGroupPolicy {
    /// Names the sub-group in reasons; unique within the PodGroup.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,

    /// Members of each instance: an instance with this many may start, never one with fewer.
    #[schemars(range(min = 1, max = gangplank_core::limits::MAX_MEMBERS))]
    pub sub_group_size: i32,

    /// Whole instances of this sub-group the gang needs to start.
    #[schemars(range(min = 1, max = gangplank_core::limits::MAX_MEMBERS))]
    pub min_sub_groups: i32,

    /// The members of this sub-group: those carrying every label of `matchLabels` (a member
    /// goes to the first sub-group that selects it). `matchExpressions` are refused. Absent:
    /// every member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,

    /// Members of the sub-group with equal values of these labels are one instance (for
    /// example `leaderworkerset.sigs.k8s.io/group-index`). From 1 to 4 keys.
    #[schemars(length(min = 1, max = 4))]
    pub match_label_keys: Vec<String>,

    /// The topology level each instance keeps to, a node label (for example a rack label):
    /// the members of one instance run on nodes with the same value of it (and of every wider
    /// level of a Topology that lists it), each instance in a domain of its own. Admission
    /// picks each instance's domain and adds its labels to the members' `nodeSelector` as it
    /// releases them. Not with the PodGroup's own `topologyKey` or `preferredTopologyKey`.
    /// Absent: an instance's members may go to any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
}

impl PodGroup {
    /// Admitted on `minResources` before its members exist: its controller (a Volcano PodGroup,
    /// unless it has sub-groups, which need their members' labels; a batch Job; or a Kueue
    /// Workload, whose job Kueue starts once Gangplank's check says the gang fits) creates the
    /// pods only once the group is admitted, or its members come in stages
    /// ([`super::labels::MEMBERS_IN_STAGES_ANNOTATION`]).
    pub fn admitted_ahead_of_members(&self) -> bool {
        (super::volcano::controls(self) && self.spec.sub_group_policy.is_empty())
            || super::batch_job::controls(self)
            || super::kueue::controls(self)
            || self.members_in_stages()
    }

    /// Its members come in stages ([`super::labels::MEMBERS_IN_STAGES_ANNOTATION`] is `true`).
    pub fn members_in_stages(&self) -> bool {
        super::labels::annotation_value(&self.metadata, super::labels::MEMBERS_IN_STAGES_ANNOTATION)
            == Some("true")
    }

    /// Marks it as a group whose members come in stages
    /// ([`super::labels::MEMBERS_IN_STAGES_ANNOTATION`]), so it is admitted ahead of them.
    pub fn set_members_in_stages(&mut self) {
        self.metadata.annotations.get_or_insert_default().insert(
            super::labels::MEMBERS_IN_STAGES_ANNOTATION.to_owned(),
            "true".to_owned(),
        );
    }
}

impl PodGroupSpec {
    /// A gang of `min_member` with every optional field unset.
    pub fn with_min_member(min_member: i32) -> Self {
        PodGroupSpec {
            min_member,
            max_member: None,
            min_resources: ResourceList::new(),
            queue: None,
            priority_class_name: None,
            schedule_timeout_seconds: None,
            max_wait_seconds: None,
            expected_runtime_seconds: None,
            topology_key: None,
            preferred_topology_key: None,
            sub_group_policy: Vec::new(),
        }
    }

    /// The queue the group is admitted through: `spec.queue`, or `default` when the webhook has
    /// not set it (a PodGroup created while the webhook was not installed).
    pub fn queue_name(&self) -> &str {
        match self.queue.as_deref() {
            Some(queue) if !queue.is_empty() => queue,
            _ => labels::DEFAULT_QUEUE,
        }
    }

    /// How long the gang may go with no member placed before its placed members are released:
    /// `scheduleTimeoutSeconds`, or [`DEFAULT_SCHEDULE_TIMEOUT_SECONDS`]. A non-positive value
    /// (impossible through the apiserver, which enforces the minimum) counts as unset.
    pub fn schedule_timeout(&self) -> Duration {
        let seconds = self
            .schedule_timeout_seconds
            .filter(|s| *s > 0)
            .unwrap_or(DEFAULT_SCHEDULE_TIMEOUT_SECONDS);
        Duration::from_secs(seconds.unsigned_abs().into())
    }
}

/// Lifecycle of a PodGroup: Pending → Inqueue → Running → Completed or Failed; Unknown when a
/// running gang has fallen below `minMember`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PodGroupPhase {
    /// Waiting for members or for admission; member pods are still gated.
    #[default]
    Pending,
    /// Admitted: gates removed, members being placed and bound.
    Inqueue,
    /// At least `minMember` members are running.
    Running,
    /// Enough members succeeded that the gang is done.
    Completed,
    /// The gang cannot finish: too many members failed, or it waited longer than allowed.
    Failed,
    /// A running gang has fallen below `minMember` members.
    Unknown,
}

impl PodGroupPhase {
    /// The phase as spelled in the API, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            PodGroupPhase::Pending => "Pending",
            PodGroupPhase::Inqueue => "Inqueue",
            PodGroupPhase::Running => "Running",
            PodGroupPhase::Completed => "Completed",
            PodGroupPhase::Failed => "Failed",
            PodGroupPhase::Unknown => "Unknown",
        }
    }

    /// Completed and Failed are final: the group never goes back to waiting.
    pub fn is_finished(self) -> bool {
        matches!(self, PodGroupPhase::Completed | PodGroupPhase::Failed)
    }
}

impl std::fmt::Display for PodGroupPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Observed state of a PodGroup, written by Gangplank's controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct PodGroupStatus {
    /// Where the group is in its lifecycle: `Pending` (waiting for members or admission),
    /// `Inqueue` (admitted, being placed), `Running` (at least `minMember` members running),
    /// `Completed`, `Failed`, or `Unknown` (a running gang fell below `minMember`).
    #[serde(default)]
    pub phase: PodGroupPhase,

    /// Number of member pods whose scheduling gate has been removed.
    #[serde(default)]
    pub admitted: i32,

    /// Number of member pods bound to a node.
    #[serde(default)]
    pub scheduled: i32,

    /// Number of member pods running.
    #[serde(default)]
    pub running: i32,

    /// Number of member pods that succeeded.
    #[serde(default)]
    pub succeeded: i32,

    /// Number of member pods that failed.
    #[serde(default)]
    pub failed: i32,

    /// Current state of the group, one entry per condition type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,

    /// When `phase` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;
    use crate::api::schema_test::{default_columns, schema_of, wide_columns};

    #[test]
    fn crd_is_namespaced_with_short_name_pg_and_a_status_subresource() {
        let crd = PodGroup::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("podgroups.scheduling.gangplank.dev")
        );
        assert_eq!(crd.spec.group, crate::api::labels::GROUP);
        assert_eq!(crd.spec.versions[0].name, crate::api::labels::VERSION);
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["pg".to_string()]));
        let subresources = crd.spec.versions[0].subresources.as_ref().unwrap();
        assert!(subresources.status.is_some());
    }

    #[test]
    fn spec_schema_requires_min_member_of_at_least_one() {
        let schema = schema_of(&PodGroup::crd());
        let spec = &schema["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["minMember"]));
        for field in [
            "minMember",
            "maxMember",
            "scheduleTimeoutSeconds",
            "maxWaitSeconds",
        ] {
            assert_eq!(spec["properties"][field]["minimum"], 1.0, "{field}");
            assert_eq!(spec["properties"][field]["format"], "int32", "{field}");
        }
        // The schedule timeout default is applied by code, not stored.
        assert!(
            spec["properties"]["scheduleTimeoutSeconds"]
                .get("default")
                .is_none()
        );
    }

    #[test]
    fn spec_schema_refuses_max_member_below_min_member() {
        let schema = schema_of(&PodGroup::crd());
        let rules = &schema["properties"]["spec"]["x-kubernetes-validations"];
        assert_eq!(
            rules[0]["rule"],
            "!has(self.maxMember) || self.maxMember >= self.minMember"
        );
        assert_eq!(rules[0]["message"], "maxMember must be at least minMember");
    }

    #[test]
    fn status_phase_is_an_enum_of_the_six_phases() {
        let schema = schema_of(&PodGroup::crd());
        let phase = &schema["properties"]["status"]["properties"]["phase"];
        assert_eq!(
            phase["enum"],
            serde_json::json!([
                "Pending",
                "Inqueue",
                "Running",
                "Completed",
                "Failed",
                "Unknown"
            ])
        );
        assert_eq!(phase["default"], "Pending");
    }

    #[test]
    fn kubectl_get_shows_gang_size_queue_phase_and_running() {
        let crd = PodGroup::crd();
        assert_eq!(
            default_columns(&crd),
            [
                "MinMember: integer .spec.minMember",
                "Queue: string .spec.queue",
                "Phase: string .status.phase",
                "Running: integer .status.running",
                "Age: date .metadata.creationTimestamp",
            ]
        );
        assert_eq!(
            wide_columns(&crd),
            ["MaxMember", "Admitted", "Scheduled", "Succeeded", "Failed"]
        );
    }

    #[test]
    fn spec_needs_only_min_member() {
        let spec: PodGroupSpec = serde_json::from_str(r#"{"minMember": 4}"#).unwrap();
        assert_eq!(spec, PodGroupSpec::with_min_member(4));
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            serde_json::json!({"minMember": 4})
        );
    }

    #[test]
    fn spec_without_min_member_is_refused() {
        assert!(serde_json::from_str::<PodGroupSpec>("{}").is_err());
    }

    #[test]
    fn unset_schedule_timeout_is_sixty_seconds() {
        let mut spec = PodGroupSpec::with_min_member(2);
        assert_eq!(spec.schedule_timeout(), Duration::from_secs(60));
        spec.schedule_timeout_seconds = Some(5);
        assert_eq!(spec.schedule_timeout(), Duration::from_secs(5));
        spec.schedule_timeout_seconds = Some(0);
        assert_eq!(spec.schedule_timeout(), Duration::from_secs(60));
    }

    #[test]
    fn unset_or_empty_queue_means_the_default_queue() {
        let mut spec = PodGroupSpec::with_min_member(1);
        assert_eq!(spec.queue_name(), "default");
        spec.queue = Some(String::new());
        assert_eq!(spec.queue_name(), "default");
        spec.queue = Some("research".into());
        assert_eq!(spec.queue_name(), "research");
    }

    #[test]
    fn phase_serializes_as_its_api_spelling() {
        for phase in [
            PodGroupPhase::Pending,
            PodGroupPhase::Inqueue,
            PodGroupPhase::Running,
            PodGroupPhase::Completed,
            PodGroupPhase::Failed,
            PodGroupPhase::Unknown,
        ] {
            assert_eq!(
                serde_json::to_value(phase).unwrap(),
                serde_json::Value::from(phase.as_str())
            );
        }
    }

    #[test]
    fn partial_status_deserializes_as_pending() {
        let status: PodGroupStatus =
            serde_json::from_value(serde_json::json!({"running": 3})).unwrap();
        assert_eq!(status.phase, PodGroupPhase::Pending);
        assert_eq!(status.running, 3);
        assert!(status.last_transition_time.is_none());
    }
}
