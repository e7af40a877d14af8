//! Admission on arrival: while nothing waits, a new gang is admitted when its first member is
//! created, so its members are created without the admission gate and nobody has to remove
//! it later (one pod update and its watch events saved per member).
//!
//! The pass leaves a [`Door`] when every group it left waiting lacks only members (nothing
//! waits for room, quota, its queue or its share, and no group heads the line): the room it
//! left free, node by node, less every queue's unused guarantee. The mutating webhook asks the
//! ledger ([`crate::model::State::admit_on_arrival`]) for each new pod of a group; the first
//! member of a gang whose `minMember` copies of it fit in the door is admitted, and the door
//! shrinks by them until the next pass makes a new one. Recent arrivals are placed again in
//! each new door (the pass may not see their members yet), so two passes never hand out the
//! same room. A node that stops taking pods, loses allocatable or leaves after the pass shuts
//! the door until the next pass, so no gang is let in on room that is gone. Groups with a
//! `topologyKey` (their domain is chosen at release), elastic groups and groups of a queue
//! with a capability (on it or an ancestor) always take the gate.
//!
//! What an arrival costs if the estimate is wrong: members are estimated as copies of the first
//! one, so only `minMember` members, none larger than the first, are created ungated
//! ([`Arrival::let_in_another`]); a larger or an extra member takes the gate and waits for
//! the pass like any pod, and the room the door counted is all the gang can take past it.
//! Arrivals carry no placing marker by default, so the extender's filter does not see them:
//! this bound, not filter, is what keeps them inside the room the door counted.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::model::Resources;
use crate::policy::fit::first_fit;

/// How long an arrival's room is kept out of each new door: by then its members exist and
/// the pass counts them itself.
pub const ARRIVAL_ROOM_KEPT: Duration = Duration::from_secs(30);

/// Room a pass left for admissions on arrival.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Door {
    /// Free room per schedulable node.
    nodes: Vec<Resources>,
    /// What any queue may still take.
    total: Resources,
    /// Queues a group may be admitted into on arrival.
    queues: BTreeSet<String>,
    /// [`crate::model::Nodes::shrunk`] of the state the pass saw: once it has moved, some of
    /// this room may be gone, and the door lets nobody in until the next pass.
    nodes_shrunk: u64,
}

/// A gang admitted on arrival.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    pub queue: String,
    /// What it was admitted for: one entry per member.
    pub need: Vec<Resources>,
    pub at: Instant,
    /// Members created ungated so far, the first among them.
    pub let_in: usize,
}

impl Arrival {
    /// The gang's first member admitted it, for `need`, at `at`.
    pub fn new(queue: String, need: Vec<Resources>, at: Instant) -> Arrival {
        Arrival {
            queue,
            need,
            at,
            let_in: 1,
        }
    }

    /// Lets another member in ungated when the gang's room has a place left for it: no more
    /// members than it was admitted for, none larger than the first. Any other goes through
    /// the gate and the admission pass, which counts what it really asks.
    pub fn let_in_another(&mut self, requests: &Resources) -> bool {
        let Some(place) = self.need.get(self.let_in) else {
            return false;
        };
        if !requests.fits_in(place) {
            return false;
        }
        self.let_in += 1;
        true
    }
}

impl Door {
    pub fn new(
        nodes: Vec<Resources>,
        total: Resources,
        queues: BTreeSet<String>,
        nodes_shrunk: u64,
    ) -> Door {
        Door {
            nodes,
            total,
            queues,
            nodes_shrunk,
        }
    }

    /// Whether the room was counted on the nodes as they are now (`nodes_shrunk` is
    /// [`crate::model::Nodes::shrunk`] now).
    pub fn counted_on_current_nodes(&self, nodes_shrunk: u64) -> bool {
        self.nodes_shrunk == nodes_shrunk
    }

    /// Takes room for `need` in `queue`, if the door lets it in.
    pub fn admit(&mut self, queue: &str, need: &[Resources]) -> bool {
        if !self.queues.contains(queue) || need.is_empty() {
            return false;
        }
        let mut sum = Resources::new();
        need.iter().for_each(|r| sum.add(r));
        if !sum.fits_in(&self.total) {
            return false;
        }
        let Ok(placed) = first_fit(&self.nodes, need) else {
            return false;
        };
        for (at, pod) in placed {
            self.nodes[at].sub(pod);
        }
        self.total.sub(&sum);
        true
    }

    /// This door with the room of `arrivals` (admitted since `now - ARRIVAL_ROOM_KEPT`) taken
    /// out again; `None` when one of them no longer fits.
    pub fn after<'a>(
        mut self,
        arrivals: impl IntoIterator<Item = &'a Arrival>,
        now: Instant,
    ) -> Option<Door> {
        for arrival in arrivals {
            if now.saturating_duration_since(arrival.at) >= ARRIVAL_ROOM_KEPT {
                continue;
            }
            let everyone = self.queues.insert(arrival.queue.clone());
            let fits = self.admit(&arrival.queue, &arrival.need);
            if everyone {
                self.queues.remove(&arrival.queue);
            }
            if !fits {
                return None;
            }
        }
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(millis: i64) -> Resources {
        Resources::from([("cpu", millis)])
    }

    fn door(nodes: &[i64], queues: &[&str]) -> Door {
        let nodes: Vec<Resources> = nodes.iter().map(|&m| cpu(m)).collect();
        let mut total = Resources::new();
        nodes.iter().for_each(|n| total.add(n));
        Door::new(
            nodes,
            total,
            queues.iter().map(|q| q.to_string()).collect(),
            0,
        )
    }

    #[test]
    fn a_gang_that_fits_node_by_node_is_let_in_and_the_door_shrinks_by_it() {
        let mut door = door(&[4_000, 4_000], &["a"]);
        assert!(door.admit("a", &[cpu(3_000), cpu(3_000)]));
        assert!(
            !door.admit("a", &[cpu(2_000)]),
            "1 CPU is left on each node"
        );
        assert!(door.admit("a", &[cpu(1_000), cpu(1_000)]));
        assert!(!door.admit("a", &[cpu(1)]));
    }

    #[test]
    fn a_gang_whose_sum_fits_but_whose_members_do_not_is_refused() {
        let mut door = door(&[2_000, 2_000], &["a"]);
        assert!(!door.admit("a", &[cpu(3_000)]));
        assert!(door.admit("a", &[cpu(2_000), cpu(2_000)]));
    }

    #[test]
    fn only_the_queues_the_pass_named_are_let_in() {
        let mut door = door(&[4_000], &["a"]);
        assert!(!door.admit("capped", &[cpu(1)]));
        assert!(!door.admit("a", &[]), "nothing to admit");
    }

    #[test]
    fn recent_arrivals_take_their_room_again_in_a_new_door_and_old_ones_do_not() {
        let now = Instant::now();
        let recent = Arrival::new("capped".into(), vec![cpu(3_000)], now);
        let old = Arrival::new("a".into(), vec![cpu(4_000)], now - ARRIVAL_ROOM_KEPT);
        let mut after = door(&[4_000], &["a"])
            .after([&recent, &old], now)
            .expect("the recent arrival fits");
        assert!(
            !after.admit("a", &[cpu(2_000)]),
            "3 of 4 CPU are the arrival's"
        );
        assert!(after.admit("a", &[cpu(1_000)]));
        assert!(
            !after.admit("capped", &[cpu(1)]),
            "the arrival's queue is not let in for it"
        );

        let too_big = Arrival {
            need: vec![cpu(5_000)],
            ..recent
        };
        assert_eq!(door(&[4_000], &["a"]).after([&too_big], now), None);
    }
}
