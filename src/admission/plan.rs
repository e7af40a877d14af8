//! Which waiting pods to release now: a pure function of the cache's state.
//!
//! A pod that carries Gangplank's scheduling gate waits for its group to be admitted. A group
//! is admitted, and the gate removed from all its waiting members in one pass, when
//! - its PodGroup exists (a pod naming a group with no PodGroup keeps waiting; the controller
//!   creates PodGroups for Jobs, and says so in an event otherwise), and
//! - at least `minMember` of its members exist and have not finished, so the whole gang
//!   reaches the scheduler together and its claim is taken for all of it at once.
//!
//! A pod with a queue but no group is a group of one and is admitted on its own.
//!
//! This is admission without quotas: it keeps gangs together on their way to the scheduler,
//! where the extender's claims keep them whole. Fair-share ordering, queue quotas and
//! capacity checks come on top of it (see the queues issue) and change only this file.

use crate::cache::{GroupKey, Pod, State};

/// One group (or group-of-one pod) to release, with the members still gated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// `None` for a pod with a queue but no group.
    pub group: Option<GroupKey>,
    pub pods: Vec<PodRef>,
}

/// Enough of a pod to patch it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The gates on the pod as the cache saw them (the patch checks they did not change).
    pub gates: Vec<String>,
}

impl PodRef {
    fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            gates: pod.scheduling_gates.clone(),
        }
    }
}

/// A group that waits, and why, for status and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub group: GroupKey,
    pub why: String,
}

/// What one admission pass decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Oldest first.
    pub admit: Vec<Admission>,
    pub waiting: Vec<Waiting>,
}

/// Decides which gated pods to release.
pub fn decide(state: &State) -> Decision {
    let mut decision = Decision::default();
    let mut admit: Vec<(i64, Admission)> = Vec::new();
    for (key, group) in &state.groups {
        let members: Vec<&Pod> = group
            .members
            .iter()
            .filter_map(|uid| state.pods.get(uid))
            .map(|p| p.as_ref())
            .filter(|p| !p.phase.is_terminal())
            .collect();
        let gated: Vec<&Pod> = members
            .iter()
            .copied()
            .filter(|p| p.awaits_admission())
            .collect();
        if gated.is_empty() {
            continue;
        }
        let Some(spec) = &group.spec else {
            decision.waiting.push(Waiting {
                group: key.clone(),
                why: format!(
                    "no PodGroup {key}: create one (minMember is the gang size), or label a Job with a queue so that Gangplank creates it"
                ),
            });
            continue;
        };
        if members.len() < spec.min_member as usize {
            decision.waiting.push(Waiting {
                group: key.clone(),
                why: format!(
                    "{} of minMember {} pods exist; waiting for the rest before releasing any",
                    members.len(),
                    spec.min_member
                ),
            });
            continue;
        }
        let oldest = gated.iter().map(|p| p.created).min().unwrap_or(0);
        admit.push((
            oldest,
            Admission {
                group: Some(key.clone()),
                pods: gated.into_iter().map(PodRef::of).collect(),
            },
        ));
    }
    for pod in state.pods.values() {
        if pod.pod_group.is_none() && pod.awaits_admission() && !pod.phase.is_terminal() {
            admit.push((
                pod.created,
                Admission {
                    group: None,
                    pods: vec![PodRef::of(pod)],
                },
            ));
        }
    }
    admit.sort_by(|a, b| (a.0, &a.1.group).cmp(&(b.0, &b.1.group)));
    decision.admit = admit.into_iter().map(|(_, a)| a).collect();
    decision.waiting.sort_by(|a, b| a.group.cmp(&b.group));
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::labels::ADMISSION_GATE;
    use crate::cache::{PodGroup, PodPhase, Resources};
    use std::time::Duration;

    fn pod(uid: &str, group: Option<&str>, gated: bool, created: i64) -> Pod {
        Pod {
            uid: uid.into(),
            namespace: "ns".into(),
            name: uid.into(),
            pod_group: group.map(Into::into),
            queue: Some("q".into()),
            scheduling_gates: if gated {
                vec![ADMISSION_GATE.into()]
            } else {
                vec![]
            },
            created,
            ..Default::default()
        }
    }

    fn group(s: &mut State, name: &str, min: u32) {
        s.apply_pod_group(PodGroup {
            key: GroupKey::new("ns", name),
            min_member: min,
            max_member: None,
            queue: "q".into(),
            schedule_timeout: Duration::from_secs(60),
            min_resources: Resources::new(),
        });
    }

    #[test]
    fn a_gang_is_released_only_once_min_member_pods_exist_and_then_all_at_once() {
        let mut s = State::default();
        group(&mut s, "g", 3);
        s.apply_pod(pod("a", Some("g"), true, 10));
        s.apply_pod(pod("b", Some("g"), true, 11));
        let d = decide(&s);
        assert!(d.admit.is_empty());
        assert_eq!(
            d.waiting[0].why,
            "2 of minMember 3 pods exist; waiting for the rest before releasing any"
        );
        s.apply_pod(pod("c", Some("g"), true, 12));
        let d = decide(&s);
        let uids: Vec<&str> = d.admit[0].pods.iter().map(|p| p.uid.as_str()).collect();
        assert_eq!(uids, vec!["a", "b", "c"]);
    }

    #[test]
    fn a_gang_without_a_pod_group_waits_and_says_what_to_create() {
        let mut s = State::default();
        s.apply_pod(pod("a", Some("ghost"), true, 1));
        let d = decide(&s);
        assert!(d.admit.is_empty());
        assert!(
            d.waiting[0]
                .why
                .starts_with("no PodGroup ns/ghost: create one")
        );
    }

    #[test]
    fn a_pod_with_a_queue_but_no_group_is_released_alone() {
        let mut s = State::default();
        s.apply_pod(pod("solo", None, true, 5));
        s.apply_pod(pod("free", None, false, 1));
        let d = decide(&s);
        assert_eq!(d.admit.len(), 1);
        assert_eq!(d.admit[0].group, None);
        assert_eq!(d.admit[0].pods[0].uid, "solo");
    }

    #[test]
    fn finished_members_do_not_count_and_released_groups_are_oldest_first() {
        let mut s = State::default();
        group(&mut s, "new", 1);
        group(&mut s, "old", 2);
        s.apply_pod(pod("n", Some("new"), true, 50));
        s.apply_pod(pod("o1", Some("old"), true, 10));
        s.apply_pod(Pod {
            phase: PodPhase::Succeeded,
            ..pod("o2", Some("old"), false, 10)
        });
        assert_eq!(decide(&s).admit.len(), 1, "old has one live member of two");
        s.apply_pod(pod("o3", Some("old"), false, 11));
        let order: Vec<String> = decide(&s)
            .admit
            .iter()
            .map(|a| a.group.as_ref().unwrap().name.clone())
            .collect();
        assert_eq!(order, vec!["old", "new"]);
    }
}
