//! Who goes first and who waits: members, queues, capabilities, guarantees, fair share, priority, reclaim's starved queue and elastic extras.

use super::*;

#[test]
fn a_gang_is_released_only_once_min_member_pods_exist_and_then_all_at_once() {
    let mut s = cluster();
    s.apply_pod_group(pod_group("g", 3, "q"));
    s.apply_pod(pod("a").in_group("g").in_queue("q").gated().created(10));
    s.apply_pod(pod("b").in_group("g").in_queue("q").gated().created(11));
    let d = decide_now(&s);
    assert!(d.admit.is_empty());
    assert_eq!(
        why(&d, "g"),
        "2 of minMember 3 pods exist; waiting for the rest before releasing any"
    );
    s.apply_pod(pod("c").in_group("g").in_queue("q").gated().created(12));
    let d = decide_now(&s);
    let uids: Vec<&str> = d.admit[0].pods.iter().map(|p| p.uid.as_str()).collect();
    assert_eq!(uids, vec!["a", "b", "c"]);
}

#[test]
fn a_gang_without_a_pod_group_waits_and_says_what_to_create() {
    let mut s = cluster();
    s.apply_pod(pod("a").in_group("ghost").in_queue("q").gated().created(1));
    let d = decide_now(&s);
    assert!(d.admit.is_empty());
    assert!(why(&d, "ghost").starts_with("no PodGroup ns/ghost: create one"));
}

#[test]
fn a_pod_with_a_queue_but_no_group_is_released_alone() {
    let mut s = cluster();
    s.apply_pod(pod("solo").in_queue("q").gated().created(5));
    s.apply_pod(pod("free").in_queue("q").created(1));
    let d = decide_now(&s);
    assert_eq!(d.admit.len(), 1);
    assert_eq!(d.admit[0].group, None);
    assert_eq!(d.admit[0].pods[0].uid, "solo");
}

#[test]
fn succeeded_members_count_failed_ones_do_not_and_released_groups_are_oldest_first() {
    let mut s = cluster();
    s.apply_pod_group(pod_group("new", 1, "q"));
    s.apply_pod_group(pod_group("old", 3, "q"));
    s.apply_pod(pod("n").in_group("new").in_queue("q").gated().created(50));
    s.apply_pod(pod("o1").in_group("old").in_queue("q").gated().created(10));
    for (uid, phase) in [("o2", PodPhase::Succeeded), ("o0", PodPhase::Failed)] {
        s.apply_pod(Pod {
            phase,
            ..pod(uid).in_group("old").in_queue("q").created(10)
        });
    }
    assert_eq!(
        decide_now(&s).admit.len(),
        1,
        "old has a live member and one that succeeded, of three"
    );
    s.apply_pod(pod("o3").in_group("old").in_queue("q").created(11));
    assert_eq!(admitted(&decide_now(&s)), vec!["old", "new"]);
}

#[test]
fn capability_caps_a_queue_even_when_the_cluster_is_idle() {
    let mut s = cluster();
    s.apply_queue(Queue {
        capability: Capability::from([("cpu", 4_000)]),
        ..Queue::new("q")
    });
    gang(&mut s, "a", "q", 2, 2_000, 1);
    gang(&mut s, "b", "q", 2, 2_000, 2);
    let d = decide_now(&s);
    assert_eq!(admitted(&d), vec!["a"]);
    assert_eq!(
        why(&d, "b"),
        "queue q has reached its capability: cpu 4 held + 4 requested > capability 4"
    );
    // Admitted but not bound yet still counts: the next pass does not admit b either.
    release(&mut s, &d);
    assert!(decide_now(&s).admit.is_empty());
    bind_released(&mut s);
    assert!(decide_now(&s).admit.is_empty());
    assert_eq!(decide_now(&s).queues["q"].allocated.get("cpu"), 4_000);
}

