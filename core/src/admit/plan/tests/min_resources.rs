//! Groups admitted on their `minResources` (a Spark application: `minMember` 1, its driver
//! first, `minResources` the driver and its executors), and gangs whose finished members count.

use super::*;

/// A Spark application `name` as spark-operator writes it for Volcano: a PodGroup of
/// `minMember` 1 whose `minResources` are a driver of 1 CPU and `executors` of 1 CPU each,
/// created at `created`, and its driver, gated; `ahead` as for a Volcano PodGroup.
fn spark(s: &mut State, name: &str, executors: i64, ahead: bool, created: i64) {
    s.apply_pod_group(PodGroup {
        min_resources: Resources::from([("cpu", 1_000 * (1 + executors))]),
        ahead,
        created,
        ..pod_group(name, 1, "q")
    });
    s.apply_pod(
        pod(format!("{name}-driver"))
            .in_group(name)
            .in_queue("q")
            .gated()
            .created(created),
    );
}

/// The pass at `at`, carried out: what it admits is released, the admissions with
/// placeholders recorded at `at` (the admission loop's annotation), and the released pods
/// bound and running, as the scheduler and the kubelet would.
fn admit_and_run(s: &mut State, at: i64) -> Decision {
    let d = decide_at(s, &|_| false, at);
    release(s, &d);
    for a in d.admit.iter().filter(|a| !a.placeholders.is_empty()) {
        let key = a.group.as_ref().unwrap();
        let spec = s.groups()[key].spec.as_deref().unwrap().clone();
        s.apply_pod_group(PodGroup {
            admitted_at: Some(at),
            ..spec
        });
    }
    bind_released(s);
    d
}

/// Executor `i` of `name`, ungated as the webhook lets it in, of 1 CPU.
fn executor(name: &str, i: u32) -> Pod {
    pod(format!("{name}-exec-{i}"))
        .in_group(name)
        .in_queue("q")
        .created(NOW + i64::from(i) + 1)
}

#[test]
fn of_two_spark_applications_that_do_not_fit_together_one_driver_is_released_with_room_for_its_executors()
 {
    for ahead in [true, false] {
        let mut s = cluster();
        // 5 CPUs each, on a node of 8: one at a time.
        spark(&mut s, "a", 4, ahead, NOW);
        spark(&mut s, "b", 4, ahead, NOW + 1);
        let d = decide_at(&s, &|_| false, NOW + 2);
        assert_eq!(admitted(&d), ["a"], "ahead: {ahead}");
        assert_eq!(d.admit[0].pods.len(), 1, "the driver");
        assert_eq!(d.admit[0].placeholders.len(), 4, "the executors' room");
        assert!(reason(&d, "b").short_of_room(), "{}", why(&d, "b"));
        assert!(why(&d, "b").contains("cpu 5 needed"), "{}", why(&d, "b"));
    }
}

#[test]
fn an_admitted_spark_application_keeps_its_executors_room_until_they_come_and_use_it() {
    let mut s = cluster();
    spark(&mut s, "a", 4, true, NOW);
    spark(&mut s, "b", 4, true, NOW + 1);
    assert_eq!(admitted(&admit_and_run(&mut s, NOW + 2)), ["a"]);
    // The driver runs; the room of its four executors stays a's.
    let d = decide_at(&s, &|_| false, NOW + 3);
    assert!(d.admit.is_empty(), "{:?}", d.admit);
    assert_eq!(d.in_flight.get("cpu"), 4_000);
    assert!(reason(&d, "b").short_of_room(), "{}", why(&d, "b"));
    assert_eq!(
        d.keeping,
        [GroupKey::new("ns", "a")],
        "its executors may be placed in b's reservation, made around their room"
    );

    // The driver creates its executors: the four the room is kept for pass the gate, a fifth
    // (beyond minResources) does not.
    let (a, now) = (GroupKey::new("ns", "a"), std::time::Instant::now());
    let cpu = Resources::from([("cpu", 1_000), ("pods", 1)]);
    let passed: Vec<bool> = (0..5)
        .map(|i| on_arrival::admit(&mut s, &a, &format!("a-exec-{i}"), &cpu, now, NOW + 3))
        .collect();
    assert_eq!(passed, [true, true, true, true, false]);
    for i in 0..4 {
        s.apply_pod(executor("a", i));
    }
    assert!(s.groups()[&a].owed().is_empty(), "the executors took it");
    let d = decide_at(&s, &|_| false, NOW + 4);
    assert_eq!(d.in_flight.get("cpu"), 4_000, "now as the executors");
    assert_eq!(d.keeping, std::slice::from_ref(&a));
    assert!(reason(&d, "b").short_of_room(), "{}", why(&d, "b"));

    // The application finishes (its executors deleted, its driver done): b's driver is
    // released, with its executors' room.
    for i in 0..4 {
        s.delete_pod(&format!("a-exec-{i}"));
    }
    let driver = s.pods()["a-driver"].as_ref().clone();
    s.apply_pod(Pod {
        phase: PodPhase::Succeeded,
        ..driver
    });
    let d = decide_at(&s, &|_| false, NOW + 5);
    assert_eq!(admitted(&d), ["b"]);
    assert_eq!(d.admit[0].placeholders.len(), 4);
}

