//! The extender's wire types, mirroring `k8s.io/kube-scheduler/extender/v1` (types.go).
//!
//! The Go structs have no JSON tags, so a stock kube-scheduler sends keys spelled like the Go
//! fields (`Pod`, `NodeNames`, `NodeNameToMetaVictims`, …) and `null` for nil pointers, maps and
//! slices. Every type here therefore:
//! - renames each field to its exact Go name, used verbatim in responses;
//! - accepts `null` or a missing key wherever Go could leave the value nil (`Option` /
//!   `#[serde(default)]`), and lowercase aliases (the pre-1.16 format found in blog posts);
//! - derives both directions, so tests and fakes can speak the protocol too.
//!
//! Embedded Kubernetes objects (`Pod`, `Node`, `NodeList`) use k8s-openapi, whose camelCase
//! JSON is the API server's.

use std::collections::BTreeMap;

use k8s_openapi::List;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `MaxExtenderPriority`: the highest score an extender may give a node.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;
/// `MinExtenderPriority`.
pub const MIN_EXTENDER_PRIORITY: i64 = 0;

/// `v1.NodeList` as sent when the extender is not `nodeCacheCapable`.
pub type NodeList = List<Node>;

/// `ExtenderArgs`: the body of filter and prioritize.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtenderArgs {
    /// The pod being scheduled. Never nil from a real scheduler, so required here.
    #[serde(rename = "Pod", alias = "pod")]
    pub pod: Pod,
    /// Candidate nodes, in full; only when the extender is not `nodeCacheCapable`.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    pub nodes: Option<NodeList>,
    /// Candidate node names; only when the extender is `nodeCacheCapable`.
    #[serde(
        rename = "NodeNames",
        alias = "nodenames",
        alias = "nodeNames",
        default
    )]
    pub node_names: Option<Vec<String>>,
}

/// `ExtenderArgs` as the filter and prioritize handlers read it: borrowed from the request
/// body, so a request over thousands of nodes allocates no name. The pod and the full nodes
/// stay raw JSON until a decision needs them: a pod in no group is answered from its labels
/// ([`PodLabels`]) and its `Nodes` echoed as they came. The handlers get it from
/// [`super::decode_args`], which splits the body by a plain scan when it can and comes here,
/// to serde, otherwise.
#[derive(Debug, Deserialize)]
pub struct ExtenderArgsRef<'a> {
    #[serde(rename = "Pod", alias = "pod", borrow)]
    pub pod: &'a RawValue,
    #[serde(rename = "Nodes", alias = "nodes", default, borrow)]
    pub nodes: Option<&'a RawValue>,
    #[serde(
        rename = "NodeNames",
        alias = "nodenames",
        alias = "nodeNames",
        default,
        borrow
    )]
    pub node_names: Option<NodeNames<'a>>,
}

pub use super::node_names::{Name, NodeNames};

/// What decides whether a pod is in a group: its labels and annotations, nothing else.
#[derive(Debug, Default, Deserialize)]
pub struct PodLabels {
    #[serde(default)]
    pub metadata: Option<LabelsMeta>,
}

#[derive(Debug, Default, Deserialize)]
pub struct LabelsMeta {
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The names in a `v1.NodeList`, the rest of each node skipped.
#[derive(Debug, Deserialize)]
pub struct NodeListNames<'a> {
    #[serde(borrow)]
    pub items: Vec<NamedItem<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct NamedItem<'a> {
    #[serde(default, borrow)]
    pub metadata: NamedMeta<'a>,
}

#[derive(Debug, Default, Deserialize)]
pub struct NamedMeta<'a> {
    #[serde(default, borrow)]
    pub name: Option<Name<'a>>,
}

/// `ExtenderFilterResult` as the filter handler writes it, borrowing names and reasons from
/// the request and the verdict: `Nodes` is the request's list (raw, or decoded and cut down)
/// or null, `NodeNames` the passing names. Same keys, same shape.
#[derive(Debug, Serialize)]
pub struct FilterAnswer<'a, N, L, W> {
    #[serde(rename = "Nodes")]
    pub nodes: Option<N>,
    #[serde(rename = "NodeNames")]
    pub node_names: L,
    #[serde(rename = "FailedNodes")]
    pub failed_nodes: &'a BTreeMap<&'a str, W>,
    #[serde(rename = "FailedAndUnresolvableNodes")]
    pub failed_and_unresolvable_nodes: &'a BTreeMap<&'a str, W>,
    #[serde(rename = "Error")]
    pub error: &'a str,
}

/// `HostPriority` as the prioritize handler writes it, borrowing the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostScore<'a> {
    #[serde(rename = "Host")]
    pub host: &'a str,
    #[serde(rename = "Score")]
    pub score: i64,
}

/// `FailedNodesMap`: node name to why the pod cannot go there.
pub type FailedNodesMap = BTreeMap<String, String>;

