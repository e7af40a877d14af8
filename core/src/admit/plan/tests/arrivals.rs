//! The door for admissions on arrival, and groups admitted ahead of their members.

use super::*;

#[test]
fn a_pass_that_leaves_groups_waiting_only_for_members_opens_the_door_to_uncapped_open_queues() {
    let mut s = cluster();
    let mut capped = Queue::new("capped");
    capped.capability.set("cpu", 4_000);
    s.apply_queue(capped);
    let mut closed = Queue::new("closed");
    closed.open = false;
    s.apply_queue(closed);
    s.apply_pod_group(pod_group("g", 3, "q"));
    s.apply_pod(pod("a").in_group("g").in_queue("q").gated().created(10));
    let mut door = decide_now(&s).door.expect("only members are missing");
    assert!(!on_arrival::let_in(
        &mut door,
        "capped",
        &[Resources::from([("cpu", 1)])]
    ));
    assert!(!on_arrival::let_in(
        &mut door,
        "closed",
        &[Resources::from([("cpu", 1)])]
    ));
    assert!(on_arrival::let_in(
        &mut door,
        "q",
        &vec![Resources::from([("cpu", 1_000)]); 8]
    ));
    assert!(
        !on_arrival::let_in(&mut door, "q", &[Resources::from([("cpu", 1)])]),
        "the 8 CPUs of n1 are taken"
    );
}

#[test]
fn a_group_waiting_for_room_closes_the_door() {
    let mut s = cluster();
    gang(&mut s, "big", "q", 3, 4_000, 10);
    let d = decide_now(&s);
    assert_eq!(reason(&d, "big"), Reason::DoesNotFit);
    assert_eq!(d.door, None);
}

#[test]
fn the_first_member_admits_its_gang_on_arrival_and_its_later_members_follow_it() {
    let now = std::time::Instant::now();
    let cpu = Resources::from([("cpu", 2_000), ("pods", 1)]);
    let mut s = cluster();
    s.apply_pod_group(pod_group("g", 3, "q"));
    s.apply_pod_group(pod_group("late", 2, "q"));
    s.apply_pod(
        pod("late-0")
            .in_group("late")
            .in_queue("q")
            .gated()
            .created(1),
    );
    let mut zoned = PodGroup::new(GroupKey::new("ns", "zoned"), 1, "q");
    zoned.topology_key = Some("zone".into());
    s.apply_pod_group(zoned);
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);

    let g = GroupKey::new("ns", "g");
    assert!(
        on_arrival::admit(&mut s, &g, "p", &cpu, now, 0),
        "3 × 2 of 8 CPUs fit"
    );
    assert!(
        on_arrival::admit(&mut s, &g, "p", &cpu, now, 0),
        "a later member of g"
    );
    assert!(
        !on_arrival::admit(&mut s, &GroupKey::new("ns", "late"), "p", &cpu, now, 0),
        "late's first member arrived gated"
    );
    assert!(!on_arrival::admit(
        &mut s,
        &GroupKey::new("ns", "zoned"),
        "p",
        &cpu,
        now,
        0
    ));
    assert!(!on_arrival::admit(
        &mut s,
        &GroupKey::new("ns", "unknown"),
        "p",
        &cpu,
        now,
        0
    ));
    s.apply_pod_group(pod_group("h", 2, "q"));
    assert!(
        !on_arrival::admit(&mut s, &GroupKey::new("ns", "h"), "p", &cpu, now, 0),
        "2 of 8 CPUs are left"
    );

    // The next pass does not see g's members yet: its door keeps their room out.
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    assert!(!on_arrival::admit(
        &mut s,
        &GroupKey::new("ns", "h"),
        "p",
        &cpu,
        now,
        0
    ));
    // The ledger keeps an arrival no longer than ARRIVAL_ROOM_KEPT: the pass that ends then
    // forgets it, and the next one counts it no more.
    let later = now + crate::model::arrivals::ARRIVAL_ROOM_KEPT;
    crate::admit::after_pass::record(&mut s, None, &d, later);
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, later);
    assert!(on_arrival::admit(
        &mut s,
        &GroupKey::new("ns", "h"),
        "p",
        &cpu,
        later,
        0
    ));
}

