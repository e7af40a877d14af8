//! Well-known names: the API group, the labels, annotations, scheduling gate and marker resource
//! that Gangplank reads and writes on other people's objects, and the aliases it accepts from
//! other batch schedulers.
//!
//! Everything that spells one of these strings imports it from here, so a typo is a compile error
//! and a rename is one edit. [`pod_group_of`] and [`queue_of`] are the single place where the
//! alias precedence is decided; the webhooks, the cache and the controller all call them, so a
//! pod cannot be in one group for the admission loop and in another for the extender.
//!
//! Precedence (first match wins), for the group:
//! 1. label `scheduling.gangplank.dev/pod-group` (ours),
//! 2. label `scheduling.x-k8s.io/pod-group` (scheduler-plugins coscheduling),
//! 3. annotation `scheduling.k8s.io/group-name` (Volcano; Kubeflow, Spark and Ray set it),
//! 4. label `leaderworkerset.sigs.k8s.io/group-key` (LeaderWorkerSet: a replica's group), on a
//!    pod that also names a queue ([`lws::group_key`]).
//!
//! and for the queue:
//! 1. label `scheduling.gangplank.dev/queue` (ours),
//! 2. label `volcano.sh/queue-name` (Volcano; KubeRay in Volcano mode sets it),
//! 3. annotation `scheduling.volcano.sh/queue-name` (Volcano).
//!
//! Our own keys win so that an operator can override what a third-party integration wrote
//! without having to remove it. Empty values count as absent: `kubectl label pod p
//! scheduling.gangplank.dev/pod-group=` must not put a pod into a group named "".
//! The namespace default queue (label [`QUEUE_LABEL`] on the Namespace) and a PodGroup's
//! `spec.queue` are applied by their callers, after these per-object keys.

use std::collections::BTreeMap;

/// API group of Gangplank's custom resources (`Queue`, `PodGroup`).
pub const GROUP: &str = "scheduling.gangplank.dev";

/// API version of Gangplank's custom resources.
pub const VERSION: &str = "v1alpha1";

/// Label that puts a pod (or a Job's pod template) into the PodGroup of that name, in the pod's
/// own namespace.
pub const POD_GROUP_LABEL: &str = "scheduling.gangplank.dev/pod-group";

/// Label naming the Queue of a pod, a PodGroup, a Job, or (on a Namespace) the default queue of
/// everything created in it.
pub const QUEUE_LABEL: &str = "scheduling.gangplank.dev/queue";

/// Annotation on a batch/v1 Job overriding the gang size of the PodGroup created for it
/// (otherwise `spec.parallelism`).
pub const MIN_MEMBER_ANNOTATION: &str = "scheduling.gangplank.dev/min-member";
/// Annotation on a JobSet making its gang a gang of gangs: how many whole Jobs of each replicated
/// job it needs to start (`prefill=2,decode=1`; [`super::min_replicas`]).
pub const MIN_REPLICAS_ANNOTATION: &str = "scheduling.gangplank.dev/min-replicas";
/// The gang size a pod asks for, so that Gangplank creates its missing PodGroup, and the
/// annotation that gives it: [`MIN_MEMBER_ANNOTATION`], else, on the leader of a LeaderWorkerSet
/// replica whose group is the replica's (`leads_a_replica`,
/// [`super::leader_worker_set::Replica`]), LWS's
/// [`lws::SIZE_ANNOTATION`]. `None` when absent or not a positive integer.
/// Not bounded here: the pod webhook, where the number enters Gangplank, refuses one above
/// `gangplank_core::limits::MAX_MEMBERS`.
pub fn gang_size_of(
    annotations: Option<&BTreeMap<String, String>>,
    leads_a_replica: bool,
) -> Option<(&'static str, u64)> {
    let annotations = annotations?;
    let key = if annotations.contains_key(MIN_MEMBER_ANNOTATION) {
        MIN_MEMBER_ANNOTATION
    } else if leads_a_replica {
        lws::SIZE_ANNOTATION
    } else {
        return None;
    };
    let size = annotations.get(key)?.trim().parse::<u64>().ok()?;
    (size > 0).then_some((key, size))
}

/// Annotation on a Job: the `topologyKey` of the PodGroup the controller creates for it (all
/// its pods on nodes sharing that label's value).
pub const TOPOLOGY_KEY_ANNOTATION: &str = "scheduling.gangplank.dev/topology-key";
/// Annotation on a Job: the `preferredTopologyKey` of the PodGroup the controller creates for
/// it (all its pods in one domain of that level when one has room).
pub const PREFERRED_TOPOLOGY_KEY_ANNOTATION: &str =
    "scheduling.gangplank.dev/preferred-topology-key";