#[test]
fn pods_just_released_count_as_released_before_the_watch_shows_it() {
    let mut s = cluster();
    gang(&mut s, "a", "q", 2, 3_000, 1);
    gang(&mut s, "b", "q", 2, 3_000, 2);
    let d = decide_now(&s);
    assert_eq!(admitted(&d), vec!["a"]);
    let patched = |uid: &str| uid.starts_with("a-");
    let d = decide_after(&s, &patched);
    assert!(d.admit.is_empty(), "a's room is not handed to b: {d:?}");
    assert_eq!(reason(&d, "b"), Reason::Reserved, "b heads the line");
    assert!(why(&d, "b").ends_with(
        "does not fit now: cpu 6 needed, 2 free (free room counts other queues' unused guarantees as taken)"
    ));
}

#[test]
fn a_queue_borrows_idle_capacity_beyond_its_deserved_share() {
    let mut s = cluster();
    s.apply_queue(Queue::new("other"));
    gang(&mut s, "a", "q", 2, 2_000, 1);
    gang(&mut s, "b", "q", 2, 2_000, 2);
    let d = decide_now(&s);
    assert_eq!(admitted(&d), vec!["a", "b"], "other asks for nothing");
    assert_eq!(d.queues["q"].deserved.get("cpu"), 8_000);
}

#[test]
fn a_group_that_does_not_fit_now_waits_with_the_numbers_and_smaller_ones_pass() {
    let mut s = cluster();
    gang(&mut s, "big", "q", 3, 3_000, 1);
    gang(&mut s, "small", "q", 2, 1_000, 2);
    let d = decide_now(&s);
    assert_eq!(admitted(&d), vec!["small"]);
    assert_eq!(
        why(&d, "big"),
        "does not fit now: cpu 9 needed, 8 free (free room counts other queues' unused guarantees as taken)"
    );
}

#[test]
fn a_not_ready_or_unreachable_node_is_neither_free_room_nor_shared() {
    let mut s = cluster();
    s.apply_node(Node {
        not_ready: true,
        ..node("gone", 8_000)
    });
    s.apply_node(Node {
        taints: vec![crate::model::Taint {
            key: "node.kubernetes.io/unreachable".into(),
            value: None,
            effect: crate::model::TaintEffect::NoExecute,
        }],
        ..node("cut-off", 8_000)
    });
    gang(&mut s, "big", "q", 1, 9_000, 1);
    let d = decide_now(&s);
    assert_eq!(reason(&d, "big"), Reason::DoesNotFit);
    assert_eq!(
        d.queues["q"].deserved.get("cpu"),
        8_000,
        "only n1 is shared"
    );
}

#[test]
fn each_member_must_fit_on_some_node_not_only_in_the_sum() {
    let mut s = cluster();
    s.apply_node(node("n2", 8_000));
    // Two members of 5 CPUs leave 3 on each node: 6 free in all, but nowhere 6 together.
    gang(&mut s, "wide", "q", 2, 5_000, 1);
    gang(&mut s, "tall", "q", 1, 6_000, 2);
    let d = decide_now(&s);
    assert_eq!(admitted(&d), vec!["wide"]);
    assert_eq!(
        why(&d, "tall"),
        "first in line: holds a reservation of cpu: 3, pods: 1 on 1 nodes that groups behind it may not take; does not fit now: no schedulable node has room for a member requesting cpu: 6, pods: 1"
    );
}

#[test]
fn a_guarantee_stays_available_to_an_idle_queues_first_job() {
    let mut s = cluster();
    s.apply_queue(Queue {
        guarantee: Resources::from([("cpu", 4_000)]),
        ..Queue::new("reserved")
    });
    for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
        gang(&mut s, name, "q", 1, 2_000, i as i64);
    }
    let d = decide_now(&s);
    assert_eq!(admitted(&d), vec!["a", "b"], "4 of 8 CPUs are reserved");
    assert_eq!(reason(&d, "c"), Reason::Reserved);
    assert!(
        why(&d, "c").contains("holds a reservation of pods: 1 on 1 nodes"),
        "the head holds none of the guaranteed room: {}",
        why(&d, "c")
    );
    assert!(why(&d, "c").contains("does not fit now: cpu 2 needed, 0 free"));
    assert_eq!(reason(&d, "d"), Reason::DoesNotFit);
    release(&mut s, &d);
    bind_released(&mut s);
    gang(&mut s, "first", "reserved", 2, 2_000, 9);
    assert_eq!(admitted(&decide_now(&s)), vec!["first"]);
}

