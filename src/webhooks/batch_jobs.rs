//! Batch Jobs (`batch.gangplank.dev`): the rules that refuse a Job that could never run as
//! written, each naming the field and what it accepts, all listed in one denial.
//!
//! On CREATE: the scheduler name (absent, `volcano`, `gangplank` or `default-scheduler`), at
//! most [`limits::MAX_TASKS`] tasks of at most [`limits::MAX_MEMBERS`] replicas together (each
//! task's, `minAvailable` and `minSuccess` too), `maxRetry` (the job's and each task's) at most
//! [`limits::MAX_RETRIES`], task
//! names (unique DNS labels whose pod names `<job>-<task>-<index>` stay host names of at most
//! 63 characters), `minAvailable` and `minSuccess` within the replicas, each task's
//! `minAvailable` within its replicas, `dependsOn` naming other tasks of the job, every
//! policy's events and action (and `exitCode` instead of an event, never 0; `timeout` only with
//! `PodPending`), the plugins Gangplank has, durations it can read, volumes with an absolute
//! mount path, and the queue (the spec's, else the namespace's) existing and Open.
//!
//! On UPDATE: the spec is fixed once created, apart from `suspend`, `maxRetry` (still at most
//! [`limits::MAX_RETRIES`]) and `ttlSecondsAfterFinished` (a running gang's size and pods are what admission reserved room
//! for): delete the Job and create it again.

use std::collections::BTreeSet;

use kube::core::admission::{AdmissionRequest, Operation};

use super::Webhooks;
use super::queues::{check_open, looked_up};
use super::review::{Denial, FieldErrors, Verdict};
use crate::api::batch_job::{
    BatchJob, BatchJobSpec, DependsOn, LifecyclePolicy, TaskSpec, VolumeSpec, duration_seconds,
};
use crate::api::labels;
use crate::batch::plan::{self, ACTIONS, EVENTS};
use crate::batch::plugins::PLUGINS;
use gangplank_core::limits;

/// Most Jobs a Job may depend on (`spec.dependsOn.name`).
const MAX_JOBS_DEPENDED_ON: usize = 100;

/// Scheduler names a Job may give: Gangplank serves the job through the stock scheduler.
const SCHEDULERS: [&str; 3] = ["volcano", "gangplank", "default-scheduler"];

/// `POST /webhooks/validate/batchjobs`.
pub fn validate(w: &Webhooks, request: &AdmissionRequest<BatchJob>) -> Result<Verdict, Denial> {
    let job = request.object.as_ref().expect("checked when decoded");
    if request.operation == Operation::Update
        && let Some(old) = request.old_object.as_ref()
    {
        let fixed = |spec: &BatchJobSpec| BatchJobSpec {
            max_retry: None,
            ttl_seconds_after_finished: None,
            suspend: None,
            ..spec.clone()
        };
        if fixed(&old.spec) != fixed(&job.spec) {
            return Err(Denial::invalid(
                "spec",
                "a Job's spec cannot change once created, apart from suspend, maxRetry and ttlSecondsAfterFinished; delete the Job and create it again",
            ));
        }
        let mut errors = FieldErrors::new();
        retries(&mut errors, "spec.maxRetry", job.spec.max_retry);
        errors.into_result()?;
        return Ok(Verdict::allow());
    }
    let name = job.metadata.name.as_deref().unwrap_or(&request.name);
    check_spec(name, &job.spec)?;
    let namespace = request.namespace.as_deref().unwrap_or_default();
    match job.spec.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(queue) => check_open(w.lookup(), queue, namespace, "spec.queue")?,
        None => {
            let queue = looked_up(w.lookup().namespace_queue(namespace))?
                .unwrap_or_else(|| labels::DEFAULT_QUEUE.to_owned());
            check_open(
                w.lookup(),
                &queue,
                namespace,
                &format!("spec.queue (absent: namespace {namespace}'s queue)"),
            )?;
        }
    }
    Ok(Verdict::allow())
}

