//! Kubeflow Trainer (`trainer.kubeflow.org`): a TrainJob renders through its (Cluster)
//! TrainingRuntime into a JobSet whose initializer jobs (dataset, model) run, and finish, before
//! its trainer nodes' Job is created (JobSet `dependsOn`). With a `podGroupPolicy` in the
//! runtime, Trainer also writes a PodGroup of the TrainJob's name, scheduler-plugins'
//! (`coscheduling`) or Volcano's (`volcano`), owned by the TrainJob, whose `minMember` and
//! `minResources` count every pod set, the initializers included. So such a group's members
//! come in stages: Gangplank admits it ahead of its members
//! ([`super::labels::MEMBERS_IN_STAGES_ANNOTATION`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Trainer's API group, as an ownerReference's `apiVersion` starts.
pub const GROUP: &str = "trainer.kubeflow.org";
/// The kind a user creates.
pub const TRAIN_JOB: &str = "TrainJob";

/// Whether a TrainJob controls the object of `meta` (Trainer wrote it for the TrainJob).
pub fn controls(meta: &ObjectMeta) -> bool {
    super::controller(meta)
        .is_some_and(|o| o.kind == TRAIN_JOB && o.api_version.split('/').next() == Some(GROUP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned_by(api_version: &str, kind: &str, controller: bool) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "train".into(),
                uid: "t1".into(),
                controller: Some(controller),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_pod_group_trainer_wrote_for_a_train_job_is_controlled_by_it() {
        assert!(controls(&owned_by(
            "trainer.kubeflow.org/v1alpha1",
            "TrainJob",
            true
        )));
        assert!(!controls(&owned_by(
            "trainer.kubeflow.org/v1alpha1",
            "TrainJob",
            false
        )));
        assert!(!controls(&owned_by("kubeflow.org/v1", "TrainJob", true)));
        assert!(!controls(&owned_by(
            "trainer.kubeflow.org/v1alpha1",
            "TrainingRuntime",
            true
        )));
        assert!(!controls(&ObjectMeta::default()));
    }
}