#[test]
fn a_guarantee_larger_than_the_cluster_holds_back_no_more_than_the_cluster() {
    let mut s = cluster();
    s.apply_queue(Queue {
        guarantee: Resources::from([("cpu", 1_000_000_000_000_000_000)]),
        ..Queue::new("hog")
    });
    s.apply_queue(Queue {
        guarantee: Resources::from([("cpu", 4_000)]),
        ..Queue::new("reserved")
    });
    gang(&mut s, "a", "q", 1, 1_000, 1);
    let d = decide_now(&s);
    // The two guarantees, scaled to fit the cluster's 8 CPUs together, leave less than
    // a CPU: the group waits, but the hog's guarantee is no longer a quintillion.
    assert!(admitted(&d).is_empty());
    let hog = &d.queues["hog"].guarantee;
    let reserved = &d.queues["reserved"].guarantee;
    assert!(
        hog.get("cpu") + reserved.get("cpu") <= 8_000,
        "{hog:?} {reserved:?}"
    );
    assert!(reserved.get("cpu") < 4_000, "scaled by the same factor");
}

#[test]
fn a_higher_priority_group_goes_before_older_ones_in_its_queue() {
    let mut s = cluster();
    s.apply_queue(Queue {
        capability: Capability::from([("cpu", 2_000)]),
        ..Queue::new("q")
    });
    gang(&mut s, "old", "q", 2, 1_000, 1);
    gang(&mut s, "urgent", "q", 2, 1_000, 5);
    let high = s.pods()["urgent-1"].as_ref().clone();
    s.apply_pod(Pod {
        priority: 1_000,
        ..high
    });
    let d = decide_now(&s);
    assert_eq!(admitted(&d), vec!["urgent"]);
    assert!(why(&d, "old").starts_with("queue q has reached its capability"));
}

#[test]
fn weights_of_two_to_one_interleave_picks_two_to_one() {
    let mut s = State::default();
    s.apply_node(node("n1", 12_000));
    s.apply_queue(Queue {
        weight: 2,
        ..Queue::new("heavy")
    });
    s.apply_queue(Queue::new("light"));
    for i in 0..12 {
        gang(&mut s, &format!("h{i:02}"), "heavy", 1, 1_000, i);
        gang(&mut s, &format!("l{i:02}"), "light", 1, 1_000, i);
    }
    let d = decide_now(&s);
    let order = admitted(&d);
    assert_eq!(order.len(), 12, "12 CPUs, 1 CPU each");
    let heavy = order.iter().filter(|n| n.starts_with('h')).count();
    assert_eq!((heavy, order.len() - heavy), (8, 4));
    let first_six: String = order[..6].iter().map(|n| &n[..1]).collect();
    assert_eq!(first_six.matches('h').count(), 4, "{order:?}");
    assert_eq!(d.queues["heavy"].deserved.get("cpu"), 8_000);
    assert_eq!(d.queues["light"].deserved.get("cpu"), 4_000);
    assert_eq!(d.queues["heavy"].waiting_groups, 4);
}