/// `ExtenderFilterResult`. The default (everything null or empty) is the shape of an answer
/// that carries only an `Error`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderFilterResult {
    /// Nodes that passed, in full; set when the request came with `Nodes`, else null.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    pub nodes: Option<NodeList>,
    /// Names of the nodes that passed.
    #[serde(
        rename = "NodeNames",
        alias = "nodenames",
        alias = "nodeNames",
        default
    )]
    pub node_names: Option<Vec<String>>,
    /// Nodes that failed but where preemption might help.
    #[serde(
        rename = "FailedNodes",
        alias = "failedNodes",
        alias = "failednodes",
        default,
        deserialize_with = "null_as_default"
    )]
    pub failed_nodes: FailedNodesMap,
    /// Nodes that failed where preemption would not help; they win over `FailedNodes`.
    #[serde(
        rename = "FailedAndUnresolvableNodes",
        alias = "failedAndUnresolvableNodes",
        default,
        deserialize_with = "null_as_default"
    )]
    pub failed_and_unresolvable_nodes: FailedNodesMap,
    /// Non-empty fails the whole scheduling attempt.
    #[serde(
        rename = "Error",
        alias = "error",
        default,
        deserialize_with = "null_as_default"
    )]
    pub error: String,
}

/// `HostPriority`: one entry of the prioritize answer (a bare JSON array of these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPriority {
    #[serde(rename = "Host", alias = "host")]
    pub host: String,
    /// In `MIN_EXTENDER_PRIORITY..=MAX_EXTENDER_PRIORITY`.
    #[serde(rename = "Score", alias = "score")]
    pub score: i64,
}

/// `HostPriorityList`.
pub type HostPriorityList = Vec<HostPriority>;

/// `ExtenderPreemptionArgs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExtenderPreemptionArgs {
    /// The pod that needs room.
    #[serde(rename = "Pod", alias = "pod")]
    pub pod: Pod,
    /// Candidate nodes and their victims as full pods; only when not `nodeCacheCapable`.
    #[serde(rename = "NodeNameToVictims", alias = "nodeNameToVictims", default)]
    pub node_name_to_victims: Option<BTreeMap<String, Option<Victims>>>,
    /// Candidate nodes and their victims by UID; only when `nodeCacheCapable`.
    #[serde(
        rename = "NodeNameToMetaVictims",
        alias = "nodeNameToMetaVictims",
        default
    )]
    pub node_name_to_meta_victims: Option<BTreeMap<String, Option<MetaVictims>>>,
}

/// `Victims`: pods to evict from one node, in full.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Victims {
    #[serde(
        rename = "Pods",
        alias = "pods",
        default,
        deserialize_with = "null_as_default"
    )]
    pub pods: Vec<Option<Pod>>,
    #[serde(
        rename = "NumPDBViolations",
        alias = "numPDBViolations",
        default,
        deserialize_with = "null_as_default"
    )]
    pub num_pdb_violations: i64,
}

/// `MetaPod`: a pod by UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaPod {
    #[serde(rename = "UID", alias = "uid")]
    pub uid: String,
}

/// `MetaVictims`: pods to evict from one node, by UID.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MetaVictims {
    /// Never contains nulls in what we send; nulls received are skipped.
    #[serde(
        rename = "Pods",
        alias = "pods",
        default,
        deserialize_with = "null_entries_skipped"
    )]
    pub pods: Vec<MetaPod>,
    #[serde(
        rename = "NumPDBViolations",
        alias = "numPDBViolations",
        default,
        deserialize_with = "null_as_default"
    )]
    pub num_pdb_violations: i64,
}

/// `ExtenderPreemptionResult`: always the Meta form.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExtenderPreemptionResult {
    #[serde(
        rename = "NodeNameToMetaVictims",
        alias = "nodeNameToMetaVictims",
        default,
        deserialize_with = "null_as_default"
    )]
    pub node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
}

/// `ExtenderBindingArgs`. Go strings are never null, but an empty or missing field is
/// reported by the bind handler, not by the decoder, so the message can name it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExtenderBindingArgs {
    #[serde(
        rename = "PodName",
        alias = "podName",
        default,
        deserialize_with = "null_as_default"
    )]
    pub pod_name: String,
    #[serde(
        rename = "PodNamespace",
        alias = "podNamespace",
        default,
        deserialize_with = "null_as_default"
    )]
    pub pod_namespace: String,
    #[serde(
        rename = "PodUID",
        alias = "podUID",
        default,
        deserialize_with = "null_as_default"
    )]
    pub pod_uid: String,
    #[serde(
        rename = "Node",
        alias = "node",
        default,
        deserialize_with = "null_as_default"
    )]
    pub node: String,
}

/// `ExtenderBindingResult`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExtenderBindingResult {
    #[serde(
        rename = "Error",
        alias = "error",
        default,
        deserialize_with = "null_as_default"
    )]
    pub error: String,
}

