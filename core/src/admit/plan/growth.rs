//! Growth in the pass ([`crate::model::growth`]): on a cluster that can grow, a gang that passed
//! its queue's capability and share but finds no room is not given a reservation of today's
//! nodes; it asks for its room with stand-in pods instead ([`GrowthAsk`]), at most
//! [`Growth::at_once`](crate::model::Growth::at_once) gangs at a time in the pass's order, and
//! holds its queue's quota meanwhile. The room its bound stand-ins hold is lent to it when it is
//! tried, so it is admitted once they are placed; a gang whose stand-ins stay unplaced past the
//! timeout gives its growth up, holds nothing and blocks no one.

use rustc_hash::FxHashSet;

use super::collect::Candidate;
use super::decision::{GrowthAsk, PodRef};
use super::pass::Pass;
use crate::admit::why::Why;
use crate::model::growth::stand_in_name;
use crate::model::{GroupKey, Resources};

/// What the pass knows of growth: the asks so far, and the groups that grow.
#[derive(Debug, Default)]
pub(super) struct Growing {
    /// Groups with stand-ins when the pass began: they count against `at_once` wherever they
    /// come in the order.
    pub(super) before: usize,
    pub(super) asks: Vec<GrowthAsk>,
    /// The groups of `asks`: their stand-ins are kept.
    pub(super) kept: FxHashSet<GroupKey>,
    /// Gangs whose stand-ins stayed unplaced past the timeout in this pass.
    pub(super) timed_out: Vec<GroupKey>,
}

impl<'s> Pass<'s> {
    /// Lends candidate `c` the room its bound stand-ins hold (see the module docs); returns
    /// what it lent, to take back with [`Pass::take_back`] if `c` is not admitted.
    pub(super) fn lend_stand_ins(&mut self, c: &Candidate<'s>) -> Vec<(&'s str, &'s Resources)> {
        let Some(stand_ins) = c.group.and_then(|g| self.state.stand_ins().get(g)) else {
            return Vec::new();
        };
        let lent: Vec<(&str, &Resources)> = stand_ins
            .values()
            .filter(|p| !p.phase.is_terminal())
            .filter_map(|p| Some((p.node_name.as_deref()?, &p.requests)))
            .collect();
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
        if c.missing == 0 || c.topology.is_some() {
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
        let since = stand_ins
            .and_then(|s| s.values().map(|p| p.created).min())
            .unwrap_or(self.now);
        let waited = self.now.saturating_sub(since);
        let placed = stand_ins.map_or(0, |s| s.values().filter(|p| p.node_name.is_some()).count());
        // Placed stand-ins lend the gang their room, so a gang still here after the timeout
        // lacks some (or they were placed where it cannot use them): give up either way.
        if stand_ins.is_some() && waited >= growth.timeout_secs {
            self.growing.timed_out.push(group.clone());
            return Some(Why::GrowthFailed {
                ago: 0,
                timeout: growth.timeout_secs,
                message: None,
                room,
            });
        }
        if stand_ins.is_none()
            && self.growing.before + self.growing.asks.len() >= growth.at_once.max(1)
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
            room,
        })
    }

    /// The stand-ins no gang of this pass asked for (its gang admitted, gone, fitting without
    /// them, or its growth given up): to delete.
    pub(super) fn unwanted_stand_ins(&self) -> Vec<PodRef> {
        self.state
            .stand_ins()
            .iter()
            .filter(|(group, _)| !self.growing.kept.contains(*group))
            .flat_map(|(_, pods)| pods.values())
            .filter(|p| !p.deleting)
            .map(|p| PodRef::of(p))
            .collect()
    }
}
