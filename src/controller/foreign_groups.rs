//! Other schedulers' PodGroups get a Gangplank PodGroup: which one, and when to leave things
//! alone. Three dialects (and trees of the third), read into one [`Foreign`] view:
//! - scheduler-plugins' (`scheduling.x-k8s.io/v1alpha1`): operators in that mode (Kubeflow's
//!   training-operator with a `--gang-scheduler-name` other than `volcano`, KubeRay with
//!   `--batch-scheduler=scheduler-plugins`) create it and label their pods
//!   `scheduling.x-k8s.io/pod-group: <name>`;
//! - Volcano's (`scheduling.volcano.sh/v1beta1`): operators in Volcano mode create it, annotate
//!   their pods `scheduling.k8s.io/group-name: <name>`, and some (the training-operator) create
//!   the pods only once its `status.phase` leaves `Pending`. Its Gangplank PodGroup is admitted
//!   ahead of its members on `minResources` (`gangplank_core::model::owed`), unless it has a
//!   `subGroupPolicy` Gangplank mirrors (`super::volcano_sub_groups`: then it waits for whole
//!   instances of labelled members, as any gang of sub-groups, and its `networkTopology` is
//!   read as Topology levels by `super::volcano_network_topology`), and [`volcano_status`] is the
//!   status Gangplank writes back;
//! - Kubernetes' own (`scheduling.k8s.io`, `v1beta1` from 1.37 and `v1alpha2` on 1.36, served
//!   with the `GenericWorkload` feature gate): its pods name it in `spec.schedulingGroup.podGroupName`, and its
//!   `spec.schedulingPolicy.gang.minCount` is the gang size (a `basic` policy: 1). The scheduler
//!   writes its status. A tree of them under Kubernetes' CompositePodGroups is one gang, of the
//!   root ([`Foreign::root`], shaped by `super::composite_trees`); its PodGroups get none.
//!
//! Kueue's Workloads are read into the same view ([`Foreign::kueue`]): one whose quota Kueue
//! reserved and that waits on Gangplank's AdmissionCheck gets a Gangplank PodGroup of every pod
//! the reservation counts, `minResources` their requests, admitted ahead of its pods
//! (`crate::api::kueue`); Kueue annotates the pods with the Workload's name.
//!
//! The pod webhook already reads every dialect's pod key as the group's name. So Gangplank creates its
//! own PodGroup of the same name, in the same namespace, owned by the source (`controller:
//! true`, so the garbage collector deletes it with its source), with:
//! - `minMember` = the source's `minMember` (1 when absent or below 1);
//! - `minResources` and `scheduleTimeoutSeconds` (when at least 1) copied;
//! - the queue named on the source: label `scheduling.gangplank.dev/queue`, the same key as an
//!   annotation (which operators copy from the workload's annotations), Volcano's queue
//!   annotation, or a Volcano PodGroup's `spec.queue` other than `default` (the
//!   training-operator writes `default` when the job names no queue, so it does not hide the
//!   namespace's); else its namespace's default queue, else `default`; and the queue label.
//!
//! Not for a Kubernetes PodGroup that the Job controller made (feature gate `WorkloadWithJob`)
//! for a Job whose pods join a group Gangplank names for them, or the group of the Job's Kueue
//! Workload ([`left_to_its_job`]).
//!
//! Created once, like a Job's PodGroup (see `super::batch_v1_jobs`): a later change to the
//! source is not copied, except a Kubernetes PodGroup's `minCount` while the gang waits
//! ([`resize`]). A Gangplank PodGroup of that name that the source does not own is the user's: its
//! pods join it, and the source gets a Warning event saying so.

use std::collections::BTreeMap;
use std::sync::Arc;

use gangplank_core::model::Topology;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::batch_v1_jobs::{JobPlan, made};
use super::{volcano_network_topology, volcano_sub_groups};
use crate::api::composite_pod_group::{self, CompositePodGroup, Shape};
use crate::api::kueue::{self, KueueWorkload};
use crate::api::pod_group::SubGroupPolicy;
use crate::api::scheduler_plugins::SchedulerPluginsPodGroup;
use crate::api::volcano::{self, VolcanoPodGroup, VolcanoPodGroupSpec, VolcanoPodGroupStatus};
use crate::api::workload_api::{
    self, SchedulingPolicy, UpstreamPodGroup, UpstreamPodGroupV1alpha2,
};
use crate::api::{
    PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus, ResourceList, labels, trainer,
};

const SCHEDULER_PLUGINS: &str = "scheduling.x-k8s.io/v1alpha1";
const UPSTREAM: &str = workload_api::API_VERSIONS[0];
const UPSTREAM_V1ALPHA2: &str = workload_api::API_VERSIONS[1];

/// The `minResources` of a dialect that has none.
static NO_RESOURCES: ResourceList = ResourceList::new();

