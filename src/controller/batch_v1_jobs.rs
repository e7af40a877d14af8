//! batch/v1 Jobs that name a queue get a PodGroup: which one, and when to leave things alone.
//!
//! A Job names its queue like a pod does ([`labels::queue_of`]: the label
//! `scheduling.gangplank.dev/queue`, or Volcano's annotation); the Job webhook then puts its
//! pods in the group named after the Job. Jobs that get their queue only from their
//! namespace are not gangs: their pods are groups of one (see `crate::webhooks::pods`).
//!
//! The PodGroup:
//! - is named after the Job, in its namespace, and owned by it (`controller: true`, so
//!   the garbage collector deletes it with the Job; `blockOwnerDeletion` is left unset because
//!   setting it needs `update` on `jobs/finalizers`, which Gangplank's RBAC does not grant);
//! - has `minMember` = the Job's annotation `scheduling.gangplank.dev/min-member` when it is a
//!   positive integer, else the number of pods the Job runs at once,
//!   `min(parallelism, completions)` (parallelism defaults to 1, and a gang larger than
//!   `completions` would never gather), at least 1;
//! - has the Job's queue, the template's `priorityClassName`, and the queue label.
//!
//! It is created once and not updated afterwards: a Job's parallelism may change (elastic
//! Jobs), but changing a running gang's size is the user's decision, made on the PodGroup.
//!
//! Left alone: finished Jobs (Complete or Failed; their pods do not need a gang any more),
//! Jobs of a workload Gangplank groups by (a JobSet's, an MPI launcher: their pods join the
//! workload's group, [`crate::api::workloads::of`]),
//! Jobs being deleted, Jobs whose template names another group (the user manages that group),
//! and a PodGroup of the Job's name that the Job does not own. That one is the user's: it is
//! neither changed nor adopted, and the Job gets a Warning event saying so. A PodGroup owned
//! by an earlier Job of the same name is waited out (the garbage collector deletes it).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::api::{PodGroup, PodGroupSpec, labels, workloads};

use super::status::JobProgress;

/// What to do for one Job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobPlan {
    /// Create this PodGroup; `note` says where `minMember` came from (for the Job's event),
    /// and `warning` whether it had to ignore a bad annotation.
    Create {
        group: Box<PodGroup>,
        note: String,
        warning: bool,
    },
    /// A PodGroup of the Job's name exists and belongs to someone else.
    Conflict { message: String },
    /// Set the existing PodGroup's `minMember`, and its sub-groups when given (Kubernetes'
    /// PodGroups, whose `minCount` may change, and trees of CompositePodGroups, which grow;
    /// `note` says so, for the Event).
    Resize {
        min_member: i32,
        sub_group_policy: Option<Vec<crate::api::pod_group::SubGroupPolicy>>,
        note: String,
    },
}

/// The Job's name when it takes part in gang scheduling and is not finished or deleted.
pub fn gang_name(job: &Job) -> Option<&str> {
    let meta = &job.metadata;
    if meta.deletion_timestamp.is_some() || finished(job) || workloads::of(meta).is_some() {
        return None;
    }
    labels::queue_of(meta.labels.as_ref(), meta.annotations.as_ref())?;
    let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
    let template = job.spec.as_ref()?.template.metadata.as_ref();
    match labels::pod_group_of(
        template.and_then(|m| m.labels.as_ref()),
        template.and_then(|m| m.annotations.as_ref()),
    ) {
        Some(group) if group != name => None,
        _ => Some(name),
    }
}

/// Whether the Job's pods join a group Gangplank names for them (the Job's own, or one its
/// template names): the Job or its template names a queue, or the template a group. Such pods
/// do not join the Kubernetes PodGroup that the Job controller makes for the Job under the
/// `WorkloadWithJob` feature gate (`crate::webhooks::pods`).
pub fn names_its_pods_group(job: &Job) -> bool {
    let meta = &job.metadata;
    let template = job.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
    let (labels_map, annotations) = (
        template.and_then(|m| m.labels.as_ref()),
        template.and_then(|m| m.annotations.as_ref()),
    );
    labels::queue_of(meta.labels.as_ref(), meta.annotations.as_ref()).is_some()
        || labels::queue_of(labels_map, annotations).is_some()
        || labels::pod_group_of(labels_map, annotations).is_some()
}

