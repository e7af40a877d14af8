//! A PodGroup's status from what its member pods show: a pure function of the member counts,
//! the gang size, who finishes the gang, the waiting reasons and the previous status.
//!
//! Phases (the rules are applied in this order):
//! 1. **Completed** and **Failed** are final: once there, a group stays (a gang that ran is not
//!    re-run under the same PodGroup; delete and recreate it to run again). Counts and
//!    conditions keep following the pods.
//! 2. Who decides that a gang is over depends on who replaces failed members:
//!    - a batch/v1 Job replaces them until its `backoffLimit`, so a Job's group is
//!      **Completed** when the Job is `Complete` and **Failed** when the Job is `Failed` (with
//!      the Job's reason), never earlier from its pods alone;
//!    - otherwise nothing replaces a failed member: the group is **Completed** when no member
//!      is left pending or running and at least `minMember` succeeded, and **Failed** when a
//!      member failed and the members still pending, running or succeeded are fewer than
//!      `minMember` (the gang can no longer reach quorum with the pods it has).
//! 3. **Running** when running plus succeeded members reach `minMember` (members that finished
//!    their work count: a gang whose first workers are done is still a gang that ran).
//! 4. **Unknown** when the group was Running (or Unknown) and fell below that with a member
//!    still released; **Pending** when none is (its pods were evicted or are gone, and its
//!    replacements wait at the admission gate).
//! 5. **Inqueue** when a member that has not finished is released (no admission gate), or the
//!    group is admitted ahead of its members and the admission holds
//!    (`gangplank_core::model::owed`).
//! 6. **Pending** otherwise: no member released yet, or not enough members (so a group whose
//!    admission ahead lapsed with no member released is Pending again).
//!
//! Conditions, one per type: `Admitted` (gates removed; False with the admission loop's
//! waiting reason), `Scheduled` (at least `minMember` members bound or done; False with the
//! extender's reason when it refused to claim room for the gang), and, once reached,
//! `Completed` or `Failed`. A condition's `lastTransitionTime` changes only when its `status`
//! does; the group's `lastTransitionTime` only when its phase does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{self, PodGroup, PodGroupPhase, PodGroupStatus};
use gangplank_core::model;

/// Condition types of a PodGroup.
pub const ADMITTED: &str = "Admitted";
pub const SCHEDULED: &str = "Scheduled";
pub const COMPLETED: &str = "Completed";
pub const FAILED: &str = "Failed";
/// `Admitted` reasons of a group that is not held back: it has no member pods yet, or the
/// admission loop releases it on its next pass.
pub const NO_MEMBERS: &str = "NoMembers";
/// Why a group that was evicted whole waits: its replacements have not come yet.
pub const EVICTED: &str = "Evicted";
pub const ADMITTING: &str = "Admitting";
/// `Admitted` reason of a group admitted ahead of its members, before any exists.
pub const ADMITTED_AHEAD: &str = "AdmittedAhead";
/// `Scheduled` reason of a group admitted but refused room by the extender.
pub const WAITING_FOR_ROOM: &str = "WaitingForRoom";

/// What the cache shows of a group's member pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Members {
    /// Members that have not finished (pending, running or unknown).
    pub live: u32,
    /// Live members that still carry Gangplank's admission gate.
    pub gated: u32,
    /// Members whose gate is gone, in any phase.
    pub admitted: u32,
    /// Members bound to a node, in any phase.
    pub scheduled: u32,
    /// Live members bound to a node.
    pub bound_live: u32,
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
    /// Members evicted (the pod's `disrupted`), being deleted or ended Failed, counted here
    /// only: not failures of the gang, which waits to be admitted again once it has no member
    /// left released.
    pub evicted: u32,
}

/// How a batch/v1 Job that owns the group stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobProgress {
    Active,
    Complete,
    Failed { reason: String, message: String },
}

/// Who decides that the gang is over (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finisher {
    /// The member pods themselves: nothing replaces a failed member.
    Members,
    /// The Job that owns the PodGroup.
    Job(JobProgress),
}

