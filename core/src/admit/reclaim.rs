//! Reclaim, the elastic yield and priority preemption after an admission pass: which running
//! gangs to evict so that a group waiting for room gets the room elastic members (beyond their
//! gang's `minMember`; a gang of sub-groups' whole instances beyond its minimum) hold, in its own queue or another, groups of queues below their
//! deserved share get the room queues above theirs borrowed, and groups of higher priority get
//! the room (or their queue's capability) that lower-priority gangs of their queue hold.
//!
//! [`plan`] builds the input of [`policy::reclaim`](crate::policy::reclaim) from the state and
//! the pass's [`Decision`] (the groups that waited only for room, each queue's allocation and
//! deserved share, what the pass just admitted) and turns the verdicts into pods to evict and,
//! per starved group, a line for its status, so a starved group's `Admitted` condition says it
//! waits for reclaim.
//!
//! Victims are gangs of PodGroups and pods of a queue in no group (groups of one, keyed by
//! their namespace and UID); a gang with a member on a cordoned or unknown node is left alone
//! (room freed there does not help the starved group, and the gang must go whole or not at
//! all). Pods going away (deleting, or their eviction requested) count as room being freed and
//! are never picked again.
//!
//! **Cost.** `plan` runs on every admission pass. In the common case (no queue with a starved
//! group below its deserved share in what the group needs, no running elastic members, and no
//! pod going away) the plan is known to be empty before the costly part of the input, the
//! nodes' free room and the running gangs, is built: that check reads only the pass's
//! [`Decision`] and the pods.

mod input;

use std::collections::{BTreeMap, HashSet};

use super::groups::Groups;
use super::plan::Decision;
use crate::model::{GroupKey, Pod, State};
use crate::policy::reclaim::{self as policy, ReclaimVerdict};
use input::{Input, input};

/// A pod to evict (or, in [`Reclaim::pod`], the pod evictions make room for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl Victim {
    pub fn of(pod: &Pod) -> Victim {
        Victim {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        }
    }
}

/// A gang to evict (whole, or its elastic members beyond `minMember`), or a pod of a queue
/// in no group (`lone`: a group of one, keyed by its namespace and UID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangVictim {
    pub group: GroupKey,
    pub queue: String,
    pub priority: i32,
    pub pods: Vec<Victim>,
    pub whole: bool,
    pub lone: bool,
}

impl GangVictim {
    /// "gang ns/name", "elastic members of gang ns/name" or "pod ns/name".
    pub fn subject(&self) -> String {
        match (self.lone, self.pods.first()) {
            (true, Some(pod)) => format!("pod {}/{}", pod.namespace, pod.name),
            _ if self.whole => format!("gang {}", self.group),
            _ => format!("elastic members of gang {}", self.group),
        }
    }
}

/// Why gangs are evicted for a starved group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Their queues hold more than their deserved share, the group's less.
    Reclaim,
    /// They are of the group's queue, and of lower priority.
    Preemption,
    /// They are elastic members (beyond their gang's `minMember`), of any priority, of the
    /// group's queue or of another: they yield to any gang's minimum.
    Yield,
}

impl Cause {
    /// The word for logs.
    pub fn noun(self) -> &'static str {
        match self {
            Cause::Reclaim => "reclaim",
            Cause::Preemption => "preemption",
            Cause::Yield => "elastic yield",
        }
    }

    /// What the starved group's status line says it waits for.
    fn awaited(self) -> &'static str {
        match self {
            Cause::Yield => "elastic members to yield",
            other => other.noun(),
        }
    }
}

/// Room to take back for one starved group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reclaim {
    pub group: GroupKey,
    /// The starved pod, when `group` is a pod of a queue in no group ([`GroupKey::lone`]).
    pub pod: Option<Victim>,
    pub queue: String,
    pub cause: Cause,
    pub victims: Vec<GangVictim>,
}

impl Reclaim {
    /// "gang ns/name", or "pod ns/name" for a pod of a queue in no group.
    pub fn subject(&self) -> String {
        match &self.pod {
            Some(pod) => format!("pod {}/{}", pod.namespace, pod.name),
            None => format!("gang {}", self.group),
        }
    }
}

/// What reclaim decided on one pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReclaimPlan {
    pub reclaims: Vec<Reclaim>,
    /// For each starved group that waits for reclaim, what to add to its waiting reason.
    pub waiting: BTreeMap<GroupKey, String>,
}

