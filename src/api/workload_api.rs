//! Kubernetes' own PodGroup (`scheduling.k8s.io`, the Workload API behind the `GenericWorkload`
//! feature gate), as the API server serves it: `v1beta1` from Kubernetes 1.37, `v1alpha2` on
//! 1.36. Each version is its own type, watched only while that version is served (the list
//! answers 404 otherwise), so a cluster of either release is read without configuration.
//!
//! Gangplank only reads it: the controller gives each one a Gangplank PodGroup of the same name
//! that it owns (`crate::controller::foreign_groups`), and its pods, which name it in
//! `spec.schedulingGroup.podGroupName`, join that group through the webhook. The types hold only
//! the fields Gangplank reads; both versions agree on them, except `disruptionMode` (a string in
//! `v1alpha2`, a one-of object in `v1beta1`), which is kept as it comes.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the scheduler places the group: `gang` (all of `minCount` or none) or `basic` (each pod
/// on its own: a gang of one).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic: Option<serde_json::Value>,
}

/// The gang's size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GangPolicy {
    pub min_count: i32,
}

/// The API versions of Kubernetes' PodGroup that Gangplank reads, newest first.
pub const API_VERSIONS: [&str; 2] = ["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2"];

/// Whether `group` is the Gangplank PodGroup made for one of Kubernetes' PodGroups or the root
/// of a tree of them (its controller owner), which the stock scheduler then places whole
/// itself when it asks for more than one member.
pub fn made_for_upstream(group: &crate::api::PodGroup) -> bool {
    crate::api::controller(&group.metadata).is_some_and(|o| {
        (o.kind == "PodGroup" && API_VERSIONS.contains(&o.api_version.as_str()))
            || (o.kind == "CompositePodGroup"
                && o.api_version == super::composite_pod_group::API_VERSION)
    })
}

#[rustfmt::skip] // rustfmt re-indents the attributes inside this macro on every run.
macro_rules! upstream_pod_group {
    ($version:literal, $root:literal, $spec:ident) => {
        /// The spec of Kubernetes' PodGroup, the fields Gangplank reads.
        #[derive(
            CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
        )]
        #[kube(
            group = "scheduling.k8s.io",
            version = $version,
            kind = "PodGroup",
            root = $root,
            namespaced
        )]
        #[serde(rename_all = "camelCase")]
        pub struct $spec {
            #[serde(default)]
            pub scheduling_policy: SchedulingPolicy,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub priority_class_name: Option<String>,
            /// Resolved from `priorityClassName` by the API server's Priority admission.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub priority: Option<i32>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub disruption_mode: Option<serde_json::Value>,
            /// The CompositePodGroup whose child this is (`CompositePodGroup` gate, 1.37):
            /// see [`super::composite_pod_group`].
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub parent_composite_pod_group_name: Option<String>,
        }
    };
}

upstream_pod_group!("v1beta1", "UpstreamPodGroup", UpstreamPodGroupSpec);
upstream_pod_group!(
    "v1alpha2",
    "UpstreamPodGroupV1alpha2",
    UpstreamPodGroupV1alpha2Spec
);

#[cfg(test)]
mod tests {
    use kube::Resource;
    use serde_json::json;

    use super::*;

    #[test]
    fn both_served_versions_read_the_gang_size() {
        let beta: UpstreamPodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}},
                     "disruptionMode": {"all": {}}, "priorityClassName": "high"}
        }))
        .unwrap();
        let alpha: UpstreamPodGroupV1alpha2 = serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}, "disruptionMode": "PodGroup"}
        }))
        .unwrap();
        assert_eq!(
            beta.spec.scheduling_policy.gang,
            Some(GangPolicy { min_count: 4 })
        );
        assert_eq!(alpha.spec.scheduling_policy, beta.spec.scheduling_policy);
        assert_eq!(
            UpstreamPodGroup::api_version(&()),
            "scheduling.k8s.io/v1beta1"
        );
        assert_eq!(
            UpstreamPodGroupV1alpha2::api_version(&()),
            "scheduling.k8s.io/v1alpha2"
        );
    }
}