/// Everything a PodGroup's status is computed from, besides its previous status.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub min_member: u32,
    pub members: Members,
    pub finisher: &'a Finisher,
    /// Why the admission loop leaves the group waiting, if it does: the condition's reason
    /// (`gangplank_core::admit::plan::Reason`) and message.
    pub admission_wait: Option<(&'a str, &'a str)>,
    /// Why the extender last refused to claim room for the gang, if it did.
    pub placement_wait: Option<&'a str>,
    /// For a group admitted ahead of its members: whether that admission holds now.
    pub ahead: Option<Ahead>,
    /// The room its admission keeps for members still to come, while it does
    /// (`gangplank_core::model::owed`).
    pub kept: Option<&'a model::Resources>,
}

/// Where a group admitted ahead of its members stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead {
    /// Admitted, and the admission holds.
    Holds,
    /// Admitted, but no quorum of pods came within its schedule timeout of seconds.
    Lapsed(u64),
}

/// Where `group` stands when admitted ahead of its members, at `now` (Unix seconds).
pub(crate) fn ahead(group: &PodGroup, now: i64) -> Option<Ahead> {
    if !group.admitted_ahead_of_members() {
        return None;
    }
    let at = api::volcano::admitted_ahead_at(group)?;
    let timeout = group.spec.schedule_timeout();
    Some(if model::PodGroup::admission_holds(at, now, timeout) {
        Ahead::Holds
    } else {
        Ahead::Lapsed(timeout.as_secs())
    })
}

/// The phase the group is in now, and for Failed the reason and message.
pub fn phase(
    inputs: &Inputs,
    previous: PodGroupPhase,
) -> (PodGroupPhase, Option<(String, String)>) {
    if previous.is_finished() {
        return (previous, None);
    }
    if let Some(failed) = failure(inputs) {
        return (PodGroupPhase::Failed, Some(failed));
    }
    let m = &inputs.members;
    let n = inputs.min_member;
    let completed = match inputs.finisher {
        Finisher::Job(state) => *state == JobProgress::Complete,
        Finisher::Members => m.live == 0 && m.succeeded >= n,
    };
    let phase = if completed {
        PodGroupPhase::Completed
    } else if m.running + m.succeeded >= n {
        PodGroupPhase::Running
    } else if m.live == m.gated
        && (m.evicted > 0 || matches!(previous, PodGroupPhase::Running | PodGroupPhase::Unknown))
    {
        // Evicted, or its pods gone, with no member left released: its replacements wait for
        // admission anew (the evicted pods may be gone before the cache saw them evicted).
        PodGroupPhase::Pending
    } else if matches!(previous, PodGroupPhase::Running | PodGroupPhase::Unknown) {
        PodGroupPhase::Unknown
    } else if m.live > m.gated || inputs.ahead == Some(Ahead::Holds) {
        PodGroupPhase::Inqueue
    } else {
        PodGroupPhase::Pending
    };
    (phase, None)
}

/// Why the gang failed, when it did: `(reason, message)`.
fn failure(inputs: &Inputs) -> Option<(String, String)> {
    let m = &inputs.members;
    match inputs.finisher {
        Finisher::Job(JobProgress::Failed { reason, message }) => Some((
            if reason.is_empty() {
                "JobFailed".to_owned()
            } else {
                reason.clone()
            },
            if message.is_empty() {
                "the Job that owns this PodGroup failed".to_owned()
            } else {
                format!("the Job that owns this PodGroup failed: {message}")
            },
        )),
        Finisher::Job(_) => None,
        Finisher::Members if m.failed > 0 && m.live + m.succeeded < inputs.min_member => Some((
            "MembersFailed".to_owned(),
            format!(
                "{} member pods failed; the {} left pending, running or succeeded cannot reach minMember {}",
                m.failed,
                m.live + m.succeeded,
                inputs.min_member
            ),
        )),
        Finisher::Members => None,
    }
}

