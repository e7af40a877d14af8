//! Reflector stores of API objects as the API shows them, shared by the controller and the
//! webhooks: Jobs, PodGroups, Queues, Namespaces (metadata only: their labels name a default
//! queue and are what queues' `namespaceSelector`s match), scheduler-plugins', Volcano's and Kubernetes' own
//! (`scheduling.k8s.io`, `v1beta1` or `v1alpha2`) PodGroups, and Kueue's Workloads and
//! AdmissionChecks (each of these watched only while its API is served, and not needed for the
//! controller to act). One watch per kind for the whole
//! process.
//!
//! The cluster cache keeps only what scheduling needs (a PodGroup's spec, no status, no
//! owners; no Jobs at all). The controller needs the rest: a PodGroup's current status (to
//! write only differences and to judge transitions) and owner (to leave hand-made PodGroups
//! alone), a Job's parallelism, annotations and conditions, a Queue's capability and status.
//! The webhooks read Queues, PodGroup phases and namespaces' labels (through the lookup
//! traits in [`super::lookup`]), and the nodes' capacity from the cluster cache the
//! stores hold a handle to ([`Stores::cache`]), to refuse a Queue guarantee larger than the
//! cluster. Jobs are slimmed as they arrive (pod template and
//! managed fields dropped) so a cluster with many Jobs costs little memory.
//!
//! The PodGroup and Queue watches also feed the cluster cache ([`crate::cache::watch::Relay`]),
//! so each kind is watched once: the cache's mirror gets the same events, right after the store.
//!
//! Every event wakes the controller ([`Stores::changed`]); each kind marks itself synced after
//! each complete list, and not synced after a watch error until the list that follows
//! ([`Stores::synced`]): the controller acts only when all the required ones are synced,
//! `/readyz` says which are not, and a webhook answers "not listed yet" rather than "does not
//! exist" before.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, PodSpec};
use kube::api::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::api::composite_pod_group::CompositePodGroup;
use crate::api::kueue::{KueueAdmissionCheck, KueueWorkload};
use crate::api::scheduler_plugins::SchedulerPluginsPodGroup;
use crate::api::volcano::VolcanoPodGroup;
use crate::api::workload_api::{UpstreamPodGroup, UpstreamPodGroupV1alpha2};
use crate::api::{PodGroup, Queue};
use crate::cache::watch::{Relay, relisting};
use crate::cache::{Change, Changes, Watched};

pub struct Stores {
    pub jobs: Store<Job>,
    pub pod_groups: Store<PodGroup>,
    pub queues: Store<Queue>,
    /// Every Namespace, metadata only: their default queue label, and the labels queues'
    /// `namespaceSelector`s match.
    pub namespaces: Store<PartialObjectMeta<Namespace>>,
    /// scheduler-plugins' PodGroups, watched while their CRD is installed.
    pub scheduler_plugins_pod_groups: Store<SchedulerPluginsPodGroup>,
    /// Volcano's PodGroups, watched while their CRD is installed.
    pub volcano_pod_groups: Store<VolcanoPodGroup>,
    /// Kubernetes' `scheduling.k8s.io/v1beta1` PodGroups (1.37 on), watched while served.
    pub upstream_pod_groups: Store<UpstreamPodGroup>,
    /// Kubernetes' `scheduling.k8s.io/v1alpha2` PodGroups (1.36), watched while served.
    pub upstream_v1alpha2_pod_groups: Store<UpstreamPodGroupV1alpha2>,
    /// Kubernetes' `scheduling.k8s.io/v1alpha3` CompositePodGroups (1.37, alpha), watched while
    /// served.
    pub composite_pod_groups: Store<CompositePodGroup>,
    /// Kueue's `kueue.x-k8s.io/v1beta2` Workloads, watched while served.
    pub kueue_workloads: Store<KueueWorkload>,
    /// Kueue's `kueue.x-k8s.io/v1beta2` AdmissionChecks, watched while served.
    pub kueue_admission_checks: Store<KueueAdmissionCheck>,
    changed: Notify,
    synced: [AtomicBool; 11],
    /// The cluster model, for the node capacity the Queue webhook checks guarantees against.
    pub cache: crate::cache::Cache,
}

/// The write halves, handed to [`Stores::run`].
pub struct Writers {
    jobs: Writer<Job>,
    pod_groups: Writer<PodGroup>,
    queues: Writer<Queue>,
    namespaces: Writer<PartialObjectMeta<Namespace>>,
    scheduler_plugins_pod_groups: Writer<SchedulerPluginsPodGroup>,
    volcano_pod_groups: Writer<VolcanoPodGroup>,
    upstream_pod_groups: Writer<UpstreamPodGroup>,
    upstream_v1alpha2_pod_groups: Writer<UpstreamPodGroupV1alpha2>,
    composite_pod_groups: Writer<CompositePodGroup>,
    kueue_workloads: Writer<KueueWorkload>,
    kueue_admission_checks: Writer<KueueAdmissionCheck>,
}

