//! The watch loops that feed the cache from the API server.
//!
//! One kube-runtime watcher per kind: nodes and pods here ([`run`]); PodGroups and Queues come
//! from the watches of [`crate::cache::stores`], which the controller and webhooks need anyway,
//! through a [`Mirror`] each. The full API objects are converted and dropped at once: the
//! cache keeps only its small model. A (re)list arrives as `Init`, `InitApply`…, `InitDone`;
//! objects are applied as they come, and at `InitDone` whatever the list did not mention is
//! deleted, so a re-list after a dropped watch leaves no ghosts. `InitDone` marks the kind
//! synced (readiness).
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

use super::{Cache, Error, Watched, convert};
use crate::metrics;
use gangplank_core::model::GroupKey;

/// An API kind the cache mirrors.
pub trait Mirrored: Resource + Clone + DeserializeOwned + Debug + Send + 'static {
    const WATCHED: Watched;
    /// The gauge that counts this kind in the cache.
    const GAUGE: &'static str;
    /// The cache's key for an object: node name, pod UID.
    fn key(&self) -> Option<String>;
    fn apply(&self, cache: &Cache) -> Result<(), Error>;
    fn delete(cache: &Cache, key: &str);
    fn keys(cache: &Cache) -> Vec<String>;
    fn count(cache: &Cache) -> usize;
}

impl Mirrored for core::Node {
    const WATCHED: Watched = Watched::Nodes;
    const GAUGE: &'static str = metrics::CACHE_NODES;
    fn key(&self) -> Option<String> {
        self.metadata.name.clone()
    }
    fn apply(&self, cache: &Cache) -> Result<(), Error> {
        cache.apply_node(convert::node(self)?);
        Ok(())
    }
    fn delete(cache: &Cache, key: &str) {
        cache.delete_node(key);
    }
    fn keys(cache: &Cache) -> Vec<String> {
        cache.read(|s| s.nodes.keys().cloned().collect())
    }
    fn count(cache: &Cache) -> usize {
        cache.node_count()
    }
}

impl Mirrored for core::Pod {
    const WATCHED: Watched = Watched::Pods;
    const GAUGE: &'static str = metrics::CACHE_PODS;
    fn key(&self) -> Option<String> {
        self.metadata.uid.clone()
    }
    fn apply(&self, cache: &Cache) -> Result<(), Error> {
        cache.apply_pod(convert::pod(self)?);
        Ok(())
    }
    fn delete(cache: &Cache, key: &str) {
        cache.delete_pod(key);
    }
    fn keys(cache: &Cache) -> Vec<String> {
        cache.read(|s| s.pods.keys().cloned().collect())
    }
    fn count(cache: &Cache) -> usize {
        cache.pod_count()
    }
}

impl Mirrored for crate::api::PodGroup {
    const WATCHED: Watched = Watched::PodGroups;
    const GAUGE: &'static str = metrics::CACHE_POD_GROUPS;
    fn key(&self) -> Option<String> {
        Some(format!(
            "{}/{}",
            self.metadata.namespace.as_deref()?,
            self.metadata.name.as_deref()?
        ))
    }
    fn apply(&self, cache: &Cache) -> Result<(), Error> {
        cache.apply_pod_group(convert::pod_group(self)?);
        Ok(())
    }
    fn delete(cache: &Cache, key: &str) {
        if let Some((namespace, name)) = key.split_once('/') {
            cache.delete_pod_group(&GroupKey::new(namespace, name));
        }
    }
    fn keys(cache: &Cache) -> Vec<String> {
        cache.read(|s| {
            s.groups
                .iter()
                .filter(|(_, g)| g.spec.is_some())
                .map(|(k, _)| k.to_string())
                .collect()
        })
    }
    fn count(cache: &Cache) -> usize {
        cache.read(|s| s.groups.values().filter(|g| g.spec.is_some()).count())
    }
}

impl Mirrored for crate::api::Queue {
    const WATCHED: Watched = Watched::Queues;
    const GAUGE: &'static str = metrics::CACHE_QUEUES;
    fn key(&self) -> Option<String> {
        self.metadata.name.clone()
    }
    fn apply(&self, cache: &Cache) -> Result<(), Error> {
        cache.apply_queue(convert::queue(self)?);
        Ok(())
    }
    fn delete(cache: &Cache, key: &str) {
        cache.delete_queue(key);
    }
    fn keys(cache: &Cache) -> Vec<String> {
        cache.read(|s| s.queues.keys().cloned().collect())
    }
    fn count(cache: &Cache) -> usize {
        cache.read(|s| s.queues.len())
    }
}

