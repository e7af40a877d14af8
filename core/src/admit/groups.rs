//! What the admission pass and reclaim's plan read of every group and every pod of a queue in no
//! group, derived once per snapshot ([`Groups::of`]) and shared by both: its queue (the
//! PodGroup's, else the first member that names one, else the default queue), its gang size,
//! and its live members with whether each holds room on a node and whether it still waits at
//! the gate.
//!
//! Members that Succeeded count towards the gang (a gang whose first members finished before
//! the others existed, such as a Kubeflow Trainer's initializer, is whole with the rest), and
//! so do the members its `minResources` cover. A group whose `minResources` keep room for
//! members still to come ([`crate::model::owed`]) is seen with their placeholders, first:
//! - released (holding their room) while the admission that made them holds (its record on
//!   the PodGroup, or, until the snapshot shows that, the admission loop's own record,
//!   [`Kept`]), until the members take their place or the group's schedule timeout has passed
//!   since it was admitted;
//! - gated, as part of what the gang asks, while it waits for admission: every live member
//!   still gated, or, admitted ahead of its members, none came yet;
//! - not at all otherwise (its members run and its admission lapsed, or it came whole and
//!   finished): the room of members that never came goes back to the others.
//!
//! While such an admission holds, the members that came gated into the room it keeps (the
//! webhook lets them in ungated only once its snapshot shows the admission, and a follower
//! replica gates them all) are seen released, into that room ([`Seen::into_kept_room`]), the
//! oldest first and only as many as the gang's room has places for (those `minResources` cover,
//! at least `minMember`): each took a placeholder's place, so the room counted for the group stays
//! what its admission kept, and the pass removes their gates without weighing them again.
//! Members beyond that room are elastic and wait for admission as any.

use std::ops::Range;

use super::kept::Kept;
use crate::model::names::DEFAULT_QUEUE;
use crate::model::{Group, GroupKey, Member, PodGroup, PodPhase, State, owed};

/// A live member, as the pass sees it.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'s> {
    pub member: &'s Member,
    /// Bound, or reserved by the extender.
    pub placed: bool,
    /// It carries the admission gate and the loop has not just released it, nor is it
    /// released into the room its group's admission keeps.
    pub gated: bool,
    /// It carries the admission gate, but came into the room its group's admission keeps for
    /// members to come (see the module docs): it counts as released, and the pass releases it
    /// (`crate::admit::plan::Decision::into_kept_room`).
    pub into_kept_room: bool,
}

/// One group, or one pod of a queue in no group.
#[derive(Debug, Clone)]
pub struct GroupFacts<'s> {
    /// `None` for a pod of a queue in no group.
    pub key: Option<&'s GroupKey>,
    pub spec: Option<&'s PodGroup>,
    pub queue: &'s str,
    pub namespace: &'s str,
    /// The group's name, or the queue-only pod's.
    pub name: &'s str,
    /// `minMember`; 1 for a pod in no group and while the PodGroup is missing.
    pub min_member: u32,
    /// The gang as admission and reclaim see it: `minMember`, or more when its
    /// `minResources` cover more members (those that came, and the placeholders seen for
    /// those still to come); members beyond it are elastic.
    pub gang: u32,
    /// Members that Succeeded: they count towards the gang as the members that ran.
    pub succeeded: u32,
    /// Members that count towards `minMember` before it is admitted: the live and the
    /// succeeded ones, and for a group admitted ahead the placeholders seen.
    pub present: usize,
    members: Range<usize>,
}

/// Every group in key order, then every live pod of a queue in no group.
#[derive(Debug, Default)]
pub struct Groups<'s> {
    pub all: Vec<GroupFacts<'s>>,
    members: Vec<Seen<'s>>,
}

/// What the admission loop wrote that a snapshot may not show yet.
#[derive(Clone, Copy)]
pub struct Unshown<'a> {
    /// Pods whose gate the loop removed (`true` for each).
    pub released: &'a dyn Fn(&str) -> bool,
    /// Its admissions with room kept for members to come.
    pub kept: &'a Kept,
}

impl Unshown<'_> {
    /// Nothing: the snapshot shows every write (tests, the simulator, benchmarks).
    pub fn none() -> Unshown<'static> {
        static NOTHING: Kept = Kept::new();
        Unshown {
            released: &|_| false,
            kept: &NOTHING,
        }
    }
}

