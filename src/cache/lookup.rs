//! What the webhooks (and the controller, for a namespace's default queue) read about the
//! cluster: Queues, PodGroups, and Namespaces' labels (their default queue, and what a queue's
//! `namespaceSelector` matches).
//!
//! The rules read through three small traits rather than a concrete store, so that they are
//! tested with plain maps and so that the cluster cache can serve them once it holds PodGroups
//! and Queues. In the server they are served by the process's shared reflector stores
//! ([`super::stores::Stores`], also read by the controller).
//!
//! Every answer may be "not loaded yet" ([`NotSynced`]): a webhook must never conclude that a
//! queue does not exist because its list has not arrived. The rules turn that into a 503
//! denial that says so, which the client sees and can retry.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::runtime::reflector::ObjectRef;

use super::stores::{StoreKind, Stores};
use crate::api::composite_pod_group::{NoRoot, root_of};
use crate::api::{PodGroup, PodGroupPhase, Queue, QueueState, labels};
use gangplank_core::model::{Resources, Topology};

/// A lookup could not answer: that kind's initial list has not completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Gangplank has not finished listing {0} yet; retry in a few seconds")]
pub struct NotSynced(pub &'static str);

/// A lookup's answer.
pub type Lookup<T> = Result<T, NotSynced>;

/// What the webhooks need to know about a Queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueView {
    pub name: String,
    pub state: QueueState,
    pub parent: Option<String>,
    /// `spec.namespaceSelector`: which namespaces may submit to it (absent: all).
    pub namespaces: Option<LabelSelector>,
}

/// What the webhooks need to know about a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupView {
    pub namespace: String,
    pub name: String,
    /// `spec.queue`, or `default` when unset.
    pub queue: String,
    pub phase: PodGroupPhase,
}

impl PodGroupView {
    /// Admitted and not finished: the group holds capacity of its queue (Inqueue, Running, or
    /// Unknown: a running gang that fell below minMember still holds its members).
    pub fn is_admitted(&self) -> bool {
        is_admitted(self.phase)
    }
}

/// Whether a PodGroup in `phase` is admitted and not finished (see [`PodGroupView::is_admitted`]).
pub fn is_admitted(phase: PodGroupPhase) -> bool {
    matches!(
        phase,
        PodGroupPhase::Inqueue | PodGroupPhase::Running | PodGroupPhase::Unknown
    )
}

/// Queues by name.
pub trait QueueLookup: Send + Sync {
    fn queue(&self, name: &str) -> Lookup<Option<QueueView>>;
    /// The queues whose `spec.parent` is `name`, by name.
    fn children(&self, name: &str) -> Lookup<Vec<String>>;
}

/// PodGroups by namespace and name, and by queue.
pub trait PodGroupLookup: Send + Sync {
    fn pod_group(&self, namespace: &str, name: &str) -> Lookup<Option<PodGroupView>>;
    /// Every PodGroup whose queue is `queue` and whose phase is not Completed or Failed.
    fn unfinished_pod_groups_in(&self, queue: &str) -> Lookup<Vec<PodGroupView>>;
    /// The priority of Kubernetes' PodGroup `namespace/name` (`spec.priority`), when the watch
    /// has shown it; `None` also while that API is not served or not yet listed.
    fn kubernetes_pod_group_priority(&self, namespace: &str, name: &str) -> Option<i32>;
    /// The tree of CompositePodGroups above Kubernetes' PodGroup `namespace/name`, when the
    /// watch has shown it with a `parentCompositePodGroupName`; `None` also while that API is
    /// not served or not yet listed.
    fn kubernetes_tree(&self, namespace: &str, name: &str) -> Option<Result<TreeOf, NoRoot>>;
}

/// Where a Kubernetes PodGroup sits in a tree of CompositePodGroups: its parent and the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeOf {
    pub parent: String,
    pub root: String,
}

/// Namespaces' labels: their default queue (the label `scheduling.gangplank.dev/queue`) and
/// what queues' `namespaceSelector`s match.
pub trait NamespaceLookup: Send + Sync {
    /// The namespace's labels; `None` when it does not exist (yet).
    fn namespace_labels(&self, namespace: &str) -> Lookup<Option<BTreeMap<String, String>>>;

