//! The names a batch Job's objects carry, shared by everything that makes or finds them (its
//! PodGroup and pods, [`super::objects`]; what its plugins add, [`super::plugins`] and
//! [`super::ssh`]; the reconciler's stores): the labels on its pods, a pod's name, and the owner
//! reference that ties each object to its Job.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use crate::api::batch_job::{API_VERSION, BatchJob};

/// Label on every pod of a Job: the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.gangplank.dev/job-name";
/// Label on every pod of a Job: its task's name.
pub const TASK_NAME_LABEL: &str = "batch.gangplank.dev/task-name";
/// Label and annotation on every pod of a Job: its index in its task.
pub const TASK_INDEX_LABEL: &str = "batch.gangplank.dev/task-index";
/// Label on every pod of a Job: the job version it was made for (`status.version`).
pub const JOB_VERSION_LABEL: &str = "batch.gangplank.dev/job-version";

/// The name of a task's pod: `<job>-<task>-<index>`.
pub fn pod_name(job: &str, task: &str, index: i32) -> String {
    format!("{job}-{task}-{index}")
}

/// The owner reference that makes `job` the controller of what it owns (the garbage collector
/// deletes those with it).
pub fn owned_by(job: &BatchJob) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.to_owned(),
        kind: "Job".to_owned(),
        name: job.name_any(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}