/// What Gangplank reads of another scheduler's PodGroup.
#[derive(Debug, Clone, Copy)]
pub struct Foreign<'a> {
    pub meta: &'a ObjectMeta,
    pub api_version: &'static str,
    /// Its kind, as notes name it and its PodGroup's owner reference says.
    pub kind: &'static str,
    pub min_member: Option<i32>,
    pub min_resources: &'a ResourceList,
    pub schedule_timeout_seconds: Option<i32>,
    /// The queue the dialect itself names (Volcano's `spec.queue`).
    pub queue: Option<&'a str>,
    /// A Volcano PodGroup's spec, whose sub-groups Gangplank mirrors.
    pub volcano: Option<&'a VolcanoPodGroupSpec>,
    /// The shape of the tree whose root this is (a CompositePodGroup,
    /// [`super::composite_trees`]).
    pub tree: Option<&'a Shape>,
}

impl<'a> Foreign<'a> {
    /// The root of a tree of CompositePodGroups, of `shape`: `None` while the tree is being
    /// made (its pods wait for the rest).
    pub fn root(source: &'a CompositePodGroup, shape: &'a Shape) -> Option<Self> {
        let min_member = match shape {
            Shape::Tree(spec) => spec.min_member,
            Shape::Flat { min_member, .. } => *min_member,
            Shape::Incomplete(_) => return None,
        };
        Some(Foreign {
            meta: &source.metadata,
            api_version: composite_pod_group::API_VERSION,
            kind: "CompositePodGroup",
            min_member: Some(min_member),
            min_resources: &NO_RESOURCES,
            schedule_timeout_seconds: None,
            queue: None,
            volcano: None,
            tree: Some(shape),
        })
    }
}

impl<'a> From<&'a SchedulerPluginsPodGroup> for Foreign<'a> {
    fn from(source: &'a SchedulerPluginsPodGroup) -> Self {
        Foreign {
            meta: &source.metadata,
            api_version: SCHEDULER_PLUGINS,
            kind: "PodGroup",
            min_member: source.spec.min_member,
            min_resources: &source.spec.min_resources,
            schedule_timeout_seconds: source.spec.schedule_timeout_seconds,
            queue: None,
            volcano: None,
            tree: None,
        }
    }
}

impl<'a> From<&'a VolcanoPodGroup> for Foreign<'a> {
    fn from(source: &'a VolcanoPodGroup) -> Self {
        Foreign {
            meta: &source.metadata,
            api_version: volcano::API_VERSION,
            kind: "PodGroup",
            min_member: source.spec.min_member,
            min_resources: &source.spec.min_resources,
            schedule_timeout_seconds: None,
            queue: source
                .spec
                .queue
                .as_deref()
                .filter(|q| !q.is_empty() && *q != labels::DEFAULT_QUEUE),
            volcano: Some(&source.spec),
            tree: None,
        }
    }
}

impl<'a> From<&'a UpstreamPodGroup> for Foreign<'a> {
    fn from(source: &'a UpstreamPodGroup) -> Self {
        Foreign::upstream(&source.metadata, UPSTREAM, &source.spec.scheduling_policy)
    }
}

impl<'a> From<&'a UpstreamPodGroupV1alpha2> for Foreign<'a> {
    fn from(source: &'a UpstreamPodGroupV1alpha2) -> Self {
        Foreign::upstream(
            &source.metadata,
            UPSTREAM_V1ALPHA2,
            &source.spec.scheduling_policy,
        )
    }
}

impl<'a> Foreign<'a> {
    /// Kubernetes' PodGroup of `api_version`: a gang of its `minCount`, else of one.
    fn upstream(
        meta: &'a ObjectMeta,
        api_version: &'static str,
        policy: &SchedulingPolicy,
    ) -> Self {
        Foreign {
            meta,
            api_version,
            kind: "PodGroup",
            min_member: policy.gang.as_ref().map(|g| g.min_count),
            min_resources: &NO_RESOURCES,
            schedule_timeout_seconds: None,
            queue: None,
            volcano: None,
            tree: None,
        }
    }

    /// A Kueue Workload whose quota Kueue reserved, waiting on Gangplank's check: a gang of
    /// every pod the reservation counts, `min_resources` their requests
    /// ([`kueue_min_resources`]), admitted ahead of its pods (`crate::api::kueue`).
    pub fn kueue(source: &'a KueueWorkload, min_resources: &'a ResourceList) -> Self {
        let pods = i32::try_from(source.gang_size()).unwrap_or(i32::MAX);
        Foreign {
            meta: &source.metadata,
            api_version: kueue::API_VERSION,
            kind: "Workload",
            min_member: Some(pods),
            min_resources,
            schedule_timeout_seconds: None,
            queue: None,
            volcano: None,
            tree: None,
        }
    }

