//! Preemption: which of the scheduler's proposed victim lists Gangplank accepts.
//!
//! Why it exists: the scheduler's preemption knows priorities but not gangs. Left alone it evicts
//! one member of a running gang to make room, and the gang, now below `minMember`, is broken for
//! nothing: its remaining members hold their nodes while the job cannot run. The extender's
//! preempt verb receives, for each candidate node, the victims the scheduler's dry run chose;
//! this module says, node by node, whether that list may go ahead.
//!
//! Rules, for one node's list:
//! - every victim must have a **strictly lower priority** than the preemptor;
//! - no victim may belong to the **preemptor's own gang** (evicting a member to place another
//!   gains nothing);
//! - for each gang among the victims, evicting all of its victims on this node must leave it
//!   with **at least `minMember` placed members, or with none** (the whole gang goes, so nothing
//!   is left holding nodes for a job that cannot run);
//! - a victim Gangplank cannot judge (a pod or a gang it does not know, counts that do not add
//!   up) is not allowed: when in doubt, a gang is protected. Refusing costs the preemptor a retry;
//!   a wrong eviction costs a running job.
//!
//! **Decision: a node is kept with exactly the scheduler's list, or dropped whole; a list is
//! never trimmed.** The scheduler's dry run found that the preemptor fits on the node only after
//! evicting exactly that list (it already gave back every victim it could). Removing one victim
//! from the list would evict the others for nothing, because the preemptor would still not fit.
//! Each dropped node comes with a [`Rejection`] so the extender can log why.
//!
//! Nodes are judged independently: the scheduler picks one node of those returned and evicts
//! only that node's victims, so a gang's count is checked against one node's list at a time.

use std::fmt;

use crate::model::{GroupKey, Pod};

/// A gang, named by its PodGroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GangRef<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

impl<'a> GangRef<'a> {
    /// The gang a pod belongs to, if any.
    pub fn of(pod: &'a Pod) -> Option<Self> {
        pod.pod_group.as_deref().map(|name| GangRef {
            namespace: &pod.namespace,
            name,
        })
    }

    /// The owned key the cache indexes groups by.
    pub fn key(&self) -> GroupKey {
        GroupKey::new(self.namespace, self.name)
    }
}

impl fmt::Display for GangRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the policy needs to know about a victim's gang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GangStatus {
    /// The PodGroup's `minMember`.
    pub min_member: u32,
    /// Members that hold a place on a node cluster-wide: bound (running or starting) or reserved
    /// by a held bind. Reservations count because the scheduler's own cache holds those pods as
    /// assumed and may propose them as victims. Terminal (Succeeded, Failed) members do not count.
    pub placed: u32,
}

/// The pod that needs room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preemptor<'a> {
    pub priority: i32,
    pub gang: Option<GangRef<'a>>,
}

impl<'a> Preemptor<'a> {
    pub fn of(pod: &'a Pod) -> Self {
        Preemptor {
            priority: pod.priority,
            gang: GangRef::of(pod),
        }
    }
}

/// One proposed victim, as the extender resolved the scheduler's UID against the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victim<'a> {
    Known(&'a Pod),
    /// A UID the cache does not hold (created or deleted since the last watch event).
    Unknown {
        uid: &'a str,
    },
}

/// Why a node's victim list was refused. Messages name the pods and gangs involved; [`Rejection::label`]
/// gives a short, fixed name for metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the scheduler proposed no victims on this node")]
    NoVictims,
    #[error("victim {uid} is not in Gangplank's cache, so it cannot be checked")]
    UnknownVictim { uid: String },
    #[error(
        "victim {victim} has priority {victim_priority}, not lower than the preemptor's {preemptor_priority}"
    )]
    PriorityNotLower {
        victim: String,
        victim_priority: i32,
        preemptor_priority: i32,
    },
    #[error("victim {victim} belongs to the preemptor's own gang {gang}")]
    OwnGang { victim: String, gang: String },
    #[error(
        "victim {victim} belongs to gang {gang}, which Gangplank does not know, so its minMember cannot be protected"
    )]
    UnknownGang { victim: String, gang: String },
    #[error(
        "evicting {evicted} of the {placed} placed members of gang {gang} would leave {}, below its minMember {min_member}",
        .placed - .evicted
    )]
    BreaksGang {
        gang: String,
        evicted: u32,
        placed: u32,
        min_member: u32,
    },
    #[error(
        "gang {gang} has {evicted} victims on this node but only {placed} placed members are known"
    )]
    CountsDisagree {
        gang: String,
        evicted: u32,
        placed: u32,
    },
}

