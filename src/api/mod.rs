//! Gangplank's API: the `Queue` and `PodGroup` custom resources (group
//! `scheduling.gangplank.dev`, version `v1alpha1`) and the well-known label, annotation and gate
//! names in [`labels`].
//!
//! The Rust types are the source of truth: the CRD YAML in `manifests/crds/` is generated from
//! them by `gangplank crdgen` ([`crate::crdgen`]) and a test fails when the checked-in file is
//! stale. So everything an operator sees through `kubectl explain` (field descriptions, defaults,
//! minimums, enums) and `kubectl get` (printer columns) is written here, on the types.
//!
//! Conventions, chosen once for both kinds:
//! - Integers are `i32` with an explicit `minimum`, never unsigned: Kubernetes API conventions
//!   use `int32`/`int64`, and `format: uint32` is not a format the apiserver knows.
//! - Resource lists are `BTreeMap<String, Quantity>` ([`ResourceList`]), absent and empty meaning
//!   the same thing ("no limit" for `capability`, "nothing" elsewhere), so callers never have to
//!   tell `None` from `Some({})`. Their schema validates each value as a non-negative Kubernetes
//!   quantity, so `cpu: four` is refused by the apiserver, not discovered by the controller.
//! - Defaults that are part of the API contract (a Queue's `weight`, `state`, ...) are schema
//!   defaults, so the apiserver stores them and `kubectl get -o yaml` shows them. Defaults that
//!   an operator may want to tune per cluster (a PodGroup's schedule timeout) are applied by
//!   code, and the field's documentation says so.
//! - Status fields default to zero/empty so that a partial status from an older or newer
//!   Gangplank still deserializes.
//! - Conditions are a list-map keyed by `type`, so status can be written with server-side apply.
//! - Optional fields are absent, never `null`: every struct runs [`kubernetes_style`], which
//!   drops `null` from their types (so the apiserver prunes an explicit `null` instead of storing
//!   it, and CEL rules such as `!has(self.maxMember) || ...` never see a null) and reflows the
//!   doc comments' hard line breaks so `kubectl explain` can wrap descriptions to the terminal.

pub mod batch_job;
pub mod composite_pod_group;
pub mod kueue;
pub mod labels;
pub mod leader_worker_set;
pub mod min_replicas;
pub mod multikueue;
pub mod pod_group;
pub mod queue;
pub mod requests;
pub mod scheduler_plugins;
pub mod spark;
pub mod stages;
pub mod sub_group_rules;
pub mod topology;
pub mod trainer;
pub mod volcano;
pub mod workload_api;
pub mod workloads;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::{Schema, SchemaGenerator, json_schema, transform::transform_subschemas};
use serde_json::Value;

pub use pod_group::{PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus};
pub use queue::{Queue, QueueSpec, QueueState, QueueStatus};
pub use topology::{Topology, TopologyLevel, TopologySpec};

/// A Kubernetes resource list: resource name (`cpu`, `memory`, `nvidia.com/gpu`, ...) to quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// A non-negative Kubernetes quantity (`4`, `500m`, `16Gi`, `1e3`). The same grammar as
/// `resource.Quantity` in apimachinery, without the leading minus sign: no Gangplank resource
/// list has a use for negative amounts.
pub const NON_NEGATIVE_QUANTITY_PATTERN: &str = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Schema of a [`ResourceList`]: an object whose values are int-or-string quantities checked
/// against [`NON_NEGATIVE_QUANTITY_PATTERN`]. Used instead of k8s-openapi's `Quantity` schema,
/// which accepts any string and repeats a page of description on every map.
pub(crate) fn resource_list_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "x-kubernetes-int-or-string": true,
            "pattern": NON_NEGATIVE_QUANTITY_PATTERN,
        },
    })
}

/// The `x-kubernetes-list-type: map` keyed by `type` that Kubernetes uses for `conditions`, so
/// that two writers applying different condition types do not overwrite each other.
pub(crate) fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema =
        generator.subschema_for::<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// Container-level schema transform for every struct of the API (see the module docs): optional
/// fields become plain (non-nullable) types, and descriptions are reflowed into paragraphs.
pub(crate) fn kubernetes_style(schema: &mut Schema) {
    optional_means_absent(schema);
    reflow_descriptions(schema);
}

/// `Option<T>` fields are generated as `type: [T, "null"]`; keep only `T`.
fn optional_means_absent(schema: &mut Schema) {
    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return;
    };
    for property in properties.values_mut() {
        let Some(Value::Array(types)) = property.get_mut("type") else {
            continue;
        };
        types.retain(|t| t != "null");
        if let [single] = types.as_slice() {
            let single = single.clone();
            property["type"] = single;
        }
    }
}

fn reflow_descriptions(schema: &mut Schema) {
    if let Some(Value::String(description)) = schema.get_mut("description") {
        *description = reflow(description);
    }
    transform_subschemas(&mut reflow_descriptions, schema);
}

