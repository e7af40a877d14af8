//! The dispatcher's view of each worker: a connection made from the kubeconfig MultiKueue uses
//! for it (its MultiKueueCluster's Secret in Kueue's namespace, or its file), and the worker's
//! nodes and unfinished pods, kept by watches. Memory follows the objects the workers have. The
//! kubeconfig is read again when the MultiKueueCluster changes, every [`KUBECONFIG_RETRY`] while
//! the worker cannot be read (its Secret missing, its watches not listed: a rotated credential
//! ends them), and otherwise every [`KUBECONFIG_REREAD`]: not on every round, so a manager's
//! API server is not asked for every worker's Secret every 2 seconds.
//! [`Workers`] is owned by the dispatcher's loop, their one writer; each worker's watches write
//! only their own stores.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gangplank_core::model::State;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Config, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::multikueue::{MultiKueueCluster, SECRET_KEY};
use crate::cache::convert;
use crate::cache::watch::relisting;

/// Why a worker cannot be asked whether a gang fits.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unreachable {
    #[error("no MultiKueueCluster of that name")]
    Unknown,
    #[error("its kubeconfig cannot be used: {0}")]
    Kubeconfig(String),
    #[error("its nodes and pods are not read yet (its API server does not answer)")]
    NotSynced,
}

/// How long a kubeconfig read from a working worker's Secret (or file) is used before it is
/// read again, to notice one replaced in place.
pub const KUBECONFIG_REREAD: Duration = Duration::from_secs(60);

/// How often the kubeconfig of a worker that cannot be read is read again.
pub const KUBECONFIG_RETRY: Duration = Duration::from_secs(10);

/// The workers, by MultiKueueCluster name.
#[derive(Default)]
pub struct Workers {
    by_name: BTreeMap<String, Worker>,
}

/// One worker: its kubeconfig as read (to notice a change), when, from which version of its
/// MultiKueueCluster, and its watches, or why it has none.
struct Worker {
    kubeconfig: String,
    read_at: Instant,
    cluster_version: Option<String>,
    view: Result<View, Unreachable>,
}

impl Worker {
    /// Whether its kubeconfig is to be read again at `now` for `cluster` (see the module docs).
    fn stale(&self, cluster: &MultiKueueCluster, now: Instant) -> bool {
        let every = if self.view.as_ref().is_ok_and(View::synced) {
            KUBECONFIG_REREAD
        } else {
            KUBECONFIG_RETRY
        };
        self.cluster_version != cluster.resource_version()
            || now.duration_since(self.read_at) >= every
    }
}

/// A worker's nodes and unfinished pods, and whether both watches have listed since their last
/// error.
struct View {
    nodes: Store<Node>,
    pods: Store<Pod>,
    synced: [Arc<AtomicBool>; 2],
    stop: CancellationToken,
}

impl View {
    /// Whether both watches have listed since their last error.
    fn synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Acquire))
    }
}

impl Drop for View {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Workers {
    /// Keeps a connection to each of `clusters`, reading each one's kubeconfig through
    /// `client` (Secrets in `namespace`) when it may have changed (see the module docs); a
    /// worker whose kubeconfig changed is connected again, one no longer listed is dropped (its
    /// watches stop).
    pub async fn sync(
        &mut self,
        client: &Client,
        namespace: &str,
        clusters: &[MultiKueueCluster],
        shutdown: &CancellationToken,
    ) {
        let wanted: BTreeMap<String, &MultiKueueCluster> = clusters
            .iter()
            .filter_map(|c| Some((c.metadata.name.clone()?, c)))
            .collect();
        self.by_name.retain(|name, _| wanted.contains_key(name));
        let now = Instant::now();
        for (name, cluster) in wanted {
            if self
                .by_name
                .get(&name)
                .is_some_and(|w| !w.stale(cluster, now))
            {
                continue;
            }
            let cluster_version = cluster.resource_version();
            let kubeconfig = match read_kubeconfig(client, namespace, cluster).await {
                Ok(text) => text,
                Err(why) => {
                    let worker = Worker {
                        kubeconfig: String::new(),
                        read_at: now,
                        cluster_version,
                        view: Err(why),
                    };
                    self.by_name.insert(name, worker);
                    continue;
                }
            };
            if let Some(worker) = self.by_name.get_mut(&name)
                && worker.kubeconfig == kubeconfig
                && worker.view.is_ok()
            {
                worker.read_at = now;
                worker.cluster_version = cluster_version;
                continue;
            }
            let view = connect(&name, &kubeconfig, shutdown).await;
            let worker = Worker {
                kubeconfig,
                read_at: now,
                cluster_version,
                view,
            };
            self.by_name.insert(name, worker);
        }
    }

