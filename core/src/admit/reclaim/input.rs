//! What the reclaim policy reads, built from the state, the pass's group facts and its
//! [`Decision`]: each queue's allocation with what the pass admitted, the nodes' free room with
//! the room of pods going away, the starved groups and the running gangs that may be victims;
//! or nothing, when [`needs_no_plan`] finds the plan bound to be empty before the costly part.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::admit::groups::{GroupFacts, Groups, Seen};
use crate::admit::plan::{Decision, Within};
use crate::model::sub_groups::{self, Instance};
use crate::model::{GroupKey, Pod, PodGroup, Resources, State, topology};
use crate::policy::reclaim::{self as policy, InstanceDomains};

/// What [`input`] builds for the policy.
pub(super) struct Input {
    pub(super) policy: policy::Input<GroupKey>,
    /// The room that pods being evicted free.
    pub(super) freeing: Resources,
    /// The keys of the policy's gangs that are pods of a queue in no group.
    pub(super) lone: HashSet<GroupKey>,
}

/// The policy's input; `None` when the plan is bound to be empty (see [`needs_no_plan`]),
/// found before the costly part (the nodes' free room and the running gangs).
pub(super) fn input<'s>(
    state: &'s State,
    groups: &Groups<'s>,
    decision: &Decision,
    evicting: &dyn Fn(&str) -> bool,
    refused: &dyn Fn(&GroupKey) -> bool,
) -> Option<Input> {
    if decision.short_of_room.is_empty() {
        return None;
    }
    let slot: HashMap<&str, usize> = decision
        .queues
        .keys()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    let mut queues = reclaim_queues(state, decision);
    let in_flight = admitted_in_flight(state, decision, &slot, &mut queues);
    let going = |p: &Pod| p.deleting || evicting(&p.uid);
    if needs_no_plan(state, decision, &slot, &queues, &going) {
        return None;
    }
    let names = state.schedulable_nodes();
    let node: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut nodes: Vec<Resources> = names.iter().map(|n| state.free_on(n)).collect();
    let starved = starved(decision, &names, &slot);
    let freeing = free_going(groups, &slot, &node, &going, &mut nodes, &mut queues);
    let (gangs, lone) = running_gangs(state, groups, &slot, &node, &going, refused);
    let policy = policy::Input {
        queues,
        nodes,
        in_flight,
        gangs,
        starved,
    };
    Some(Input {
        policy,
        freeing,
        lone,
    })
}

/// The room of the pods of `groups` on their way out, which is coming free: added to their
/// nodes' free room (`nodes`, by `node`'s indexes) and taken from their queues' allocations
/// (`queues`, by `slot`), as their queue no longer holds it.
fn free_going(
    groups: &Groups<'_>,
    slot: &HashMap<&str, usize>,
    node: &HashMap<&str, usize>,
    going: &dyn Fn(&Pod) -> bool,
    nodes: &mut [Resources],
    queues: &mut [policy::ReclaimQueue],
) -> Resources {
    let mut freeing = Resources::new();
    for g in &groups.all {
        let queue = slot.get(g.queue).copied();
        for p in groups
            .members(g)
            .iter()
            .map(|m| m.member.pod.as_ref())
            .filter(|p| going(p))
        {
            let Some(at) = p.node_name.as_deref().and_then(|n| node.get(n)) else {
                continue;
            };
            nodes[*at].add(&p.requests);
            freeing.add(&p.requests);
            if let Some(q) = queue {
                queues[q].allocated.sub(&p.requests);
            }
        }
    }
    freeing
}

/// The [`running_gang`]s of `groups` of the queues in `slot`, none of whose members is going
/// away or placed but not bound yet, and not `refused`; with the keys of those that are pods
/// of a queue in no group.
fn running_gangs<'s>(
    state: &'s State,
    groups: &Groups<'s>,
    slot: &HashMap<&str, usize>,
    node: &HashMap<&str, usize>,
    going: &dyn Fn(&Pod) -> bool,
    refused: &dyn Fn(&GroupKey) -> bool,
) -> (Vec<policy::Gang<GroupKey>>, HashSet<GroupKey>) {
    let mut gangs = Vec::new();
    let mut lone = HashSet::new();
    for g in &groups.all {
        let Some(&queue) = slot.get(g.queue) else {
            continue;
        };
        // A gang of a PodGroup, or a pod of a queue in no group as a gang of one.
        if g.key.is_some() && g.spec.is_none() {
            continue;
        }
        let members = groups.members(g);
        let key = g.group_key(groups);
        let busy = members
            .iter()
            .any(|m| going(&m.member.pod) || (m.placed && !m.member.bound));
        if busy || refused(&key) {
            continue;
        }
        let Some(gang) = running_gang(state, g, members, key, queue, node) else {
            continue;
        };
        if g.key.is_none() {
            lone.insert(gang.key.clone());
        }
        gangs.push(gang);
    }
    (gangs, lone)
}