    /// Whether this is Kubernetes' own PodGroup (the Workload API) or CompositePodGroup.
    fn is_kubernetes(&self) -> bool {
        workload_api::API_VERSIONS.contains(&self.api_version)
            || self.api_version == composite_pod_group::API_VERSION
    }

    /// The sub-groups of the tree whose root this is.
    fn sub_groups(&self) -> Option<&'a [SubGroupPolicy]> {
        match self.tree? {
            Shape::Tree(spec) => Some(&spec.sub_group_policy),
            _ => None,
        }
    }

    /// The gang size it asks for: its `minMember`, 1 when absent or below 1.
    fn gang_size(&self) -> i32 {
        self.min_member.unwrap_or(0).max(1)
    }

    /// The API group, as notes name the dialect.
    fn dialect(&self) -> &'static str {
        self.api_version
            .split('/')
            .next()
            .unwrap_or(self.api_version)
    }
}

/// The Jobs (namespace, name) that own a Kueue Workload, each with whether that Workload has
/// Gangplank's check.
pub type KueueJobs = std::collections::HashMap<(String, String), bool>;

/// The [`KueueJobs`] of `workloads` (`ours` says whether an AdmissionCheck of that name is
/// Gangplank's).
pub fn kueue_jobs(workloads: &[Arc<KueueWorkload>], ours: &dyn Fn(&str) -> bool) -> KueueJobs {
    workloads
        .iter()
        .filter_map(|w| {
            let owner = crate::api::controller(&w.metadata)
                .filter(|o| o.kind == "Job" && o.api_version == "batch/v1")?;
            let key = (w.metadata.namespace.clone()?, owner.name.clone());
            Some((key, w.our_check(ours).is_some()))
        })
        .collect()
}

/// Whether `job` is in a Kueue LocalQueue (Kueue makes it a Workload).
fn queued_by_kueue(job: &Job) -> bool {
    job.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(crate::api::kueue::QUEUE_NAME_LABEL))
}

/// What the pods Kueue reserved quota for in `workload` request, in all.
pub fn kueue_min_resources(workload: &KueueWorkload) -> ResourceList {
    let mut sums = std::collections::BTreeMap::new();
    for (set, count) in workload.admitted_pod_sets() {
        crate::api::requests::add_requests(&mut sums, &set.template, count);
    }
    crate::api::requests::resource_list(sums)
}

/// Whether `workload` waits on Gangplank's check with its quota reserved: then it gets a
/// Gangplank PodGroup. `ours` says whether an AdmissionCheck of that name is Gangplank's.
/// One larger than Gangplank's largest gang gets none: its check is `Rejected` instead
/// (`super::pass`'s Kueue checks).
pub fn kueue_wants_a_gang(workload: &KueueWorkload, ours: &dyn Fn(&str) -> bool) -> bool {
    workload.has_quota_reserved()
        && workload.our_check(ours).is_some()
        && workload.too_large().is_none()
}

/// What to do for `source`, given the Gangplank PodGroup of its name if one exists and its
/// namespace's default queue. `None`: nothing.
pub fn plan(
    source: Foreign,
    existing: Option<&PodGroup>,
    namespace_queue: Option<&str>,
    topologies: &BTreeMap<String, Topology>,
) -> Option<JobPlan> {
    let meta = source.meta;
    if meta.deletion_timestamp.is_some() {
        return None;
    }
    let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
    let namespace = meta.namespace.as_deref()?;
    let uid = meta.uid.as_deref()?;
    let Some(existing) = existing else {
        let (group, note, warning) =
            pod_group(source, (name, namespace, uid), namespace_queue, topologies);
        return Some(JobPlan::Create {
            group: Box::new(group),
            note,
            warning,
        });
    };
    match owner(existing) {
        Some(o) if o.uid == uid || o.name == name => resize(&source, existing),
        _ => Some(JobPlan::Conflict {
            message: format!(
                "PodGroup {namespace}/{name} of scheduling.gangplank.dev already exists and is not owned by this PodGroup, so Gangplank leaves it as it is: the pods join it (minMember {}, queue {}). Delete it to let Gangplank create one from this PodGroup.",
                existing.spec.min_member,
                existing.spec.queue_name()
            ),
        }),
    }
}