/// Decides what to reclaim after `decision`, made on the same `groups` of `state` (see the
/// module docs); `evicting(uid)` says a pod's eviction was requested, `refused(group)` that a
/// gang is left alone for now.
pub fn plan<'s>(
    state: &'s State,
    groups: &Groups<'s>,
    decision: &Decision,
    evicting: &dyn Fn(&str) -> bool,
    refused: &dyn Fn(&GroupKey) -> bool,
) -> ReclaimPlan {
    let Some(Input {
        policy: input,
        freeing,
        lone,
    }) = input(state, groups, decision, evicting, refused)
    else {
        return ReclaimPlan::default();
    };
    let queue_name = |q: usize| input.queues[q].name.clone();
    let lone_starved: HashSet<&GroupKey> = decision
        .short_of_room
        .iter()
        .filter(|w| w.lone)
        .map(|w| &w.group)
        .collect();
    let mut out = ReclaimPlan::default();
    for ((key, verdict), starved) in policy::plan(&input).into_iter().zip(&input.starved) {
        let queue = queue_name(starved.queue);
        let (cause, evictions) = match verdict {
            ReclaimVerdict::Fits if !freeing.is_empty() => {
                out.waiting.insert(
                    key,
                    "waiting for evicted pods, still going away, to free their room".to_owned(),
                );
                continue;
            }
            ReclaimVerdict::Fits => continue,
            ReclaimVerdict::No(why) => {
                tracing::debug!(group = %key, why, "no reclaim");
                continue;
            }
            ReclaimVerdict::Reclaim(evictions) => (Cause::Reclaim, evictions),
            ReclaimVerdict::Preempt(evictions) => (Cause::Preemption, evictions),
            ReclaimVerdict::Yield(evictions) => (Cause::Yield, evictions),
        };
        let pod = lone_starved
            .contains(&key)
            .then(|| state.pods().get(&*key.name).map(|p| Victim::of(p)))
            .flatten();
        out.evict(state, &input, &lone, key, pod, queue, cause, evictions);
    }
    out
}

impl ReclaimPlan {
    /// Adds the evictions of one verdict, and the line for the starved group's status.
    #[allow(clippy::too_many_arguments)]
    fn evict(
        &mut self,
        state: &State,
        input: &policy::Input<GroupKey>,
        lone: &HashSet<GroupKey>,
        group: GroupKey,
        pod: Option<Victim>,
        queue: String,
        cause: Cause,
        evictions: Vec<policy::Eviction<GroupKey>>,
    ) {
        let victims: Vec<GangVictim> = evictions
            .into_iter()
            .map(|e| GangVictim {
                pods: e
                    .pods
                    .iter()
                    .filter_map(|uid| state.pods().get(uid))
                    .map(|p| Victim::of(p))
                    .collect(),
                queue: input.queues[e.queue].name.clone(),
                priority: input
                    .gangs
                    .iter()
                    .find(|g| g.key == e.gang)
                    .map_or(0, |g| g.priority),
                lone: lone.contains(&e.gang),
                group: e.gang,
                whole: e.whole,
            })
            .collect();
        self.waiting.insert(
            group.clone(),
            format!(
                "waiting for {}: evicting {}",
                cause.awaited(),
                describe(cause, &victims)
            ),
        );
        self.reclaims.push(Reclaim {
            group,
            pod,
            queue,
            cause,
            victims,
        });
    }
}

