//! The order in which the [`Pass`] tries the waiting groups: those that cannot be considered
//! (blocked, queue missing or closed) wait at once; groups past their `maxWaitSeconds` go
//! first, the most overdue first; then weighted DRF across queues
//! ([`crate::policy::queue_order`]), each queue starting from what it holds after the overdue;
//! last, the gated elastic members of gangs that have quorum, in weighted DRF again from what
//! each queue holds then: they are the lowest priority in the cluster.

use super::candidate::{Candidate, Key, seconds};
use super::collect::Book;
use super::pass::Pass;
use super::share::Shares;
use crate::admit::why::Why;
use crate::policy::queue_order::{AdmissionPass, Options, QueueSnapshot, WaitingGroup};

/// The candidates left waiting.
pub(super) struct Waits {
    /// Why each candidate left waiting waits, by candidate index.
    pub(super) whys: Vec<Option<Why>>,
    /// Those candidates, in the order the pass left them.
    pub(super) waited: Vec<usize>,
}

/// Tries every candidate of `book` in admission order; `pass` records those admitted.
pub(super) fn order<'s>(pass: &mut Pass<'s>, book: &Book<'s>, shares: &Shares) -> Waits {
    let candidates = &book.candidates;
    // Why each candidate left waiting waits (by candidate), and those in the pass's order.
    let mut waits = Waits {
        whys: vec![None; candidates.len()],
        waited: Vec::with_capacity(candidates.len()),
    };
    let mut wait = |i: usize, why: Why| {
        waits.whys[i] = Some(why);
        waits.waited.push(i);
    };
    // Per candidate: whether the pass considers it (its queue exists and is open).
    let mut open = vec![false; candidates.len()];
    // Elastic members alone: tried after every other group, never as overdue.
    let elastic = |c: &Candidate| c.group.is_some() && c.missing == 0;
    // `(deadline, key, waited, maxWait)` of the overdue ones.
    let mut overdue: Vec<(i64, Key, i64, i64)> = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        if let Some(why) = &c.blocked {
            wait(i, why.clone());
            continue;
        }
        let Some(&queue) = pass.queues.get(c.slot) else {
            let queue = c.queue.to_owned();
            wait(i, Why::QueueMissing { queue });
            continue;
        };
        if !queue.open {
            let queue = queue.name.clone();
            wait(i, Why::QueueClosed { queue });
            continue;
        }
        let max_wait = c.max_wait.or(queue.max_wait.map(seconds));
        if let Some(max_wait) = max_wait
            && !elastic(c)
            && c.created > 0
            && pass.now - c.created > max_wait
        {
            overdue.push((
                c.created + max_wait,
                c.key(i),
                pass.now - c.created,
                max_wait,
            ));
        } else {
            open[i] = true;
        }
    }

    // Overdue groups first, the most overdue first (then by key).
    overdue.sort_unstable();
    for &(_, key, waited, max_wait) in &overdue {
        let i = key.3;
        let c = &candidates[i];
        if let Err(why) = pass.consider(i, c, c.slot, None, Some((waited, max_wait))) {
            wait(i, why);
        }
    }

    // Then weighted DRF, each queue starting from what it holds after the overdue ones; then
    // the elastic members the same way.
    for last in [false, true] {
        let chosen: Vec<bool> = candidates
            .iter()
            .zip(&open)
            .map(|(c, &open)| open && elastic(c) == last)
            .collect();
        drf(pass, book, shares, &chosen, &mut wait);
    }
    waits
}

/// Tries the candidates `chosen` in weighted DRF order, each queue starting from what it holds
/// now; `wait` records those left waiting.
fn drf<'s>(
    pass: &mut Pass<'s>,
    book: &Book<'s>,
    shares: &Shares,
    chosen: &[bool],
    wait: &mut dyn FnMut(usize, Why),
) {
    let candidates = &book.candidates;
    let mut snapshots: Vec<Option<QueueSnapshot<Key>>> = vec![None; pass.queues.len()];
    for (i, c) in candidates.iter().enumerate() {
        if !chosen[i] {
            continue;
        }
        let queue = pass.queues[c.slot];
        snapshots[c.slot]
            .get_or_insert_with(|| QueueSnapshot {
                priority: queue.priority,
                allocated: pass.held[c.slot].clone(),
                namespace_fair_share: queue.namespace_fair_share,
                namespace_allocated: book
                    .namespace_allocated
                    .get(queue.name.as_str())
                    .cloned()
                    .unwrap_or_default(),
                ..QueueSnapshot::new(
                    queue.name.clone(),
                    shares.own.get(&queue.name).cloned().unwrap_or_default(),
                )
            })
            .waiting
            .push(WaitingGroup {
                key: c.key(i),
                // Read only with namespace fair share: no copy per group otherwise.
                namespace: if queue.namespace_fair_share {
                    c.namespace.to_owned()
                } else {
                    String::new()
                },
                requests: c.requests.clone(),
                priority: c.priority,
                created: c.in_line_since,
            });
    }
    let snapshots: Vec<QueueSnapshot<Key>> = snapshots.into_iter().flatten().collect();
    let mut order = AdmissionPass::new(&snapshots, Options::default());
    while let Some(pick) = order.next() {
        let i = pick.group.key.3;
        let c = &candidates[i];
        if let Err(why) = pass.consider(i, c, c.slot, Some(pick.queue_share), None) {
            order.skip_last();
            wait(i, why);
        }
    }
}
