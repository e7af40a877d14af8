//! Kueue's MultiKueue kinds on a manager cluster (`kueue.x-k8s.io/v1beta2`, Kueue v0.17), with
//! only the fields Gangplank's dispatcher reads (`crate::multikueue`): a MultiKueueConfig
//! lists the workers a MultiKueue AdmissionCheck dispatches to, and a MultiKueueCluster says
//! where the kubeconfig of one worker is.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `controllerName` of MultiKueue's AdmissionCheck.
pub const CONTROLLER_NAME: &str = "kueue.x-k8s.io/multikueue";

/// A MultiKueueConfig: the workers (MultiKueueCluster names) of a MultiKueue check.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "MultiKueueConfig",
    root = "MultiKueueConfig"
)]
pub struct MultiKueueConfigSpec {
    #[serde(default)]
    pub clusters: Vec<String>,
}

/// A MultiKueueCluster: one worker, and where its kubeconfig is.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "MultiKueueCluster",
    root = "MultiKueueCluster",
    status = "MultiKueueClusterStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterSpec {
    #[serde(default)]
    pub cluster_source: ClusterSource,
}

/// Where a worker's credentials come from (Gangplank reads `kubeConfig` only).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfigSource>,
}

/// A kubeconfig in a Secret of Kueue's namespace (key `kubeconfig`), or in a file on the
/// manager (`Path`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigSource {
    #[serde(default)]
    pub location: String,
    /// `Secret` (Kueue's default) or `Path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_type: Option<String>,
}

/// A MultiKueueCluster's status: `Active` while Kueue is connected to the worker.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MultiKueueClusterStatus {
    #[serde(default)]
    #[schemars(skip)]
    pub conditions: Vec<Condition>,
}

/// The key of the kubeconfig in a MultiKueueCluster's Secret.
pub const SECRET_KEY: &str = "kubeconfig";
