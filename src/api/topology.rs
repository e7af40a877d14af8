//! The `Topology` custom resource: the levels of the cluster's network, as node label keys from
//! the widest (zone, block) to the narrowest (rack, host), which PodGroups' `topologyKey` and
//! `preferredTopologyKey` name (see `gangplank_core::model::topology`).
//!
//! Cluster-scoped and written by the cluster operator, like Queues; Kueue's `Topology` has the
//! same shape (`spec.levels[].nodeLabel`). The schema checks each label key and refuses a
//! level listed twice, so no webhook is needed.

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::kubernetes_style;
use gangplank_core::model::topology::MAX_LEVELS;

/// A Kubernetes label key: an optional DNS subdomain prefix and `/`, then a name.
pub const LABEL_KEY_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// The levels of the cluster's network, widest first.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.gangplank.dev",
    version = "v1alpha1",
    kind = "Topology",
    derive = "PartialEq",
    category = "gangplank",
    doc = "The levels of the cluster's network (node label keys, widest first) that PodGroups' topologyKey and preferredTopologyKey name. Cluster-scoped.",
    printcolumn(
        name = "Levels",
        type_ = "string",
        json_path = ".spec.levels[*].nodeLabel",
        description = "Node label keys, widest first."
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct TopologySpec {
    /// The levels, widest first (for example `topology.kubernetes.io/zone`, then a block
    /// label, a rack label, `kubernetes.io/hostname`). A domain of a level is the set of nodes
    /// sharing the values of its label and of every wider level's. At least 1, at most 16,
    /// each label once.
    #[schemars(schema_with = "levels_schema")]
    pub levels: Vec<TopologyLevel>,
}

/// One level of a Topology.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct TopologyLevel {
    /// The node label whose values name the level's domains (for example
    /// `topology.kubernetes.io/zone`).
    #[schemars(length(min = 1, max = 316), regex(pattern = LABEL_KEY_PATTERN))]
    pub node_label: String,
}

/// `levels`: between 1 and [`MAX_LEVELS`] items, a list-map keyed by `nodeLabel` (the API
/// server refuses a label listed twice).
fn levels_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<Vec<TopologyLevel>>();
    schema.insert("minItems".into(), 1.into());
    schema.insert("maxItems".into(), MAX_LEVELS.into());
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["nodeLabel"]),
    );
    schema
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::{Value, json};

    use super::*;

    fn levels_schema_of_the_crd() -> Value {
        let crd = serde_json::to_value(Topology::crd()).unwrap();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["levels"]
            .clone()
    }

    #[test]
    fn a_topology_is_cluster_scoped_and_its_levels_are_label_keys_listed_once() {
        assert_eq!(Topology::crd().spec.scope, "Cluster");
        let levels = levels_schema_of_the_crd();
        assert_eq!(levels["minItems"], 1);
        assert_eq!(levels["maxItems"], 16);
        assert_eq!(levels["x-kubernetes-list-map-keys"], json!(["nodeLabel"]));
        assert_eq!(
            levels["items"]["properties"]["nodeLabel"]["pattern"],
            LABEL_KEY_PATTERN
        );
    }
}
