//! What the batch Job controller does for one Job, as a pure function of the Job, its PodGroup
//! and its pods ([`decide`]): the Job's lifecycle (Volcano's phases), its lifecycle policies,
//! and which pods to create or delete.
//!
//! Pods carry the job's `status.version` they were made for; a restart bumps the version, so
//! events of an earlier version's pods are never handled twice, and those pods are deleted.

use std::collections::{BTreeMap, BTreeSet};

use gangplank_core::limits;

use crate::api::batch_job::{
    BatchJob, BatchJobStatus, JobCondition, JobPhase, JobState, LifecyclePolicy, TaskState,
    duration_seconds,
};

/// One of the job's pods, as the controller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub task: String,
    pub index: i32,
    /// The job version the pod was made for.
    pub version: i32,
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    pub phase: String,
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
        !matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }
}

/// The job's PodGroup, as the controller reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
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

/// An event a policy may handle, with the task it happened in.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Happened<'p> {
    event: &'static str,
    task: &'p str,
    pod: Option<&'p PodView>,
}

/// The reason of a job aborted because `spec.suspend` is true.
pub const SUSPENDED: &str = "Suspended";

/// Every event name a policy may name.
pub const EVENTS: [&str; 7] = [
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "TaskCompleted",
    "TaskFailed",
    "Unknown",
];

/// Every action a policy may take.
pub const ACTIONS: [&str; 6] = [
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "TerminateJob",
    "CompleteJob",
];

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

/// Where the Jobs a job depends on (`spec.dependsOn`) leave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// It depends on none, or they completed as it asks: it may start.
    Ready,
    /// Not yet: why.
    Waiting(String),
    /// They can no longer complete as it asks: why.
    Failed(String),
}

/// Where the Jobs `job` depends on leave it, `phase_of` giving each one's phase (`None`: no
/// such Job in its namespace).
pub fn after(job: &BatchJob, phase_of: impl Fn(&str) -> Option<JobPhase>) -> After {
    let Some(depends) = job.spec.depends_on.as_ref().filter(|d| !d.name.is_empty()) else {
        return After::Ready;
    };
    let any = depends.iteration.as_deref() == Some("any");
    let (mut done, mut failed, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
    for name in &depends.name {
        match phase_of(name) {
            Some(JobPhase::Completed) => done.push(name.as_str()),
            Some(phase) if phase.is_finished() => {
                failed.push(format!("{name} ({})", phase.as_str()))
            }
            Some(phase) => waiting.push(format!("{name} ({})", phase.as_str())),
            None => waiting.push(format!("{name} (not created yet)")),
        }
    }
    let enough = if any {
        !done.is_empty()
    } else {
        done.len() == depends.name.len()
    };
    let hopeless = if any {
        failed.len() == depends.name.len()
    } else {
        !failed.is_empty()
    };
    if enough {
        After::Ready
    } else if hopeless {
        After::Failed(format!(
            "jobs it depends on ended without completing: {}",
            failed.join(", ")
        ))
    } else {
        let how = if any { "one of" } else { "every one of" };
        After::Waiting(format!(
            "starts once {how} the jobs it depends on has completed; waiting for {}",
            waiting.join(", ")
        ))
    }
}

/// Where a job that has not started yet stands while the Jobs it depends on are not
/// [`After::Ready`]: waiting (looked at again soon) or failed; `None` once they are ready.
fn held_back(after: &After, out: &mut Decision) -> Option<Next> {
    match after {
        After::Ready => None,
        After::Waiting(why) => {
            out.create_group = false;
            out.recheck_after = Some(DEPENDENCY_RECHECK_SECONDS);
            Some(Next::to(
                JobPhase::Pending,
                "WaitingForDependencies",
                why.clone(),
            ))
        }
        After::Failed(why) => {
            out.create_group = false;
            Some(Next::to(JobPhase::Failed, "DependencyFailed", why.clone()))
        }
    }
}

/// How often a job waiting for the jobs it depends on looks again.
pub const DEPENDENCY_RECHECK_SECONDS: u64 = 5;

/// Decides what to do for `job` at `now` (Unix seconds); see the module docs.
pub fn decide(job: &BatchJob, group: Option<&GroupView>, pods: &[PodView], now: i64) -> Decision {
    decide_after(job, &After::Ready, group, pods, now)
}

/// [`decide`], for a job the Jobs it depends on leave at `after`: until it first starts, it
/// makes no PodGroup and no pod unless they are [`After::Ready`].
pub fn decide_after(
    job: &BatchJob,
    after: &After,
    group: Option<&GroupView>,
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
    group: Option<&GroupView>,
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
        match pod.phase.as_str() {
            "Pending" => status.pending += 1,
            "Running" => status.running += 1,
            "Succeeded" => status.succeeded += 1,
            "Failed" => status.failed += 1,
            _ => status.unknown += 1,
        }
        if let Some(task) = status.task_status_count.get_mut(&pod.task) {
            *task.phase.entry(pod.phase.clone()).or_default() += 1;
        }
    }
}

