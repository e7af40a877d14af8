//! What the controller reads from the cache in one pass, on a snapshot: per group, the
//! member counts and waiting reasons; per queue, what its pods hold and what they wait for.
//!
//! Kept to counting and summing; every decision is taken on the [`Observation`] afterwards.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;

use crate::api::PodGroupPhase;
use gangplank_core::model::{GroupKey, Pod, PodPhase, Resources, State, Workload};

use super::status::Members;

/// Enough of a pod to put an Event on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        }
    }

    /// The pod as an Event's `regarding`.
    pub fn reference(&self) -> ObjectReference {
        crate::events::pod_reference(&self.namespace, &self.name, &self.uid)
    }
}

/// What pods that name a group with no PodGroup ask for, to create it or say what is missing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// The annotation `scheduling.gangplank.dev/min-member` of the oldest member carrying it.
    pub min_member: Option<u32>,
    /// The queue of the oldest member naming one.
    pub queue: Option<String>,
    /// Members not finished and not bound, oldest first: the pods that wait for the group.
    pub waiting: Vec<PodRef>,
    /// The workload of the group's name that the oldest member belonging to one belongs to
    /// (see `crate::api::workloads::of`).
    pub workload: Option<Arc<Workload>>,
    /// The controller every member carrying the min-member annotation names, when they all
    /// name the same one (`Pod::controller`).
    pub controller: Option<Arc<Workload>>,
    /// The LeaderWorkerSet whose replica the group is, as its leader names it
    /// (`Pod::leader_worker_set`).
    pub leader_worker_set: Option<Arc<str>>,
}

/// One group as the cache shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupView {
    /// Its PodGroup exists.
    pub has_pod_group: bool,
    pub members: Members,
    /// Why the extender last refused to claim room for the gang.
    pub wait_reason: Option<String>,
    /// Only for a group with live members and no PodGroup.
    pub asked: Option<Asked>,
    /// The room its admission keeps for members still to come, while it does
    /// (`gangplank_core::model::owed`), `pods` aside.
    pub kept: Option<Resources>,
}

/// What a queue's pods hold and want.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueUsage {
    /// Requests of the queue's pods bound to a node and not finished.
    pub allocated: Resources,
    /// Requests of the queue's pods not finished and not bound yet (gated ones included).
    pub waiting: Resources,
    /// Its live pods in no group, each a group of one, counted as a PodGroup's phase would
    /// count them: still gated, released but not bound, bound.
    pub lone: GroupCounts,
}

/// PodGroups of one queue by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    pub pending: i32,
    pub admitted: i32,
    pub running: i32,
}

