//! The cluster cache: the one shared [`State`] (the core's model) behind a lock, fed from the
//! API by watches ([`watch`]) through conversions at the edge ([`convert`], [`constraints`]).
//!
//! Rules:
//! - Writes go through the `apply_*`/`delete_*` methods, called by the watch loops, and through
//!   [`Cache::update`] for the extender's reservations and claims and the admission loop's
//!   reservation. A watch event that changes nothing the model holds (a status write, a
//!   heartbeat) is skipped and wakes nobody.
//! - Readers hold the lock only inside [`Cache::read`], a synchronous closure, so it can never
//!   be held across an `.await`; the admission loop and the controller work on a
//!   [`Cache::snapshot`], which shares the pods and groups with the live state, so a pass of
//!   any length never blocks a filter or a bind.
//! - Each watcher marks itself synced after its first complete list; `/readyz` reports it.

pub mod constraints;
pub mod convert;
pub mod stores;
pub mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, Queue, State};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to convert {kind} {name}: {why}")]
    Convert {
        kind: &'static str,
        name: String,
        why: String,
    },
}

/// The watchers whose initial list gates readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    Nodes,
    Pods,
    PodGroups,
    Queues,
}

impl Watched {
    pub const ALL: [Watched; 4] = [
        Watched::Nodes,
        Watched::Pods,
        Watched::PodGroups,
        Watched::Queues,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Watched::Nodes => "nodes",
            Watched::Pods => "pods",
            Watched::PodGroups => "podgroups",
            Watched::Queues => "queues",
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    state: RwLock<State>,
    /// Woken on every write, for loops that react to changes (admission).
    changed: tokio::sync::Notify,
    /// Counts writes; any number of loops may [`Cache::subscribe`] to it (the controller).
    generation: tokio::sync::watch::Sender<u64>,
    nodes_synced: AtomicBool,
    pods_synced: AtomicBool,
    pod_groups_synced: AtomicBool,
    queues_synced: AtomicBool,
}

/// A cheap-to-clone handle on the shared cache.
#[derive(Debug, Clone, Default)]
pub struct Cache {
    inner: Arc<Inner>,
}

impl Cache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts or replaces a node. Like every watch write below, one that changes nothing the
    /// model holds (an equal object, the delete of one not held) wakes nobody.
    pub fn apply_node(&self, node: Node) {
        self.write(|s| s.apply_node(node));
    }

    pub fn delete_node(&self, name: &str) {
        self.write(|s| s.delete_node(name));
    }

    /// Inserts or replaces a pod.
    pub fn apply_pod(&self, pod: Pod) {
        self.write(|s| s.apply_pod(pod));
    }

    pub fn delete_pod(&self, uid: &str) {
        self.write(|s| s.delete_pod(uid));
    }

    /// Inserts or replaces a PodGroup (a status write leaves the model's PodGroup equal).
    pub fn apply_pod_group(&self, group: PodGroup) {
        self.write(|s| s.apply_pod_group(group));
    }

    pub fn delete_pod_group(&self, key: &GroupKey) {
        self.write(|s| s.delete_pod_group(key));
    }

    /// Inserts or replaces a Queue.
    pub fn apply_queue(&self, queue: Queue) {
        self.write(|s| s.apply_queue(queue));
    }

    pub fn delete_queue(&self, name: &str) {
        self.write(|s| s.delete_queue(name));
    }