/// The first event that a policy handles, with that policy: the task's policies first, then
/// the job's. Sets `out.recheck_after` for a `PodPending` timeout still to come.
fn triggered<'j>(
    job: &'j BatchJob,
    pods: &[&'j PodView],
    now: i64,
    out: &mut Decision,
) -> Option<(Happened<'j>, &'j LifecyclePolicy)> {
    let mut happened = Vec::new();
    for task in &job.spec.tasks {
        let of_task: Vec<&&PodView> = pods
            .iter()
            .filter(|p| p.task == task.name && !p.deleting)
            .collect();
        for pod in &of_task {
            let event = match pod.phase.as_str() {
                "Failed" if pod.evicted => Some("PodEvicted"),
                "Failed" => Some("PodFailed"),
                "Unknown" => Some("Unknown"),
                _ if pod.evicted => Some("PodEvicted"),
                _ => None,
            };
            if let Some(event) = event {
                happened.push(Happened {
                    event,
                    task: &task.name,
                    pod: Some(pod),
                });
            }
        }
        let succeeded = of_task.iter().filter(|p| p.phase == "Succeeded").count() as i32;
        let failed = of_task.iter().filter(|p| p.phase == "Failed").count() as i32;
        if task.replicas > 0 && succeeded >= task.replicas {
            happened.push(Happened {
                event: "TaskCompleted",
                task: &task.name,
                pod: None,
            });
        }
        let needed = task.min_available.unwrap_or(task.replicas);
        if failed > 0 && task.replicas - failed < needed {
            happened.push(Happened {
                event: "TaskFailed",
                task: &task.name,
                pod: None,
            });
        }
    }
    let policies = |task: &str| -> Vec<&'j LifecyclePolicy> {
        job.spec
            .tasks
            .iter()
            .filter(|t| t.name == task)
            .flat_map(|t| t.policies.iter())
            .chain(job.spec.policies.iter())
            .collect()
    };
    for h in &happened {
        for policy in policies(h.task) {
            if handles(policy, h) {
                return Some((h.clone(), policy));
            }
        }
    }
    // PodPending with a timeout: a pod that has waited too long for its node.
    for pod in pods.iter().filter(|p| p.phase == "Pending" && !p.deleting) {
        for policy in policies(&pod.task) {
            let Some(timeout) = policy
                .timeout
                .as_deref()
                .and_then(|t| duration_seconds(t).ok())
            else {
                continue;
            };
            let h = Happened {
                event: "PodPending",
                task: job_task(job, &pod.task),
                pod: Some(pod),
            };
            if !names(policy).any(|e| e == "PodPending" || e == "*") {
                continue;
            }
            let due = pod.created + timeout as i64;
            if now >= due {
                return Some((h, policy));
            }
            let wait = (due - now).unsigned_abs();
            out.recheck_after = Some(out.recheck_after.map_or(wait, |w| w.min(wait)));
        }
    }
    None
}

/// The task's name as the job spells it (so that [`Happened`] borrows from the job).
fn job_task<'j>(job: &'j BatchJob, task: &str) -> &'j str {
    job.spec
        .tasks
        .iter()
        .find(|t| t.name == task)
        .map_or("", |t| t.name.as_str())
}

/// The events a policy names.
pub fn names(policy: &LifecyclePolicy) -> impl Iterator<Item = &str> {
    policy
        .event
        .as_deref()
        .into_iter()
        .chain(policy.events.iter().map(String::as_str))
}