/// Whether `source` is a Kubernetes PodGroup the Job controller made for a Job
/// (`WorkloadWithJob`) whose pods join a group Gangplank names for them
/// ([`super::batch_v1_jobs::names_its_pods_group`]; `job` finds the Job of a namespace and
/// name), or the Gangplank PodGroup of the Job's Kueue Workload, which has Gangplank's check
/// (`kueue_jobs`; also while a Job Kueue queues has no Workload seen yet;
/// `crate::webhooks::pods` puts the pods Kueue admitted there): then `source` gets no Gangplank
/// PodGroup (for now).
pub fn left_to_its_job(
    source: &Foreign,
    job: impl Fn(&str, &str) -> Option<Arc<Job>>,
    kueue_jobs: &KueueJobs,
) -> bool {
    let kueue_gang = |namespace: &str, name: &str| {
        match kueue_jobs.get(&(namespace.to_owned(), name.to_owned())) {
            Some(&ours) => ours,
            // Its Workload not seen yet: whether its pods join that group is not known.
            None => job(namespace, name).is_some_and(|j| queued_by_kueue(&j)),
        }
    };
    let Some(namespace) = source.meta.namespace.as_deref() else {
        return false;
    };
    source.is_kubernetes()
        && crate::api::controller(source.meta)
            .filter(|o| o.kind == "Job" && o.api_version == "batch/v1")
            .is_some_and(|o| {
                kueue_gang(namespace, &o.name)
                    || job(namespace, &o.name)
                        .is_some_and(|j| super::batch_v1_jobs::names_its_pods_group(&j))
            })
}

/// The new `minMember` of `group`, made for `source`, when `source` is Kubernetes' PodGroup
/// whose `minCount` changed while `group` waits: `minCount` is mutable there, and applies to
/// later scheduling cycles only. An admitted group keeps the gang it was admitted as (its
/// `minMember` is frozen, `crate::webhooks::pod_groups`).
fn resize(source: &Foreign, group: &PodGroup) -> Option<JobPlan> {
    if !source.is_kubernetes() {
        return None;
    }
    let phase = group.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let min_member = source.gang_size();
    let sub_groups = source.sub_groups().unwrap_or_default();
    if phase != PodGroupPhase::Pending
        || (group.spec.min_member == min_member && group.spec.sub_group_policy == sub_groups)
    {
        return None;
    }
    let meta = source.meta;
    if source.tree.is_some() {
        return Some(JobPlan::Resize {
            min_member,
            sub_group_policy: Some(sub_groups.to_vec()),
            note: format!(
                "minMember {} -> {min_member}, {} sub-groups: the tree of CompositePodGroup {}/{} changed while the gang waits",
                group.spec.min_member,
                sub_groups.len(),
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            ),
        });
    }
    Some(JobPlan::Resize {
        min_member,
        sub_group_policy: None,
        note: format!(
            "minMember {} -> {min_member}: minCount of {} PodGroup {}/{} changed while the gang waits",
            group.spec.min_member,
            source.dialect(),
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        ),
    })
}

/// The other scheduler's PodGroup that controls `group`, if one does.
pub fn owner(group: &PodGroup) -> Option<&OwnerReference> {
    group.metadata.owner_references.iter().flatten().find(|o| {
        let composite =
            o.kind == "CompositePodGroup" && o.api_version == composite_pod_group::API_VERSION;
        let kueue = o.kind == "Workload" && o.api_version == kueue::API_VERSION;
        o.controller == Some(true)
            && (composite || kueue || o.kind == "PodGroup")
            && [
                SCHEDULER_PLUGINS,
                volcano::API_VERSION,
                UPSTREAM,
                UPSTREAM_V1ALPHA2,
                composite_pod_group::API_VERSION,
                kueue::API_VERSION,
            ]
            .contains(&o.api_version.as_str())
    })
}

/// The Volcano status that says what `group` (the Gangplank PodGroup made for it) is:
/// Volcano has no `Failed` phase, so a failed gang reads `Completed` there (its operators read
/// only whether the phase left `Pending`).
pub fn volcano_status(group: &PodGroupStatus) -> VolcanoPodGroupStatus {
    let phase = match group.phase {
        PodGroupPhase::Pending => "Pending",
        PodGroupPhase::Inqueue => "Inqueue",
        PodGroupPhase::Running => "Running",
        PodGroupPhase::Unknown => "Unknown",
        PodGroupPhase::Completed | PodGroupPhase::Failed => "Completed",
    };
    VolcanoPodGroupStatus {
        phase: Some(phase.to_owned()),
        running: group.running,
        succeeded: group.succeeded,
        failed: group.failed,
    }
}

/// The sub-groups' minimums, as a note says them: `prefill 2 of 2, decode 1 of 4`.
fn minimums(policy: &[SubGroupPolicy]) -> String {
    policy
        .iter()
        .map(|p| format!("{} {} of {}", p.name, p.min_sub_groups, p.sub_group_size))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The queue `source` names, if it names one.
fn named_queue<'a>(source: &Foreign<'a>) -> Option<&'a str> {
    let meta = source.meta;
    let annotations = meta.annotations.as_ref();
    labels::queue_of(meta.labels.as_ref(), annotations)
        .or_else(|| {
            annotations?
                .get(labels::QUEUE_LABEL)
                .map(String::as_str)
                .filter(|q| !q.is_empty())
        })
        .or(source.queue)
}

