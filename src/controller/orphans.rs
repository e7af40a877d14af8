//! Pods that name a group whose PodGroup does not exist: create it when the pods say how big
//! the gang is, otherwise tell them what is missing.
//!
//! A pod that carries the annotation `scheduling.gangplank.dev/min-member` next to its group
//! label says everything a PodGroup needs: the gang size, and its queue (the pod's queue label,
//! else its namespace's default queue, else `default`). Gangplank creates that PodGroup, owned
//! by the controller of those pods (a StatefulSet, a ReplicaSet, an operator's object) when they
//! all name the same one, so that the garbage collector deletes it with them; pods made by hand
//! (or by several controllers) leave it unowned, for the user to delete, as a PodGroup written
//! by hand (a pod as owner would take the group with it when that member ends). When members
//! disagree, the oldest member's annotation wins.
//!
//! A LeaderWorkerSet replica asks the same way with LWS's own keys, so its operator needs no
//! gang provider: its pods' group is named after LWS's group key, and its leader's size
//! annotation is the gang size; the PodGroup is owned by the leader pod
//! (`crate::api::leader_worker_set`). The controller reads the LeaderWorkerSet first: one that
//! starts its replicas `LeaderReady` makes the workers only once the leader is Ready, so its
//! PodGroup is `minMember` 1 with the whole replica's requests in `minResources`. A
//! LeaderWorkerSet that cannot be read leaves the gang at its size. One annotated
//! `scheduling.gangplank.dev/min-replicas` whose replicas still came as gangs of their own (it
//! was created without a queue label, so the workload webhook did not name its group on its
//! templates) gets no per-replica PodGroup: its pods wait, told why.
//!
//! Without the annotation the pods keep waiting (the admission loop does not release a group
//! without its PodGroup), and each waiting member gets a Warning event, reason
//! `PodGroupMissing`, that names the missing object and the two ways to fix it. Groups named
//! after a Job that gets its PodGroup from [`super::batch_v1_jobs`] are skipped: that PodGroup is on
//! its way.

use kube::api::DynamicObject;

use crate::api::{PodGroup, PodGroupSpec, labels, leader_worker_set};
use crate::cache::convert::stage_requests;
use crate::controller::queues::resource_list;
use gangplank_core::model::GroupKey;

use super::observe::{Asked, PodRef};

/// Reason of the Event on pods whose group has no PodGroup.
pub const POD_GROUP_MISSING: &str = "PodGroupMissing";

/// What to do for one group without a PodGroup.
#[derive(Debug, Clone, PartialEq)]
pub enum OrphanPlan {
    Create(Box<PodGroup>),
    /// Put `message` on each of `pods`.
    Missing {
        pods: Vec<PodRef>,
        message: String,
    },
}

