//! Kubernetes' `CompositePodGroup` (`scheduling.k8s.io/v1alpha3`, behind the
//! `CompositePodGroup` feature gate, alpha in 1.37): an inner node of a tree of groups whose
//! leaves are Kubernetes PodGroups naming it in `spec.parentCompositePodGroupName`;
//! `schedulingPolicy.gang.minGroupCount` counts the children that must run. The stock
//! scheduler places a tree whole in its own cycle; Gangplank gives the tree's root one
//! Gangplank PodGroup of sub-groups ([`tree`]) and admits its minimum (docs/gangs.md,
//! "Kubernetes' CompositePodGroup"; docs/decisions/gangs-of-gangs.md says why it leaves the
//! placing to the scheduler). Watched only while served, like [`super::workload_api`].
//!
//! The pod webhook labels each pod of a tree with the tree's root as its group
//! ([`super::labels::POD_GROUP_LABEL`]), the parent of its PodGroup ([`PARENT_LABEL`]) and its
//! PodGroup ([`LEAF_LABEL`]), so that sub-groups select and split members by labels as any
//! gang of sub-groups does.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::pod_group::{PodGroupSpec, SubGroupPolicy};

/// The API version Gangplank reads.
pub const API_VERSION: &str = "scheduling.k8s.io/v1alpha3";

/// The CompositePodGroup that is the parent of a pod's Kubernetes PodGroup.
pub const PARENT_LABEL: &str = "scheduling.gangplank.dev/composite-pod-group";

/// The Kubernetes PodGroup a pod names in `spec.schedulingGroup.podGroupName` (a leaf).
pub const LEAF_LABEL: &str = "scheduling.gangplank.dev/kubernetes-pod-group";

/// Levels Gangplank walks up from a leaf before it calls the tree too deep (Kubernetes
/// allows four).
pub const MAX_DEPTH: usize = 4;

/// The spec of Kubernetes' CompositePodGroup, the fields Gangplank reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.k8s.io",
    version = "v1alpha3",
    kind = "CompositePodGroup",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct CompositePodGroupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_composite_pod_group_name: Option<String>,
    #[serde(default)]
    pub scheduling_policy: CompositeSchedulingPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// `gang` (at least `minGroupCount` children) or `basic` (each child on its own).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeSchedulingPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<CompositeGangPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompositeGangPolicy {
    pub min_group_count: i32,
}

/// What the tree needs to know of a node: its parent, and for a CompositePodGroup its
/// `minGroupCount` (`None`: basic), for a PodGroup its `minCount` (`None`: basic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub parent: Option<String>,
    pub min: Option<i32>,
}

/// The CompositePodGroups and PodGroups of one namespace, by name.
#[derive(Debug, Default)]
pub struct Namespace {
    pub composites: BTreeMap<String, Node>,
    pub leaves: BTreeMap<String, Node>,
}

/// Why a tree is not held as sub-groups; each says what to change. [`NotHeld::FewChildren`]
/// is a tree still being made (its gang waits for the rest); the others are trees Gangplank
/// holds as one flat gang of every PodGroup's `minCount` ([`flat`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotHeld {
    #[error(
        "CompositePodGroup {0:?} has a basic policy; Gangplank holds trees whose every node is a gang"
    )]
    Basic(String),
    #[error("PodGroup {0:?} has a basic policy; Gangplank holds trees whose every leaf is a gang")]
    BasicLeaf(String),
    #[error(
        "CompositePodGroup {name:?} has {children} children, fewer than its minGroupCount {min}"
    )]
    FewChildren {
        name: String,
        children: usize,
        min: i32,
    },
    #[error(
        "CompositePodGroup {name:?} needs {min} of its {children} children of different kinds or sizes; Gangplank holds k of n children only when they are PodGroups of one minCount, else every child"
    )]
    SomeOfMixed {
        name: String,
        children: usize,
        min: i32,
    },
    #[error(
        "CompositePodGroup {0:?} is three levels below its root; Gangplank holds a root, its children and their PodGroups"
    )]
    TooDeep(String),
    #[error(
        "{0} children in the tree; Gangplank holds at most {max} sub-groups",
        max = gangplank_core::limits::MAX_SUB_GROUPS
    )]
    TooWide(usize),
}

