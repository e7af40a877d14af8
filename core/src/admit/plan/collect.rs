//! Phase 1 of the pass: the waiting groups (and pods of a queue in no group) as
//! [`Candidate`]s ([`super::candidate`]), with what blocks any of them outright, what every queue's groups hold
//! (placed members, and released ones up to what their gang lacks for quorum, those released
//! into the room their group's admission keeps included), and what running gangs' elastic
//! members hold, node by node.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::candidate::{Candidate, InstanceLevel, Where, seconds};
use crate::admit::groups::{GroupFacts, Groups, Seen};
use crate::admit::why::Why;
use crate::limits;
use crate::model::sub_groups::{self, Instance};
use crate::model::{GroupKey, Levels, Member, PodGroup, Resources, State};

/// Phase 1's result.
#[derive(Default)]
pub(super) struct Book<'s> {
    /// Groups first, in key order (the cache keeps groups ordered), then queue-only pods in no
    /// particular order: the pass orders them by content ([`Candidate::key`]), and lists the
    /// groups left waiting by index, which is by key.
    pub(super) candidates: Vec<Candidate<'s>>,
    /// What each queue's groups hold, by queue name (queues that do not exist included).
    pub(super) allocated: FxHashMap<&'s str, Resources>,
    /// What each namespace's groups hold, by queue and namespace: for queues with namespace
    /// fair share only.
    pub(super) namespace_allocated: FxHashMap<&'s str, BTreeMap<String, Resources>>,
    /// Released members not yet placed (counted against free room, not any node).
    pub(super) in_flight: Resources,
    /// The requests of each of them: the pass places them on nodes before anything else, so
    /// that no gang is admitted, and no head's reservation held, in the room a gang admitted
    /// before is on its way to (the new nodes of a gang that grew,
    /// `crate::admit::plan::growth`; the room of a gang whose members a new leader sees come
    /// back).
    pub(super) in_flight_members: Vec<&'s Resources>,
    /// Released members not yet placed beyond what their gang needs for quorum (an elastic
    /// gang's growth, more members released than `minMember`): neither in flight nor in their
    /// queue's allocation, as elastic members yield to any gang's minimum, which the pass
    /// admits with claims the scheduler keeps for it; but a gang admitted on arrival has no
    /// claim, so the door leaves their room out.
    pub(super) beyond_quorum: Vec<&'s Resources>,
    /// Members that came gated into the room their group's admission keeps, counted as
    /// released (in `in_flight` and `allocated`): the pass releases them
    /// ([`crate::admit::groups::Seen::into_kept_room`]).
    pub(super) into_kept_room: Vec<&'s Member>,
    /// Groups whose `minResources` cover more members than `minMember` and whose released,
    /// unplaced members (placeholders included) fill that room ([`super::Decision::keeping`]).
    pub(super) keeping: Vec<GroupKey>,
    /// What elastic members hold: per gang with a PodGroup and more members bound than
    /// `minMember`, the newest of them beyond it, by node name, and their sum.
    pub(super) elastic_on: FxHashMap<&'s str, Resources>,
    pub(super) elastic: Resources,
}

pub(super) fn collect<'s>(state: &'s State, groups: &Groups<'s>) -> Book<'s> {
    let mut book = Book {
        candidates: Vec::with_capacity(groups.all.len()),
        ..Book::default()
    };
    for g in &groups.all {
        let members = groups.members(g);
        let quorum = g.live_quorum();
        let arriving = g.key.map_or(&[][..], |key| arriving(state, key, members));
        let in_flight = hold(state, &mut book, g, members, arriving, quorum);
        let kept = members.iter().filter(|m| m.into_kept_room);
        book.into_kept_room.extend(kept.map(|m| m.member));
        // Its room beyond minMember was laid out as pieces of an estimated shape.
        if in_flight
            && g.gang > g.min_member
            && let Some(key) = g.key
        {
            book.keeping.push(key.clone());
        }
        if g.spec.is_some() {
            elastic(&mut book, members, quorum);
        }
        let split = g.spec.filter(|s| !s.sub_groups.is_empty());
        let (found, instances_wait) = match split {
            Some(spec) => of_sub_groups(state, g, spec, members),
            None => (
                candidate(g.queue, g.namespace, g.name, members, quorum),
                None,
            ),
        };
        let Some(mut candidate) = found else {
            continue;
        };
        candidate.blocked = unserved(state, members);
        if let Some(key) = g.key {
            candidate.group = Some(key);
            candidate.blocked = candidate.blocked.take().or(match g.spec {
                None => Some(Why::PodGroupMissing { group: key.clone() }),
                Some(spec)
                    if g.present < spec.min_member as usize
                        || !limits::gang_within_limit(spec.min_member) =>
                {
                    Some(Why::Members {
                        live: g.present - g.succeeded as usize,
                        succeeded: g.succeeded,
                        min_member: spec.min_member,
                    })
                }
                Some(_) => instances_wait,
            });
            candidate.max_wait = g.spec.and_then(|s| s.max_wait).map(seconds);
            candidate.expected_runtime = g.spec.and_then(|s| s.expected_runtime).map(seconds);
            candidate.topology = g.spec.and_then(|s| {
                let levels = Levels::of(
                    s.topology_key.as_deref(),
                    s.preferred_topology_key.as_deref(),
                    state.topologies(),
                )?;
                let pinned = if levels.required {
                    domain_of(state, members, levels.widest())
                } else {
                    Vec::new()
                };
                Some(Where { levels, pinned })
            });
        }
        book.candidates.push(candidate);
    }
    book
}

