//! The batch `Job` custom resource (group `batch.gangplank.dev`, version `v1alpha1`): one object
//! for a distributed run of several tasks (a master and its workers, a launcher and its ranks),
//! started as one gang in a queue and driven by lifecycle policies.
//!
//! Spec and status follow Volcano's `batch.volcano.sh/v1alpha1` Job field by field, so a Volcano
//! Job manifest runs after changing its `apiVersion`. What Gangplank does with each field is in
//! `docs/batch-jobs.md`; the controller is [`crate::batch`]. The Rust type is `BatchJob`, to
//! keep it apart from `batch/v1` Jobs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kubernetes_style;

/// API group of the batch Job.
pub const GROUP: &str = "batch.gangplank.dev";
/// `apiVersion` of the batch Job.
pub const API_VERSION: &str = "batch.gangplank.dev/v1alpha1";
/// Default of `spec.maxRetry`, as in Volcano.
pub const DEFAULT_MAX_RETRY: i32 = 3;

/// A batch job of one or more tasks, scheduled as one gang.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "batch.gangplank.dev",
    version = "v1alpha1",
    kind = "Job",
    root = "BatchJob",
    namespaced,
    status = "BatchJobStatus",
    derive = "PartialEq",
    shortname = "gpjob",
    category = "gangplank",
    doc = "A batch job of tasks (a master and its workers, a launcher and its ranks) started as one gang in a queue, with lifecycle policies and plugins; Volcano's Job, field by field.",
    validation = (
        "size(self.metadata.name) <= 47",
        "Job names are the prefix of their pods' names and host names and must be at most 47 characters"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.state.phase", description = "Pending, Running, Restarting, Completing, Completed, Aborting, Aborted, Terminating, Terminated or Failed."),
    printcolumn(name = "MinAvailable", type_ = "integer", json_path = ".status.minAvailable", description = "Gang size."),
    printcolumn(name = "Running", type_ = "integer", json_path = ".status.running", description = "Pods running."),
    printcolumn(name = "Queue", type_ = "string", json_path = ".spec.queue", description = "Queue the job is admitted through."),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Succeeded", type_ = "integer", json_path = ".status.succeeded", priority = 1, description = "Pods that succeeded."),
    printcolumn(name = "Failed", type_ = "integer", json_path = ".status.failed", priority = 1, description = "Pods that failed."),
    printcolumn(name = "Retries", type_ = "integer", json_path = ".status.retryCount", priority = 1, description = "Restarts of the job so far."),
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct BatchJobSpec {
    /// Accepted and ignored when `volcano`, `gangplank` or absent: the stock scheduler places the
    /// pods, with Gangplank as its extender. Any other name is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,

    /// Gang size: how many pods must be placed before any is bound. Absent: the sum of the
    /// tasks' replicas. Replicas beyond it are elastic: they run when there is room and are the
    /// first reclaimed. At most 10,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = gangplank_core::limits::MAX_MEMBERS))]
    pub min_available: Option<i32>,

    /// Volumes mounted into every pod of the job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeSpec>,

    /// The tasks: each a pod template and a number of replicas. Task names are unique. At most
    /// 100 tasks, of at most 10,000 replicas together.
    #[schemars(length(min = 1, max = gangplank_core::limits::MAX_TASKS))]
    pub tasks: Vec<TaskSpec>,

    /// What to do on the job's events, for every task (a task's own policies come first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<LifecyclePolicy>,

    /// Plugins by name with their arguments: `env`, `svc`, `ssh`, `pytorch`, `tensorflow`,
    /// `mpi`. See docs/batch-jobs.md for what each injects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plugins: BTreeMap<String, Vec<String>>,

    /// How long the job is expected to run once started (a Go duration such as `30m`): lets it
    /// backfill room reserved for a larger group (the PodGroup's `expectedRuntimeSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_estimate: Option<String>,

    /// Queue the job is admitted through. Absent: the namespace's queue, else `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,

    /// How many times the job may be restarted by its policies before it fails, at most 1,000.
    /// Absent: 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = gangplank_core::limits::MAX_RETRIES))]
    pub max_retry: Option<i32>,

    /// Seconds after the job finished (Completed, Failed, Aborted or Terminated) when it is
    /// deleted, with its pods. Absent: kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// PriorityClass of the job's PodGroup and pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Jobs of the same namespace this job starts after: it makes no PodGroup and no pod until
    /// every one of them (`iteration: all`, the default) or one (`any`) has Completed, and
    /// fails (reason `DependencyFailed`) once that can no longer happen. At most 100 names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,

    /// `true` suspends the job: its pods are deleted (phase `Aborted`, reason `Suspended`), so it
    /// holds no room; `false` (or absent) again resumes it: its gang is made again and waits
    /// for admission like a new one. The one field besides `maxRetry` and
    /// `ttlSecondsAfterFinished` that may change after creation. (batch/v1's field name; Volcano
    /// suspends and resumes through its `vcctl job suspend`/`resume` commands.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// Pods that must succeed for the job to complete, at most 10,000. Absent: `minAvailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = gangplank_core::limits::MAX_MEMBERS))]
    pub min_success: Option<i32>,
}

/// One task: a pod template, its replicas and its own policies.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct TaskSpec {
    /// The task's name, unique in the job: its pods are `<job>-<name>-<index>`. A DNS label.
    #[schemars(length(min = 1, max = 20))]
    pub name: String,

    /// How many pods of the task run, at most 10,000.
    #[schemars(range(min = 0, max = gangplank_core::limits::MAX_MEMBERS))]
    pub replicas: i32,

    /// How many of the task's pods must be placed for the gang to start; counted into the job's
    /// `minAvailable` only through it. Absent: the task's replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = gangplank_core::limits::MAX_MEMBERS))]
    pub min_available: Option<i32>,

    /// The pods of the task: a pod template, as in a Deployment (its fields are described by
    /// `kubectl explain pod.spec`; left out here to keep the CRD small).
    #[schemars(transform = without_descriptions)]
    pub template: PodTemplateSpec,

    /// What to do on this task's events, before the job's policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<LifecyclePolicy>,

    /// Restarts of this task allowed by `RestartTask` and `RestartPod` before the job fails.
    /// Absent: the job's `maxRetry`. At most 1,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = gangplank_core::limits::MAX_RETRIES))]
    pub max_retry: Option<i32>,

    /// Tasks whose pods must all be running (or succeeded) before this task's pods are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,
}

