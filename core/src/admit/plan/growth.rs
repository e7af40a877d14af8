//! Growth in the pass ([`crate::model::growth`]): on a cluster that can grow, a gang that passed
//! its queue's capability and share but finds no room is not given a reservation of today's
//! nodes; it asks for its room with stand-in pods instead ([`GrowthAsk`]), at most
//! [`Growth::at_once`](crate::model::Growth::at_once) gangs at a time in the pass's order, and
//! holds its queue's quota meanwhile. The room its bound stand-ins hold is lent to it when it is
//! tried, so it is admitted once they are placed; a gang whose stand-ins stay unplaced past the
//! timeout gives its growth up, holds nothing and blocks no one.

use rustc_hash::FxHashSet;

use super::candidate::Candidate;
use super::decision::{GrowthAsk, PodRef};
use super::pass::Pass;
use crate::admit::why::Why;
use crate::model::growth::{placed_stand_ins, stand_in_name};
use crate::model::{GroupKey, Resources};

impl<'s> Pass<'s> {
    /// Lends candidate `c` the room its bound stand-ins hold (see the module docs); returns
    /// what it lent, to take back with [`Pass::take_back`] if `c` is not admitted.
    pub(super) fn lend_stand_ins(&mut self, c: &Candidate<'s>) -> Vec<(&'s str, &'s Resources)> {
        let Some(stand_ins) = c.group.and_then(|g| self.state.stand_ins().get(g)) else {
            return Vec::new();
        };
        let lent: Vec<(&str, &Resources)> = placed_stand_ins(stand_ins.values()).collect();
        self.room.lend(&lent, true);
        lent
    }

    pub(super) fn take_back(&mut self, lent: &[(&'s str, &'s Resources)]) {
        self.room.lend(lent, false);
    }

    /// Why candidate `i` (of queue `slot`), which passed every check but room, waits for the
    /// cluster to grow, asking for it if it may; `None` when growth is not for it (the cluster
    /// cannot grow, or it is no gang short of quorum, or it has a `topologyKey`). `room` says
    /// why it does not fit now.
    pub(super) fn growth_wait(
        &mut self,
        c: &Candidate<'s>,
        slot: usize,
        room: impl FnOnce() -> Why,
    ) -> Option<Why> {
        let growth = self.state.growth()?;
        let group = c.group?;
        let model = c.gated.iter().find(|m| !m.pod.is_placeholder())?;
        if c.missing == 0 || c.topology.as_ref().is_some_and(|w| w.levels.required) {
            return None;
        }
        let room = Box::new(room());
        if let Some(failed) = self.state.ledger().growth_failed().get(group)
            && self.now.saturating_sub(failed.at) < growth.timeout_secs
        {
            return Some(Why::GrowthFailed {
                ago: self.now.saturating_sub(failed.at),
                timeout: growth.timeout_secs,
                message: failed.message.clone(),
                room,
            });
        }
        let stand_ins = self.state.stand_ins().get(group);
        let asked = self.state.ledger().growth_asked().get(group);
        // Since it was first asked for (stand-ins made or not), or since its oldest stand-in
        // (the ledger forgets at a restart; the stand-ins stay).
        let since = stand_ins
            .into_iter()
            .flat_map(|s| s.values().map(|p| p.created))
            .chain(asked.map(|a| a.since))
            .min();
        let waited = since.map_or(0, |since| self.now.saturating_sub(since));
        let placed = stand_ins.map_or(0, |s| s.values().filter(|p| p.node_name.is_some()).count());
        // Placed stand-ins lend the gang their room, so a gang still here after the timeout
        // lacks some (or they were placed where it cannot use them, or none could be made):
        // give up either way.
        if since.is_some() && waited >= growth.timeout_secs {
            self.growing.timed_out.push(group.clone());
            return Some(Why::GrowthFailed {
                ago: 0,
                timeout: growth.timeout_secs,
                message: None,
                room,
            });
        }
        if since.is_none() && self.growing.before + self.growing.asks.len() >= growth.at_once.max(1)
        {
            let behind = self
                .growing
                .asks
                .first()
                .map(|a| a.group.clone())
                .or_else(|| self.state.stand_ins().keys().next().cloned());
            return Some(Why::GrowthQueued { behind, room });
        }
        let members: Vec<Resources> = c.need().cloned().collect();
        let missing = (0..members.len())
            .filter(|&n| {
                let name = stand_in_name(group, n);
                stand_ins.is_none_or(|s| s.values().all(|p| p.name != name))
            })
            .collect();
        self.growing.kept.insert(group.clone());
        self.growing.asks.push(GrowthAsk {
            group: group.clone(),
            queue: self.names[slot].clone(),
            model: PodRef::of(&model.pod),
            members,
            missing,
        });
        self.hold_quota(slot, &c.requests);
        Some(Why::Growing {
            asked: c.missing,
            requests: c.needed(),
            placed,
            waited,
            timeout: growth.timeout_secs,
            refused: asked.and_then(|a| a.refused.clone()),
            room,
        })
    }

