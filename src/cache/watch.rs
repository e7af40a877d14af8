//! The watch loops that feed the cache from the API server.
//!
//! One kube-runtime watcher per kind, with kube's default backoff on errors: nodes and pods
//! here ([`run`]); PodGroups and Queues come from the watches of [`crate::stores`], which the
//! controller and webhooks need anyway, through a [`Mirror`] each. The
//! full API objects are converted and dropped at once: the cache keeps only its small model.
//! A (re)list arrives as `Init`, `InitApply`…, `InitDone`; objects are applied as they come,
//! and at `InitDone` whatever the list did not mention is deleted, so a re-list after a
//! dropped watch leaves no ghosts. The first `InitDone` marks the kind synced (readiness).

use std::collections::HashSet;
use std::fmt::Debug;

use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Cache, Error, GroupKey, Watched, convert};
use crate::metrics;

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

async fn watch<K: Mirrored>(api: Api<K>, cache: Cache, shutdown: CancellationToken) {
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut mirror = Mirror::<K>::new(cache);
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            next = stream.next() => next,
        };
        match next {
            Some(Ok(event)) => mirror.handle(event),
            Some(Err(e)) => {
                tracing::warn!(kind = K::WATCHED.as_str(), error = %e, "failed to watch, retrying");
            }
            None => {
                tracing::error!(kind = K::WATCHED.as_str(), "watch stream ended");
                return;
            }
        }
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
}