#[test]
fn the_door_leaves_out_the_room_of_elastic_members_released_and_not_placed_yet() {
    let now = std::time::Instant::now();
    let mut s = cluster();
    s.apply_pod_group(PodGroup {
        max_member: Some(6),
        ..pod_group("elastic", 2, "q")
    });
    // Two members run on n1 (8 CPUs); four more, beyond its minMember, are on their way to the
    // scheduler: 2 CPUs are left for a gang that arrives.
    for i in 0..6 {
        let member = pod(format!("elastic-{i}"))
            .in_group("elastic")
            .in_queue("q");
        s.apply_pod(if i < 2 {
            member.running_on("n1")
        } else {
            member
        });
    }
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    let cpu = Resources::from([("cpu", 1_000), ("pods", 1)]);
    s.apply_pod_group(pod_group("three", 3, "q"));
    s.apply_pod_group(pod_group("two", 2, "q"));
    assert!(
        !on_arrival::admit(
            &mut s,
            &GroupKey::new("ns", "three"),
            "three-0",
            &cpu,
            now,
            0
        ),
        "3 of the 2 CPUs left"
    );
    assert!(on_arrival::admit(
        &mut s,
        &GroupKey::new("ns", "two"),
        "two-0",
        &cpu,
        now,
        0
    ));
}

#[test]
fn a_gang_admitted_on_arrival_lets_in_min_member_pods_no_larger_than_its_first_and_gates_the_rest()
{
    let now = std::time::Instant::now();
    let nothing = Resources::from([("pods", 1)]);
    let gpus = Resources::from([("cpu", 1_000), ("nvidia.com/gpu", 8), ("pods", 1)]);
    let mut s = cluster();
    s.apply_pod_group(pod_group("g", 2, "q"));
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    let g = GroupKey::new("ns", "g");
    assert!(
        on_arrival::admit(&mut s, &g, "first", &nothing, now, 0),
        "two pods asking nothing fit"
    );
    assert!(
        !on_arrival::admit(&mut s, &g, "big", &gpus, now, 0),
        "a member larger than the first takes the gate"
    );
    assert!(on_arrival::admit(&mut s, &g, "second", &nothing, now, 0));
    for i in 0..50 {
        assert!(
            !on_arrival::admit(&mut s, &g, &format!("extra-{i}"), &nothing, now, 0),
            "members beyond minMember take the gate"
        );
    }
}

#[test]
fn a_pod_outside_gangplank_bound_after_the_pass_shuts_the_door_until_the_next_pass() {
    let now = std::time::Instant::now();
    let cpu = Resources::from([("cpu", 2_000), ("pods", 1)]);
    let mut s = cluster();
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    // A plain pod (no group, no queue), which no pass counts, takes 4 of n1's 8 CPUs.
    s.apply_pod(pod("web").cpu(4_000));
    s.apply_pod(pod("web").cpu(4_000).running_on("n1"));
    s.apply_pod_group(pod_group("g", 2, "q"));
    let g = GroupKey::new("ns", "g");
    assert!(
        !on_arrival::admit(&mut s, &g, "g-0", &cpu, now, 0),
        "the door counted the room the plain pod took"
    );
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    s.apply_pod(pod("web").cpu(4_000).running_on("n1").created(5));
    assert!(
        on_arrival::admit(&mut s, &g, "g-0", &cpu, now, 0),
        "the next pass counts it (2 × 2 of the 4 CPUs left fit), and an update of it that takes no more room leaves the door open"
    );
}

#[test]
fn a_node_that_goes_not_ready_after_the_pass_shuts_the_door_until_the_next_pass() {
    let now = std::time::Instant::now();
    let cpu = Resources::from([("cpu", 2_000), ("pods", 1)]);
    let mut s = cluster();
    s.apply_node(node("n2", 8_000));
    s.apply_pod_group(pod_group("g", 3, "q"));
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    let mut not_ready = s.nodes()["n2"].clone();
    not_ready.not_ready = true;
    s.apply_node(not_ready.clone());
    let g = GroupKey::new("ns", "g");
    assert!(
        !on_arrival::admit(&mut s, &g, "p", &cpu, now, 0),
        "the door counted n2's room"
    );

    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    assert!(
        on_arrival::admit(&mut s, &g, "p", &cpu, now, 0),
        "3 × 2 of n1's 8 CPUs fit"
    );

    s.apply_node(not_ready);
    s.apply_pod_group(pod_group("h", 1, "q"));
    assert!(
        on_arrival::admit(&mut s, &GroupKey::new("ns", "h"), "p", &cpu, now, 0),
        "an update that takes no room away leaves the door open"
    );
    s.delete_node("n1");
    s.apply_pod_group(pod_group("i", 1, "q"));
    assert!(!on_arrival::admit(
        &mut s,
        &GroupKey::new("ns", "i"),
        "p",
        &cpu,
        now,
        0
    ));
}