/// Tasks a task waits for (in a task), or Jobs a Job waits for (in a Job's spec).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct DependsOn {
    /// Names of the tasks (or Jobs) waited for.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub name: Vec<String>,
    /// `all` (every task named is running, or every Job named has completed; the default) or
    /// `any` (one of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<String>,
}

/// A volume mounted into every pod: an existing PersistentVolumeClaim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct VolumeSpec {
    /// Where every container of every pod mounts it.
    pub mount_path: String,
    /// The claim mounted. Required: Gangplank does not create claims (Volcano's `volumeClaim`).
    pub volume_claim_name: String,
}

/// When `event` (or one of `events`, or a container exiting with `exitCode`) happens, do
/// `action`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct LifecyclePolicy {
    /// `AbortJob`, `RestartJob`, `RestartTask`, `RestartPod`, `TerminateJob` or `CompleteJob`.
    pub action: String,
    /// `PodFailed`, `PodEvicted`, `PodPending`, `TaskCompleted`, `TaskFailed`, `Unknown`, or
    /// `*` for any of them. Exclusive with `exitCode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// Several events for the same action.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// A container's exit code that triggers the action (a failed pod's first non-zero
    /// exit code). Not 0; exclusive with `event`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// With `PodPending`: how long a pod may stay Pending (a Go duration such as `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Observed state of a Job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct BatchJobStatus {
    /// The job's phase, and why it is in it.
    #[serde(default)]
    pub state: JobState,
    /// The gang size in force.
    #[serde(default)]
    pub min_available: i32,
    /// Per task, its pods by phase.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_status_count: BTreeMap<String, TaskState>,
    #[serde(default)]
    pub pending: i32,
    #[serde(default)]
    pub running: i32,
    #[serde(default)]
    pub succeeded: i32,
    #[serde(default)]
    pub failed: i32,
    #[serde(default)]
    pub terminating: i32,
    #[serde(default)]
    pub unknown: i32,
    /// Bumped at each restart; pods carry the version they were made for.
    #[serde(default)]
    pub version: i32,
    /// Restarts so far.
    #[serde(default)]
    pub retry_count: i32,
    /// Per task with its own `maxRetry`: its restarts (`RestartTask`, `RestartPod`) so far.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_retry_count: BTreeMap<String, i32>,
    /// When the job first ran (all its gang running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_since: Option<Time>,
    /// Objects the plugins made for the job, by kind (`Service`, `ConfigMap`, `Secret`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub controlled_resources: BTreeMap<String, String>,
    /// Each phase the job entered, with when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
}

/// The job's phase with its reason.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct JobState {
    #[serde(default)]
    pub phase: JobPhase,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// A task's pods by phase (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskState {
    #[serde(default)]
    pub phase: BTreeMap<String, i32>,
}

/// A phase the job entered.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = kubernetes_style)]
pub struct JobCondition {
    pub status: JobPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Volcano's job phases.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum JobPhase {
    /// Waiting for admission, or its pods for their nodes.
    #[default]
    Pending,
    /// `minAvailable` pods are running (or done).
    Running,
    /// A policy restarts it: its pods are being deleted, then it waits again.
    Restarting,
    /// A policy completes it: its remaining pods are being deleted.
    Completing,
    Completed,
    /// A policy aborts it: its pods are being deleted; `ResumeJob` starts it again.
    Aborting,
    Aborted,
    /// A policy terminates it: its pods are being deleted.
    Terminating,
    Terminated,
    /// Too few pods succeeded, or the restarts ran out.
    Failed,
}

