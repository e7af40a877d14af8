//! The cluster cache: the one shared [`State`] (the core's model) behind a lock, fed from the
//! API by watches ([`watch`]) through conversions at the edge ([`convert`], [`constraints`]).
//!
//! Who writes what (the compiler keeps it so: the write lock is private to this module):
//! - the API mirror (nodes, pods, PodGroups, Queues, Topologies and their indexes): only the one
//!   [`Mirror`] task, applying the watches' changes in order; it also owns the index of DRA
//!   objects ([`dra::Index`]) that adds devices to the nodes' allocatable and the pods' requests;
//! - the ledger (reservations, claims, the head's reservation, lent groups, wait reasons):
//!   only through the [`LedgerWriter`]'s methods, which the extender, the claim-expiry timer and
//!   the admission loop call;
//! - the scheduler names the cluster serves and how it grows: only [`Cache::serving`], once,
//!   before any watch;
//! - the DeviceClasses that count no device, and why ([`Cache::dra_problems`]): only the
//!   [`Mirror`], after it took DRA objects in.
//!
//! Readers hold the lock only inside [`Cache::read`], a synchronous closure, so it can never
//! be held across an `.await`; the admission loop and the controller work on a
//! [`Cache::snapshot`], which shares the pods and groups with the live state, so a pass of any
//! length never blocks a filter or a bind. Each kind is marked synced when its first complete
//! list is applied; `/readyz` reports it.

pub mod constraints;
pub mod convert;
pub mod dra;
pub mod ledger;
pub mod lookup;
pub mod mirror;
pub mod stores;
pub mod watch;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use gangplank_core::model::{Growth, Schedulers, State};

pub use ledger::LedgerWriter;
pub use mirror::{Change, Changes, Mirror};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Watched {
    Nodes,
    Pods,
    PodGroups,
    Queues,
    Topologies,
    DeviceClasses,
    ResourceSlices,
    ResourceClaimTemplates,
    ResourceClaims,
}

impl Watched {
    pub const ALL: [Watched; 9] = [
        Watched::Nodes,
        Watched::Pods,
        Watched::PodGroups,
        Watched::Queues,
        Watched::Topologies,
        Watched::DeviceClasses,
        Watched::ResourceSlices,
        Watched::ResourceClaimTemplates,
        Watched::ResourceClaims,
    ];

