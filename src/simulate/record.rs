//! `gangplank record`: watches a cluster's nodes, Queues, PodGroups and pods for a while and
//! writes what it saw as one JSON file (a [`Recording`]), which `gangplank simulate
//! --recording` replays. Each object is kept as the API last showed it, a deleted pod with the
//! time its deletion was seen, so pods evicted and made again are all in it. The API keeps whole
//! seconds, so the recorder also stamps, by its own clock to the millisecond, when it saw each
//! object made and each pod bound and ended ([`Stamps`]): the order of what happened inside one
//! second. Reads only.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::api::{PodGroup, Queue};

/// Flags of `gangplank record`.
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// The kubeconfig context to use (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// How long to record, in seconds (at most a week); it also stops at an interrupt.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub seconds: u64,
    /// Where to write the recording.
    #[arg(long, default_value = "recording.json")]
    pub out: PathBuf,
}

/// Most pods a recording keeps (deleted ones included): past it, the recording stops early and
/// says so, rather than growing without bound.
pub const MAX_PODS: usize = 200_000;

/// What `gangplank record` saw.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recording {
    pub started: Timestamp,
    pub ended: Timestamp,
    pub nodes: Vec<Node>,
    pub queues: Vec<Queue>,
    pub pod_groups: Vec<Recorded<PodGroup>>,
    pub pods: Vec<Recorded<Pod>>,
}

/// An object as the API last showed it, when its deletion was seen, and when the recorder saw
/// it reach each stage.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recorded<K> {
    pub object: K,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Stamps::is_empty")]
    pub seen: Stamps,
}

/// When the recorder first saw an object made, and a pod bound to a node and ended (Succeeded
/// or Failed), by its clock. A stage the object had reached when the recorder first listed it
/// has no stamp: when it happened is not known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stamps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Timestamp>,
}

impl Stamps {
    fn is_empty(&self) -> bool {
        *self == Stamps::default()
    }
}

/// The stages of an object that a recording stamps after creation: bound, ended.
type Stages<K> = fn(&K) -> (bool, bool);

/// Objects of one kind by UID, deleted ones kept.
struct Seen<K> {
    by_uid: BTreeMap<String, Recorded<K>>,
    /// Keep deleted objects (pods and groups), or drop them (nodes, queues).
    keep_deleted: bool,
    /// Drops what a replay does not read.
    slim: fn(&mut K),
    /// Which stages the object has reached.
    stages: Stages<K>,
}

impl<K: Resource + Clone> Seen<K> {
    fn new(keep_deleted: bool) -> Self {
        Seen {
            by_uid: BTreeMap::new(),
            keep_deleted,
            slim: |_| {},
            stages: |_| (false, false),
        }
    }

    fn handle(&mut self, event: Event<K>) {
        let now = Timestamp::now();
        match event {
            Event::Apply(object) => self.apply(object, now, true),
            Event::InitApply(object) => self.apply(object, now, false),
            Event::Delete(object) => {
                let Some(uid) = object.uid() else { return };
                if !self.keep_deleted {
                    self.by_uid.remove(&uid);
                } else if let Some(seen) = self.by_uid.get_mut(&uid) {
                    seen.deleted = Some(now);
                }
            }
            Event::Init | Event::InitDone => {}
        }
    }

    /// Keeps `object` as shown at `now`, stamping the stages it reached since it was last
    /// shown; `live`: a change seen as it happened, not an object of a (re)list.
    fn apply(&mut self, mut object: K, now: Timestamp, live: bool) {
        let meta = object.meta_mut();
        meta.managed_fields = None;
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
        (self.slim)(&mut object);
        let Some(uid) = object.uid() else { return };
        let (bound, ended) = (self.stages)(&object);
        let earlier = self.by_uid.remove(&uid);
        let (was_bound, was_ended) = earlier
            .as_ref()
            .map_or((false, false), |e| (self.stages)(&e.object));
        let mut seen = earlier.map(|e| e.seen).unwrap_or_else(|| Stamps {
            created: live.then_some(now),
            ..Stamps::default()
        });
        if live && bound && !was_bound {
            seen.bound.get_or_insert(now);
        }
        if live && ended && !was_ended {
            seen.ended.get_or_insert(now);
        }
        self.by_uid.insert(
            uid,
            Recorded {
                object,
                deleted: None,
                seen,
            },
        );
    }
}

/// A pod's stages: bound to a node, ended (Succeeded or Failed).
fn pod_stages(pod: &Pod) -> (bool, bool) {
    let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    (bound, matches!(phase, Some("Succeeded" | "Failed")))
}

/// Records for `args.seconds` (or until interrupted), then writes the recording.
pub async fn run(args: &RecordArgs, client: Client) -> anyhow::Result<()> {
    eprintln!(
        "recording for {} s into {} (interrupt to stop early)",
        args.seconds,
        args.out.display()
    );
    let stop = async {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(args.seconds)) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    let recording = record(&client, stop).await;
    std::fs::write(&args.out, serde_json::to_vec(&recording)?)?;
    eprintln!(
        "recorded {} nodes, {} queues, {} PodGroups and {} pods into {}",
        recording.nodes.len(),
        recording.queues.len(),
        recording.pod_groups.len(),
        recording.pods.len(),
        args.out.display()
    );
    Ok(())
}