    /// The stand-ins no gang needs any more: to delete. A gang's stand-ins are kept while it
    /// grows, and, once it is admitted, the placed ones until every live member of it is bound,
    /// if they are of a lower priority than its members: until then they hold its room against every other
    /// gang, and each member's scheduling preempts the one on its node. Of the same priority or
    /// higher they could not be preempted, and go as the gang is admitted. Those of a gang
    /// gone, fitting without them, or whose growth was given up go too.
    pub(super) fn unwanted_stand_ins(&self, admitted: &FxHashSet<&GroupKey>) -> Vec<PodRef> {
        self.state
            .stand_ins()
            .iter()
            .filter(|(group, _)| !self.growing.kept.contains(*group))
            .flat_map(|(group, stand_ins)| {
                let holding = self.being_placed(group, admitted.contains(group))
                    && stand_ins
                        .values()
                        .all(|p| self.below_members(group, p.priority));
                // Unplaced, a stand-in of an admitted gang holds nothing and would only make
                // the autoscaler add a node nobody needs.
                stand_ins
                    .values()
                    .filter(move |p| !holding || p.node_name.is_none())
            })
            .filter(|p| !p.deleting)
            .map(|p| PodRef::of(p))
            .collect()
    }

    /// Whether `group` was admitted (`now`: by this pass) and some live member of it is not
    /// bound yet.
    fn being_placed(&self, group: &GroupKey, now: bool) -> bool {
        let members: Vec<_> = self
            .state
            .members(group)
            .filter(|p| !p.phase.is_terminal())
            .collect();
        let released =
            now || (!members.is_empty() && members.iter().all(|p| !p.awaits_admission()));
        released && members.iter().any(|p| p.node_name.is_none())
    }

    /// Whether `priority` is below that of every live member of `group`.
    fn below_members(&self, group: &GroupKey, priority: i32) -> bool {
        self.state
            .members(group)
            .filter(|p| !p.phase.is_terminal())
            .all(|p| priority < p.priority)
    }

    /// For a gang admitted into the room of its stand-ins, which are kept until it is bound
    /// (see [`Pass::unwanted_stand_ins`]): the claim its members are placed in, one slot per
    /// member it needed on the node of the stand-in made for that member; `None` unless each
    /// of those stand-ins is placed and kept.
    pub(super) fn stand_in_claim(&self, c: &Candidate<'s>) -> Option<Vec<(String, Resources)>> {
        let group = c.group?;
        let stand_ins = self.state.stand_ins().get(group)?;
        if !stand_ins
            .values()
            .all(|p| self.below_members(group, p.priority))
        {
            return None;
        }
        c.need()
            .enumerate()
            .map(|(n, requests)| {
                let name = stand_in_name(group, n);
                let node = stand_ins
                    .values()
                    .find(|p| p.name == name && !p.deleting && !p.phase.is_terminal())?
                    .node_name
                    .clone()?;
                Some((node, requests.clone()))
            })
            .collect()
    }
}