/// What to do for the group `key`, whose pods asked `asked`, a replica of the LeaderWorkerSet
/// read as `set` (or the error reading it) when its leader names one, in a namespace whose
/// default queue is `namespace_queue`.
pub fn plan(
    key: &GroupKey,
    asked: &Asked,
    set: Option<Result<&DynamicObject, &str>>,
    namespace_queue: Option<&str>,
) -> Option<OrphanPlan> {
    if asked.waiting.is_empty() {
        return None;
    }
    if let Some(Ok(set)) = set
        && labels::annotation_value(&set.metadata, labels::MIN_REPLICAS_ANNOTATION).is_some()
    {
        return Some(OrphanPlan::Missing {
            pods: asked.waiting.clone(),
            message: format!(
                "PodGroup {key} does not exist, so this pod waits: its LeaderWorkerSet {} asks for one gang of its replicas (annotation {}), which Gangplank makes only for a LeaderWorkerSet created with the label {} (its pods then name its group). Create it again with that label, or remove the annotation for a gang per replica.",
                set.metadata.name.as_deref().unwrap_or_default(),
                labels::MIN_REPLICAS_ANNOTATION,
                labels::QUEUE_LABEL
            ),
        });
    }
    let Some(min_member) = asked.min_member else {
        return Some(OrphanPlan::Missing {
            pods: asked.waiting.clone(),
            message: format!(
                "PodGroup {key} does not exist, so this pod waits. Create a PodGroup named {} in namespace {} (spec.minMember is the gang size), or add the annotation {}: \"<gang size>\" to the group's pods and Gangplank creates it.",
                key.name,
                key.namespace,
                labels::MIN_MEMBER_ANNOTATION
            ),
        });
    };
    let queue = asked
        .queue
        .as_deref()
        .or(namespace_queue)
        .unwrap_or(labels::DEFAULT_QUEUE)
        .to_owned();
    let mut spec = PodGroupSpec::with_min_member(i32::try_from(min_member).unwrap_or(i32::MAX));
    let leader_ready = set
        .and_then(Result::ok)
        .and_then(|set| leader_worker_set::leader_ready_stages(&set.data));
    if let Some(stages) = leader_ready {
        match stage_requests(&stages) {
            Ok(requests) => {
                spec.min_member = 1;
                spec.min_resources = resource_list(&requests);
            }
            Err(why) => {
                return Some(OrphanPlan::Missing {
                    pods: asked.waiting.clone(),
                    message: format!(
                        "PodGroup {key} does not exist, so this pod waits: its LeaderWorkerSet starts replicas LeaderReady, and Gangplank keeps the whole replica's room for it, but a pod template of it cannot be read ({why})."
                    ),
                });
            }
        }
    }
    let owner = asked.controller.as_deref().map(|c| {
        (
            c.api_version.as_str(),
            c.kind.as_str(),
            c.name.as_str(),
            c.uid.as_str(),
        )
    });
    let group = super::batch_v1_jobs::made(&key.name, &key.namespace, spec, &queue, owner);
    Some(OrphanPlan::Create(Box::new(group)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(min_member: Option<u32>, queue: Option<&str>) -> Asked {
        Asked {
            min_member,
            queue: queue.map(Into::into),
            waiting: vec![PodRef {
                namespace: "ml".into(),
                name: "w-0".into(),
                uid: "u0".into(),
            }],
            workload: None,
            controller: None,
            leader_worker_set: None,
        }
    }

    #[test]
    fn a_replica_of_a_leader_worker_set_started_leader_ready_is_its_leader_with_the_replica_s_room()
    {
        let key = GroupKey::new("ml", "replica-key");
        let set = |policy: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": "lws", "namespace": "ml"},
                "spec": {"startupPolicy": policy, "leaderWorkerTemplate": {"size": 4,
                    "workerTemplate": {"spec": {"containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "8"}}}]}}}}
            }))
            .unwrap()
        };
        let leader_ready = set("LeaderReady");
        let Some(OrphanPlan::Create(group)) =
            plan(&key, &asked(Some(4), None), Some(Ok(&leader_ready)), None)
        else {
            panic!("expected a PodGroup");
        };
        assert_eq!(group.spec.min_member, 1);
        assert_eq!(
            group.spec.min_resources.get("cpu").map(|q| q.0.as_str()),
            Some("32")
        );
        for other in [Ok(&set("LeaderCreated")), Err("forbidden")] {
            let Some(OrphanPlan::Create(group)) =
                plan(&key, &asked(Some(4), None), Some(other), None)
            else {
                panic!("expected a PodGroup");
            };
            assert_eq!(group.spec.min_member, 4, "a gang of its size");
            assert!(group.spec.min_resources.is_empty());
        }
    }

    #[test]
    fn a_replica_of_a_leader_worker_set_annotated_as_one_gang_waits_saying_how_to_get_it() {
        let key = GroupKey::new("ml", "replica-key");
        let set: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "svc", "namespace": "ml",
                "annotations": {(labels::MIN_REPLICAS_ANNOTATION): "2"}},
            "spec": {"leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {}}}}
        }))
        .unwrap();
        let Some(OrphanPlan::Missing { message, .. }) =
            plan(&key, &asked(Some(4), None), Some(Ok(&set)), None)
        else {
            panic!("expected the pods told why");
        };
        assert!(
            message.contains("its LeaderWorkerSet svc asks for one gang of its replicas")
                && message.contains(labels::QUEUE_LABEL),
            "{message}"
        );
    }

    #[test]
    fn pods_that_give_the_gang_size_get_their_pod_group_in_their_queue() {
        let key = GroupKey::new("ml", "ring");
        let Some(OrphanPlan::Create(group)) =
            plan(&key, &asked(Some(3), Some("research")), None, Some("team"))
        else {
            panic!("expected a PodGroup");
        };
        assert_eq!(group.metadata.name.as_deref(), Some("ring"));
        assert_eq!(group.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(group.spec.min_member, 3);
        assert_eq!(group.spec.queue.as_deref(), Some("research"));
        assert_eq!(group.metadata.owner_references, None);
    }

    #[test]
    fn pods_of_one_controller_get_a_pod_group_that_controller_owns() {
        let key = GroupKey::new("ml", "ring");
        let of_a_stateful_set = Asked {
            controller: Some(std::sync::Arc::new(gangplank_core::model::Workload {
                api_version: "apps/v1".into(),
                kind: "StatefulSet".into(),
                name: "ring".into(),
                uid: "sts-uid".into(),
            })),
            ..asked(Some(3), None)
        };
        let Some(OrphanPlan::Create(group)) = plan(&key, &of_a_stateful_set, None, None) else {
            panic!("expected a PodGroup");
        };
        let owner = &group.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("StatefulSet", "sts-uid", Some(true))
        );
    }

    #[test]
    fn pods_without_a_queue_get_a_pod_group_in_their_namespace_queue_else_the_default_one() {
        let key = GroupKey::new("ml", "ring");
        let queue_of =
            |namespace_queue| match plan(&key, &asked(Some(2), None), None, namespace_queue) {
                Some(OrphanPlan::Create(group)) => group.spec.queue.clone(),
                other => panic!("expected a PodGroup, got {other:?}"),
            };
        assert_eq!(queue_of(Some("team")).as_deref(), Some("team"));
        assert_eq!(queue_of(None).as_deref(), Some("default"));
    }

    #[test]
    fn pods_that_do_not_give_the_gang_size_are_told_what_is_missing() {
        let key = GroupKey::new("ml", "ring");
        let Some(OrphanPlan::Missing { pods, message }) =
            plan(&key, &asked(None, None), None, None)
        else {
            panic!("expected an event");
        };
        assert_eq!(pods.len(), 1);
        assert_eq!(
            message,
            "PodGroup ml/ring does not exist, so this pod waits. Create a PodGroup named ring in namespace ml (spec.minMember is the gang size), or add the annotation scheduling.gangplank.dev/min-member: \"<gang size>\" to the group's pods and Gangplank creates it."
        );
    }

    #[test]
    fn a_group_whose_pods_all_run_or_finished_needs_nothing() {
        let key = GroupKey::new("ml", "ring");
        let none = Asked {
            waiting: vec![],
            ..asked(None, None)
        };
        assert_eq!(plan(&key, &none, None, None), None);
    }
}
