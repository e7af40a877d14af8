//! Trees of Kubernetes' CompositePodGroups as the controller sees them: each root with the
//! [`Shape`] of its tree, read from the CompositePodGroups and PodGroups of its namespace
//! (`crate::api::composite_pod_group` holds the rules), so that `super::foreign_groups` gives
//! the root one Gangplank PodGroup and the tree's PodGroups none.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::composite_pod_group::{CompositePodGroup, Namespace, Node, Shape, shape};
use crate::api::workload_api::UpstreamPodGroup;

/// The roots among `composites` (those without a parent, not being deleted), each with the
/// shape of its tree.
pub fn roots(
    composites: &[Arc<CompositePodGroup>],
    leaves: &[Arc<UpstreamPodGroup>],
) -> Vec<(Arc<CompositePodGroup>, Shape)> {
    let mut namespaces: BTreeMap<&str, Namespace> = BTreeMap::new();
    for c in composites {
        let gang = c.spec.scheduling_policy.gang.as_ref();
        let node = node(
            &c.spec.parent_composite_pod_group_name,
            gang.map(|g| g.min_group_count),
        );
        if let Some((ns, name)) = named(&c.metadata) {
            namespaces
                .entry(ns)
                .or_default()
                .composites
                .insert(name, node);
        }
    }
    for leaf in leaves.iter().filter(|l| in_a_tree(l)) {
        let gang = leaf.spec.scheduling_policy.gang.as_ref();
        let node = node(
            &leaf.spec.parent_composite_pod_group_name,
            gang.map(|g| g.min_count),
        );
        if let Some((ns, name)) = named(&leaf.metadata) {
            namespaces.entry(ns).or_default().leaves.insert(name, node);
        }
    }
    composites
        .iter()
        .filter(|c| c.spec.parent_composite_pod_group_name.is_none())
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let ns = namespaces.get(c.metadata.namespace.as_deref()?)?;
            Some((c.clone(), shape(c.metadata.name.as_deref()?, ns)))
        })
        .collect()
}

fn node(parent: &Option<String>, min: Option<i32>) -> Node {
    Node {
        parent: parent.clone(),
        min,
    }
}

/// An object's namespace and name, when it has both.
fn named(meta: &ObjectMeta) -> Option<(&str, String)> {
    Some((meta.namespace.as_deref()?, meta.name.clone()?))
}

/// Whether Kubernetes' PodGroup `leaf` is a child of a CompositePodGroup: its pods join the
/// gang of the tree's root, and it gets no Gangplank PodGroup of its own.
pub fn in_a_tree(leaf: &UpstreamPodGroup) -> bool {
    leaf.spec.parent_composite_pod_group_name.is_some()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> Arc<K> {
        Arc::new(serde_json::from_value(value).unwrap())
    }

    fn composite(name: &str, parent: Option<&str>, min: i32) -> Arc<CompositePodGroup> {
        object(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"parentCompositePodGroupName": parent,
                     "schedulingPolicy": {"gang": {"minGroupCount": min}}}
        }))
    }

    fn leaf(name: &str, parent: Option<&str>, min: i32) -> Arc<UpstreamPodGroup> {
        object(json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"parentCompositePodGroupName": parent,
                     "schedulingPolicy": {"gang": {"minCount": min}}}
        }))
    }

    #[test]
    fn each_root_gets_its_tree_and_a_pod_group_outside_trees_is_no_leaf() {
        let composites = [composite("slices", None, 2)];
        let leaves = [
            leaf("slice-0", Some("slices"), 4),
            leaf("slice-1", Some("slices"), 4),
            leaf("train", None, 8),
        ];
        let found = roots(&composites, &leaves);
        assert_eq!(found.len(), 1);
        let Shape::Tree(spec) = &found[0].1 else {
            panic!("{:?}", found[0].1)
        };
        assert_eq!(spec.min_member, 8);
        assert!(!in_a_tree(&leaves[2]));
    }

    #[test]
    fn a_root_whose_children_have_not_come_waits() {
        let composites = [composite("slices", None, 2)];
        let leaves = [leaf("slice-0", Some("slices"), 4)];
        assert!(matches!(
            roots(&composites, &leaves)[0].1,
            Shape::Incomplete(_)
        ));
    }
}