/// Every queue of the pass's report as reclaim sees it, in the report's (name) order.
fn reclaim_queues(state: &State, decision: &Decision) -> Vec<policy::ReclaimQueue> {
    decision
        .queues
        .iter()
        .map(|(name, report)| {
            let queue = &state.queues()[name];
            policy::ReclaimQueue {
                name: name.clone(),
                allocated: report.allocated.clone(),
                deserved: report.deserved.clone(),
                guarantee: report.guarantee.clone(),
                reclaimable: queue.reclaimable,
                capability: queue.capability.clone(),
            }
        })
        .collect()
}

/// What this pass admitted: it takes room too (returned, with the pass's own in flight), and
/// counts in its queue (added to `queues`, by `slot`).
fn admitted_in_flight(
    state: &State,
    decision: &Decision,
    slot: &HashMap<&str, usize>,
    queues: &mut [policy::ReclaimQueue],
) -> Resources {
    let mut in_flight = decision.in_flight.clone();
    for a in &decision.admit {
        let owed = a
            .group
            .as_ref()
            .and_then(|g| state.group(g))
            .map_or(&[][..], |g| g.owed());
        let placeholders = owed
            .iter()
            .filter(|m| a.placeholders.contains(&m.pod.uid))
            .map(|m| &m.pod);
        for p in a
            .pods
            .iter()
            .filter_map(|p| state.pods().get(&p.uid))
            .chain(placeholders)
        {
            in_flight.add(&p.requests);
            if let Some(&q) = slot.get(a.queue.as_str()) {
                queues[q].allocated.add(&p.requests);
            }
        }
    }
    in_flight
}

/// The groups the pass left short of room, in its order, each with the domains of its
/// required level among the schedulable `nodes` (indexes in them).
fn starved(
    decision: &Decision,
    nodes: &[&crate::model::Node],
    slot: &HashMap<&str, usize>,
) -> Vec<policy::Starved<GroupKey>> {
    decision
        .short_of_room
        .iter()
        .filter_map(|w| {
            let domains = |within: &Within| -> Vec<Vec<usize>> {
                let keys: Vec<&str> = within.keys.iter().map(String::as_str).collect();
                let pinned: Vec<(&str, &str)> = within
                    .pinned
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                topology::domains(nodes.iter().map(|n| &n.labels), &keys, &pinned)
                    .into_values()
                    .collect()
            };
            let instances = w.instances.iter().map(|(members, within)| InstanceDomains {
                members: *members,
                domains: within.as_ref().map(domains),
            });
            Some(policy::Starved {
                key: w.group.clone(),
                queue: *slot.get(&*w.queue)?,
                need: w.need.clone(),
                requests: w.requests.clone(),
                priority: w.priority,
                capped: w.capped,
                domains: w.within.as_ref().map(domains),
                instances: instances.collect(),
            })
        })
        .collect()
}

