//! The mirror's one writer: the task that applies watch events to the model. The watches
//! (nodes, pods, Topologies and the DRA kinds in [`super::watch`], PodGroups and Queues in
//! [`super::stores`]) convert what they see into [`Change`]s and send them here;
//! [`Mirror::run`] applies them in arrival order, a batch at a time under one write lock, and
//! wakes the loops once per batch that changed anything (and [`super::Cache::arrived`] once per
//! batch with a change that may want an admission decision). A change that leaves the model as
//! it was (a status write, a heartbeat) wakes nobody. A kind is marked synced (readiness) when the change that ends its
//! list is applied, not when the list was read, so `/readyz` never runs ahead of the model.
//! The DRA objects go to the mirror's own [`dra::Index`], taken in before the write lock (their
//! CEL selectors are evaluated there), which then re-applies the nodes and pods whose device
//! counts they changed.

use std::collections::HashSet;

use gangplank_core::model::{GroupKey, Node, Pod, PodGroup, Queue, State, Topology};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::dra::{self, ClaimRef};
use super::{Cache, Watched};
use crate::metrics;

/// How many changes one write lock applies at most: a long list is applied in slices, so a
/// filter or a bind waits for one slice, not for the list.
pub const BATCH: usize = 256;

/// One watch event, converted to the model.
#[derive(Debug, Clone)]
pub enum Change {
    Node(Node),
    NodeGone(String),
    /// A pod, and the claims it names (empty for most pods).
    Pod(Pod, Vec<ClaimRef>),
    PodGone(String),
    PodGroup(PodGroup),
    PodGroupGone(GroupKey),
    Queue(Queue),
    QueueGone(String),
    Topology(Topology),
    TopologyGone(String),
    /// A DeviceClass, ResourceSlice, ResourceClaimTemplate or ResourceClaim.
    Dra(dra::Object),
    /// A list of the kind completed and named these keys (see [`Mirror::keys`]): whatever
    /// else of the kind the model holds is gone, and the kind is synced. `None`: the list's
    /// start was not seen, so nothing is deleted.
    Listed(Watched, Option<HashSet<String>>),
    /// A watch of the kind failed: the model may miss changes until it lists again.
    Failed(Watched),
}

/// Where the watches send their changes; cheap to clone.
#[derive(Debug, Clone)]
pub struct Changes(mpsc::UnboundedSender<Change>);

impl Changes {
    /// Queues `change` for the mirror (dropped if the mirror has stopped, at shutdown).
    pub fn send(&self, change: Change) {
        let _ = self.0.send(change);
    }
}

/// The one writer of the model's API mirror (see the module docs). Not `Clone`: there is one
/// per [`Cache`], made with it by [`Cache::new`].
#[derive(Debug)]
pub struct Mirror {
    cache: Cache,
    sender: Changes,
    receiver: mpsc::UnboundedReceiver<Change>,
    dra: dra::Index,
}

impl Mirror {
    pub(super) fn new(cache: Cache) -> Mirror {
        let (sender, receiver) = mpsc::unbounded_channel();
        Mirror {
            cache,
            sender: Changes(sender),
            receiver,
            dra: dra::Index::default(),
        }
    }

    /// A sender for a watch.
    pub fn changes(&self) -> Changes {
        self.sender.clone()
    }