    /// The worker's nodes and bound pods as the core's model, to ask what fits there.
    pub fn state(&self, name: &str) -> Result<State, Unreachable> {
        let worker = self.by_name.get(name).ok_or(Unreachable::Unknown)?;
        let view = worker.view.as_ref().map_err(Clone::clone)?;
        if !view.synced() {
            return Err(Unreachable::NotSynced);
        }
        let mut state = State::default();
        for node in view.nodes.state() {
            if let Ok(node) = convert::node(&node) {
                state.apply_node(node);
            }
        }
        for pod in view.pods.state() {
            if let Ok(pod) = convert::pod(&pod) {
                state.apply_pod(pod);
            }
        }
        Ok(state)
    }
}

/// The kubeconfig MultiKueue uses for `cluster`: its Secret's `kubeconfig` key, or its file.
async fn read_kubeconfig(
    client: &Client,
    namespace: &str,
    cluster: &MultiKueueCluster,
) -> Result<String, Unreachable> {
    let source = cluster
        .spec
        .cluster_source
        .kube_config
        .as_ref()
        .ok_or_else(|| {
            Unreachable::Kubeconfig("spec.clusterSource.kubeConfig is not set".into())
        })?;
    if source.location_type.as_deref() == Some("Path") {
        return std::fs::read_to_string(&source.location)
            .map_err(|e| Unreachable::Kubeconfig(format!("{}: {e}", source.location)));
    }
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
    let secret = secrets.get(&source.location).await.map_err(|e| {
        Unreachable::Kubeconfig(format!("Secret {namespace}/{}: {e}", source.location))
    })?;
    let bytes = secret
        .data
        .and_then(|mut d| d.remove(SECRET_KEY))
        .ok_or_else(|| {
            Unreachable::Kubeconfig(format!(
                "Secret {namespace}/{} has no key {SECRET_KEY}",
                source.location
            ))
        })?;
    String::from_utf8(bytes.0).map_err(|e| Unreachable::Kubeconfig(e.to_string()))
}

/// A client of the worker from `kubeconfig`, and watches of its nodes and unfinished pods.
async fn connect(
    name: &str,
    kubeconfig: &str,
    shutdown: &CancellationToken,
) -> Result<View, Unreachable> {
    let parsed =
        Kubeconfig::from_yaml(kubeconfig).map_err(|e| Unreachable::Kubeconfig(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|e| Unreachable::Kubeconfig(e.to_string()))?;
    let client = Client::try_from(config).map_err(|e| Unreachable::Kubeconfig(e.to_string()))?;
    let stop = shutdown.child_token();
    let synced = [
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    ];
    let (nodes, node_writer) = reflector::store();
    let (pods, pod_writer) = reflector::store();
    let unfinished =
        || watcher::Config::default().fields("status.phase!=Succeeded,status.phase!=Failed");
    tokio::spawn(keep(
        format!("nodes of worker {name}"),
        node_writer,
        {
            let api = Api::<Node>::all(client.clone());
            move || watcher(api.clone(), watcher::Config::default()).modify(slim)
        },
        synced[0].clone(),
        stop.clone(),
    ));
    tokio::spawn(keep(
        format!("pods of worker {name}"),
        pod_writer,
        {
            let api = Api::<Pod>::all(client);
            move || watcher(api.clone(), unfinished()).modify(slim)
        },
        synced[1].clone(),
        stop.clone(),
    ));
    Ok(View {
        nodes,
        pods,
        synced,
        stop,
    })
}

/// Drops what the dispatcher never reads and the watch would keep: the managed fields.
fn slim<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps `writer`'s store current from the watches `start` makes until `stop`; `synced` says
/// whether it has listed since its last error.
async fn keep<K, S>(
    kind: String,
    mut writer: reflector::store::Writer<K>,
    start: impl Fn() -> S,
    synced: Arc<AtomicBool>,
    stop: CancellationToken,
) where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
    S: futures::Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    relisting(
        &kind,
        start,
        &stop,
        |event| {
            writer.apply_watcher_event(&event);
            if matches!(event, watcher::Event::InitDone) {
                synced.store(true, Ordering::Release);
            }
        },
        || synced.store(false, Ordering::Release),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(version: &str) -> MultiKueueCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
            "metadata": {"name": "worker-1", "resourceVersion": version},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "w1"}}}
        }))
        .unwrap()
    }

    fn read_at(read_at: Instant, view: Result<View, Unreachable>) -> Worker {
        Worker {
            kubeconfig: "apiVersion: v1".into(),
            read_at,
            cluster_version: Some("7".into()),
            view,
        }
    }

    fn listed() -> View {
        View {
            nodes: reflector::store().0,
            pods: reflector::store().0,
            synced: [
                Arc::new(AtomicBool::new(true)),
                Arc::new(AtomicBool::new(true)),
            ],
            stop: CancellationToken::new(),
        }
    }

    #[test]
    fn a_working_workers_kubeconfig_is_read_again_after_a_minute_or_when_its_cluster_changes() {
        let now = Instant::now();
        let worker = read_at(now, Ok(listed()));
        assert!(!worker.stale(&cluster("7"), now + Duration::from_secs(30)));
        assert!(worker.stale(&cluster("7"), now + KUBECONFIG_REREAD));
        assert!(worker.stale(&cluster("8"), now + Duration::from_secs(2)));
    }

    #[test]
    fn a_worker_that_cannot_be_read_has_its_kubeconfig_read_again_every_ten_seconds() {
        let now = Instant::now();
        let missing = read_at(now, Err(Unreachable::Kubeconfig("no Secret".into())));
        assert!(!missing.stale(&cluster("7"), now + Duration::from_secs(2)));
        assert!(missing.stale(&cluster("7"), now + KUBECONFIG_RETRY));
        let view = listed();
        view.synced[1].store(false, Ordering::Release);
        let unlisted = read_at(now, Ok(view));
        assert!(!unlisted.stale(&cluster("7"), now + Duration::from_secs(2)));
        assert!(unlisted.stale(&cluster("7"), now + KUBECONFIG_RETRY));
    }
}