/// The value of `annotation` on an object, trimmed; `None` when absent or empty.
pub fn annotation_value<'m>(
    meta: &'m k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    annotation: &str,
) -> Option<&'m str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(annotation))
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
}

/// Annotation the admission loop puts on a PodGroup it admits with room kept for members still
/// to come (ahead of its members, as one made for a Volcano PodGroup, or on its
/// `minResources`, see `gangplank_core::model::owed`): when, in RFC 3339.
pub const ADMITTED_AHEAD_ANNOTATION: &str = "scheduling.gangplank.dev/admitted-ahead";

/// Annotation on a PodGroup whose members come in stages (`"true"`): its operator creates some
/// members only once others finished (Kubeflow Trainer's initializers, a JobSet's `dependsOn`).
/// Such a group is admitted ahead of its members, on its `minResources`, as one made for a
/// Volcano PodGroup is: each member is let in as it comes while the admission holds, and those
/// that Succeeded count towards `minMember`. Gangplank sets it on the PodGroups it makes for a
/// TrainJob's PodGroup and for a JobSet with `dependsOn`; a user may set it on their own.
pub const MEMBERS_IN_STAGES_ANNOTATION: &str = "scheduling.gangplank.dev/members-in-stages";

/// Label on Gangplank's stand-in pods (`"true"`): pods in its own namespace that ask a node
/// autoscaler for a waiting gang's room (`gangplank_core::model::growth`).
pub const STAND_IN_LABEL: &str = "scheduling.gangplank.dev/stand-in";
/// Annotation on a stand-in pod: the gang it stands in for, `<namespace>/<name>`.
pub const STAND_IN_FOR_ANNOTATION: &str = "scheduling.gangplank.dev/stand-in-for";

/// Label on the pod of the Gangplank replica that holds the leader Lease: spelled by the
/// election that writes it (runtime plumbing, which imports no adapter).
pub use crate::leader::LEADER_LABEL;

/// LeaderWorkerSet's names on its pods (`super::leader_worker_set` reads the rest of a replica):
/// here, beside the other aliases, as a replica's group key is the last alias of a pod's group.
pub mod lws {
    use std::collections::BTreeMap;

    use super::non_empty;
    /// LeaderWorkerSet's label on each pod of a replica: a hash of the leader's namespace and name.
    pub const GROUP_KEY_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-key";
    /// LeaderWorkerSet's label numbering a pod within its replica: `0` is the leader.
    pub const WORKER_INDEX_LABEL: &str = "leaderworkerset.sigs.k8s.io/worker-index";
    /// LeaderWorkerSet's annotation on each pod of a replica: the replica's size (leader included).
    pub const SIZE_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/size";
    /// LeaderWorkerSet's label on each pod: the LeaderWorkerSet's name.
    pub const NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";

    /// The pod's replica's group key, once LWS's own pod webhook has completed the pod: it gives the
    /// leader its group key and each worker its worker index, and (with LWS's Volcano provider)
    /// names the Volcano PodGroup, all in one call. A pod lacking either label is one that webhook
    /// has not seen yet: it is in no replica's group until it has, so that a Volcano PodGroup's
    /// name, written in the same call, always takes precedence.
    pub fn group_key(labels: Option<&BTreeMap<String, String>>) -> Option<&str> {
        non_empty(labels, WORKER_INDEX_LABEL)?;
        non_empty(labels, GROUP_KEY_LABEL)
    }
}

pub use gangplank_core::model::names::{
    ADMISSION_GATE, ADMITTED_ANNOTATION, DEFAULT_QUEUE, MANAGED_RESOURCE, PLACEMENT_RESOURCE,
};

/// scheduler-plugins (coscheduling) pod label naming the pod's PodGroup. Accepted as an alias of
/// [`POD_GROUP_LABEL`].
pub const SCHEDULER_PLUGINS_POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// Volcano pod annotation naming the pod's PodGroup. Accepted as an alias of [`POD_GROUP_LABEL`].
pub const VOLCANO_GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";

/// Volcano label naming the queue. Accepted as an alias of [`QUEUE_LABEL`].
pub const VOLCANO_QUEUE_NAME_LABEL: &str = "volcano.sh/queue-name";