/// A group of `min` admitted ahead of its members on `cpu` millicores in all, created at
/// 0, admitted at `admitted_at`.
fn ahead(s: &mut State, name: &str, min: u32, cpu: i64, admitted_at: Option<i64>) {
    s.apply_pod_group(PodGroup {
        schedule_timeout: Duration::from_secs(60),
        min_resources: Resources::from([("cpu", cpu)]),
        ahead: true,
        admitted_at,
        ..PodGroup::new(GroupKey::new("ns", name), min, "q")
    });
}

#[test]
fn a_group_admitted_ahead_is_admitted_on_its_min_resources_before_its_pods_exist() {
    let mut s = cluster();
    ahead(&mut s, "vc", 4, 6_000, None);
    let d = decide_at(&s, &|_| false, 10);
    assert_eq!(admitted(&d), ["vc"]);
    assert!(d.admit[0].pods.is_empty());
    assert_eq!(d.admit[0].placeholders.len(), 4);

    // Too big for the node: it waits for room like any gang.
    let mut s = cluster();
    ahead(&mut s, "big", 4, 9_000, None);
    let d = decide_at(&s, &|_| false, 10);
    assert!(d.admit.is_empty());
    assert!(d.waiting[0].reason().short_of_room(), "{:?}", d.waiting);
}

#[test]
fn members_of_a_group_admitted_ahead_created_at_once_pass_ungated_only_up_to_min_member() {
    let mut s = cluster();
    ahead(&mut s, "vc", 4, 6_000, Some(100));
    let (vc, cpu) = (GroupKey::new("ns", "vc"), Resources::from([("cpu", 1_500)]));
    let now = std::time::Instant::now();
    // Eight members created before the watch shows any: the first four pass.
    let passed: Vec<bool> = (0..8)
        .map(|i| on_arrival::admit(&mut s, &vc, &format!("vc-{i}"), &cpu, now, 120))
        .collect();
    assert_eq!(passed, [true, true, true, true, false, false, false, false]);
    // Once the watch shows them, they count as live members, not twice.
    for i in 0..4 {
        s.apply_pod(
            pod(format!("vc-{i}"))
                .in_group("vc")
                .in_queue("q")
                .cpu(1_500)
                .created(110),
        );
    }
    assert!(!on_arrival::admit(&mut s, &vc, "vc-4", &cpu, now, 120));
}

#[test]
fn arrivals_of_groups_admitted_ahead_are_forgotten_after_a_pass_once_old_or_gone() {
    let mut s = cluster();
    ahead(&mut s, "vc", 4, 6_000, Some(100));
    ahead(&mut s, "gone", 4, 6_000, Some(100));
    let cpu = Resources::from([("cpu", 1_500)]);
    let now = std::time::Instant::now();
    for name in ["vc", "gone"] {
        assert!(on_arrival::admit(
            &mut s,
            &GroupKey::new("ns", name),
            "p",
            &cpu,
            now,
            120
        ));
    }
    s.delete_pod_group(&GroupKey::new("ns", "gone"));
    on_arrival::open(&mut s, None, now);
    assert_eq!(
        s.ledger().ahead_arrivals().len(),
        1,
        "a deleted group's are forgotten"
    );
    on_arrival::open(
        &mut s,
        None,
        now + crate::model::arrivals::ARRIVAL_ROOM_KEPT,
    );
    assert!(
        s.ledger().ahead_arrivals().is_empty(),
        "{:?}",
        s.ledger().ahead_arrivals()
    );
}