/// What the Gangplank PodGroup of a tree's root holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// The gang of sub-groups [`tree`] makes.
    Tree(PodGroupSpec),
    /// A gang of every PodGroup's `minCount` ([`flat`]), and why not sub-groups.
    Flat { min_member: i32, why: NotHeld },
    /// A tree still being made: the gang waits for the children its minimum names.
    Incomplete(NotHeld),
}

/// The shape of the tree rooted at `root`.
pub fn shape(root: &str, namespace: &Namespace) -> Shape {
    match tree(root, namespace) {
        Ok(spec) => Shape::Tree(spec),
        Err(why @ NotHeld::FewChildren { .. }) => Shape::Incomplete(why),
        Err(why) => Shape::Flat {
            min_member: flat(root, namespace),
            why,
        },
    }
}

/// Why the root of a leaf's tree cannot be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRoot {
    #[error(
        "CompositePodGroup {0:?} is not known (yet): create a tree's CompositePodGroups before its pods"
    )]
    Unknown(String),
    #[error(
        "CompositePodGroups above {0:?} are more than {MAX_DEPTH} levels deep or form a circle"
    )]
    TooDeep(String),
}

/// The root of the tree above `parent` (a leaf's `parentCompositePodGroupName`), walking up
/// at most [`MAX_DEPTH`] levels through `composites` (a name's parent, `None` when unknown).
pub fn root_of(
    parent: &str,
    composites: impl Fn(&str) -> Option<Option<String>>,
) -> Result<String, NoRoot> {
    let mut name = parent.to_owned();
    for _ in 0..MAX_DEPTH {
        match composites(&name) {
            None => return Err(NoRoot::Unknown(name)),
            Some(None) => return Ok(name),
            Some(Some(up)) => name = up,
        }
    }
    Err(NoRoot::TooDeep(parent.to_owned()))
}

/// The `minMember` and sub-groups of the Gangplank PodGroup for the tree rooted at `root`:
/// - a root whose children are PodGroups of one `minCount` is one sub-group of them, needing
///   `minGroupCount` whole;
/// - otherwise every child of the root is needed: a child CompositePodGroup whose children are
///   PodGroups of one `minCount` is a sub-group needing its `minGroupCount` of them, a child
///   PodGroup a sub-group of one instance.
///
/// Members select their sub-group by [`PARENT_LABEL`] (and [`LEAF_LABEL`] for a PodGroup under
/// the root) and split into instances by [`LEAF_LABEL`].
pub fn tree(root: &str, namespace: &Namespace) -> Result<PodGroupSpec, NotHeld> {
    let min = namespace
        .composites
        .get(root)
        .and_then(|n| n.min)
        .ok_or_else(|| NotHeld::Basic(root.to_owned()))?;
    let (composites, leaves) = children(root, namespace);
    let count = composites.len() + leaves.len();
    if count < usize::try_from(min.max(0)).unwrap_or(0) {
        return Err(NotHeld::FewChildren {
            name: root.to_owned(),
            children: count,
            min,
        });
    }
    let policy = if composites.is_empty() {
        vec![instances_of(root, &leaves, namespace, min)?]
    } else if count as i64 == i64::from(min) {
        let mut policy = Vec::with_capacity(count);
        for child in composites {
            policy.push(role(child, namespace)?);
        }
        for leaf in leaves {
            policy.push(single(root, leaf, namespace)?);
        }
        policy
    } else {
        return Err(NotHeld::SomeOfMixed {
            name: root.to_owned(),
            children: count,
            min,
        });
    };
    if policy.len() > gangplank_core::limits::MAX_SUB_GROUPS as usize {
        return Err(NotHeld::TooWide(policy.len()));
    }
    let min_member: i64 = policy
        .iter()
        .map(|p| i64::from(p.sub_group_size) * i64::from(p.min_sub_groups))
        .sum();
    let mut spec = PodGroupSpec::with_min_member(i32::try_from(min_member).unwrap_or(i32::MAX));
    spec.sub_group_policy = policy;
    Ok(spec)
}

