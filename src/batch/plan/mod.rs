//! What the batch Job controller does for one Job, as a pure function of the Job, its PodGroup
//! and its pods ([`decide`]): the Job's lifecycle (Volcano's phases), its lifecycle policies,
//! and which pods to create or delete.
//!
//! Pods carry the job's `status.version` they were made for; a restart bumps the version, so
//! events of an earlier version's pods are never handled twice, and those pods are deleted.

mod dependencies;
mod policies;

use gangplank_core::model::PodPhase;

use crate::api::batch_job::{
    BatchJob, BatchJobStatus, JobCondition, JobPhase, JobState, TaskState,
};

pub use dependencies::{After, DEPENDENCY_RECHECK_SECONDS, after};
use dependencies::{held_back, missing};
pub use policies::{ACTIONS, EVENTS, names};
use policies::{describe, triggered};

/// One of the job's pods, as the controller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub task: String,
    pub index: i32,
    /// The job version the pod was made for.
    pub version: i32,
    pub phase: PodPhase,
    /// Being deleted.
    pub deleting: bool,
    /// Evicted (condition `DisruptionTarget`): reclaim, preemption or a drained node.
    pub evicted: bool,
    /// A failed pod's first non-zero container exit code.
    pub exit_code: Option<i32>,
    /// Creation time, Unix seconds.
    pub created: i64,
}

impl PodView {
    fn live(&self) -> bool {
        !self.phase.is_terminal()
    }
}

/// The job's PodGroup, as the controller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupAdmission {
    /// Admission let the gang start: its admission ahead of its pods holds, or its members
    /// were released.
    pub admitted: bool,
    /// Why it waits, from its `Admitted` condition.
    pub waiting: Option<String>,
}

/// A pod to create: task position in `spec.tasks` and index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct NewPod {
    pub task: usize,
    pub index: i32,
}

/// What to do for one Job.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    pub create_group: bool,
    /// The job is suspended: its PodGroup goes, so that it holds no room (admitted ahead of
    /// its pods, it would hold its queue's room without them) and asks for none; resumed, it
    /// is made again.
    pub delete_group: bool,
    /// Pods to create, for the version in `status`.
    pub create: Vec<NewPod>,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    pub status: BatchJobStatus,
    /// The job's `ttlSecondsAfterFinished` has passed.
    pub delete_job: bool,
    /// Look again after this many seconds (a pending timeout or a TTL), if nothing changes.
    pub recheck_after: Option<u64>,
    /// A task with its own `maxRetry` restarted (a task or a pod of it): one more of its retries.
    task_retried: Option<String>,
}

/// The reason of a job aborted because `spec.suspend` is true.
pub const SUSPENDED: &str = "Suspended";

/// The phase a job goes to, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Next {
    phase: JobPhase,
    reason: String,
    message: String,
    /// A policy restarted a task or a pod: one more retry.
    retried: bool,
}

impl Next {
    fn to(phase: JobPhase, reason: &str, message: impl Into<String>) -> Next {
        Next {
            phase,
            reason: reason.to_owned(),
            message: message.into(),
            retried: false,
        }
    }

    fn stay(state: &JobState) -> Next {
        Next::to(state.phase, &state.reason, state.message.clone())
    }
}

/// Decides what to do for `job` at `now` (Unix seconds); see the module docs.
pub fn decide(
    job: &BatchJob,
    group: Option<&GroupAdmission>,
    pods: &[PodView],
    now: i64,
) -> Decision {
    decide_after(job, &After::Ready, group, pods, now)
}

