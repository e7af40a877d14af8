//! What the admission pass and reclaim's plan read of every group and every pod of a queue in no
//! group, derived once per snapshot ([`Groups::of`]) and shared by both: its queue (the
//! PodGroup's, else the first member that names one, else the default queue), its gang size,
//! and its live members with whether each holds room on a node and whether it still waits at
//! the gate. A group admitted ahead of its members ([`crate::model::Ahead`]) is seen with its
//! placeholders: all of them, gated, while it has no member and no admission that holds; the
//! placeholders of the members not created yet, released, while its admission holds.

use std::ops::Range;

use crate::model::names::DEFAULT_QUEUE;
use crate::model::{GroupKey, Member, PodGroup, State};

/// A live member, as the pass sees it.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'s> {
    pub member: &'s Member,
    /// Bound, or reserved by the extender.
    pub placed: bool,
    /// It carries the admission gate and the loop has not just released it.
    pub gated: bool,
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
    members: Range<usize>,
}

/// Every group in key order, then every live pod of a queue in no group.
#[derive(Debug, Default)]
pub struct Groups<'s> {
    pub all: Vec<GroupFacts<'s>>,
    members: Vec<Seen<'s>>,
}

impl<'s> Groups<'s> {
    /// The facts of `state` at `now` (Unix seconds), counting the pods for which
    /// `released(uid)` is true as released although the snapshot still shows them gated: the
    /// admission loop's patches that the watch has not shown yet, so that a pass right after
    /// another does not hand out the same room twice.
    pub fn of(state: &'s State, released: &dyn Fn(&str) -> bool, now: i64) -> Groups<'s> {
        let mut groups = Groups {
            all: Vec::with_capacity(state.groups().len() + state.queue_only().len()),
            members: Vec::new(),
        };
        let seen = |uid: &str, m: &'s Member| Seen {
            member: m,
            placed: state.holds_room(uid, m),
            gated: m.gated && !released(uid),
        };
        for (key, group) in state.groups() {
            let start = groups.members.len();
            groups.members.extend(
                group
                    .members
                    .iter()
                    .filter(|(_, m)| m.live)
                    .map(|(uid, m)| seen(uid, m)),
            );
            let spec = group.spec.as_deref();
            if let Some((spec, ahead)) = spec.and_then(|s| Some((s, s.ahead.as_ref()?))) {
                let created = groups.members.len() - start;
                let holds = ahead.holds_at(now, spec.schedule_timeout);
                let placeholders = if holds {
                    group.placeholders.get(created..).unwrap_or_default()
                } else if created == 0 {
                    &group.placeholders[..]
                } else {
                    &[]
                };
                groups.members.extend(placeholders.iter().map(|m| Seen {
                    gated: !holds && !released(&m.pod.uid),
                    ..seen(&m.pod.uid, m)
                }));
            }
            let members = &groups.members[start..];
            let queue: &str = match spec {
                Some(spec) => &spec.queue,
                None => members
                    .iter()
                    .find_map(|m| m.member.pod.queue.as_deref())
                    .unwrap_or(DEFAULT_QUEUE),
            };
            groups.all.push(GroupFacts {
                key: Some(key),
                spec,
                queue,
                namespace: &key.namespace,
                name: &key.name,
                min_member: spec.map_or(1, |s| s.min_member),
                members: start..groups.members.len(),
            });
        }
        for (uid, m) in state.queue_only().iter().filter(|(_, m)| m.live) {
            let pod = m.pod.as_ref();
            let Some(queue) = pod.queue.as_deref() else {
                continue;
            };
            let start = groups.members.len();
            groups.members.push(seen(uid, m));
            groups.all.push(GroupFacts {
                key: None,
                spec: None,
                queue,
                namespace: &pod.namespace,
                name: &pod.name,
                min_member: 1,
                members: start..start + 1,
            });
        }
        groups
    }

    /// The live members of `group`.
    pub fn members(&self, group: &GroupFacts<'s>) -> &[Seen<'s>] {
        &self.members[group.members.clone()]
    }
}

impl GroupFacts<'_> {
    /// Its key: the group's, or the queue-only pod's as a group of one.
    pub fn group_key(&self, groups: &Groups) -> GroupKey {
        match self.key {
            Some(key) => key.clone(),
            None => GroupKey::lone(&groups.members(self)[0].member.pod),
        }
    }
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

        let groups = Groups::of(&s, &|uid| uid == "b1", 0);
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
