//! Pods: the mutation that makes a pod of a group or queue a Gangplank pod, and the check
//! that refuses new pods for a closed queue, both in the one call the API server makes per
//! pod (a second, validating call would cost every managed pod another round trip).
//!
//! **Which pods are Gangplank's.** A pod belongs to a group when it names one
//! ([`labels::pod_group_of`]: our label, scheduler-plugins' label, Volcano's annotation,
//! LeaderWorkerSet's group key on a pod that names a queue; else
//! Kubernetes' `spec.schedulingGroup.podGroupName`, unless the pod names a queue and its
//! workload or Job has a group of its own, see below), and
//! to a queue when it names one ([`labels::queue_of`]) or, naming neither, when its namespace
//! carries a default queue (label `scheduling.gangplank.dev/queue` on the Namespace). A pod
//! with neither is not Gangplank's and is admitted untouched.
//!
//! **A queue but no group.** DESIGN says such a pod is a group of one. The webhook does not
//! invent a group name for it: at CREATE a pod made by a controller has no name yet (only a
//! `generateName`), and a made-up label would point at a PodGroup nobody creates. The pod
//! keeps no group label and the rest of Gangplank treats it as its own group. One exception:
//! a pod whose controller is a batch/v1 Job and whose own labels name a queue (copied from the
//! Job's template, which the Job webhook fills from the Job's queue label) joins the group
//! named after the Job, the PodGroup the controller creates for that Job. This is how Jobs
//! created with `generateName` (whose name the Job webhook cannot know) still form one gang.
//! Likewise a pod of a workload of a kind Gangplank groups by ([`workloads::of`]: its
//! controller is a Kubeflow training job or a RayCluster, or JobSet's, the MPI operator's or
//! spark-operator's labels name its JobSet, MPIJob or SparkApplication) that
//! names a queue or lives in a namespace with a default queue joins the group named after the
//! workload, which the controller creates sized from the
//! workload's spec (`crate::controller::workloads`): its operator needs no gang flag. (A pod of
//! a LeaderWorkerSet replica needs none either: its group key names its group once the pod
//! names a queue, [`leader_worker_set`].) The
//! workload comes before a controlling Job (a JobSet's pods and an MPI launcher are controlled
//! by Jobs of the workload). Both come before the Kubernetes PodGroup the pod names in
//! `spec.schedulingGroup`: with the `WorkloadWithJob` feature gate, the Job controller gives
//! every Job such a PodGroup (of a `basic` policy unless the Job's `spec.scheduling` asks for
//! a gang) and names it on the Job's pods, and the Job's own gang is the one its queue sized
//! (`crate::controller::foreign_groups` leaves that PodGroup without a Gangplank one).
//!
//! A pod whose Kubernetes PodGroup is a child of a CompositePodGroup joins the gang of the
//! tree's root instead, and gets the labels that place it in the tree
//! ([`crate::api::composite_pod_group`]); one whose PodGroup or its parent the cache does not
//! show yet joins that PodGroup, and the controller moves it into the tree's gang once it does.
//! A pod whose PodGroup's parents run deeper than 4 levels, or in a circle, is refused.
//! A pod of a Workload Kueue admitted (annotated `kueue.x-k8s.io/workload`) joins the
//! Gangplank PodGroup of the Workload's name whenever one exists, whatever else it names: the
//! controller makes it for a Workload that waits on Gangplank's check
//! ([`crate::api::kueue`]).
//!
//! **Mutation** (CREATE only; gates can only be added at creation, and resources and most of a
//! pod are immutable after it):
//! 1. labels normalised: `scheduling.gangplank.dev/pod-group` set to the group, whatever key
//!    named it; `scheduling.gangplank.dev/queue` set when the queue came from Volcano's
//!    label or annotation or from the namespace. A pod of a group keeps no namespace default: its
//!    PodGroup's `spec.queue` decides its queue.
//! 2. the scheduling gate `scheduling.gangplank.dev/admission`, or admission on arrival, and
//! 3. the marker resources: both in [`super::pod_gate`].
//!
//! A pod whose priority differs from that of the Kubernetes PodGroup it names in
//! `spec.schedulingGroup` is refused: the scheduler would place none of that group's pods.
//!
//! A pod of a group or queue with `spec.nodeName` set is refused: it would bypass the scheduler
//! and its queue (the API server refuses a gate on a bound pod), running past the queue's
//! capability and share.
//!
//! Group and queue names must be valid PodGroup and Queue names; a Volcano annotation (which
//! may hold any text) that does not is refused rather than copied into a label that would make
//! the API server refuse the pod with a less helpful message. The gang size a pod gives for its
//! missing PodGroup ([`labels::gang_size_of`]: our `min-member` annotation, or the size of a
//! LeaderWorkerSet replica on its leader, whatever names its group) must be at most
//! [`gangplank_core::limits::MAX_MEMBERS`]: this is where that number enters Gangplank.
//!
//! **The queue check** (CREATE, before the mutation): a pod whose group is in a Closed queue
//! is refused, unless the group is already admitted (a replacement member of a running gang
//! must be allowed, or a Job could never restart a failed member). A pod whose group has no PodGroup yet is checked
//! against its own queue label, if any; a pod of no group against its queue. A queue that does
//! not exist is refused too (except `default`, which Gangplank creates). A webhook that runs
//! after this one and relabels the pod makes the API server call this one again
//! (`reinvocationPolicy: IfNeeded`), so the check sees the labels the pod is created with.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::core::admission::{AdmissionRequest, Operation};
use serde_json::json;