/// [`decide`], for a job the Jobs it depends on leave at `after`: until it first starts, it
/// makes no PodGroup and no pod unless they are [`After::Ready`].
pub fn decide_after(
    job: &BatchJob,
    after: &After,
    group: Option<&GroupAdmission>,
    pods: &[PodView],
    now: i64,
) -> Decision {
    let spec = &job.spec;
    let old = job.status.clone().unwrap_or_default();
    let mut status = BatchJobStatus {
        min_available: spec.gang_size(),
        version: old.version,
        retry_count: old.retry_count,
        task_retry_count: old.task_retry_count.clone(),
        running_since: old.running_since.clone(),
        controlled_resources: old.controlled_resources.clone(),
        conditions: old.conditions.clone(),
        state: old.state.clone(),
        ..Default::default()
    };
    let mut out = Decision {
        create_group: group.is_none(),
        ..Default::default()
    };
    // Pods of an earlier version go, whatever the phase.
    out.delete.extend(
        pods.iter()
            .filter(|p| p.version != old.version && !p.deleting)
            .map(|p| p.name.clone()),
    );
    let current: Vec<&PodView> = pods.iter().filter(|p| p.version == old.version).collect();
    count(
        &mut status,
        &current,
        spec.tasks.iter().map(|t| t.name.as_str()),
    );
    let phase = old.state.phase;
    let mut resumed = false;
    let held = if phase == JobPhase::Pending && group.is_none() && pods.is_empty() {
        held_back(after, &mut out)
    } else {
        None
    };
    let next = if let Some(next) = held {
        next
    } else {
        match phase {
            JobPhase::Aborted
                if old.state.reason == SUSPENDED && !spec.suspend.unwrap_or(false) =>
            {
                resumed = true;
                Next::to(
                    JobPhase::Pending,
                    "Resumed",
                    "resumed (spec.suspend is false): its gang is made again and waits for admission",
                )
            }
            JobPhase::Pending | JobPhase::Running | JobPhase::Restarting
                if spec.suspend.unwrap_or(false) =>
            {
                out.delete.extend(
                    current
                        .iter()
                        .filter(|p| !p.deleting)
                        .map(|p| p.name.clone()),
                );
                Next::to(
                    JobPhase::Aborting,
                    SUSPENDED,
                    "suspended (spec.suspend): its pods are deleted and its room given back; set spec.suspend to false to resume",
                )
            }
            JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated | JobPhase::Aborted => {
                if let Some(ttl) = spec.ttl_seconds_after_finished {
                    let finished = old
                        .state
                        .last_transition_time
                        .as_ref()
                        .map_or(now, |t| t.0.as_second());
                    let due = finished + i64::from(ttl);
                    if now >= due {
                        out.delete_job = true;
                    } else {
                        out.recheck_after = Some((due - now).unsigned_abs());
                    }
                }
                Next::stay(&old.state)
            }
            JobPhase::Restarting => {
                out.delete.extend(
                    current
                        .iter()
                        .filter(|p| !p.deleting)
                        .map(|p| p.name.clone()),
                );
                if pods.is_empty() {
                    Next::to(
                        JobPhase::Pending,
                        "Restarted",
                        format!(
                            "restarted ({} of maxRetry {}); waiting for admission",
                            old.retry_count,
                            spec.max_retries()
                        ),
                    )
                } else {
                    Next::stay(&old.state)
                }
            }
            JobPhase::Aborting | JobPhase::Terminating | JobPhase::Completing => {
                let live: Vec<&&PodView> = current.iter().filter(|p| p.live()).collect();
                out.delete
                    .extend(live.iter().filter(|p| !p.deleting).map(|p| p.name.clone()));
                if live.is_empty() {
                    let done = match phase {
                        JobPhase::Aborting => JobPhase::Aborted,
                        JobPhase::Terminating => JobPhase::Terminated,
                        _ => JobPhase::Completed,
                    };
                    Next::to(done, &old.state.reason, old.state.message.clone())
                } else {
                    Next::stay(&old.state)
                }
            }
            JobPhase::Pending | JobPhase::Running => match spec.beyond_limits() {
                // Never admitted: fail it before it makes a PodGroup or a pod.
                Some(why) if group.is_none() => {
                    out.create_group = false;
                    Next::to(JobPhase::Failed, "TooLarge", why)
                }
                _ => active(job, group, &current, &status, now, &mut out),
            },
        }
    };
    if next.phase != phase || status.state.last_transition_time.is_none() {
        status.state.last_transition_time = Some(time(now));
        status.conditions.push(JobCondition {
            status: next.phase,
            last_transition_time: Some(time(now)),
        });
    }
    if next.phase == JobPhase::Running && status.running_since.is_none() {
        status.running_since = Some(time(now));
    }
    if next.phase == JobPhase::Restarting && phase != JobPhase::Restarting {
        status.version = status.version.saturating_add(1);
        status.retry_count = status.retry_count.saturating_add(1);
        status.running_since = None;
    }
    if resumed {
        status.version = status.version.saturating_add(1);
        status.running_since = None;
    }
    if next.retried {
        status.retry_count = status.retry_count.saturating_add(1);
    }
    if let Some(task) = out.task_retried.take() {
        let n = status.task_retry_count.entry(task).or_default();
        *n = n.saturating_add(1);
    }
    if matches!(next.phase, JobPhase::Aborting | JobPhase::Aborted) && next.reason == SUSPENDED {
        out.create_group = false;
        out.delete_group = group.is_some();
    }
    status.state.phase = next.phase;
    status.state.reason = next.reason;
    status.state.message = next.message;
    out.delete.sort();
    out.delete.dedup();
    out.status = status;
    out
}

