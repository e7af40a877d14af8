//! Gangs of sub-groups: the pass releases the whole instances of the minimum together, then
//! whole instances beyond it as room allows, never part of one.

use super::*;
use crate::model::sub_groups::SubGroup;

fn role(name: &str, size: u32, min_count: u32) -> SubGroup {
    SubGroup {
        name: name.into(),
        size,
        min_count,
        selector: [("role".to_owned(), name.to_owned())].into(),
        match_label_keys: vec!["instance".into()],
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