    /// The namespace's default queue.
    fn namespace_queue(&self, namespace: &str) -> Lookup<Option<String>> {
        Ok(self
            .namespace_labels(namespace)?
            .and_then(|mut labels| labels.remove(labels::QUEUE_LABEL))
            .filter(|q| !q.is_empty()))
    }
}

/// What the cluster's nodes hold.
pub trait CapacityLookup: Send + Sync {
    /// The allocatable of the nodes that take new pods
    /// ([`gangplank_core::model::Node::takes_new_pods`]).
    fn schedulable_capacity(&self) -> Lookup<Resources>;
}

/// The cluster's Topologies.
pub trait TopologyLookup: Send + Sync {
    /// Every Topology, by name.
    fn topologies(&self) -> Lookup<BTreeMap<String, Topology>>;
}

/// Everything the webhooks read.
pub trait ClusterLookup:
    QueueLookup + PodGroupLookup + NamespaceLookup + CapacityLookup + TopologyLookup
{
}

impl<T: QueueLookup + PodGroupLookup + NamespaceLookup + CapacityLookup + TopologyLookup>
    ClusterLookup for T
{
}

impl QueueView {
    pub fn of(queue: &Queue) -> Option<Self> {
        Some(QueueView {
            name: queue.metadata.name.clone()?,
            state: queue.spec.state,
            parent: queue.spec.parent.clone().filter(|p| !p.is_empty()),
            namespaces: queue.spec.namespace_selector.clone(),
        })
    }
}

impl PodGroupView {
    pub fn of(group: &PodGroup) -> Option<Self> {
        Some(PodGroupView {
            namespace: group.metadata.namespace.clone()?,
            name: group.metadata.name.clone()?,
            queue: group.spec.queue_name().to_owned(),
            phase: group.status.as_ref().map(|s| s.phase).unwrap_or_default(),
        })
    }
}

impl Stores {
    fn lookup_synced(&self, kind: StoreKind, name: &'static str) -> Result<(), NotSynced> {
        if self.synced(kind) {
            Ok(())
        } else {
            Err(NotSynced(name))
        }
    }
}

impl CapacityLookup for Stores {
    fn schedulable_capacity(&self) -> Lookup<Resources> {
        if !self.cache.is_synced(crate::cache::Watched::Nodes) {
            return Err(NotSynced("Nodes"));
        }
        Ok(self.cache.read(|s| s.schedulable_capacity()))
    }
}

impl TopologyLookup for Stores {
    fn topologies(&self) -> Lookup<BTreeMap<String, Topology>> {
        if !self.cache.is_synced(crate::cache::Watched::Topologies) {
            return Err(NotSynced("Topologies"));
        }
        Ok(self.cache.read(|s| s.topologies().clone()))
    }
}

impl QueueLookup for Stores {
    fn queue(&self, name: &str) -> Lookup<Option<QueueView>> {
        self.lookup_synced(StoreKind::Queues, "Queues")?;
        Ok(self
            .queues
            .get(&ObjectRef::new(name))
            .and_then(|q| QueueView::of(&q)))
    }

    fn children(&self, name: &str) -> Lookup<Vec<String>> {
        self.lookup_synced(StoreKind::Queues, "Queues")?;
        let mut children: Vec<String> = self
            .queues
            .state()
            .iter()
            .filter_map(|q| QueueView::of(q))
            .filter(|q| q.parent.as_deref() == Some(name))
            .map(|q| q.name)
            .collect();
        children.sort();
        Ok(children)
    }
}

impl PodGroupLookup for Stores {
    fn pod_group(&self, namespace: &str, name: &str) -> Lookup<Option<PodGroupView>> {
        self.lookup_synced(StoreKind::PodGroups, "PodGroups")?;
        Ok(self
            .pod_groups
            .get(&ObjectRef::new(name).within(namespace))
            .and_then(|g| PodGroupView::of(&g)))
    }

