//! Gangs of sub-groups: the pass releases the whole instances of the minimum together, then
//! whole instances beyond it as room allows, never part of one.

use super::*;
use std::collections::BTreeMap;

use crate::model::sub_groups::SubGroup;

fn role(name: &str, size: u32, min_count: u32) -> SubGroup {
    SubGroup {
        name: name.into(),
        size,
        min_count,
        selector: [("role".to_owned(), name.to_owned())].into(),
        match_label_keys: vec!["instance".into()],
        topology_key: None,
    }
}

/// The inference service `svc` in queue `q`: at least 2 prefill instances of 2 members and 1
/// decode instance of 2 (minMember 6), with these members (role, instance) of 1 CPU, gated.
fn service(s: &mut State, members: &[(&str, &str)]) {
    s.apply_pod_group(PodGroup {
        sub_groups: vec![role("prefill", 2, 2), role("decode", 2, 1)],
        ..pod_group("svc", 6, "q")
    });
    for (i, (role, instance)) in members.iter().enumerate() {
        s.apply_pod(
            pod(format!("svc-{instance}-{i}"))
                .in_group("svc")
                .in_queue("q")
                .gated()
                .labeled("role", role)
                .labeled("instance", instance),
        );
    }
}

fn released_instances(d: &Decision) -> Vec<String> {
    let mut names: Vec<String> = d
        .admit
        .iter()
        .flat_map(|a| &a.pods)
        .map(|p| p.name.split('-').nth(1).unwrap().to_owned())
        .collect();
    names.sort();
    names
}

const TEN: [(&str, &str); 10] = [
    ("prefill", "p0"),
    ("prefill", "p0"),
    ("prefill", "p1"),
    ("prefill", "p1"),
    ("prefill", "p2"),
    ("prefill", "p2"),
    ("decode", "d0"),
    ("decode", "d0"),
    ("decode", "d1"),
    ("decode", "d1"),
];

/// Exactly the minimum: two prefill instances and one decode instance.
const MINIMUM: [(&str, &str); 6] = [
    ("prefill", "p0"),
    ("prefill", "p0"),
    ("prefill", "p1"),
    ("prefill", "p1"),
    ("decode", "d0"),
    ("decode", "d0"),
];

#[test]
fn the_minimum_of_whole_instances_is_released_first_then_whole_instances_as_room_allows() {
    let mut s = cluster();
    service(&mut s, &TEN);
    let d = decide_now(&s);
    assert_eq!(
        released_instances(&d),
        ["d0", "d0", "p0", "p0", "p1", "p1"],
        "two prefill and one decode instance, whole"
    );
    release(&mut s, &d);
    bind_released(&mut s);
    let d = decide_now(&s);
    assert_eq!(
        released_instances(&d),
        ["p2", "p2"],
        "2 of the 8 CPUs are left: one instance more, whole"
    );
}

#[test]
fn instances_released_beyond_the_minimum_keep_their_room_until_the_scheduler_places_them() {
    let mut s = cluster();
    service(&mut s, &TEN);
    let d = decide_now(&s);
    release(&mut s, &d);
    let d = decide_now(&s);
    assert_eq!(
        released_instances(&d),
        ["p2", "p2"],
        "6 of the 8 CPUs are on their way to the minimum: one instance more"
    );
    release(&mut s, &d);
    let d = decide_now(&s);
    assert!(
        d.admit.is_empty(),
        "the 8 CPUs are on their way to the minimum and p2: {:?}",
        d.admit
    );
}

#[test]
fn an_instance_beyond_the_minimum_is_never_released_in_part() {
    let mut s = cluster();
    s.apply_pod(pod("other").in_queue("q").running_on("n1"));
    service(&mut s, &TEN);
    let d = decide_now(&s);
    release(&mut s, &d);
    bind_released(&mut s);
    let d = decide_now(&s);
    assert!(
        d.admit.is_empty(),
        "1 CPU left, instances of 2: {:?}",
        d.admit
    );
}

#[test]
fn a_sub_group_short_of_whole_instances_releases_nothing_and_is_named() {
    let mut s = cluster();
    let members = [
        ("prefill", "p0"),
        ("prefill", "p0"),
        ("prefill", "p1"),
        ("decode", "d0"),
        ("decode", "d0"),
        ("decode", "d1"),
    ];
    service(&mut s, &members);
    let d = decide_now(&s);
    assert!(d.admit.is_empty(), "{:?}", d.admit);
    assert_eq!(reason(&d, "svc"), Reason::WaitingForMembers);
    assert!(
        why(&d, "svc")
            .contains("sub-group prefill has 1 whole instances (2 members each) of the 2"),
        "{}",
        why(&d, "svc")
    );
}

