//! The `Queue` custom resource: a cluster-scoped share of the cluster with a weight, an optional
//! hard cap (`capability`) and reserved floor (`guarantee`), and a place in a queue hierarchy.
//!
//! Queues are cluster-scoped because capacity is: the cluster operator carves it up, and teams
//! point their namespaces at a queue with the label `scheduling.gangplank.dev/queue`. A queue
//! name is also used as a label value, so the CRD refuses names longer than 63 characters.
//!
//! Who may submit to a queue is the operator's to say too (`spec.namespaceSelector`); tenants
//! cannot label their own namespaces with the built-in `edit` role, so the rule holds against
//! them.
//!
//! The spec is what the operator writes; the status is written only by Gangplank's controller
//! (through the status subresource) and is a report, never an input: the admission loop computes
//! shares from its own cache, not from `status.deserved`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ResourceList, conditions_schema, kubernetes_style, resource_list_schema};

/// How much of the cluster a queue deserves and may take, and how it competes with other queues.
///
/// Deserved shares are computed by weighted water-filling over every resource: each queue is
/// offered capacity in proportion to its `weight`, never less than its `guarantee`, never more
/// than its `capability` or than it actually asks for; what one queue leaves unused is shared by
/// the others. Child queues (`parent`) split their parent's share the same way.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.gangplank.dev",
    version = "v1alpha1",
    kind = "Queue",
    status = "QueueStatus",
    derive = "PartialEq",
    category = "gangplank",
    doc = "A share of the cluster that PodGroups are admitted into, in fair-share order. Cluster-scoped; namespaces, PodGroups and pods name their queue with the label scheduling.gangplank.dev/queue.",
    validation = (
        "size(self.metadata.name) <= 63",
        "queue names are used as label values (scheduling.gangplank.dev/queue) and must be at most 63 characters"
    ),
    printcolumn(name = "Weight", type_ = "integer", json_path = ".spec.weight", description = "Relative share of the cluster."),
    printcolumn(name = "State", type_ = "string", json_path = ".spec.state", description = "Open admits new PodGroups; Closed does not."),
    printcolumn(name = "Deserved", type_ = "string", json_path = ".status.deserved", description = "Fair share last computed for this queue."),
    printcolumn(name = "Allocated", type_ = "string", json_path = ".status.allocated", description = "Resources held by the queue's admitted PodGroups."),
    printcolumn(name = "Pending", type_ = "integer", json_path = ".status.pending", description = "PodGroups waiting for admission."),
    printcolumn(name = "Running", type_ = "integer", json_path = ".status.running", description = "PodGroups running."),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Parent", type_ = "string", json_path = ".spec.parent", priority = 1, description = "Parent queue, for hierarchical shares."),
    printcolumn(name = "Priority", type_ = "integer", json_path = ".spec.priority", priority = 1, description = "Order between queues whose shares tie."),
    printcolumn(name = "Admitted", type_ = "integer", json_path = ".status.admitted", priority = 1, description = "PodGroups admitted and not yet running."),
    printcolumn(name = "Guarantee", type_ = "string", json_path = ".spec.guarantee", priority = 1, description = "Reserved minimum."),
    printcolumn(name = "Capability", type_ = "string", json_path = ".spec.capability", priority = 1, description = "Hard maximum."),
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct QueueSpec {
    /// Relative share of the cluster (or of the parent queue) when queues compete: a queue of
    /// weight 2 deserves twice what a queue of weight 1 deserves. At least 1; default 1.
    #[serde(default = "default_weight")]
    #[schemars(range(min = 1))]
    pub weight: i32,

    /// Hard maximum, per resource, of what this queue's PodGroups may hold at once, borrowed
    /// capacity included (for example `cpu: "64"`, `nvidia.com/gpu: "8"`). A PodGroup that would
    /// take the queue over it waits. A resource not listed is not capped; empty or absent: no
    /// cap at all.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub capability: ResourceList,

    /// Reserved minimum, per resource: other queues may not borrow it, and reclaim never takes
    /// this queue below it. A resource not listed has no reservation. Should not exceed
    /// `capability`; the sum of all guarantees should not exceed the cluster.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub guarantee: ResourceList,

    /// Name of the parent Queue. A child queue splits its parent's deserved share with its
    /// siblings, by weight, the way top-level queues split the cluster; the parent's capability
    /// and guarantee bound its children together. Absent: a top-level queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,

    /// Whether other queues may reclaim (preempt) what this queue holds beyond its deserved
    /// share. False keeps borrowed capacity until it is released, at the cost of other queues
    /// waiting for their share. Default true.
    #[serde(default = "default_reclaimable")]
    pub reclaimable: bool,

    /// Order between queues whose fair-share positions tie; higher goes first. Does not change
    /// how much a queue deserves. Default 0.
    #[serde(default)]
    pub priority: i32,

    /// `Open` admits new PodGroups. `Closed` admits none: PodGroups already admitted keep
    /// running, waiting ones keep waiting until the queue is opened again. Default `Open`.
    #[serde(default)]
    pub state: QueueState,

    /// Longest time, in seconds, a PodGroup of this queue should wait for admission. A group
    /// waiting longer jumps the fair-share order: it is admitted next, and while it does not
    /// fit it holds a reservation that groups behind it may not take. The queue's capability
    /// still applies. A PodGroup's own `maxWaitSeconds` takes precedence. Absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_wait_seconds: Option<i32>,

    /// Between waiting groups of equal priority in this queue, the namespace holding the
    /// smaller share of the queue goes first (then the oldest group), so that one namespace's
    /// backlog does not starve the others sharing the queue. Default false: oldest first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub namespace_fair_share: bool,

    /// Which namespaces may submit work to this queue: a label selector over Namespaces
    /// (`kubernetes.io/metadata.name` names one). A pod, PodGroup or Job of a namespace it does
    /// not select is refused at creation, naming the queue and this rule. Absent: every
    /// namespace, as in Volcano; `{}` also selects every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
}

