//! Node scores for the extender's prioritize verb: binpack or spread.
//!
//! Why it exists: the scheduler's own scorers know nothing of gangs. Packing a gang's members
//! tightly leaves whole nodes free for the next gang (binpack, the default); some clusters would
//! rather spread members so one node's failure costs fewer of them (spread). The scheduler adds
//! `score × weight × 10` to its own total, so the score is an integer in `0..=10`.
//!
//! The measure is the **mean utilisation after placement over the resources the pod requests**:
//! for each requested resource, `(used + request) / allocatable`, averaged. Binpack scores that
//! mean (fuller is better), spread scores its mirror (`10 − binpack`). Why the mean and not the
//! dominant share (the largest of those fractions):
//! - it is what the scheduler's own `MostAllocated` / `LeastAllocated` scorers compute (with
//!   equal weights), so Gangplank's preference pulls in the same direction as theirs instead of
//!   fighting it;
//! - every requested resource counts: with the dominant share, two nodes that differ only in a
//!   secondary resource (same GPU use, very different CPU use) tie, and on a 0..=10 scale ties are
//!   already common.
//!
//! Details, each chosen to keep the score deterministic and cheap:
//! - Resources the pod requests nothing of are left out; so are the managed-pod markers
//!   ([`crate::model::ResourceId::is_marker`]), cluster-level resources no node advertises.
//! - A pod that requests nothing (BestEffort) is scored on the node's current cpu and memory
//!   utilisation, the scheduler's default scoring resources.
//! - A pod that does not fit (any requested resource would exceed allocatable) scores 0 under
//!   both strategies: the scheduler should not prefer it, and filter removes it anyway.
//! - Resources are read by interned id ([`ResourceId`]), never by name, so a score costs a few
//!   array reads per requested resource.
//! - Integer arithmetic throughout: fractions in per-mille (floored), the mean floored, the
//!   0..=10 score rounded half up, then clamped.

use std::fmt;

use crate::model::{ResourceId, Resources};

/// The highest score the extender protocol allows (`MaxExtenderPriority`).
pub const MAX_SCORE: i64 = 10;

/// The lowest score.
pub const MIN_SCORE: i64 = 0;

/// A node where the pod's own gang already holds claimed room scores the maximum, so members land
/// where their claim is.
pub const CLAIMED_NODE_SCORE: i64 = MAX_SCORE;

/// The resources a pod that requests nothing is scored on, as in the scheduler.
pub const DEFAULT_SCORING_RESOURCES: [ResourceId; 2] = [ResourceId::CPU, ResourceId::MEMORY];

const PER_MILLE: i128 = 1000;

/// How prioritize orders nodes for gang members.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Prefer the nodes that would be fullest: keeps whole nodes free for the next gang.
    #[default]
    Binpack,
    /// Prefer the emptiest nodes: a node's failure takes fewer members with it.
    Spread,
}

impl Strategy {
    pub const ALL: [Strategy; 2] = [Strategy::Binpack, Strategy::Spread];

