//! Whether a whole gang fits one cluster's nodes now: the question a dispatcher asks of each
//! cluster it may send a gang to (Gangplank as MultiKueue's dispatcher, docs/multi-cluster.md).
//!
//! A gang is a few sets of identical members (a Kueue Workload's PodSets), each set with the
//! nodes it may run on ([`Constraints`]). The sets are placed biggest member first, each set by
//! [`first_fit`] over its feasible nodes' free room, which shrinks as sets are placed: the same
//! placement model as the admission pass, over the free room the cluster's bound pods leave.
//! The [`Placement`] found can be held on the cluster's model ([`Placement::hold`]), so that
//! gangs asked about after it do not count on the same room.

use std::cmp::Reverse;
use std::fmt;

use super::constraints::{Constraints, feasible};
use super::fit::{first_fit, size};
use crate::model::resources::write_shortfall;
use crate::model::{Pod, PodPhase, Resources, State};

/// A set of identical members of a gang: what each requests on its node, how many, and where
/// they may run.
pub struct MemberSet<'a> {
    pub requests: Resources,
    pub count: usize,
    pub constraints: &'a Constraints,
}

/// Why a gang does not fit a cluster now.
#[derive(Debug, Clone, PartialEq)]
pub enum Misfit {
    /// The gang needs more than the schedulable nodes have free in all.
    Room { needed: Resources, free: Resources },
    /// In all there is room, but no node left that a member may run on holds it.
    NoNode { member: Resources },
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misfit::Room { needed, free } => write_shortfall(f, needed, free),
            Misfit::NoNode { member } => {
                write!(f, "no node has room left for a member requesting {member}")
            }
        }
    }
}

/// Where a whole gang's members would run: each one's node and what it requests there.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub members: Vec<(String, Resources)>,
}

impl Placement {
    /// Counts the placed members as running pods of `owner` (a name unique to the gang) in
    /// `state`, taking their room from what later questions find free.
    pub fn hold(&self, state: &mut State, owner: &str) {
        for (n, (node, requests)) in self.members.iter().enumerate() {
            let name = format!("{owner}/{n}");
            state.apply_pod(Pod {
                uid: name.clone(),
                name,
                node_name: Some(node.clone()),
                phase: PodPhase::Running,
                requests: requests.clone(),
                ..Pod::default()
            });
        }
    }
}

