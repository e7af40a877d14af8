//! PodGroups: the queue default, and the rules that keep a gang admissible and a running gang
//! whole.
//!
//! **Mutation**: a PodGroup created without `spec.queue` gets the queue named by its own label
//! `scheduling.gangplank.dev/queue` (or Volcano's annotation), else its namespace's default
//! queue, else `default`. Storing the queue makes `kubectl get pg` show it, and a later label on
//! the namespace does not silently move groups that were already admitted. An UPDATE without
//! `spec.queue` (a client that replaces the object from its own copy, which never had the
//! defaulted field) keeps the queue the group had: moving a group takes naming the new queue.
//!
//! **Validation**:
//! - `spec.minMember` at least 1; `spec.maxMember`, when set, at least `spec.minMember`; both
//!   at most [`gangplank_core::limits::MAX_MEMBERS`] (the CRD checks all three too; repeated
//!   so the rules hold wherever the schema was edited);
//! - the annotation `scheduling.gangplank.dev/members-in-stages`, when set, is `true` or
//!   `false`;
//! - `spec.subGroupPolicy` as [`super::sub_groups`] says;
//! - the queue exists and is Open, on CREATE and when an UPDATE changes it;
//! - once the group is admitted (Inqueue, Running, or Unknown, or admitted ahead of its members
//!   as its annotation says, before its status does), `spec.minMember`, `spec.subGroupPolicy`
//!   and `spec.queue` may no longer change: admission reserved room for exactly that gang in
//!   that queue, and the extender is gathering exactly that quorum.

use kube::core::admission::{AdmissionRequest, Operation};
use serde_json::json;

use super::Webhooks;
use super::lookup::is_admitted;
use super::patch::Patcher;
use super::queues::{check_open, unavailable};
use super::review::{Denial, FieldErrors, Verdict};
use crate::api::{PodGroup, labels};

/// `POST /webhooks/mutate/podgroups`.
pub fn mutate(w: &Webhooks, request: &AdmissionRequest<PodGroup>) -> Result<Verdict, Denial> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(Verdict::allow());
    }
    let group = request.object.as_ref().expect("checked when decoded");
    if group.spec.queue.as_deref().is_some_and(|q| !q.is_empty()) {
        return Ok(Verdict::allow());
    }
    let own = labels::queue_of(
        group.metadata.labels.as_ref(),
        group.metadata.annotations.as_ref(),
    );
    let previous = request
        .old_object
        .as_ref()
        .and_then(|old| old.spec.queue.as_deref())
        .filter(|q| !q.is_empty());
    let queue = match (previous, own) {
        (Some(queue), _) | (None, Some(queue)) => queue.to_owned(),
        (None, None) => {
            let namespace = request.namespace.as_deref().unwrap_or_default();
            w.lookup()
                .namespace_queue(namespace)
                .map_err(unavailable)?
                .unwrap_or_else(|| labels::DEFAULT_QUEUE.to_owned())
        }
    };
    let mut patch = Patcher::new(group);
    patch.set(&["spec", "queue"], json!(queue));
    Ok(Verdict::patch(patch.into_patch()))
}

/// `POST /webhooks/validate/podgroups`.
pub fn validate(w: &Webhooks, request: &AdmissionRequest<PodGroup>) -> Result<Verdict, Denial> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(Verdict::allow());
    }
    let group = request.object.as_ref().expect("checked when decoded");
    let spec = &group.spec;
    let mut errors = FieldErrors::new();
    if spec.min_member < 1 {
        errors.add(
            "spec.minMember",
            format!("must be at least 1, got {}", spec.min_member),
        );
    }
    errors.members("spec.minMember", spec.min_member.into());
    if let Some(max) = spec.max_member {
        errors.members("spec.maxMember", max.into());
    }
    if let Some(max) = spec.max_member
        && max < spec.min_member.max(1)
    {
        errors.add(
            "spec.maxMember",
            format!(
                "must be at least spec.minMember ({}) or unset, got {max}",
                spec.min_member
            ),
        );
    }
    let in_stages = labels::MEMBERS_IN_STAGES_ANNOTATION;
    if let Some(value) = labels::annotation_value(&group.metadata, in_stages)
        && !matches!(value, "true" | "false")
    {
        errors.add(
            format!("metadata.annotations[{in_stages}]"),
            format!("must be \"true\" or \"false\", got {value:?}"),
        );
    }
    errors.seconds("spec.maxWaitSeconds", spec.max_wait_seconds);
    errors.seconds("spec.expectedRuntimeSeconds", spec.expected_runtime_seconds);
    for (field, key) in [
        ("spec.topologyKey", &spec.topology_key),
        ("spec.preferredTopologyKey", &spec.preferred_topology_key),
    ] {
        if let Some(problem) = key.as_deref().and_then(super::label_key_problem) {
            errors.add(field, problem);
        }
    }
    if let Some(problem) = super::topology_levels_problem(
        w.lookup(),
        spec.topology_key.as_deref(),
        spec.preferred_topology_key.as_deref(),
    ) {
        errors.add("spec.preferredTopologyKey", problem);
    }
    for problem in crate::api::sub_group_rules::problems(spec) {
        errors.push(problem);
    }
    errors.into_result()?;

    let queue = spec.queue_name();
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let Some(old) = request.old_object.as_ref() else {
        check_open(w.lookup(), queue, namespace, "spec.queue")?;
        return Ok(Verdict::allow());
    };
    let old_queue = old.spec.queue_name();
    let phase = old.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let ahead = crate::api::volcano::admitted_ahead_at(old).is_some();
    if is_admitted(phase) || ahead {
        let phase = if ahead && !is_admitted(phase) {
            "admitted ahead of its members".to_owned()
        } else {
            phase.to_string()
        };
        let mut frozen = Vec::new();
        if spec.min_member != old.spec.min_member {
            frozen.push(format!(
                "spec.minMember: cannot change from {} to {} while the group is {phase}",
                old.spec.min_member, spec.min_member
            ));
        }
        if spec.sub_group_policy != old.spec.sub_group_policy {
            frozen.push(format!(
                "spec.subGroupPolicy: cannot change while the group is {phase}"
            ));
        }
        if queue != old_queue {
            frozen.push(format!(
                "spec.queue: cannot change from {old_queue:?} to {queue:?} while the group is {phase}"
            ));
        }
        if !frozen.is_empty() {
            return Err(Denial::forbidden(format!(
                "{}; its gang was admitted as it is; wait until the group finishes, or delete it and create a new one",
                frozen.join("; ")
            )));
        }
    }
    if queue != old_queue {
        check_open(w.lookup(), queue, namespace, "spec.queue")?;
    }
    Ok(Verdict::allow())
}
