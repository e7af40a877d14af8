//! The objects the batch Job controller makes for a Job, as pure functions of the Job: its
//! PodGroup ([`pod_group`]) and its pods ([`pod`]), named, labelled and owned by the Job, with
//! the job's volumes and what its plugins inject ([`super::plugins`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::names::{
    JOB_NAME_LABEL, JOB_VERSION_LABEL, TASK_INDEX_LABEL, TASK_NAME_LABEL, owned_by, pod_name,
};
use crate::api::batch_job::{BatchJob, duration_seconds};
use crate::api::requests::{add_requests, resource_list};
use crate::api::{PodGroup, PodGroupSpec, labels};

/// The gang that is bound all or nothing: `minAvailable` (every replica when absent); with
/// `dependsOn`, only the tasks that depend on none (the later tasks' pods are created once
/// those run, and join the running gang).
pub fn gang_size(job: &BatchJob) -> i32 {
    let spec = &job.spec;
    if spec.tasks.iter().all(|t| t.depends_on.is_none()) {
        return spec.gang_size().max(1);
    }
    let first = spec
        .tasks
        .iter()
        .filter(|t| t.depends_on.is_none())
        .fold(0i32, |sum, t| {
            sum.saturating_add(t.min_available.unwrap_or(t.replicas).max(0))
        });
    first.min(spec.gang_size()).max(1)
}

/// The Job's PodGroup: named after it, owned by it, `minMember` the gang ([`gang_size`]),
/// `maxMember` every replica, `minResources` the requests of the gang's pods (each task's
/// first pods, in task order), the job's queue (absent: the PodGroup webhook gives it the
/// namespace's), priority and running estimate.
pub fn pod_group(job: &BatchJob) -> PodGroup {
    let spec = &job.spec;
    let min_member = gang_size(job);
    let total = spec.replicas();
    let mut min_resources: BTreeMap<String, i64> = BTreeMap::new();
    let mut left = min_member;
    for task in spec.tasks.iter().filter(|t| t.depends_on.is_none()) {
        let take = task.min_available.unwrap_or(task.replicas).max(0).min(left);
        left -= take;
        add_requests(&mut min_resources, &task.template, take);
    }
    let mut group = PodGroup::new(
        &job.name_any(),
        PodGroupSpec {
            max_member: (total > min_member).then_some(total),
            min_resources: resource_list(min_resources),
            queue: queue(job).map(str::to_owned),
            priority_class_name: spec.priority_class_name.clone(),
            expected_runtime_seconds: spec
                .running_estimate
                .as_deref()
                .and_then(|e| duration_seconds(e).ok())
                .map(|s| i32::try_from(s).unwrap_or(i32::MAX).max(1)),
            ..PodGroupSpec::with_min_member(min_member)
        },
    );
    group.metadata.namespace = job.namespace();
    group.metadata.owner_references = Some(vec![owned_by(job)]);
    let mut group_labels = BTreeMap::from([(JOB_NAME_LABEL.to_owned(), job.name_any())]);
    if let Some(queue) = queue(job) {
        group_labels.insert(labels::QUEUE_LABEL.to_owned(), queue.to_owned());
    }
    group.metadata.labels = Some(group_labels);
    group
}

/// The queue the Job names, if any.
pub fn queue(job: &BatchJob) -> Option<&str> {
    job.spec.queue.as_deref().filter(|q| !q.is_empty())
}