/// Where every member of `sets` fits the free room of `state`'s schedulable nodes now, or why
/// the whole gang does not.
pub fn place_whole_gang(state: &State, sets: &[MemberSet]) -> Result<Placement, Box<Misfit>> {
    let nodes = state.schedulable_nodes();
    let mut free: Vec<Resources> = nodes.iter().map(|n| state.free_on(n)).collect();
    let mut needed = Resources::new();
    for set in sets {
        for _ in 0..set.count {
            needed.add(&set.requests);
        }
    }
    let mut total = Resources::new();
    for room in &free {
        total.add(&room.positive());
    }
    if !needed.fits_in(&total) {
        return Err(Box::new(Misfit::Room {
            needed,
            free: total,
        }));
    }
    let mut order: Vec<&MemberSet> = sets.iter().collect();
    order.sort_by_key(|set| Reverse(size(&set.requests)));
    let mut members = Vec::new();
    for set in order {
        let on: Vec<usize> = (0..nodes.len())
            .filter(|&i| feasible(nodes[i], set.constraints).is_ok())
            .collect();
        let room: Vec<Resources> = on.iter().map(|&i| free[i].clone()).collect();
        let placed = first_fit(&room, std::iter::repeat_n(&set.requests, set.count)).map_err(
            |(_, member)| Misfit::NoNode {
                member: member.clone(),
            },
        )?;
        for (at, member) in placed {
            free[on[at]].sub(member);
            members.push((nodes[on[at]].name.clone(), member.clone()));
        }
    }
    Ok(Placement { members })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::Node;

    fn cpus(n: i64) -> Resources {
        Resources::from([("cpu", n * 1_000)])
    }

    fn node(name: &str, cpu: i64, zone: &str) -> Node {
        Node {
            name: name.into(),
            allocatable: cpus(cpu),
            labels: BTreeMap::from([("zone".to_owned(), zone.to_owned())]),
            ..Node::default()
        }
    }

    fn bound(name: &str, node: &str, cpu: i64) -> Pod {
        Pod {
            uid: name.into(),
            namespace: "ns".into(),
            name: name.into(),
            node_name: Some(node.into()),
            phase: PodPhase::Running,
            requests: cpus(cpu),
            ..Pod::default()
        }
    }

    /// Two nodes of 32 CPUs, one with 24 of them taken.
    fn cluster() -> State {
        let mut state = State::default();
        state.apply_node(node("a", 32, "east"));
        state.apply_node(node("b", 32, "west"));
        state.apply_pod(bound("filler", "a", 24));
        state
    }

    #[test]
    fn a_gang_fits_when_its_members_fit_the_room_the_bound_pods_leave() {
        let any = Constraints::default();
        let two = [MemberSet {
            requests: cpus(16),
            count: 2,
            constraints: &any,
        }];
        assert_eq!(
            place_whole_gang(&cluster(), &two).map(|p| p.members.len()),
            Ok(2)
        );
    }

    #[test]
    fn a_gang_of_more_than_is_free_in_all_says_what_it_needs_and_what_is_free() {
        let any = Constraints::default();
        let four = [MemberSet {
            requests: cpus(16),
            count: 4,
            constraints: &any,
        }];
        let misfit = place_whole_gang(&cluster(), &four).unwrap_err();
        assert_eq!(misfit.to_string(), "cpu 64 needed, 40 free");
    }

    #[test]
    fn room_in_pieces_too_small_for_a_member_is_no_room() {
        let any = Constraints::default();
        // 40 CPUs free in all, but as 8 and 32: the second member of 20 finds no node.
        let two = [MemberSet {
            requests: cpus(20),
            count: 2,
            constraints: &any,
        }];
        let misfit = place_whole_gang(&cluster(), &two).unwrap_err();
        assert_eq!(
            misfit.to_string(),
            "no node has room left for a member requesting cpu: 20"
        );
    }

    #[test]
    fn each_set_keeps_to_the_nodes_it_may_run_on_and_takes_room_from_the_next() {
        let east = Constraints {
            node_selector: vec![("zone".to_owned(), "east".to_owned())],
            ..Constraints::default()
        };
        let any = Constraints::default();
        let east_only = MemberSet {
            requests: cpus(8),
            count: 1,
            constraints: &east,
        };
        assert!(place_whole_gang(&cluster(), &[east_only]).is_ok());
        let two_in_the_east = MemberSet {
            requests: cpus(8),
            count: 2,
            constraints: &east,
        };
        assert!(place_whole_gang(&cluster(), &[two_in_the_east]).is_err());
        // The bigger set goes first and takes node b whole; the smaller then fits node a.
        let sets = [
            MemberSet {
                requests: cpus(8),
                count: 1,
                constraints: &any,
            },
            MemberSet {
                requests: cpus(32),
                count: 1,
                constraints: &any,
            },
        ];
        let placement = place_whole_gang(&cluster(), &sets).unwrap();
        assert_eq!(
            placement.members,
            [("b".to_owned(), cpus(32)), ("a".to_owned(), cpus(8))]
        );
    }

    #[test]
    fn a_gang_held_where_it_was_placed_leaves_the_next_only_what_remains() {
        let any = Constraints::default();
        let two = [MemberSet {
            requests: cpus(16),
            count: 2,
            constraints: &any,
        }];
        let mut state = cluster();
        let placement = place_whole_gang(&state, &two).unwrap();
        placement.hold(&mut state, "ml/first");
        let misfit = place_whole_gang(&state, &two).unwrap_err();
        assert_eq!(misfit.to_string(), "cpu 32 needed, 8 free");
        let one = [MemberSet {
            requests: cpus(8),
            count: 1,
            constraints: &any,
        }];
        assert!(place_whole_gang(&state, &one).is_ok());
    }
}