    fn unfinished_pod_groups_in(&self, queue: &str) -> Lookup<Vec<PodGroupView>> {
        self.lookup_synced(StoreKind::PodGroups, "PodGroups")?;
        let mut groups: Vec<PodGroupView> = self
            .pod_groups
            .state()
            .iter()
            .filter_map(|g| PodGroupView::of(g))
            .filter(|g| g.queue == queue && !g.phase.is_finished())
            .collect();
        groups.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Ok(groups)
    }

    fn kubernetes_pod_group_priority(&self, namespace: &str, name: &str) -> Option<i32> {
        self.upstream_priority(namespace, name)
    }

    fn kubernetes_tree(&self, namespace: &str, name: &str) -> Option<Result<TreeOf, NoRoot>> {
        let leaf = self
            .upstream_pod_groups
            .get(&ObjectRef::new(name).within(namespace))?;
        let parent = leaf.spec.parent_composite_pod_group_name.clone()?;
        let composites = |name: &str| {
            self.composite_pod_groups
                .get(&ObjectRef::new(name).within(namespace))
                .map(|c| c.spec.parent_composite_pod_group_name.clone())
        };
        Some(root_of(&parent, composites).map(|root| TreeOf { parent, root }))
    }
}

impl Stores {
    fn upstream_priority(&self, namespace: &str, name: &str) -> Option<i32> {
        let beta = self
            .upstream_pod_groups
            .get(&ObjectRef::new(name).within(namespace));
        let alpha = || {
            self.upstream_v1alpha2_pod_groups
                .get(&ObjectRef::new(name).within(namespace))
        };
        match beta {
            Some(group) => group.spec.priority,
            None => alpha().and_then(|g| g.spec.priority),
        }
    }
}

impl NamespaceLookup for Stores {
    fn namespace_labels(&self, namespace: &str) -> Lookup<Option<BTreeMap<String, String>>> {
        self.lookup_synced(StoreKind::Namespaces, "Namespaces")?;
        Ok(self
            .namespaces
            .get(&ObjectRef::new(namespace))
            .map(|ns| ns.metadata.labels.clone().unwrap_or_default()))
    }
}

/// Fixed answers from plain lists: for tests, and for running the webhooks without a cluster.
#[derive(Debug, Default, Clone)]
pub struct StaticLookup {
    pub queues: Vec<QueueView>,
    pub pod_groups: Vec<PodGroupView>,
    /// Namespace name and its default queue.
    pub namespaces: Vec<(String, String)>,
    /// Namespace name and its other labels; a namespace in neither list does not exist.
    pub labelled: Vec<(String, BTreeMap<String, String>)>,
    /// What [`CapacityLookup::schedulable_capacity`] answers.
    pub capacity: Resources,
    /// Answer every lookup with [`NotSynced`].
    pub unsynced: bool,
    /// Kubernetes' PodGroups: namespace, name and priority.
    pub kubernetes_pod_groups: Vec<(String, String, i32)>,
    /// Kubernetes' PodGroups in trees: namespace, name, and where (or why not found).
    pub kubernetes_trees: Vec<(String, String, Result<TreeOf, NoRoot>)>,
    /// What [`TopologyLookup::topologies`] answers.
    pub topologies: Vec<Topology>,
}

impl StaticLookup {
    fn ready(&self, kind: &'static str) -> Result<(), NotSynced> {
        if self.unsynced {
            Err(NotSynced(kind))
        } else {
            Ok(())
        }
    }
}

impl CapacityLookup for StaticLookup {
    fn schedulable_capacity(&self) -> Lookup<Resources> {
        self.ready("Nodes")?;
        Ok(self.capacity.clone())
    }
}

impl TopologyLookup for StaticLookup {
    fn topologies(&self) -> Lookup<BTreeMap<String, Topology>> {
        self.ready("Topologies")?;
        Ok(self
            .topologies
            .iter()
            .map(|t| (t.name.clone(), t.clone()))
            .collect())
    }
}

impl QueueLookup for StaticLookup {
    fn queue(&self, name: &str) -> Lookup<Option<QueueView>> {
        self.ready("Queues")?;
        Ok(self.queues.iter().find(|q| q.name == name).cloned())
    }