/// The status the group should have, given the status it had. `now` is used for transition
/// times and should have whole seconds (the API stores no more).
pub fn pod_group_status(
    inputs: &Inputs,
    previous: Option<&PodGroupStatus>,
    now: &Time,
) -> PodGroupStatus {
    let previous_phase = previous.map(|s| s.phase).unwrap_or_default();
    let (phase, failed) = phase(inputs, previous_phase);
    // A group that failed stays Failed for the reason it failed then.
    let failed = failed
        .filter(|_| phase == PodGroupPhase::Failed)
        .or_else(|| {
            let old = previous?.conditions.iter().find(|c| c.type_ == FAILED)?;
            (phase == PodGroupPhase::Failed).then(|| (old.reason.clone(), old.message.clone()))
        });
    let m = &inputs.members;
    let last_transition_time = match previous {
        Some(p) if p.phase == phase && p.last_transition_time.is_some() => {
            p.last_transition_time.clone()
        }
        _ => Some(now.clone()),
    };
    let old = previous
        .map(|p| p.conditions.as_slice())
        .unwrap_or_default();
    let mut conditions = vec![
        condition(
            old,
            now,
            ADMITTED,
            admitted(inputs, phase, was_evicted(old)),
        ),
        condition(old, now, SCHEDULED, scheduled(inputs, phase)),
    ];
    if phase == PodGroupPhase::Completed {
        let message = format!("{} member pods succeeded", m.succeeded);
        conditions.push(condition(old, now, COMPLETED, (true, "Completed", message)));
    }
    if let Some((reason, message)) = failed {
        conditions.push(condition(old, now, FAILED, (true, &reason, message)));
    }
    PodGroupStatus {
        phase,
        admitted: count(m.admitted),
        scheduled: count(m.scheduled),
        running: count(m.running),
        succeeded: count(m.succeeded),
        failed: count(m.failed),
        conditions,
        last_transition_time,
    }
}

fn count(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `(status, reason, message)` of a condition.
type Judgement<'a> = (bool, &'a str, String);

/// Whether the group's last status said it waits because it was evicted: its evicted pods may
/// be gone since, and it still waits for their replacements.
fn was_evicted(old: &[Condition]) -> bool {
    old.iter()
        .any(|c| c.type_ == ADMITTED && c.reason == EVICTED)
}

fn admitted<'a>(inputs: &'a Inputs, phase: PodGroupPhase, was_evicted: bool) -> Judgement<'a> {
    let m = &inputs.members;
    if m.admitted == 0 && phase == PodGroupPhase::Inqueue && inputs.ahead == Some(Ahead::Holds) {
        return (
            true,
            ADMITTED_AHEAD,
            format!(
                "admitted on minResources before its pods exist; its room is kept for minMember {} pods, created without the admission gate",
                inputs.min_member
            ),
        );
    }
    // Members that finished do not make it admitted: a gang whose first members finished
    // before the others existed waits, as admission says, until those are released.
    if m.live > m.gated || phase != PodGroupPhase::Pending {
        let kept = match inputs.kept {
            Some(kept) => format!(
                "; room kept on minResources for members still to come: {kept} (until they come or its schedule timeout passes)"
            ),
            None => String::new(),
        };
        return (
            true,
            "Released",
            format!(
                "{} member pods released to the scheduler (minMember {}){kept}",
                m.admitted, inputs.min_member
            ),
        );
    }
    match inputs.admission_wait {
        Some((reason, why)) => match inputs.ahead {
            Some(Ahead::Lapsed(timeout)) => (
                false,
                reason,
                format!(
                    "admitted ahead of its pods, but minMember {} pods were not placed within {timeout}s, so its room was given back; {why}",
                    inputs.min_member
                ),
            ),
            _ => (false, reason, why.to_owned()),
        },
        None if m.live == 0 && (m.evicted > 0 || was_evicted) => (
            false,
            EVICTED,
            format!(
                "its member pods were evicted (reclaim or preemption); waiting for replacements (minMember {}), which are admitted again like a new gang",
                inputs.min_member
            ),
        ),
        None if m.live == 0 && m.succeeded > 0 => (
            false,
            NO_MEMBERS,
            format!(
                "{} member pods succeeded and none waits; waiting for the rest of minMember {} (finished members count), which are admitted together",
                m.succeeded, inputs.min_member
            ),
        ),
        None if m.live == 0 => (
            false,
            NO_MEMBERS,
            format!(
                "no member pods yet; waiting for minMember {} pods labelled scheduling.gangplank.dev/pod-group with this group's name",
                inputs.min_member
            ),
        ),
        None => (
            false,
            ADMITTING,
            format!(
                "{} member pods exist{} (minMember {}); the admission loop releases them on its next pass",
                m.live,
                match m.succeeded {
                    0 => String::new(),
                    n => format!(" and {n} succeeded"),
                },
                inputs.min_member
            ),
        ),
    }
}