/// Join the lines of each paragraph with spaces; paragraphs stay separated by a blank line.
fn reflow(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|paragraph| !paragraph.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Helpers for the schema tests of each kind.
#[cfg(test)]
pub(crate) mod schema_test {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceColumnDefinition, CustomResourceDefinition,
    };
    use serde_json::Value;

    /// The `openAPIV3Schema` of the CRD's only version, as JSON.
    pub(crate) fn schema_of(crd: &CustomResourceDefinition) -> Value {
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("the CRD has a schema");
        serde_json::to_value(schema).unwrap()
    }

    /// `name: type jsonPath` of the printer columns `kubectl get` shows without `-o wide`.
    pub(crate) fn default_columns(crd: &CustomResourceDefinition) -> Vec<String> {
        columns(crd)
            .filter(|c| c.priority.unwrap_or(0) == 0)
            .map(|c| format!("{}: {} {}", c.name, c.type_, c.json_path))
            .collect()
    }

    /// Names of the printer columns `kubectl get -o wide` adds.
    pub(crate) fn wide_columns(crd: &CustomResourceDefinition) -> Vec<String> {
        columns(crd)
            .filter(|c| c.priority.unwrap_or(0) > 0)
            .map(|c| c.name.clone())
            .collect()
    }

    fn columns(
        crd: &CustomResourceDefinition,
    ) -> impl Iterator<Item = &CustomResourceColumnDefinition> {
        crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::Value;

    use super::schema_test::schema_of;
    use super::*;

    /// Every property under `spec` and `status`, with its JSON path, recursively.
    fn properties(path: &str, schema: &Value, out: &mut Vec<(String, Value)>) {
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (name, prop) in props {
                let path = format!("{path}.{name}");
                out.push((path.clone(), prop.clone()));
                properties(&path, prop, out);
            }
        }
        if let Some(items) = schema.get("items") {
            properties(&format!("{path}[]"), items, out);
        }
    }

    fn all_properties() -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for crd in [Queue::crd(), PodGroup::crd(), Topology::crd()] {
            let kind = crd.spec.names.kind.clone();
            properties(&kind, &schema_of(&crd), &mut out);
        }
        out
    }

    #[test]
    fn every_field_has_a_description_for_kubectl_explain() {
        let missing: Vec<String> = all_properties()
            .into_iter()
            .filter(|(_, prop)| {
                prop.get("description")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            })
            .map(|(path, _)| path)
            .collect();
        assert!(
            missing.is_empty(),
            "fields without a description: {missing:?}"
        );
    }

    #[test]
    fn descriptions_are_reflowed_paragraphs() {
        for (path, prop) in all_properties() {
            let description = prop["description"].as_str().unwrap_or_default();
            let single_breaks = description.replace("\n\n", "");
            assert!(
                !single_breaks.contains('\n'),
                "{path} has a hard line break: {description:?}"
            );
        }
    }

    #[test]
    fn optional_spec_fields_are_absent_rather_than_null() {
        for (path, prop) in all_properties() {
            if path.contains(".spec.") {
                assert!(prop.get("nullable").is_none(), "{path} is nullable");
                assert!(
                    prop["type"].is_string() || prop.get("x-kubernetes-int-or-string").is_some(),
                    "{path} has type {}",
                    prop["type"]
                );
            }
        }
    }

    #[test]
    fn resource_lists_hold_non_negative_quantities() {
        let lists: Vec<(String, Value)> = all_properties()
            .into_iter()
            .filter(|(_, prop)| prop.get("additionalProperties").is_some())
            // A label selector's labels map to strings, not quantities.
            .filter(|(path, _)| !path.ends_with(".matchLabels"))
            .collect();
        let paths: Vec<&str> = lists.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "Queue.spec.capability",
                "Queue.spec.guarantee",
                "Queue.status.allocated",
                "Queue.status.deserved",
                "PodGroup.spec.minResources",
            ]
        );
        for (path, prop) in lists {
            let value = &prop["additionalProperties"];
            assert_eq!(value["x-kubernetes-int-or-string"], true, "{path}");
            assert_eq!(value["pattern"], NON_NEGATIVE_QUANTITY_PATTERN, "{path}");
        }
    }

    #[test]
    fn conditions_are_a_list_map_keyed_by_type() {
        let conditions: Vec<(String, Value)> = all_properties()
            .into_iter()
            .filter(|(path, _)| path.ends_with(".status.conditions"))
            .collect();
        assert_eq!(conditions.len(), 2);
        for (path, prop) in conditions {
            assert_eq!(prop["x-kubernetes-list-type"], "map", "{path}");
            assert_eq!(
                prop["x-kubernetes-list-map-keys"],
                serde_json::json!(["type"]),
                "{path}"
            );
        }
    }

    #[test]
    fn reflow_joins_lines_and_keeps_paragraphs() {
        assert_eq!(reflow("one\ntwo\n\nthree\n four"), "one two\n\nthree four");
        assert_eq!(reflow("single line"), "single line");
    }
}

/// The ownerReference of an object that is its controller (`controller: true`; the API server
/// allows one at most), if any.
pub fn controller(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}
