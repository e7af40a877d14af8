//! The [`Decision`] a pass leaves: the groups admitted (with the domain chosen for each), those
//! left waiting and why, what waits only for room (for reclaim), the head's reservation, each
//! queue's report, and the door for admissions on arrival when only members are lacking.

use super::candidate::Candidate;
use super::collect::Book;
use super::decision::{Admission, Decision, Hold, PodRef, QueueReport, RoomWait, Waiting, Within};
use super::instances::member_domains;
use super::order::Waits;
use super::pass::Pass;
use super::share::Shares;
use crate::admit::why::{Reason, Why};
use crate::model::Resources;
use crate::model::arrivals::Door;

/// What `pass` decided over `book`.
pub(super) fn report(mut pass: Pass, book: Book, shares: Shares, waits: Waits) -> Decision {
    let state = pass.state;
    let candidates = &book.candidates;
    let Waits { mut whys, waited } = waits;
    let (names, mut reports): (Vec<String>, Vec<QueueReport>) = shares.queues.into_iter().unzip();
    let mut decision = Decision {
        hold: hold(&pass),
        unwanted_stand_ins: pass.unwanted_stand_ins(
            &pass
                .admitted
                .iter()
                .filter_map(|&i| candidates[i].group)
                .collect(),
        ),
        stand_in_claims: pass
            .admitted
            .iter()
            .filter_map(|&i| {
                let c = &candidates[i];
                Some((c.group?.clone(), pass.stand_in_claim(c)?))
            })
            .collect(),
        ..Decision::default()
    };
    decision.grow = std::mem::take(&mut pass.growing.asks);
    decision.growth_timed_out = std::mem::take(&mut pass.growing.timed_out);
    decision.admit = pass
        .admitted
        .iter()
        .map(|&i| admission(&pass, &candidates[i], i))
        .collect();
    decision.short_of_room = waited
        .iter()
        .filter_map(|&i| room_wait(&pass, &candidates[i], whys[i].as_ref()))
        .collect();
    decision.into_kept_room = book
        .into_kept_room
        .iter()
        .map(|m| PodRef::of(&m.pod))
        .collect();
    decision.in_flight = book.in_flight.clone();
    decision.keeping = book.keeping.clone();
    decision.elastic = book.elastic.clone();
    decision.lent = pass
        .lent
        .iter()
        .filter_map(|&i| candidates[i].group.cloned())
        .collect();
    // By group key, which is by index for groups (see [`Book::candidates`]).
    let mut order = waited;
    order.sort_unstable();
    decision.waiting.reserve(order.len());
    for i in order {
        let c = &candidates[i];
        if let Some(report) = reports.get_mut(c.slot) {
            report.waiting_groups += 1;
        }
        if let Some(why) = whys[i].take() {
            decision.waiting.push(Waiting {
                group: c.group_key(),
                why,
                pod: c.lone_pod(),
            });
        }
    }
    for (report, guarantee) in reports.iter_mut().zip(pass.guarantees) {
        report.guarantee = guarantee;
    }
    let only_members_lack = decision.hold.is_none()
        && decision.waiting.iter().all(|w| {
            matches!(
                w.why,
                Why::Members { .. } | Why::PodGroupMissing { .. } | Why::SchedulerNotServed { .. }
            )
        });
    if only_members_lack {
        let by_slot = &pass.queues;
        let uncapped = |slot: usize| by_slot[slot].capability.is_unbounded();
        let queues = by_slot
            .iter()
            .enumerate()
            .filter(|&(slot, q)| {
                q.open && uncapped(slot) && pass.ancestors[slot].iter().all(|&a| uncapped(a))
            })
            .map(|(_, q)| q.name.clone())
            .collect();
        // Taken from the room already when an elastic candidate was tried.
        let beyond = pass.elastic_in_flight.as_deref().unwrap_or_default();
        let (nodes, total) = pass.room.left_for_arrivals(beyond);
        decision.door = Some(Door::new(nodes, total, queues, state.nodes().shrunk()));
    }
    decision.queues = names.into_iter().zip(reports).collect();
    decision
}

/// The release of admitted candidate `c` (index `i`): its members released in this pass, each
/// with its domain's labels (the gang's, or its instance's) for its `nodeSelector`, and its
/// placeholders apart.
fn admission(pass: &Pass, c: &Candidate, i: usize) -> Admission {
    let released = pass.extras.get(&i).map_or(&c.gated[..], |&n| &c.gated[..n]);
    let of_instances = pass
        .instance_domains
        .get(&i)
        .map(|domains| member_domains(c, domains));
    let of_gang = pass.domains.get(&i);
    let domain = |k: usize| match &of_instances {
        Some(domains) => domains.get(k).copied().flatten(),
        None => of_gang,
    };
    let (mut pods, mut placeholders) = (Vec::new(), Vec::new());
    for (k, m) in released.iter().enumerate() {
        match domain(k) {
            _ if m.pod.is_placeholder() => placeholders.push(m.pod.uid.clone()),
            Some(domain) => pods.push(PodRef::into_domain(&m.pod, domain)),
            None => pods.push(PodRef::of(&m.pod)),
        }
    }
    Admission {
        group: c.group.cloned(),
        queue: c.queue.to_owned(),
        pods,
        placeholders,
    }
}

/// What reclaim reads of waiting candidate `c`, which waits for `why`: the room it needs, if it
/// is short of its quorum for room or at its queue's capability.
fn room_wait(pass: &Pass, c: &Candidate, why: Option<&Why>) -> Option<RoomWait> {
    let reason = why.map(Why::reason);
    let capped = reason == Some(Reason::CapabilityReached);
    if c.missing == 0 || !(capped || reason.is_some_and(Reason::short_of_room)) {
        return None;
    }
    Some(RoomWait {
        group: c.group_key(),
        queue: pass.names[c.slot].clone(),
        need: c.need().cloned().collect(),
        requests: c.requests.clone(),
        priority: c.priority,
        capped,
        lone: c.group.is_none(),
        within: c
            .topology
            .as_ref()
            .filter(|w| w.levels.required)
            .map(|w| within(w.levels.widest(), &w.pinned)),
        instances: c
            .instance_levels
            .iter()
            .map(|i| {
                let kept = (!i.keys.is_empty()).then(|| within(&i.keys, &i.pinned));
                (i.members, kept)
            })
            .collect(),
    })
}

/// A level's label `keys`, with the values `pinned` of members placed, as reclaim reads them.
fn within(keys: &[&str], pinned: &[(&str, &str)]) -> Within {
    Within {
        keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        pinned: pinned
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// The head's reservation as the pass left it, if there is a head: its nodes, what each lacks,
/// and what was free on each when it was made.
fn hold(pass: &Pass) -> Option<Hold> {
    let (group, overdue) = pass.head?;
    let room = &pass.room;
    let named = |list: &[(usize, Resources)]| -> Vec<(String, Resources)> {
        list.iter()
            .map(|(at, r)| (room.names[*at].to_owned(), r.clone()))
            .collect()
    };
    let state = pass.state;
    Some(Hold {
        group: group.clone(),
        overdue,
        nodes: named(&room.held),
        lacking: named(&room.lacking),
        seen: room
            .held
            .iter()
            .filter_map(|(at, _)| {
                let name = room.names[*at];
                let node = state.nodes().slot(name)?.node.as_ref()?;
                Some((name.to_owned(), state.free_on(node)))
            })
            .collect(),
    })
}