/// The levels a made PodGroup keeps its gang or instances to, as its Event's note names them.
fn topology_note(spec: &PodGroupSpec) -> Option<String> {
    let instances: Vec<String> = spec
        .sub_group_policy
        .iter()
        .filter_map(|s| Some(format!("{} in one {}", s.name, s.topology_key.as_deref()?)))
        .collect();
    match (&spec.topology_key, &spec.preferred_topology_key) {
        _ if !instances.is_empty() => Some(format!(
            "; each instance of {} (networkTopology)",
            instances.join(", ")
        )),
        (Some(required), Some(preferred)) => Some(format!(
            "; the gang in one {required}, one {preferred} preferred (networkTopology)"
        )),
        (Some(required), None) => Some(format!("; the gang in one {required} (networkTopology)")),
        (None, Some(preferred)) => Some(format!(
            "; the gang in one {preferred} preferred (networkTopology)"
        )),
        (None, None) => None,
    }
}

/// The Gangplank PodGroup made for `source`, the note of its Event, and whether that note
/// warns of something in `source` Gangplank does not honour.
fn pod_group(
    source: Foreign,
    (name, namespace, uid): (&str, &str, &str),
    namespace_queue: Option<&str>,
    topologies: &BTreeMap<String, Topology>,
) -> (PodGroup, String, bool) {
    let (queue, from) = match (named_queue(&source), namespace_queue) {
        (Some(q), _) => (q, "named on it"),
        (None, Some(q)) => (q, "its namespace's default"),
        (None, None) => (labels::DEFAULT_QUEUE, "the default queue"),
    };
    let asked = source.min_member.unwrap_or(0);
    let min_member = source.gang_size();
    let mut spec = PodGroupSpec::with_min_member(min_member);
    spec.min_resources = source.min_resources.clone();
    spec.schedule_timeout_seconds = source.schedule_timeout_seconds.filter(|s| *s >= 1);
    let dialect = source.dialect();
    let kind = source.kind;
    let mut size = if asked >= 1 {
        format!("minMember {min_member} from {dialect} {kind} {namespace}/{name}")
    } else {
        format!("minMember 1: {dialect} {kind} {namespace}/{name} sets no minMember")
    };
    let sub_groups = source.volcano.and_then(volcano_sub_groups::mirror);
    let mut not_honoured = Vec::new();
    if let Some(Ok(tree)) = &sub_groups {
        spec.min_member = tree.min_member;
        spec.sub_group_policy = tree.sub_group_policy.clone();
        spec.min_resources = ResourceList::new();
        size = format!(
            "minMember {}, the minimum of the subGroupPolicy of {dialect} PodGroup {namespace}/{name}",
            tree.min_member
        );
        if let Some(volcano) = source.volcano {
            not_honoured = volcano_network_topology::honour(volcano, &mut spec, topologies);
        }
    } else if source.volcano.is_some_and(volcano_network_topology::asked) {
        not_honoured.push(volcano_network_topology::NotHonoured::Flat);
    }
    let warning = matches!(sub_groups, Some(Err(_))) || !not_honoured.is_empty();
    match source.tree {
        Some(Shape::Tree(tree)) => {
            spec.sub_group_policy = tree.sub_group_policy.clone();
            size = format!(
                "minMember {min_member}, the minimum of the tree of CompositePodGroup {namespace}/{name}: {}",
                minimums(&tree.sub_group_policy)
            );
        }
        Some(Shape::Flat { why, .. }) => {
            size = format!(
                "minMember {min_member}, every PodGroup of the tree of CompositePodGroup {namespace}/{name} whole: its sub-groups are not honoured, because {why}"
            );
        }
        _ => {}
    }
    let warning = warning || matches!(source.tree, Some(Shape::Flat { .. }));
    let owner = (source.api_version, kind, name, uid);
    let mut group = made(name, namespace, spec, queue, Some(owner));
    let mut note = format!("{size}; queue {queue} ({from})");
    if let Some(Err(why)) = sub_groups {
        note.push_str(&format!(
            "; its subGroupPolicy is not honoured, the gang is flat: {why}"
        ));
    }
    for why in &not_honoured {
        note.push_str(&format!("; {why}"));
    }
    if let Some(levels) = topology_note(&group.spec) {
        note.push_str(&levels);
    }
    if trainer::controls(source.meta) {
        group.set_members_in_stages();
        note.push_str("; members in stages (a TrainJob's initializers run first)");
    }
    (group, note, warning)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source(metadata: serde_json::Value, spec: serde_json::Value) -> SchedulerPluginsPodGroup {
        let mut meta = json!({"name": "train", "namespace": "ml", "uid": "pg-uid"});
        meta.as_object_mut()
            .unwrap()
            .extend(metadata.as_object().unwrap().clone());
        serde_json::from_value(json!({
            "apiVersion": SCHEDULER_PLUGINS, "kind": "PodGroup", "metadata": meta, "spec": spec
        }))
        .unwrap()
    }

    /// [`super::plan`] on a cluster with no Topology.
    fn plan(
        source: Foreign,
        existing: Option<&PodGroup>,
        namespace_queue: Option<&str>,
    ) -> Option<JobPlan> {
        super::plan(source, existing, namespace_queue, &BTreeMap::new())
    }

    fn created(plan: Option<JobPlan>) -> (PodGroup, String) {
        match plan {
            Some(JobPlan::Create { group, note, .. }) => (*group, note),
            other => panic!("expected a creation, got {other:?}"),
        }
    }

    #[test]
    fn a_kueue_workload_becomes_a_gang_of_every_pod_its_quota_covers_admitted_ahead() {
        let workload: KueueWorkload = serde_json::from_value(json!({
            "apiVersion": kueue::API_VERSION, "kind": "Workload",
            "metadata": {"name": "job-train-5c4f2", "namespace": "ml", "uid": "w-uid"},
            "spec": {"podSets": [{"name": "main", "count": 4, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "16", "memory": "1Gi"}}}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True",
                    "reason": "QuotaReserved", "message": "",
                    "lastTransitionTime": "2026-12-07T06:00:00Z"}],
                "admissionChecks": [{"name": "gangplank", "state": "Pending", "message": "",
                    "lastTransitionTime": "2026-12-07T06:00:00Z"}]}
        }))
        .unwrap();
        assert!(kueue_wants_a_gang(&workload, &|n| n == "gangplank"));
        assert!(!kueue_wants_a_gang(&workload, &|n| n == "another"));
        let resources = kueue_min_resources(&workload);
        let (group, note) = created(plan(Foreign::kueue(&workload, &resources), None, None));
        assert_eq!(group.spec.min_member, 4);
        assert_eq!(group.spec.min_resources["cpu"].0, "64");
        assert_eq!(group.spec.min_resources["memory"].0, "4294967296");
        let owner = owner(&group).expect("owned by its Workload");
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Workload", "w-uid")
        );
        assert!(kueue::controls(&group) && group.admitted_ahead_of_members());
        assert_eq!(
            note,
            "minMember 4 from kueue.x-k8s.io Workload ml/job-train-5c4f2; queue default (the default queue)"
        );
    }

    #[test]
    fn a_training_operator_pod_group_becomes_a_gang_of_its_size_owned_by_it() {
        let pg = source(
            json!({"annotations": {(labels::QUEUE_LABEL): "research"}}),
            json!({"minMember": 4, "minResources": {"cpu": "16"}, "scheduleTimeoutSeconds": 30}),
        );
        let (group, note) = created(plan((&pg).into(), None, Some("team")));
        assert_eq!(group.spec.min_member, 4);
        assert_eq!(group.spec.queue.as_deref(), Some("research"));
        assert_eq!(group.spec.schedule_timeout_seconds, Some(30));
        assert_eq!(group.spec.min_resources.len(), 1);
        let owner = owner(&group).expect("owned by its source");
        assert_eq!(
            (owner.name.as_str(), owner.uid.as_str()),
            ("train", "pg-uid")
        );
        assert_eq!(
            note,
            "minMember 4 from scheduling.x-k8s.io PodGroup ml/train; queue research (named on it)"
        );
    }

    #[test]
    fn a_pod_group_trainer_wrote_for_a_train_job_is_admitted_ahead_of_its_members() {
        let owner = json!([{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "name": "train", "uid": "tj-uid", "controller": true}]);
        let pg = source(
            json!({"ownerReferences": owner}),
            json!({"minMember": 5, "minResources": {"cpu": "33"}}),
        );
        let (group, note) = created(plan((&pg).into(), None, Some("team")));
        assert!(group.admitted_ahead_of_members(), "{:?}", group.metadata);
        assert!(
            note.ends_with("members in stages (a TrainJob's initializers run first)"),
            "{note}"
        );
        let (group, _) = created(plan(
            (&source(json!({}), json!({"minMember": 5}))).into(),
            None,
            None,
        ));
        assert!(!group.admitted_ahead_of_members());
    }

    #[test]
    fn a_volcano_pod_group_of_sub_groups_is_a_gang_of_them_admitted_once_its_members_come() {
        let volcano = |policy: serde_json::Value| -> VolcanoPodGroup {
            serde_json::from_value(
                json!({"apiVersion": volcano::API_VERSION, "kind": "PodGroup",
                "metadata": {"name": "svc", "namespace": "ml", "uid": "pg-uid"},
                "spec": {"minMember": 5, "minResources": {"cpu": "22"}, "subGroupPolicy": policy}}),
            )
            .unwrap()
        };
        let role = |name: &str, size: i32, min: i32| {
            json!({"name": name, "subGroupSize": size, "minSubGroups": min,
                "labelSelector": {"matchLabels": {"role": name}}, "matchLabelKeys": ["instance"]})
        };
        let service = volcano(json!([role("prefill", 2, 2), role("decode", 4, 1)]));
        let Some(JobPlan::Create {
            group,
            note,
            warning,
        }) = plan((&service).into(), None, None)
        else {
            panic!("expected a creation");
        };
        assert_eq!(group.spec.min_member, 8);
        assert_eq!(group.spec.sub_group_policy.len(), 2);
        assert!(group.spec.min_resources.is_empty());
        assert!(
            !group.admitted_ahead_of_members(),
            "its members' labels decide"
        );
        assert!(!warning, "{note}");
        assert!(
            note.starts_with("minMember 8, the minimum of the subGroupPolicy of scheduling.volcano.sh PodGroup ml/svc"),
            "{note}"
        );

        let mut topology_only = role("decode", 4, 0);
        topology_only["networkTopology"] = json!({"mode": "hard", "highestTierAllowed": 1});
        let loose = volcano(json!([role("prefill", 2, 2), topology_only]));
        let Some(JobPlan::Create {
            group,
            note,
            warning,
        }) = plan((&loose).into(), None, None)
        else {
            panic!("expected a creation");
        };
        assert_eq!(group.spec.min_member, 5, "flat, Volcano's minMember");
        assert!(group.spec.sub_group_policy.is_empty());
        assert!(group.admitted_ahead_of_members(), "as any Volcano PodGroup");
        assert!(warning);
        assert!(
            note.contains("its subGroupPolicy is not honoured, the gang is flat: sub-group \"decode\" has minSubGroups 0")
                && note.contains("networkTopology (HyperNode tiers) is not honoured"),
            "{note}"
        );
    }

    #[test]
    fn a_kubernetes_pod_group_is_a_gang_of_its_min_count_and_a_basic_one_a_gang_of_one() {
        let upstream = |policy: serde_json::Value| -> UpstreamPodGroup {
            serde_json::from_value(json!({"apiVersion": UPSTREAM, "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": "ml", "uid": "pg-uid"},
                "spec": {"schedulingPolicy": policy}}))
            .unwrap()
        };
        let gang = upstream(json!({"gang": {"minCount": 4}}));
        let (group, note) = created(plan((&gang).into(), None, Some("team")));
        assert_eq!(group.spec.min_member, 4);
        assert_eq!(group.spec.queue.as_deref(), Some("team"));
        assert_eq!(owner(&group).unwrap().api_version, UPSTREAM);
        assert!(
            note.starts_with("minMember 4 from scheduling.k8s.io PodGroup ml/train"),
            "{note}"
        );
        let basic = upstream(json!({"basic": {}}));
        let (group, _) = created(plan((&basic).into(), None, None));
        assert_eq!(group.spec.min_member, 1);
    }

    #[test]
    fn the_pod_group_the_job_controller_made_for_a_job_with_its_own_group_gets_none() {
        let made_for = |job: &str| -> UpstreamPodGroup {
            serde_json::from_value(json!({"apiVersion": UPSTREAM, "kind": "PodGroup",
                "metadata": {"name": format!("{job}-5ddf-pgt-0"), "namespace": "ml", "uid": "u",
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                        "uid": "job-uid", "controller": true}]},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}))
            .unwrap()
        };
        let job = |labels: serde_json::Value| -> Arc<Job> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "train", "namespace": "ml",
                    "labels": labels}, "spec": {"template": {"spec": {"containers": []}}}}))
                .unwrap(),
            )
        };
        let queued = |_: &str, name: &str| {
            (name == "train").then(|| job(json!({(labels::QUEUE_LABEL): "q"})))
        };
        let no_kueue = &KueueJobs::new();
        assert!(left_to_its_job(
            &(&made_for("train")).into(),
            queued,
            no_kueue
        ));
        let plain = |_: &str, _: &str| Some(job(json!({})));
        assert!(
            !left_to_its_job(&(&made_for("train")).into(), plain, no_kueue),
            "a Job naming no queue or group: its pods join this PodGroup"
        );
        assert!(
            left_to_its_job(
                &(&made_for("train")).into(),
                plain,
                &KueueJobs::from([(("ml".into(), "train".into()), true)])
            ),
            "a Job whose Kueue Workload has Gangplank's check: its pods join the Workload's group"
        );
        assert!(
            !left_to_its_job(&(&made_for("other")).into(), queued, no_kueue),
            "no such Job"
        );
        let operators: SchedulerPluginsPodGroup = source(
            json!({"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                "uid": "job-uid", "controller": true}]}),
            json!({"minMember": 2}),
        );
        assert!(!left_to_its_job(&(&operators).into(), queued, no_kueue));
    }

    #[test]
    fn a_jobs_kueue_workload_says_whether_its_pods_join_a_group_of_gangplanks_check() {
        let workload = |job: &str, check: &str| -> Arc<KueueWorkload> {
            Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                    "metadata": {"name": format!("job-{job}-1"), "namespace": "ml",
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                            "name": job, "uid": "u", "controller": true}]},
                    "spec": {"podSets": []},
                    "status": {"admissionChecks": [{"name": check, "state": "Pending",
                        "message": ""}]}
                }))
                .unwrap(),
            )
        };
        let jobs = kueue_jobs(
            &[workload("train", "gangplank"), workload("etl", "other")],
            &|name| name == "gangplank",
        );
        assert_eq!(jobs.get(&("ml".into(), "train".into())), Some(&true));
        assert_eq!(jobs.get(&("ml".into(), "etl".into())), Some(&false));
        let job = |labels: serde_json::Value| -> Job {
            serde_json::from_value(json!({"metadata": {"name": "t", "labels": labels}})).unwrap()
        };
        assert!(queued_by_kueue(&job(
            json!({"kueue.x-k8s.io/queue-name": "lq"})
        )));
        assert!(!queued_by_kueue(&job(json!({}))));
    }

    #[test]
    fn a_kubernetes_1_36_pod_group_of_v1alpha2_is_read_the_same_and_owns_its_group() {
        let alpha: UpstreamPodGroupV1alpha2 = serde_json::from_value(json!({
            "apiVersion": UPSTREAM_V1ALPHA2, "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "uid": "pg-uid"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}, "disruptionMode": "Pod"}}))
        .unwrap();
        let (group, _) = created(plan((&alpha).into(), None, None));
        assert_eq!(group.spec.min_member, 3);
        assert_eq!(owner(&group).unwrap().api_version, UPSTREAM_V1ALPHA2);
        assert_eq!(
            plan((&alpha).into(), Some(&group), None),
            None,
            "its own group, already made: nothing to do"
        );
    }

    #[test]
    fn without_a_queue_of_its_own_it_takes_the_namespace_default_then_default() {
        let pg = source(json!({}), json!({"minMember": 2}));
        let (group, _) = created(plan((&pg).into(), None, Some("team")));
        assert_eq!(group.spec.queue.as_deref(), Some("team"));
        let (group, _) = created(plan((&pg).into(), None, None));
        assert_eq!(group.spec.queue.as_deref(), Some(labels::DEFAULT_QUEUE));
    }

    #[test]
    fn a_missing_or_zero_min_member_makes_a_gang_of_one_and_says_so() {
        let pg = source(
            json!({}),
            json!({"minMember": 0, "scheduleTimeoutSeconds": 0}),
        );
        let (group, note) = created(plan((&pg).into(), None, None));
        assert_eq!(group.spec.min_member, 1);
        assert_eq!(group.spec.schedule_timeout_seconds, None);
        assert!(note.starts_with("minMember 1: "), "{note}");
    }

    #[test]
    fn its_own_group_is_left_alone_and_someone_elses_is_reported() {
        let pg = source(json!({}), json!({"minMember": 2}));
        let (mine, _) = created(plan((&pg).into(), None, None));
        assert_eq!(plan((&pg).into(), Some(&mine), None), None);
        let theirs = PodGroup::new("train", PodGroupSpec::with_min_member(3));
        assert!(matches!(
            plan((&pg).into(), Some(&theirs), None),
            Some(JobPlan::Conflict { .. })
        ));
    }

    #[test]
    fn a_kubernetes_pod_group_s_new_min_count_resizes_its_waiting_group_only() {
        let upstream = |min_count: i32| -> UpstreamPodGroup {
            serde_json::from_value(json!({"apiVersion": UPSTREAM, "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": "ml", "uid": "pg-uid"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}}))
            .unwrap()
        };
        let (waiting, _) = created(plan((&upstream(4)).into(), None, None));
        assert_eq!(plan((&upstream(4)).into(), Some(&waiting), None), None);
        let Some(JobPlan::Resize {
            min_member, note, ..
        }) = plan((&upstream(3)).into(), Some(&waiting), None)
        else {
            panic!("a waiting group follows minCount");
        };
        assert_eq!(min_member, 3);
        assert!(
            note.starts_with("minMember 4 -> 3: minCount of scheduling.k8s.io PodGroup ml/train"),
            "{note}"
        );
        let mut admitted = waiting.clone();
        admitted.status = Some(PodGroupStatus {
            phase: PodGroupPhase::Inqueue,
            ..Default::default()
        });
        assert_eq!(
            plan((&upstream(3)).into(), Some(&admitted), None),
            None,
            "an admitted gang keeps the size it was admitted as"
        );
        let pg = source(json!({}), json!({"minMember": 2}));
        let (mine, _) = created(plan((&pg).into(), None, None));
        let grown = source(json!({}), json!({"minMember": 5}));
        assert_eq!(
            plan((&grown).into(), Some(&mine), None),
            None,
            "other dialects: created once"
        );
    }

    #[test]
    fn a_source_being_deleted_gets_nothing() {
        let pg = source(
            json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}),
            json!({"minMember": 2}),
        );
        assert_eq!(plan((&pg).into(), None, None), None);
    }
}