    /// Applies the changes the watches send until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = self.receiver.recv_many(&mut batch, BATCH) => {}
            }
            self.apply_all(batch.drain(..));
        }
    }

    /// Applies every change sent so far; for tests, which drive the watches by hand.
    pub fn drain(&mut self) {
        let mut batch = Vec::new();
        while let Ok(change) = self.receiver.try_recv() {
            batch.push(change);
        }
        self.apply_all(batch);
    }

    pub fn apply(&mut self, change: Change) {
        self.apply_all([change]);
    }

    pub fn apply_node(&mut self, node: Node) {
        self.apply(Change::Node(node));
    }

    pub fn apply_pod(&mut self, pod: Pod) {
        self.apply(Change::Pod(pod, Vec::new()));
    }

    pub fn apply_pod_group(&mut self, group: PodGroup) {
        self.apply(Change::PodGroup(group));
    }

    pub fn apply_queue(&mut self, queue: Queue) {
        self.apply(Change::Queue(queue));
    }

    pub fn delete_node(&mut self, name: &str) {
        self.apply(Change::NodeGone(name.to_owned()));
    }

    pub fn delete_pod(&mut self, uid: &str) {
        self.apply(Change::PodGone(uid.to_owned()));
    }

    pub fn delete_queue(&mut self, name: &str) {
        self.apply(Change::QueueGone(name.to_owned()));
    }

    /// Applies `changes` in order under one write lock; wakes the loops if any changed the
    /// model (and the admission loop's [`Cache::arrived`] if any may want a decision); then
    /// marks the kinds whose list ended synced (or failed, unsynced).
    pub fn apply_all(&mut self, changes: impl IntoIterator<Item = Change>) {
        let mut ends: Vec<(Watched, bool)> = Vec::new();
        let mut touched: Vec<Watched> = Vec::new();
        let mut arrived = false;
        let steps = self.take_dra(changes);
        self.cache.publish_dra_problems(self.dra.problems());
        let index = &mut self.dra;
        let counts = self.cache.write_if_changed(|s| {
            let mut changed = false;
            for step in steps {
                let change = match step {
                    Step::Dra(kind, effect) => {
                        if !touched.contains(&kind) {
                            touched.push(kind);
                        }
                        let this = index.carry(effect, s);
                        changed |= this;
                        arrived |= this;
                        continue;
                    }
                    Step::Model(change) => change,
                };
                let kind = change.kind();
                if !touched.contains(&kind) {
                    touched.push(kind);
                }
                let arrival = match &change {
                    Change::Pod(pod, _) => {
                        !pod.scheduling_gates.is_empty() || !s.pods().contains_key(&pod.uid)
                    }
                    Change::PodGone(_) | Change::Failed(_) => false,
                    _ => true,
                };
                let this = match change {
                    Change::Node(mut node) => {
                        index.count_on(&mut node);
                        s.apply_node(node)
                    }
                    Change::NodeGone(name) => s.delete_node(&name),
                    Change::Pod(mut pod, claims) => {
                        let others = index.claiming(&mut pod, claims);
                        s.apply_pod(pod) | index.refresh_pods(&others, s)
                    }
                    Change::PodGone(uid) => {
                        let heirs = index.pod_gone(&uid);
                        s.delete_pod(&uid) | index.refresh_pods(&heirs, s)
                    }
                    Change::PodGroup(group) => s.apply_pod_group(group),
                    Change::PodGroupGone(key) => s.delete_pod_group(&key),
                    Change::Queue(queue) => s.apply_queue(queue),
                    Change::QueueGone(name) => s.delete_queue(&name),
                    Change::Topology(topology) => s.apply_topology(topology),
                    Change::TopologyGone(name) => s.delete_topology(&name),
                    // Taken into the index by `take_dra` before the lock.
                    Change::Dra(_) => false,
                    Change::Listed(kind, seen) => {
                        ends.push((kind, true));
                        let gone: Vec<String> = match seen {
                            Some(seen) => {
                                Self::keys(s, kind).filter(|k| !seen.contains(k)).collect()
                            }
                            None => Vec::new(),
                        };
                        let deleted = gone
                            .iter()
                            .fold(false, |any, key| delete(s, kind, key) | any);
                        let heirs = match kind {
                            Watched::Pods => index.retain_pods(s),
                            _ => Vec::new(),
                        };
                        deleted | index.refresh_pods(&heirs, s)
                    }
                    Change::Failed(kind) => {
                        ends.push((kind, false));
                        false
                    }
                };
                changed |= this;
                arrived |= this && arrival;
            }
            let counts: Vec<(Watched, usize)> = touched
                .iter()
                .map(|&kind| (kind, count(s, index, kind)))
                .collect();
            (counts, changed)
        });
        if arrived {
            self.cache.wake_arrivals();
        }
        for (kind, listed) in ends {
            if !listed {
                self.cache.mark_unsynced(kind);
                continue;
            }
            if !self.cache.is_synced(kind) {
                let count = counts.iter().find(|(k, _)| *k == kind).map(|(_, n)| *n);
                tracing::info!(kind = kind.as_str(), count, "cache synced");
            }
            self.cache.mark_synced(kind);
        }
        for (kind, count) in counts {
            match gauge(kind) {
                Some(name) => ::metrics::gauge!(name).set(count as f64),
                None => ::metrics::gauge!(metrics::CACHE_DRA_OBJECTS, "kind" => kind.as_str())
                    .set(count as f64),
            }
        }
    }

    /// The keys the model holds of `kind`, as its list names them: node name, pod UID,
    /// `namespace/name` of a PodGroup, Queue or Topology name (the DRA kinds are in the
    /// mirror's own index).
    pub fn keys(state: &State, kind: Watched) -> Box<dyn Iterator<Item = String> + '_> {
        match kind {
            Watched::Nodes => Box::new(state.nodes().keys().cloned()),
            Watched::Pods => Box::new(state.pods().keys().cloned()),
            Watched::PodGroups => Box::new(pod_groups(state).map(GroupKey::to_string)),
            Watched::Queues => Box::new(state.queues().keys().cloned()),
            Watched::Topologies => Box::new(state.topologies().keys().cloned()),
            _ => Box::new(std::iter::empty()),
        }
    }

    /// The DRA objects' index, for tests.
    #[cfg(test)]
    pub fn dra(&self) -> &dra::Index {
        &self.dra
    }
}

