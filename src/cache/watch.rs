//! The watch loops that feed the cache from the API server.
//!
//! One kube-runtime watcher per kind: nodes, pods, Topologies and the four DRA kinds
//! (DeviceClasses, ResourceSlices, ResourceClaimTemplates, ResourceClaims: [`super::dra`]) here
//! ([`run`]), each converted to the little the model counts; PodGroups and Queues come
//! from the watches of [`crate::cache::stores`], which the controller and webhooks need anyway,
//! through a [`Relay`] each. The full API objects are converted at once and sent to the one
//! writer, the [`super::Mirror`] task: the cache keeps only its small model. A (re)list
//! arrives as `Init`, `InitApply`…, `InitDone`; objects are sent as they come, and `InitDone`
//! sends the keys the list named, so that the mirror deletes whatever it did not mention (a
//! re-list after a dropped watch leaves no ghosts) and marks the kind synced (readiness).
//!
//! Every watch runs through [`relisting`]: after any error (the API server restarting, a
//! connection dropped) the kind is marked not synced, so `/readyz` and the loops that wait for
//! synced caches see it, and the watch starts again with a fresh list after a short backoff
//! ([`BACKOFF_MIN`] doubling to [`BACKOFF_MAX`]). A watch resumed from its last
//! resourceVersion, as kube's own retry does, would give no sign of when the cache is current
//! again; a list ends with `InitDone`.

use std::collections::HashSet;
use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Change, Changes, Error, Watched, convert, dra};
use gangplank_core::model::GroupKey;
use k8s_openapi::api::resource::v1 as resource;

/// An API kind the cache mirrors.
pub trait Mirrored: Resource + Clone + DeserializeOwned + Debug + Send + 'static {
    const WATCHED: Watched;
    /// The key its list names it by ([`super::Mirror::keys`]): node name, pod UID.
    fn key(&self) -> Option<String>;
    /// The object, converted to the model.
    fn change(&self) -> Result<Change, Error>;
    /// The object is gone.
    fn gone(&self) -> Option<Change>;
}

impl Mirrored for core::Node {
    const WATCHED: Watched = Watched::Nodes;
    fn key(&self) -> Option<String> {
        self.metadata.name.clone()
    }
    fn change(&self) -> Result<Change, Error> {
        Ok(Change::Node(convert::node(self)?))
    }
    fn gone(&self) -> Option<Change> {
        self.key().map(Change::NodeGone)
    }
}

impl Mirrored for core::Pod {
    const WATCHED: Watched = Watched::Pods;
    fn key(&self) -> Option<String> {
        self.metadata.uid.clone()
    }
    fn change(&self) -> Result<Change, Error> {
        let claims = self.spec.as_ref().map(dra::claims_of).unwrap_or_default();
        Ok(Change::Pod(convert::pod(self)?, claims))
    }
    fn gone(&self) -> Option<Change> {
        self.key().map(Change::PodGone)
    }
}

impl Mirrored for crate::api::PodGroup {
    const WATCHED: Watched = Watched::PodGroups;
    fn key(&self) -> Option<String> {
        group_key(self).map(|key| key.to_string())
    }
    fn change(&self) -> Result<Change, Error> {
        Ok(Change::PodGroup(convert::pod_group(self)?))
    }
    fn gone(&self) -> Option<Change> {
        group_key(self).map(Change::PodGroupGone)
    }
}

/// The model's key of a PodGroup: its namespace and name.
fn group_key(group: &crate::api::PodGroup) -> Option<GroupKey> {
    Some(GroupKey::new(
        group.metadata.namespace.as_deref()?,
        group.metadata.name.as_deref()?,
    ))
}

impl Mirrored for crate::api::Queue {
    const WATCHED: Watched = Watched::Queues;
    fn key(&self) -> Option<String> {
        self.metadata.name.clone()
    }
    fn change(&self) -> Result<Change, Error> {
        Ok(Change::Queue(convert::queue(self)?))
    }
    fn gone(&self) -> Option<Change> {
        self.key().map(Change::QueueGone)
    }
}