/// Whether `policy` handles what `h` says happened (`PodPending` only through its timeout).
fn handles(policy: &LifecyclePolicy, h: &Happened<'_>) -> bool {
    if let Some(code) = policy.exit_code {
        return h.event == "PodFailed" && h.pod.and_then(|p| p.exit_code) == Some(code);
    }
    h.event != "PodPending" && names(policy).any(|e| e == h.event || e == "*")
}

fn describe(h: &Happened<'_>) -> String {
    match (h.event, h.pod) {
        ("PodFailed", Some(p)) => match p.exit_code {
            Some(code) => format!("pod {} failed with exit code {code}", p.name),
            None => format!("pod {} failed", p.name),
        },
        ("PodEvicted", Some(p)) => format!("pod {} was evicted", p.name),
        ("PodPending", Some(p)) => format!("pod {} waited too long for a node", p.name),
        ("Unknown", Some(p)) => format!("pod {} is in phase Unknown", p.name),
        ("TaskCompleted", _) => format!("task {} completed", h.task),
        ("TaskFailed", _) => format!("task {} failed", h.task),
        (event, _) => format!("{event} in task {}", h.task),
    }
}

/// The pods of the current version not made yet, of the tasks whose dependencies run.
fn missing(job: &BatchJob, current: &[&PodView]) -> Vec<NewPod> {
    let made: BTreeSet<(&str, i32)> = current.iter().map(|p| (p.task.as_str(), p.index)).collect();
    let mut out = Vec::new();
    for (t, task) in job.spec.tasks.iter().enumerate() {
        if !dependencies_run(job, task.depends_on.as_ref(), current) {
            continue;
        }
        // A job stored before the limits existed gets pods up to them at most.
        for index in 0..task.replicas.clamp(0, limits::MAX_MEMBERS as i32) {
            if !made.contains(&(task.name.as_str(), index)) {
                out.push(NewPod { task: t, index });
            }
        }
    }
    out
}

/// Whether the tasks a task depends on run: every one (`all`, the default) or one (`any`) has
/// all its replicas running or succeeded.
fn dependencies_run(
    job: &BatchJob,
    depends: Option<&crate::api::batch_job::DependsOn>,
    current: &[&PodView],
) -> bool {
    let Some(depends) = depends.filter(|d| !d.name.is_empty()) else {
        return true;
    };
    let replicas: BTreeMap<&str, i32> = job
        .spec
        .tasks
        .iter()
        .map(|t| (t.name.as_str(), t.replicas))
        .collect();
    let runs = |task: &String| {
        let up = current
            .iter()
            .filter(|p| &p.task == task && matches!(p.phase.as_str(), "Running" | "Succeeded"))
            .count() as i32;
        up >= replicas.get(task.as_str()).copied().unwrap_or(0)
    };
    if depends.iteration.as_deref() == Some("any") {
        depends.name.iter().any(runs)
    } else {
        depends.name.iter().all(runs)
    }
}