/// Volcano annotation naming the queue. Accepted as an alias of [`QUEUE_LABEL`].
pub const VOLCANO_QUEUE_NAME_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";

/// The PodGroup name an object (a pod, a pod template) asks for, applying the alias precedence
/// in the module docs. `None` when no key is present with a non-empty value.
pub fn pod_group_of<'a>(
    labels: Option<&'a BTreeMap<String, String>>,
    annotations: Option<&'a BTreeMap<String, String>>,
) -> Option<&'a str> {
    non_empty(labels, POD_GROUP_LABEL)
        .or_else(|| non_empty(labels, SCHEDULER_PLUGINS_POD_GROUP_LABEL))
        .or_else(|| non_empty(annotations, VOLCANO_GROUP_NAME_ANNOTATION))
        .or_else(|| {
            queue_of(labels, annotations)?;
            lws::group_key(labels)
        })
}

/// The Queue name an object (a pod, a pod template, a PodGroup, a Job) asks for, applying the
/// alias precedence in the module docs. `None` when no key is present with a non-empty value.
pub fn queue_of<'a>(
    labels: Option<&'a BTreeMap<String, String>>,
    annotations: Option<&'a BTreeMap<String, String>>,
) -> Option<&'a str> {
    non_empty(labels, QUEUE_LABEL)
        .or_else(|| non_empty(labels, VOLCANO_QUEUE_NAME_LABEL))
        .or_else(|| non_empty(annotations, VOLCANO_QUEUE_NAME_ANNOTATION))
}

/// The value of `key` in `map`, unless missing or empty.
pub(crate) fn non_empty<'a>(
    map: Option<&'a BTreeMap<String, String>>,
    key: &str,
) -> Option<&'a str> {
    map?.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

/// Why `name` cannot name a PodGroup or a Queue (a DNS-1123 subdomain that also fits a label
/// value: at most 63 lowercase letters, digits, `-` and `.`, starting and ending with a letter
/// or digit), or `None` when it can.
pub fn name_problem(name: &str) -> Option<String> {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| alphanumeric(c) || c == '-' || c == '.')
        && name.starts_with(alphanumeric)
        && name.ends_with(alphanumeric);
    (!valid).then(|| {
        format!(
            "must be at most 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit, got {name:?}"
        )
    })
}