/// "gang ns/a (queue qa, above its deserved share), elastic members of gang ns/b (...)".
fn describe(cause: Cause, victims: &[GangVictim]) -> String {
    victims
        .iter()
        .map(|v| {
            let what = v.subject();
            match cause {
                Cause::Reclaim => format!("{what} (queue {}, above its deserved share)", v.queue),
                Cause::Preemption => format!("{what} (priority {})", v.priority),
                Cause::Yield => format!("{what} (queue {})", v.queue),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::groups::Unshown;
    use crate::model::Resources;

    /// [`input`] on the group facts of `state`, with nothing being evicted or refused.
    fn input_of(state: &State, decision: &Decision) -> Option<Input> {
        let groups = Groups::of(state, Unshown::none(), crate::testing::unix_now());
        input(state, &groups, decision, &|_| false, &|_| false)
    }

    /// [`plan`] on the group facts of `state` as a pass derives them.
    fn plan_on(
        state: &State,
        decision: &Decision,
        evicting: &dyn Fn(&str) -> bool,
        refused: &dyn Fn(&GroupKey) -> bool,
    ) -> ReclaimPlan {
        plan(
            state,
            &Groups::of(state, Unshown::none(), crate::testing::unix_now()),
            decision,
            evicting,
            refused,
        )
    }
    use crate::model::{PodGroup, Queue};
    use crate::testing::{PodBuilder, decide_now, node, node_of, pod, pod_group};

    /// `pod` running on `node`, or still behind the admission gate when `node` is `None`.
    fn running_on(node: Option<String>, pod: Pod) -> Pod {
        match node {
            Some(node) => pod.running_on(&node),
            None => pod.gated(),
        }
    }

    /// Queues `a` and `b` of weight 1 and one node of 8 CPUs that `a` fills with two gangs of
    /// 2 x 2 CPUs (`a1` older than `a2`); `b` has a gang of 2 x 2 CPUs waiting.
    fn borrowed() -> State {
        let mut s = State::default();
        s.apply_queue(Queue::new("a"));
        s.apply_queue(Queue::new("b"));
        s.apply_node(node("n1", 8_000));
        for (name, queue, created, running) in [
            ("a1", "a", 1, true),
            ("a2", "a", 2, true),
            ("b1", "b", 3, false),
        ] {
            s.apply_pod_group(pod_group(name, 2, queue));
            for i in 0..2 {
                s.apply_pod(running_on(
                    running.then(|| "n1".into()),
                    pod(format!("{name}-{i}"))
                        .in_group(name)
                        .created(created)
                        .cpu(2_000),
                ));
            }
        }
        s
    }

    fn victims(plan: &ReclaimPlan) -> Vec<(String, Vec<String>)> {
        plan.reclaims
            .iter()
            .flat_map(|r| &r.victims)
            .map(|v| {
                (
                    v.group.name.to_string(),
                    v.pods.iter().map(|p| p.name.clone()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn the_youngest_gang_of_the_borrower_is_evicted_for_the_starved_group_and_it_says_so() {
        let s = borrowed();
        let d = decide_now(&s);
        let plan = plan_on(&s, &d, &|_| false, &|_| false);
        assert_eq!(
            victims(&plan),
            vec![("a2".into(), vec!["a2-0".into(), "a2-1".into()])]
        );
        assert_eq!(plan.reclaims[0].group, GroupKey::new("ns", "b1"));
        assert_eq!(plan.reclaims[0].cause, Cause::Reclaim);
        assert_eq!(plan.reclaims[0].victims[0].queue, "a");
        assert_eq!(
            plan.waiting[&GroupKey::new("ns", "b1")],
            "waiting for reclaim: evicting gang ns/a2 (queue a, above its deserved share)"
        );
    }

    /// [`borrowed`], with `b1` in queue `a` at priority 10 instead: `a` is full of its own
    /// gangs of priority 0.
    fn urgent_in_full_queue() -> State {
        let mut s = borrowed();
        let key = GroupKey::new("ns", "b1");
        let spec = s.groups()[&key].spec.as_deref().unwrap().clone();
        s.apply_pod_group(PodGroup {
            queue: "a".into(),
            ..spec
        });
        for i in 0..2 {
            let p = s.pods()[&format!("b1-{i}")].as_ref().clone();
            s.apply_pod(Pod { priority: 10, ..p });
        }
        s
    }

    #[test]
    fn a_higher_priority_group_preempts_the_youngest_lower_priority_gang_of_its_queue() {
        let s = urgent_in_full_queue();
        let plan = plan_on(&s, &decide_now(&s), &|_| false, &|_| false);
        assert_eq!(
            victims(&plan),
            vec![("a2".into(), vec!["a2-0".into(), "a2-1".into()])]
        );
        assert_eq!(plan.reclaims[0].cause, Cause::Preemption);
        assert_eq!(
            plan.waiting[&GroupKey::new("ns", "b1")],
            "waiting for preemption: evicting gang ns/a2 (priority 0)"
        );
        // Of the same priority, it waits for room like any other.
        let mut same = s.clone();
        for i in 0..2 {
            let p = same.pods()[&format!("b1-{i}")].as_ref().clone();
            same.apply_pod(Pod { priority: 0, ..p });
        }
        let plan = plan_on(&same, &decide_now(&same), &|_| false, &|_| false);
        assert!(plan.reclaims.is_empty(), "{plan:?}");
    }

    #[test]
    fn pods_of_a_queue_in_no_group_are_reclaimed_one_by_one_youngest_first() {
        let mut s = borrowed();
        // Queue a's room is held by four lone pods instead of its two gangs.
        for uid in ["a1-0", "a1-1", "a2-0", "a2-1"] {
            s.delete_pod(uid);
        }
        for i in 0..4 {
            s.apply_pod(
                pod(format!("lone-{i}"))
                    .in_queue("a")
                    .running_on("n1")
                    .created(i)
                    .cpu(2_000),
            );
        }
        let plan = plan_on(&s, &decide_now(&s), &|_| false, &|_| false);
        let victims = &plan.reclaims[0].victims;
        let evicted: Vec<(&str, bool)> = victims
            .iter()
            .map(|v| (v.pods[0].name.as_str(), v.lone))
            .collect();
        assert_eq!(evicted, vec![("lone-3", true), ("lone-2", true)]);
        assert!(victims.iter().all(|v| v.pods.len() == 1 && v.whole));
        assert_eq!(victims[0].subject(), "pod ns/lone-3");
        assert_eq!(victims[0].pods[0].uid, "lone-3");
        assert_eq!(
            plan.waiting[&GroupKey::new("ns", "b1")],
            "waiting for reclaim: evicting pod ns/lone-3 (queue a, above its deserved share), \
             pod ns/lone-2 (queue a, above its deserved share)"
        );
        // A lone pod whose eviction is under way is not picked again.
        let plan = plan_on(&s, &decide_now(&s), &|uid| uid == "lone-3", &|_| false);
        let evicted: Vec<&str> = plan.reclaims[0]
            .victims
            .iter()
            .map(|v| v.pods[0].name.as_str())
            .collect();
        assert_eq!(evicted, vec!["lone-2"]);
    }

    /// Queues `a` (weight 2) and `b` (weight 1), each with 40 pods of 2 CPUs in no group,
    /// created interleaved on 80 CPUs: 20 of each run, 20 of each wait behind the gate.
    fn lone_pods_filled_half_and_half() -> State {
        let mut s = State::default();
        s.apply_queue(Queue {
            weight: 2,
            ..Queue::new("a")
        });
        s.apply_queue(Queue::new("b"));
        for n in 0..10 {
            s.apply_node(node(format!("n{n}"), 8_000));
        }
        for i in 0..80 {
            let queue = if i % 2 == 0 { "a" } else { "b" };
            let running = i < 40;
            s.apply_pod(running_on(
                running.then(|| format!("n{}", i / 4)),
                pod(format!("{queue}-{i}"))
                    .in_queue(queue)
                    .created(i)
                    .cpu(2_000),
            ));
        }
        s
    }

    #[test]
    fn a_queue_of_pods_in_no_group_below_its_share_reclaims_from_one_above_it() {
        let s = lone_pods_filled_half_and_half();
        let decision = decide_now(&s);
        let a_waits = decision
            .short_of_room
            .iter()
            .filter(|w| &*w.queue == "a" && w.lone)
            .count();
        assert_eq!(a_waits, 20, "every waiting pod of a waits only for room");
        let waiting = decision
            .waiting
            .iter()
            .find(|w| w.group == GroupKey::new("ns", "a-40"))
            .expect("a's waiting pod has a reason");
        assert_eq!(waiting.pod.as_ref().map(|p| p.name.as_str()), Some("a-40"));

        let plan = plan_on(&s, &decision, &|_| false, &|_| false);
        let evicted: Vec<&str> = plan
            .reclaims
            .iter()
            .flat_map(|r| &r.victims)
            .map(|v| v.pods[0].name.as_str())
            .collect();
        assert!(!evicted.is_empty(), "nothing is reclaimed for queue a");
        assert!(
            evicted.iter().all(|name| name.starts_with("b-")),
            "{evicted:?}"
        );
        // b deserves 26.7 CPUs of 80 and holds 40: at most 6 pods of 2 CPUs go.
        assert!(evicted.len() <= 6, "{evicted:?}");
        let first = &plan.reclaims[0];
        assert_eq!(first.pod.as_ref().map(|p| p.name.as_str()), Some("a-40"));
        assert_eq!(first.subject(), "pod ns/a-40");
    }

    #[test]
    fn lower_priority_gangs_of_other_queues_do_not_keep_the_plan_from_its_early_exit() {
        let mut s = urgent_in_full_queue();
        // Queue a's running gangs are as urgent as its waiting one: none may be preempted.
        for uid in ["a1-0", "a1-1", "a2-0", "a2-1"] {
            let p = s.pods()[uid].as_ref().clone();
            s.apply_pod(Pod { priority: 10, ..p });
        }
        // Room for 6 pods: queue a, holding 4, deserves 5 of them, so it may not reclaim.
        s.apply_node(node_of(
            "n1",
            Resources::from([("cpu", 8_000), ("pods", 6)]),
        ));
        // A running gang of priority 0 in queue b is no victim of queue a's group.
        s.apply_pod_group(PodGroup::new(GroupKey::new("ns", "low"), 1, "b"));
        s.apply_pod(pod("low-0").in_group("low").running_on("n1"));
        let decision = decide_now(&s);
        assert!(!decision.short_of_room.is_empty(), "{decision:?}");
        assert!(input_of(&s, &decision).is_none());
        assert!(
            plan_on(&s, &decision, &|_| false, &|_| false)
                .reclaims
                .is_empty()
        );
        // Move the low gang into queue a: now it may be preempted, and the plan is built.
        s.apply_pod_group(PodGroup::new(GroupKey::new("ns", "low"), 1, "a"));
        let decision = decide_now(&s);
        assert!(input_of(&s, &decision).is_some());
    }

    #[test]
    fn pods_being_evicted_are_not_picked_again_and_count_as_room_coming_free() {
        let mut s = borrowed();
        let d = decide_now(&s);
        // The eviction was requested; the watch has not shown it yet.
        let requested = |uid: &str| uid.starts_with("a2-");
        let plan1 = plan_on(&s, &d, &requested, &|_| false);
        assert!(plan1.reclaims.is_empty(), "{plan1:?}");
        assert!(plan1.waiting[&GroupKey::new("ns", "b1")].contains("still going away"));
        // Now the watch shows them deleting.
        for i in 0..2 {
            let p = s.pods()[&format!("a2-{i}")].as_ref().clone();
            s.apply_pod(Pod {
                deleting: true,
                ..p
            });
        }
        let plan2 = plan_on(&s, &decide_now(&s), &|_| false, &|_| false);
        assert!(plan2.reclaims.is_empty(), "{plan2:?}");
    }

    #[test]
    fn a_gang_left_alone_after_a_refusal_makes_way_for_the_next() {
        let s = borrowed();
        let d = decide_now(&s);
        let refused = |g: &GroupKey| &*g.name == "a2";
        assert_eq!(victims(&plan_on(&s, &d, &|_| false, &refused))[0].0, "a1");
    }

    #[test]
    fn a_queue_that_is_not_reclaimable_keeps_its_gangs() {
        let mut s = borrowed();
        s.apply_queue(Queue {
            reclaimable: false,
            ..Queue::new("a")
        });
        let d = decide_now(&s);
        let plan = plan_on(&s, &d, &|_| false, &|_| false);
        assert!(plan.reclaims.is_empty());
        assert!(plan.waiting.is_empty());
    }

    const GPU: &str = "nvidia.com/gpu";

    /// The example: queue `q` on two nodes of 5 GPUs, all ten held by gang `a`
    /// (minMember 5, maxMember 10, members of one GPU created a second apart, `a-9` the
    /// newest); gang `b` (minMember 5) of `b_queue` waits with five gated members.
    fn ten_gpus_held_by_an_elastic_gang(b_queue: &str) -> State {
        let mut s = State::default();
        s.apply_queue(Queue::new("q"));
        if b_queue != "q" {
            s.apply_queue(Queue::new(b_queue));
        }
        for n in ["g1", "g2"] {
            s.apply_node(node_of(n, Resources::from([(GPU, 5), ("pods", 110)])));
        }
        s.apply_pod_group(PodGroup {
            max_member: Some(10),
            ..pod_group("a", 5, "q")
        });
        for i in 0..10 {
            s.apply_pod(
                pod(format!("a-{i}"))
                    .in_group("a")
                    .requests(Resources::from([(GPU, 1), ("pods", 1)]))
                    .created(1 + i)
                    .running_on(if i < 5 { "g1" } else { "g2" }),
            );
        }
        s.apply_pod_group(pod_group("b", 5, b_queue));
        for i in 0..5 {
            s.apply_pod(
                pod(format!("b-{i}"))
                    .in_group("b")
                    .requests(Resources::from([(GPU, 1), ("pods", 1)]))
                    .created(20)
                    .gated(),
            );
        }
        s
    }

    #[test]
    fn an_elastic_gang_holding_all_ten_gpus_yields_its_five_newest_members_to_a_gang_of_five_of_its_queue()
     {
        let s = ten_gpus_held_by_an_elastic_gang("q");
        let d = decide_now(&s);
        assert!(d.admit.is_empty());
        let plan = plan_on(&s, &d, &|_| false, &|_| false);
        assert_eq!(
            victims(&plan),
            vec![(
                "a".into(),
                ["a-5", "a-6", "a-7", "a-8", "a-9"]
                    .map(String::from)
                    .to_vec()
            )]
        );
        let reclaim = &plan.reclaims[0];
        assert_eq!(reclaim.group, GroupKey::new("ns", "b"));
        assert_eq!(reclaim.cause, Cause::Yield);
        assert!(!reclaim.victims[0].whole);
        assert_eq!(reclaim.victims[0].subject(), "elastic members of gang ns/a");
        assert_eq!(
            plan.waiting[&GroupKey::new("ns", "b")],
            "waiting for elastic members to yield: evicting elastic members of gang ns/a (queue q)"
        );
    }

    #[test]
    fn a_gang_of_sub_groups_yields_its_youngest_whole_instances_and_keeps_its_minimum() {
        let mut s = ten_gpus_held_by_an_elastic_gang("q");
        // `a` is five slices of two members, slice k started at 100 + k: its minimum is two
        // slices (a-0 to a-3), and b needs five GPUs of the none left.
        s.apply_pod_group(PodGroup {
            sub_groups: vec![crate::model::sub_groups::SubGroup {
                name: "slice".into(),
                size: 2,
                min_count: 2,
                selector: BTreeMap::new(),
                match_label_keys: vec!["slice".into()],
                topology_key: None,
            }],
            ..pod_group("a", 4, "q")
        });
        for i in 0..10 {
            let pod = s.pods()[format!("a-{i}").as_str()].as_ref().clone();
            let slice = i / 2;
            s.apply_pod(Pod {
                started: Some(100 + slice),
                ..pod.labeled("slice", &slice.to_string())
            });
        }
        let d = decide_now(&s);
        let plan = plan_on(&s, &d, &|_| false, &|_| false);
        let mut evicted = victims(&plan).remove(0).1;
        evicted.sort();
        assert_eq!(
            evicted,
            ["a-4", "a-5", "a-6", "a-7", "a-8", "a-9"].map(String::from),
            "three slices whole (six GPUs) for five, never a slice in part; a-0 to a-3 stay"
        );
    }

    #[test]
    fn a_waiting_slice_kept_to_one_zone_asks_reclaim_for_room_inside_one_zone() {
        // Zones z0 (n0, n1) and z1 (n2, n3) of 8 CPUs each, every node full with a gang of
        // queue a; b waits for a slice of two 6-CPU members kept to one zone.
        let mut s = State::default();
        s.apply_queue(Queue::new("a"));
        s.apply_queue(Queue::new("b"));
        for (i, zone) in ["z0", "z0", "z1", "z1"].into_iter().enumerate() {
            let mut n = node(format!("n{i}"), 8_000);
            n.labels.insert("zone".into(), zone.into());
            s.apply_node(n);
            let name = format!("on-{i}");
            s.apply_pod_group(pod_group(&name, 1, "a"));
            let member = pod(format!("{name}-0")).in_group(&name).created(1);
            s.apply_pod(member.cpu(8_000).running_on(&format!("n{i}")));
        }
        s.apply_pod_group(PodGroup {
            sub_groups: vec![crate::model::sub_groups::SubGroup {
                name: "slice".into(),
                size: 2,
                min_count: 1,
                selector: BTreeMap::new(),
                match_label_keys: vec!["slice".into()],
                topology_key: Some("zone".into()),
            }],
            ..pod_group("slices", 2, "b")
        });
        for i in 0..2 {
            let member = pod(format!("slices-{i}")).in_group("slices").created(10);
            s.apply_pod(member.cpu(6_000).labeled("slice", "0").gated());
        }
        let input = input_of(&s, &decide_now(&s)).unwrap();
        assert_eq!(
            input.policy.starved[0].instances,
            vec![crate::policy::reclaim::InstanceDomains {
                members: 2,
                domains: Some(vec![vec![0, 1], vec![2, 3]]),
            }],
            "its one slice, inside z0 or z1"
        );
    }

    #[test]
    fn an_elastic_gang_yields_its_members_to_a_gang_of_another_queue_that_reclaim_would_not_serve()
    {
        let mut s = ten_gpus_held_by_an_elastic_gang("other");
        // q weighs 3, other 1: other deserves 2.5 GPUs, and b asks for 5.
        s.apply_queue(Queue {
            weight: 3,
            ..Queue::new("q")
        });
        let plan = plan_on(&s, &decide_now(&s), &|_| false, &|_| false);
        assert_eq!(plan.reclaims[0].cause, Cause::Yield);
        assert_eq!(plan.reclaims[0].victims[0].pods.len(), 5);
        assert_eq!(plan.reclaims[0].victims[0].queue, "q");
    }

    #[test]
    fn the_replacements_of_yielded_members_wait_and_the_gang_they_yielded_to_gets_the_room() {
        let mut s = ten_gpus_held_by_an_elastic_gang("q");
        // a's members are of higher priority than b: the yield ignores it, and so must the
        // pass, or a's replacements would take the room first.
        for i in 0..10 {
            let p = s.pods()[&format!("a-{i}")].as_ref().clone();
            s.apply_pod(Pod { priority: 10, ..p });
        }
        let yielded = ["a-5", "a-6", "a-7", "a-8", "a-9"];
        let plan = plan_on(&s, &decide_now(&s), &|_| false, &|_| false);
        assert_eq!(victims(&plan)[0].1, yielded.map(String::from).to_vec());
        // Evicted: they go away, and a's owner makes five replacements, gated.
        for uid in yielded {
            let p = s.pods()[uid].as_ref().clone();
            s.apply_pod(Pod {
                deleting: true,
                ..p
            });
        }
        for i in 10..15 {
            s.apply_pod(
                pod(format!("a-{i}"))
                    .in_group("a")
                    .requests(Resources::from([(GPU, 1), ("pods", 1)]))
                    .priority(10)
                    .created(30)
                    .gated(),
            );
        }
        let d = decide_now(&s);
        assert!(d.admit.is_empty(), "{:?}", d.admit);
        let plan = plan_on(&s, &d, &|_| false, &|_| false);
        assert!(plan.reclaims.is_empty(), "nothing more to evict: {plan:?}");
        // Three of them gone, two still going: b does not fit yet, and the replacements take
        // none of the three free GPUs.
        for uid in &yielded[..3] {
            s.delete_pod(uid);
        }
        let d = decide_now(&s);
        assert!(d.admit.is_empty(), "{:?}", d.admit);
        let a = d
            .waiting
            .iter()
            .find(|w| &*w.group.name == "a")
            .expect("a's replacements wait");
        assert!(
            a.why
                .to_string()
                .contains("wait while gang ns/b waits for room for its minMember"),
            "{}",
            a.why
        );
        assert!(plan_on(&s, &d, &|_| false, &|_| false).reclaims.is_empty());
        // All gone: b is admitted, and the replacements still wait.
        for uid in &yielded[3..] {
            s.delete_pod(uid);
        }
        let d = decide_now(&s);
        let admitted: Vec<_> = d.admit.iter().map(|a| a.group.clone()).collect();
        assert_eq!(admitted, vec![Some(GroupKey::new("ns", "b"))]);
        assert_eq!(d.admit[0].pods.len(), 5);
        // And with b running, a gang at its minimum and its replacements waiting, nothing more
        // is evicted.
        let mut s = s.clone();
        for i in 0..5 {
            let p = s.pods()[&format!("b-{i}")].as_ref().clone();
            s.apply_pod(
                Pod {
                    scheduling_gates: vec![],
                    ..p
                }
                .running_on("g2"),
            );
        }
        let d = decide_now(&s);
        assert!(d.admit.is_empty());
        assert!(plan_on(&s, &d, &|_| false, &|_| false).reclaims.is_empty());
    }

    mod agreement {
        use proptest::prelude::*;

        use super::*;

        const GIB: i64 = 1 << 30;

        /// Nodes as (CPUs, GiB); queue a's running gangs, each a list of members as (CPUs,
        /// GiB); queue b's waiting gang, the same way.
        type Scenario = (Vec<(i64, i64)>, Vec<Vec<(i64, i64)>>, Vec<(i64, i64)>);

        fn scenario() -> impl Strategy<Value = Scenario> {
            let member = (1i64..5, 1i64..9);
            (
                prop::collection::vec((4i64..17, 4i64..33), 1..5),
                prop::collection::vec(prop::collection::vec(member.clone(), 1..4), 4..24),
                prop::collection::vec(member, 1..4),
            )
        }

        fn requests((cpus, gib): (i64, i64)) -> Resources {
            Resources::from([("cpu", cpus * 1_000), ("memory", gib * GIB), ("pods", 1)])
        }

        /// Queues a and b of weight 1 on the nodes; a's gangs run where they fit (first fit in
        /// the order given, a gang that does not fit whole is left out); b's gang waits.
        fn build((nodes, running, waiting): Scenario) -> State {
            let mut s = State::default();
            s.apply_queue(Queue::new("a"));
            s.apply_queue(Queue::new("b"));
            let mut free = Vec::new();
            for (i, &(cpus, gib)) in nodes.iter().enumerate() {
                let allocatable =
                    Resources::from([("cpu", cpus * 1_000), ("memory", gib * GIB), ("pods", 110)]);
                free.push(allocatable.clone());
                s.apply_node(node_of(format!("n{i}"), allocatable));
            }
            let gang = |s: &mut State, name: String, queue, members: &[(i64, i64)], at| {
                s.apply_pod_group(PodGroup::new(
                    GroupKey::new("ns", name.as_str()),
                    members.len() as u32,
                    queue,
                ));
                for (i, (&shape, node)) in members.iter().zip(at).enumerate() {
                    s.apply_pod(running_on(
                        node,
                        pod(format!("{name}-{i}"))
                            .in_group(&name)
                            .created(1)
                            .requests(requests(shape)),
                    ));
                }
            };
            for (g, members) in running.iter().enumerate() {
                let mut left = free.clone();
                let mut at = Vec::new();
                for &shape in members {
                    let r = requests(shape);
                    let Some(n) = left.iter().position(|f| r.fits_in(f)) else {
                        break;
                    };
                    left[n].sub(&r);
                    at.push(Some(format!("n{n}")));
                }
                if at.len() == members.len() {
                    free = left;
                    gang(&mut s, format!("a{g}"), "a", members, at);
                }
            }
            gang(&mut s, "b".into(), "b", &waiting, vec![None; waiting.len()]);
            s
        }

        fn admitted(decision: &Decision, group: &GroupKey) -> bool {
            decision
                .admit
                .iter()
                .any(|a| a.group.as_ref() == Some(group))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            /// Reclaim and admission place gangs by one model: when reclaim evicts for a
            /// group, the admission pass that follows the evictions admits that group.
            #[test]
            fn a_group_reclaim_makes_room_for_is_admitted_once_its_victims_are_gone(
                s in scenario()
            ) {
                let mut state = build(s);
                let b = GroupKey::new("ns", "b");
                let plan = plan_on(&state, &decide_now(&state), &|_| false, &|_| false);
                let Some(reclaim) = plan.reclaims.iter().find(|r| r.group == b) else {
                    return Ok(());
                };
                for pod in reclaim.victims.iter().flat_map(|v| &v.pods) {
                    state.delete_pod(&pod.uid);
                }
                let after = decide_now(&state);
                prop_assert!(
                    admitted(&after, &b),
                    "evicted {:?} for b, which still waits: {:?}",
                    victims(&plan),
                    after.waiting.iter().find(|w| w.group == b).map(|w| w.why.to_string())
                );
            }
        }
    }
}