#[test]
fn a_gang_whose_member_names_an_unserved_scheduler_waits_and_holds_no_room() {
    let mut s = cluster();
    s.set_schedulers(crate::model::Schedulers::only([
        "default-scheduler".to_owned()
    ]));
    gang(&mut s, "astray", "q", 2, 3_000, 10);
    s.apply_pod(Pod {
        scheduler: Some("nobody".into()),
        requests: Resources::from([("cpu", 3_000), ("pods", 1)]),
        ..pod("astray-1")
            .in_group("astray")
            .in_queue("q")
            .gated()
            .created(10)
    });
    gang(&mut s, "next", "q", 2, 4_000, 20);
    let d = decide_at(&s, &|_| false, 30);
    assert_eq!(admitted(&d), ["next"]);
    let why = &d.waiting[0];
    assert_eq!(why.reason(), Reason::SchedulerNotServed);
    assert!(why.why.to_string().contains("\"nobody\""), "{}", why.why);
    assert!(d.door.is_some(), "it does not keep others from arriving");

    // Released to it all the same (by an older Gangplank), it holds no room either.
    let mut s = cluster();
    s.set_schedulers(crate::model::Schedulers::only([
        "default-scheduler".to_owned()
    ]));
    s.apply_pod_group(pod_group("astray", 1, "q"));
    s.apply_pod(Pod {
        scheduler: Some("nobody".into()),
        requests: Resources::from([("cpu", 6_000), ("pods", 1)]),
        ..pod("astray-0").in_group("astray").in_queue("q").created(10)
    });
    gang(&mut s, "next", "q", 1, 6_000, 20);
    let d = decide_at(&s, &|_| false, 30);
    assert_eq!(admitted(&d), ["next"]);
    assert_eq!(d.in_flight.get("cpu"), 0);
}

#[test]
fn a_closed_queue_admits_nothing_and_a_missing_queue_says_so() {
    let mut s = cluster();
    s.apply_queue(Queue {
        open: false,
        ..Queue::new("q")
    });
    gang(&mut s, "g", "q", 1, 1_000, 1);
    gang(&mut s, "lost", "nowhere", 1, 1_000, 1);
    let d = decide_now(&s);
    assert!(d.admit.is_empty());
    assert_eq!(
        why(&d, "g"),
        "queue q is Closed: it admits nothing until its spec.state is Open again"
    );
    assert!(why(&d, "lost").starts_with("queue nowhere does not exist"));
}

#[test]
fn reserved_and_released_members_hold_room_until_quorum_but_elastic_extras_do_not() {
    let mut s = cluster();
    gang(&mut s, "g", "q", 2, 2_000, 1);
    for extra in ["g-2", "g-3"] {
        s.apply_pod(Pod {
            requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
            ..pod(extra).in_group("g").in_queue("q").gated().created(1)
        });
    }
    let d = decide_now(&s);
    assert_eq!(d.admit[0].pods.len(), 4, "every gated member is released");
    release(&mut s, &d);
    assert_eq!(decide_now(&s).queues["q"].allocated.get("cpu"), 4_000);
    let requests = s.pods()["g-0"].requests.clone();
    s.ledger_mut().reserve(
        "g-0",
        Reservation {
            node: "n1".into(),
            requests,
            group: Some(GroupKey::new("ns", "g")),
        },
    );
    assert_eq!(decide_now(&s).queues["q"].allocated.get("cpu"), 4_000);
    bind_released(&mut s);
    assert_eq!(decide_now(&s).queues["q"].allocated.get("cpu"), 8_000);
}

/// Queue `q` runs `big` (6 CPUs on n1, 2 on n2, two nodes of 8) and has `more` (2 CPUs)
/// waiting; queue `other` has a gang of two members of `cpu` waiting.
fn borrower_and_starved(cpu: i64) -> State {
    let mut s = cluster();
    s.apply_node(node("n2", 8_000));
    s.apply_queue(Queue::new("other"));
    s.apply_pod_group(pod_group("big", 2, "q"));
    running(&mut s, "big-0", Some("big"), "n1", 6_000, NOW - 100);
    running(&mut s, "big-1", Some("big"), "n2", 2_000, NOW - 100);
    gang(&mut s, "more", "q", 1, 2_000, NOW - 50);
    gang(&mut s, "starved", "other", 2, cpu, NOW - 40);
    for i in 0..2 {
        let mut pod = (*s.pods()[&format!("starved-{i}")]).clone();
        pod.queue = Some("other".into());
        s.apply_pod(pod);
    }
    s
}

