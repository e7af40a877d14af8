//! What the batch Job controller does for one Job, as a pure function of the Job, its PodGroup
//! and its pods ([`decide`]): the Job's lifecycle (Volcano's phases), its lifecycle policies,
//! and which pods to create or delete.
//!
//! Pods carry the job's `status.version` they were made for; a restart bumps the version, so
//! events of an earlier version's pods are never handled twice, and those pods are deleted.

mod active;
mod dependencies;
mod policies;

use gangplank_core::model::PodPhase;

use crate::api::batch_job::{
    BatchJob, BatchJobStatus, JobCondition, JobPhase, JobState, TaskState,
};

use dependencies::held_back;
pub use dependencies::{After, DEPENDENCY_RECHECK_SECONDS, after};
pub use policies::{ACTIONS, EVENTS, names};

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
    let seen = Seen::new(job, group, pods, now);
    let mut status = seen.carried();
    count(
        &mut status,
        &seen.current,
        job.spec.tasks.iter().map(|t| t.name.as_str()),
    );
    let mut out = Decision {
        create_group: group.is_none(),
        ..Default::default()
    };
    // Pods of an earlier version go, whatever the phase.
    let earlier: Vec<&PodView> = pods
        .iter()
        .filter(|p| p.version != seen.old.version)
        .collect();
    delete(&mut out, &earlier);
    let phase = seen.old.state.phase;
    let held = if phase == JobPhase::Pending && group.is_none() && pods.is_empty() {
        held_back(after, &mut out)
    } else {
        None
    };
    let next = held.unwrap_or_else(|| seen.next(&status, &mut out));
    if matches!(next.phase, JobPhase::Aborting | JobPhase::Aborted) && next.reason == SUSPENDED {
        out.create_group = false;
        out.delete_group = group.is_some();
    }
    let task_retried = out.task_retried.take();
    advance(&mut status, phase, next, seen.resuming(), task_retried, now);
    out.delete.sort();
    out.delete.dedup();
    out.status = status;
    out
}

/// What the controller sees of one Job when it decides: the Job, its PodGroup, its pods and
/// the time.
struct Seen<'a> {
    job: &'a BatchJob,
    /// The job's status as it was.
    old: BatchJobStatus,
    group: Option<&'a GroupAdmission>,
    pods: &'a [PodView],
    /// The pods of the old status's version.
    current: Vec<&'a PodView>,
    now: i64,
}

impl<'a> Seen<'a> {
    fn new(
        job: &'a BatchJob,
        group: Option<&'a GroupAdmission>,
        pods: &'a [PodView],
        now: i64,
    ) -> Self {
        let old = job.status.clone().unwrap_or_default();
        let current = pods.iter().filter(|p| p.version == old.version).collect();
        Seen {
            job,
            old,
            group,
            pods,
            current,
            now,
        }
    }

    /// The new status before the pods are counted: what it keeps of the old one.
    fn carried(&self) -> BatchJobStatus {
        let old = &self.old;
        BatchJobStatus {
            min_available: self.job.spec.gang_size(),
            version: old.version,
            retry_count: old.retry_count,
            task_retry_count: old.task_retry_count.clone(),
            running_since: old.running_since.clone(),
            controlled_resources: old.controlled_resources.clone(),
            conditions: old.conditions.clone(),
            state: old.state.clone(),
            ..Default::default()
        }
    }

    /// The job was suspended and `spec.suspend` is false again.
    fn resuming(&self) -> bool {
        self.old.state.phase == JobPhase::Aborted
            && self.old.state.reason == SUSPENDED
            && !self.job.spec.suspend.unwrap_or(false)
    }