/// The running gang `g` (its live `members`, keyed `key`, of queue index `queue`) as a
/// possible victim: its members on schedulable nodes (`node`: their indexes). `None` when a
/// member is bound elsewhere (a cordoned or unknown node) or fewer than its `minMember` run.
fn running_gang(
    state: &State,
    g: &GroupFacts<'_>,
    members: &[Seen<'_>],
    key: GroupKey,
    queue: usize,
    node: &HashMap<&str, usize>,
) -> Option<policy::Gang<GroupKey>> {
    let placed: Vec<policy::Member> = members
        .iter()
        .filter_map(|m| {
            let p = &m.member.pod;
            let at = node.get(p.node_name.as_deref()?)?;
            Some(policy::Member {
                uid: p.uid.clone(),
                node: *at,
                requests: p.requests.clone(),
                created: p.created,
            })
        })
        .collect();
    let elsewhere = members.iter().filter(|m| m.member.bound).count() > placed.len();
    if elsewhere || placed.len() + (g.succeeded as usize) < g.min_member as usize {
        return None;
    }
    let instances = g
        .spec
        .filter(|s| !s.sub_groups.is_empty())
        .map(|spec| instances_beyond_minimum(state, spec, &placed));
    Some(policy::Gang {
        key,
        queue,
        min_member: g.live_quorum(),
        priority: members.iter().map(|m| m.member.priority).max().unwrap_or(0),
        created: members.iter().map(|m| m.member.created).min().unwrap_or(0),
        members: placed,
        instances,
    })
}

/// The instances of the gang of sub-groups `spec` beyond its minimum among its `placed`
/// members (indexes in it), the youngest first: per sub-group, its `minCount` oldest whole
/// instances (by when their last member started, then by their label values) are the minimum,
/// and every other instance (whole or not) is elastic.
fn instances_beyond_minimum(
    state: &State,
    spec: &PodGroup,
    placed: &[policy::Member],
) -> Vec<Vec<usize>> {
    let none = BTreeMap::new();
    let labels: Vec<&BTreeMap<String, String>> = placed
        .iter()
        .map(|m| state.pods().get(&m.uid).map_or(&none, |p| &*p.labels))
        .collect();
    let (instances, _) = sub_groups::instances(&spec.sub_groups, labels);
    let started = |m: &policy::Member| state.pods().get(&m.uid).and_then(|p| p.started);
    let age = |members: &[usize]| {
        let at = |&m: &usize| started(&placed[m]).unwrap_or(placed[m].created);
        members.iter().map(at).max()
    };
    let mut beyond: Vec<Vec<usize>> = Vec::new();
    for (s, group) in spec.sub_groups.iter().enumerate() {
        let mut whole: Vec<&Instance> = instances
            .iter()
            .filter(|i| i.sub_group == s && i.members.len() >= group.size as usize)
            .collect();
        whole.sort_by_key(|i| (age(&i.members), i.values.clone()));
        let minimum: Vec<&Instance> = whole.into_iter().take(group.min_count as usize).collect();
        let of_group = instances.iter().filter(|i| i.sub_group == s);
        beyond.extend(
            of_group
                .filter(|i| !minimum.contains(i))
                .map(|i| i.members.clone()),
        );
    }
    beyond.sort_by_key(|members| std::cmp::Reverse(age(members)));
    beyond
}

/// Whether the plan is bound to be empty, which is the common case: no pod on a node is going
/// away (so no starved group gets a line for room coming free), no gang runs elastic members
/// (so none yields), no starved group's queue may reclaim for it ([`policy::may_reclaim`];
/// with no pod going away, `queues` hold what the input's will), and no starved group has a
/// higher priority than a running gang of its own queue (so none may preempt): no verdict
/// evicts anything. Checked before the nodes' free room and the running gangs are built,
/// which is most of the cost of a plan on a large cluster.
fn needs_no_plan(
    state: &State,
    decision: &Decision,
    slot: &HashMap<&str, usize>,
    queues: &[policy::ReclaimQueue],
    going: &dyn Fn(&Pod) -> bool,
) -> bool {
    if !decision.elastic.is_empty() {
        return false;
    }
    let may_reclaim = decision.short_of_room.iter().any(|w| {
        !w.capped
            && slot
                .get(&*w.queue)
                .is_some_and(|&q| policy::may_reclaim(&queues[q], &w.need, &w.requests))
    });
    if may_reclaim {
        return false;
    }
    // Preemption: per queue with a starved group, its highest priority. A running gang of that
    // queue below it may be a victim; a gang's priority is its highest member's, so a gang
    // below it has every member below it. One pass over the pods, which looks a pod's group up
    // only when the pod is below some starved group's priority.
    let mut highest_starved: HashMap<&str, i32> = HashMap::new();
    for w in &decision.short_of_room {
        let highest = highest_starved.entry(&*w.queue).or_insert(w.priority);
        *highest = (*highest).max(w.priority);
    }
    let highest = highest_starved.values().copied().max();
    for p in state.nodes().slots().flat_map(|s| s.pods.iter()) {
        if going(p) {
            return false;
        }
        if highest.is_none_or(|h| p.priority >= h) {
            continue;
        }
        // A pod of a queue in no group is a gang of one of its queue.
        let queue = match GroupKey::of(p) {
            Some(key) => state
                .groups()
                .get(&key)
                .and_then(|g| g.spec.as_ref())
                .map(|spec| spec.queue.as_str()),
            None => p.queue.as_deref(),
        };
        if queue
            .and_then(|q| highest_starved.get(q))
            .is_some_and(|&h| p.priority < h)
        {
            return false;
        }
    }
    true
}