/// Every rule on the spec alone; see the module docs.
pub fn check_spec(name: &str, spec: &BatchJobSpec) -> Result<(), Denial> {
    let mut errors = FieldErrors::new();
    check_scheduler(&mut errors, spec.scheduler_name.as_deref());
    // In i64: the sum of users' i32s.
    let total: i64 = spec
        .tasks
        .iter()
        .map(|t| i64::from(t.replicas.max(0)))
        .sum();
    check_sizes(&mut errors, spec, total);
    if let Some(depends) = &spec.depends_on {
        check_jobs_depended_on(&mut errors, name, depends);
    }
    check_tasks(&mut errors, name, &spec.tasks);
    check_minimums(&mut errors, spec, total);
    for (p, policy) in spec.policies.iter().enumerate() {
        check_policy(&mut errors, &format!("spec.policies[{p}]"), policy);
    }
    for plugin in spec.plugins.keys() {
        if !PLUGINS.contains(&plugin.as_str()) {
            errors.add(
                format!("spec.plugins.{plugin}"),
                format!("not a plugin Gangplank has; use {PLUGINS:?}"),
            );
        }
    }
    if let Some(estimate) = spec.running_estimate.as_deref()
        && let Err(why) = duration_seconds(estimate)
    {
        errors.add("spec.runningEstimate", why);
    }
    check_volumes(&mut errors, &spec.volumes);
    errors.into_result()
}

/// Records a scheduler name other than Gangplank's [`SCHEDULERS`].
fn check_scheduler(errors: &mut FieldErrors, scheduler: Option<&str>) {
    if let Some(scheduler) = scheduler
        && !scheduler.is_empty()
        && !SCHEDULERS.contains(&scheduler)
    {
        errors.add(
            "spec.schedulerName",
            format!(
                "{scheduler:?} is not served here; leave it out or use one of {SCHEDULERS:?} (the stock scheduler places the pods, with Gangplank)"
            ),
        );
    }
}

/// Records a job beyond [`limits`]: its count of tasks, its `total` replicas, its gang sizes
/// and its retries.
fn check_sizes(errors: &mut FieldErrors, spec: &BatchJobSpec, total: i64) {
    if spec.tasks.is_empty() {
        errors.add("spec.tasks", "list at least one task");
    }
    if spec.tasks.len() > limits::MAX_TASKS as usize {
        errors.add(
            "spec.tasks",
            format!(
                "list at most {} tasks, got {}",
                limits::MAX_TASKS,
                spec.tasks.len()
            ),
        );
    }
    errors.members("spec.tasks[*].replicas (together)", total);
    errors.members("spec.minAvailable", spec.min_available.unwrap_or(0).into());
    errors.members("spec.minSuccess", spec.min_success.unwrap_or(0).into());
    retries(errors, "spec.maxRetry", spec.max_retry);
}

/// Records the Jobs that job `name` depends on that are not other Jobs' names, or too many.
fn check_jobs_depended_on(errors: &mut FieldErrors, name: &str, depends: &DependsOn) {
    if depends.name.len() > MAX_JOBS_DEPENDED_ON {
        errors.add(
            "spec.dependsOn.name",
            format!(
                "list at most {MAX_JOBS_DEPENDED_ON} Jobs, got {}",
                depends.name.len()
            ),
        );
    }
    for (d, other) in depends.name.iter().enumerate().take(MAX_JOBS_DEPENDED_ON) {
        let well_formed = !other.is_empty()
            && other.len() <= 253
            && other
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if other == name || !well_formed {
            errors.add(
                format!("spec.dependsOn.name[{d}]"),
                format!("{other:?} is not the name of another Job of this namespace"),
            );
        }
    }
    check_iteration(errors, "spec.dependsOn", depends);
}