/// A change as the mirror applies it under the write lock: the DRA objects already taken into
/// the index ([`Mirror::take_dra`]), with what they changed. As large as a [`Change`], which
/// the mirror moves by value everywhere: boxing would cost an allocation per change.
#[allow(clippy::large_enum_variant)]
enum Step {
    Model(Change),
    Dra(Watched, dra::Effect),
}

impl Mirror {
    /// Takes the DRA objects among `changes` into the index, in order and before the write
    /// lock, since evaluating a class's selectors on every device may take a while; a list of
    /// a DRA kind deletes what it did not name here too, so that it is not applied out of
    /// order with the objects that follow it.
    fn take_dra(&mut self, changes: impl IntoIterator<Item = Change>) -> Vec<Step> {
        let mut steps = Vec::new();
        for change in changes {
            match change {
                Change::Dra(object) => {
                    let kind = object.kind();
                    steps.push(Step::Dra(kind, self.dra.take(object)));
                }
                Change::Listed(kind, Some(seen)) if kind.is_dra() => {
                    for key in self.dra.keys(kind) {
                        if !seen.contains(&key)
                            && let Some(gone) = dra::Index::gone(kind, key)
                        {
                            steps.push(Step::Dra(kind, self.dra.take(gone)));
                        }
                    }
                    steps.push(Step::Model(Change::Listed(kind, None)));
                }
                other => steps.push(Step::Model(other)),
            }
        }
        steps
    }
}

impl Change {
    /// The kind of object it is about.
    pub fn kind(&self) -> Watched {
        match self {
            Change::Node(_) | Change::NodeGone(_) => Watched::Nodes,
            Change::Pod(..) | Change::PodGone(_) => Watched::Pods,
            Change::PodGroup(_) | Change::PodGroupGone(_) => Watched::PodGroups,
            Change::Queue(_) | Change::QueueGone(_) => Watched::Queues,
            Change::Topology(_) | Change::TopologyGone(_) => Watched::Topologies,
            Change::Dra(object) => object.kind(),
            Change::Listed(kind, _) | Change::Failed(kind) => *kind,
        }
    }
}

fn count(state: &State, index: &dra::Index, kind: Watched) -> usize {
    match kind {
        Watched::Nodes => state.nodes().len(),
        Watched::Pods => state.pods().len(),
        Watched::PodGroups => pod_groups(state).count(),
        Watched::Queues => state.queues().len(),
        Watched::Topologies => state.topologies().len(),
        _ => index.count(kind),
    }
}

/// The groups whose PodGroup the model holds (a group may have members and no PodGroup yet).
fn pod_groups(state: &State) -> impl Iterator<Item = &GroupKey> {
    state
        .groups()
        .iter()
        .filter(|(_, g)| g.spec.is_some())
        .map(|(key, _)| key)
}

fn delete(state: &mut State, kind: Watched, key: &str) -> bool {
    match kind {
        Watched::Nodes => state.delete_node(key),
        Watched::Pods => state.delete_pod(key),
        Watched::PodGroups => key
            .split_once('/')
            .is_some_and(|(ns, name)| state.delete_pod_group(&GroupKey::new(ns, name))),
        Watched::Queues => state.delete_queue(key),
        Watched::Topologies => state.delete_topology(key),
        _ => false,
    }
}

/// The gauge of `kind`'s count; `None` for the DRA kinds, counted by one labelled gauge.
fn gauge(kind: Watched) -> Option<&'static str> {
    match kind {
        Watched::Nodes => Some(metrics::CACHE_NODES),
        Watched::Pods => Some(metrics::CACHE_PODS),
        Watched::PodGroups => Some(metrics::CACHE_POD_GROUPS),
        Watched::Queues => Some(metrics::CACHE_QUEUES),
        Watched::Topologies => Some(metrics::CACHE_TOPOLOGIES),
        _ => None,
    }
}