    fn children(&self, name: &str) -> Lookup<Vec<String>> {
        self.ready("Queues")?;
        let mut children: Vec<String> = self
            .queues
            .iter()
            .filter(|q| q.parent.as_deref() == Some(name))
            .map(|q| q.name.clone())
            .collect();
        children.sort();
        Ok(children)
    }
}

impl PodGroupLookup for StaticLookup {
    fn pod_group(&self, namespace: &str, name: &str) -> Lookup<Option<PodGroupView>> {
        self.ready("PodGroups")?;
        Ok(self
            .pod_groups
            .iter()
            .find(|g| g.namespace == namespace && g.name == name)
            .cloned())
    }

    fn unfinished_pod_groups_in(&self, queue: &str) -> Lookup<Vec<PodGroupView>> {
        self.ready("PodGroups")?;
        let mut groups: Vec<PodGroupView> = self
            .pod_groups
            .iter()
            .filter(|g| g.queue == queue && !g.phase.is_finished())
            .cloned()
            .collect();
        groups.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Ok(groups)
    }

    fn kubernetes_pod_group_priority(&self, namespace: &str, name: &str) -> Option<i32> {
        self.kubernetes_pod_groups
            .iter()
            .find(|(ns, n, _)| ns == namespace && n == name)
            .map(|(_, _, priority)| *priority)
    }

    fn kubernetes_tree(&self, namespace: &str, name: &str) -> Option<Result<TreeOf, NoRoot>> {
        self.kubernetes_trees
            .iter()
            .find(|(ns, n, _)| ns == namespace && n == name)
            .map(|(_, _, tree)| tree.clone())
    }
}

impl NamespaceLookup for StaticLookup {
    fn namespace_labels(&self, namespace: &str) -> Lookup<Option<BTreeMap<String, String>>> {
        self.ready("Namespaces")?;
        let queue = self.namespaces.iter().find(|(ns, _)| ns == namespace);
        let others = self.labelled.iter().find(|(ns, _)| ns == namespace);
        if queue.is_none() && others.is_none() {
            return Ok(None);
        }
        let mut found = others.map(|(_, l)| l.clone()).unwrap_or_default();
        found.insert(NAME_LABEL.to_owned(), namespace.to_owned());
        if let Some((_, q)) = queue {
            found.insert(labels::QUEUE_LABEL.to_owned(), q.clone());
        }
        Ok(Some(found))
    }
}

/// The label the API server gives every Namespace, with its name.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_queue_view_keeps_name_state_and_parent() {
        let queue: Queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {"state": "Closed", "parent": "org"},
            "status": {"admitted": 1, "running": 2}
        }))
        .unwrap();
        assert_eq!(
            QueueView::of(&queue),
            Some(QueueView {
                name: "research".into(),
                state: QueueState::Closed,
                parent: Some("org".into()),
                namespaces: None,
            })
        );
    }

    #[test]
    fn a_pod_group_without_queue_or_status_is_pending_in_the_default_queue() {
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"minMember": 2}
        }))
        .unwrap();
        let view = PodGroupView::of(&group).unwrap();
        assert_eq!(view.queue, "default");
        assert_eq!(view.phase, PodGroupPhase::Pending);
        assert!(!view.is_admitted());
    }

    #[test]
    fn unsynced_stores_refuse_to_answer() {
        let (reflectors, _writers) = Stores::new(crate::cache::Cache::new().0);
        assert_eq!(reflectors.queue("default"), Err(NotSynced("Queues")));
        assert_eq!(
            reflectors.pod_group("ml", "train"),
            Err(NotSynced("PodGroups"))
        );
        assert_eq!(
            reflectors.namespace_queue("ml"),
            Err(NotSynced("Namespaces"))
        );
    }

    #[test]
    fn not_synced_says_what_is_missing_and_to_retry() {
        assert_eq!(
            NotSynced("Queues").to_string(),
            "Gangplank has not finished listing Queues yet; retry in a few seconds"
        );
    }
}