    /// The strategy named `name` (`binpack` or `spread`).
    pub fn named(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Binpack => "binpack",
            Strategy::Spread => "spread",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The score in `0..=10` of a node for a pod: see the module docs for the measure.
/// `node_used` is what the pods already on the node (and claims on it) request.
#[inline]
pub fn score(
    strategy: Strategy,
    node_allocatable: &Resources,
    node_used: &Resources,
    pod_request: &Resources,
) -> i64 {
    let Some(mean) = utilisation_after(node_allocatable, node_used, pod_request) else {
        return MIN_SCORE;
    };
    let packed = ((i128::from(mean) * i128::from(MAX_SCORE) + PER_MILLE / 2) / PER_MILLE) as i64;
    let packed = packed.clamp(MIN_SCORE, MAX_SCORE);
    match strategy {
        Strategy::Binpack => packed,
        Strategy::Spread => MAX_SCORE - packed,
    }
}

/// Whether the pod fits in what the node has left, over the resources it requests (the managed
/// marker excepted).
pub fn fits(node_allocatable: &Resources, node_used: &Resources, pod_request: &Resources) -> bool {
    utilisation_after(node_allocatable, node_used, pod_request).is_some()
}

/// The node's mean utilisation in per-mille (0..=1000) after placing the pod, over the resources
/// the pod requests; `None` when the pod does not fit.
pub fn utilisation_after(
    node_allocatable: &Resources,
    node_used: &Resources,
    pod_request: &Resources,
) -> Option<u32> {
    let mut sum: i128 = 0;
    let mut count: i128 = 0;
    for (id, request) in pod_request.ids() {
        if request <= 0 || id.is_marker() {
            continue;
        }
        let allocatable = i128::from(node_allocatable.amount(id));
        let after = i128::from(node_used.amount(id).max(0)) + i128::from(request);
        if after > allocatable {
            return None;
        }
        sum += after * PER_MILLE / allocatable;
        count += 1;
    }
    if count == 0 {
        for id in DEFAULT_SCORING_RESOURCES {
            let allocatable = i128::from(node_allocatable.amount(id));
            if allocatable > 0 {
                let used = i128::from(node_used.amount(id)).clamp(0, allocatable);
                sum += used * PER_MILLE / allocatable;
                count += 1;
            }
        }
    }
    Some(if count == 0 { 0 } else { (sum / count) as u32 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::names::{MANAGED_RESOURCE, PLACEMENT_RESOURCE};

    const GIB: i64 = 1 << 30;

    fn node(cpu: i64, memory: i64) -> Resources {
        Resources::from([("cpu", cpu), ("memory", memory)])
    }

    #[test]
    fn binpack_prefers_the_node_that_would_be_fullest() {
        let pod = node(1000, GIB);
        let alloc = node(8000, 16 * GIB);
        let busy = score(Strategy::Binpack, &alloc, &node(6000, 12 * GIB), &pod);
        let idle = score(Strategy::Binpack, &alloc, &node(0, 0), &pod);
        assert!(busy > idle, "busy {busy} idle {idle}");
    }

    #[test]
    fn spread_prefers_the_emptiest_node() {
        let pod = node(1000, GIB);
        let alloc = node(8000, 16 * GIB);
        let busy = score(Strategy::Spread, &alloc, &node(6000, 12 * GIB), &pod);
        let idle = score(Strategy::Spread, &alloc, &node(0, 0), &pod);
        assert!(idle > busy, "busy {busy} idle {idle}");
    }

    #[test]
    fn score_is_the_rounded_mean_of_requested_resources() {
        // cpu (4+2)/8 = 750‰, memory (2+2)/16 = 250‰: mean 500‰, so 5 and 5.
        let alloc = node(8000, 16 * GIB);
        let used = node(4000, 2 * GIB);
        let pod = node(2000, 2 * GIB);
        assert_eq!(utilisation_after(&alloc, &used, &pod), Some(500));
        assert_eq!(score(Strategy::Binpack, &alloc, &used, &pod), 5);
        assert_eq!(score(Strategy::Spread, &alloc, &used, &pod), 5);
        // 950‰ rounds up to the maximum, 949‰ does not.
        let alloc = Resources::from([("cpu", 1000)]);
        let pod = Resources::from([("cpu", 950)]);
        assert_eq!(
            score(Strategy::Binpack, &alloc, &Resources::new(), &pod),
            10
        );
        let pod = Resources::from([("cpu", 949)]);
        assert_eq!(score(Strategy::Binpack, &alloc, &Resources::new(), &pod), 9);
    }

    #[test]
    fn only_requested_resources_count() {
        // The node's GPUs are idle, but a cpu-only pod is scored on cpu alone.
        let alloc = Resources::from([("cpu", 8000), ("nvidia.com/gpu", 8)]);
        let used = Resources::from([("cpu", 7000)]);
        let pod = Resources::from([("cpu", 1000)]);
        assert_eq!(score(Strategy::Binpack, &alloc, &used, &pod), 10);
    }

    #[test]
    fn pod_that_does_not_fit_scores_zero_under_both_strategies() {
        let alloc = node(8000, 16 * GIB);
        let used = node(7500, 0);
        let pod = node(1000, GIB);
        assert_eq!(score(Strategy::Binpack, &alloc, &used, &pod), 0);
        assert_eq!(score(Strategy::Spread, &alloc, &used, &pod), 0);
        let gpu_pod = Resources::from([("nvidia.com/gpu", 1)]);
        assert_eq!(score(Strategy::Spread, &alloc, &used, &gpu_pod), 0);
        assert!(!fits(&alloc, &used, &gpu_pod));
    }

    #[test]
    fn the_markers_are_ignored_because_no_node_advertises_them() {
        let alloc = node(8000, 16 * GIB);
        let pod = Resources::from([
            ("cpu", 1000),
            (MANAGED_RESOURCE, 1),
            (PLACEMENT_RESOURCE, 1),
        ]);
        assert!(fits(&alloc, &Resources::new(), &pod));
        assert_eq!(score(Strategy::Spread, &alloc, &Resources::new(), &pod), 9);
    }

    #[test]
    fn pod_requesting_nothing_is_scored_on_current_cpu_and_memory() {
        let alloc = node(8000, 16 * GIB);
        let used = node(8000, 16 * GIB);
        let best_effort = Resources::from([(MANAGED_RESOURCE, 1)]);
        assert_eq!(score(Strategy::Binpack, &alloc, &used, &best_effort), 10);
        assert_eq!(score(Strategy::Spread, &alloc, &used, &best_effort), 0);
        let empty = Resources::new();
        assert_eq!(score(Strategy::Spread, &alloc, &node(0, 0), &empty), 10);
        // A node with nothing allocatable at all still takes a pod that requests nothing.
        assert!(fits(&Resources::new(), &Resources::new(), &empty));
    }

    #[test]
    fn exact_fit_is_a_fit() {
        let alloc = node(8000, 16 * GIB);
        let used = node(7000, 15 * GIB);
        let pod = node(1000, GIB);
        assert_eq!(utilisation_after(&alloc, &used, &pod), Some(1000));
        assert_eq!(score(Strategy::Binpack, &alloc, &used, &pod), 10);
    }

    #[test]
    fn huge_amounts_do_not_overflow() {
        let alloc = Resources::from([("memory", i64::MAX)]);
        let used = Resources::from([("memory", i64::MAX - 10)]);
        let pod = Resources::from([("memory", 10)]);
        assert_eq!(score(Strategy::Binpack, &alloc, &used, &pod), 10);
        let pod = Resources::from([("memory", 11)]);
        assert_eq!(score(Strategy::Binpack, &alloc, &used, &pod), 0);
    }

    #[test]
    fn strategy_names_parse_from_the_command_line_and_config() {
        assert_eq!(Strategy::named("spread"), Some(Strategy::Spread));
        assert_eq!(Strategy::named("tight"), None);
        assert_eq!(Strategy::default(), Strategy::Binpack);
        let parsed: Strategy = serde_json::from_str("\"binpack\"").unwrap();
        assert_eq!(parsed, Strategy::Binpack);
        assert_eq!(
            serde_json::to_string(&Strategy::Spread).unwrap(),
            "\"spread\""
        );
        assert_eq!(Strategy::Spread.to_string(), "spread");
    }

    mod properties {
        use proptest::prelude::*;
        // Named explicitly so it wins over the glob-imported placement `Strategy`.
        use proptest::strategy::Strategy;

        use super::*;
        use crate::policy::placement::Strategy as Placement;

        fn amounts() -> impl Strategy<Value = (Resources, Resources, Resources)> {
            // allocatable, used, request over cpu, memory and gpu; zeros included.
            (
                [0i64..64_000, 0i64..(256 * GIB), 0i64..9],
                [0i64..64_000, 0i64..(256 * GIB), 0i64..9],
                [0i64..16_000, 0i64..(64 * GIB), 0i64..3],
            )
                .prop_map(|(a, u, r)| {
                    let res = |v: [i64; 3]| {
                        Resources::from([("cpu", v[0]), ("memory", v[1]), ("nvidia.com/gpu", v[2])])
                    };
                    (res(a), res(u), res(r))
                })
        }

        proptest! {
            #[test]
            fn scores_stay_within_the_protocol_range((a, u, r) in amounts()) {
                for s in [Placement::Binpack, Placement::Spread] {
                    let v = score(s, &a, &u, &r);
                    prop_assert!((MIN_SCORE..=MAX_SCORE).contains(&v));
                }
            }

            #[test]
            fn binpack_and_spread_mirror_each_other_on_fitting_nodes((a, u, r) in amounts()) {
                let b = score(Placement::Binpack, &a, &u, &r);
                let s = score(Placement::Spread, &a, &u, &r);
                if fits(&a, &u, &r) {
                    prop_assert_eq!(b + s, MAX_SCORE);
                } else {
                    prop_assert_eq!((b, s), (0, 0));
                }
            }

            #[test]
            fn more_usage_never_lowers_binpack_while_the_pod_still_fits(
                (a, u, r) in amounts(),
                extra in [0i64..8_000, 0i64..(32 * GIB), 0i64..3],
            ) {
                let mut more = u.clone();
                more.add(&Resources::from([("cpu", extra[0]), ("memory", extra[1]), ("nvidia.com/gpu", extra[2])]));
                if fits(&a, &more, &r) {
                    prop_assert!(score(Placement::Binpack, &a, &more, &r) >= score(Placement::Binpack, &a, &u, &r));
                }
            }

            #[test]
            fn fitting_means_every_requested_resource_fits((a, u, r) in amounts()) {
                let each = r.iter().all(|(name, req)| req <= 0 || u.get(name) + req <= a.get(name));
                prop_assert_eq!(fits(&a, &u, &r), each);
            }
        }
    }
}