impl Rejection {
    /// A short fixed name, for metric labels and structured logs.
    pub fn label(&self) -> &'static str {
        match self {
            Rejection::NoVictims => "no_victims",
            Rejection::UnknownVictim { .. } => "unknown_victim",
            Rejection::PriorityNotLower { .. } => "priority_not_lower",
            Rejection::OwnGang { .. } => "own_gang",
            Rejection::UnknownGang { .. } => "unknown_gang",
            Rejection::BreaksGang { .. } => "breaks_gang",
            Rejection::CountsDisagree { .. } => "counts_disagree",
        }
    }
}

/// The outcome over all candidate nodes, in input order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Review<'n> {
    /// Nodes whose victim list stands as the scheduler proposed it.
    pub kept: Vec<&'n str>,
    /// Nodes dropped, each with the first reason found.
    pub dropped: Vec<(&'n str, Rejection)>,
}

/// Reviews every candidate node's victim list; `gangs` gives a victim gang's status, `None` when
/// Gangplank does not know the gang.
pub fn review<'n, 'v: 'n>(
    preemptor: &Preemptor<'_>,
    nodes: impl IntoIterator<Item = (&'n str, &'n [Victim<'v>])>,
    gangs: impl Fn(GangRef<'_>) -> Option<GangStatus>,
) -> Review<'n> {
    let mut out = Review::default();
    for (node, victims) in nodes {
        match review_node(preemptor, victims, &gangs) {
            Ok(()) => out.kept.push(node),
            Err(why) => out.dropped.push((node, why)),
        }
    }
    out
}

/// Whether one node's victim list may go ahead, whole: see the module docs for the rules.
pub fn review_node(
    preemptor: &Preemptor<'_>,
    victims: &[Victim<'_>],
    gangs: impl Fn(GangRef<'_>) -> Option<GangStatus>,
) -> Result<(), Rejection> {
    if victims.is_empty() {
        return Err(Rejection::NoVictims);
    }
    // Victims per gang on this node, in order of first appearance; lists are a handful long.
    let mut per_gang: Vec<(GangRef<'_>, &Pod, u32)> = Vec::new();
    for victim in victims {
        let pod = match victim {
            Victim::Known(pod) => *pod,
            Victim::Unknown { uid } => {
                return Err(Rejection::UnknownVictim {
                    uid: (*uid).to_owned(),
                });
            }
        };
        if pod.priority >= preemptor.priority {
            return Err(Rejection::PriorityNotLower {
                victim: pod_name(pod),
                victim_priority: pod.priority,
                preemptor_priority: preemptor.priority,
            });
        }
        let Some(gang) = GangRef::of(pod) else {
            continue;
        };
        if preemptor.gang == Some(gang) {
            return Err(Rejection::OwnGang {
                victim: pod_name(pod),
                gang: gang.to_string(),
            });
        }
        match per_gang.iter_mut().find(|(g, _, _)| *g == gang) {
            Some((_, _, evicted)) => *evicted += 1,
            None => per_gang.push((gang, pod, 1)),
        }
    }
    for (gang, first_victim, evicted) in per_gang {
        let Some(status) = gangs(gang) else {
            return Err(Rejection::UnknownGang {
                victim: pod_name(first_victim),
                gang: gang.to_string(),
            });
        };
        if evicted > status.placed {
            return Err(Rejection::CountsDisagree {
                gang: gang.to_string(),
                evicted,
                placed: status.placed,
            });
        }
        let remaining = status.placed - evicted;
        if remaining != 0 && remaining < status.min_member {
            return Err(Rejection::BreaksGang {
                gang: gang.to_string(),
                evicted,
                placed: status.placed,
                min_member: status.min_member,
            });
        }
    }
    Ok(())
}

fn pod_name(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace, pod.name)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::model::{PodPhase, Resources};

    fn pod(name: &str, priority: i32, gang: Option<&str>) -> Pod {
        Pod {
            uid: format!("uid-{name}"),
            namespace: "ml".into(),
            name: name.into(),
            node_name: Some("n1".into()),
            phase: PodPhase::Running,
            requests: Resources::new(),
            pod_group: gang.map(str::to_owned),
            queue: None,
            priority,
            ..Default::default()
        }
    }

    fn status(min_member: u32, placed: u32) -> GangStatus {
        GangStatus { min_member, placed }
    }

    fn lookup(
        table: &[(&'static str, GangStatus)],
    ) -> impl Fn(GangRef<'_>) -> Option<GangStatus> + use<> {
        let map: HashMap<(String, String), GangStatus> = table
            .iter()
            .map(|(name, s)| (("ml".to_string(), name.to_string()), *s))
            .collect();
        move |g: GangRef<'_>| {
            map.get(&(g.namespace.to_string(), g.name.to_string()))
                .copied()
        }
    }

    fn known(pods: &[Pod]) -> Vec<Victim<'_>> {
        pods.iter().map(Victim::Known).collect()
    }

    const HIGH: Preemptor<'static> = Preemptor {
        priority: 100,
        gang: None,
    };

    fn why(
        preemptor: &Preemptor<'_>,
        pods: &[Pod],
        gangs: &[(&'static str, GangStatus)],
    ) -> String {
        review_node(preemptor, &known(pods), lookup(gangs))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn lower_priority_pods_outside_gangs_may_be_evicted() {
        let pods = [pod("a", 0, None), pod("b", 50, None)];
        assert_eq!(review_node(&HIGH, &known(&pods), lookup(&[])), Ok(()));
    }

    #[test]
    fn a_victim_of_equal_priority_drops_the_node() {
        let pods = [pod("a", 0, None), pod("b", 100, None)];
        assert_eq!(
            why(&HIGH, &pods, &[]),
            "victim ml/b has priority 100, not lower than the preemptor's 100"
        );
    }

    #[test]
    fn gang_keeping_min_member_after_eviction_may_lose_members() {
        // 6 placed, minMember 4: evicting 2 leaves 4.
        let pods = [pod("w1", 0, Some("train")), pod("w2", 0, Some("train"))];
        let gangs = [("train", status(4, 6))];
        assert_eq!(review_node(&HIGH, &known(&pods), lookup(&gangs)), Ok(()));
    }

    #[test]
    fn gang_falling_below_min_member_drops_the_node() {
        let pods = [pod("w1", 0, Some("train")), pod("w2", 0, Some("train"))];
        let gangs = [("train", status(4, 5))];
        assert_eq!(
            why(&HIGH, &pods, &gangs),
            "evicting 2 of the 5 placed members of gang ml/train would leave 3, below its minMember 4"
        );
    }

    #[test]
    fn whole_gang_may_go_when_every_placed_member_is_a_victim() {
        let pods = [pod("w1", 0, Some("train")), pod("w2", 0, Some("train"))];
        let gangs = [("train", status(2, 2))];
        assert_eq!(review_node(&HIGH, &known(&pods), lookup(&gangs)), Ok(()));
    }

    #[test]
    fn gang_already_below_min_member_is_still_protected_unless_it_all_goes() {
        let pods = [pod("w1", 0, Some("train"))];
        assert!(review_node(&HIGH, &known(&pods), lookup(&[("train", status(4, 3))])).is_err());
        assert!(review_node(&HIGH, &known(&pods), lookup(&[("train", status(4, 1))])).is_ok());
    }

    #[test]
    fn one_bad_victim_drops_the_whole_node_instead_of_trimming_the_list() {
        let pods = [
            pod("plain", 0, None),
            pod("w1", 0, Some("train")),
            pod("other", 0, None),
        ];
        let victims = known(&pods);
        let gangs = lookup(&[("train", status(3, 3))]);
        let nodes = [("n1", &victims[..]), ("n2", &victims[..1])];
        let r = review(&HIGH, nodes, gangs);
        assert_eq!(r.kept, vec!["n2"]);
        assert_eq!(r.dropped.len(), 1);
        assert_eq!(r.dropped[0].0, "n1");
        assert_eq!(r.dropped[0].1.label(), "breaks_gang");
    }

    #[test]
    fn members_of_the_preemptors_own_gang_are_never_victims() {
        let preemptor_pod = pod("w9", 100, Some("train"));
        let preemptor = Preemptor::of(&preemptor_pod);
        let pods = [pod("w1", 0, Some("train"))];
        assert_eq!(
            why(&preemptor, &pods, &[("train", status(1, 8))]),
            "victim ml/w1 belongs to the preemptor's own gang ml/train"
        );
    }

    #[test]
    fn same_group_name_in_another_namespace_is_another_gang() {
        let mut preemptor_pod = pod("w9", 100, Some("train"));
        preemptor_pod.namespace = "other".into();
        let preemptor = Preemptor::of(&preemptor_pod);
        let pods = [pod("w1", 0, Some("train"))];
        let gangs = [("train", status(1, 8))];
        assert_eq!(
            review_node(&preemptor, &known(&pods), lookup(&gangs)),
            Ok(())
        );
    }

    #[test]
    fn unknown_gangs_and_pods_are_protected() {
        let pods = [pod("w1", 0, Some("mystery"))];
        assert_eq!(
            why(&HIGH, &pods, &[]),
            "victim ml/w1 belongs to gang ml/mystery, which Gangplank does not know, \
             so its minMember cannot be protected"
        );
        let victims = [Victim::Unknown { uid: "u-42" }];
        assert_eq!(
            review_node(&HIGH, &victims, lookup(&[])),
            Err(Rejection::UnknownVictim { uid: "u-42".into() })
        );
    }

    #[test]
    fn more_victims_than_placed_members_is_refused_as_inconsistent() {
        let pods = [pod("w1", 0, Some("train")), pod("w2", 0, Some("train"))];
        assert_eq!(
            why(&HIGH, &pods, &[("train", status(1, 1))]),
            "gang ml/train has 2 victims on this node but only 1 placed members are known"
        );
    }

    #[test]
    fn empty_victim_list_is_refused() {
        assert_eq!(
            review_node(&HIGH, &[], lookup(&[])),
            Err(Rejection::NoVictims)
        );
    }

    #[test]
    fn each_gang_on_a_node_is_checked_separately() {
        let pods = [
            pod("a1", 0, Some("a")),
            pod("b1", 0, Some("b")),
            pod("b2", 0, Some("b")),
        ];
        let ok = [("a", status(2, 3)), ("b", status(1, 2))];
        assert_eq!(review_node(&HIGH, &known(&pods), lookup(&ok)), Ok(()));
        let b_breaks = [("a", status(2, 3)), ("b", status(2, 3))];
        assert_eq!(
            review_node(&HIGH, &known(&pods), lookup(&b_breaks))
                .unwrap_err()
                .label(),
            "breaks_gang"
        );
    }

    #[test]
    fn review_keeps_input_order_and_accounts_for_every_node() {
        let low = [pod("a", 0, None)];
        let high = [pod("b", 200, None)];
        let (low, high) = (known(&low), known(&high));
        let nodes = [("n1", &low[..]), ("n2", &high[..]), ("n3", &low[..])];
        let r = review(&HIGH, nodes, lookup(&[]));
        assert_eq!(r.kept, vec!["n1", "n3"]);
        assert_eq!(r.dropped[0].0, "n2");
        assert_eq!(r.dropped[0].1.label(), "priority_not_lower");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        static GANGS: [&str; 3] = ["g0", "g1", "g2"];

        /// (priority, gang index or none, known?) for one victim.
        type VictimSpec = (i32, Option<usize>, bool);

        fn victim_spec() -> impl Strategy<Value = VictimSpec> {
            (
                -2i32..4,
                prop::option::of(0usize..3),
                prop::bool::weighted(0.95),
            )
        }

        /// Preemptor priority, the preemptor's gang index, (minMember, placed) per gang, and each
        /// node's victims.
        type Scenario = (i32, Option<usize>, Vec<(u32, u32)>, Vec<Vec<VictimSpec>>);

        fn scenario() -> impl Strategy<Value = Scenario> {
            (
                0i32..3,
                prop::option::of(0usize..3),
                prop::collection::vec((1u32..5, 0u32..8), 3),
                prop::collection::vec(prop::collection::vec(victim_spec(), 0..6), 1..6),
            )
        }

        proptest! {
            #[test]
            fn kept_nodes_evict_only_lower_priority_pods_and_never_leave_a_partial_gang(
                (priority, own_gang, gang_table, nodes) in scenario(),
                unknown_gang in prop::option::of(0usize..3),
            ) {
                let pods: Vec<Vec<Pod>> = nodes
                    .iter()
                    .enumerate()
                    .map(|(n, specs)| specs.iter().enumerate().map(|(i, (p, g, _))| {
                        pod(&format!("n{n}-v{i}"), *p, g.map(|g| GANGS[g]))
                    }).collect())
                    .collect();
                let victims: Vec<Vec<Victim<'_>>> = pods
                    .iter()
                    .zip(&nodes)
                    .map(|(ps, specs)| ps.iter().zip(specs).map(|(p, (_, _, is_known))| {
                        if *is_known { Victim::Known(p) } else { Victim::Unknown { uid: &p.uid } }
                    }).collect())
                    .collect();
                let names: Vec<String> = (0..nodes.len()).map(|n| format!("n{n}")).collect();
                let status_of = |g: usize| (Some(g) != unknown_gang).then(|| status(gang_table[g].0, gang_table[g].1));
                let gangs = |r: GangRef<'_>| GANGS.iter().position(|g| *g == r.name).and_then(status_of);
                let preemptor_pod = pod("preemptor", priority, own_gang.map(|g| GANGS[g]));
                let preemptor = Preemptor::of(&preemptor_pod);

                let input = names.iter().map(String::as_str).zip(victims.iter().map(Vec::as_slice));
                let r = review(&preemptor, input, gangs);

                prop_assert_eq!(r.kept.len() + r.dropped.len(), nodes.len());
                for kept in &r.kept {
                    let i = names.iter().position(|n| n == kept).unwrap();
                    prop_assert!(!victims[i].is_empty());
                    for (g, gang_name) in GANGS.iter().enumerate() {
                        let mut evicted = 0;
                        for v in &victims[i] {
                            let Victim::Known(p) = v else {
                                return Err(TestCaseError::fail("kept a node with an unknown victim"));
                            };
                            prop_assert!(p.priority < priority, "kept a victim of priority {} >= {}", p.priority, priority);
                            if p.pod_group.as_deref() == Some(*gang_name) {
                                prop_assert_ne!(own_gang, Some(g));
                                evicted += 1;
                            }
                        }
                        if evicted > 0 {
                            let s = status_of(g).expect("kept a node evicting from an unknown gang");
                            prop_assert!(evicted <= s.placed);
                            let remaining = s.placed - evicted;
                            prop_assert!(remaining == 0 || remaining >= s.min_member,
                                "gang {} left with {} < minMember {}", gang_name, remaining, s.min_member);
                        }
                    }
                }
            }

            #[test]
            fn lower_priority_victims_outside_gangs_are_always_accepted(
                priorities in prop::collection::vec(-5i32..5, 1..8),
            ) {
                let pods: Vec<Pod> = priorities.iter().enumerate().map(|(i, p)| pod(&format!("v{i}"), *p, None)).collect();
                let preemptor = Preemptor { priority: 5, gang: None };
                prop_assert_eq!(review_node(&preemptor, &known(&pods), lookup(&[])), Ok(()));
            }
        }
    }
}