use super::lookup::{Lookup, NamespaceLookup};
use super::patch::Patcher;
use super::queues::{check_open, unavailable};
use super::review::{Denial, FieldErrors, Verdict};
use super::{Webhooks, name_problem, pod_gate};
use crate::api::composite_pod_group::{self, NoRoot};
use crate::api::{kueue, labels, leader_worker_set, workloads};
use crate::cache::lookup::TreeOf;

/// Where a pod's group or queue name came from: the field a denial points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Label(&'static str),
    Annotation(&'static str),
    /// The pod's controller is the Job of that name.
    JobOwner,
    /// The pod belongs to the workload of that name, of a kind Gangplank groups by
    /// ([`workloads::of`]).
    WorkloadOwner(&'static str),
    /// The pod's namespace's default queue.
    Namespace(String),
    /// Kubernetes' own reference to the pod's PodGroup (`scheduling.k8s.io`).
    SchedulingGroup,
}

impl Source {
    /// The field, spelled as in a denial.
    pub fn field(&self) -> String {
        match self {
            Source::Label(key) => format!("metadata.labels[{key}]"),
            Source::Annotation(key) => format!("metadata.annotations[{key}]"),
            Source::JobOwner => "metadata.ownerReferences (controller Job)".to_owned(),
            Source::WorkloadOwner(kind) => {
                format!("metadata.ownerReferences or labels (the pod's {kind})")
            }
            Source::Namespace(ns) => format!("the label {} of namespace {ns}", labels::QUEUE_LABEL),
            Source::SchedulingGroup => "spec.schedulingGroup.podGroupName".to_owned(),
        }
    }
}

/// A group or queue name and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub name: String,
    pub source: Source,
}

/// The group and queue a pod asks for, per the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    pub group: Option<Named>,
    pub queue: Option<Named>,
}