/// A Pending or Running job: policies first, then the gang's own course.
fn active(
    job: &BatchJob,
    group: Option<&GroupAdmission>,
    current: &[&PodView],
    counts: &BatchJobStatus,
    now: i64,
    out: &mut Decision,
) -> Next {
    let spec = &job.spec;
    let phase = counts.state.phase;
    let retries = counts.retry_count;
    if let Some((happened, policy)) = triggered(job, current, now, out) {
        let why = describe(&happened);
        let over = |action: &str| {
            Next::to(
                JobPhase::Failed,
                "MaxRetryExceeded",
                format!(
                    "{why}; {action} asked for, but the job already restarted {retries} times (maxRetry {})",
                    spec.max_retries()
                ),
            )
        };
        match policy.action.as_str() {
            "RestartJob" if retries >= spec.max_retries() => return over("RestartJob"),
            "RestartJob" => {
                return Next::to(
                    JobPhase::Restarting,
                    "RestartJob",
                    format!("{why}: restarting the whole gang"),
                );
            }
            action @ ("RestartTask" | "RestartPod") => {
                // A task with its own maxRetry counts its own restarts; the others, the job's.
                let task_limit = spec
                    .tasks
                    .iter()
                    .find(|t| t.name == happened.task)
                    .and_then(|t| t.max_retry);
                if let Some(limit) = task_limit {
                    let done = counts
                        .task_retry_count
                        .get(happened.task)
                        .copied()
                        .unwrap_or(0);
                    if done >= limit {
                        return Next::to(
                            JobPhase::Failed,
                            "MaxRetryExceeded",
                            format!(
                                "{why}; {action} asked for, but task {} already restarted {done} times (its maxRetry {limit})",
                                happened.task
                            ),
                        );
                    }
                } else if retries >= spec.max_retries() {
                    return over(action);
                }
                let doomed: Vec<String> = current
                    .iter()
                    .filter(|p| !p.deleting)
                    .filter(|p| match action {
                        "RestartTask" => p.task == happened.task,
                        _ => happened.pod.is_some_and(|h| h.name == p.name),
                    })
                    .map(|p| p.name.clone())
                    .collect();
                let retried = !doomed.is_empty();
                out.delete.extend(doomed);
                if retried && task_limit.is_some() {
                    out.task_retried = Some(happened.task.to_owned());
                }
                let what = if action == "RestartTask" {
                    format!("restarting task {}", happened.task)
                } else {
                    "restarting the pod".to_owned()
                };
                return Next {
                    retried,
                    ..Next::to(phase, action, format!("{why}: {what}"))
                };
            }
            "AbortJob" => return Next::to(JobPhase::Aborting, "AbortJob", why),
            "TerminateJob" => return Next::to(JobPhase::Terminating, "TerminateJob", why),
            "CompleteJob" => return Next::to(JobPhase::Completing, "CompleteJob", why),
            _ => {}
        }
    }
    let Some(group) = group else {
        return Next::to(
            JobPhase::Pending,
            "CreatingPodGroup",
            "creating the job's PodGroup",
        );
    };
    let total = spec.replicas();
    let started = counts.running + counts.succeeded + counts.failed > 0 || !current.is_empty();
    if phase == JobPhase::Pending && !group.admitted && !started {
        return Next::to(
            JobPhase::Pending,
            "WaitingForAdmission",
            group
                .waiting
                .clone()
                .unwrap_or_else(|| "the gang waits for admission; no pod is created before".into()),
        );
    }
    out.create = missing(job, current);
    let finished = counts.succeeded + counts.failed;
    let min_success = spec.min_success.unwrap_or(counts.min_available);
    if spec.min_success.is_some() && counts.succeeded >= min_success {
        return Next::to(
            JobPhase::Completing,
            "MinSuccess",
            format!(
                "{} pods succeeded, minSuccess {min_success}",
                counts.succeeded
            ),
        );
    }
    if current.len() as i32 >= total && finished >= total && out.create.is_empty() {
        return if counts.succeeded >= min_success {
            Next::to(
                JobPhase::Completed,
                "Completed",
                format!("{} of {total} pods succeeded", counts.succeeded),
            )
        } else {
            Next::to(
                JobPhase::Failed,
                "PodsFailed",
                format!(
                    "{} of {total} pods succeeded, below the {min_success} needed; {} failed",
                    counts.succeeded, counts.failed
                ),
            )
        };
    }
    if counts.running + counts.succeeded >= counts.min_available {
        return Next::to(
            JobPhase::Running,
            "Running",
            format!(
                "{} pods running, {} succeeded (minAvailable {})",
                counts.running, counts.succeeded, counts.min_available
            ),
        );
    }
    Next::to(
        phase,
        "Starting",
        format!(
            "admitted; {} of minAvailable {} pods running or succeeded",
            counts.running + counts.succeeded,
            counts.min_available
        ),
    )
}

/// Counts the current version's pods into `status`, per task and in all.
fn count<'t>(status: &mut BatchJobStatus, pods: &[&PodView], tasks: impl Iterator<Item = &'t str>) {
    for task in tasks {
        status
            .task_status_count
            .insert(task.to_owned(), TaskState::default());
    }
    for pod in pods {
        if pod.deleting {
            status.terminating += 1;
            continue;
        }
        match pod.phase {
            PodPhase::Pending => status.pending += 1,
            PodPhase::Running => status.running += 1,
            PodPhase::Succeeded => status.succeeded += 1,
            PodPhase::Failed => status.failed += 1,
            _ => status.unknown += 1,
        }
        if let Some(task) = status.task_status_count.get_mut(&pod.task) {
            *task.phase.entry(pod.phase.as_str().to_owned()).or_default() += 1;
        }
    }
}

fn time(unix: i64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(unix).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests;