/// The kinds the stores hold, for [`Stores::synced`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Jobs = 0,
    PodGroups = 1,
    Queues = 2,
    Namespaces = 3,
    /// Optional: not part of [`Stores::is_synced`].
    SchedulerPluginsPodGroups = 4,
    /// Optional: not part of [`Stores::is_synced`].
    VolcanoPodGroups = 5,
    /// Optional: not part of [`Stores::is_synced`].
    UpstreamPodGroups = 6,
    /// Optional: not part of [`Stores::is_synced`].
    UpstreamV1alpha2PodGroups = 7,
    /// Optional: not part of [`Stores::is_synced`].
    CompositePodGroups = 8,
    /// Optional: not part of [`Stores::is_synced`].
    KueueWorkloads = 9,
    /// Optional: not part of [`Stores::is_synced`].
    KueueAdmissionChecks = 10,
}

/// The kinds the controller needs listed before it acts.
const REQUIRED: [StoreKind; 4] = [
    StoreKind::Jobs,
    StoreKind::PodGroups,
    StoreKind::Queues,
    StoreKind::Namespaces,
];

/// How often Gangplank looks again for an optional CRD that is not installed.
const ABSENT_CRD_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

impl Stores {
    pub fn new(cache: crate::cache::Cache) -> (Arc<Stores>, Writers) {
        let (jobs, jobs_writer) = reflector::store();
        let (pod_groups, pod_groups_writer) = reflector::store();
        let (queues, queues_writer) = reflector::store();
        let (namespaces, namespaces_writer) = reflector::store();
        let (scheduler_plugins_pod_groups, scheduler_plugins_writer) = reflector::store();
        let (volcano_pod_groups, volcano_writer) = reflector::store();
        let (upstream_pod_groups, upstream_writer) = reflector::store();
        let (upstream_v1alpha2_pod_groups, upstream_v1alpha2_writer) = reflector::store();
        let (composite_pod_groups, composite_writer) = reflector::store();
        let (kueue_workloads, kueue_workloads_writer) = reflector::store();
        let (kueue_admission_checks, kueue_checks_writer) = reflector::store();
        let stores = Arc::new(Stores {
            jobs,
            pod_groups,
            queues,
            namespaces,
            scheduler_plugins_pod_groups,
            volcano_pod_groups,
            upstream_pod_groups,
            upstream_v1alpha2_pod_groups,
            composite_pod_groups,
            kueue_workloads,
            kueue_admission_checks,
            changed: Notify::new(),
            synced: Default::default(),
            cache,
        });
        let writers = Writers {
            jobs: jobs_writer,
            pod_groups: pod_groups_writer,
            queues: queues_writer,
            namespaces: namespaces_writer,
            scheduler_plugins_pod_groups: scheduler_plugins_writer,
            volcano_pod_groups: volcano_writer,
            upstream_pod_groups: upstream_writer,
            upstream_v1alpha2_pod_groups: upstream_v1alpha2_writer,
            composite_pod_groups: composite_writer,
            kueue_workloads: kueue_workloads_writer,
            kueue_admission_checks: kueue_checks_writer,
        };
        (stores, writers)
    }

    /// The names of the Kueue AdmissionChecks Gangplank runs (their `controllerName` is
    /// [`crate::api::kueue::CONTROLLER_NAME`]).
    pub fn kueue_checks_of_ours(&self) -> std::collections::HashSet<String> {
        self.kueue_admission_checks
            .state()
            .iter()
            .filter(|c| c.spec.controller_name == crate::api::kueue::CONTROLLER_NAME)
            .map(|c| c.name_any())
            .collect()
    }

    /// Completes after the next watch event (single waiter: the controller loop).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Every required kind is synced (see [`Stores::synced`]); the other schedulers' PodGroups
    /// are optional: their APIs may not be served.
    pub fn is_synced(&self) -> bool {
        REQUIRED.iter().all(|kind| self.synced(*kind))
    }

    /// `kind` has completed a list since it started or last failed.
    pub fn synced(&self, kind: StoreKind) -> bool {
        self.synced[kind as usize].load(Ordering::Acquire)
    }