/// The members of every PodGroup under `root` (their `minCount`, 1 for a basic policy): the
/// gang of a tree Gangplank cannot hold as sub-groups, all of it or none.
pub fn flat(root: &str, namespace: &Namespace) -> i32 {
    let mut total: i64 = 0;
    let mut parents = vec![root];
    let mut seen = 0;
    while let Some(parent) = parents.pop() {
        seen += 1;
        if seen > 1 + namespace.composites.len() {
            break;
        }
        let (composites, leaves) = children(parent, namespace);
        parents.extend(composites);
        total += leaves
            .iter()
            .map(|leaf| i64::from(namespace.leaves[*leaf].min.unwrap_or(1).max(1)))
            .sum::<i64>();
    }
    i32::try_from(total.max(1)).unwrap_or(i32::MAX)
}

/// The CompositePodGroups and PodGroups whose parent is `name`.
fn children<'n>(name: &str, namespace: &'n Namespace) -> (Vec<&'n str>, Vec<&'n str>) {
    let of = |nodes: &'n BTreeMap<String, Node>| {
        nodes
            .iter()
            .filter(|(_, n)| n.parent.as_deref() == Some(name))
            .map(|(child, _)| child.as_str())
            .collect::<Vec<_>>()
    };
    (of(&namespace.composites), of(&namespace.leaves))
}

/// A child CompositePodGroup of the root: a sub-group of its PodGroups.
fn role(name: &str, namespace: &Namespace) -> Result<SubGroupPolicy, NotHeld> {
    let min = namespace
        .composites
        .get(name)
        .and_then(|n| n.min)
        .ok_or_else(|| NotHeld::Basic(name.to_owned()))?;
    let (composites, leaves) = children(name, namespace);
    if let Some(deeper) = composites.first() {
        return Err(NotHeld::TooDeep((*deeper).to_owned()));
    }
    if leaves.len() < usize::try_from(min.max(0)).unwrap_or(0) {
        return Err(NotHeld::FewChildren {
            name: name.to_owned(),
            children: leaves.len(),
            min,
        });
    }
    instances_of(name, &leaves, namespace, min)
}

/// The sub-group of the PodGroups `leaves` under `parent`, `min` of them needed whole: they
/// must share one `minCount`.
fn instances_of(
    parent: &str,
    leaves: &[&str],
    namespace: &Namespace,
    min: i32,
) -> Result<SubGroupPolicy, NotHeld> {
    let mut sizes = leaves.iter().map(|leaf| leaf_size(leaf, namespace));
    let size = match sizes.next() {
        Some(size) => size?,
        None => 1,
    };
    for other in sizes {
        if other? != size {
            return Err(NotHeld::SomeOfMixed {
                name: parent.to_owned(),
                children: leaves.len(),
                min,
            });
        }
    }
    Ok(sub_group(
        parent,
        BTreeMap::from([(PARENT_LABEL.to_owned(), parent.to_owned())]),
        size,
        min,
    ))
}

/// A PodGroup directly under the root beside CompositePodGroups: one instance, needed.
fn single(root: &str, leaf: &str, namespace: &Namespace) -> Result<SubGroupPolicy, NotHeld> {
    let size = leaf_size(leaf, namespace)?;
    let selector = BTreeMap::from([
        (PARENT_LABEL.to_owned(), root.to_owned()),
        (LEAF_LABEL.to_owned(), leaf.to_owned()),
    ]);
    Ok(sub_group(leaf, selector, size, 1))
}

fn leaf_size(leaf: &str, namespace: &Namespace) -> Result<i32, NotHeld> {
    namespace
        .leaves
        .get(leaf)
        .and_then(|n| n.min)
        .map(|m| m.max(1))
        .ok_or_else(|| NotHeld::BasicLeaf(leaf.to_owned()))
}