    /// Whether it is one of DRA's kinds, which the mirror keeps in its [`dra::Index`].
    pub fn is_dra(self) -> bool {
        matches!(
            self,
            Watched::DeviceClasses
                | Watched::ResourceSlices
                | Watched::ResourceClaimTemplates
                | Watched::ResourceClaims
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Watched::Nodes => "nodes",
            Watched::Pods => "pods",
            Watched::PodGroups => "podgroups",
            Watched::Queues => "queues",
            Watched::Topologies => "topologies",
            Watched::DeviceClasses => "deviceclasses",
            Watched::ResourceSlices => "resourceslices",
            Watched::ResourceClaimTemplates => "resourceclaimtemplates",
            Watched::ResourceClaims => "resourceclaims",
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    state: RwLock<State>,
    /// Woken on every write, for loops that react to changes (admission).
    changed: tokio::sync::Notify,
    /// Woken by the mirror's changes that may want an admission decision ([`Cache::arrived`]).
    arrivals: tokio::sync::Notify,
    /// Counts writes; any number of loops may [`Cache::subscribe`] to it (the controller).
    generation: tokio::sync::watch::Sender<u64>,
    nodes_synced: AtomicBool,
    pods_synced: AtomicBool,
    pod_groups_synced: AtomicBool,
    queues_synced: AtomicBool,
    topologies_synced: AtomicBool,
    /// The DRA kinds, in the order of [`Watched::ALL`].
    dra_synced: [AtomicBool; 4],
    /// The DeviceClasses whose selectors cannot be evaluated, and why: published by the
    /// mirror, its one writer, for the controller to tell the groups that wait for them.
    dra_problems: RwLock<Arc<DraProblems>>,
}

/// DeviceClass name to why it counts no device ([`dra::Index::problems`]).
pub type DraProblems = std::collections::BTreeMap<String, String>;

/// A cheap-to-clone handle on the shared cache: reads and snapshots. Its writers are the one
/// [`Mirror`] and the [`LedgerWriter`].
#[derive(Debug, Clone, Default)]
pub struct Cache {
    inner: Arc<Inner>,
}

impl Cache {
    /// An empty cache and its one mirror writer, which the watches feed.
    pub fn new() -> (Cache, Mirror) {
        Cache::serving(Schedulers::default(), None)
    }

    /// [`Cache::new`] for a cluster whose schedulers serve `schedulers` and that grows as
    /// `growth` says (`None`: it cannot), both set once, here.
    pub fn serving(schedulers: Schedulers, growth: Option<Growth>) -> (Cache, Mirror) {
        let cache = Cache::default();
        {
            let mut state = cache
                .inner
                .state
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            state.set_schedulers(schedulers);
            state.set_growth(growth);
        }
        let mirror = Mirror::new(cache.clone());
        (cache, mirror)
    }

    /// The owner of what Gangplank decides itself: the only way to change it.
    pub fn ledger(&self) -> LedgerWriter {
        LedgerWriter::new(self.clone())
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
        self.read(|s| s.nodes().len())
    }

    pub fn pod_count(&self) -> usize {
        self.read(|s| s.pods().len())
    }

    /// The DeviceClasses whose selectors cannot be evaluated, and why.
    pub fn dra_problems(&self) -> Arc<DraProblems> {
        self.inner
            .dra_problems
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The mirror's publication of [`Cache::dra_problems`], when they changed.
    fn publish_dra_problems(&self, problems: &DraProblems) {
        if *self.dra_problems() != *problems {
            *self
                .inner
                .dra_problems
                .write()
                .unwrap_or_else(PoisonError::into_inner) = Arc::new(problems.clone());
        }
    }

    /// Records that `watched` has completed its initial list.
    fn mark_synced(&self, watched: Watched) {
        self.synced_flag(watched).store(true, Ordering::Release);
    }

    /// A watch of `watched` failed: the cache may miss changes until it lists again.
    fn mark_unsynced(&self, watched: Watched) {
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
            Watched::Topologies => &self.inner.topologies_synced,
            Watched::DeviceClasses => &self.inner.dra_synced[0],
            Watched::ResourceSlices => &self.inner.dra_synced[1],
            Watched::ResourceClaimTemplates => &self.inner.dra_synced[2],
            Watched::ResourceClaims => &self.inner.dra_synced[3],
        }
    }

    /// Runs `f` under the write lock and wakes the loops: the ledger's writes.
    fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let result = f(&mut self.lock());
        self.wake();
        result
    }

    /// Runs `f` under the write lock; wakes the loops only when `f` says it changed something:
    /// the mirror's writes.
    fn write_if_changed<T>(&self, f: impl FnOnce(&mut State) -> (T, bool)) -> T {
        let (result, changed) = f(&mut self.lock());
        if changed {
            self.wake();
        }
        result
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

    /// Like [`Cache::changed`], for the mirror's changes that may want an admission decision
    /// alone: a pod that is new or gated, any change to a node, PodGroup or Queue, a completed
    /// list that deleted something. A placed pod's updates and a pod's deletion do not count:
    /// while nothing waits, they give the admission loop nothing to decide.
    pub async fn arrived(&self) {
        self.inner.arrivals.notified().await;
    }

    fn wake_arrivals(&self) {
        self.inner.arrivals.notify_one();
    }

    /// Every watcher has completed its initial list.
    pub fn is_ready(&self) -> bool {
        self.unsynced().is_empty()
    }
}

/// What `/readyz` checks in `gangplank serve` ([`crate::health`]): the cache's watches, then
/// the stores'.
pub fn unsynced_watches(cache: Cache, stores: Arc<stores::Stores>) -> crate::health::Unsynced {
    Arc::new(move || {
        let mut names: Vec<&'static str> =
            cache.unsynced().into_iter().map(Watched::as_str).collect();
        names.extend(stores.unsynced());
        names
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, PodPhase, Queue};

    #[test]
    fn an_event_that_changes_nothing_the_model_holds_wakes_nobody() {
        let (cache, mut mirror) = Cache::new();
        let key = GroupKey::new("ns", "train");
        mirror.apply_pod_group(PodGroup::new(key.clone(), 2, "default"));
        mirror.apply_node(node("n1"));
        mirror.apply_queue(Queue::new("default"));
        let mut changes = cache.subscribe();
        changes.mark_unchanged();

        mirror.apply_pod_group(PodGroup::new(key.clone(), 2, "default"));
        mirror.apply_node(node("n1"));
        mirror.apply_queue(Queue::new("default"));
        mirror.delete_pod("never-seen");
        mirror.delete_queue("never-seen");
        assert!(
            !changes.has_changed().unwrap(),
            "an unchanged object woke the loops"
        );

        mirror.apply_pod_group(PodGroup::new(key, 3, "default"));
        assert!(
            changes.has_changed().unwrap(),
            "a new gang size is a change"
        );
    }

    #[test]
    fn a_placed_pods_updates_and_deletion_are_no_arrival_but_a_new_or_gated_pod_is() {
        use futures::FutureExt;
        let (cache, mut mirror) = Cache::new();
        let arrived = || cache.arrived().now_or_never().is_some();
        mirror.apply_node(node("n1"));
        assert!(arrived(), "a new node may want a decision");
        mirror.apply_pod(pod("a", None));
        assert!(arrived(), "a new pod may want a decision");
        assert!(!arrived(), "one change, one signal");

        mirror.apply_pod(pod("a", Some("n1")));
        mirror.apply_pod(Pod {
            phase: PodPhase::Running,
            ..pod("a", Some("n1"))
        });
        mirror.delete_pod("a");
        assert!(
            !arrived(),
            "a bind, a status and a deletion want no decision"
        );
        assert!(
            cache.changed().now_or_never().is_some(),
            "they still wake the loops that wait for every change"
        );

        let gated = Pod {
            scheduling_gates: vec![crate::api::labels::ADMISSION_GATE.into()],
            ..pod("b", None)
        };
        mirror.apply_pod(gated.clone());
        assert!(arrived());
        mirror.apply_pod(Pod {
            priority: 10,
            ..gated
        });
        assert!(arrived(), "a gated pod that changes may want a decision");
    }

    fn node(name: &str) -> Node {
        testing::node(name, 4_000, 110)
    }

    fn pod(uid: &str, node: Option<&str>) -> Pod {
        Pod {
            node_name: node.map(Into::into),
            ..testing::pod(uid, 1_000)
        }
    }

    #[test]
    fn applying_twice_replaces_and_deleting_removes() {
        let (cache, mut mirror) = Cache::new();
        mirror.apply_node(node("n1"));
        mirror.apply_node(Node {
            unschedulable: true,
            ..node("n1")
        });
        mirror.apply_pod(pod("u1", None));
        mirror.apply_pod(pod("u1", Some("n1")));
        assert_eq!(cache.node_count(), 1);
        assert_eq!(cache.pod_count(), 1);
        assert!(cache.read(|s| s.nodes()["n1"].unschedulable));
        assert_eq!(
            cache.read(|s| s.pods()["u1"].node_name.clone()),
            Some("n1".into())
        );

        mirror.delete_node("n1");
        mirror.delete_pod("u1");
        mirror.delete_pod("never-there");
        assert_eq!((cache.node_count(), cache.pod_count()), (0, 0));
    }

    #[test]
    fn a_snapshot_does_not_change_when_the_cache_does() {
        let (cache, mut mirror) = Cache::new();
        mirror.apply_node(node("n1"));
        let before = cache.snapshot();
        mirror.apply_node(node("n2"));
        mirror.delete_node("n1");
        assert_eq!(before.nodes().len(), 1);
        assert!(before.nodes().contains_key("n1"));
        assert!(cache.snapshot().nodes().contains_key("n2"));
    }

    #[tokio::test]
    async fn every_subscriber_hears_of_a_write() {
        let (cache, mut mirror) = Cache::new();
        let (mut first, mut second) = (cache.subscribe(), cache.subscribe());
        assert!(!first.has_changed().unwrap());
        mirror.apply_node(node("n1"));
        mirror.apply_node(node("n2"));
        first.changed().await.unwrap();
        second.changed().await.unwrap();
        assert!(!first.has_changed().unwrap(), "two writes, one wake-up");
    }

    #[test]
    fn the_cache_is_ready_only_when_every_watcher_synced() {
        let (cache, mut mirror) = Cache::new();
        assert_eq!(cache.unsynced(), Watched::ALL);
        for dra in Watched::ALL.into_iter().filter(|w| w.is_dra()) {
            mirror.apply(Change::Listed(dra, None));
        }
        mirror.apply(Change::Listed(Watched::Pods, None));
        mirror.apply(Change::Listed(Watched::PodGroups, None));
        mirror.apply(Change::Listed(Watched::Queues, None));
        mirror.apply(Change::Listed(Watched::Topologies, None));
        assert_eq!(cache.unsynced(), vec![Watched::Nodes]);
        mirror.apply(Change::Listed(Watched::Nodes, None));
        assert!(cache.unsynced().is_empty());
    }
}