fn scheduled<'a>(inputs: &'a Inputs, phase: PodGroupPhase) -> Judgement<'a> {
    let m = &inputs.members;
    let n = inputs.min_member;
    let placed = m.bound_live + m.succeeded;
    if placed >= n || phase == PodGroupPhase::Completed {
        return (
            true,
            "Quorum",
            format!("{} member pods bound (minMember {n})", m.scheduled),
        );
    }
    match phase {
        PodGroupPhase::Pending if m.evicted > 0 => (
            false,
            EVICTED,
            format!(
                "{} member pods were evicted; none is scheduled again before the gang is admitted again",
                m.evicted
            ),
        ),
        PodGroupPhase::Pending => (
            false,
            "NotAdmitted",
            "the gang is waiting for admission; no member is scheduled before it is admitted"
                .to_owned(),
        ),
        PodGroupPhase::Unknown | PodGroupPhase::Failed => (
            false,
            "BelowMinMember",
            format!(
                "only {placed} member pods are bound or succeeded, below minMember {n}; {} failed",
                m.failed
            ),
        ),
        _ => match inputs.placement_wait {
            Some(why) => (false, WAITING_FOR_ROOM, why.to_owned()),
            None => (
                false,
                "Placing",
                format!(
                    "{placed} of minMember {n} member pods bound; the rest are being placed and none is bound before all of them have a node"
                ),
            ),
        },
    }
}

/// A condition, keeping the previous `lastTransitionTime` when its status did not change.
fn condition(old: &[Condition], now: &Time, type_: &str, judged: Judgement) -> Condition {
    let (status, reason, message) = judged;
    let status = if status { "True" } else { "False" };
    let last_transition_time = old
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time,
        observed_generation: None,
    }
}

/// Whether going from `from` to `to` changes only counts and messages: the phase and each
/// condition's type, status and reason stay (its write may wait, `super::writes`).
pub fn minor_change(from: &PodGroupStatus, to: &PodGroupStatus) -> bool {
    from.phase == to.phase
        && from.last_transition_time == to.last_transition_time
        && from.conditions.len() == to.conditions.len()
        && from
            .conditions
            .iter()
            .zip(&to.conditions)
            .all(|(a, b)| a.type_ == b.type_ && a.status == b.status && a.reason == b.reason)
}