impl<'s> Groups<'s> {
    /// The facts of `state` at `now` (Unix seconds), counting what the admission loop wrote and
    /// the snapshot does not show yet (`unshown`) as written: the pods whose gates it removed
    /// as released, its admissions with room kept as holding, so that a pass right after
    /// another does not hand out the same room twice.
    pub fn of(state: &'s State, unshown: Unshown<'_>, now: i64) -> Groups<'s> {
        let mut groups = Groups {
            all: Vec::with_capacity(state.groups().len() + state.queue_only().len()),
            members: Vec::new(),
        };
        for (key, group) in state.groups() {
            let facts = groups.read(state, key, group, unshown, now);
            groups.all.push(facts);
        }
        for (uid, m) in state.queue_only().iter().filter(|(_, m)| m.live) {
            let pod = m.pod.as_ref();
            let Some(queue) = pod.queue.as_deref() else {
                continue;
            };
            let start = groups.members.len();
            groups.members.push(seen(state, unshown, uid, m));
            groups.all.push(GroupFacts {
                key: None,
                spec: None,
                queue,
                namespace: &pod.namespace,
                name: &pod.name,
                min_member: 1,
                gang: 1,
                succeeded: 0,
                present: 1,
                members: start..start + 1,
            });
        }
        groups
    }

    /// The live members of `group`.
    pub fn members(&self, group: &GroupFacts<'s>) -> &[Seen<'s>] {
        &self.members[group.members.clone()]
    }

    /// Reads the group `key` (its live members pushed, placeholders first).
    fn read(
        &mut self,
        state: &'s State,
        key: &'s GroupKey,
        group: &'s Group,
        unshown: Unshown<'_>,
        now: i64,
    ) -> GroupFacts<'s> {
        let start = self.members.len();
        let spec = group.spec.as_deref();
        let mut succeeded = 0;
        for (uid, m) in &group.members {
            if m.live {
                self.members.push(seen(state, unshown, uid, m));
            } else if m.pod.phase == PodPhase::Succeeded {
                succeeded += 1;
            }
        }
        let live = self.members.len() - start;
        let holds = spec.is_some_and(|s| s.admission_holds_at(now) || unshown.kept.holds(s, now));
        let (owed, admitted) = seen_owed(spec, group, &self.members[start..], succeeded, holds);
        let min_member = spec.map_or(1, |s| s.min_member);
        let covered = spec.map_or(0, |s| covered(s, group));
        let gang = min_member.max(covered.saturating_add(owed.len() as u32));
        if holds {
            let places = (gang as usize).saturating_sub(owed.len() + succeeded as usize);
            into_kept_room(&mut self.members[start..], places);
        }
        // Placeholders first: they are always part of what the gang needs.
        self.members.extend(owed.iter().map(|m| Seen {
            gated: !admitted,
            ..seen(state, unshown, &m.pod.uid, m)
        }));
        self.members[start..].rotate_right(owed.len());
        let members = &self.members[start..];
        let queue: &str = match spec {
            Some(spec) => &spec.queue,
            None => members
                .iter()
                .find_map(|m| m.member.pod.queue.as_deref())
                .unwrap_or(DEFAULT_QUEUE),
        };
        GroupFacts {
            key: Some(key),
            spec,
            queue,
            namespace: &key.namespace,
            name: &key.name,
            min_member,
            gang,
            succeeded,
            present: live
                + succeeded as usize
                + if spec.is_some_and(|s| s.ahead) {
                    owed.len()
                } else {
                    0
                },
            members: start..self.members.len(),
        }
    }
}

/// Member `uid` of `state` as the pass sees it, counting `unshown`'s gate removals.
fn seen<'s>(state: &State, unshown: Unshown<'_>, uid: &str, m: &'s Member) -> Seen<'s> {
    Seen {
        member: m,
        placed: state.holds_room(uid, m),
        gated: m.gated && !(unshown.released)(uid),
        into_kept_room: false,
    }
}

/// The placeholders of `group` seen (see the module docs), and whether released: its `live`
/// members as seen, `succeeded` of them finished, and whether its admission with room kept
/// `holds`.
fn seen_owed<'s>(
    spec: Option<&PodGroup>,
    group: &'s Group,
    live: &[Seen],
    succeeded: u32,
    holds: bool,
) -> (&'s [Member], bool) {
    match (spec, group.owed()) {
        // The gang came whole and finished: it owes nothing more.
        (Some(spec), _) if live.is_empty() && succeeded >= spec.min_member => (&[], false),
        (Some(spec), owed @ [_, ..]) => {
            let waits = if live.is_empty() {
                spec.ahead && succeeded == 0
            } else {
                live.iter().all(|m| m.gated)
            };
            if holds {
                (owed, true)
            } else if waits {
                (owed, false)
            } else {
                (&[], false)
            }
        }
        _ => (&[], false),
    }
}