fn time(unix: i64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(unix).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::batch_job::{BatchJobSpec, DependsOn, TaskSpec};

    const NOW: i64 = 1_800_000_000;

    fn job(tasks: &[(&str, i32)], policies: Vec<LifecyclePolicy>) -> BatchJob {
        let mut job = BatchJob::new(
            "train",
            BatchJobSpec {
                max_retry: Some(2),
                policies,
                ..BatchJobSpec::of_tasks(
                    tasks
                        .iter()
                        .map(|(name, replicas)| TaskSpec {
                            name: (*name).into(),
                            replicas: *replicas,
                            ..TaskSpec::default()
                        })
                        .collect(),
                )
            },
        );
        job.metadata.namespace = Some("ns".into());
        job
    }

    fn policy(event: &str, action: &str) -> LifecyclePolicy {
        LifecyclePolicy {
            action: action.into(),
            event: Some(event.into()),
            ..LifecyclePolicy::default()
        }
    }

    fn pod(task: &str, index: i32, phase: &str) -> PodView {
        PodView {
            name: format!("train-{task}-{index}"),
            task: task.into(),
            index,
            version: 0,
            phase: phase.into(),
            deleting: false,
            evicted: false,
            exit_code: (phase == "Failed").then_some(1),
            created: NOW - 10,
        }
    }

    fn in_phase(mut job: BatchJob, phase: JobPhase) -> BatchJob {
        let mut status = job.status.take().unwrap_or_default();
        status.state.phase = phase;
        status.state.last_transition_time = Some(time(NOW - 100));
        job.status = Some(status);
        job
    }

    const ADMITTED: GroupView = GroupView {
        admitted: true,
        waiting: None,
    };

    #[test]
    fn a_new_job_gets_its_pod_group_and_no_pod() {
        let d = decide(
            &job(&[("master", 1), ("worker", 3)], vec![]),
            None,
            &[],
            NOW,
        );
        assert!(d.create_group);
        assert!(d.create.is_empty());
        assert_eq!(d.status.state.phase, JobPhase::Pending);
        assert_eq!(d.status.min_available, 4);
    }

    #[test]
    fn a_job_waiting_for_admission_creates_no_pod_and_says_why() {
        let waiting = GroupView {
            admitted: false,
            waiting: Some("queue q has 0 free".into()),
        };
        let d = decide(&job(&[("worker", 4)], vec![]), Some(&waiting), &[], NOW);
        assert!(d.create.is_empty());
        assert_eq!(d.status.state.reason, "WaitingForAdmission");
        assert_eq!(d.status.state.message, "queue q has 0 free");
    }

    #[test]
    fn a_job_beyond_the_limits_fails_before_it_makes_a_group_or_a_pod() {
        let d = decide(
            &job(&[("a", i32::MAX), ("b", i32::MAX)], vec![]),
            None,
            &[],
            NOW,
        );
        assert!(!d.create_group);
        assert!(d.create.is_empty());
        assert_eq!(d.status.state.phase, JobPhase::Failed);
        assert_eq!(d.status.state.reason, "TooLarge");
        assert_eq!(
            d.status.state.message,
            "the tasks' replicas together (2147483647) are more than Gangplank's largest gang (10000); create the job again with fewer"
        );
    }

    #[test]
    fn an_admitted_job_stored_beyond_the_limits_gets_pods_up_to_them_only() {
        let d = decide(
            &job(&[("worker", i32::MAX)], vec![]),
            Some(&ADMITTED),
            &[],
            NOW,
        );
        assert_eq!(d.create.len(), limits::MAX_MEMBERS as usize);
    }

    #[test]
    fn an_admitted_job_creates_every_pod_of_every_task() {
        let d = decide(
            &job(&[("master", 1), ("worker", 2)], vec![]),
            Some(&ADMITTED),
            &[],
            NOW,
        );
        assert_eq!(
            d.create,
            vec![
                NewPod { task: 0, index: 0 },
                NewPod { task: 1, index: 0 },
                NewPod { task: 1, index: 1 }
            ]
        );
    }

    #[test]
    fn the_job_runs_once_min_available_pods_run_and_completes_when_all_succeeded() {
        let j = job(&[("master", 1), ("worker", 2)], vec![]);
        let running = [
            pod("master", 0, "Running"),
            pod("worker", 0, "Running"),
            pod("worker", 1, "Running"),
        ];
        let d = decide(&j, Some(&ADMITTED), &running, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Running);
        assert!(d.status.running_since.is_some());
        let j = in_phase(j, JobPhase::Running);
        let done = [
            pod("master", 0, "Succeeded"),
            pod("worker", 0, "Succeeded"),
            pod("worker", 1, "Succeeded"),
        ];
        let d = decide(&j, Some(&ADMITTED), &done, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Completed);
        assert_eq!(d.status.task_status_count["worker"].phase["Succeeded"], 2);
    }

    #[test]
    fn without_a_policy_a_failed_pod_fails_the_job_once_every_pod_finished() {
        let j = in_phase(job(&[("worker", 2)], vec![]), JobPhase::Running);
        let d = decide(
            &j,
            Some(&ADMITTED),
            &[pod("worker", 0, "Failed"), pod("worker", 1, "Running")],
            NOW,
        );
        assert_eq!(d.status.state.phase, JobPhase::Running);
        assert!(d.delete.is_empty() && d.create.is_empty());
        let d = decide(
            &j,
            Some(&ADMITTED),
            &[pod("worker", 0, "Failed"), pod("worker", 1, "Succeeded")],
            NOW,
        );
        assert_eq!(d.status.state.phase, JobPhase::Failed);
        assert_eq!(d.status.state.reason, "PodsFailed");
    }

    #[test]
    fn pod_failed_restart_job_restarts_the_whole_gang_until_max_retry_then_fails() {
        let j = in_phase(
            job(
                &[("master", 1), ("worker", 2)],
                vec![policy("PodFailed", "RestartJob")],
            ),
            JobPhase::Running,
        );
        let pods = [
            pod("master", 0, "Running"),
            pod("worker", 0, "Failed"),
            pod("worker", 1, "Running"),
        ];
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Restarting);
        assert_eq!((d.status.version, d.status.retry_count), (1, 1));
        // Restarting: the earlier version's pods are deleted; once none is left it waits again.
        let mut j = j;
        j.status = Some(d.status.clone());
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.delete.len(), 3);
        let d = decide(&j, Some(&ADMITTED), &[], NOW);
        assert_eq!(d.status.state.phase, JobPhase::Pending);
        // At maxRetry (2), the next failure fails the job.
        let mut status = d.status.clone();
        status.retry_count = 2;
        status.state.phase = JobPhase::Running;
        j.status = Some(status);
        let pods: Vec<PodView> = pods
            .iter()
            .cloned()
            .map(|p| PodView { version: 1, ..p })
            .collect();
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Failed);
        assert_eq!(d.status.state.reason, "MaxRetryExceeded");
        assert!(
            d.status.state.message.contains("pod train-worker-0 failed"),
            "{}",
            d.status.state.message
        );
    }

    #[test]
    fn a_task_with_its_own_max_retry_counts_its_own_restarts_and_fails_the_job_past_them() {
        // The job allows 2 restarts; the worker task 1 of its own, the master the job's.
        let mut j = job(
            &[("master", 1), ("worker", 2)],
            vec![policy("PodFailed", "RestartPod")],
        );
        j.spec.tasks[1].max_retry = Some(1);
        let j = in_phase(j, JobPhase::Running);
        let pods = [
            pod("master", 0, "Running"),
            pod("worker", 0, "Failed"),
            pod("worker", 1, "Running"),
        ];
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Running);
        assert_eq!(d.delete, vec!["train-worker-0"]);
        assert_eq!(d.status.task_retry_count.get("worker"), Some(&1));
        assert_eq!(d.status.retry_count, 1);

        // The remade worker fails again: the task's one restart is spent, the job's are not.
        let mut j = j;
        j.status = Some(d.status.clone());
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Failed);
        assert_eq!(d.status.state.reason, "MaxRetryExceeded");
        assert!(
            d.status
                .state
                .message
                .contains("task worker already restarted 1 times (its maxRetry 1)"),
            "{}",
            d.status.state.message
        );

        // The master, without a maxRetry of its own, is restarted while the job has retries.
        let pods = [
            pod("master", 0, "Failed"),
            pod("worker", 0, "Running"),
            pod("worker", 1, "Running"),
        ];
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Running);
        assert_eq!(d.delete, vec!["train-master-0"]);
        assert_eq!(d.status.retry_count, 2);
        assert_eq!(d.status.task_retry_count.get("worker"), Some(&1));
    }

    #[test]
    fn a_suspended_job_deletes_its_pods_and_a_resumed_one_waits_for_admission_again() {
        let mut j = in_phase(
            job(&[("master", 1), ("worker", 2)], vec![]),
            JobPhase::Running,
        );
        j.spec.suspend = Some(true);
        let pods = [
            pod("master", 0, "Running"),
            pod("worker", 0, "Running"),
            pod("worker", 1, "Running"),
        ];
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Aborting);
        assert_eq!(d.status.state.reason, SUSPENDED);
        assert_eq!(d.delete.len(), 3);
        assert!(d.delete_group, "its PodGroup goes, holding no room");

        j.status = Some(d.status.clone());
        let d = decide(&j, Some(&ADMITTED), &[], NOW);
        assert_eq!(d.status.state.phase, JobPhase::Aborted);
        assert_eq!(d.status.state.reason, SUSPENDED);
        j.status = Some(d.status.clone());
        let d = decide(&j, None, &[], NOW);
        assert_eq!(d.status.state.phase, JobPhase::Aborted, "still suspended");
        assert!(d.create.is_empty());
        assert!(!d.create_group, "no PodGroup while suspended");

        j.spec.suspend = Some(false);
        let d = decide(&j, None, &[], NOW);
        assert!(d.create_group, "resumed, it gets its PodGroup again");
        assert_eq!(d.status.state.phase, JobPhase::Pending);
        assert_eq!(d.status.state.reason, "Resumed");
        assert_eq!(
            d.status.version, 1,
            "the pods made again are of a new version"
        );
        assert_eq!(d.status.retry_count, 0, "a resume is no retry");

        // A job aborted by a policy stays aborted whatever spec.suspend says.
        let mut aborted = in_phase(job(&[("worker", 1)], vec![]), JobPhase::Aborted);
        aborted.status.as_mut().unwrap().state.reason = "AbortJob".into();
        let d = decide(&aborted, Some(&ADMITTED), &[], NOW);
        assert_eq!(d.status.state.phase, JobPhase::Aborted);
    }

    #[test]
    fn a_job_that_depends_on_others_makes_nothing_until_they_completed_and_fails_if_they_cannot() {
        let mut j = job(&[("worker", 2)], vec![]);
        j.spec.depends_on = Some(DependsOn {
            name: vec!["prepare".into(), "fetch".into()],
            iteration: None,
        });
        let phases = |prepare: Option<JobPhase>, fetch: Option<JobPhase>| {
            move |name: &str| match name {
                "prepare" => prepare,
                "fetch" => fetch,
                _ => None,
            }
        };
        let waiting = after(
            &j,
            phases(Some(JobPhase::Completed), Some(JobPhase::Running)),
        );
        let d = decide_after(&j, &waiting, None, &[], NOW);
        assert!(
            !d.create_group,
            "no PodGroup before the jobs it depends on completed"
        );
        assert_eq!(d.status.state.reason, "WaitingForDependencies");
        assert!(
            d.status.state.message.contains("fetch (Running)"),
            "{}",
            d.status.state.message
        );
        assert_eq!(d.recheck_after, Some(DEPENDENCY_RECHECK_SECONDS));
        let missing = after(&j, phases(Some(JobPhase::Completed), None));
        assert!(matches!(&missing, After::Waiting(why) if why.contains("fetch (not created yet)")));

        let ready = after(
            &j,
            phases(Some(JobPhase::Completed), Some(JobPhase::Completed)),
        );
        assert_eq!(ready, After::Ready);
        assert!(decide_after(&j, &ready, None, &[], NOW).create_group);

        let failed = after(
            &j,
            phases(Some(JobPhase::Completed), Some(JobPhase::Failed)),
        );
        let d = decide_after(&j, &failed, None, &[], NOW);
        assert_eq!(d.status.state.phase, JobPhase::Failed);
        assert_eq!(d.status.state.reason, "DependencyFailed");

        // With `any`, one completed is enough, and it fails only once none can complete.
        j.spec.depends_on.as_mut().unwrap().iteration = Some("any".into());
        assert_eq!(
            after(
                &j,
                phases(Some(JobPhase::Failed), Some(JobPhase::Completed))
            ),
            After::Ready
        );
        assert!(matches!(
            after(&j, phases(Some(JobPhase::Failed), Some(JobPhase::Running))),
            After::Waiting(_)
        ));
        assert!(matches!(
            after(&j, phases(Some(JobPhase::Failed), Some(JobPhase::Aborted))),
            After::Failed(_)
        ));

        // Once started, what the others do no longer matters.
        let running = in_phase(j, JobPhase::Running);
        let d = decide_after(
            &running,
            &failed,
            Some(&ADMITTED),
            &[pod("worker", 0, "Running")],
            NOW,
        );
        assert_ne!(d.status.state.phase, JobPhase::Failed);
    }

    #[test]
    fn task_completed_complete_job_deletes_the_rest_and_completes() {
        let mut j = job(&[("launcher", 1), ("worker", 2)], vec![]);
        j.spec.tasks[0].policies = vec![policy("TaskCompleted", "CompleteJob")];
        let j = in_phase(j, JobPhase::Running);
        let pods = [
            pod("launcher", 0, "Succeeded"),
            pod("worker", 0, "Running"),
            pod("worker", 1, "Running"),
        ];
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Completing);
        let mut j = j;
        j.status = Some(d.status);
        let d = decide(&j, Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.delete, vec!["train-worker-0", "train-worker-1"]);
        let d = decide(&j, Some(&ADMITTED), &pods[..1], NOW);
        assert_eq!(d.status.state.phase, JobPhase::Completed);
    }

    #[test]
    fn an_exit_code_policy_matches_only_that_code_and_a_task_policy_comes_first() {
        let mut j = job(&[("worker", 2)], vec![policy("PodFailed", "AbortJob")]);
        j.spec.tasks[0].policies = vec![LifecyclePolicy {
            action: "RestartPod".into(),
            exit_code: Some(3),
            ..LifecyclePolicy::default()
        }];
        let j = in_phase(j, JobPhase::Running);
        let mut three = pod("worker", 0, "Failed");
        three.exit_code = Some(3);
        let d = decide(
            &j,
            Some(&ADMITTED),
            &[three, pod("worker", 1, "Running")],
            NOW,
        );
        assert_eq!(d.delete, vec!["train-worker-0"]);
        assert_eq!(d.status.retry_count, 1);
        assert_eq!(d.status.state.phase, JobPhase::Running);
        let d = decide(
            &j,
            Some(&ADMITTED),
            &[pod("worker", 0, "Failed"), pod("worker", 1, "Running")],
            NOW,
        );
        assert_eq!(d.status.state.phase, JobPhase::Aborting);
    }

    #[test]
    fn a_pod_pending_past_its_timeout_triggers_the_policy_and_before_it_a_recheck() {
        let mut p = policy("PodPending", "TerminateJob");
        p.timeout = Some("60s".into());
        let j = job(&[("worker", 1)], vec![p]);
        let pending = pod("worker", 0, "Pending");
        let d = decide(&j, Some(&ADMITTED), std::slice::from_ref(&pending), NOW);
        assert_eq!(d.recheck_after, Some(50));
        assert_eq!(d.status.state.phase, JobPhase::Pending);
        let d = decide(&j, Some(&ADMITTED), &[pending], NOW + 60);
        assert_eq!(d.status.state.phase, JobPhase::Terminating);
    }

    #[test]
    fn a_task_depending_on_another_is_created_once_that_one_runs() {
        let mut j = job(&[("master", 1), ("worker", 2)], vec![]);
        j.spec.tasks[1].depends_on = Some(DependsOn {
            name: vec!["master".into()],
            iteration: None,
        });
        let d = decide(&j, Some(&ADMITTED), &[], NOW);
        assert_eq!(d.create, vec![NewPod { task: 0, index: 0 }]);
        let d = decide(&j, Some(&ADMITTED), &[pod("master", 0, "Running")], NOW);
        assert_eq!(d.create.len(), 2);
    }

    #[test]
    fn min_success_completes_the_job_early() {
        let mut j = job(&[("worker", 4)], vec![]);
        j.spec.min_success = Some(2);
        let pods = [
            pod("worker", 0, "Succeeded"),
            pod("worker", 1, "Succeeded"),
            pod("worker", 2, "Running"),
            pod("worker", 3, "Running"),
        ];
        let d = decide(&in_phase(j, JobPhase::Running), Some(&ADMITTED), &pods, NOW);
        assert_eq!(d.status.state.phase, JobPhase::Completing);
    }

    #[test]
    fn a_finished_job_is_deleted_after_its_ttl() {
        let mut j = job(&[("worker", 1)], vec![]);
        j.spec.ttl_seconds_after_finished = Some(300);
        let j = in_phase(j, JobPhase::Completed);
        let d = decide(&j, Some(&ADMITTED), &[], NOW);
        assert_eq!((d.delete_job, d.recheck_after), (false, Some(200)));
        assert!(decide(&j, Some(&ADMITTED), &[], NOW + 200).delete_job);
    }
}