/// What the cluster shows from now until `stop` completes (or the recording holds
/// [`MAX_PODS`] pods). A watch that fails is retried with kube's backoff.
pub async fn record(client: &Client, stop: impl std::future::Future<Output = ()>) -> Recording {
    let started = Timestamp::now();
    let mut nodes = Seen::<Node>::new(false);
    let mut queues = Seen::<Queue>::new(false);
    let mut groups = Seen::<PodGroup>::new(true);
    let mut pods = Seen::<Pod> {
        slim: slim_pod,
        stages: pod_stages,
        ..Seen::new(true)
    };
    let mut node_events = events::<Node>(client);
    let mut queue_events = events::<Queue>(client);
    let mut group_events = events::<PodGroup>(client);
    let mut pod_events = events::<Pod>(client);
    tokio::pin!(stop);
    loop {
        let failed = tokio::select! {
            _ = &mut stop => break,
            Some(e) = node_events.next() => e.map(|e| nodes.handle(e)).err(),
            Some(e) = queue_events.next() => e.map(|e| queues.handle(e)).err(),
            Some(e) = group_events.next() => e.map(|e| groups.handle(e)).err(),
            Some(e) = pod_events.next() => e.map(|e| pods.handle(e)).err(),
        };
        if let Some(error) = failed {
            eprintln!("record: a watch failed, retrying: {error}");
        }
        if pods.by_uid.len() >= MAX_PODS {
            eprintln!("record: stopped early: the recording holds {MAX_PODS} pods");
            break;
        }
    }
    Recording {
        started,
        ended: Timestamp::now(),
        nodes: nodes.by_uid.into_values().map(|r| r.object).collect(),
        queues: queues.by_uid.into_values().map(|r| r.object).collect(),
        pod_groups: groups.by_uid.into_values().collect(),
        pods: pods.by_uid.into_values().collect(),
    }
}

/// Every change of kind `K` cluster-wide, retried with kube's default backoff.
fn events<K>(
    client: &Client,
) -> std::pin::Pin<Box<dyn futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use kube::runtime::WatchStreamExt;
    watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .boxed()
}

/// Keeps of a pod what a replay reads (its requests, group, queue, priority, node, gates and
/// times): a recording holds many pods, and their commands, environment, volumes and probes are
/// most of their size.
pub fn slim_pod(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = None;
        for container in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            *container = Container {
                name: std::mem::take(&mut container.name),
                resources: container.resources.take(),
                restart_policy: container.restart_policy.take(),
                ..Container::default()
            };
        }
    }
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = status.container_statuses.take().map(|statuses| {
            statuses
                .into_iter()
                .map(|c| ContainerStatus {
                    name: c.name,
                    state: c.state,
                    ..ContainerStatus::default()
                })
                .collect()
        });
        status.init_container_statuses = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::convert;

    fn pod(node: Option<&str>, phase: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w-0", "namespace": "ml", "uid": "u1"},
            "spec": {"nodeName": node, "containers": [{"name": "main"}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    fn pods() -> Seen<Pod> {
        Seen::<Pod> {
            stages: pod_stages,
            ..Seen::new(true)
        }
    }

    #[test]
    fn a_pod_seen_made_bound_and_ended_has_each_stage_stamped_once_in_order() {
        let mut seen = pods();
        seen.handle(Event::Apply(pod(None, "Pending")));
        seen.handle(Event::Apply(pod(Some("n1"), "Pending")));
        seen.handle(Event::Apply(pod(Some("n1"), "Running")));
        seen.handle(Event::Apply(pod(Some("n1"), "Succeeded")));
        seen.handle(Event::Apply(pod(Some("n1"), "Succeeded")));
        let stamps = &seen.by_uid["u1"].seen;
        let (created, bound, ended) = (
            stamps.created.unwrap(),
            stamps.bound.unwrap(),
            stamps.ended.unwrap(),
        );
        assert!(created <= bound && bound <= ended, "{stamps:?}");
    }

    #[test]
    fn a_pod_listed_at_the_start_has_no_stamp_for_what_it_had_done_before() {
        let mut seen = pods();
        seen.handle(Event::InitApply(pod(Some("n1"), "Running")));
        seen.handle(Event::InitDone);
        assert_eq!(seen.by_uid["u1"].seen, Stamps::default());
        seen.handle(Event::Apply(pod(Some("n1"), "Failed")));
        let stamps = &seen.by_uid["u1"].seen;
        assert!(stamps.created.is_none() && stamps.bound.is_none());
        assert!(stamps.ended.is_some());
    }

    #[test]
    fn a_slim_pod_converts_to_what_the_whole_pod_does() {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w-0", "namespace": "ml", "uid": "u1",
                "creationTimestamp": "2026-11-29T10:00:00Z",
                "labels": {"scheduling.gangplank.dev/queue": "research",
                           "scheduling.gangplank.dev/pod-group": "w"}},
            "spec": {"priority": 7, "nodeName": "n1",
                "initContainers": [{"name": "init", "image": "i", "resources": {"requests": {"cpu": "4"}}}],
                "containers": [{"name": "main", "image": "trainer:1", "command": ["python", "train.py"],
                    "env": [{"name": "RANK", "value": "0"}],
                    "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}],
                "volumes": [{"name": "data", "emptyDir": {}}]},
            "status": {"phase": "Succeeded", "startTime": "2026-11-29T10:00:02Z",
                "conditions": [{"type": "PodScheduled", "status": "True",
                                "lastTransitionTime": "2026-11-29T10:00:01Z"}],
                "containerStatuses": [{"name": "main", "image": "trainer:1", "imageID": "x",
                    "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-29T10:01:00Z"}}}]}
        }))
        .unwrap();
        let whole = convert::pod(&pod).unwrap();
        slim_pod(&mut pod);
        assert_eq!(convert::pod(&pod).unwrap(), whole);
        let container = &pod.spec.as_ref().unwrap().containers[0];
        assert!(
            container.env.is_none() && container.command.is_none() && container.image.is_none()
        );
        let status = &pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert!(status.state.as_ref().unwrap().terminated.is_some());
    }
}