/// Sees the oldest gated of `live` members released into their group's kept room, as many as
/// it has `places` left for beyond those already released or placed.
fn into_kept_room(live: &mut [Seen], places: usize) {
    let taken = live.iter().filter(|m| !m.gated).count();
    let Some(left) = places.checked_sub(taken).filter(|&n| n > 0) else {
        return;
    };
    let mut gated: Vec<usize> = (0..live.len()).filter(|&i| live[i].gated).collect();
    let age = |i: &usize| (live[*i].member.created, &live[*i].member.pod.uid);
    gated.sort_unstable_by(|a, b| age(a).cmp(&age(b)));
    for i in gated.into_iter().take(left) {
        live[i].gated = false;
        live[i].into_kept_room = true;
    }
}

impl GroupFacts<'_> {
    /// How many of its live members (placeholders seen included) the gang needs placed, its
    /// succeeded members counted: at least one.
    pub fn live_quorum(&self) -> u32 {
        self.gang.saturating_sub(self.succeeded).max(1)
    }

    /// Its key: the group's, or the queue-only pod's as a group of one.
    pub fn group_key(&self, groups: &Groups) -> GroupKey {
        match self.key {
            Some(key) => key.clone(),
            None => GroupKey::lone(&groups.members(self)[0].member.pod),
        }
    }
}

/// How many of `group`'s members that came its `minResources` cover ([`owed::covered`]):
/// all of them while what they ask fits in it, else the oldest that do.
fn covered(spec: &PodGroup, group: &Group) -> u32 {
    let (came, requests) = group.came();
    let min = &spec.min_resources;
    if min.is_empty() {
        return 0;
    }
    if owed::within(requests, min, min) {
        return came;
    }
    let mut oldest: Vec<&Member> = group.members.values().filter(|m| m.came()).collect();
    oldest.sort_unstable_by(|a, b| (a.created, &a.pod.uid).cmp(&(b.created, &b.pod.uid)));
    owed::covered(min, oldest.iter().map(|m| &m.requests))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Pod, PodPhase, Resources};
    use crate::testing::{self, PodBuilder};

    /// The gated pod `uid` of `group` naming `queue`, asking for nothing.
    fn pod(uid: &str, group: Option<&str>, queue: Option<&str>) -> Pod {
        Pod {
            pod_group: group.map(Into::into),
            queue: queue.map(Into::into),
            requests: Resources::new(),
            ..testing::pod(uid).gated()
        }
    }

    #[test]
    fn each_group_and_queue_only_pod_is_read_once_with_its_queue_and_live_members() {
        let mut s = State::default();
        s.apply_pod_group(PodGroup::new(GroupKey::new("ns", "a"), 2, "research"));
        s.apply_pod(pod("a1", Some("a"), Some("ignored")));
        s.apply_pod(Pod {
            phase: PodPhase::Succeeded,
            ..pod("a2", Some("a"), None)
        });
        s.apply_pod(pod("b1", Some("b"), None));
        s.apply_pod(pod("b2", Some("b"), Some("batch")));
        s.apply_pod(pod("c1", Some("c"), None));
        s.apply_pod(pod("lone", None, Some("batch")));
        s.apply_pod(pod("plain", None, None));

        let unshown = Unshown {
            released: &|uid| uid == "b1",
            ..Unshown::none()
        };
        let groups = Groups::of(&s, unshown, 0);
        // Key, queue, gang size, and each live member with whether it still waits at the gate.
        type Read<'a> = (String, &'a str, u32, Vec<(&'a str, bool)>);
        let read: Vec<Read> = groups
            .all
            .iter()
            .map(|g| {
                let members = groups
                    .members(g)
                    .iter()
                    .map(|m| (m.member.pod.uid.as_str(), m.gated))
                    .collect();
                (
                    g.group_key(&groups).to_string(),
                    g.queue,
                    g.min_member,
                    members,
                )
            })
            .collect();
        assert_eq!(
            read,
            vec![
                ("ns/a".into(), "research", 2, vec![("a1", true)]),
                ("ns/b".into(), "batch", 1, vec![("b1", false), ("b2", true)]),
                ("ns/c".into(), DEFAULT_QUEUE, 1, vec![("c1", true)]),
                (
                    GroupKey::lone(&s.pods()["lone"]).to_string(),
                    "batch",
                    1,
                    vec![("lone", true)]
                ),
            ]
        );
    }
}