/// Records what is wrong with the tasks of job `name`: each task's own and a name taken twice.
fn check_tasks(errors: &mut FieldErrors, name: &str, tasks: &[TaskSpec]) {
    let names: BTreeSet<&str> = tasks.iter().map(|t| t.name.as_str()).collect();
    let mut seen = BTreeSet::new();
    for (i, task) in tasks.iter().enumerate() {
        let field = format!("spec.tasks[{i}]");
        if !seen.insert(task.name.as_str()) {
            errors.add(
                format!("{field}.name"),
                format!(
                    "{:?} is used by an earlier task; task names are unique",
                    task.name
                ),
            );
        }
        check_task(errors, &field, name, task, &names);
    }
}

/// Records what is wrong with `task` of job `name`, at `field`, but for a name an earlier
/// task has; `names` are all the job's tasks.
fn check_task(
    errors: &mut FieldErrors,
    field: &str,
    name: &str,
    task: &TaskSpec,
    names: &BTreeSet<&str>,
) {
    if !dns_label(&task.name) {
        errors.add(
            format!("{field}.name"),
            format!(
                "{:?} is not a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit)",
                task.name
            ),
        );
    }
    errors.members(format!("{field}.replicas"), task.replicas.into());
    errors.members(
        format!("{field}.minAvailable"),
        task.min_available.unwrap_or(0).into(),
    );
    retries(errors, &format!("{field}.maxRetry"), task.max_retry);
    let longest = format!("{name}-{}-{}", task.name, task.replicas.max(1) - 1);
    if longest.len() > 63 {
        errors.add(
            format!("{field}.name"),
            format!(
                "the pod name {longest:?} would be longer than 63 characters (a host name); shorten the job or task name"
            ),
        );
    }
    if let Some(min) = task.min_available
        && min > task.replicas
    {
        errors.add(
            format!("{field}.minAvailable"),
            format!("{min} is more than the task's {} replicas", task.replicas),
        );
    }
    if let Some(depends) = &task.depends_on {
        check_tasks_depended_on(errors, field, task, depends, names);
    }
    for (p, policy) in task.policies.iter().enumerate() {
        check_policy(errors, &format!("{field}.policies[{p}]"), policy);
    }
}

/// Records the tasks that `task` (at `field`) depends on that are not others of `names`.
fn check_tasks_depended_on(
    errors: &mut FieldErrors,
    field: &str,
    task: &TaskSpec,
    depends: &DependsOn,
    names: &BTreeSet<&str>,
) {
    for (d, other) in depends.name.iter().enumerate() {
        if other == &task.name || !names.contains(other.as_str()) {
            errors.add(
                format!("{field}.dependsOn.name[{d}]"),
                format!("{other:?} is not another task of this job"),
            );
        }
    }
    check_iteration(errors, &format!("{field}.dependsOn"), depends);
}

/// Records `depends` (at `field`) waiting for neither all nor any of what it names.
fn check_iteration(errors: &mut FieldErrors, field: &str, depends: &DependsOn) {
    if let Some(iteration) = depends.iteration.as_deref()
        && !matches!(iteration, "all" | "any")
    {
        errors.add(
            format!("{field}.iteration"),
            format!("{iteration:?} is neither \"all\" nor \"any\""),
        );
    }
}

/// Records a `minAvailable` or `minSuccess` larger than the job's `total` replicas.
fn check_minimums(errors: &mut FieldErrors, spec: &BatchJobSpec, total: i64) {
    if let Some(min) = spec.min_available
        && i64::from(min) > total
    {
        errors.add(
            "spec.minAvailable",
            format!("{min} is more than the job's {total} replicas: the gang could never gather"),
        );
    }
    if let Some(min) = spec.min_success
        && i64::from(min) > total
    {
        errors.add(
            "spec.minSuccess",
            format!("{min} is more than the job's {total} replicas: the job could never complete"),
        );
    }
}

/// Records volumes without an absolute mount path or a claim.
fn check_volumes(errors: &mut FieldErrors, volumes: &[VolumeSpec]) {
    for (v, volume) in volumes.iter().enumerate() {
        if !volume.mount_path.starts_with('/') {
            errors.add(
                format!("spec.volumes[{v}].mountPath"),
                format!("{:?} is not an absolute path", volume.mount_path),
            );
        }
        if volume.volume_claim_name.is_empty() {
            errors.add(
                format!("spec.volumes[{v}].volumeClaimName"),
                "name an existing PersistentVolumeClaim",
            );
        }
    }
}