/// What to do for `job`, given the PodGroup of the Job's name if one exists. `None`: nothing.
pub fn plan(job: &Job, existing: Option<&PodGroup>) -> Option<JobPlan> {
    let name = gang_name(job)?;
    let uid = job.metadata.uid.as_deref()?;
    let namespace = job.metadata.namespace.as_deref()?;
    let Some(existing) = existing else {
        let (min_member, note, warning) = min_member(job);
        return Some(JobPlan::Create {
            group: Box::new(pod_group(job, name, namespace, uid, min_member)),
            note,
            warning,
        });
    };
    match controller_job(existing) {
        Some(owner) if owner.uid == uid => None,
        Some(owner) if owner.name == name => None,
        _ => Some(JobPlan::Conflict {
            message: format!(
                "PodGroup {namespace}/{name} already exists and is not owned by this Job, so Gangplank leaves it as it is: the Job's pods join it (minMember {}, queue {}). Delete it to let Gangplank create one from the Job, or give the Job another name.",
                existing.spec.min_member,
                existing.spec.queue_name()
            ),
        }),
    }
}

/// The Job's own Complete or Failed condition is True.
pub fn finished(job: &Job) -> bool {
    state(job) != JobProgress::Active
}

/// Where the Job stands, from its `Complete` and `Failed` conditions.
pub fn state(job: &Job) -> JobProgress {
    let conditions = job
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten());
    let mut state = JobProgress::Active;
    for c in conditions.filter(|c| c.status == "True") {
        match c.type_.as_str() {
            "Failed" => {
                return JobProgress::Failed {
                    reason: c.reason.clone().unwrap_or_default(),
                    message: c.message.clone().unwrap_or_default(),
                };
            }
            "Complete" => state = JobProgress::Complete,
            _ => {}
        }
    }
    state
}

/// The batch/v1 Job that controls `group`, if one does.
pub fn controller_job(group: &PodGroup) -> Option<&OwnerReference> {
    crate::api::controller(&group.metadata)
        .filter(|o| o.kind == "Job" && o.api_version == "batch/v1")
}

/// `minMember` for the Job's PodGroup, a phrase saying where it came from, and whether a bad
/// annotation was ignored.
fn min_member(job: &Job) -> (i32, String, bool) {
    let spec = job.spec.as_ref();
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    let at_once = match spec.and_then(|s| s.completions) {
        Some(completions) => parallelism.min(completions),
        None => parallelism,
    }
    .max(1);
    let from_job = if spec
        .and_then(|s| s.completions)
        .is_some_and(|c| c < parallelism)
    {
        format!("minMember {at_once} from spec.completions")
    } else {
        format!("minMember {at_once} from spec.parallelism")
    };
    let annotation = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::MIN_MEMBER_ANNOTATION));
    match annotation.map(|v| v.trim().parse::<i32>()) {
        None => (at_once, from_job, false),
        Some(Ok(n)) if n >= 1 => (
            n,
            format!(
                "minMember {n} from the annotation {}",
                labels::MIN_MEMBER_ANNOTATION
            ),
            false,
        ),
        Some(_) => (
            at_once,
            format!(
                "{from_job}; the annotation {} is not a positive integer and was ignored",
                labels::MIN_MEMBER_ANNOTATION
            ),
            true,
        ),
    }
}

/// A PodGroup Gangplank creates: `spec` put in `queue` (and labelled with it), named `name` in
/// `namespace`, controlled by `owner` (`(apiVersion, kind, name, uid)`) when it has one. The
/// Job, scheduler-plugins, Volcano, workload and pod-annotation paths all make theirs here.
pub fn made(
    name: &str,
    namespace: &str,
    mut spec: PodGroupSpec,
    queue: &str,
    owner: Option<(&str, &str, &str, &str)>,
) -> PodGroup {
    spec.queue = Some(queue.to_owned());
    let mut group = PodGroup::new(name, spec);
    group.metadata.namespace = Some(namespace.to_owned());
    group.metadata.labels = Some([(labels::QUEUE_LABEL.to_owned(), queue.to_owned())].into());
    group.metadata.owner_references = owner.map(|(api_version, kind, name, uid)| {
        vec![OwnerReference {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: None,
        }]
    });
    group
}

