//! On a cluster that can grow: gangs that find no room ask for it with stand-ins, are admitted
//! into their stand-ins' room, and give growth up after the timeout, holding nothing.

use super::*;
use crate::model::growth::stand_in_name;
use crate::model::{Growth, GrowthFailed};

const TIMEOUT: i64 = 60;

/// `cluster()` (one node of 8 CPUs, queue q) that can grow, one gang at a time.
fn growing_cluster(at_once: usize) -> State {
    let mut s = cluster();
    s.set_growth(Some(Growth {
        namespace: "gangplank-system".into(),
        timeout_secs: TIMEOUT,
        at_once,
    }));
    s
}

/// The stand-ins `d` asks for `group` made, created at `created`, and bound to `node` if given.
fn make_stand_ins(s: &mut State, d: &Decision, group: &str, created: i64, node: Option<&str>) {
    let ask = d
        .grow
        .iter()
        .find(|a| &*a.group.name == group)
        .unwrap_or_else(|| panic!("no growth asked for {group}: {d:?}"));
    for &n in &ask.missing {
        let name = stand_in_name(&ask.group, n);
        s.apply_pod(Pod {
            namespace: "gangplank-system".into(),
            stand_in_for: Some(ask.group.clone()),
            requests: ask.members[n].clone(),
            node_name: node.map(str::to_owned),
            phase: if node.is_some() {
                PodPhase::Running
            } else {
                PodPhase::Pending
            },
            ..pod(name.clone()).created(created)
        });
    }
}

/// Half of `n1` taken by a running pod in no group.
fn half_busy(s: &mut State) {
    running(s, "busy", None, "n1", 4_000, NOW - 10);
}

/// Places the stand-ins of `group`, in name order, on `nodes`, one each, of `priority`, as the
/// scheduler would.
fn place_stand_ins(s: &mut State, group: &str, nodes: &[&str], priority: i32) {
    let stand_ins: Vec<Pod> = s.stand_ins()[&GroupKey::new("ns", group)]
        .values()
        .map(|p| p.as_ref().clone())
        .collect();
    for (p, node) in stand_ins.into_iter().zip(nodes) {
        s.apply_pod(Pod {
            node_name: Some((*node).into()),
            phase: PodPhase::Running,
            priority,
            ..p
        });
    }
}