    /// The kinds only the stores watch (Jobs, Namespaces) that are not synced (see
    /// [`Stores::synced`]), by name; empty when both are. The PodGroup and Queue watches also
    /// feed the cache, which reports them.
    pub fn unsynced(&self) -> Vec<&'static str> {
        [
            (StoreKind::Jobs, "jobs"),
            (StoreKind::Namespaces, "namespaces"),
        ]
        .into_iter()
        .filter(|(kind, _)| !self.synced(*kind))
        .map(|(_, name)| name)
        .collect()
    }

    /// Watches the eleven kinds cluster-wide until `shutdown` (the other schedulers' PodGroups
    /// only while their API is served, [`Stores::reflect_optional`]), and mirrors the PodGroups and
    /// Queues it sees into the cache's mirror (`changes`) from the same watches (the cache
    /// watches nodes and pods itself, [`crate::cache::watch::run`]): one watch per kind for
    /// the whole process.
    pub async fn run(
        self: Arc<Self>,
        writers: Writers,
        client: Client,
        changes: Changes,
        shutdown: CancellationToken,
    ) {
        let jobs = Api::<Job>::all(client.clone());
        let pod_groups = Api::<PodGroup>::all(client.clone());
        let queues = Api::<Queue>::all(client.clone());
        let namespaces = Api::<PartialObjectMeta<Namespace>>::all(client.clone());
        let scheduler_plugins = Api::<SchedulerPluginsPodGroup>::all(client.clone());
        let volcano = Api::<VolcanoPodGroup>::all(client.clone());
        let upstream = Api::<UpstreamPodGroup>::all(client.clone());
        let upstream_v1alpha2 = Api::<UpstreamPodGroupV1alpha2>::all(client.clone());
        let composite = Api::<CompositePodGroup>::all(client.clone());
        let kueue_workloads = Api::<KueueWorkload>::all(client.clone());
        let kueue_checks = Api::<KueueAdmissionCheck>::all(client);
        let all = watcher::Config::default;
        let mut pod_group_relay = Relay::<PodGroup>::new(changes.clone());
        let mut queue_relay = Relay::<Queue>::new(changes.clone());
        tokio::join!(
            self.reflect(
                "jobs",
                StoreKind::Jobs,
                writers.jobs,
                || watcher(jobs.clone(), all()).modify(slim),
                &shutdown,
                |_| {},
                || {}
            ),
            self.reflect(
                "podgroups",
                StoreKind::PodGroups,
                writers.pod_groups,
                || {
                    watcher(pod_groups.clone(), all())
                        .modify(|g: &mut PodGroup| g.metadata.managed_fields = None)
                },
                &shutdown,
                |event| pod_group_relay.handle(event),
                || changes.send(Change::Failed(Watched::PodGroups)),
            ),
            self.reflect(
                "queues",
                StoreKind::Queues,
                writers.queues,
                || {
                    watcher(queues.clone(), all())
                        .modify(|q: &mut Queue| q.metadata.managed_fields = None)
                },
                &shutdown,
                |event| queue_relay.handle(event),
                || changes.send(Change::Failed(Watched::Queues)),
            ),
            self.reflect(
                "namespaces",
                StoreKind::Namespaces,
                writers.namespaces,
                || watcher(namespaces.clone(), all())
                    .modify(|ns| ns.metadata.managed_fields = None),
                &shutdown,
                |_| {},
                || {}
            ),
            self.reflect_optional(
                "scheduling.x-k8s.io podgroups",
                StoreKind::SchedulerPluginsPodGroups,
                writers.scheduler_plugins_pod_groups,
                scheduler_plugins,
                &shutdown,
            ),
            self.reflect_optional(
                "scheduling.volcano.sh podgroups",
                StoreKind::VolcanoPodGroups,
                writers.volcano_pod_groups,
                volcano,
                &shutdown,
            ),
            self.reflect_optional(
                "scheduling.k8s.io/v1beta1 podgroups",
                StoreKind::UpstreamPodGroups,
                writers.upstream_pod_groups,
                upstream,
                &shutdown,
            ),
            self.reflect_optional(
                "scheduling.k8s.io/v1alpha2 podgroups",
                StoreKind::UpstreamV1alpha2PodGroups,
                writers.upstream_v1alpha2_pod_groups,
                upstream_v1alpha2,
                &shutdown,
            ),
            self.reflect_optional(
                "scheduling.k8s.io/v1alpha3 compositepodgroups",
                StoreKind::CompositePodGroups,
                writers.composite_pod_groups,
                composite,
                &shutdown,
            ),
            self.reflect_optional(
                "kueue.x-k8s.io workloads",
                StoreKind::KueueWorkloads,
                writers.kueue_workloads,
                kueue_workloads,
                &shutdown,
            ),
            self.reflect_optional(
                "kueue.x-k8s.io admissionchecks",
                StoreKind::KueueAdmissionChecks,
                writers.kueue_admission_checks,
                kueue_checks,
                &shutdown,
            ),
        );
    }

    /// [`Stores::reflect`] for a kind whose CRD may not be installed: while listing it answers
    /// 404, the store stays empty and the list is tried again every [`ABSENT_CRD_RECHECK`].
    async fn reflect_optional<K>(
        &self,
        name: &'static str,
        kind: StoreKind,
        writer: Writer<K>,
        api: Api<K>,
        shutdown: &CancellationToken,
    ) where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone + Default,
    {
        let mut said = false;
        loop {
            match api
                .list_metadata(&kube::api::ListParams::default().limit(1))
                .await
            {
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    if !said {
                        tracing::info!(kind = name, "not installed; looking again every minute");
                        said = true;
                    }
                }
                _ => break,
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(ABSENT_CRD_RECHECK) => {}
            }
        }
        let all = watcher::Config::default;
        self.reflect(
            name,
            kind,
            writer,
            || watcher(api.clone(), all()).modify(|o: &mut K| o.meta_mut().managed_fields = None),
            shutdown,
            |_| {},
            || {},
        )
        .await;
    }

    /// Keeps `writer`'s store current from the watches `start` makes (listing again after an
    /// error, [`crate::cache::watch::relisting`]), and hands each event, once stored, to
    /// `also`; `failed` runs after an error, when the store may have missed changes.
    #[allow(clippy::too_many_arguments)]
    async fn reflect<K, S>(
        &self,
        name: &'static str,
        kind: StoreKind,
        mut writer: Writer<K>,
        start: impl Fn() -> S,
        shutdown: &CancellationToken,
        mut also: impl FnMut(watcher::Event<K>),
        mut failed: impl FnMut(),
    ) where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone + Default,
        S: futures::Stream<Item = watcher::Result<watcher::Event<K>>>,
    {
        let synced = &self.synced[kind as usize];
        relisting(
            name,
            start,
            shutdown,
            |event| {
                writer.apply_watcher_event(&event);
                if matches!(event, watcher::Event::InitDone)
                    && !synced.swap(true, Ordering::Release)
                {
                    tracing::info!(kind = name, "store synced");
                }
                also(event);
                self.changed.notify_one();
            },
            || {
                synced.store(false, Ordering::Release);
                failed();
            },
        )
        .await;
    }
}

