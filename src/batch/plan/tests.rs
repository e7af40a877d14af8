use super::*;
use crate::api::batch_job::{BatchJobSpec, DependsOn, LifecyclePolicy, TaskSpec};
use gangplank_core::limits;

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
        phase: PodPhase::of(Some(phase)),
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

const ADMITTED: GroupAdmission = GroupAdmission {
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
    let waiting = GroupAdmission {
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
