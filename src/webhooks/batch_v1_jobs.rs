//! batch/v1 Jobs that name a queue: their pod template joins the Job's group, and the gang
//! size they ask for must be one the Job can reach.
//!
//! A Job names its queue with the label `scheduling.gangplank.dev/queue` (or Volcano's queue
//! annotation); Gangplank's controller then creates a PodGroup named after the Job with
//! `minMember` = `spec.parallelism`, or the annotation `scheduling.gangplank.dev/min-member`.
//!
//! **Mutation** (CREATE; a Job's template is immutable afterwards): the template's labels get
//! `scheduling.gangplank.dev/pod-group: <job name>` and `scheduling.gangplank.dev/queue:
//! <queue>`, each unless the template already names a group or a queue. A Job created with
//! `generateName` has no name yet when the mutating webhook sees it; its template gets only
//! the queue, and the pod webhook puts each pod in the group of its controlling Job. A Job
//! that belongs to a workload Gangplank groups by (a JobSet's child Job, an MPI launcher:
//! [`workloads::of`]) gets only the queue too: its pods join the workload's group.
//!
//! **Validation** (CREATE and UPDATE):
//! - `scheduling.gangplank.dev/min-member`, when present, is a positive integer and at most
//!   the number of pods the Job runs at once, `min(spec.parallelism, spec.completions)`
//!   (parallelism defaults to 1; a gang larger than that never gathers). A Job scaled to
//!   parallelism 0 (paused) is not checked against it.
//! - the gang size, the annotation or else `min(spec.parallelism, spec.completions)`, is at
//!   most [`gangplank_core::limits::MAX_MEMBERS`].
//! - a queue named in the template must be the Job's queue (pods and PodGroup would otherwise
//!   be admitted through different queues);
//! - on CREATE, the queue exists and is Open.

use k8s_openapi::api::batch::v1::Job;
use kube::core::admission::{AdmissionRequest, Operation};
use serde_json::json;

use super::patch::Patcher;
use super::queues::check_open;
use super::review::{Denial, FieldErrors, Verdict};
use super::{Webhooks, name_problem};
use crate::api::{labels, workloads};

/// `POST /webhooks/mutate/jobs`.
pub fn mutate(_: &Webhooks, request: &AdmissionRequest<Job>) -> Result<Verdict, Denial> {
    if request.operation != Operation::Create {
        return Ok(Verdict::allow());
    }
    let job = request.object.as_ref().expect("checked when decoded");
    let Some(queue) = labels::queue_of(
        job.metadata.labels.as_ref(),
        job.metadata.annotations.as_ref(),
    ) else {
        return Ok(Verdict::allow());
    };
    if let Some(problem) = name_problem(queue) {
        return Err(Denial::invalid(queue_field(job), problem));
    }
    let template = job.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
    let (template_labels, template_annotations) = (
        template.and_then(|m| m.labels.as_ref()),
        template.and_then(|m| m.annotations.as_ref()),
    );
    let name = job
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or(Some(request.name.as_str()).filter(|n| !n.is_empty()))
        .filter(|_| workloads::of(&job.metadata).is_none());

    let mut patch = Patcher::new(job);
    let path = |key| ["spec", "template", "metadata", "labels", key];
    if let Some(name) = name
        && labels::pod_group_of(template_labels, template_annotations).is_none()
    {
        patch.set(&path(labels::POD_GROUP_LABEL), json!(name));
    }
    if labels::queue_of(template_labels, template_annotations).is_none() {
        patch.set(&path(labels::QUEUE_LABEL), json!(queue));
    }
    Ok(Verdict::patch(patch.into_patch()))
}

/// `POST /webhooks/validate/jobs`.
pub fn validate(w: &Webhooks, request: &AdmissionRequest<Job>) -> Result<Verdict, Denial> {
    let job = match request.operation {
        Operation::Create | Operation::Update => {
            request.object.as_ref().expect("checked when decoded")
        }
        Operation::Delete | Operation::Connect => return Ok(Verdict::allow()),
    };
    let Some(queue) = labels::queue_of(
        job.metadata.labels.as_ref(),
        job.metadata.annotations.as_ref(),
    ) else {
        return Ok(Verdict::allow());
    };
    let spec = job.spec.as_ref();
    let mut errors = FieldErrors::new();

    let annotation = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::MIN_MEMBER_ANNOTATION));
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    let completions = spec.and_then(|s| s.completions);
    let at_once = completions.map_or(parallelism, |c| c.min(parallelism));
    let field = format!("metadata.annotations[{}]", labels::MIN_MEMBER_ANNOTATION);
    if let Some(value) = annotation {
        match value.trim().parse::<i32>() {
            Ok(min_member) if min_member >= 1 => {
                errors.members(&field, min_member.into());
                if parallelism > 0 && min_member > at_once {
                    let limit = match completions {
                        Some(c) if c < parallelism => format!("spec.completions ({c})"),
                        _ => format!("spec.parallelism ({parallelism})"),
                    };
                    errors.add(
                        field,
                        format!(
                            "must be at most {limit}, the number of pods the Job runs at once, got {min_member}"
                        ),
                    );
                }
            }
            _ => errors.add(field, format!("must be a positive integer, got {value:?}")),
        }
    } else if i64::from(at_once) > i64::from(gangplank_core::limits::MAX_MEMBERS) {
        let size = match completions {
            Some(c) if c < parallelism => "spec.completions",
            _ => "spec.parallelism",
        };
        errors.add(
            format!("{size} (the gang size, as {field} is absent)"),
            format!(
                "must be at most {}, Gangplank's largest gang, got {at_once}; set {field} to a gang size within it",
                gangplank_core::limits::MAX_MEMBERS
            ),
        );
    }

    for annotation in [
        labels::TOPOLOGY_KEY_ANNOTATION,
        labels::PREFERRED_TOPOLOGY_KEY_ANNOTATION,
    ] {
        if let Some(problem) =
            labels::annotation_value(&job.metadata, annotation).and_then(super::label_key_problem)
        {
            errors.add(format!("metadata.annotations[{annotation}]"), problem);
        }
    }
    if let Some(problem) = super::topology_levels_problem(
        w.lookup(),
        labels::annotation_value(&job.metadata, labels::TOPOLOGY_KEY_ANNOTATION),
        labels::annotation_value(&job.metadata, labels::PREFERRED_TOPOLOGY_KEY_ANNOTATION),
    ) {
        errors.add(
            format!(
                "metadata.annotations[{}]",
                labels::PREFERRED_TOPOLOGY_KEY_ANNOTATION
            ),
            problem,
        );
    }

    let template = spec.and_then(|s| s.template.metadata.as_ref());
    let template_queue = labels::queue_of(
        template.and_then(|m| m.labels.as_ref()),
        template.and_then(|m| m.annotations.as_ref()),
    );
    if let Some(template_queue) = template_queue
        && template_queue != queue
    {
        errors.add(
            format!("spec.template.metadata.labels[{}]", labels::QUEUE_LABEL),
            format!(
                "must be the Job's own queue {queue:?} ({}) or absent, got {template_queue:?}",
                queue_field(job)
            ),
        );
    }
    errors.into_result()?;

    if request.operation == Operation::Create {
        let namespace = request.namespace.as_deref().unwrap_or_default();
        check_open(w.lookup(), queue, namespace, &queue_field(job))?;
    }
    Ok(Verdict::allow())
}

/// The Job's field that named its queue.
fn queue_field(job: &Job) -> String {
    super::queue_field(&job.metadata)
}