/// An Event a user wants to see when a group enters `status.phase` from `previous`:
/// `(warning, reason, message)`. The reason is the phase's name.
pub fn transition_event(
    previous: PodGroupPhase,
    status: &PodGroupStatus,
    min_member: u32,
) -> Option<(bool, &'static str, String)> {
    if previous == status.phase {
        return None;
    }
    let reason = status.phase.as_str();
    let s = status;
    match status.phase {
        PodGroupPhase::Pending => None,
        PodGroupPhase::Inqueue if s.admitted == 0 => Some((
            false,
            reason,
            format!(
                "admitted ahead of its pods: room kept for minMember {min_member} pods on minResources"
            ),
        )),
        PodGroupPhase::Inqueue => Some((
            false,
            reason,
            format!(
                "admitted: {} member pods released to the scheduler (minMember {min_member})",
                s.admitted
            ),
        )),
        PodGroupPhase::Running => Some((
            false,
            reason,
            format!(
                "{} member pods running and {} succeeded (minMember {min_member})",
                s.running, s.succeeded
            ),
        )),
        PodGroupPhase::Completed => Some((
            false,
            reason,
            format!("{} member pods succeeded", s.succeeded),
        )),
        PodGroupPhase::Failed => Some((
            true,
            reason,
            s.conditions
                .iter()
                .find(|c| c.type_ == FAILED)
                .map_or_else(|| "the gang failed".to_owned(), |c| c.message.clone()),
        )),
        PodGroupPhase::Unknown => Some((
            true,
            reason,
            format!(
                "the running gang fell below minMember {min_member}: {} running, {} succeeded, {} failed",
                s.running, s.succeeded, s.failed
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    use PodGroupPhase::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(1_700_000_000 + second).unwrap())
    }

    #[test]
    fn counts_and_messages_are_a_minor_change_and_a_phase_or_condition_is_not() {
        let condition = |status: &str, message: &str| Condition {
            type_: SCHEDULED.into(),
            status: status.into(),
            reason: "Placing".into(),
            message: message.into(),
            last_transition_time: at(0),
            observed_generation: None,
        };
        let placing = PodGroupStatus {
            phase: Inqueue,
            admitted: 8,
            scheduled: 2,
            conditions: vec![condition("False", "2 of 8 bound")],
            ..Default::default()
        };
        let more = PodGroupStatus {
            scheduled: 5,
            conditions: vec![condition("False", "5 of 8 bound")],
            ..placing.clone()
        };
        assert!(minor_change(&placing, &more));
        let running = PodGroupStatus {
            phase: Running,
            ..more.clone()
        };
        assert!(!minor_change(&more, &running));
        let scheduled = PodGroupStatus {
            conditions: vec![condition("True", "8 of 8 bound")],
            ..more.clone()
        };
        assert!(!minor_change(&more, &scheduled));
    }

    fn members(live: u32, gated: u32, running: u32, succeeded: u32, failed: u32) -> Members {
        Members {
            live,
            gated,
            admitted: live - gated + succeeded + failed,
            scheduled: live - gated + succeeded + failed,
            bound_live: live - gated,
            running,
            succeeded,
            failed,
            evicted: 0,
        }
    }

    fn inputs(members: Members, finisher: &Finisher) -> Inputs<'_> {
        Inputs {
            min_member: 4,
            members,
            finisher,
            admission_wait: None,
            placement_wait: None,
            ahead: None,
            kept: None,
        }
    }

    fn phase_of(m: Members, finisher: &Finisher, previous: PodGroupPhase) -> PodGroupPhase {
        phase(&inputs(m, finisher), previous).0
    }

    const PODS: Finisher = Finisher::Members;
    const JOB: Finisher = Finisher::Job(JobProgress::Active);

    #[test]
    fn a_group_waits_pending_while_its_members_are_gated_or_too_few() {
        assert_eq!(phase_of(Members::default(), &PODS, Pending), Pending);
        assert_eq!(phase_of(members(3, 3, 0, 0, 0), &PODS, Pending), Pending);
        assert_eq!(phase_of(members(4, 4, 0, 0, 0), &JOB, Pending), Pending);
    }

    #[test]
    fn a_group_is_inqueue_once_admission_released_a_member_until_quorum_runs() {
        assert_eq!(phase_of(members(4, 0, 0, 0, 0), &PODS, Pending), Inqueue);
        assert_eq!(phase_of(members(4, 0, 3, 0, 0), &PODS, Inqueue), Inqueue);
    }

    #[test]
    fn a_group_runs_when_min_member_members_run_and_finished_ones_still_count() {
        assert_eq!(phase_of(members(4, 0, 4, 0, 0), &PODS, Inqueue), Running);
        assert_eq!(phase_of(members(2, 0, 2, 2, 0), &JOB, Running), Running);
    }

    #[test]
    fn a_running_group_that_falls_below_min_member_is_unknown_and_can_recover() {
        assert_eq!(phase_of(members(3, 0, 3, 0, 0), &PODS, Running), Unknown);
        // A Job replaces its failed member: not Failed, Unknown until the new one runs.
        assert_eq!(phase_of(members(4, 1, 3, 0, 1), &JOB, Running), Unknown);
        assert_eq!(phase_of(members(4, 0, 4, 0, 1), &JOB, Unknown), Running);
    }

    #[test]
    fn a_running_gang_whose_pods_are_gone_and_replacements_gated_waits_pending_again() {
        // Reclaim evicted every member and the pods were deleted before the cache saw them
        // evicted; the Job made four new ones, gated.
        assert_eq!(phase_of(members(4, 4, 0, 0, 0), &JOB, Running), Pending);
        assert_eq!(phase_of(Members::default(), &JOB, Unknown), Pending);
    }

    #[test]
    fn bare_pods_complete_when_none_is_left_and_min_member_succeeded() {
        assert_eq!(phase_of(members(0, 0, 0, 4, 0), &PODS, Running), Completed);
        assert_eq!(
            phase_of(members(1, 0, 1, 4, 0), &PODS, Running),
            Running,
            "an elastic member is still running"
        );
        assert_eq!(
            phase_of(members(0, 0, 0, 4, 1), &PODS, Running),
            Completed,
            "a failure that the rest made up for does not fail the gang"
        );
    }

    #[test]
    fn bare_pods_fail_when_the_members_left_cannot_reach_min_member() {
        let (phase, why) = phase(&inputs(members(2, 0, 2, 1, 1), &PODS), Running);
        assert_eq!(phase, Failed);
        assert_eq!(
            why.unwrap(),
            (
                "MembersFailed".to_owned(),
                "1 member pods failed; the 3 left pending, running or succeeded cannot reach minMember 4"
                    .to_owned()
            )
        );
        assert_eq!(phase_of(members(4, 0, 3, 0, 1), &PODS, Running), Unknown);
    }

    #[test]
    fn a_jobs_group_finishes_only_when_the_job_does() {
        assert_eq!(
            phase_of(members(0, 0, 0, 4, 0), &JOB, Running),
            Running,
            "the Job may still start more pods"
        );
        let complete = Finisher::Job(JobProgress::Complete);
        assert_eq!(
            phase_of(members(0, 0, 0, 4, 0), &complete, Running),
            Completed
        );
        let failed = Finisher::Job(JobProgress::Failed {
            reason: "BackoffLimitExceeded".into(),
            message: "Job has reached the specified backoff limit".into(),
        });
        let (phase, why) = phase(&inputs(members(0, 0, 0, 0, 7), &failed), Unknown);
        assert_eq!(phase, Failed);
        assert_eq!(why.unwrap().0, "BackoffLimitExceeded");
    }

    #[test]
    fn completed_and_failed_are_final() {
        assert_eq!(
            phase_of(members(4, 0, 4, 0, 0), &PODS, Completed),
            Completed
        );
        assert_eq!(phase_of(members(4, 4, 0, 0, 0), &JOB, Failed), Failed);
    }

    #[test]
    fn a_failed_group_keeps_the_reason_it_failed_for() {
        let failed = pod_group_status(&inputs(members(1, 0, 1, 0, 3), &PODS), None, &at(0));
        let later = pod_group_status(
            &inputs(members(4, 0, 4, 0, 3), &PODS),
            Some(&failed),
            &at(9),
        );
        assert_eq!(later.phase, Failed);
        assert_eq!(later.running, 4);
        assert_eq!(
            later.conditions.iter().find(|c| c.type_ == FAILED),
            failed.conditions.iter().find(|c| c.type_ == FAILED)
        );
        assert_eq!(later.last_transition_time, Some(at(0)));
    }

    #[test]
    fn the_transition_time_moves_only_when_the_phase_does() {
        let gated = members(4, 4, 0, 0, 0);
        let first = pod_group_status(&inputs(gated, &PODS), None, &at(0));
        assert_eq!(first.phase, Pending);
        assert_eq!(first.last_transition_time, Some(at(0)));
        let same = pod_group_status(&inputs(gated, &PODS), Some(&first), &at(5));
        assert_eq!(same, first, "nothing changed, nothing to write");
        let released =
            pod_group_status(&inputs(members(4, 0, 0, 0, 0), &PODS), Some(&same), &at(9));
        assert_eq!(released.phase, Inqueue);
        assert_eq!(released.last_transition_time, Some(at(9)));
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_only_its_message_changes() {
        let finisher = PODS;
        let unbound = Members {
            scheduled: 0,
            bound_live: 0,
            ..members(4, 0, 0, 0, 0)
        };
        let mut i = inputs(unbound, &finisher);
        i.placement_wait = Some("gang ns/g waits for room: 0/4 members placed");
        let first = pod_group_status(&i, None, &at(0));
        let scheduled = &first.conditions[1];
        assert_eq!(
            (scheduled.type_.as_str(), scheduled.status.as_str()),
            (SCHEDULED, "False")
        );
        assert_eq!(scheduled.reason, "WaitingForRoom");
        assert_eq!(
            scheduled.message,
            "gang ns/g waits for room: 0/4 members placed"
        );

        i.placement_wait = None;
        i.members.bound_live = 2;
        let second = pod_group_status(&i, Some(&first), &at(3));
        assert_eq!(second.conditions[1].reason, "Placing");
        assert_eq!(second.conditions[1].last_transition_time, at(0));

        i.members = members(4, 0, 4, 0, 0);
        let third = pod_group_status(&i, Some(&second), &at(7));
        assert_eq!(third.conditions[1].status, "True");
        assert_eq!(third.conditions[1].last_transition_time, at(7));
    }

    #[test]
    fn a_pending_group_says_why_admission_waits() {
        let finisher = PODS;
        let mut i = inputs(members(2, 2, 0, 0, 0), &finisher);
        i.admission_wait = Some((
            "WaitingForMembers",
            "2 of minMember 4 pods exist; waiting for the rest before releasing any",
        ));
        let status = pod_group_status(&i, None, &at(0));
        let admitted = &status.conditions[0];
        assert_eq!(
            (admitted.status.as_str(), admitted.reason.as_str()),
            ("False", "WaitingForMembers")
        );
        assert_eq!(
            admitted.message,
            "2 of minMember 4 pods exist; waiting for the rest before releasing any"
        );
        let empty = pod_group_status(&inputs(Members::default(), &finisher), None, &at(0));
        assert_eq!(empty.conditions[0].reason, "NoMembers");
    }

    #[test]
    fn a_gang_whose_first_member_finished_waits_for_the_others_as_admission_says_not_released() {
        let finisher = PODS;
        // An initializer that succeeded, then three trainer nodes still gated.
        let mut i = inputs(members(3, 3, 0, 1, 0), &finisher);
        i.admission_wait = Some(("DoesNotFit", "does not fit now"));
        let status = pod_group_status(&i, None, &at(0));
        assert_eq!(status.phase, Pending);
        let admitted = &status.conditions[0];
        assert_eq!(
            (admitted.status.as_str(), admitted.reason.as_str()),
            ("False", "DoesNotFit")
        );
        // Before the trainer nodes exist: no member is waiting, and it says so.
        let status = pod_group_status(&inputs(members(0, 0, 0, 1, 0), &finisher), None, &at(0));
        assert_eq!(status.phase, Pending);
        assert!(
            status.conditions[0]
                .message
                .starts_with("1 member pods succeeded and none waits"),
            "{}",
            status.conditions[0].message
        );
        // Once they are released, it is admitted, the finished one counting for the phase.
        assert_eq!(
            phase_of(members(3, 0, 3, 1, 0), &finisher, Inqueue),
            Running
        );
    }

    #[test]
    fn a_released_group_says_what_room_it_keeps_on_min_resources_for_members_to_come() {
        let finisher = PODS;
        let kept = model::Resources::from([("cpu", 96_000)]);
        let i = Inputs {
            min_member: 1,
            kept: Some(&kept),
            ..inputs(members(1, 0, 1, 0, 0), &finisher)
        };
        let status = pod_group_status(&i, None, &at(0));
        assert_eq!(
            status.conditions[0].message,
            "1 member pods released to the scheduler (minMember 1); room kept on minResources for members still to come: cpu: 96 (until they come or its schedule timeout passes)"
        );
    }

    #[test]
    fn a_failed_group_carries_a_failed_condition_and_a_warning_event() {
        let status = pod_group_status(&inputs(members(2, 0, 2, 0, 2), &PODS), None, &at(0));
        assert_eq!(status.phase, Failed);
        let failed = status
            .conditions
            .iter()
            .find(|c| c.type_ == FAILED)
            .unwrap();
        assert_eq!(
            (failed.status.as_str(), failed.reason.as_str()),
            ("True", "MembersFailed")
        );
        let (warning, reason, message) = transition_event(Running, &status, 4).unwrap();
        assert!(warning);
        assert_eq!(reason, "Failed");
        assert_eq!(message, failed.message);
    }

    #[test]
    fn a_gang_that_lost_a_member_says_it_is_below_min_member_not_that_the_rest_are_placed() {
        // Three members still run; the fourth failed with its node, and nothing replaces it.
        let status = pod_group_status(&inputs(members(3, 0, 3, 0, 1), &PODS), None, &at(0));
        assert_eq!(status.phase, Failed);
        let scheduled = status
            .conditions
            .iter()
            .find(|c| c.type_ == SCHEDULED)
            .unwrap();
        assert_eq!(
            (
                scheduled.status.as_str(),
                scheduled.reason.as_str(),
                scheduled.message.as_str()
            ),
            (
                "False",
                "BelowMinMember",
                "only 3 member pods are bound or succeeded, below minMember 4; 1 failed"
            )
        );
    }

    #[test]
    fn events_mark_every_transition_but_the_return_to_pending_and_none_without_one() {
        let status = |phase| PodGroupStatus {
            phase,
            admitted: 4,
            running: 4,
            ..Default::default()
        };
        assert_eq!(transition_event(Running, &status(Running), 4), None);
        assert_eq!(transition_event(Inqueue, &status(Pending), 4), None);
        assert_eq!(
            transition_event(Pending, &status(Inqueue), 4),
            Some((
                false,
                "Inqueue",
                "admitted: 4 member pods released to the scheduler (minMember 4)".to_owned()
            ))
        );
        assert_eq!(
            transition_event(Inqueue, &status(Running), 4).unwrap().2,
            "4 member pods running and 0 succeeded (minMember 4)"
        );
        let (warning, reason, _) = transition_event(Running, &status(Unknown), 4).unwrap();
        assert!(warning);
        assert_eq!(reason, "Unknown");
        assert_eq!(
            transition_event(Running, &status(Completed), 4).unwrap().1,
            "Completed"
        );
    }

    #[test]
    fn a_group_admitted_ahead_is_inqueue_before_its_pods_exist_and_pending_again_once_lapsed() {
        let finisher = Finisher::Members;
        let holds = Inputs {
            ahead: Some(Ahead::Holds),
            ..inputs(members(0, 0, 0, 0, 0), &finisher)
        };
        let status = pod_group_status(&holds, None, &at(0));
        assert_eq!(status.phase, Inqueue);
        let admitted = &status.conditions[0];
        assert_eq!(
            (admitted.status.as_str(), admitted.reason.as_str()),
            ("True", ADMITTED_AHEAD)
        );
        let (_, _, note) = transition_event(Pending, &status, 4).unwrap();
        assert!(note.starts_with("admitted ahead of its pods"), "{note}");

        let lapsed = Inputs {
            ahead: Some(Ahead::Lapsed(60)),
            admission_wait: Some(("DoesNotFit", "8 CPUs free of 16 asked")),
            ..inputs(members(0, 0, 0, 0, 0), &finisher)
        };
        let status = pod_group_status(&lapsed, Some(&status), &at(61));
        assert_eq!(status.phase, Pending);
        let admitted = &status.conditions[0];
        assert_eq!(admitted.status, "False");
        assert!(
            admitted.message.contains("not placed within 60s")
                && admitted.message.ends_with("8 CPUs free of 16 asked"),
            "{}",
            admitted.message
        );
    }

    #[test]
    fn a_gang_evicted_whole_waits_to_be_admitted_again_instead_of_failing() {
        let finisher = Finisher::Members;
        let mut m = members(0, 0, 0, 0, 0);
        m.evicted = 4;
        let i = inputs(m, &finisher);
        assert_eq!(phase(&i, Running), (Pending, None));
        let status = pod_group_status(&i, None, &at(0));
        let admitted = &status.conditions[0];
        assert_eq!(
            (admitted.status.as_str(), admitted.reason.as_str()),
            ("False", EVICTED)
        );
        assert!(
            admitted.message.starts_with("its member pods were evicted"),
            "{}",
            admitted.message
        );

        // Its evicted pods are gone, none has come back yet: it still says so.
        let gone = pod_group_status(
            &inputs(members(0, 0, 0, 0, 0), &finisher),
            Some(&status),
            &at(5),
        );
        assert_eq!(gone.phase, Pending);
        assert_eq!(gone.conditions[0].reason, EVICTED);
        assert_eq!(gone.conditions[0].last_transition_time, at(0));

        // Its replacements arrive gated: still waiting for admission, saying why.
        let mut m = members(4, 4, 0, 0, 0);
        m.evicted = 4;
        assert_eq!(phase(&inputs(m, &finisher), Pending), (Pending, None));
    }

    #[test]
    fn a_gang_whose_elastic_extras_were_evicted_keeps_running() {
        let finisher = Finisher::Members;
        let mut m = members(4, 0, 4, 0, 0);
        m.evicted = 2;
        assert_eq!(phase(&inputs(m, &finisher), Running), (Running, None));
    }

    #[test]
    fn a_member_that_failed_on_its_own_still_fails_the_gang() {
        let finisher = Finisher::Members;
        let mut m = members(3, 0, 3, 0, 1);
        m.evicted = 1;
        assert_eq!(phase(&inputs(m, &finisher), Running).0, Failed);
    }
}