fn sub_group(
    name: &str,
    selector: BTreeMap<String, String>,
    size: i32,
    min: i32,
) -> SubGroupPolicy {
    SubGroupPolicy {
        name: name.to_owned(),
        sub_group_size: size,
        min_sub_groups: min,
        label_selector: Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(selector),
                match_expressions: None,
            },
        ),
        match_label_keys: vec![LEAF_LABEL.to_owned()],
        topology_key: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(parent: Option<&str>, min: Option<i32>) -> Node {
        Node {
            parent: parent.map(str::to_owned),
            min,
        }
    }

    /// The service: a root needing its three children, 4 prefill instances of 2 (2
    /// needed), 2 decode instances of 4 (1 needed) and a router of 1.
    fn service() -> Namespace {
        let mut ns = Namespace::default();
        ns.composites.insert("svc".into(), node(None, Some(3)));
        ns.composites
            .insert("prefill".into(), node(Some("svc"), Some(2)));
        ns.composites
            .insert("decode".into(), node(Some("svc"), Some(1)));
        ns.leaves
            .insert("router".into(), node(Some("svc"), Some(1)));
        for i in 0..4 {
            ns.leaves
                .insert(format!("prefill-{i}"), node(Some("prefill"), Some(2)));
        }
        for i in 0..2 {
            ns.leaves
                .insert(format!("decode-{i}"), node(Some("decode"), Some(4)));
        }
        ns
    }

    fn summary(spec: &PodGroupSpec) -> Vec<(String, i32, i32)> {
        spec.sub_group_policy
            .iter()
            .map(|p| (p.name.clone(), p.sub_group_size, p.min_sub_groups))
            .collect()
    }

    #[test]
    fn a_service_of_roles_is_a_sub_group_per_role_and_one_for_its_router() {
        let spec = tree("svc", &service()).unwrap();
        assert_eq!(
            summary(&spec),
            [
                ("decode".into(), 4, 1),
                ("prefill".into(), 2, 2),
                ("router".into(), 1, 1)
            ]
        );
        assert_eq!(spec.min_member, 4 + 4 + 1);
        assert!(crate::api::sub_group_rules::problems(&spec).is_empty());
    }

    #[test]
    fn a_root_of_pod_groups_needs_its_min_group_count_of_them() {
        let mut ns = Namespace::default();
        ns.composites.insert("slices".into(), node(None, Some(2)));
        for i in 0..3 {
            ns.leaves
                .insert(format!("slice-{i}"), node(Some("slices"), Some(4)));
        }
        let spec = tree("slices", &ns).unwrap();
        assert_eq!(summary(&spec), [("slices".into(), 4, 2)]);
        assert_eq!(spec.min_member, 8);
    }

    #[test]
    fn trees_gangplank_cannot_hold_say_which_node_and_why() {
        let mut some_of_roles = service();
        some_of_roles.composites.get_mut("svc").unwrap().min = Some(2);
        assert!(matches!(
            tree("svc", &some_of_roles),
            Err(NotHeld::SomeOfMixed { .. })
        ));
        let mut deeper = service();
        deeper
            .composites
            .insert("inner".into(), node(Some("prefill"), Some(1)));
        assert_eq!(tree("svc", &deeper), Err(NotHeld::TooDeep("inner".into())));
        let mut uneven = service();
        uneven.leaves.get_mut("prefill-3").unwrap().min = Some(3);
        assert!(matches!(
            tree("svc", &uneven),
            Err(NotHeld::SomeOfMixed { name, .. }) if name == "prefill"
        ));
        let mut waiting = service();
        waiting.leaves.retain(|name, _| !name.starts_with("decode"));
        assert!(matches!(
            tree("svc", &waiting),
            Err(NotHeld::FewChildren { name, .. }) if name == "decode"
        ));
        let mut basic = service();
        basic.leaves.get_mut("router").unwrap().min = None;
        assert_eq!(
            tree("svc", &basic),
            Err(NotHeld::BasicLeaf("router".into()))
        );
        assert_eq!(flat("svc", &basic), 4 * 2 + 2 * 4 + 1);
    }

    #[test]
    fn the_root_is_found_within_four_levels_and_a_circle_is_refused() {
        let known = |name: &str| match name {
            "prefill" => Some(Some("svc".to_owned())),
            "svc" => Some(None),
            "a" => Some(Some("b".to_owned())),
            "b" => Some(Some("a".to_owned())),
            _ => None,
        };
        assert_eq!(root_of("prefill", known), Ok("svc".into()));
        assert_eq!(root_of("svc", known), Ok("svc".into()));
        assert_eq!(root_of("gone", known), Err(NoRoot::Unknown("gone".into())));
        assert_eq!(root_of("a", known), Err(NoRoot::TooDeep("a".into())));
    }
}
