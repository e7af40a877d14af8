//! The search for victims ([`serve`]): for one starved group, elastic members first, then
//! reclaim from queues above their share, then priority preemption in its own queue, each
//! over the candidates its [`Rule`] allows, in the order of [`super`]'s docs.

use std::fmt::Debug;

use super::world::{Rule, Take, World};
use super::{Eviction, Gang, Input, ReclaimVerdict, Starved};
use crate::model::resources::ResourceId;

pub(super) fn serve<K: Clone + Ord + Debug>(
    input: &Input<K>,
    order: &[usize],
    world: &mut World,
    s: &Starved<K>,
) -> ReclaimVerdict<K> {
    let q = s.queue;
    let short = match world.shortfall(input, s) {
        None => {
            world.admit(input, s);
            return ReclaimVerdict::Fits;
        }
        Some(short) => short,
    };
    // Elastic members yield to any gang's minimum, before anything else is considered.
    let extras = |g: &Gang<K>| g.members.len() > g.min_member as usize;
    let elastic = if input.gangs.iter().any(extras) {
        match search(input, order, world, s, &short, Rule::Yield) {
            Ok(evictions) => return ReclaimVerdict::Yield(evictions),
            Err(why) => Some(why),
        }
    } else {
        None
    };
    let mine = &input.queues[q];
    let after = world.allocated[q].plus(&s.requests);
    let reclaim = match short
        .iter()
        .find(|&&id| after.amount(id) > mine.deserved.amount(id))
    {
        _ if s.capped => Err(format!(
            "queue {} reached its capability, which reclaim does not change",
            mine.name
        )),
        Some(&id) => Err(format!(
            "queue {} would hold more than its deserved share of {} with this group",
            mine.name,
            id.name()
        )),
        None => search(input, order, world, s, &short, Rule::Reclaim),
    };
    let why = match (reclaim, elastic) {
        (Ok(evictions), _) => return ReclaimVerdict::Reclaim(evictions),
        (Err(why), None) => why,
        (Err(why), Some(elastic)) => format!("{elastic}; {why}"),
    };
    let lower = |g: &Gang<K>| g.queue == q && g.priority < s.priority;
    if !input.gangs.iter().any(lower) {
        return ReclaimVerdict::No(why);
    }
    match search(input, order, world, s, &short, Rule::Preempt) {
        Ok(evictions) => ReclaimVerdict::Preempt(evictions),
        Err(preempt) => ReclaimVerdict::No(format!("{why}; {preempt}")),
    }
}

/// Looks for the victims `rule` allows that make room for `s`, short of the resources
/// `short`; takes them in `world` and books `s`'s room when found.
fn search<K: Clone + Ord + Debug>(
    input: &Input<K>,
    order: &[usize],
    world: &mut World,
    s: &Starved<K>,
    short: &[ResourceId],
    rule: Rule,
) -> Result<Vec<Eviction<K>>, String> {
    let q = s.queue;
    let mine = &input.queues[q];
    let what = match rule {
        Rule::Reclaim => "reclaim",
        Rule::Preempt => "preemption",
        Rule::Yield => "elastic yield",
    };
    if world.searched[q][rule as usize] {
        return Err(format!(
            "{what} searches victims for one group of queue {} per pass",
            mine.name
        ));
    }
    world.searched[q][rule as usize] = true;
    let never = || {
        Err(match rule {
            Rule::Reclaim => {
                "evicting every gang that may be reclaimed would still not make room for it"
            }
            Rule::Preempt => {
                "evicting every gang of lower priority in its queue would still not make room for it"
            }
            Rule::Yield => {
                "evicting every elastic member that may yield would still not make room for it"
            }
        }
        .to_owned())
    };
    let candidates = candidates(input, order, world, s, short, rule);
    // Most searches fail (no queue above its share holds what the group needs): find out by
    // taking every allowed candidate and checking the fit once, not after each, then putting
    // them back (cheaper than a copy of the world).
    let mut all: Vec<&Take> = Vec::new();
    for c in &candidates {
        if world.may_take(input, c, s, short, rule) {
            world.take(input, c, true);
            all.push(c);
        }
    }
    let fits_with_all = world.shortfall(input, s).is_none();
    for c in all.into_iter().rev() {
        world.take(input, c, false);
    }
    if !fits_with_all {
        return never();
    }
    let mut trial = world.clone();
    let mut taken: Vec<Take> = Vec::new();
    let mut fits = false;
    for c in candidates {
        if !trial.may_take(input, &c, s, short, rule) {
            continue;
        }
        trial.take(input, &c, true);
        taken.push(c);
        if trial.shortfall(input, s).is_none() {
            fits = true;
            break;
        }
    }
    if !fits {
        return never();
    }
    // Put back, latest first, every victim the group does not need; an extra stays taken
    // once its gang is taken whole, lest the gang keep only extras.
    let mut kept: Vec<bool> = vec![true; taken.len()];
    for i in (0..taken.len()).rev() {
        let whole_kept = taken
            .iter()
            .zip(&kept)
            .any(|(t, &k)| k && t.whole && t.gang == taken[i].gang && !taken[i].whole);
        if whole_kept {
            continue;
        }
        trial.take(input, &taken[i], false);
        if trial.shortfall(input, s).is_none() {
            kept[i] = false;
        } else {
            trial.take(input, &taken[i], true);
        }
    }
    *world = trial;
    world.admit(input, s);
    let mut evictions: Vec<Eviction<K>> = Vec::new();
    for t in taken
        .into_iter()
        .zip(kept)
        .filter(|(_, k)| *k)
        .map(|(t, _)| t)
    {
        let gang = &input.gangs[t.gang];
        let pods = t.members.iter().map(|&m| gang.members[m].uid.clone());
        match evictions.iter_mut().find(|e| e.gang == gang.key) {
            Some(e) => {
                e.pods.extend(pods);
                e.whole |= t.whole;
            }
            None => evictions.push(Eviction {
                gang: gang.key.clone(),
                queue: gang.queue,
                pods: pods.collect(),
                whole: t.whole,
            }),
        }
    }
    for e in &mut evictions {
        // A whole gang's take lists the extras taken before it too.
        e.pods.sort();
        e.pods.dedup();
    }
    Ok(evictions)
}

