//! Phase 2 of the pass: each queue's capacity, demand and deserved share of the cluster
//! ([`crate::policy::fair_share`]), and each candidate's queue slot.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::collect::Book;
use super::decision::QueueReport;
use crate::model::{Queue, Resources, State};
use crate::policy::fair_share::{self, QueueDemand};

/// Capacity, demand and deserved share per queue the cache knows.
pub(super) struct Shares {
    /// Allocatable of the nodes that take new pods.
    pub(super) capacity: Resources,
    pub(super) queues: BTreeMap<String, QueueReport>,
    /// What each queue's own groups deserve (the admission order's yardstick).
    pub(super) own: BTreeMap<String, Resources>,
}

/// Also sets each candidate's queue slot.
pub(super) fn share(state: &State, book: &mut Book) -> Shares {
    let capacity = state.schedulable_capacity();
    let mut queues: BTreeMap<String, QueueReport> = BTreeMap::new();
    for name in state.queues().keys() {
        let allocated = book
            .allocated
            .get(name.as_str())
            .cloned()
            .unwrap_or_default();
        queues.insert(
            name.clone(),
            QueueReport {
                demand: allocated.clone(),
                allocated,
                ..QueueReport::default()
            },
        );
    }
    // Slots instead of names from here on: the pass looks nothing up by name per group.
    let slot_of: FxHashMap<&str, usize> = queues
        .keys()
        .enumerate()
        .map(|(slot, name)| (name.as_str(), slot))
        .collect();
    let mut waiting = vec![Resources::new(); queues.len()];
    for c in &mut book.candidates {
        if let Some(&slot) = slot_of.get(c.queue) {
            c.slot = slot;
            waiting[slot].add(&c.requests);
        }
    }
    for (report, waiting) in queues.values_mut().zip(&waiting) {
        report.demand.add(waiting);
    }
    let demands: Vec<QueueDemand> = state
        .queues()
        .values()
        .map(|q| demand_of(q, queues[&q.name].demand.clone()))
        .collect();
    // Names are unique in the cache, the only error `deserved_shares` has: unreachable, and
    // an empty result would only leave every queue deserving nothing.
    let shares = fair_share::deserved_shares(&capacity, &demands).unwrap_or_default();
    let mut own = BTreeMap::new();
    for (name, share) in shares {
        if let Some(report) = queues.get_mut(&name) {
            report.deserved = share.deserved;
            report.parent_ignored = share.parent_ignored;
        }
        own.insert(name, share.own);
    }
    Shares {
        capacity,
        queues,
        own,
    }
}

fn demand_of(queue: &Queue, demand: Resources) -> QueueDemand {
    QueueDemand {
        name: queue.name.clone(),
        parent: queue.parent.clone(),
        weight: queue.weight,
        guarantee: queue.guarantee.clone(),
        capability: queue.capability.clone(),
        demand,
    }
}