impl Mirrored for crate::api::Topology {
    const WATCHED: Watched = Watched::Topologies;
    fn key(&self) -> Option<String> {
        self.metadata.name.clone()
    }
    fn change(&self) -> Result<Change, Error> {
        Ok(Change::Topology(convert::topology(self)))
    }
    fn gone(&self) -> Option<Change> {
        self.key().map(Change::TopologyGone)
    }
}

impl Mirrored for resource::DeviceClass {
    const WATCHED: Watched = Watched::DeviceClasses;
    fn key(&self) -> Option<String> {
        self.metadata.name.clone()
    }
    fn change(&self) -> Result<Change, Error> {
        let name = self.key().unwrap_or_default();
        Ok(Change::Dra(dra::Object::Class(name, dra::class(self))))
    }
    fn gone(&self) -> Option<Change> {
        self.key().map(|k| Change::Dra(dra::Object::ClassGone(k)))
    }
}

impl Mirrored for resource::ResourceSlice {
    const WATCHED: Watched = Watched::ResourceSlices;
    fn key(&self) -> Option<String> {
        self.metadata.name.clone()
    }
    fn change(&self) -> Result<Change, Error> {
        let name = self.key().unwrap_or_default();
        Ok(Change::Dra(dra::Object::Slice(name, dra::slice(self))))
    }
    fn gone(&self) -> Option<Change> {
        self.key().map(|k| Change::Dra(dra::Object::SliceGone(k)))
    }
}

impl Mirrored for resource::ResourceClaimTemplate {
    const WATCHED: Watched = Watched::ResourceClaimTemplates;
    fn key(&self) -> Option<String> {
        namespaced_key(&self.metadata)
    }
    fn change(&self) -> Result<Change, Error> {
        let key = self.key().unwrap_or_default();
        Ok(Change::Dra(dra::Object::Template(
            key,
            dra::asks(self.spec.as_ref().and_then(|t| t.spec.as_ref())),
        )))
    }
    fn gone(&self) -> Option<Change> {
        self.key()
            .map(|k| Change::Dra(dra::Object::TemplateGone(k)))
    }
}

impl Mirrored for resource::ResourceClaim {
    const WATCHED: Watched = Watched::ResourceClaims;
    fn key(&self) -> Option<String> {
        namespaced_key(&self.metadata)
    }
    fn change(&self) -> Result<Change, Error> {
        let key = self.key().unwrap_or_default();
        Ok(Change::Dra(dra::Object::Claim(
            key,
            dra::asks(self.spec.as_ref()),
        )))
    }
    fn gone(&self) -> Option<Change> {
        self.key().map(|k| Change::Dra(dra::Object::ClaimGone(k)))
    }
}

/// `namespace/name`, how the DRA index keys templates and claims.
fn namespaced_key(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    Some(format!(
        "{}/{}",
        meta.namespace.as_deref()?,
        meta.name.as_deref()?
    ))
}

/// Watches nodes, pods, Topologies and the DRA kinds cluster-wide until `shutdown` is cancelled,
/// sending what changes to the mirror.
pub async fn run(client: Client, changes: Changes, shutdown: CancellationToken) {
    tokio::join!(
        watch(
            Api::<core::Node>::all(client.clone()),
            changes.clone(),
            shutdown.clone()
        ),
        watch(
            Api::<core::Pod>::all(client.clone()),
            changes.clone(),
            shutdown.clone()
        ),
        watch(
            Api::<crate::api::Topology>::all(client.clone()),
            changes.clone(),
            shutdown.clone()
        ),
        watch(
            Api::<resource::DeviceClass>::all(client.clone()),
            changes.clone(),
            shutdown.clone()
        ),
        watch(
            Api::<resource::ResourceSlice>::all(client.clone()),
            changes.clone(),
            shutdown.clone()
        ),
        watch(
            Api::<resource::ResourceClaimTemplate>::all(client.clone()),
            changes.clone(),
            shutdown.clone()
        ),
        watch(
            Api::<resource::ResourceClaim>::all(client),
            changes,
            shutdown
        ),
    );
}