    /// Runs `f` on the current state under a read lock. Keep `f` short: writers wait for it.
    pub fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        let guard = self
            .inner
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        f(&guard)
    }

    /// An owned copy of the current state, consistent at one instant, for work of any length
    /// that must not hold the lock. The pods, groups and queue-only members are persistent
    /// maps shared with the live state, so this copies the node records and the small maps
    /// (reservations, claims, queues), not the pods.
    pub fn snapshot(&self) -> State {
        self.read(State::clone)
    }

    pub fn node_count(&self) -> usize {
        self.read(|s| s.nodes.len())
    }

    pub fn pod_count(&self) -> usize {
        self.read(|s| s.pods.len())
    }

    /// Records that `watched` has completed its initial list.
    pub fn mark_synced(&self, watched: Watched) {
        self.synced_flag(watched).store(true, Ordering::Release);
    }

    /// A watch of `watched` failed: the cache may miss changes until it lists again.
    pub fn mark_unsynced(&self, watched: Watched) {
        self.synced_flag(watched).store(false, Ordering::Release);
    }

    pub fn is_synced(&self, watched: Watched) -> bool {
        self.synced_flag(watched).load(Ordering::Acquire)
    }

    /// The watchers that have not completed a list since they started or last failed; empty
    /// when ready.
    pub fn unsynced(&self) -> Vec<Watched> {
        Watched::ALL
            .into_iter()
            .filter(|w| !self.is_synced(*w))
            .collect()
    }

    fn synced_flag(&self, watched: Watched) -> &AtomicBool {
        match watched {
            Watched::Nodes => &self.inner.nodes_synced,
            Watched::Pods => &self.inner.pods_synced,
            Watched::PodGroups => &self.inner.pod_groups_synced,
            Watched::Queues => &self.inner.queues_synced,
        }
    }

    /// Runs `f` on the state under the write lock, for the extender's reservations and claims
    /// and the admission loop's reservation. Keep `f` short and synchronous. Wakes the loops.
    pub fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let result = f(&mut self.lock());
        self.wake();
        result
    }

    /// Runs `f` under the write lock; wakes the loops only when `f` says it changed something.
    fn write(&self, f: impl FnOnce(&mut State) -> bool) {
        let changed = f(&mut self.lock());
        if changed {
            self.wake();
        }
    }

    fn lock(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.inner
            .state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the loops that the state changed.
    fn wake(&self) {
        self.inner.changed.notify_one();
        self.inner
            .generation
            .send_modify(|g| *g = g.wrapping_add(1));
    }

    /// A change signal for any number of waiters: `changed().await` on the receiver completes
    /// after the next write (coalescing any number of writes in between).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// Completes after the next write (or at once if one happened since the last call): a
    /// single waiter's change signal.
    pub async fn changed(&self) {
        self.inner.changed.notified().await;
    }

    /// Every watcher has completed its initial list.
    pub fn is_ready(&self) -> bool {
        self.unsynced().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gangplank_core::model::{PodPhase, Resources};

    #[test]
    fn an_event_that_changes_nothing_the_model_holds_wakes_nobody() {
        let cache = Cache::new();
        let key = GroupKey::new("ns", "train");
        cache.apply_pod_group(PodGroup::new(key.clone(), 2, "default"));
        cache.apply_node(node("n1"));
        cache.apply_queue(Queue::new("default"));
        let mut changes = cache.subscribe();
        changes.mark_unchanged();

        cache.apply_pod_group(PodGroup::new(key.clone(), 2, "default"));
        cache.apply_node(node("n1"));
        cache.apply_queue(Queue::new("default"));
        cache.delete_pod("never-seen");
        cache.delete_queue("never-seen");
        assert!(
            !changes.has_changed().unwrap(),
            "an unchanged object woke the loops"
        );

        cache.apply_pod_group(PodGroup::new(key, 3, "default"));
        assert!(
            changes.has_changed().unwrap(),
            "a new gang size is a change"
        );
    }

    fn node(name: &str) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources::from([("cpu", 4_000)]),
            labels: Default::default(),
            taints: vec![],
            unschedulable: false,
            not_ready: false,
        }
    }

    fn pod(uid: &str, node: Option<&str>) -> Pod {
        Pod {
            uid: uid.into(),
            namespace: "ns".into(),
            name: format!("pod-{uid}"),
            node_name: node.map(Into::into),
            phase: PodPhase::Pending,
            requests: Resources::new(),
            pod_group: None,
            queue: None,
            priority: 0,
            ..Default::default()
        }
    }

    #[test]
    fn applying_twice_replaces_and_deleting_removes() {
        let cache = Cache::new();
        cache.apply_node(node("n1"));
        cache.apply_node(Node {
            unschedulable: true,
            ..node("n1")
        });
        cache.apply_pod(pod("u1", None));
        cache.apply_pod(pod("u1", Some("n1")));
        assert_eq!(cache.node_count(), 1);
        assert_eq!(cache.pod_count(), 1);
        assert!(cache.read(|s| s.nodes["n1"].unschedulable));
        assert_eq!(
            cache.read(|s| s.pods["u1"].node_name.clone()),
            Some("n1".into())
        );

        cache.delete_node("n1");
        cache.delete_pod("u1");
        cache.delete_pod("never-there");
        assert_eq!((cache.node_count(), cache.pod_count()), (0, 0));
    }

    #[test]
    fn a_snapshot_does_not_change_when_the_cache_does() {
        let cache = Cache::new();
        cache.apply_node(node("n1"));
        let before = cache.snapshot();
        cache.apply_node(node("n2"));
        cache.delete_node("n1");
        assert_eq!(before.nodes.len(), 1);
        assert!(before.nodes.contains_key("n1"));
        assert!(cache.snapshot().nodes.contains_key("n2"));
    }

    #[tokio::test]
    async fn every_subscriber_hears_of_a_write() {
        let cache = Cache::new();
        let (mut first, mut second) = (cache.subscribe(), cache.subscribe());
        assert!(!first.has_changed().unwrap());
        cache.apply_node(node("n1"));
        cache.apply_node(node("n2"));
        first.changed().await.unwrap();
        second.changed().await.unwrap();
        assert!(!first.has_changed().unwrap(), "two writes, one wake-up");
    }

    #[test]
    fn the_cache_is_ready_only_when_every_watcher_synced() {
        let cache = Cache::new();
        assert_eq!(
            cache.unsynced(),
            vec![
                Watched::Nodes,
                Watched::Pods,
                Watched::PodGroups,
                Watched::Queues
            ]
        );
        cache.mark_synced(Watched::Pods);
        cache.mark_synced(Watched::PodGroups);
        cache.mark_synced(Watched::Queues);
        assert_eq!(cache.unsynced(), vec![Watched::Nodes]);
        cache.clone().mark_synced(Watched::Nodes);
        assert!(cache.unsynced().is_empty());
    }
}