#[test]
fn a_minimum_that_does_not_fit_waits_whole_for_room() {
    let mut s = cluster();
    s.apply_pod(pod("other").in_queue("q").cpu(4_000).running_on("n1"));
    service(&mut s, &MINIMUM);
    let d = decide_now(&s);
    assert!(d.admit.is_empty(), "6 CPUs of the 4 free: {:?}", d.admit);
    assert_eq!(reason(&d, "svc"), Reason::Reserved);
}

#[test]
fn an_instance_that_restarts_alone_is_released_whole_while_the_others_run() {
    let mut s = cluster();
    service(&mut s, &MINIMUM);
    let d = decide_now(&s);
    release(&mut s, &d);
    bind_released(&mut s);
    // p1 is made again (its pods replaced, gated).
    for i in [2, 3] {
        s.delete_pod(&format!("svc-p1-{i}"));
        s.apply_pod(
            pod(format!("svc-p1-new{i}"))
                .in_group("svc")
                .in_queue("q")
                .gated()
                .labeled("role", "prefill")
                .labeled("instance", "p1"),
        );
    }
    let d = decide_now(&s);
    assert_eq!(released_instances(&d), ["p1", "p1"]);
    assert!(
        d.admit
            .iter()
            .flat_map(|a| &a.pods)
            .all(|p| p.name.contains("new"))
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Per sub-group (members of an instance, `minCount`, and per instance the members that
    /// exist and their CPUs); the CPUs of a second node beside n1 (8 CPUs).
    type Scenario = (Vec<(u32, u32, Vec<(usize, i64)>)>, i64);

    fn scenario() -> impl Strategy<Value = Scenario> {
        let instance = (0usize..4, 1i64..4);
        let sub_group = (1u32..4, 1u32..3, prop::collection::vec(instance, 0..6));
        (prop::collection::vec(sub_group, 1..4), 1i64..24)
    }

    fn build((groups, second): &Scenario) -> State {
        let mut s = cluster();
        s.apply_node(node("n2", second * 1_000));
        let sub_groups: Vec<SubGroup> = groups
            .iter()
            .enumerate()
            .map(|(g, &(size, min, _))| role(&format!("r{g}"), size, min))
            .collect();
        let min_member = crate::model::sub_groups::minimum_members(&sub_groups) as u32;
        s.apply_pod_group(PodGroup {
            sub_groups,
            ..pod_group("svc", min_member, "q")
        });
        for (g, (_, _, instances)) in groups.iter().enumerate() {
            for (i, &(members, cpu)) in instances.iter().enumerate() {
                for m in 0..members {
                    s.apply_pod(
                        pod(format!("svc-r{g}i{i}-{m}"))
                            .in_group("svc")
                            .in_queue("q")
                            .gated()
                            .cpu(cpu * 1_000)
                            .labeled("role", &format!("r{g}"))
                            .labeled("instance", &format!("i{i}")),
                    );
                }
            }
        }
        s
    }

    /// Binds every released, unbound pod to the first node with room for it, as the
    /// scheduler would; one with none stays unbound.
    fn bind_where_room(s: &mut State) {
        let mut released: Vec<Pod> = s
            .pods()
            .values()
            .filter(|p| !p.awaits_admission() && p.node_name.is_none())
            .map(|p| p.as_ref().clone())
            .collect();
        released.sort_by(|a, b| a.name.cmp(&b.name));
        for p in released {
            let fits = |n: &str| p.requests.fits_in(&s.free_on(&s.nodes()[n]));
            let Some(at) = ["n1", "n2"].into_iter().find(|n| fits(n)) else {
                continue;
            };
            s.apply_pod(p.running_on(at));
        }
    }

    /// Released members per instance (`r<g>i<i>`).
    fn released(s: &State) -> BTreeMap<String, usize> {
        let mut by_instance = BTreeMap::new();
        for p in s.pods().values().filter(|p| p.name.starts_with("svc-")) {
            let instance = p.name[4..].split('-').next().unwrap().to_owned();
            let count = by_instance.entry(instance).or_insert(0);
            *count += usize::from(!p.awaits_admission());
        }
        by_instance
    }

    proptest! {
        /// Over passes that release what they admit and bind it: every instance is released
        /// whole or not at all, once any is every sub-group has its minimum released, and the
        /// queue is charged what is released, no more (not the members still at the gate).
        #[test]
        fn instances_are_released_whole_and_the_minimum_together(scenario in scenario()) {
            let mut s = build(&scenario);
            let (groups, _) = &scenario;
            for _ in 0..3 {
                let d = decide_now(&s);
                let charged = d.queues["q"].allocated.get("cpu");
                let released_cpu: i64 = s
                    .pods()
                    .values()
                    .filter(|p| !p.awaits_admission())
                    .map(|p| p.requests.get("cpu"))
                    .sum();
                prop_assert_eq!(charged, released_cpu);
                release(&mut s, &d);
                bind_where_room(&mut s);
                let released = released(&s);
                for (g, &(size, min, _)) in groups.iter().enumerate() {
                    let of_group: Vec<usize> = released
                        .iter()
                        .filter(|(i, _)| i.starts_with(&format!("r{g}i")))
                        .map(|(_, &n)| n)
                        .collect();
                    for &n in &of_group {
                        prop_assert!(n == 0 || n == size as usize, "{released:?}");
                    }
                    let whole = of_group.iter().filter(|&&n| n > 0).count();
                    let any = released.values().any(|&n| n > 0);
                    prop_assert!(!any || whole >= min as usize, "{released:?}");
                }
            }
        }
    }
}

/// The service as a tree of Kubernetes' CompositePodGroups, which the scheduler places whole
/// itself: it takes none of a tree while any pod of it is gated.
fn tree_placed_by_scheduler(s: &mut State, members: &[(&str, &str)]) {
    service(s, members);
    s.apply_pod_group(PodGroup {
        sub_groups: vec![role("prefill", 2, 2), role("decode", 2, 1)],
        placed_whole_by_scheduler: true,
        ..pod_group("svc", 6, "q")
    });
}

#[test]
fn a_tree_the_scheduler_places_is_released_whole_once_its_minimum_fits() {
    let mut s = cluster();
    tree_placed_by_scheduler(&mut s, &TEN);
    let d = decide_now(&s);
    assert_eq!(
        released_instances(&d).len(),
        10,
        "the minimum fits the 8 CPUs; the scheduler places the rest as room allows"
    );

    let mut s = cluster();
    s.apply_pod(pod("other").in_queue("q").cpu(4_000).running_on("n1"));
    tree_placed_by_scheduler(&mut s, &TEN);
    assert!(
        decide_now(&s).admit.is_empty(),
        "the minimum's 6 CPUs do not fit the 4 free"
    );
}

#[test]
fn a_tree_the_scheduler_places_stays_within_its_queue_s_capability_whole() {
    let mut s = cluster();
    let mut capped = Queue::new("q");
    capped.capability.set("cpu", 8_000);
    s.apply_queue(capped);
    tree_placed_by_scheduler(&mut s, &TEN);
    let d = decide_now(&s);
    assert!(
        d.admit.is_empty(),
        "10 CPUs of the tree over the 8 the queue may hold: {:?}",
        d.admit
    );
    assert_eq!(reason(&d, "svc"), Reason::CapabilityReached);
}

/// Instances of `TEN` beyond `MINIMUM`, made after the minimum was released.
const LATE: [(&str, &str); 4] = [
    ("prefill", "p2"),
    ("prefill", "p2"),
    ("decode", "d1"),
    ("decode", "d1"),
];

fn late_instances(s: &mut State) {
    for (i, (role, instance)) in LATE.iter().enumerate() {
        s.apply_pod(
            pod(format!("svc-{instance}-late{i}"))
                .in_group("svc")
                .in_queue("q")
                .gated()
                .labeled("role", role)
                .labeled("instance", instance),
        );
    }
}

#[test]
fn instances_made_after_a_tree_was_released_follow_it_at_once_while_the_scheduler_has_not_placed_its_minimum()
 {
    let mut s = cluster();
    s.apply_pod(pod("other").in_queue("q").cpu(2_000).running_on("n1"));
    tree_placed_by_scheduler(&mut s, &MINIMUM);
    let d = decide_now(&s);
    assert_eq!(released_instances(&d).len(), 6);
    release(&mut s, &d);
    late_instances(&mut s);
    let d = decide_now(&s);
    assert_eq!(
        released_instances(&d),
        ["d1", "d1", "p2", "p2"],
        "no room is free for them, but the scheduler places none of the tree while any of it is gated"
    );

    let mut capped = Queue::new("q");
    capped.capability.set("cpu", 9_000);
    s.apply_queue(capped);
    assert!(
        decide_now(&s).admit.is_empty(),
        "within the queue's capability only: 2 + 6 + 4 CPUs over 9"
    );
}

#[test]
fn instances_made_after_a_tree_s_minimum_was_placed_wait_whole_for_room() {
    let mut s = cluster();
    s.apply_pod(pod("other").in_queue("q").cpu(2_000).running_on("n1"));
    tree_placed_by_scheduler(&mut s, &MINIMUM);
    let d = decide_now(&s);
    release(&mut s, &d);
    bind_released(&mut s);
    late_instances(&mut s);
    assert!(
        decide_now(&s).admit.is_empty(),
        "the tree's minimum runs; its 4 further members wait for 4 free CPUs"
    );
    s.apply_node(node("n2", 4_000));
    assert_eq!(released_instances(&decide_now(&s)).len(), 4);
}