/// A queue's `namespaceSelector` as `kubectl get -l` writes a selector, or `all` when it
/// selects every namespace (absent or `{}`).
pub fn namespaces_rule(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return "all".to_owned();
    };
    match kube::core::Selector::try_from(selector.clone()) {
        Ok(s) if s.selects_all() => "all".to_owned(),
        Ok(s) => s.to_string(),
        Err(e) => format!("invalid: {e}"),
    }
}

fn default_weight() -> i32 {
    1
}

fn default_reclaimable() -> bool {
    true
}

/// The spec the apiserver stores for `spec: {}`: every field at its schema default. This is the
/// spec of the `default` queue Gangplank creates at start-up (and of
/// `manifests/default-queue.yaml`).
impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            weight: default_weight(),
            capability: ResourceList::new(),
            guarantee: ResourceList::new(),
            parent: None,
            reclaimable: default_reclaimable(),
            priority: 0,
            state: QueueState::default(),
            max_wait_seconds: None,
            namespace_fair_share: false,
            namespace_selector: None,
        }
    }
}

/// Whether a queue admits new PodGroups.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum QueueState {
    /// Admits new PodGroups.
    #[default]
    Open,
    /// Admits no new PodGroups; admitted ones keep running.
    Closed,
}

/// Observed state of a Queue, written by Gangplank's controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct QueueStatus {
    /// Resources requested by the pods of this queue's admitted PodGroups that have not
    /// finished, per resource.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub allocated: ResourceList,

    /// This queue's fair share as last computed, per resource: weighted by `weight`, at least
    /// `guarantee`, at most `capability` and what the queue asks for.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub deserved: ResourceList,

    /// Number of PodGroups waiting for admission (phase Pending).
    #[serde(default)]
    pub pending: i32,

    /// Number of PodGroups admitted whose gang is not running yet (phase Inqueue).
    #[serde(default)]
    pub admitted: i32,

    /// Number of PodGroups running (phase Running).
    #[serde(default)]
    pub running: i32,

    /// Current state of the queue, one entry per condition type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;

    use super::*;
    use crate::api::schema_test::{default_columns, schema_of, wide_columns};

    #[test]
    fn crd_is_cluster_scoped_in_the_gangplank_group_with_a_status_subresource() {
        let crd = Queue::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("queues.scheduling.gangplank.dev")
        );
        assert_eq!(crd.spec.group, crate::api::labels::GROUP);
        assert_eq!(crd.spec.versions[0].name, crate::api::labels::VERSION);
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(
            crd.spec.names.categories,
            Some(vec!["gangplank".to_string()])
        );
        let subresources = crd.spec.versions[0].subresources.as_ref().unwrap();
        assert!(subresources.status.is_some());
    }

    #[test]
    fn spec_schema_has_minimums_defaults_and_enums() {
        let schema = schema_of(&Queue::crd());
        let spec = &schema["properties"]["spec"]["properties"];
        assert_eq!(spec["weight"]["minimum"], 1.0);
        assert_eq!(spec["weight"]["default"], 1);
        assert_eq!(spec["weight"]["format"], "int32");
        assert_eq!(spec["reclaimable"]["default"], true);
        assert_eq!(spec["priority"]["default"], 0);
        assert_eq!(spec["state"]["enum"], serde_json::json!(["Open", "Closed"]));
        assert_eq!(spec["state"]["default"], "Open");
        assert_eq!(spec["maxWaitSeconds"]["minimum"], 1.0);
        assert!(spec["maxWaitSeconds"].get("default").is_none());
        assert_eq!(spec["parent"]["type"], "string");
        // Empty resource lists are skipped on output, so they get no `default: {}` either.
        assert!(spec["capability"].get("default").is_none());
        assert!(schema["properties"]["spec"].get("required").is_none());
    }

    #[test]
    fn queue_names_must_fit_in_a_label_value() {
        let schema = schema_of(&Queue::crd());
        assert_eq!(
            schema["x-kubernetes-validations"][0]["rule"],
            "size(self.metadata.name) <= 63"
        );
    }

    #[test]
    fn kubectl_get_shows_weight_state_shares_and_counts() {
        let crd = Queue::crd();
        assert_eq!(
            default_columns(&crd),
            [
                "Weight: integer .spec.weight",
                "State: string .spec.state",
                "Deserved: string .status.deserved",
                "Allocated: string .status.allocated",
                "Pending: integer .status.pending",
                "Running: integer .status.running",
                "Age: date .metadata.creationTimestamp",
            ]
        );
        assert_eq!(
            wide_columns(&crd),
            ["Parent", "Priority", "Admitted", "Guarantee", "Capability"]
        );
    }

    #[test]
    fn empty_spec_deserializes_to_the_default_spec() {
        let spec: QueueSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec, QueueSpec::default());
        assert_eq!(spec.weight, 1);
        assert!(spec.reclaimable);
        assert_eq!(spec.state, QueueState::Open);
    }

    #[test]
    fn default_spec_serializes_without_empty_lists_or_unset_options() {
        let json = serde_json::to_value(QueueSpec::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"weight": 1, "reclaimable": true, "priority": 0, "state": "Open"})
        );
    }

    #[test]
    fn integer_and_string_quantities_both_deserialize() {
        // The schema is int-or-string, so the apiserver stores `cpu: 4` as a number.
        let spec: QueueSpec = serde_json::from_value(serde_json::json!({
            "capability": {"cpu": 4, "memory": "16Gi"},
            "state": "Closed",
            "maxWaitSeconds": 600,
        }))
        .unwrap();
        assert_eq!(spec.capability["cpu"].0, "4");
        assert_eq!(spec.capability["memory"].0, "16Gi");
        assert_eq!(spec.state, QueueState::Closed);
        assert_eq!(spec.max_wait_seconds, Some(600));
    }

    #[test]
    fn partial_status_deserializes() {
        let status: QueueStatus =
            serde_json::from_value(serde_json::json!({"running": 2})).unwrap();
        assert_eq!(status.running, 2);
        assert_eq!(status.pending, 0);
        assert!(status.allocated.is_empty());
    }
}