#[test]
fn an_admission_ahead_keeps_its_room_until_it_lapses() {
    let mut s = cluster();
    ahead(&mut s, "vc", 4, 6_000, Some(100));
    gang(&mut s, "next", "q", 1, 4_000, 50);
    // Admitted at 100 with a timeout of 60: its 6 CPUs are taken until 160.
    let d = decide_at(&s, &|_| false, 150);
    assert!(d.admit.is_empty(), "{:?}", d.admit);
    assert_eq!(d.in_flight.get("cpu"), 6_000);
    // Its members are created without the gate while it holds; not after it lapsed.
    let (vc, cpu) = (GroupKey::new("ns", "vc"), Resources::from([("cpu", 1_500)]));
    let now = std::time::Instant::now();
    assert!(on_arrival::admit(&mut s, &vc, "p", &cpu, now, 150));
    assert!(!on_arrival::admit(&mut s, &vc, "p", &cpu, now, 161));
    // One member created: it and three placeholders hold the room.
    s.apply_pod(Pod {
        scheduling_gates: vec![],
        requests: Resources::from([("cpu", 1_500), ("pods", 1)]),
        ..pod("vc-0").in_group("vc").in_queue("q").created(120)
    });
    let d = decide_at(&s, &|_| false, 150);
    assert!(d.admit.is_empty());
    assert_eq!(d.in_flight.get("cpu"), 6_000);
    // Lapsed with a member: only the member counts, so the next gang fits.
    let d = decide_at(&s, &|_| false, 161);
    assert_eq!(admitted(&d), ["next"]);
    assert_eq!(d.in_flight.get("cpu"), 1_500);
}

#[test]
fn a_lapsed_admission_ahead_without_members_waits_again() {
    let mut s = cluster();
    ahead(&mut s, "vc", 4, 6_000, Some(100));
    let d = decide_at(&s, &|_| false, 161);
    assert_eq!(admitted(&d), ["vc"]);
    assert_eq!(d.admit[0].placeholders.len(), 4);
    // Recorded but not yet seen: the pass counts the placeholders released.
    let mut kept = Kept::new();
    kept.note(d.admitted_with_room_kept(), 161);
    let d = decide_kept(&s, &kept, 161);
    assert!(d.admit.is_empty());
    assert_eq!(d.in_flight.get("cpu"), 6_000);
}

#[test]
fn a_gang_admitted_on_arrival_keeps_its_room_from_the_pass_before_the_watch_shows_its_members() {
    // n1 has 8 CPUs; queue `idle` is guaranteed 4 of them, so q may take 4. The door lets
    // g (2 x 2 CPUs) in on arrival; the watch has not shown its members when b (2 x 2 CPUs,
    // gated) comes. The pass must count g's room: b would take q past the guarantee.
    let now = std::time::Instant::now();
    let mut s = cluster();
    s.apply_queue(Queue {
        guarantee: Resources::from([("cpu", 4_000)]),
        ..Queue::new("idle")
    });
    s.apply_pod_group(pod_group("g", 2, "q"));
    let d = decide_now(&s);
    crate::admit::after_pass::record(&mut s, None, &d, now);
    let cpu = Resources::from([("cpu", 2_000), ("pods", 1)]);
    let g = GroupKey::new("ns", "g");
    assert!(on_arrival::admit(&mut s, &g, "g-0", &cpu, now, 0));
    assert!(on_arrival::admit(&mut s, &g, "g-1", &cpu, now, 0));
    gang(&mut s, "b", "q", 2, 2_000, 10);
    let d = decide_now(&s);
    assert!(admitted(&d).is_empty(), "{d:?}");

    // Once the watch shows g's members, they are counted as any released member, once, and
    // the pass after them forgets the arrival: g evicted (its pods gone, its PodGroup left),
    // its room is q's again, not counted for members that are gone.
    for i in 0..2 {
        s.apply_pod(pod(format!("g-{i}")).in_group("g").in_queue("q").cpu(2_000));
    }
    let d = decide_now(&s);
    assert!(admitted(&d).is_empty(), "{d:?}");
    crate::admit::after_pass::record(&mut s, None, &d, now);
    assert!(s.ledger().arrivals().is_empty());
    for i in 0..2 {
        s.delete_pod(&format!("g-{i}"));
    }
    assert_eq!(
        admitted(&decide_now(&s)),
        vec!["b"],
        "g's room is q's again"
    );
}