/// Why `key` cannot be a label key (an optional DNS subdomain prefix of at most 253
/// characters and `/`, then a name of at most 63 letters, digits, `-`, `_` or `.`, starting and
/// ending with a letter or digit), or `None` when it can.
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| alphanumeric(c) || matches!(c, '-' | '_' | '.'))
        && name.starts_with(alphanumeric)
        && name.ends_with(alphanumeric);
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.')
                .all(|part| name_problem(part).is_none() && !part.contains('.'))
    });
    (!(name_ok && prefix_ok)).then(|| {
        format!(
            "must be a label key: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (like topology.kubernetes.io/zone), got {key:?}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn own_group_label_wins_over_both_aliases() {
        let labels = map(&[
            (POD_GROUP_LABEL, "ours"),
            (SCHEDULER_PLUGINS_POD_GROUP_LABEL, "coscheduling"),
        ]);
        let annotations = map(&[(VOLCANO_GROUP_NAME_ANNOTATION, "volcano")]);
        assert_eq!(
            pod_group_of(Some(&labels), Some(&annotations)),
            Some("ours")
        );
    }

    #[test]
    fn scheduler_plugins_label_wins_over_volcano_annotation() {
        let labels = map(&[(SCHEDULER_PLUGINS_POD_GROUP_LABEL, "coscheduling")]);
        let annotations = map(&[(VOLCANO_GROUP_NAME_ANNOTATION, "volcano")]);
        assert_eq!(
            pod_group_of(Some(&labels), Some(&annotations)),
            Some("coscheduling")
        );
    }

    #[test]
    fn volcano_annotation_alone_names_the_group() {
        let annotations = map(&[(VOLCANO_GROUP_NAME_ANNOTATION, "volcano")]);
        assert_eq!(pod_group_of(None, Some(&annotations)), Some("volcano"));
    }

    #[test]
    fn group_keys_in_the_wrong_place_are_ignored() {
        // Labels are looked up among labels and annotations among annotations, never crosswise.
        let labels = map(&[(VOLCANO_GROUP_NAME_ANNOTATION, "volcano")]);
        let annotations = map(&[(POD_GROUP_LABEL, "ours")]);
        assert_eq!(pod_group_of(Some(&labels), Some(&annotations)), None);
    }

    #[test]
    fn empty_group_value_falls_through_to_the_next_alias() {
        let labels = map(&[
            (POD_GROUP_LABEL, ""),
            (SCHEDULER_PLUGINS_POD_GROUP_LABEL, "coscheduling"),
        ]);
        assert_eq!(pod_group_of(Some(&labels), None), Some("coscheduling"));
        let only_empty = map(&[(POD_GROUP_LABEL, "")]);
        assert_eq!(pod_group_of(Some(&only_empty), None), None);
    }

    #[test]
    fn pod_without_any_key_has_no_group_and_no_queue() {
        let labels = map(&[("app", "web")]);
        assert_eq!(pod_group_of(Some(&labels), None), None);
        assert_eq!(queue_of(Some(&labels), None), None);
        assert_eq!(pod_group_of(None, None), None);
        assert_eq!(queue_of(None, None), None);
    }

    #[test]
    fn own_queue_label_wins_over_volcano_annotation() {
        let labels = map(&[(QUEUE_LABEL, "research")]);
        let annotations = map(&[(VOLCANO_QUEUE_NAME_ANNOTATION, "volcano-q")]);
        assert_eq!(
            queue_of(Some(&labels), Some(&annotations)),
            Some("research")
        );
    }

    #[test]
    fn volcano_queue_annotation_alone_names_the_queue() {
        let annotations = map(&[(VOLCANO_QUEUE_NAME_ANNOTATION, "volcano-q")]);
        assert_eq!(queue_of(None, Some(&annotations)), Some("volcano-q"));
        let empty_label = map(&[(QUEUE_LABEL, "")]);
        assert_eq!(
            queue_of(Some(&empty_label), Some(&annotations)),
            Some("volcano-q")
        );
    }

    #[test]
    fn a_leader_worker_set_s_group_key_names_the_group_last_and_only_with_a_queue() {
        use crate::api::leader_worker_set::{GROUP_KEY_LABEL, WORKER_INDEX_LABEL};
        let mut worker = map(&[(GROUP_KEY_LABEL, "k1"), (WORKER_INDEX_LABEL, "2")]);
        assert_eq!(
            pod_group_of(Some(&worker), None),
            None,
            "no queue: not Gangplank's"
        );
        worker.insert(QUEUE_LABEL.into(), "research".into());
        assert_eq!(pod_group_of(Some(&worker), None), Some("k1"));
        let volcano = map(&[(VOLCANO_GROUP_NAME_ANNOTATION, "lws-0-5b8f")]);
        assert_eq!(
            pod_group_of(Some(&worker), Some(&volcano)),
            Some("lws-0-5b8f")
        );
        worker.insert(POD_GROUP_LABEL.into(), "mine".into());
        assert_eq!(pod_group_of(Some(&worker), None), Some("mine"));
    }

    #[test]
    fn the_gang_size_is_our_annotation_else_the_size_on_a_replica_s_leader() {
        use crate::api::leader_worker_set::SIZE_ANNOTATION;
        let size = map(&[(SIZE_ANNOTATION, "4")]);
        assert_eq!(gang_size_of(Some(&size), true), Some((SIZE_ANNOTATION, 4)));
        assert_eq!(gang_size_of(Some(&size), false), None, "not a leader");
        let both = map(&[(SIZE_ANNOTATION, "4"), (MIN_MEMBER_ANNOTATION, " 2 ")]);
        assert_eq!(
            gang_size_of(Some(&both), true),
            Some((MIN_MEMBER_ANNOTATION, 2))
        );
        for bad in ["0", "four", ""] {
            let bad = map(&[(MIN_MEMBER_ANNOTATION, bad)]);
            assert_eq!(gang_size_of(Some(&bad), false), None);
        }
        let huge = map(&[(SIZE_ANNOTATION, "2147483647")]);
        assert_eq!(
            gang_size_of(Some(&huge), true),
            Some((SIZE_ANNOTATION, 2_147_483_647))
        );
    }

    #[test]
    fn every_gangplank_key_lives_in_the_api_group() {
        for key in [
            POD_GROUP_LABEL,
            QUEUE_LABEL,
            MIN_MEMBER_ANNOTATION,
            ADMISSION_GATE,
            ADMITTED_ANNOTATION,
            MANAGED_RESOURCE,
            PLACEMENT_RESOURCE,
        ] {
            assert_eq!(key.split_once('/').map(|(prefix, _)| prefix), Some(GROUP));
        }
    }
}
