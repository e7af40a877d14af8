//! scheduler-plugins' coscheduling `PodGroup` (`scheduling.x-k8s.io/v1alpha1`), as operators
//! such as Kubeflow's training-operator (`--gang-scheduler-name` other than `volcano`) write it.
//!
//! Gangplank only reads it: the controller gives each one a Gangplank PodGroup of the same
//! name that it owns (`crate::controller::foreign_groups`), and its pods, labelled
//! `scheduling.x-k8s.io/pod-group`, join that group through the webhook. The type has only the
//! fields Gangplank reads; its CRD is upstream's, shipped as
//! `manifests/crds/third-party/scheduling.x-k8s.io_podgroups.yaml` for clusters without it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ResourceList;

/// The spec of scheduler-plugins' PodGroup: the gang's size, its resources and the time its
/// members may wait for each other once placed.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.x-k8s.io",
    version = "v1alpha1",
    kind = "PodGroup",
    root = "SchedulerPluginsPodGroup",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerPluginsPodGroupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i32>,
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub min_resources: ResourceList,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}
