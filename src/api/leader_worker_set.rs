//! LeaderWorkerSet (`sigs.k8s.io/lws`): what Gangplank reads on its pods to make each replica, a
//! leader and its workers, one gang when LWS runs without a gang provider (with its Volcano
//! provider, LWS writes a Volcano PodGroup per replica and names it on the pods, read like any
//! other: [`super::labels::pod_group_of`]).
//!
//! Every pod of a replica carries LWS's [`GROUP_KEY_LABEL`] (a hash of the leader's namespace and
//! name, the same on the leader and its workers), its [`WORKER_INDEX_LABEL`] (`0`: the leader)
//! and the replica's size in [`SIZE_ANNOTATION`]. The group key is the last alias of a pod's
//! group ([`super::labels::pod_group_of`]), on a pod that names a queue: a queue on its
//! template, or the one Gangplank's pod webhook writes from its namespace's default queue, so
//! that LWS's pods in no queue's scope stay nobody's group. Gangplank then creates the
//! group's PodGroup as for pods that give their gang size (`crate::controller::orphans`), from
//! the leader's size annotation, owned by the leader.
//!
//! With `startupPolicy: LeaderReady` LWS makes a replica's workers only once its leader is Ready,
//! so a gang of `size` would wait for ever for them: the controller reads the LeaderWorkerSet
//! the leader names ([`NAME_LABEL`]) and, for that policy, makes the PodGroup `minMember` 1
//! with the whole replica's requests in `minResources` ([`leader_ready_stages`]), as LWS's own
//! Volcano provider writes it, so the leader is bound only when its workers will find room.
//!
//! A LeaderWorkerSet annotated `scheduling.gangplank.dev/min-replicas` is instead one gang of
//! its replicas, a workload kind of its own ([`super::workloads`]: [`size`], [`pod_metadata`],
//! [`stages`], [`replicas`]): the workload webhook names its group on its pod templates, so its
//! pods' group is the LeaderWorkerSet's name, not a replica's key.
//!
//! The key is read where it stands rather than copied at the pod's creation: LWS's pod webhook
//! completes its pods after Gangplank's (below), and the API server calls Gangplank's again
//! only through a webhook whose selector still matches, which the namespace's webhook
//! (selecting pods with no queue label) no longer does once it has written the queue.

use std::collections::BTreeMap;

use super::labels::non_empty;
// The names LWS writes on its pods, and the group key they give, live with the other
// well-known names (the group key is the last alias of a pod's group there).
pub use super::labels::lws::{
    GROUP_KEY_LABEL, NAME_LABEL, SIZE_ANNOTATION, WORKER_INDEX_LABEL, group_key,
};
use super::stages::Stages;
use serde_json::Value;

/// The API version Gangplank reads LeaderWorkerSets with, and their resource name.
pub const API_VERSION: &str = "leaderworkerset.x-k8s.io/v1";
pub const KIND: &str = "LeaderWorkerSet";
pub const PLURAL: &str = "leaderworkersets";

/// A pod whose group is its LeaderWorkerSet replica's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica<'a> {
    /// The group key: the replica's group.
    pub group: &'a str,
    /// The pod is the replica's leader (worker index 0). The leader speaks for the group: the
    /// PodGroup made for it takes the leader's gang size and is owned by the leader pod, as
    /// LWS's own Volcano PodGroup is; LWS makes and removes a replica's workers with its leader
    /// (they are owned by it too), so the PodGroup goes with the replica on a restart, a
    /// rolling update or a scale-down, and the next leader's pods get a new one.
    pub leader: bool,
}

/// The replica whose group the pod is in: the group the pod names
/// ([`super::labels::pod_group_of`]) is its replica's group key.
pub fn replica_of<'a>(
    labels: Option<&'a BTreeMap<String, String>>,
    annotations: Option<&'a BTreeMap<String, String>>,
) -> Option<Replica<'a>> {
    let group = group_key(labels)?;
    (super::labels::pod_group_of(labels, annotations) == Some(group)).then(|| Replica {
        group,
        leader: leads(labels),
    })
}

/// LWS's label on every pod of a replica: the replica's index.
pub const GROUP_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-index";

/// The sub-group a LeaderWorkerSet's replicas form in a gang of them
/// ([`super::min_replicas`]).
pub const REPLICAS_SUB_GROUP: &str = "replicas";

/// A whole LeaderWorkerSet's pods, when they are one gang (its pods name it by the group label
/// the workload webhook writes, [`super::workloads`]): `replicas` (1 when unset) times
/// `leaderWorkerTemplate.size` (1 when unset).
pub fn size(spec: &Value) -> Option<u32> {
    let (replicas, size) = counts(spec)?;
    replicas.checked_mul(size)
}

/// `(replicas, size)` of a LeaderWorkerSet's spec.
fn counts(spec: &Value) -> Option<(u32, u32)> {
    let count = |v: Option<&Value>| match v {
        None | Some(Value::Null) => Some(1),
        Some(v) => u32::try_from(v.as_u64()?).ok(),
    };
    let template = spec.get("leaderWorkerTemplate");
    Some((
        count(spec.get("replicas"))?,
        count(template.and_then(|t| t.get("size")))?,
    ))
}

/// The metadata of a LeaderWorkerSet's pod templates, the leader's (when it has its own) and
/// the workers'.
pub fn pod_metadata(object: &Value) -> Vec<Vec<String>> {
    let template = ["spec", "leaderWorkerTemplate"];
    ["leaderTemplate", "workerTemplate"]
        .into_iter()
        .filter(|t| {
            object
                .pointer(&format!("/spec/leaderWorkerTemplate/{t}"))
                .is_some()
        })
        .map(|t| {
            template
                .iter()
                .chain(&[t, "metadata"])
                .map(|k| (*k).to_owned())
                .collect()
        })
        .collect()
}

