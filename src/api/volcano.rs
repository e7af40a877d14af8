//! Volcano's `PodGroup` (`scheduling.volcano.sh/v1beta1`), as operators in Volcano mode write it
//! (Kubeflow's training-operator with `--gang-scheduler-name=volcano`, KubeRay with
//! `--batch-scheduler=volcano`).
//!
//! Gangplank reads its spec and writes its `status.phase` (and member counts): the controller
//! gives each one a Gangplank PodGroup of the same name that it owns
//! (`crate::controller::foreign_groups`), admitted on `minResources` before its pods exist,
//! because those operators create the pods only once the phase leaves `Pending`; its pods,
//! annotated `scheduling.k8s.io/group-name`, join that group through the webhook. The type
//! has only the fields Gangplank reads or writes; its CRD is Volcano's, shipped as
//! `manifests/crds/third-party/scheduling.volcano.sh_podgroups.yaml` for clusters without it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{PodGroup, ResourceList, labels};

/// `apiVersion` of Volcano's PodGroup.
pub const API_VERSION: &str = "scheduling.volcano.sh/v1beta1";

/// The spec of Volcano's PodGroup: the gang's size and resources, its queue and priority.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    root = "VolcanoPodGroup",
    status = "VolcanoPodGroupStatus",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoPodGroupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i32>,
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub min_resources: ResourceList,
    /// Volcano's queue; the training-operator writes `default` when the job names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Volcano's sub-groups (v1.14): mirrored into the Gangplank PodGroup's `subGroupPolicy`
    /// where Gangplank's rules take them (`crate::controller::volcano_sub_groups`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_group_policy: Vec<VolcanoSubGroupPolicy>,
    /// Volcano's network topology (HyperNode tiers), honoured on a PodGroup with sub-groups
    /// as the levels of Gangplank's Topologies (`crate::controller::volcano_sub_groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<VolcanoNetworkTopology>,
}

/// Volcano's `networkTopology`: `mode` `hard` (its default) or `soft`, and the highest
/// HyperNode tier the pods may span, by number (`highestTierAllowed`) or by name
/// (`highestTierName`), not both.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoNetworkTopology {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_allowed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_name: Option<String>,
}

/// One sub-group of a Volcano PodGroup, as Volcano v1.14 spells it (its defaults: size 1,
/// minimum 0).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoSubGroupPolicy {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_sub_groups: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<VolcanoNetworkTopology>,
}

/// What Gangplank writes of a Volcano PodGroup's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoPodGroupStatus {
    /// `Pending`, `Inqueue`, `Running`, `Unknown` or `Completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default)]
    pub running: i32,
    #[serde(default)]
    pub succeeded: i32,
    #[serde(default)]
    pub failed: i32,
}

/// Whether a Volcano PodGroup controls `group` (Gangplank made it for one), so it is admitted
/// ahead of its members unless it is a gang of sub-groups.
pub fn controls(group: &PodGroup) -> bool {
    group
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "PodGroup" && o.api_version == API_VERSION)
}

/// When admission admitted `group` with room kept for members still to come (ahead of its
/// members, or on its `minResources`), in Unix seconds, as its annotation says.
pub fn admitted_ahead_at(group: &PodGroup) -> Option<i64> {
    let value = group
        .metadata
        .annotations
        .as_ref()?
        .get(labels::ADMITTED_AHEAD_ANNOTATION)?;
    value
        .parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}