#[test]
fn a_queue_above_its_share_admits_nothing_while_a_queue_below_waits_for_room_reclaim_frees() {
    // One 4-CPU member fits on n2 and heads the line there; `more` would fit beside it.
    let s = borrower_and_starved(4_000);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), Vec::<String>::new());
    assert_eq!(reason(&d, "more"), Reason::QueueOverShare);
    assert!(
        why(&d, "more").contains("while queue other, below its share, waits for room"),
        "{}",
        why(&d, "more")
    );
}

#[test]
fn a_queue_above_its_share_still_borrows_room_no_reclaim_could_give_the_waiting_queue() {
    let s = borrower_and_starved(9_000);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["more"]);
}

#[test]
fn extra_members_of_a_gang_with_quorum_are_released_only_as_many_as_fit() {
    let mut s = cluster();
    s.apply_queue(Queue::new("other"));
    s.apply_pod_group(pod_group("wide", 1, "q"));
    running(&mut s, "wide-0", Some("wide"), "n1", 2_000, NOW - 100);
    for i in 1..4 {
        s.apply_pod(Pod {
            requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
            ..pod(format!("wide-{i}"))
                .in_group("wide")
                .in_queue("q")
                .gated()
                .created(NOW - 50)
        });
    }
    gang(&mut s, "share", "other", 2, 2_000, NOW - 40);
    for i in 0..2 {
        let mut member = (*s.pods()[&format!("share-{i}")]).clone();
        member.queue = Some("other".into());
        s.apply_pod(member);
    }
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["share", "wide"]);
    let wide = d
        .admit
        .iter()
        .find(|a| a.group.as_ref().is_some_and(|g| g.name.as_ref() == "wide"))
        .unwrap();
    let pods: Vec<&str> = wide.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        pods,
        ["wide-1"],
        "6 CPUs free, 4 of them for share: one extra fits"
    );
}

#[test]
fn a_parent_queues_capability_bounds_its_children_together() {
    let mut s = cluster();
    s.apply_node(node("n2", 8_000));
    s.apply_queue(Queue {
        capability: crate::model::resources::Capability::from([("cpu", 8_000)]),
        ..Queue::new("org")
    });
    for team in ["t1", "t2"] {
        s.apply_queue(Queue {
            parent: Some("org".into()),
            ..Queue::new(team)
        });
    }
    s.apply_pod_group(pod_group("run", 1, "t1"));
    s.apply_pod(Pod {
        node_name: Some("n1".into()),
        phase: PodPhase::Running,
        requests: Resources::from([("cpu", 6_000), ("pods", 1)]),
        ..pod("run-0")
            .in_group("run")
            .in_queue("q")
            .created(NOW - 100)
    });
    gang(&mut s, "small", "t2", 1, 2_000, NOW - 60);
    gang(&mut s, "big", "t2", 1, 4_000, NOW - 50);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(
        admitted(&d),
        vec!["small"],
        "6 + 2 CPUs fill org's capability"
    );
    assert_eq!(reason(&d, "big"), Reason::CapabilityReached);
    assert!(
        why(&d, "big").starts_with(
            "queue org has reached its capability: cpu 8 held + 4 requested > capability 8"
        ),
        "{}",
        why(&d, "big")
    );
}

#[test]
fn with_namespace_fair_share_the_namespace_holding_less_of_the_queue_goes_first() {
    let in_ns = |uid: &str, ns: &str, gated: bool, created: i64| Pod {
        namespace: ns.into(),
        scheduling_gates: if gated {
            vec![ADMISSION_GATE.into()]
        } else {
            vec![]
        },
        ..pod(uid).in_queue("q").cpu(4_000).created(created)
    };
    let mut s = cluster();
    s.apply_pod(Pod {
        node_name: Some("n1".into()),
        phase: PodPhase::Running,
        ..in_ns("a-running", "a", false, NOW - 500)
    });
    s.apply_pod(in_ns("a-old", "a", true, NOW - 100));
    s.apply_pod(in_ns("b-new", "b", true, NOW - 10));
    assert_eq!(
        admitted(&decide_at(&s, &|_| false, NOW)),
        vec!["a-old"],
        "oldest first by default"
    );
    s.apply_queue(Queue {
        namespace_fair_share: true,
        ..Queue::new("q")
    });
    assert_eq!(
        admitted(&decide_at(&s, &|_| false, NOW)),
        vec!["b-new"],
        "namespace a already holds half the queue"
    );
}