fn pod_group(job: &Job, name: &str, namespace: &str, uid: &str, min_member: i32) -> PodGroup {
    let meta = &job.metadata;
    let queue = labels::queue_of(meta.labels.as_ref(), meta.annotations.as_ref())
        .unwrap_or(labels::DEFAULT_QUEUE)
        .to_owned();
    let mut spec = PodGroupSpec::with_min_member(min_member);
    spec.priority_class_name = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.priority_class_name.clone())
        .filter(|p| !p.is_empty());
    spec.topology_key =
        labels::annotation_value(meta, labels::TOPOLOGY_KEY_ANNOTATION).map(str::to_owned);
    spec.preferred_topology_key =
        labels::annotation_value(meta, labels::PREFERRED_TOPOLOGY_KEY_ANNOTATION)
            .map(str::to_owned);
    made(
        name,
        namespace,
        spec,
        &queue,
        Some(("batch/v1", "Job", name, uid)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(extra: serde_json::Value) -> Job {
        let mut base = json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "uid": "job-uid",
                "labels": {(labels::QUEUE_LABEL): "research"}},
            "spec": {"parallelism": 4, "template": {"spec": {"containers": [],
                "priorityClassName": "high"}}}
        });
        merge(&mut base, extra);
        serde_json::from_value(base).unwrap()
    }

    fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
        match (base, extra) {
            (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
                for (k, v) in e {
                    if v.is_null() {
                        b.remove(&k);
                    } else {
                        merge(b.entry(k).or_insert(serde_json::Value::Null), v);
                    }
                }
            }
            (b, e) => *b = e,
        }
    }

    fn created(plan: Option<JobPlan>) -> (PodGroup, String) {
        match plan {
            Some(JobPlan::Create { group, note, .. }) => (*group, note),
            other => panic!("expected a PodGroup to create, got {other:?}"),
        }
    }

    #[test]
    fn a_jobs_topology_key_annotation_goes_to_its_pod_group() {
        let (group, _) = created(plan(&job(json!({})), None));
        assert_eq!(group.spec.topology_key, None);
        let annotated = job(json!({"metadata": {"annotations": {
            (labels::TOPOLOGY_KEY_ANNOTATION): " topology.kubernetes.io/zone "}}}));
        let (group, _) = created(plan(&annotated, None));
        assert_eq!(
            group.spec.topology_key.as_deref(),
            Some("topology.kubernetes.io/zone")
        );
    }

    #[test]
    fn a_job_with_a_queue_gets_a_pod_group_of_its_parallelism_owned_by_it() {
        let (group, note) = created(plan(&job(json!({})), None));
        assert_eq!(group.metadata.name.as_deref(), Some("train"));
        assert_eq!(group.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(group.spec.min_member, 4);
        assert_eq!(group.spec.queue.as_deref(), Some("research"));
        assert_eq!(group.spec.priority_class_name.as_deref(), Some("high"));
        let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Job", "train", "job-uid")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(
            owner.block_owner_deletion, None,
            "RBAC lacks jobs/finalizers"
        );
        assert_eq!(note, "minMember 4 from spec.parallelism");
    }

    #[test]
    fn the_min_member_annotation_wins_and_a_bad_one_is_ignored_with_a_note() {
        let annotated = |v: &str| {
            job(json!({"metadata": {"annotations": {(labels::MIN_MEMBER_ANNOTATION): v}}}))
        };
        let (group, note) = created(plan(&annotated("2"), None));
        assert_eq!(group.spec.min_member, 2);
        assert_eq!(
            note,
            format!(
                "minMember 2 from the annotation {}",
                labels::MIN_MEMBER_ANNOTATION
            )
        );
        let (group, note) = created(plan(&annotated("two"), None));
        assert_eq!(group.spec.min_member, 4);
        assert!(
            note.ends_with("is not a positive integer and was ignored"),
            "{note}"
        );
    }

    #[test]
    fn a_gang_is_never_larger_than_the_pods_a_job_runs_at_once() {
        let (group, note) = created(plan(&job(json!({"spec": {"completions": 2}})), None));
        assert_eq!(group.spec.min_member, 2);
        assert_eq!(note, "minMember 2 from spec.completions");
        let (group, _) = created(plan(&job(json!({"spec": {"parallelism": 0}})), None));
        assert_eq!(
            group.spec.min_member, 1,
            "a paused Job still gets a valid PodGroup"
        );
        let (group, _) = created(plan(&job(json!({"spec": {"parallelism": null}})), None));
        assert_eq!(group.spec.min_member, 1);
    }

    #[test]
    fn jobs_without_a_queue_finished_deleted_or_in_another_group_are_left_alone() {
        let no_queue = job(json!({"metadata": {"labels": {(labels::QUEUE_LABEL): null}}}));
        assert_eq!(plan(&no_queue, None), None);
        let done = job(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}));
        assert_eq!(plan(&done, None), None);
        let deleting = job(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}));
        assert_eq!(plan(&deleting, None), None);
        let other = job(json!({"spec": {"template": {"metadata": {"labels":
            {(labels::POD_GROUP_LABEL): "shared"}}}}}));
        assert_eq!(plan(&other, None), None);
        let own = job(json!({"spec": {"template": {"metadata": {"labels":
            {(labels::POD_GROUP_LABEL): "train"}}}}}));
        assert!(
            plan(&own, None).is_some(),
            "the webhook's own label is the Job's group"
        );
    }

    #[test]
    fn a_job_is_active_until_its_complete_or_failed_condition_is_true() {
        assert_eq!(state(&job(json!({}))), JobProgress::Active);
        let pending = job(json!({"status": {"conditions": [
            {"type": "Complete", "status": "False"}]}}));
        assert_eq!(state(&pending), JobProgress::Active);
        let failed = job(json!({"status": {"conditions": [
            {"type": "FailureTarget", "status": "True"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit"}]}}));
        assert_eq!(
            state(&failed),
            JobProgress::Failed {
                reason: "BackoffLimitExceeded".into(),
                message: "Job has reached the specified backoff limit".into()
            }
        );
    }

    #[test]
    fn a_volcano_queue_annotation_names_the_queue_too() {
        let volcano = job(json!({"metadata": {
            "labels": {(labels::QUEUE_LABEL): null},
            "annotations": {(labels::VOLCANO_QUEUE_NAME_ANNOTATION): "batch"}}}));
        let (group, _) = created(plan(&volcano, None));
        assert_eq!(group.spec.queue.as_deref(), Some("batch"));
    }

    #[test]
    fn the_jobs_own_pod_group_is_left_as_it_is() {
        let (group, _) = created(plan(&job(json!({})), None));
        assert_eq!(plan(&job(json!({})), Some(&group)), None);
    }

    #[test]
    fn a_pod_group_of_an_earlier_job_of_the_same_name_is_waited_out() {
        let (group, _) = created(plan(&job(json!({})), None));
        let recreated = job(json!({"metadata": {"uid": "new-uid"}}));
        assert_eq!(plan(&recreated, Some(&group)), None);
    }

    #[test]
    fn a_hand_made_pod_group_of_the_same_name_is_not_fought_over() {
        let mut spec = PodGroupSpec::with_min_member(3);
        spec.queue = Some("research".into());
        let mine = PodGroup::new("train", spec);
        match plan(&job(json!({})), Some(&mine)) {
            Some(JobPlan::Conflict { message }) => assert_eq!(
                message,
                "PodGroup ml/train already exists and is not owned by this Job, so Gangplank leaves it as it is: the Job's pods join it (minMember 3, queue research). Delete it to let Gangplank create one from the Job, or give the Job another name."
            ),
            other => panic!("expected a conflict, got {other:?}"),
        }
    }
}