/// Records `field` when it allows more restarts than [`limits::MAX_RETRIES`].
fn retries(errors: &mut FieldErrors, field: &str, value: Option<i32>) {
    if let Some(value) = value
        && value > limits::MAX_RETRIES as i32
    {
        errors.add(
            field,
            format!("must be at most {}, got {value}", limits::MAX_RETRIES),
        );
    }
}

fn check_policy(errors: &mut FieldErrors, field: &str, policy: &LifecyclePolicy) {
    if !ACTIONS.contains(&policy.action.as_str()) {
        errors.add(
            format!("{field}.action"),
            format!(
                "{:?} is not an action Gangplank takes; use one of {ACTIONS:?}",
                policy.action
            ),
        );
    }
    let events: Vec<&str> = plan::names(policy).collect();
    for event in &events {
        if !EVENTS.contains(event) {
            errors.add(
                format!("{field}.event"),
                format!("{event:?} is not an event Gangplank reports; use one of {EVENTS:?}"),
            );
        }
    }
    match (policy.exit_code, events.is_empty()) {
        (Some(_), false) => errors.add(
            format!("{field}.exitCode"),
            "give either an exit code or events, not both",
        ),
        (Some(0), true) => errors.add(
            format!("{field}.exitCode"),
            "0 is success; name a failing code",
        ),
        (None, true) => errors.add(format!("{field}.event"), "name an event or an exit code"),
        _ => {}
    }
    if let Some(timeout) = policy.timeout.as_deref() {
        if let Err(why) = duration_seconds(timeout) {
            errors.add(format!("{field}.timeout"), why);
        } else if !events.contains(&"PodPending") {
            errors.add(
                format!("{field}.timeout"),
                "only a PodPending policy takes a timeout (how long a pod may wait for a node)",
            );
        }
    }
}