/// First wait before a watch that failed starts again.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait before a watch that failed starts again.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

async fn watch<K: Mirrored>(api: Api<K>, changes: Changes, shutdown: CancellationToken) {
    let mut relay = Relay::<K>::new(changes.clone());
    relisting(
        K::WATCHED.as_str(),
        || watcher(api.clone(), watcher::Config::default()),
        &shutdown,
        |event| relay.handle(event),
        || changes.send(Change::Failed(K::WATCHED)),
    )
    .await;
}

/// Runs the watch streams `start` makes until `shutdown`, handing every event to `on_event`.
/// After an error it calls `on_error`, waits (see the module docs) and starts a new stream,
/// which lists again.
pub async fn relisting<K, S>(
    kind: &str,
    start: impl Fn() -> S,
    shutdown: &CancellationToken,
    mut on_event: impl FnMut(Event<K>),
    mut on_error: impl FnMut(),
) where
    S: futures::Stream<Item = watcher::Result<Event<K>>>,
{
    let mut backoff = BACKOFF_MIN;
    loop {
        let mut stream = std::pin::pin!(start());
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                next = stream.next() => next,
            };
            match next {
                Some(Ok(event)) => {
                    if matches!(event, Event::InitDone) {
                        backoff = BACKOFF_MIN;
                    }
                    on_event(event);
                }
                Some(Err(e)) => {
                    tracing::warn!(kind, error = %e, retry_in = ?backoff, "failed to watch; listing again");
                    break;
                }
                None => {
                    tracing::warn!(kind, retry_in = ?backoff, "watch stream ended; listing again");
                    break;
                }
            }
        }
        on_error();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Turns the watch events of one kind into the mirror's changes.
pub struct Relay<K> {
    changes: Changes,
    /// Keys seen since the last `Init`, while a list is in progress.
    listing: Option<HashSet<String>>,
    _kind: std::marker::PhantomData<fn(K)>,
}

impl<K: Mirrored> Relay<K> {
    pub fn new(changes: Changes) -> Self {
        Self {
            changes,
            listing: None,
            _kind: std::marker::PhantomData,
        }
    }

    pub fn handle(&mut self, event: Event<K>) {
        match event {
            Event::Init => self.listing = Some(HashSet::new()),
            Event::InitApply(obj) => {
                if let (Some(seen), Some(key)) = (self.listing.as_mut(), obj.key()) {
                    seen.insert(key);
                }
                self.apply(&obj);
            }
            Event::InitDone => {
                let seen = self.listing.take();
                self.changes.send(Change::Listed(K::WATCHED, seen));
            }
            Event::Apply(obj) => self.apply(&obj),
            Event::Delete(obj) => {
                if let Some(gone) = obj.gone() {
                    self.changes.send(gone);
                }
            }
        }
    }