impl GroupCounts {
    pub fn add(&mut self, phase: PodGroupPhase) {
        match phase {
            PodGroupPhase::Pending => self.pending += 1,
            PodGroupPhase::Inqueue => self.admitted += 1,
            PodGroupPhase::Running => self.running += 1,
            PodGroupPhase::Completed | PodGroupPhase::Failed | PodGroupPhase::Unknown => {}
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Observation {
    pub groups: HashMap<GroupKey, GroupView>,
    pub queues: HashMap<String, QueueUsage>,
}

/// Counts and sums over the cache's state at `now` (Unix seconds; see the module docs).
pub fn observe(state: &State, now: i64) -> Observation {
    let mut out = Observation::default();
    for (key, group) in state.groups() {
        let spec_queue = group.spec.as_ref().map(|s| s.queue.as_str());
        let mut view = GroupView {
            has_pod_group: group.spec.is_some(),
            wait_reason: state.ledger().wait_reasons().get(key).cloned(),
            kept: group.keeps_room_at(now).then(|| {
                let mut kept = Resources::new();
                group.owed().iter().for_each(|m| kept.add(&m.requests));
                kept.set("pods", 0);
                kept
            }),
            ..GroupView::default()
        };
        let mut live_unbound: Vec<&Pod> = Vec::new();
        for pod in group.members.values().map(|m| m.pod.as_ref()) {
            count(&mut view.members, pod);
            if let Some(queue) = spec_queue.or(pod.queue.as_deref()) {
                add_usage(&mut out.queues, queue, pod);
            }
            // Only pods Gangplank holds (its webhook gated or marked them) wait for the group:
            // others, such as pods with Volcano's annotation that never reached the webhook,
            // get no PodGroup and no Event.
            let held = pod.awaits_admission() || pod.marked;
            if group.spec.is_none() && held && !pod.phase.is_terminal() && pod.node_name.is_none() {
                live_unbound.push(pod);
            }
        }
        if group.spec.is_none() && !live_unbound.is_empty() {
            view.asked = Some(asked(&key.name, live_unbound));
        }
        out.groups.insert(key.clone(), view);
    }
    for pod in state.queue_only().values().map(|m| m.pod.as_ref()) {
        if let Some(queue) = &pod.queue {
            add_usage(&mut out.queues, queue, pod);
            if let Some(usage) = out.queues.get_mut(queue.as_str())
                && !pod.phase.is_terminal()
            {
                usage.lone.add(if pod.node_name.is_some() {
                    PodGroupPhase::Running
                } else if pod.awaits_admission() {
                    PodGroupPhase::Pending
                } else {
                    PodGroupPhase::Inqueue
                });
            }
        }
    }
    out
}

fn count(m: &mut Members, pod: &Pod) {
    if pod.disrupted && (pod.phase == PodPhase::Failed || pod.deleting) {
        // Evicted, stopped or on its way out: no longer part of what the gang placed or
        // released.
        m.evicted += 1;
        return;
    }
    let bound = pod.node_name.is_some();
    if !pod.awaits_admission() {
        m.admitted += 1;
    }
    if bound {
        m.scheduled += 1;
    }
    match pod.phase {
        PodPhase::Succeeded => m.succeeded += 1,
        PodPhase::Failed => m.failed += 1,
        PodPhase::Running | PodPhase::Pending | PodPhase::Unknown => {
            m.live += 1;
            if pod.awaits_admission() {
                m.gated += 1;
            }
            if bound {
                m.bound_live += 1;
            }
            if pod.phase == PodPhase::Running {
                m.running += 1;
            }
        }
    }
}

fn add_usage(queues: &mut HashMap<String, QueueUsage>, queue: &str, pod: &Pod) {
    if pod.phase.is_terminal() {
        return;
    }
    let usage = match queues.get_mut(queue) {
        Some(usage) => usage,
        None => queues.entry(queue.to_owned()).or_default(),
    };
    if pod.node_name.is_some() {
        usage.allocated.add(&pod.requests);
    } else {
        usage.waiting.add(&pod.requests);
    }
}

/// The live members of `group` not bound to a node yet, oldest first.
pub fn unbound_members(state: &State, group: &GroupKey) -> Vec<PodRef> {
    let mut pods: Vec<&Pod> = state
        .members(group)
        .map(|p| p.as_ref())
        .filter(|p| !p.phase.is_terminal() && p.node_name.is_none())
        .collect();
    oldest_first(&mut pods);
    pods.into_iter().map(PodRef::of).collect()
}

fn oldest_first(pods: &mut [&Pod]) {
    pods.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
}

/// The controller all `pods` that ask by annotation name, if they name the same one.
fn common_controller(pods: &[&Pod]) -> Option<Arc<Workload>> {
    let mut asking = pods.iter().filter(|p| p.min_member.is_some());
    let first = asking.next()?.controller.clone()?;
    asking
        .all(|p| p.controller.as_ref().is_some_and(|c| c.uid == first.uid))
        .then_some(first)
}

fn asked(group: &str, mut pods: Vec<&Pod>) -> Asked {
    oldest_first(&mut pods);
    Asked {
        min_member: pods.iter().find_map(|p| p.min_member),
        queue: pods.iter().find_map(|p| p.queue.clone()),
        waiting: pods.iter().map(|p| PodRef::of(p)).collect(),
        workload: pods
            .iter()
            .filter_map(|p| p.workload.as_ref())
            .find(|w| w.name == group)
            .cloned(),
        controller: common_controller(&pods),
        leader_worker_set: pods.iter().find_map(|p| p.leader_worker_set.clone()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::labels::ADMISSION_GATE;
    use crate::testing;

    fn pod(uid: &str, group: Option<&str>, queue: Option<&str>) -> Pod {
        Pod {
            pod_group: group.map(Into::into),
            queue: queue.map(Into::into),
            ..testing::pod(uid, 1000)
        }
    }

    fn gated(p: Pod) -> Pod {
        Pod {
            scheduling_gates: vec![ADMISSION_GATE.into()],
            ..p
        }
    }

    fn bound(p: Pod, phase: PodPhase) -> Pod {
        Pod {
            node_name: Some("n1".into()),
            phase,
            ..p
        }
    }

    fn group(s: &mut State, name: &str, queue: &str) {
        s.apply_pod_group(testing::pod_group(name, 2, queue, Duration::from_secs(60)));
    }

    #[test]
    fn members_asking_by_annotation_share_their_controller_only_when_they_all_name_it() {
        let controlled = |uid: &str, controller: &str| Pod {
            min_member: Some(2),
            controller: Some(Arc::new(Workload {
                kind: "StatefulSet".into(),
                uid: controller.into(),
                ..Workload::default()
            })),
            ..pod(uid, Some("ring"), None)
        };
        let (a, b) = (controlled("a", "sts"), controlled("b", "sts"));
        let shared = common_controller(&[&a, &b]).expect("one controller");
        assert_eq!(shared.uid, "sts");
        let other = controlled("c", "another");
        assert_eq!(common_controller(&[&a, &other]), None);
        let by_hand = pod("d", Some("ring"), None);
        assert_eq!(common_controller(&[&by_hand]), None);
    }

    #[test]
    fn members_are_counted_by_gate_binding_and_phase() {
        let mut s = State::default();
        group(&mut s, "g", "q");
        s.apply_pod(gated(pod("a", Some("g"), None)));
        s.apply_pod(pod("b", Some("g"), None));
        s.apply_pod(bound(pod("c", Some("g"), None), PodPhase::Running));
        s.apply_pod(bound(pod("d", Some("g"), None), PodPhase::Succeeded));
        s.apply_pod(bound(pod("e", Some("g"), None), PodPhase::Failed));
        let mut evicted = bound(pod("f", Some("g"), None), PodPhase::Failed);
        evicted.disrupted = true;
        s.apply_pod(evicted);
        let mut leaving = bound(pod("h", Some("g"), None), PodPhase::Running);
        (leaving.disrupted, leaving.deleting) = (true, true);
        s.apply_pod(leaving);
        let view = &observe(&s, 0).groups[&GroupKey::new("ns", "g")];
        assert_eq!(
            view.members,
            Members {
                live: 3,
                gated: 1,
                admitted: 4,
                scheduled: 3,
                bound_live: 1,
                running: 1,
                succeeded: 1,
                failed: 1,
                evicted: 2,
            }
        );
        assert!(view.has_pod_group);
        assert_eq!(view.asked, None);
    }

    #[test]
    fn a_queue_holds_its_groups_bound_pods_and_wants_their_unbound_ones() {
        let mut s = State::default();
        group(&mut s, "g", "research");
        // The pod's own queue label does not matter once its PodGroup names a queue.
        s.apply_pod(bound(pod("a", Some("g"), Some("other")), PodPhase::Running));
        s.apply_pod(gated(pod("b", Some("g"), None)));
        s.apply_pod(bound(pod("done", Some("g"), None), PodPhase::Succeeded));
        s.apply_pod(bound(
            pod("solo", None, Some("research")),
            PodPhase::Running,
        ));
        s.apply_pod(bound(pod("plain", None, None), PodPhase::Running));
        let queues = observe(&s, 0).queues;
        let research = &queues["research"];
        assert_eq!(
            research.allocated,
            Resources::from([("cpu", 2000), ("pods", 2)])
        );
        assert_eq!(
            research.waiting,
            Resources::from([("cpu", 1000), ("pods", 1)])
        );
        assert_eq!(queues.len(), 1, "{queues:?}");
    }

    #[test]
    fn pods_of_a_group_without_pod_group_say_what_they_ask_for_oldest_first() {
        let mut s = State::default();
        s.apply_pod(Pod {
            created: 20,
            min_member: Some(3),
            ..gated(pod("late", Some("ghost"), Some("q2")))
        });
        s.apply_pod(Pod {
            created: 10,
            ..gated(pod("early", Some("ghost"), Some("q1")))
        });
        s.apply_pod(Pod {
            created: 5,
            ..bound(pod("gone", Some("ghost"), None), PodPhase::Succeeded)
        });
        let view = &observe(&s, 0).groups[&GroupKey::new("ns", "ghost")];
        assert!(!view.has_pod_group);
        let asked = view.asked.as_ref().unwrap();
        assert_eq!(asked.min_member, Some(3));
        assert_eq!(asked.queue.as_deref(), Some("q1"));
        let names: Vec<&str> = asked.waiting.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["early", "late"]);
    }

    #[test]
    fn a_replica_whose_leader_alone_gives_a_size_is_owned_by_that_leader() {
        // As the cache converts a LeaderWorkerSet replica: the leader names itself, each worker
        // (controlled by the replica's worker StatefulSet) names nothing.
        let mut s = State::default();
        let leader = Arc::new(Workload {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "lws-0".into(),
            uid: "leader".into(),
        });
        s.apply_pod(Pod {
            min_member: Some(4),
            controller: Some(leader.clone()),
            ..gated(pod("leader", Some("k1"), Some("q")))
        });
        for i in 1..4 {
            s.apply_pod(gated(pod(&format!("worker-{i}"), Some("k1"), Some("q"))));
        }
        let view = &observe(&s, 0).groups[&GroupKey::new("ns", "k1")];
        let asked = view.asked.as_ref().unwrap();
        assert_eq!(asked.min_member, Some(4));
        assert_eq!(asked.controller, Some(leader));
        assert_eq!(asked.waiting.len(), 4);
    }

    #[test]
    fn pods_gangplank_does_not_hold_ask_for_no_pod_group() {
        let mut s = State::default();
        // Named by Volcano's annotation, but never through the webhook: no gate, no marker.
        s.apply_pod(pod("stray", Some("ghost"), None));
        let view = &observe(&s, 0).groups[&GroupKey::new("ns", "ghost")];
        assert_eq!(view.asked, None);
        s.apply_pod(Pod {
            marked: true,
            ..pod("ungated", Some("ghost"), None)
        });
        let view = &observe(&s, 0).groups[&GroupKey::new("ns", "ghost")];
        let names: Vec<&str> = (view.asked.as_ref().unwrap().waiting.iter())
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["ungated"]);
    }

    #[test]
    fn a_pod_reference_names_a_core_v1_pod() {
        let reference = PodRef {
            namespace: "ml".into(),
            name: "w-0".into(),
            uid: "u".into(),
        }
        .reference();
        assert_eq!(reference.api_version.as_deref(), Some("v1"));
        assert_eq!(reference.kind.as_deref(), Some("Pod"));
        assert_eq!(reference.uid.as_deref(), Some("u"));
    }
}
