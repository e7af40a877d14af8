//! The cluster model: plain Rust values, no kube or axum types.
//!
//! These are what the policy code reads. They hold only the fields scheduling decisions need,
//! which keeps memory near the design's budget (5,000 nodes and 100,000 pods under 300 MiB) and
//! lets tests and benchmarks build a cluster in a few lines.

use std::collections::BTreeMap;

/// Amounts per resource name: CPU in millicores, everything else in bytes or whole units (see
/// [`super::quantity`]). Missing resources are zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources(BTreeMap<String, i64>);

impl Resources {
    pub fn new() -> Self {
        Self::default()
    }

    /// The amount of `resource`, zero when absent.
    pub fn get(&self, resource: &str) -> i64 {
        self.0.get(resource).copied().unwrap_or(0)
    }

    pub fn set(&mut self, resource: impl Into<String>, amount: i64) {
        self.0.insert(resource.into(), amount);
    }

    /// Adds `other` resource by resource (saturating).
    pub fn add(&mut self, other: &Resources) {
        for (name, amount) in &other.0 {
            let entry = self.0.entry(name.clone()).or_insert(0);
            *entry = entry.saturating_add(*amount);
        }
    }

    /// Keeps, resource by resource, the larger of `self` and `other`.
    pub fn max_with(&mut self, other: &Resources) {
        for (name, amount) in &other.0 {
            let entry = self.0.entry(name.clone()).or_insert(0);
            *entry = (*entry).max(*amount);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl<K: Into<String>, const N: usize> From<[(K, i64); N]> for Resources {
    fn from(entries: [(K, i64); N]) -> Self {
        Resources(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
    /// An effect this version does not know; kept so it is not silently ignored.
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: Option<String>,
    pub effect: TaintEffect,
}

/// A node as scheduling sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub allocatable: Resources,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

impl PodPhase {
    /// Succeeded and failed pods hold no resources on their node.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// A pod as scheduling sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`: set once the pod is bound.
    pub node_name: Option<String>,
    pub phase: PodPhase,
    /// What the scheduler reserves for the pod: see [`super::convert::pod_requests`].
    pub requests: Resources,
    /// The PodGroup the pod's labels or annotations name (aliases included, see
    /// `crate::api::labels::pod_group_of`), when the pod belongs to a gang.
    pub pod_group: Option<String>,
    /// The queue the pod's own labels or annotations name (`crate::api::labels::queue_of`); the
    /// group's and the namespace's defaults are applied by their readers.
    pub queue: Option<String>,
    /// `spec.priority`, resolved by the API server from the priority class; 0 when unset.
    pub priority: i32,
}