/// Pod `index` of task number `task` of `job`, for the job's current `version`; labelled with
/// the job's queue when it names one (else its group's queue decides).
pub fn pod(job: &BatchJob, task: usize, index: i32, version: i32) -> Pod {
    let spec = &job.spec;
    let t = &spec.tasks[task];
    let job_name = job.name_any();
    let name = pod_name(&job_name, &t.name, index);
    let template = t.template.clone();
    let mut meta = template.metadata.unwrap_or_default();
    let mut labels_of_pod = meta.labels.take().unwrap_or_default();
    labels_of_pod.extend([
        (JOB_NAME_LABEL.to_owned(), job_name.clone()),
        (TASK_NAME_LABEL.to_owned(), t.name.clone()),
        (TASK_INDEX_LABEL.to_owned(), index.to_string()),
        (JOB_VERSION_LABEL.to_owned(), version.to_string()),
        (labels::POD_GROUP_LABEL.to_owned(), job_name.clone()),
    ]);
    if let Some(queue) = queue(job) {
        labels_of_pod.insert(labels::QUEUE_LABEL.to_owned(), queue.to_owned());
    }
    let mut annotations = meta.annotations.take().unwrap_or_default();
    annotations.insert(TASK_INDEX_LABEL.to_owned(), index.to_string());
    let mut pod_spec: PodSpec = template.spec.unwrap_or_default();
    if pod_spec.priority_class_name.is_none() {
        pod_spec.priority_class_name = spec.priority_class_name.clone();
    }
    if matches!(
        pod_spec.scheduler_name.as_deref(),
        Some("volcano" | "gangplank")
    ) {
        pod_spec.scheduler_name = None;
    }
    for (i, volume) in spec.volumes.iter().enumerate() {
        let volume_name = format!("job-volume-{i}");
        pod_spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: volume_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: volume.volume_claim_name.clone(),
                read_only: None,
            }),
            ..Volume::default()
        });
        for container in &mut pod_spec.containers {
            container
                .volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: volume_name.clone(),
                    mount_path: volume.mount_path.clone(),
                    ..VolumeMount::default()
                });
        }
    }
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: job.namespace(),
            labels: Some(labels_of_pod),
            annotations: Some(annotations),
            owner_references: Some(vec![owned_by(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    };
    super::plugins::inject(job, task, index, &mut pod);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::batch_job::{BatchJobSpec, DependsOn, TaskSpec};
    use k8s_openapi::api::core::v1::{Container, PodTemplateSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn task(name: &str, replicas: i32, cpu: &str) -> TaskSpec {
        TaskSpec {
            name: name.into(),
            replicas,
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        resources: Some(ResourceRequirements {
                            requests: Some(BTreeMap::from([
                                ("cpu".into(), Quantity(cpu.into())),
                                ("nvidia.com/gpu".into(), Quantity("1".into())),
                            ])),
                            ..ResourceRequirements::default()
                        }),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..TaskSpec::default()
        }
    }

    fn job(tasks: Vec<TaskSpec>, min_available: Option<i32>) -> BatchJob {
        let mut job = BatchJob::new(
            "train",
            BatchJobSpec {
                min_available,
                running_estimate: Some("10m".into()),
                queue: Some("q".into()),
                priority_class_name: Some("high".into()),
                ..BatchJobSpec::of_tasks(tasks)
            },
        );
        job.metadata.namespace = Some("ns".into());
        job
    }

    #[test]
    fn the_pod_group_asks_for_the_gangs_pods_and_lets_the_rest_be_elastic() {
        let job = job(
            vec![task("master", 1, "500m"), task("worker", 4, "2")],
            Some(3),
        );
        let group = pod_group(&job);
        let spec = &group.spec;
        assert_eq!((spec.min_member, spec.max_member), (3, Some(5)));
        assert_eq!(
            spec.min_resources["cpu"].0, "4500m",
            "the master and two workers"
        );
        assert_eq!(spec.min_resources["nvidia.com/gpu"].0, "3");
        assert_eq!(spec.queue.as_deref(), Some("q"));
        assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
        assert_eq!(spec.expected_runtime_seconds, Some(600));
        assert!(crate::api::batch_job::controls(&group));
    }

    #[test]
    fn with_depends_on_the_gang_is_the_tasks_that_depend_on_none() {
        let mut worker = task("worker", 4, "2");
        worker.depends_on = Some(DependsOn {
            name: vec!["master".into()],
            iteration: None,
        });
        let job = job(vec![task("master", 1, "1"), worker], None);
        assert_eq!(gang_size(&job), 1);
        assert_eq!(pod_group(&job).spec.max_member, Some(5));
    }

    #[test]
    fn a_job_of_i32_max_replicas_per_task_makes_a_group_without_overflow() {
        let job = job(
            vec![
                task("a", i32::MAX, "1000000"),
                task("b", i32::MAX, "1000000"),
            ],
            None,
        );
        let spec = pod_group(&job).spec;
        assert_eq!(spec.min_member, i32::MAX, "saturated, not wrapped");
        assert_eq!(spec.max_member, None);
        assert_eq!(
            spec.min_resources["nvidia.com/gpu"].0,
            i64::from(i32::MAX).to_string(),
            "the gang's first i32::MAX pods, one GPU each"
        );
    }
}