#[test]
fn executors_beyond_min_resources_are_elastic_and_executors_within_them_are_not() {
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    s.apply_node(node("n1", 16_000));
    spark(&mut s, "a", 2, false, NOW);
    assert_eq!(admitted(&admit_and_run(&mut s, NOW + 1)), ["a"]);
    // Two executors within minResources, one beyond, all running; one more beyond, gated.
    for i in 0..3 {
        s.apply_pod(executor("a", i).running_on("n1"));
    }
    s.apply_pod(executor("a", 3).gated());
    let d = decide_at(&s, &|_| false, NOW + 2);
    assert_eq!(
        d.elastic.get("cpu"),
        1_000,
        "only the one beyond minResources"
    );
    assert_eq!(
        admitted(&d),
        ["a"],
        "the gated one runs while there is room"
    );
    assert_eq!(d.admit[0].pods[0].name, "a-exec-3");
}

#[test]
fn the_room_of_executors_that_never_came_goes_back_once_the_schedule_timeout_passed() {
    let mut s = cluster();
    spark(&mut s, "a", 4, true, NOW);
    assert_eq!(admitted(&admit_and_run(&mut s, NOW + 1)), ["a"]);
    gang(&mut s, "next", "q", 1, 6_000, NOW + 2);
    let d = decide_at(&s, &|_| false, NOW + 61);
    assert!(reason(&d, "next").short_of_room(), "{}", why(&d, "next"));
    // Timeout 60 s from its admission at NOW + 1.
    let d = decide_at(&s, &|_| false, NOW + 62);
    assert_eq!(admitted(&d), ["next"]);
    assert_eq!(d.in_flight.get("cpu"), 0);
}

#[test]
fn a_spark_application_is_admitted_on_its_min_resources_against_its_queue_s_capability() {
    let mut s = cluster();
    let mut capped = Queue::new("q");
    capped.capability.set("cpu", 4_000);
    s.apply_queue(capped);
    spark(&mut s, "a", 4, true, NOW);
    let d = decide_at(&s, &|_| false, NOW + 1);
    assert!(d.admit.is_empty());
    assert_eq!(
        reason(&d, "a"),
        Reason::CapabilityReached,
        "{}",
        why(&d, "a")
    );
}

#[test]
fn a_released_driver_whose_admission_record_is_not_shown_yet_keeps_its_executors_room() {
    let mut s = cluster();
    spark(&mut s, "a", 4, false, NOW);
    let d = decide_at(&s, &|_| false, NOW + 1);
    release(&mut s, &d);
    let mut kept = Kept::new();
    kept.note(d.admitted_with_room_kept(), NOW + 1);
    gang(&mut s, "next", "q", 1, 6_000, NOW + 2);
    let d = decide_kept(&s, &kept, NOW + 2);
    assert!(d.admit.is_empty(), "{:?}", d.admit);
    assert_eq!(
        d.in_flight.get("cpu"),
        5_000,
        "the driver and the executors' room"
    );
}

#[test]
fn a_gang_whose_first_member_succeeded_before_the_others_existed_is_admitted_whole_with_them() {
    let mut s = cluster();
    // A Kubeflow Trainer gang: a dataset initializer and three trainer nodes.
    s.apply_pod_group(pod_group("train", 4, "q"));
    s.apply_pod(Pod {
        phase: PodPhase::Succeeded,
        ..pod("train-init")
            .in_group("train")
            .in_queue("q")
            .bound_to("n1")
    });
    s.apply_pod(pod("train-0").in_group("train").in_queue("q").gated());
    s.apply_pod(pod("train-1").in_group("train").in_queue("q").gated());
    let d = decide_now(&s);
    assert_eq!(
        why(&d, "train"),
        "2 pods exist and 1 succeeded, of minMember 4 (finished members count); waiting for the rest before releasing any"
    );
    s.apply_pod(pod("train-2").in_group("train").in_queue("q").gated());
    let d = decide_now(&s);
    assert_eq!(admitted(&d), ["train"]);
    assert_eq!(
        d.admit[0].pods.len(),
        3,
        "the three trainer nodes, as one gang"
    );
}

#[test]
fn a_gang_whose_members_succeeded_needs_only_the_rest_placed_and_elastic_members_beyond_them() {
    let mut s = cluster();
    s.apply_pod_group(pod_group("g", 3, "q"));
    for (uid, phase) in [("g-0", PodPhase::Succeeded), ("g-1", PodPhase::Running)] {
        s.apply_pod(Pod {
            phase,
            ..pod(uid)
                .in_group("g")
                .in_queue("q")
                .bound_to("n1")
                .created(1)
        });
    }
    s.apply_pod(pod("g-2").in_group("g").in_queue("q").gated().created(2));
    // Quorum 3: one succeeded, one runs, the third is what the gang needs, gang-first.
    assert_eq!(admitted(&admit_and_run(&mut s, NOW)), ["g"]);
    s.apply_pod(Pod {
        phase: PodPhase::Running,
        ..pod("g-3")
            .in_group("g")
            .in_queue("q")
            .running_on("n1")
            .created(3)
    });
    assert_eq!(
        decide_now(&s).elastic.get("cpu"),
        1_000,
        "one beyond the three that make the gang"
    );
}