/// A whole LeaderWorkerSet's pods in stages when it starts its replicas `LeaderReady`: every
/// leader, then every worker.
pub fn stages(spec: &Value) -> Option<Stages<'_>> {
    let (replicas, _) = counts(spec)?;
    leader_ready_stages_of(spec)?
        .into_iter()
        .map(|(n, pods)| Some((n.checked_mul(replicas)?, pods)))
        .collect()
}

/// Its replicas, each one instance of [`REPLICAS_SUB_GROUP`] told apart by
/// [`GROUP_INDEX_LABEL`]; refused when it starts them `LeaderReady` (its workers come after
/// the leader runs, not as a whole replica).
pub fn replicas(spec: &Value) -> super::min_replicas::Read {
    use super::min_replicas::{Problem, Replicas};
    if leader_ready_stages_of(spec).is_some() {
        return Some(Err(Problem::InStages));
    }
    let Some((count, pods)) = counts(spec) else {
        return Some(Err(Problem::Unreadable));
    };
    Some(Ok(vec![Replicas {
        name: REPLICAS_SUB_GROUP.to_owned(),
        count,
        pods,
        selector: None,
        instance_key: GROUP_INDEX_LABEL,
    }]))
}

/// When the LeaderWorkerSet `object` starts its replicas `LeaderReady`: each replica's pods as
/// they come, the leader (from `leaderTemplate`, else `workerTemplate`), then its `size - 1`
/// workers; `None` for any other policy, or a spec that gives no size or worker template.
pub fn leader_ready_stages(object: &Value) -> Option<Stages<'_>> {
    leader_ready_stages_of(object.get("spec")?)
}

fn leader_ready_stages_of(spec: &Value) -> Option<Stages<'_>> {
    if spec.get("startupPolicy").and_then(Value::as_str) != Some("LeaderReady") {
        return None;
    }
    let template = spec.get("leaderWorkerTemplate")?;
    let size = u32::try_from(template.get("size")?.as_u64()?).ok()?;
    let workers = template.pointer("/workerTemplate/spec")?;
    let leader = template.pointer("/leaderTemplate/spec").unwrap_or(workers);
    Some(vec![(1, leader), (size.checked_sub(1)?, workers)])
}

/// The pod is its replica's leader.
pub fn leads(labels: Option<&BTreeMap<String, String>>) -> bool {
    non_empty(labels, WORKER_INDEX_LABEL) == Some("0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::labels::{POD_GROUP_LABEL, QUEUE_LABEL, VOLCANO_GROUP_NAME_ANNOTATION};

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_leader_worker_set_started_leader_ready_brings_its_leader_then_its_workers() {
        let pod = |cpu: &str| {
            serde_json::json!({"containers": [{"name": "c",
            "resources": {"requests": {"cpu": cpu}}}]})
        };
        let mut set = serde_json::json!({"spec": {"startupPolicy": "LeaderReady",
            "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": pod("8")}}}});
        let stages = leader_ready_stages(&set).expect("LeaderReady");
        assert_eq!(stages, [(1, &pod("8")), (3, &pod("8"))]);
        set["spec"]["leaderWorkerTemplate"]["leaderTemplate"] =
            serde_json::json!({"spec": pod("2")});
        let stages = leader_ready_stages(&set).expect("LeaderReady");
        assert_eq!(
            stages,
            [(1, &pod("2")), (3, &pod("8"))],
            "the leader's own template"
        );
        set["spec"]["startupPolicy"] = "LeaderCreated".into();
        assert_eq!(leader_ready_stages(&set), None);
        assert_eq!(leader_ready_stages(&serde_json::json!({"spec": {}})), None);
    }

    #[test]
    fn a_replica_s_group_key_counts_once_lws_completed_the_pod() {
        let worker = map(&[(GROUP_KEY_LABEL, "k1"), (WORKER_INDEX_LABEL, "2")]);
        assert_eq!(group_key(Some(&worker)), Some("k1"));
        // LWS's webhook gives the leader its group key, the workers their index.
        let unseen_worker = map(&[(GROUP_KEY_LABEL, "k1")]);
        assert_eq!(group_key(Some(&unseen_worker)), None);
        let unseen_leader = map(&[(WORKER_INDEX_LABEL, "0")]);
        assert_eq!(group_key(Some(&unseen_leader)), None);
    }

    #[test]
    fn a_pod_is_in_its_replica_s_group_when_its_group_is_the_group_key() {
        let mut leader = map(&[(GROUP_KEY_LABEL, "k1"), (WORKER_INDEX_LABEL, "0")]);
        assert_eq!(replica_of(Some(&leader), None), None, "in no group");
        leader.insert(QUEUE_LABEL.into(), "research".into());
        assert_eq!(
            replica_of(Some(&leader), None),
            Some(Replica {
                group: "k1",
                leader: true
            })
        );
        let mut worker = leader.clone();
        worker.insert(WORKER_INDEX_LABEL.into(), "3".into());
        assert_eq!(
            replica_of(Some(&worker), None).map(|r| r.leader),
            Some(false)
        );
        // With LWS's Volcano provider the group is the Volcano PodGroup's.
        let annotations = map(&[(VOLCANO_GROUP_NAME_ANNOTATION, "lws-0-5b8f")]);
        assert_eq!(replica_of(Some(&leader), Some(&annotations)), None);
        let mut named = leader.clone();
        named.insert(POD_GROUP_LABEL.into(), "mine".into());
        assert_eq!(replica_of(Some(&named), None), None);
    }
}
