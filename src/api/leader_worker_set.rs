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
//! The key is read where it stands rather than copied at the pod's creation: LWS's pod webhook
//! completes its pods after Gangplank's (below), and the API server calls Gangplank's again
//! only through a webhook whose selector still matches, which the namespace's webhook
//! (selecting pods with no queue label) no longer does once it has written the queue.

use std::collections::BTreeMap;

use super::labels::non_empty;
// The names LWS writes on its pods, and the group key they give, live with the other
// well-known names (the group key is the last alias of a pod's group there).
pub use super::labels::lws::{GROUP_KEY_LABEL, SIZE_ANNOTATION, WORKER_INDEX_LABEL, group_key};

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
