//! What a Job waits for: the Jobs it depends on (`spec.dependsOn`, [`after`]) before it
//! starts, and, once it runs, the tasks each task depends on before that task's pods are made
//! ([`missing`]).

use std::collections::{BTreeMap, BTreeSet};

use gangplank_core::limits;
use gangplank_core::model::PodPhase;

use crate::api::batch_job::{BatchJob, JobPhase};

use super::{Decision, NewPod, Next, PodView};

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
pub(super) fn held_back(after: &After, out: &mut Decision) -> Option<Next> {
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

/// The pods of the current version not made yet, of the tasks whose dependencies run.
pub(super) fn missing(job: &BatchJob, current: &[&PodView]) -> Vec<NewPod> {
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
pub(super) fn dependencies_run(
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
            .filter(|p| {
                &p.task == task && matches!(p.phase, PodPhase::Running | PodPhase::Succeeded)
            })
            .count() as i32;
        up >= replicas.get(task.as_str()).copied().unwrap_or(0)
    };
    if depends.iteration.as_deref() == Some("any") {
        depends.name.iter().any(runs)
    } else {
        depends.name.iter().all(runs)
    }
}