/// Drops what the controller never reads from a Job: the pod template (but its labels,
/// annotations and priority class), managed fields, the last-applied annotation and the
/// status but its conditions.
pub fn slim(job: &mut Job) {
    job.metadata.managed_fields = None;
    if let Some(annotations) = job.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    if let Some(spec) = job.spec.as_mut() {
        let priority_class_name = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.clone());
        spec.template.spec = Some(PodSpec {
            priority_class_name,
            ..PodSpec::default()
        });
        spec.selector = None;
        spec.pod_failure_policy = None;
    }
    if let Some(status) = job.status.as_mut() {
        *status = k8s_openapi::api::batch::v1::JobStatus {
            conditions: status.conditions.take(),
            ..Default::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::labels;

    #[test]
    fn a_slim_job_keeps_what_the_controller_reads() {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "train", "namespace": "ml", "uid": "u",
                "labels": {(labels::QUEUE_LABEL): "research"},
                "annotations": {(labels::MIN_MEMBER_ANNOTATION): "2",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"parallelism": 4, "completions": 8,
                "template": {"metadata": {"labels": {(labels::POD_GROUP_LABEL): "train"}},
                    "spec": {"priorityClassName": "high",
                        "containers": [{"name": "c", "image": "busybox"}]}}},
            "status": {"active": 4, "conditions": [{"type": "Complete", "status": "True"}]}
        }))
        .unwrap();
        slim(&mut job);
        let spec = job.spec.as_ref().unwrap();
        assert_eq!((spec.parallelism, spec.completions), (Some(4), Some(8)));
        let template = spec.template.spec.as_ref().unwrap();
        assert!(template.containers.is_empty());
        assert_eq!(template.priority_class_name.as_deref(), Some("high"));
        assert!(
            spec.template.metadata.is_some(),
            "the template's group label is kept"
        );
        assert_eq!(job.metadata.annotations.as_ref().unwrap().len(), 1);
        assert!(job.metadata.managed_fields.is_none());
        let status = job.status.as_ref().unwrap();
        assert_eq!(status.active, None);
        assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
        assert!(crate::controller::batch_v1_jobs::finished(&job));
    }
}