/// Watches nodes and pods cluster-wide until `shutdown` is cancelled.
pub async fn run(client: Client, cache: Cache, shutdown: CancellationToken) {
    tokio::join!(
        watch(
            Api::<core::Node>::all(client.clone()),
            cache.clone(),
            shutdown.clone()
        ),
        watch(Api::<core::Pod>::all(client), cache, shutdown),
    );
}

/// First wait before a watch that failed starts again.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait before a watch that failed starts again.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

async fn watch<K: Mirrored>(api: Api<K>, cache: Cache, shutdown: CancellationToken) {
    let mut mirror = Mirror::<K>::new(cache.clone());
    relisting(
        K::WATCHED.as_str(),
        || watcher(api.clone(), watcher::Config::default()),
        &shutdown,
        |event| mirror.handle(event),
        || cache.mark_unsynced(K::WATCHED),
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

/// Applies watch events of one kind to the cache.
pub struct Mirror<K> {
    cache: Cache,
    /// Keys seen since the last `Init`, while a list is in progress.
    listing: Option<HashSet<String>>,
    _kind: std::marker::PhantomData<fn(K)>,
}

impl<K: Mirrored> Mirror<K> {
    pub fn new(cache: Cache) -> Self {
        Self {
            cache,
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
                if let Some(seen) = self.listing.take() {
                    for key in K::keys(&self.cache) {
                        if !seen.contains(&key) {
                            K::delete(&self.cache, &key);
                        }
                    }
                }
                if !self.cache.is_synced(K::WATCHED) {
                    tracing::info!(
                        kind = K::WATCHED.as_str(),
                        count = K::count(&self.cache),
                        "cache synced"
                    );
                }
                self.cache.mark_synced(K::WATCHED);
            }
            Event::Apply(obj) => self.apply(&obj),
            Event::Delete(obj) => {
                if let Some(key) = obj.key() {
                    K::delete(&self.cache, &key);
                }
            }
        }
        ::metrics::gauge!(K::GAUGE).set(K::count(&self.cache) as f64);
    }

    fn apply(&self, obj: &K) {
        if let Err(e) = obj.apply(&self.cache) {
            tracing::warn!(kind = K::WATCHED.as_str(), error = %e, "ignoring object");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let cache = Cache::new();
        let mut nodes = Mirror::<core::Node>::new(cache.clone());
        nodes.handle(Event::Init);
        nodes.handle(Event::InitApply(node("n1")));
        assert!(!cache.is_synced(Watched::Nodes));
        nodes.handle(Event::InitDone);
        assert!(cache.is_synced(Watched::Nodes));
        assert!(!cache.is_synced(Watched::Pods));
        assert_eq!(cache.node_count(), 1);
    }

    #[test]
    fn a_relist_deletes_what_disappeared_while_the_watch_was_down() {
        let cache = Cache::new();
        let mut pods = Mirror::<core::Pod>::new(cache.clone());
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
        let mut uids = <core::Pod as Mirrored>::keys(&cache);
        uids.sort();
        assert_eq!(uids, vec!["b".to_string(), "c".to_string()]);
    }

    #[test]
    fn watch_deltas_apply_and_delete() {
        let cache = Cache::new();
        let mut nodes = Mirror::<core::Node>::new(cache.clone());
        nodes.handle(Event::Apply(node("n1")));
        nodes.handle(Event::Apply(node("n2")));
        nodes.handle(Event::Delete(node("n1")));
        assert_eq!(
            <core::Node as Mirrored>::keys(&cache),
            vec!["n2".to_string()]
        );
    }

    #[test]
    fn an_unconvertible_object_is_skipped_without_stopping_the_watch() {
        let cache = Cache::new();
        let mut pods = Mirror::<core::Pod>::new(cache.clone());
        let mut no_uid = pod("x");
        no_uid.metadata.uid = None;
        pods.handle(Event::Apply(no_uid));
        pods.handle(Event::Apply(pod("y")));
        assert_eq!(cache.pod_count(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_watch_error_the_kind_is_not_synced_until_a_fresh_list_completes() {
        let cache = Cache::new();
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
        let mut mirror = Mirror::<core::Pod>::new(cache.clone());
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
                mirror.handle(event);
                if done && cache.is_synced(Watched::Pods) && seen_unsynced.get() {
                    shutdown.cancel();
                }
            },
            || {
                cache.mark_unsynced(Watched::Pods);
                seen_unsynced.set(true);
            },
        )
        .await;
        assert_eq!(starts.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert!(seen_unsynced.get(), "the error marked the pods not synced");
        assert!(
            cache.is_synced(Watched::Pods),
            "the second list synced them again"
        );
        let mut uids = <core::Pod as Mirrored>::keys(&cache);
        uids.sort();
        assert_eq!(
            uids,
            vec!["b".to_string(), "c".to_string()],
            "no ghost of a"
        );
    }
}
