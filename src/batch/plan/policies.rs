//! The lifecycle policies of a Job: the events that happened to its pods and tasks, the first
//! one a policy handles ([`triggered`], the task's policies before the job's), and how an
//! event is told in the Job's status.

use gangplank_core::model::PodPhase;

use crate::api::batch_job::{BatchJob, LifecyclePolicy, duration_seconds};

use super::{Decision, PodView};

/// An event a policy may handle, with the task it happened in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Happened<'p> {
    pub(super) event: &'static str,
    pub(super) task: &'p str,
    pub(super) pod: Option<&'p PodView>,
}

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

/// The first event that a policy handles, with that policy: the task's policies first, then
/// the job's. Sets `out.recheck_after` for a `PodPending` timeout still to come.
pub(super) fn triggered<'j>(
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
            let event = match pod.phase {
                PodPhase::Failed if pod.evicted => Some("PodEvicted"),
                PodPhase::Failed => Some("PodFailed"),
                PodPhase::Unknown => Some("Unknown"),
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
        let succeeded = of_task
            .iter()
            .filter(|p| p.phase == PodPhase::Succeeded)
            .count() as i32;
        let failed = of_task
            .iter()
            .filter(|p| p.phase == PodPhase::Failed)
            .count() as i32;
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
    for pod in pods
        .iter()
        .filter(|p| p.phase == PodPhase::Pending && !p.deleting)
    {
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
pub(super) fn job_task<'j>(job: &'j BatchJob, task: &str) -> &'j str {
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
pub(super) fn handles(policy: &LifecyclePolicy, h: &Happened<'_>) -> bool {
    if let Some(code) = policy.exit_code {
        return h.event == "PodFailed" && h.pod.and_then(|p| p.exit_code) == Some(code);
    }
    h.event != "PodPending" && names(policy).any(|e| e == h.event || e == "*")
}

pub(super) fn describe(h: &Happened<'_>) -> String {
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