/// Decodes `null` as the type's default (Go's nil map, nil slice, or zero value).
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Decodes a nullable list of nullable entries, dropping the null entries.
fn null_entries_skipped<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let entries = Option::<Vec<Option<T>>>::deserialize(deserializer)?;
    Ok(entries.into_iter().flatten().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filter_args_accept_nulls_and_missing_node_lists() {
        let args: ExtenderArgs = serde_json::from_value(json!({
            "Pod": {"metadata": {"name": "p"}},
            "Nodes": null,
            "NodeNames": ["n1"]
        }))
        .unwrap();
        assert_eq!(args.node_names, Some(vec!["n1".to_string()]));
        assert_eq!(args.nodes, None);

        let args: ExtenderArgs =
            serde_json::from_value(json!({"Pod": {}, "NodeNames": null})).unwrap();
        assert_eq!((args.nodes, args.node_names), (None, None));
    }

    #[test]
    fn node_names_are_split_by_a_scan_or_by_serde_alike() {
        let names = |body: &str| {
            let args: ExtenderArgsRef = serde_json::from_str(body)?;
            let names = args.node_names.expect("names");
            let list: Vec<String> = names.names.iter().map(|n| n.0.to_string()).collect();
            Ok::<_, serde_json::Error>((list, names.raw.to_owned()))
        };
        let plain = r#"{"Pod":{},"NodeNames": [ "a" ,"ü-b", "c"] }"#;
        assert_eq!(names(plain).unwrap().0, ["a", "ü-b", "c"]);
        assert_eq!(names(plain).unwrap().1, r#"[ "a" ,"ü-b", "c"]"#);
        assert_eq!(
            names(r#"{"Pod":{},"NodeNames":[]}"#).unwrap().0,
            Vec::<String>::new()
        );
        let escaped = r#"{"Pod":{},"NodeNames":["a\"b","c\u0041"]}"#;
        assert_eq!(names(escaped).unwrap().0, ["a\"b", "cA"]);
        for wrong in [r#""n1""#, "[1]", r#"["a",null]"#, r#"[["a"]]"#] {
            let body = format!(r#"{{"Pod":{{}},"NodeNames":{wrong}}}"#);
            let serde = serde_json::from_str::<ExtenderArgs>(&body).unwrap_err();
            let ours = names(&body).unwrap_err().to_string();
            let what = serde.to_string();
            let what = what.split(" at line").next().unwrap();
            assert!(ours.starts_with(what), "{ours} / {what}");
            // One position, in the whole body, at the end of `NodeNames`.
            assert_eq!(ours.matches(" at line ").count(), 1, "{ours}");
            assert!(
                ours.ends_with(&format!(" at line 1 column {}", body.len())),
                "{ours}"
            );
        }
    }

    #[test]
    fn lowercase_keys_from_old_schedulers_are_accepted() {
        let args: ExtenderArgs =
            serde_json::from_value(json!({"pod": {}, "nodenames": ["a"]})).unwrap();
        assert_eq!(args.node_names, Some(vec!["a".to_string()]));
        let bind: ExtenderBindingArgs =
            serde_json::from_value(json!({"podName": "p", "node": "n"})).unwrap();
        assert_eq!((bind.pod_name.as_str(), bind.node.as_str()), ("p", "n"));
    }

    #[test]
    fn a_filter_result_always_spells_every_go_field() {
        let result = ExtenderFilterResult {
            nodes: None,
            node_names: Some(vec!["n1".into()]),
            failed_nodes: [("n2".to_string(), "full".to_string())].into(),
            failed_and_unresolvable_nodes: FailedNodesMap::new(),
            error: String::new(),
        };
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            json!({
                "Nodes": null,
                "NodeNames": ["n1"],
                "FailedNodes": {"n2": "full"},
                "FailedAndUnresolvableNodes": {},
                "Error": ""
            })
        );
    }

    #[test]
    fn null_victim_lists_and_entries_decode_as_empty() {
        let args: ExtenderPreemptionArgs = serde_json::from_value(json!({
            "Pod": {},
            "NodeNameToVictims": null,
            "NodeNameToMetaVictims": {
                "n1": {"Pods": [{"UID": "u1"}, null], "NumPDBViolations": 1},
                "n2": {"Pods": null, "NumPDBViolations": null},
                "n3": null
            }
        }))
        .unwrap();
        let meta = args.node_name_to_meta_victims.unwrap();
        assert_eq!(
            meta["n1"],
            Some(MetaVictims {
                pods: vec![MetaPod { uid: "u1".into() }],
                num_pdb_violations: 1
            })
        );
        assert_eq!(meta["n2"], Some(MetaVictims::default()));
        assert_eq!(meta["n3"], None);
    }

    #[test]
    fn host_priorities_use_go_names() {
        let list: HostPriorityList = vec![HostPriority {
            host: "n1".into(),
            score: 7,
        }];
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            r#"[{"Host":"n1","Score":7}]"#
        );
    }
}