/// A member, not yet placed, that names a scheduler nobody serves: its gang would never run.
fn unserved(state: &State, members: &[Seen]) -> Option<Why> {
    members.iter().filter(|m| !m.placed).find_map(|m| {
        let scheduler = state.schedulers().unserved(&m.member.pod)?;
        Some(Why::SchedulerNotServed {
            pod: m.member.pod.name.clone(),
            scheduler: scheduler.to_owned(),
        })
    })
}

/// What the members of the gang `key` admitted on arrival and not shown yet ask
/// ([`crate::admit::on_arrival`]): the door took room for them, and created without the gate
/// they are on their way to the scheduler, but until the watch shows them the pass would hand
/// their room out again (past a queue's capability or another's guarantee).
fn arriving<'s>(state: &'s State, key: &GroupKey, members: &[Seen]) -> &'s [Resources] {
    let Some(arrival) = state.ledger().arrivals().get(key) else {
        return &[];
    };
    let shown = members.iter().filter(|m| !m.gated).count();
    &arrival.need[..arrival.need.len().saturating_sub(shown)]
}

/// Adds what `members` of the group `g` (a gang needing `quorum` of them placed), and the
/// members `arriving` not shown yet, hold to its queue's allocation (see the module docs);
/// whether any of them is in flight (released, not placed yet, and counted).
fn hold<'s>(
    state: &State,
    book: &mut Book<'s>,
    g: &GroupFacts<'s>,
    members: &[Seen<'s>],
    arriving: &'s [Resources],
    quorum: u32,
) -> bool {
    let (queue, namespace) = (g.queue, g.namespace);
    let mut held = Resources::new();
    let mut placed = 0u32;
    let mut short = 0usize;
    let mut released = Resources::new();
    for m in members {
        if m.placed {
            held.add(&m.member.requests);
            placed += 1;
        } else if !m.gated {
            short += 1;
        }
    }
    // Released members count up to what the gang still lacks for quorum; the others are on
    // their way to the scheduler all the same.
    let mut left = (quorum.saturating_sub(placed) as usize).min(short);
    for m in members {
        // Released to a scheduler nobody serves, it will never be placed: it holds no room.
        if m.placed || m.gated || state.schedulers().unserved(&m.member.pod).is_some() {
            continue;
        }
        if left == 0 {
            book.beyond_quorum.push(&m.member.requests);
            continue;
        }
        released.add(&m.member.requests);
        book.in_flight_members.push(&m.member.requests);
        left -= 1;
    }
    for requests in arriving {
        released.add(requests);
        book.in_flight_members.push(requests);
    }
    let in_flight = !released.is_empty();
    held.add(&released);
    book.in_flight.add(&released);
    if held.is_empty() {
        return in_flight;
    }
    book.allocated.entry(queue).or_default().add(&held);
    if state
        .queues()
        .get(queue)
        .is_some_and(|q| q.namespace_fair_share)
    {
        book.namespace_allocated
            .entry(queue)
            .or_default()
            .entry(namespace.to_owned())
            .or_default()
            .add(&held);
    }
    in_flight
}