impl Membership {
    /// Reads the pod's keys; asks `namespaces` only when the pod names neither group nor queue.
    pub fn of(pod: &Pod, namespace: &str, namespaces: &dyn NamespaceLookup) -> Lookup<Self> {
        let meta = &pod.metadata;
        let (labels_map, annotations) = (meta.labels.as_ref(), meta.annotations.as_ref());
        let group = labels::pod_group_of(labels_map, annotations).map(|name| Named {
            name: name.to_owned(),
            source: source_of(
                name,
                labels_map,
                annotations,
                &[
                    labels::POD_GROUP_LABEL,
                    labels::SCHEDULER_PLUGINS_POD_GROUP_LABEL,
                    leader_worker_set::GROUP_KEY_LABEL,
                ],
                &[labels::VOLCANO_GROUP_NAME_ANNOTATION],
            ),
        });
        let queue = labels::queue_of(labels_map, annotations).map(|name| Named {
            name: name.to_owned(),
            source: queue_source(name, labels_map, annotations),
        });
        let upstream = scheduling_group(pod);
        match (group, queue) {
            (None, None) if upstream.is_some() => Ok(Membership {
                group: upstream,
                queue: None,
            }),
            (None, None) => {
                let queue = namespaces.namespace_queue(namespace)?.map(|name| Named {
                    name,
                    source: Source::Namespace(namespace.to_owned()),
                });
                // A workload's pod keeps no namespace default (see the module docs).
                match queue.as_ref().and_then(|_| controller_workload(pod)) {
                    Some(group) => Ok(Membership {
                        group: Some(group),
                        queue: None,
                    }),
                    None => Ok(Membership { group: None, queue }),
                }
            }
            (None, Some(queue)) => Ok(Membership {
                group: controller_workload(pod)
                    .or_else(|| {
                        controller_job(pod).map(|job| Named {
                            name: job.to_owned(),
                            source: Source::JobOwner,
                        })
                    })
                    .or(upstream),
                queue: Some(queue),
            }),
            (group, queue) => Ok(Membership { group, queue }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.group.is_none() && self.queue.is_none()
    }
}

/// The key that named the queue `name` ([`labels::queue_of`]).
pub fn queue_source(
    name: &str,
    labels_map: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
) -> Source {
    source_of(
        name,
        labels_map,
        annotations,
        &[labels::QUEUE_LABEL, labels::VOLCANO_QUEUE_NAME_LABEL],
        &[labels::VOLCANO_QUEUE_NAME_ANNOTATION],
    )
}

/// The first key, in precedence order, holding `value`: the one `pod_group_of`/`queue_of`
/// took it from.
fn source_of(
    value: &str,
    labels_map: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
    label_keys: &[&'static str],
    annotation_keys: &[&'static str],
) -> Source {
    let holds = |map: Option<&BTreeMap<String, String>>, key: &str| {
        map.and_then(|m| m.get(key)).map(String::as_str) == Some(value)
    };
    label_keys
        .iter()
        .find(|key| holds(labels_map, key))
        .map(|key| Source::Label(key))
        .or_else(|| {
            annotation_keys
                .iter()
                .find(|key| holds(annotations, key))
                .map(|key| Source::Annotation(key))
        })
        .unwrap_or(Source::Label(label_keys[0]))
}

/// The `scheduling.k8s.io` PodGroup the pod names in `spec.schedulingGroup`, if any.
fn scheduling_group(pod: &Pod) -> Option<Named> {
    let spec = pod.spec.as_ref()?.scheduling_group.as_ref()?;
    let name = spec.pod_group_name.as_deref().filter(|n| !n.is_empty())?;
    Some(Named {
        name: name.to_owned(),
        source: Source::SchedulingGroup,
    })
}

/// The name of the batch/v1 Job that controls the pod, if one does.
fn controller_job(pod: &Pod) -> Option<&str> {
    crate::api::controller(&pod.metadata)
        .filter(|o| o.kind == "Job" && o.api_version == "batch/v1")
        .map(|o| o.name.as_str())
        .filter(|name| !name.is_empty())
}

/// The workload the pod belongs to ([`workloads::of`]), as its group.
fn controller_workload(pod: &Pod) -> Option<Named> {
    let owner = workloads::of(&pod.metadata)?;
    Some(Named {
        name: owner.name,
        source: Source::WorkloadOwner(owner.kind.kind),
    })
}

/// `POST /webhooks/mutate/pods`.
pub fn mutate(w: &Webhooks, request: &AdmissionRequest<Pod>) -> Result<Verdict, Denial> {
    if request.operation != Operation::Create {
        return Ok(Verdict::allow());
    }
    let pod = request.object.as_ref().expect("checked when decoded");
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let mut membership = Membership::of(pod, namespace, w.lookup()).map_err(unavailable)?;
    join_its_kueue_workload(w, namespace, pod, &mut membership)?;
    if membership.is_empty() {
        return Ok(Verdict::allow());
    }
    let tree = join_its_tree(w, namespace, &mut membership)?;

    check_names_and_size(pod, &membership)?;
    check_queue(w, namespace, &membership)?;
    check_priority(w, namespace, pod)?;

    let mut patch = Patcher::new(pod);
    if let Some(group) = &membership.group {
        patch.set(
            &["metadata", "labels", labels::POD_GROUP_LABEL],
            json!(group.name),
        );
    }
    if let Some(queue) = &membership.queue {
        patch.set(
            &["metadata", "labels", labels::QUEUE_LABEL],
            json!(queue.name),
        );
    }
    if let Some((leaf, tree)) = &tree {
        patch.set(
            &["metadata", "labels", composite_pod_group::PARENT_LABEL],
            json!(tree.parent),
        );
        patch.set(
            &["metadata", "labels", composite_pod_group::LEAF_LABEL],
            json!(leaf),
        );
    }

    let spec = pod.spec.as_ref();
    let bound = spec
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if bound {
        return Err(Denial::invalid(
            "spec.nodeName",
            "a pod of a group or queue is placed by the scheduler once its queue admits it, and a pod created on a node would run outside its queue; remove spec.nodeName (a nodeSelector on kubernetes.io/hostname keeps it to one node)",
        ));
    }
    let unserved = (w.settings().schedulers)
        .unserved_name(spec.and_then(|s| s.scheduler_name.as_deref()))
        .map(|name| {
            format!(
                "spec.schedulerName {name:?} is not a scheduler this cluster serves (Gangplank's --scheduler-names): nobody will place this pod, so Gangplank does not admit its gang (reason SchedulerNotServed), which holds no room"
            )
        });
    let group = membership.group.as_ref().map(|g| g.name.as_str());
    let arrived =
        w.settings().gate_pods && pod_gate::gate(w, request, group, unserved.is_none(), &mut patch);
    pod_gate::mark(w, spec, arrived, &mut patch);
    let verdict = Verdict::patch(patch.into_patch());
    Ok(match unserved {
        Some(warning) => verdict.warn(warning),
        None => verdict,
    })
}

/// Refuses a group or queue name that is no valid name, and a gang size (annotation) out of
/// bounds.
fn check_names_and_size(pod: &Pod, membership: &Membership) -> Result<(), Denial> {
    let mut errors = FieldErrors::new();
    for named in [&membership.group, &membership.queue].into_iter().flatten() {
        if let Some(problem) = name_problem(&named.name) {
            errors.add(named.source.field(), problem);
        }
    }
    // A replica's leader is bounded whatever names its group: with LWS's Volcano provider its
    // size is the Volcano PodGroup's minMember.
    let leads_a_replica = leader_worker_set::leads(pod.metadata.labels.as_ref());
    if let Some((key, size)) =
        labels::gang_size_of(pod.metadata.annotations.as_ref(), leads_a_replica)
    {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        errors.members(format!("metadata.annotations[{key}]"), size);
    }
    errors.into_result()
}

/// A pod whose Kubernetes PodGroup is a leaf of a tree of CompositePodGroups joins the gang of
/// the tree's root ([`composite_pod_group`]); returns its PodGroup's name and its tree.
fn join_its_tree(
    w: &Webhooks,
    namespace: &str,
    membership: &mut Membership,
) -> Result<Option<(String, TreeOf)>, Denial> {
    let Some(group) = membership
        .group
        .as_mut()
        .filter(|g| g.source == Source::SchedulingGroup)
    else {
        return Ok(None);
    };
    match w.lookup().kubernetes_tree(namespace, &group.name) {
        // A CompositePodGroup the cache does not show yet: moved by the controller once it does.
        None | Some(Err(NoRoot::Unknown(_))) => Ok(None),
        Some(Err(problem)) => Err(Denial::invalid(
            "spec.schedulingGroup.podGroupName",
            format!("PodGroup {namespace}/{}: {problem}", group.name),
        )),
        Some(Ok(tree)) => {
            let leaf = std::mem::replace(&mut group.name, tree.root.clone());
            Ok(Some((leaf, tree)))
        }
    }
}

/// A pod of a Workload Kueue admitted (annotated [`kueue::WORKLOAD_ANNOTATION`]) joins the
/// Gangplank PodGroup of the Workload's name where one exists: the one the controller made
/// for a Workload waiting on Gangplank's check (`crate::api::kueue`).
fn join_its_kueue_workload(
    w: &Webhooks,
    namespace: &str,
    pod: &Pod,
    membership: &mut Membership,
) -> Result<(), Denial> {
    let annotations = pod.metadata.annotations.as_ref();
    let Some(workload) = annotations.and_then(|a| a.get(kueue::WORKLOAD_ANNOTATION)) else {
        return Ok(());
    };
    if w.lookup()
        .pod_group(namespace, workload)
        .map_err(unavailable)?
        .is_some()
    {
        membership.group = Some(Named {
            name: workload.clone(),
            source: Source::Annotation(kueue::WORKLOAD_ANNOTATION),
        });
        if matches!(
            &membership.queue,
            Some(Named {
                source: Source::Namespace(_),
                ..
            })
        ) {
            membership.queue = None;
        }
    }
    Ok(())
}

/// Refuses a new pod of a Closed or missing queue (see the module docs).
fn check_queue(w: &Webhooks, namespace: &str, membership: &Membership) -> Result<(), Denial> {
    let lookup = w.lookup();
    if let Some(group) = &membership.group {
        let pod_group = lookup
            .pod_group(namespace, &group.name)
            .map_err(unavailable)?;
        if let Some(pod_group) = pod_group {
            if pod_group.is_admitted() {
                return Ok(());
            }
            let field = format!(
                "{} (PodGroup {namespace}/{} has spec.queue {:?})",
                group.source.field(),
                group.name,
                pod_group.queue
            );
            return check_open(lookup, &pod_group.queue, namespace, &field);
        }
    }
    match &membership.queue {
        Some(queue) => check_open(lookup, &queue.name, namespace, &queue.source.field()),
        None => Ok(()),
    }
}

/// Refuses a pod whose priority differs from that of the Kubernetes PodGroup it names: the
/// scheduler places no member of such a group, so it would wait for ever, admitted and holding
/// its queue's room.
fn check_priority(w: &Webhooks, namespace: &str, pod: &Pod) -> Result<(), Denial> {
    let Some(group) = scheduling_group(pod) else {
        return Ok(());
    };
    let Some(expected) = w
        .lookup()
        .kubernetes_pod_group_priority(namespace, &group.name)
    else {
        return Ok(());
    };
    let spec = pod.spec.as_ref();
    let priority = spec.and_then(|s| s.priority).unwrap_or(0);
    if priority == expected {
        return Ok(());
    }
    let class = spec
        .and_then(|s| s.priority_class_name.as_deref())
        .unwrap_or_default();
    Err(Denial::invalid(
        "spec.priority",
        format!(
            "{priority} (priorityClassName {class:?}) differs from {expected}, the priority of PodGroup {namespace}/{} of scheduling.k8s.io: the scheduler places no pod whose priority differs from its PodGroup's, so this one would wait for ever; give it the PodGroup's priorityClassName",
            group.name
        ),
    ))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSchedulingGroup;

    use super::*;
    use crate::webhooks::lookup::StaticLookup;

    fn pod(metadata: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": metadata, "spec": {"containers": [{"name": "c"}]}}),
        )
        .unwrap()
    }

    fn membership(pod: &Pod) -> Membership {
        let lookup = StaticLookup {
            namespaces: vec![("labelled".into(), "team".into())],
            ..Default::default()
        };
        Membership::of(pod, "labelled", &lookup).unwrap()
    }

    #[test]
    fn the_key_that_named_the_group_is_the_source() {
        let m = membership(&pod(json!({
            "labels": {"scheduling.x-k8s.io/pod-group": "g"},
            "annotations": {"scheduling.k8s.io/group-name": "other"}
        })));
        assert_eq!(
            m.group,
            Some(Named {
                name: "g".into(),
                source: Source::Label(labels::SCHEDULER_PLUGINS_POD_GROUP_LABEL)
            })
        );
        assert_eq!(m.queue, None, "a pod of a group takes no namespace default");
    }

    #[test]
    fn a_pod_naming_nothing_takes_its_namespace_default_queue_and_no_group() {
        let m = membership(&pod(json!({"name": "p"})));
        assert_eq!(m.group, None);
        assert_eq!(
            m.queue,
            Some(Named {
                name: "team".into(),
                source: Source::Namespace("labelled".into())
            })
        );
    }

    #[test]
    fn a_job_pod_with_a_queue_joins_the_group_of_its_job() {
        let m = membership(&pod(json!({
            "generateName": "train-",
            "labels": {"scheduling.gangplank.dev/queue": "research"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                "uid": "u", "controller": true}]
        })));
        assert_eq!(
            m.group,
            Some(Named {
                name: "train".into(),
                source: Source::JobOwner
            })
        );
    }

    fn with_scheduling_group(mut pod: Pod, name: &str) -> Pod {
        pod.spec.as_mut().unwrap().scheduling_group = Some(PodSchedulingGroup {
            pod_group_name: Some(name.into()),
        });
        pod
    }

    #[test]
    fn a_job_pod_with_a_queue_joins_its_job_s_group_not_the_kubernetes_pod_group_it_names() {
        let job_pod = json!({
            "generateName": "train-",
            "labels": {"scheduling.gangplank.dev/queue": "research"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                "uid": "u", "controller": true}]
        });
        let m = membership(&with_scheduling_group(pod(job_pod), "train-5ddf-pgt-0"));
        assert_eq!(
            m.group.map(|g| (g.name, g.source)),
            Some(("train".into(), Source::JobOwner))
        );
    }

    #[test]
    fn a_pod_naming_only_a_kubernetes_pod_group_joins_it_without_the_namespace_queue() {
        let m = membership(&with_scheduling_group(pod(json!({"name": "p"})), "pg"));
        assert_eq!(
            m.group.map(|g| (g.name, g.source)),
            Some(("pg".into(), Source::SchedulingGroup))
        );
        assert_eq!(m.queue, None);
        let queued = pod(json!({"name": "p", "labels": {"scheduling.gangplank.dev/queue": "q"}}));
        let m = membership(&with_scheduling_group(queued, "pg"));
        assert_eq!(m.group.map(|g| g.name), Some("pg".into()));
    }

    #[test]
    fn a_pod_owned_by_a_job_but_not_controlled_by_it_stays_a_group_of_one() {
        let m = membership(&pod(json!({
            "labels": {"scheduling.gangplank.dev/queue": "research"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u"}]
        })));
        assert_eq!(m.group, None);
    }

    #[test]
    fn a_pod_of_a_ray_cluster_in_a_queue_s_scope_joins_the_group_of_its_cluster() {
        let owned = json!({"name": "ray-head", "ownerReferences": [{"apiVersion": "ray.io/v1",
            "kind": "RayCluster", "name": "ray", "uid": "u", "controller": true}]});
        let m = membership(&pod(owned.clone()));
        assert_eq!(
            m.group,
            Some(Named {
                name: "ray".into(),
                source: Source::WorkloadOwner("RayCluster")
            })
        );
        assert_eq!(m.queue, None, "a pod of a group takes no namespace default");
        // Out of every queue's scope it is left alone.
        let m = Membership::of(&pod(owned), "plain", &StaticLookup::default()).unwrap();
        assert!(m.is_empty());
    }

    #[test]
    fn a_pod_of_a_leader_worker_set_replica_naming_a_queue_joins_its_replica_s_group() {
        let worker = json!({"name": "lws-0-1", "labels": {
            (leader_worker_set::GROUP_KEY_LABEL): "k1", (leader_worker_set::WORKER_INDEX_LABEL): "1",
            (labels::QUEUE_LABEL): "research"}});
        let m = membership(&pod(worker));
        assert_eq!(
            m.group,
            Some(Named {
                name: "k1".into(),
                source: Source::Label(leader_worker_set::GROUP_KEY_LABEL)
            })
        );
        // In a namespace's scope only, it is a pod of the queue, which the webhook writes on
        // it: from then on its group key names its group.
        let scoped = json!({"name": "lws-0-1", "labels": {
            (leader_worker_set::GROUP_KEY_LABEL): "k1", (leader_worker_set::WORKER_INDEX_LABEL): "1"}});
        let m = membership(&pod(scoped.clone()));
        assert_eq!(
            (m.group, m.queue.map(|q| q.name)),
            (None, Some("team".into()))
        );
        let m = Membership::of(&pod(scoped), "plain", &StaticLookup::default()).unwrap();
        assert!(m.is_empty(), "out of every queue's scope it is left alone");
        // Before LWS's webhook gave it its worker index, it is a pod of the queue alone.
        let unseen = json!({"name": "lws-0-1", "labels": {
            (leader_worker_set::GROUP_KEY_LABEL): "k1", (labels::QUEUE_LABEL): "research"}});
        assert_eq!(membership(&pod(unseen)).group, None);
    }

    #[test]
    fn an_unlabelled_namespace_leaves_a_pod_naming_nothing_alone() {
        let m = Membership::of(&pod(json!({})), "plain", &StaticLookup::default()).unwrap();
        assert!(m.is_empty());
    }
}