    fn apply(&self, obj: &K) {
        match obj.change() {
            Ok(change) => self.changes.send(change),
            Err(e) => tracing::warn!(kind = K::WATCHED.as_str(), error = %e, "ignoring object"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{Cache, Mirror};

    fn keys(cache: &Cache, kind: Watched) -> Vec<String> {
        cache.read(|s| Mirror::keys(s, kind).collect())
    }

    fn node(name: &str) -> core::Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4"}}
        }))
        .unwrap()
    }

    fn pod(uid: &str) -> core::Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("p-{uid}"), "namespace": "ns", "uid": uid},
            "spec": {"containers": []}
        }))
        .unwrap()
    }

    #[test]
    fn the_first_complete_list_marks_the_kind_synced() {
        let (cache, mut mirror) = Cache::new();
        let mut nodes = Relay::<core::Node>::new(mirror.changes());
        nodes.handle(Event::Init);
        nodes.handle(Event::InitApply(node("n1")));
        mirror.drain();
        assert!(!cache.is_synced(Watched::Nodes));
        nodes.handle(Event::InitDone);
        mirror.drain();
        assert!(cache.is_synced(Watched::Nodes));
        assert!(!cache.is_synced(Watched::Pods));
        assert_eq!(cache.node_count(), 1);
    }

    #[test]
    fn a_relist_deletes_what_disappeared_while_the_watch_was_down() {
        let (cache, mut mirror) = Cache::new();
        let mut pods = Relay::<core::Pod>::new(mirror.changes());
        for event in [
            Event::Init,
            Event::InitApply(pod("a")),
            Event::InitApply(pod("b")),
            Event::InitDone,
            Event::Init,
            Event::InitApply(pod("b")),
            Event::InitApply(pod("c")),
            Event::InitDone,
        ] {
            pods.handle(event);
        }
        mirror.drain();
        let mut uids = keys(&cache, Watched::Pods);
        uids.sort();
        assert_eq!(uids, vec!["b".to_string(), "c".to_string()]);
    }

    #[test]
    fn watch_deltas_apply_and_delete() {
        let (cache, mut mirror) = Cache::new();
        let mut nodes = Relay::<core::Node>::new(mirror.changes());
        nodes.handle(Event::Apply(node("n1")));
        nodes.handle(Event::Apply(node("n2")));
        nodes.handle(Event::Delete(node("n1")));
        mirror.drain();
        assert_eq!(keys(&cache, Watched::Nodes), vec!["n2".to_string()]);
    }

    #[test]
    fn an_unconvertible_object_is_skipped_without_stopping_the_watch() {
        let (cache, mut mirror) = Cache::new();
        let mut pods = Relay::<core::Pod>::new(mirror.changes());
        let mut no_uid = pod("x");
        no_uid.metadata.uid = None;
        pods.handle(Event::Apply(no_uid));
        pods.handle(Event::Apply(pod("y")));
        mirror.drain();
        assert_eq!(cache.pod_count(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_watch_error_the_kind_is_not_synced_until_a_fresh_list_completes() {
        let (cache, mirror) = Cache::new();
        let changes = mirror.changes();
        let mirror = std::cell::RefCell::new(mirror);
        let shutdown = CancellationToken::new();
        let lists = std::sync::Mutex::new(vec![
            vec![
                Ok(Event::Init),
                Ok(Event::InitApply(pod("b"))),
                Ok(Event::InitApply(pod("c"))),
                Ok(Event::InitDone),
            ],
            vec![
                Ok(Event::Init),
                Ok(Event::InitApply(pod("a"))),
                Ok(Event::InitDone),
                Err(watcher::Error::NoResourceVersion),
            ],
        ]);
        let seen_unsynced = std::cell::Cell::new(false);
        let mut relay = Relay::<core::Pod>::new(changes.clone());
        let starts = std::sync::atomic::AtomicUsize::new(0);
        relisting(
            "pods",
            || {
                starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let list = lists.lock().unwrap().pop().unwrap_or_else(|| {
                    shutdown.cancel();
                    Vec::new()
                });
                futures::stream::iter(list).chain(futures::stream::pending())
            },
            &shutdown,
            |event| {
                let done = matches!(event, Event::InitDone);
                relay.handle(event);
                mirror.borrow_mut().drain();
                if done && cache.is_synced(Watched::Pods) && seen_unsynced.get() {
                    shutdown.cancel();
                }
            },
            || {
                changes.send(Change::Failed(Watched::Pods));
                mirror.borrow_mut().drain();
                seen_unsynced.set(!cache.is_synced(Watched::Pods));
            },
        )
        .await;
        assert_eq!(starts.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert!(seen_unsynced.get(), "the error marked the pods not synced");
        assert!(
            cache.is_synced(Watched::Pods),
            "the second list synced them again"
        );
        let mut uids = keys(&cache, Watched::Pods);
        uids.sort();
        assert_eq!(
            uids,
            vec!["b".to_string(), "c".to_string()],
            "no ghost of a"
        );
    }
}