/// Adds what the elastic members of a gang of `members` hold to `book` (see [`Book::elastic`]):
/// those bound beyond the `quorum` it needs, newest first, as reclaim's elastic yield takes
/// them.
fn elastic<'s>(book: &mut Book<'s>, members: &[Seen<'s>], quorum: u32) {
    let mut bound: Vec<&'s Member> = members
        .iter()
        .filter(|m| m.placed && m.member.pod.node_name.is_some())
        .map(|m| m.member)
        .collect();
    let Some(extras) = bound.len().checked_sub(quorum as usize) else {
        return;
    };
    if extras == 0 {
        return;
    }
    bound.sort_unstable_by(|a, b| {
        (std::cmp::Reverse(a.created), &a.pod.uid).cmp(&(std::cmp::Reverse(b.created), &b.pod.uid))
    });
    for m in &bound[..extras] {
        if let Some(node) = m.pod.node_name.as_deref() {
            book.elastic_on.entry(node).or_default().add(&m.requests);
            book.elastic.add(&m.requests);
        }
    }
}

/// The waiting part of the gang `g` of sub-groups ([`crate::model::sub_groups`]), and why it
/// waits if it cannot be tried: the members of the whole instances its minimum still needs,
/// counting the instances started; short of whole instances, every member (waiting for
/// members); its minimum started, the whole instances beyond it, each released whole as an
/// elastic unit ([`Candidate::instances`]). Members of an instance not yet whole wait for the
/// rest of it. A gang the scheduler places whole itself (a tree of Kubernetes'
/// CompositePodGroups, [`PodGroup::placed_whole_by_scheduler`]) is released all at once: with
/// its minimum, every other member; once released, members made before the scheduler placed
/// its minimum follow at once ([`Candidate::follows_release`]), and after that every gated
/// member goes together.
fn of_sub_groups<'s>(
    state: &'s State,
    g: &GroupFacts<'s>,
    spec: &'s PodGroup,
    members: &[Seen<'s>],
) -> (Option<Candidate<'s>>, Option<Why>) {
    let labels = members.iter().map(|m| &*m.member.pod.labels);
    let (instances, _) = sub_groups::instances(&spec.sub_groups, labels);
    let size = |i: &Instance| spec.sub_groups[i.sub_group].size as usize;
    let released = |i: &Instance| i.members.iter().filter(|&&m| !members[m].gated).count();
    let started = |i: &Instance| released(i) >= size(i);
    let (group, namespace, queue) = (g.name, g.namespace, g.queue);
    match sub_groups::minimum(&spec.sub_groups, &instances, &started) {
        Err(short) => (
            candidate(queue, namespace, group, members, g.live_quorum()),
            Some(Why::SubGroupShort(short)),
        ),
        Ok(chosen) if chosen.is_empty() => {
            // Whole instances not started (new ones, and those whose lost members were made
            // again): the gated members of each go together.
            let gated_in = |i: &Instance| {
                i.members[..size(i)]
                    .iter()
                    .filter(|&&m| members[m].gated)
                    .count()
            };
            let beyond: Vec<&Instance> = instances
                .iter()
                .filter(|i| !started(i) && i.members.len() >= size(i))
                .collect();
            let seen: Vec<Seen<'s>> = beyond
                .iter()
                .flat_map(|i| i.members[..size(i)].iter().map(|&m| members[m]))
                .collect();
            let waiting: Vec<&Instance> = beyond.into_iter().filter(|i| gated_in(i) > 0).collect();
            let chunks = waiting.iter().map(|i| gated_in(i)).collect();
            if spec.placed_whole_by_scheduler {
                // The scheduler's own cycle takes none of a tree while any of it is gated:
                // members made before it placed the minimum follow the release at once.
                let gated = members.iter().filter(|m| m.gated).count();
                let placed = |i: &Instance| {
                    let placed = i.members.iter().filter(|&&m| members[m].placed).count();
                    placed >= size(i)
                };
                let minimum_placed = matches!(
                    sub_groups::minimum(&spec.sub_groups, &instances, &placed),
                    Ok(lacking) if lacking.is_empty()
                );
                let extras = candidate(queue, namespace, group, members, 0).map(|c| Candidate {
                    instances: vec![gated],
                    follows_release: !minimum_placed,
                    ..c
                });
                return (extras, None);
            }
            let instance_levels = levels(state, spec, members, waiting.into_iter());
            let extras = candidate(queue, namespace, group, &seen, 0).map(|c| Candidate {
                instances: chunks,
                instance_levels,
                ..c
            });
            (extras, None)
        }
        Ok(chosen) => {
            let mut minimum: Vec<Seen<'s>> = chosen.iter().map(|&i| members[i]).collect();
            let quorum = u32::try_from(minimum.len()).unwrap_or(u32::MAX);
            let mut taken = vec![false; members.len()];
            chosen.iter().for_each(|&i| taken[i] = true);
            if spec.placed_whole_by_scheduler {
                // Released with the minimum, within the queue's capability but not checked
                // against the room: the scheduler places whole children beyond the minimum as
                // room allows, and takes none of the tree while any of it is gated.
                let others = members.iter().zip(&taken).filter(|(_, t)| !**t);
                minimum.extend(others.map(|(m, _)| *m));
                return (candidate(queue, namespace, group, &minimum, quorum), None);
            }
            let picked = instances.iter().filter(|i| taken[i.members[0]]);
            let instance_levels = levels(state, spec, members, picked);
            let minimum = candidate(queue, namespace, group, &minimum, quorum).map(|c| Candidate {
                instance_levels,
                ..c
            });
            (minimum, None)
        }
    }
}

