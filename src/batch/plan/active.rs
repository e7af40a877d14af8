//! A Pending or Running job's course: the action of the first policy an event triggered, else
//! the gang's own (its PodGroup made, admission waited for, its pods made, then starting,
//! running and done).

use crate::api::batch_job::{BatchJobStatus, JobPhase};

use super::dependencies::missing;
use super::policies::{Happened, describe, triggered};
use super::{Decision, Next, Seen};

impl Seen<'_> {
    /// A Pending or Running job: policies first, then the gang's own course.
    pub(super) fn active(&self, counts: &BatchJobStatus, out: &mut Decision) -> Next {
        if let Some((happened, policy)) = triggered(self.job, &self.current, self.now, out)
            && let Some(next) = self.act(&happened, &policy.action, counts, out)
        {
            return next;
        }
        let Some(group) = self.group else {
            return Next::to(
                JobPhase::Pending,
                "CreatingPodGroup",
                "creating the job's PodGroup",
            );
        };
        let started =
            counts.running + counts.succeeded + counts.failed > 0 || !self.current.is_empty();
        if counts.state.phase == JobPhase::Pending && !group.admitted && !started {
            return Next::to(
                JobPhase::Pending,
                "WaitingForAdmission",
                group.waiting.clone().unwrap_or_else(|| {
                    "the gang waits for admission; no pod is created before".into()
                }),
            );
        }
        out.create = missing(self.job, &self.current);
        self.progress(counts, out.create.is_empty())
    }

    /// What a policy's `action` on what `happened` makes of the job; `None` for an action that
    /// changes nothing.
    fn act(
        &self,
        happened: &Happened<'_>,
        action: &str,
        counts: &BatchJobStatus,
        out: &mut Decision,
    ) -> Option<Next> {
        let spec = &self.job.spec;
        let why = describe(happened);
        let next = match action {
            "RestartJob" if counts.retry_count >= spec.max_retries() => {
                self.exhausted(&why, action, counts)
            }
            "RestartJob" => Next::to(
                JobPhase::Restarting,
                "RestartJob",
                format!("{why}: restarting the whole gang"),
            ),
            "RestartTask" | "RestartPod" => self.restart_part(happened, action, &why, counts, out),
            "AbortJob" => Next::to(JobPhase::Aborting, "AbortJob", why),
            "TerminateJob" => Next::to(JobPhase::Terminating, "TerminateJob", why),
            "CompleteJob" => Next::to(JobPhase::Completing, "CompleteJob", why),
            _ => return None,
        };
        Some(next)
    }

    /// `RestartTask` or `RestartPod` (`action`) on what `happened`: the task's pods, or the
    /// pod, go, unless the restarts that count are [`spent`](Self::spent).
    fn restart_part(
        &self,
        happened: &Happened<'_>,
        action: &str,
        why: &str,
        counts: &BatchJobStatus,
        out: &mut Decision,
    ) -> Next {
        let task_limit = self
            .job
            .spec
            .tasks
            .iter()
            .find(|t| t.name == happened.task)
            .and_then(|t| t.max_retry);
        if let Some(failed) = self.spent(happened, action, why, task_limit, counts) {
            return failed;
        }
        let doomed: Vec<String> = self
            .current
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
        Next {
            retried,
            ..Next::to(counts.state.phase, action, format!("{why}: {what}"))
        }
    }

    /// Failed, when `action` on what `happened` (`why`) would restart past the restarts that
    /// count: a task with its own maxRetry (`task_limit`) counts its own; the others, the
    /// job's.
    fn spent(
        &self,
        happened: &Happened<'_>,
        action: &str,
        why: &str,
        task_limit: Option<i32>,
        counts: &BatchJobStatus,
    ) -> Option<Next> {
        let Some(limit) = task_limit else {
            return (counts.retry_count >= self.job.spec.max_retries())
                .then(|| self.exhausted(why, action, counts));
        };
        let done = counts
            .task_retry_count
            .get(happened.task)
            .copied()
            .unwrap_or(0);
        (done >= limit).then(|| {
            Next::to(
                JobPhase::Failed,
                "MaxRetryExceeded",
                format!(
                    "{why}; {action} asked for, but task {} already restarted {done} times (its maxRetry {limit})",
                    happened.task
                ),
            )
        })
    }

    /// Failed: `action` on what happened (`why`) would restart the job past its maxRetry.
    fn exhausted(&self, why: &str, action: &str, counts: &BatchJobStatus) -> Next {
        Next::to(
            JobPhase::Failed,
            "MaxRetryExceeded",
            format!(
                "{why}; {action} asked for, but the job already restarted {} times (maxRetry {})",
                counts.retry_count,
                self.job.spec.max_retries()
            ),
        )
    }

    /// Where an admitted gang stands by its pods' `counts`, `made` all its pods: done,
    /// running or starting.
    fn progress(&self, counts: &BatchJobStatus, made: bool) -> Next {
        let spec = &self.job.spec;
        let total = spec.replicas();
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
        if self.current.len() as i32 >= total && finished >= total && made {
            return outcome(counts, total, min_success);
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
            counts.state.phase,
            "Starting",
            format!(
                "admitted; {} of minAvailable {} pods running or succeeded",
                counts.running + counts.succeeded,
                counts.min_available
            ),
        )
    }
}

/// A job all of whose `total` pods finished: Completed if at least `min_success` succeeded,
/// else Failed.
fn outcome(counts: &BatchJobStatus, total: i32, min_success: i32) -> Next {
    if counts.succeeded >= min_success {
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
    }
}