impl JobPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            JobPhase::Pending => "Pending",
            JobPhase::Running => "Running",
            JobPhase::Restarting => "Restarting",
            JobPhase::Completing => "Completing",
            JobPhase::Completed => "Completed",
            JobPhase::Aborting => "Aborting",
            JobPhase::Aborted => "Aborted",
            JobPhase::Terminating => "Terminating",
            JobPhase::Terminated => "Terminated",
            JobPhase::Failed => "Failed",
        }
    }

    /// Completed, Failed and Terminated are final; Aborted waits for `ResumeJob`.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated | JobPhase::Aborted
        )
    }
}

impl BatchJobSpec {
    /// A job of `tasks` with every optional field unset.
    pub fn of_tasks(tasks: Vec<TaskSpec>) -> Self {
        BatchJobSpec {
            scheduler_name: None,
            min_available: None,
            volumes: Vec::new(),
            tasks,
            policies: Vec::new(),
            plugins: BTreeMap::new(),
            running_estimate: None,
            queue: None,
            depends_on: None,
            suspend: None,
            max_retry: None,
            ttl_seconds_after_finished: None,
            priority_class_name: None,
            min_success: None,
        }
    }

    /// The gang size: `minAvailable`, or the sum of the tasks' replicas.
    pub fn gang_size(&self) -> i32 {
        self.min_available.unwrap_or_else(|| self.replicas())
    }

    /// Every task's replicas together (saturating: a user's `i32`s).
    pub fn replicas(&self) -> i32 {
        self.tasks
            .iter()
            .fold(0i32, |sum, t| sum.saturating_add(t.replicas.max(0)))
    }

    /// Why the job is larger than Gangplank runs ([`gangplank_core::limits`]), for a Job
    /// stored before the webhook refused such jobs; `None` when it is within the limits.
    pub fn beyond_limits(&self) -> Option<String> {
        use gangplank_core::limits::{MAX_MEMBERS, MAX_TASKS};
        if self.tasks.len() > MAX_TASKS as usize {
            return Some(format!(
                "spec.tasks lists {} tasks, more than Gangplank runs ({MAX_TASKS})",
                self.tasks.len()
            ));
        }
        let replicas = self.replicas();
        (replicas.unsigned_abs() > MAX_MEMBERS).then(|| {
            format!(
                "the tasks' replicas together ({replicas}) are more than Gangplank's largest gang ({MAX_MEMBERS}); create the job again with fewer"
            )
        })
    }

    /// `maxRetry`, or [`DEFAULT_MAX_RETRY`].
    pub fn max_retries(&self) -> i32 {
        self.max_retry.unwrap_or(DEFAULT_MAX_RETRY)
    }
}

/// Whether a batch Job controls `group` (its controller made it for the Job), so it is admitted
/// ahead of its members: the controller creates the pods only once the group is admitted.
pub fn controls(group: &super::PodGroup) -> bool {
    super::controller(&group.metadata)
        .is_some_and(|o| o.kind == "Job" && o.api_version == API_VERSION)
}

/// Drops the descriptions inside a schema (the pod template's, which Kubernetes documents
/// already), keeping its own.
fn without_descriptions(schema: &mut schemars::Schema) {
    fn strip(schema: &mut schemars::Schema) {
        schema.remove("description");
        schemars::transform::transform_subschemas(&mut strip, schema);
    }
    schemars::transform::transform_subschemas(&mut strip, schema);
}

/// Reads a Go duration (`90s`, `1h30m`, `1.5h`, `250ms`) as seconds, rounded up.
pub fn duration_seconds(text: &str) -> Result<u64, String> {
    let bad = || format!("'{text}' is not a duration such as 90s, 30m or 1h30m");
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        nanos += number * scale;
        rest = &rest[unit_len..];
    }
    Ok((nanos / 1e9).ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_as_whole_seconds_rounded_up() {
        for (text, seconds) in [
            ("90s", 90),
            ("30m", 1800),
            ("1h30m", 5400),
            ("1.5h", 5400),
            ("250ms", 1),
        ] {
            assert_eq!(duration_seconds(text), Ok(seconds), "{text}");
        }
        for bad in ["", "10", "ten minutes", "5d", "m"] {
            assert!(duration_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_gang_is_min_available_or_every_replica() {
        let task = |replicas| TaskSpec {
            name: "t".into(),
            replicas,
            ..TaskSpec::default()
        };
        let mut spec = BatchJobSpec::of_tasks(vec![task(1), task(4)]);
        assert_eq!(spec.gang_size(), 5);
        spec.min_available = Some(3);
        assert_eq!(spec.gang_size(), 3);
        assert_eq!(spec.max_retries(), 3);
    }
}