#[test]
fn a_gang_that_does_not_fit_asks_for_stand_ins_sized_like_its_members_and_reserves_nothing() {
    let mut s = growing_cluster(1);
    half_busy(&mut s);
    gang(&mut s, "big", "q", 3, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    assert!(admitted(&d).is_empty());
    assert_eq!(reason(&d, "big"), Reason::WaitingForGrowth);
    assert_eq!(d.hold, None, "a growing gang holds no reservation");
    assert_eq!(d.grow.len(), 1);
    assert_eq!(d.grow[0].members.len(), 3);
    assert_eq!(d.grow[0].missing, vec![0, 1, 2]);
    assert_eq!(d.grow[0].members[0].get("cpu"), 6_000);
    assert!(
        d.short_of_room.iter().all(|w| &*w.group.name != "big"),
        "reclaim is not asked for a gang the cluster grows for: {:?}",
        d.short_of_room
    );
}

#[test]
fn without_growth_the_same_gang_holds_a_reservation_as_before() {
    let mut s = cluster();
    half_busy(&mut s);
    gang(&mut s, "big", "q", 1, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(reason(&d, "big"), Reason::Reserved);
    assert!(d.grow.is_empty());
}

#[test]
fn a_gang_is_admitted_into_the_room_of_its_bound_stand_ins_and_they_are_deleted() {
    let mut s = growing_cluster(1);
    half_busy(&mut s);
    gang(&mut s, "big", "q", 2, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    for name in ["new-1", "new-2"] {
        s.apply_node(node(name, 8_000));
    }
    make_stand_ins(&mut s, &d, "big", NOW, None);
    place_stand_ins(&mut s, "big", &["new-1", "new-2"], 0);
    let d = decide_at(&s, &|_| false, NOW + 5);
    assert_eq!(admitted(&d), vec!["big"]);
    assert!(d.grow.is_empty());
    assert_eq!(d.unwanted_stand_ins.len(), 2, "{d:?}");
}

#[test]
fn the_room_of_a_gangs_stand_ins_is_lent_to_it_and_no_tenant_pod_passes_for_one() {
    let mut s = growing_cluster(1);
    half_busy(&mut s);
    gang(&mut s, "big", "q", 1, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    s.apply_node(node("new-1", 6_000));
    make_stand_ins(&mut s, &d, "big", NOW, Some("new-1"));
    // A tenant's pod in its own namespace that claims to stand in for its gang, on the rest of
    // n1: believed, its room would be lent to that gang.
    gang(&mut s, "other", "q", 1, 4_000, NOW - 30);
    let tenant = Pod {
        stand_in_for: Some(GroupKey::new("ns", "other")),
        node_name: Some("n1".into()),
        phase: PodPhase::Running,
        ..pod("fake-stand-in").cpu(4_000)
    };
    s.apply_pod(tenant);
    let d = decide_at(&s, &|_| false, NOW + 5);
    assert_eq!(admitted(&d), vec!["big"]);
    assert_eq!(
        reason(&d, "other"),
        Reason::WaitingForGrowth,
        "a pod outside Gangplank's namespace is no stand-in: its room is not lent"
    );
}

#[test]
fn only_as_many_gangs_as_may_grow_at_once_ask_and_the_others_wait_behind_them() {
    let mut s = growing_cluster(1);
    gang(&mut s, "first", "q", 2, 6_000, NOW - 60);
    gang(&mut s, "second", "q", 2, 6_000, NOW - 30);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(d.grow.len(), 1);
    assert_eq!(&*d.grow[0].group.name, "first");
    assert_eq!(reason(&d, "second"), Reason::WaitingForGrowth);
    assert!(
        why(&d, "second").contains("after gang ns/first"),
        "{}",
        why(&d, "second")
    );
    let mut s = growing_cluster(2);
    gang(&mut s, "first", "q", 2, 6_000, NOW - 60);
    gang(&mut s, "second", "q", 2, 6_000, NOW - 30);
    assert_eq!(decide_at(&s, &|_| false, NOW).grow.len(), 2);
}

#[test]
fn a_growing_gang_holds_its_queues_quota_so_a_second_gang_does_not_pass_the_capability_too() {
    let mut s = growing_cluster(2);
    s.apply_queue(Queue {
        capability: Capability::from([("cpu", 12_000)]),
        ..Queue::new("q")
    });
    gang(&mut s, "first", "q", 2, 6_000, NOW - 60);
    gang(&mut s, "second", "q", 2, 6_000, NOW - 30);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(d.grow.len(), 1);
    assert_eq!(reason(&d, "second"), Reason::CapabilityReached);
}

#[test]
fn stand_ins_unplaced_past_the_timeout_give_growth_up_and_the_gang_then_holds_nothing() {
    let mut s = growing_cluster(1);
    gang(&mut s, "big", "q", 3, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    make_stand_ins(&mut s, &d, "big", NOW, None);
    let d = decide_at(&s, &|_| false, NOW + TIMEOUT - 1);
    assert_eq!(reason(&d, "big"), Reason::WaitingForGrowth);
    assert!(d.growth_timed_out.is_empty());

    let d = decide_at(&s, &|_| false, NOW + TIMEOUT);
    assert_eq!(reason(&d, "big"), Reason::GrowthFailed);
    assert_eq!(d.growth_timed_out, vec![GroupKey::new("ns", "big")]);
    assert_eq!(d.unwanted_stand_ins.len(), 3);
    assert!(d.grow.is_empty());

    // The loop records it and deletes the stand-ins: the gang waits, holding nothing, and a
    // gang that fits runs.
    let failed_at = NOW + TIMEOUT;
    s.ledger_mut().note_growth_failed(
        &GroupKey::new("ns", "big"),
        GrowthFailed {
            at: failed_at,
            message: Some("all available instance types exceed limits for nodepool".into()),
        },
    );
    for uid in s
        .pods()
        .values()
        .filter(|p| p.stand_in_for.is_some())
        .map(|p| p.uid.clone())
        .collect::<Vec<_>>()
    {
        s.delete_pod(&uid);
    }
    gang(&mut s, "small", "q", 2, 2_000, NOW + TIMEOUT);
    let d = decide_at(&s, &|_| false, failed_at + 1);
    assert_eq!(reason(&d, "big"), Reason::GrowthFailed);
    assert!(
        why(&d, "big").contains("exceed limits"),
        "{}",
        why(&d, "big")
    );
    assert_eq!(d.hold, None);
    assert_eq!(admitted(&d), vec!["small"]);

    // After another timeout it asks again.
    let d = decide_at(&s, &|_| false, failed_at + TIMEOUT);
    assert_eq!(reason(&d, "big"), Reason::WaitingForGrowth);
    assert_eq!(d.grow.len(), 1);
}

#[test]
fn a_growth_whose_stand_ins_are_refused_says_so_and_still_gives_up_after_the_timeout() {
    let mut s = growing_cluster(1);
    half_busy(&mut s);
    gang(&mut s, "big", "q", 2, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    let big = GroupKey::new("ns", "big");
    s.ledger_mut()
        .note_growth_asked(d.grow.iter().map(|a| &a.group), NOW);
    s.ledger_mut()
        .note_stand_in_refused(&big, "pods \"x\" is forbidden: violates PodSecurity".into());
    let d = decide_at(&s, &|_| false, NOW + 10);
    assert_eq!(reason(&d, "big"), Reason::WaitingForGrowth);
    assert!(
        why(&d, "big").contains("10s since growth was asked"),
        "{}",
        why(&d, "big")
    );
    assert!(
        why(&d, "big").contains("violates PodSecurity"),
        "{}",
        why(&d, "big")
    );
    s.ledger_mut()
        .note_growth_asked(d.grow.iter().map(|a| &a.group), NOW + 10);
    let d = decide_at(&s, &|_| false, NOW + TIMEOUT);
    assert_eq!(reason(&d, "big"), Reason::GrowthFailed);
    assert_eq!(d.growth_timed_out, vec![big]);
}

#[test]
fn stand_ins_below_the_gangs_priority_hold_its_room_as_its_claim_until_its_members_are_bound() {
    let mut s = growing_cluster(1);
    half_busy(&mut s);
    gang(&mut s, "big", "q", 2, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    for name in ["new-1", "new-2"] {
        s.apply_node(node(name, 8_000));
    }
    make_stand_ins(&mut s, &d, "big", NOW, None);
    place_stand_ins(&mut s, "big", &["new-1", "new-2"], -1_000);
    let d = decide_at(&s, &|_| false, NOW + 5);
    assert_eq!(admitted(&d), vec!["big"]);
    assert!(
        d.unwanted_stand_ins.is_empty(),
        "kept until the gang is bound: {d:?}"
    );
    let (group, slots) = &d.stand_in_claims[0];
    assert_eq!(&*group.name, "big");
    let mut nodes: Vec<&str> = slots.iter().map(|(n, _)| n.as_str()).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, vec!["new-1", "new-2"]);

    // Released: while a member is unbound, the stand-ins stay; once all are bound, they go.
    release(&mut s, &d);
    let d = decide_at(&s, &|_| false, NOW + 6);
    assert!(d.unwanted_stand_ins.is_empty());
    for (i, node) in ["new-1", "new-2"].into_iter().enumerate() {
        let member = s.pods()[&format!("big-{i}")].as_ref().clone();
        s.apply_pod(Pod {
            node_name: Some(node.into()),
            phase: PodPhase::Running,
            ..member
        });
    }
    let d = decide_at(&s, &|_| false, NOW + 7);
    assert_eq!(d.unwanted_stand_ins.len(), 2);
}

#[test]
fn a_gang_is_not_placed_where_a_released_gang_is_on_its_way_on_a_cluster_that_can_grow_or_not() {
    // Three nodes of 8 CPUs; gang a (2 x 6) released and not placed yet. By the sum, 12 CPUs
    // are left for b (2 x 6), but only one node could take one of its members once a's are
    // placed: b must grow, not be admitted into a's room.
    let mut s = growing_cluster(1);
    for name in ["n2", "n3"] {
        s.apply_node(node(name, 8_000));
    }
    gang(&mut s, "a", "q", 2, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["a"]);
    release(&mut s, &d);
    gang(&mut s, "b", "q", 2, 6_000, NOW - 30);
    let d = decide_at(&s, &|_| false, NOW + 1);
    assert!(admitted(&d).is_empty(), "{d:?}");
    assert_eq!(reason(&d, "b"), Reason::WaitingForGrowth);

    // Without growth too: b waits for room rather than being admitted into a's, where its
    // members' filter would refuse them.
    s.set_growth(None);
    let d = decide_at(&s, &|_| false, NOW + 1);
    assert!(admitted(&d).is_empty(), "{d:?}");
    assert_eq!(reason(&d, "b"), Reason::Reserved);
}

#[test]
fn an_admitted_gangs_unplaced_stand_ins_go_at_once_and_its_placed_ones_stay() {
    let mut s = growing_cluster(1);
    half_busy(&mut s);
    gang(&mut s, "big", "q", 2, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    s.apply_node(node("new-1", 8_000));
    s.apply_node(node("new-2", 8_000));
    make_stand_ins(&mut s, &d, "big", NOW, None);
    let first = stand_in_name(&GroupKey::new("ns", "big"), 0);
    let placed = s.pods()[&first].as_ref().clone();
    s.apply_pod(Pod {
        node_name: Some("new-1".into()),
        phase: PodPhase::Running,
        priority: -1_000,
        ..placed
    });
    let pending = s.pods()[&stand_in_name(&GroupKey::new("ns", "big"), 1)]
        .as_ref()
        .clone();
    s.apply_pod(Pod {
        priority: -1_000,
        ..pending
    });
    // new-2 fits the second member as it is: the gang is admitted before its second stand-in
    // is placed.
    let d = decide_at(&s, &|_| false, NOW + 3);
    assert_eq!(admitted(&d), vec!["big"]);
    let unwanted: Vec<&str> = d
        .unwanted_stand_ins
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        unwanted,
        vec![stand_in_name(&GroupKey::new("ns", "big"), 1)]
    );
}

#[test]
fn a_gangs_stand_in_on_the_room_a_released_gang_is_going_to_lends_it_nothing() {
    // Gang a was admitted into node `left` and released; before its member got there, the
    // scheduler put b's stand-in there. The member will preempt the stand-in: b must not be
    // admitted into that room.
    let mut s = growing_cluster(1);
    half_busy(&mut s);
    s.apply_node(node("left", 8_000));
    gang(&mut s, "a", "q", 1, 6_000, NOW - 60);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["a"]);
    release(&mut s, &d);
    gang(&mut s, "b", "q", 1, 6_000, NOW - 30);
    let d = decide_at(&s, &|_| false, NOW + 1);
    assert_eq!(reason(&d, "b"), Reason::WaitingForGrowth);
    let ask = &d.grow[0];
    s.apply_pod(Pod {
        namespace: "gangplank-system".into(),
        stand_in_for: Some(ask.group.clone()),
        requests: ask.members[0].clone(),
        node_name: Some("left".into()),
        phase: PodPhase::Running,
        priority: -1_000,
        ..pod(stand_in_name(&ask.group, 0)).created(NOW + 1)
    });
    let d = decide_at(&s, &|_| false, NOW + 2);
    assert!(admitted(&d).is_empty(), "{d:?}");
    assert_eq!(reason(&d, "b"), Reason::WaitingForGrowth);
}