/// Whether `name` is an RFC 1123 label: a name that fits a label value ([`super::name_problem`])
/// without dots.
fn dns_label(name: &str) -> bool {
    super::name_problem(name).is_none() && !name.contains('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(tasks: Vec<TaskSpec>) -> BatchJobSpec {
        BatchJobSpec::of_tasks(tasks)
    }

    fn task(name: &str, replicas: i32) -> TaskSpec {
        TaskSpec {
            name: name.into(),
            replicas,
            ..TaskSpec::default()
        }
    }

    #[test]
    fn a_job_of_a_master_and_workers_with_known_policies_and_plugins_passes() {
        let mut s = spec(vec![task("master", 1), task("worker", 3)]);
        s.min_available = Some(4);
        s.plugins
            .insert("pytorch".into(), vec!["--port=23456".into()]);
        s.policies.push(LifecyclePolicy {
            action: "RestartJob".into(),
            event: Some("PodFailed".into()),
            ..LifecyclePolicy::default()
        });
        s.tasks[1].depends_on = Some(DependsOn {
            name: vec!["master".into()],
            iteration: Some("any".into()),
        });
        assert_eq!(check_spec("train", &s), Ok(()));
    }

    #[test]
    fn every_mistake_is_named_in_one_denial() {
        let mut s = spec(vec![
            task("worker", 2),
            task("worker", 1),
            task("Bad_Name", 1),
        ]);
        s.scheduler_name = Some("kube-batch".into());
        s.min_available = Some(9);
        s.plugins.insert("horovod".into(), vec![]);
        s.policies.push(LifecyclePolicy {
            action: "Explode".into(),
            event: Some("PodFailed".into()),
            exit_code: Some(1),
            ..LifecyclePolicy::default()
        });
        s.tasks[0].depends_on = Some(DependsOn {
            name: vec!["worker".into()],
            iteration: None,
        });
        s.depends_on = Some(DependsOn {
            name: vec!["prepare".into(), "train".into(), "Data/Set".into()],
            iteration: Some("some".into()),
        });
        let message = check_spec("train", &s).unwrap_err().message;
        for expected in [
            "spec.schedulerName: \"kube-batch\" is not served here",
            "spec.tasks[1].name: \"worker\" is used by an earlier task",
            "spec.tasks[2].name: \"Bad_Name\" is not a DNS label",
            "spec.tasks[0].dependsOn.name[0]: \"worker\" is not another task of this job",
            "spec.minAvailable: 9 is more than the job's 4 replicas",
            "spec.plugins.horovod: not a plugin Gangplank has",
            "spec.policies[0].action: \"Explode\" is not an action",
            "spec.policies[0].exitCode: give either an exit code or events, not both",
            "spec.dependsOn.name[1]: \"train\" is not the name of another Job of this namespace",
            "spec.dependsOn.name[2]: \"Data/Set\" is not the name of another Job",
            "spec.dependsOn.iteration: \"some\" is neither",
        ] {
            assert!(message.contains(expected), "{expected} in {message}");
        }
    }

    #[test]
    fn a_timeout_belongs_to_pod_pending_and_must_read_as_a_duration() {
        let mut s = spec(vec![task("worker", 1)]);
        s.policies.push(LifecyclePolicy {
            action: "RestartJob".into(),
            event: Some("PodFailed".into()),
            timeout: Some("5m".into()),
            ..LifecyclePolicy::default()
        });
        s.running_estimate = Some("soon".into());
        let message = check_spec("train", &s).unwrap_err().message;
        assert!(
            message.contains("only a PodPending policy takes a timeout"),
            "{message}"
        );
        assert!(
            message.contains("spec.runningEstimate: 'soon' is not a duration"),
            "{message}"
        );
    }

    #[test]
    fn replicas_gang_sizes_tasks_and_retries_beyond_their_limits_are_refused_without_overflow() {
        let mut s = spec(vec![task("a", i32::MAX), task("b", i32::MAX)]);
        s.min_available = Some(i32::MAX);
        s.min_success = Some(i32::MAX);
        s.depends_on = Some(DependsOn {
            name: (0..=MAX_JOBS_DEPENDED_ON)
                .map(|i| format!("job-{i}"))
                .collect(),
            iteration: None,
        });
        s.max_retry = Some(i32::MAX);
        s.tasks[0].min_available = Some(i32::MAX);
        s.tasks[1].max_retry = Some(1_001);
        let message = check_spec("train", &s).unwrap_err().message;
        for expected in [
            "spec.tasks[*].replicas (together): must be at most 10000, Gangplank's largest gang, got 4294967294",
            "spec.tasks[0].replicas: must be at most 10000, Gangplank's largest gang, got 2147483647",
            "spec.tasks[0].minAvailable: must be at most 10000",
            "spec.minAvailable: must be at most 10000",
            "spec.minSuccess: must be at most 10000",
            "spec.maxRetry: must be at most 1000, got 2147483647",
            "spec.tasks[1].maxRetry: must be at most 1000, got 1001",
            "spec.dependsOn.name: list at most 100 Jobs, got 101",
        ] {
            assert!(message.contains(expected), "{expected} in {message}");
        }
        assert!(
            !message.contains("spec.minAvailable: 2147483647 is more than"),
            "the total is not wrapped: {message}"
        );

        let many = spec((0..=100).map(|i| task(&format!("t{i}"), 1)).collect());
        let message = check_spec("train", &many).unwrap_err().message;
        assert!(
            message.contains("spec.tasks: list at most 100 tasks, got 101"),
            "{message}"
        );
        let at_the_limits = spec(vec![task("a", 5_000), task("b", 5_000)]);
        assert_eq!(check_spec("train", &at_the_limits), Ok(()));
    }

    #[test]
    fn a_pod_name_longer_than_a_host_name_is_refused() {
        let job = "j".repeat(47);
        let message = check_spec(&job, &spec(vec![task("worker-replicas-xx", 100)]))
            .unwrap_err()
            .message;
        assert!(message.contains("longer than 63 characters"), "{message}");
    }
}