#[test]
fn elastic_members_are_tried_after_every_gang_short_of_quorum_whatever_their_priority() {
    let mut s = cluster();
    s.apply_pod_group(pod_group("wide", 1, "q"));
    running(&mut s, "wide-0", Some("wide"), "n1", 4_000, NOW - 100);
    let p = s.pods()["wide-0"].as_ref().clone();
    s.apply_pod(p.priority(10));
    s.apply_pod(
        pod("wide-1")
            .in_group("wide")
            .in_queue("q")
            .cpu(4_000)
            .priority(10)
            .gated()
            .created(NOW - 50),
    );
    gang(&mut s, "g", "q", 1, 4_000, NOW - 10);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(
        admitted(&d),
        vec!["g"],
        "the elastic member of priority 10 yields to g's minimum"
    );
    assert_eq!(reason(&d, "wide"), Reason::DoesNotFit);
    assert!(
        d.short_of_room.is_empty(),
        "no gang needs room for its quorum: {:?}",
        d.short_of_room
    );
}

#[test]
fn elastic_members_wait_while_a_gang_waits_for_the_room_running_elastic_members_hold() {
    let mut s = cluster();
    // wide (minMember 1) runs two members of 3 CPUs: one of them elastic; 2 CPUs are free.
    s.apply_pod_group(pod_group("wide", 1, "q"));
    running(&mut s, "wide-0", Some("wide"), "n1", 3_000, NOW - 100);
    running(&mut s, "wide-1", Some("wide"), "n1", 3_000, NOW - 90);
    s.apply_pod(
        pod("wide-2")
            .in_group("wide")
            .in_queue("q")
            .cpu(2_000)
            .gated()
            .created(NOW - 50),
    );
    // g needs 5 CPUs: the 2 free and the 3 of wide's elastic member.
    gang(&mut s, "g", "q", 1, 5_000, NOW - 10);
    let d = decide_at(&s, &|_| false, NOW);
    assert!(d.admit.is_empty(), "{:?}", d.admit);
    assert_eq!(
        why(&d, "wide"),
        "its elastic members beyond minMember wait while gang ns/g waits for room for its minMember: elastic members yield to any gang's minimum"
    );
    assert_eq!(d.elastic.get("cpu"), 3_000);
    // Needing 9 CPUs, g would not fit even then (nor hold a reservation): wide's member takes
    // the free room.
    let mut s = s.clone();
    gang(&mut s, "g", "q", 1, 9_000, NOW - 10);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["wide"]);
}

#[test]
fn a_gang_that_lost_a_member_after_release_keeps_its_place_in_line_for_the_one_made_again() {
    let mut s = cluster();
    gang(&mut s, "held", "q", 3, 2_000, 1);
    let d = decide_now(&s);
    release(&mut s, &d);
    s.delete_pod("held-2");
    gang(&mut s, "head", "q", 2, 4_000, 2);
    s.apply_pod(
        pod("held-3")
            .in_group("held")
            .in_queue("q")
            .gated()
            .cpu(2_000)
            .created(30),
    );
    let d = decide_now(&s);
    assert_eq!(
        admitted(&d),
        vec!["held"],
        "the member made again is released into the room a newer gang would otherwise reserve"
    );
    assert_eq!(
        why(&d, "head"),
        "first in line: holds a reservation of cpu: 2, pods: 2 on 1 nodes that groups behind it \
         may not take; does not fit now: cpu 8 needed, 2 free (free room counts other queues' \
         unused guarantees as taken)",
        "the newer gang reserves only what is left"
    );
}