    /// The phase the job goes to from the one it was in, given the pods `counts`.
    fn next(&self, counts: &BatchJobStatus, out: &mut Decision) -> Next {
        let spec = &self.job.spec;
        match self.old.state.phase {
            JobPhase::Aborted if self.resuming() => Next::to(
                JobPhase::Pending,
                "Resumed",
                "resumed (spec.suspend is false): its gang is made again and waits for admission",
            ),
            JobPhase::Pending | JobPhase::Running | JobPhase::Restarting
                if spec.suspend.unwrap_or(false) =>
            {
                delete(out, &self.current);
                Next::to(
                    JobPhase::Aborting,
                    SUSPENDED,
                    "suspended (spec.suspend): its pods are deleted and its room given back; set spec.suspend to false to resume",
                )
            }
            JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated | JobPhase::Aborted => {
                self.expire(out);
                Next::stay(&self.old.state)
            }
            JobPhase::Restarting => self.restarting(out),
            JobPhase::Aborting | JobPhase::Terminating | JobPhase::Completing => self.ending(out),
            JobPhase::Pending | JobPhase::Running => match spec.beyond_limits() {
                // Never admitted: fail it before it makes a PodGroup or a pod.
                Some(why) if self.group.is_none() => {
                    out.create_group = false;
                    Next::to(JobPhase::Failed, "TooLarge", why)
                }
                _ => self.active(counts, out),
            },
        }
    }

    /// A finished job: deleted once its `ttlSecondsAfterFinished` has passed, else looked at
    /// again then.
    fn expire(&self, out: &mut Decision) {
        let Some(ttl) = self.job.spec.ttl_seconds_after_finished else {
            return;
        };
        let finished = self
            .old
            .state
            .last_transition_time
            .as_ref()
            .map_or(self.now, |t| t.0.as_second());
        let due = finished + i64::from(ttl);
        if self.now >= due {
            out.delete_job = true;
        } else {
            out.recheck_after = Some((due - self.now).unsigned_abs());
        }
    }

    /// A Restarting job: its pods go, and once none is left it waits for admission again.
    fn restarting(&self, out: &mut Decision) -> Next {
        delete(out, &self.current);
        if !self.pods.is_empty() {
            return Next::stay(&self.old.state);
        }
        Next::to(
            JobPhase::Pending,
            "Restarted",
            format!(
                "restarted ({} of maxRetry {}); waiting for admission",
                self.old.retry_count,
                self.job.spec.max_retries()
            ),
        )
    }

    /// An Aborting, Terminating or Completing job: its live pods go, and once none is left it
    /// is Aborted, Terminated or Completed.
    fn ending(&self, out: &mut Decision) -> Next {
        let live: Vec<&PodView> = self.current.iter().copied().filter(|p| p.live()).collect();
        delete(out, &live);
        if !live.is_empty() {
            return Next::stay(&self.old.state);
        }
        let done = match self.old.state.phase {
            JobPhase::Aborting => JobPhase::Aborted,
            JobPhase::Terminating => JobPhase::Terminated,
            _ => JobPhase::Completed,
        };
        Next::to(done, &self.old.state.reason, self.old.state.message.clone())
    }
}

/// Deletes those of `pods` not being deleted yet.
fn delete(out: &mut Decision, pods: &[&PodView]) {
    out.delete
        .extend(pods.iter().filter(|p| !p.deleting).map(|p| p.name.clone()));
}

/// Moves `status` from phase `from` to `next` at `now`: the transition, and the version and
/// retries a restart, a resumption (`resumed`) or a `task_retried` adds.
fn advance(
    status: &mut BatchJobStatus,
    from: JobPhase,
    next: Next,
    resumed: bool,
    task_retried: Option<String>,
    now: i64,
) {
    if next.phase != from || status.state.last_transition_time.is_none() {
        status.state.last_transition_time = Some(time(now));
        status.conditions.push(JobCondition {
            status: next.phase,
            last_transition_time: Some(time(now)),
        });
    }
    if next.phase == JobPhase::Running && status.running_since.is_none() {
        status.running_since = Some(time(now));
    }
    if next.phase == JobPhase::Restarting && from != JobPhase::Restarting {
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
    if let Some(task) = task_retried {
        let n = status.task_retry_count.entry(task).or_default();
        *n = n.saturating_add(1);
    }
    status.state.phase = next.phase;
    status.state.reason = next.reason;
    status.state.message = next.message;
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