/// Candidates in the order of the module docs: extras of every gang, then whole gangs, of
/// the gangs `rule` allows: for reclaim, those of reclaimable queues other than `s`'s that hold
/// more than they deserve of a short resource; for preemption, those of `s`'s queue of lower
/// priority than `s`; for the elastic yield, the extras alone of `s`'s queue and, unless `s`
/// waits for its queue's capability, of every reclaimable queue.
fn candidates<K>(
    input: &Input<K>,
    order: &[usize],
    world: &World,
    s: &Starved<K>,
    short: &[ResourceId],
    rule: Rule,
) -> Vec<Take> {
    let q = s.queue;
    let allowed = |gang: &Gang<K>| match rule {
        Rule::Reclaim => {
            let (v, queue) = (gang.queue, &input.queues[gang.queue]);
            v != q
                && queue.reclaimable
                && short
                    .iter()
                    .any(|&id| world.held[v].amount(id) > queue.deserved.amount(id))
        }
        Rule::Preempt => gang.queue == q && gang.priority < s.priority,
        Rule::Yield => gang.queue == q || (!s.capped && input.queues[gang.queue].reclaimable),
    };
    let mut extras = Vec::new();
    let mut wholes = Vec::new();
    for &g in order {
        let gang = &input.gangs[g];
        let left: Vec<usize> = (0..gang.members.len())
            .filter(|&m| !world.taken[g][m])
            .collect();
        if !allowed(gang) || left.len() < gang.min_member as usize {
            continue;
        }
        if left.len() == gang.min_member as usize {
            // No elastic extras: the gang goes whole or not at all.
            if rule == Rule::Yield {
                continue;
            }
            wholes.push(Take {
                gang: g,
                members: left,
                whole: true,
            });
            continue;
        }
        match &gang.instances {
            Some(instances) => {
                let untaken = instances
                    .iter()
                    .filter(|i| i.iter().all(|&m| !world.taken[g][m]));
                extras.extend(untaken.map(|i| Take {
                    gang: g,
                    members: i.clone(),
                    whole: false,
                }));
            }
            None => {
                let mut youngest = left.clone();
                youngest.sort_by(|&a, &b| {
                    let (a, b) = (&gang.members[a], &gang.members[b]);
                    (std::cmp::Reverse(a.created), &a.uid)
                        .cmp(&(std::cmp::Reverse(b.created), &b.uid))
                });
                let beyond = left.len() - gang.min_member as usize;
                extras.extend(youngest.iter().take(beyond).map(|&m| Take {
                    gang: g,
                    members: vec![m],
                    whole: false,
                }));
            }
        }
        if rule != Rule::Yield {
            wholes.push(Take {
                gang: g,
                members: left,
                whole: true,
            });
        }
    }
    extras.extend(wholes);
    extras
}