/// The gated members of `instances` (each taken up to its sub-group's size), instance by
/// instance, with the level each keeps to; empty when no sub-group of `spec` names a
/// `topologyKey`.
fn levels<'s, 'i>(
    state: &'s State,
    spec: &'s PodGroup,
    members: &[Seen<'s>],
    instances: impl Iterator<Item = &'i Instance<'i>>,
) -> Vec<InstanceLevel<'s>> {
    if spec.sub_groups.iter().all(|s| s.topology_key.is_none()) {
        return Vec::new();
    }
    instances
        .map(|i| {
            let sub_group = &spec.sub_groups[i.sub_group];
            let of_it: Vec<Seen<'s>> = i.members[..sub_group.size as usize]
                .iter()
                .map(|&m| members[m])
                .collect();
            let keys = sub_group
                .topology_key
                .as_deref()
                .and_then(|key| Levels::of(Some(key), None, state.topologies()))
                .map(|l| l.widest().to_vec())
                .unwrap_or_default();
            InstanceLevel {
                sub_group: &sub_group.name,
                members: of_it.iter().filter(|m| m.gated).count(),
                pinned: domain_of(state, &of_it, &keys),
                keys,
            }
        })
        .collect()
}

/// The waiting part of a group (or a queue-only pod) called `name` in `namespace` that needs
/// `quorum` of its live `members` placed, if any member is gated; the caller fills in what
/// only a PodGroup says.
fn candidate<'s>(
    queue: &'s str,
    namespace: &'s str,
    name: &'s str,
    members: &[Seen<'s>],
    quorum: u32,
) -> Option<Candidate<'s>> {
    if !members.iter().any(|m| m.gated) {
        return None;
    }
    let mut gated: Vec<&'s Member> = Vec::with_capacity(members.len());
    let mut requests = Resources::new();
    let mut created = i64::MAX;
    for m in members.iter().filter(|m| m.gated).map(|m| m.member) {
        gated.push(m);
        requests.add(&m.requests);
        created = created.min(m.created);
    }
    let released = members.len() - gated.len();
    let missing = (quorum as usize).saturating_sub(released).min(gated.len());
    // A gang short of quorum with members already let through (one lost since, made again)
    // keeps the place in line its first members had.
    let in_line_since = match (missing, released) {
        (1.., 1..) => members.iter().map(|m| m.member.created).min(),
        _ => None,
    };
    Some(Candidate {
        queue,
        slot: usize::MAX,
        group: None,
        namespace,
        name,
        missing,
        instances: Vec::new(),
        instance_levels: Vec::new(),
        follows_release: false,
        requests,
        priority: members.iter().map(|m| m.member.priority).max().unwrap_or(0),
        created,
        in_line_since: in_line_since.unwrap_or(created),
        max_wait: None,
        expected_runtime: None,
        topology: None,
        blocked: None,
        gated,
    })
}

/// Per key of `keys`, the value a running member's node has for it, else one a member names
/// in its `nodeSelector`.
fn domain_of<'s>(
    state: &'s State,
    members: &[Seen<'s>],
    keys: &[&'s str],
) -> Vec<(&'s str, &'s str)> {
    keys.iter()
        .filter_map(|&key| {
            let running = members.iter().find_map(|m| {
                let node = state.nodes().get(m.member.pod.node_name.as_deref()?)?;
                node.labels.get(key).map(String::as_str)
            });
            let value = running.or_else(|| {
                members
                    .iter()
                    .find_map(|m| m.member.pod.node_selector.get(key).map(String::as_str))
            })?;
            Some((key, value))
        })
        .collect()
}
