use super::*;
use crate::policy::fit::first_fit;

mod domains;

/// Places every pod of `need` as [`first_fit`] says; `nodes` is changed only when all are
/// placed.
fn place(nodes: &mut [Resources], need: &[Resources]) -> Result<(), Resources> {
    for (at, pod) in first_fit(nodes, need).map_err(|(_, pod)| pod.clone())? {
        nodes[at].sub(pod);
    }
    Ok(())
}

fn cpu(millis: i64) -> Resources {
    Resources::from([("cpu", millis), ("pods", 1)])
}

fn queue(name: &str, allocated: i64, deserved: i64) -> ReclaimQueue {
    ReclaimQueue {
        name: name.into(),
        allocated: Resources::from([("cpu", allocated)]),
        deserved: Resources::from([("cpu", deserved)]),
        guarantee: Resources::new(),
        reclaimable: true,
        capability: Capability::unbounded(),
    }
}

/// A gang of `queue` 0 with `size` members of `each` millicores on nodes `on[i]`.
fn gang(key: &str, min: u32, each: i64, on: &[usize], priority: i32, created: i64) -> Gang<String> {
    Gang {
        key: key.into(),
        queue: 0,
        min_member: min,
        priority,
        created,
        members: on
            .iter()
            .enumerate()
            .map(|(i, &node)| Member {
                uid: format!("{key}-{i}"),
                node,
                requests: cpu(each),
                created: created + i as i64,
            })
            .collect(),
        instances: None,
    }
}

fn starved(key: &str, queue: usize, pods: usize, each: i64) -> Starved<String> {
    let need = vec![cpu(each); pods];
    let mut requests = Resources::new();
    for p in &need {
        requests.add(p);
    }
    Starved {
        key: key.into(),
        queue,
        need,
        requests,
        priority: 0,
        capped: false,
        domains: None,
        instances: vec![],
    }
}

/// Two nodes of 8 CPUs full of queue `a`'s gangs (16 of 16 CPUs, deserving 8); queue `b`
/// holds nothing and deserves 8.
fn borrowed(gangs: Vec<Gang<String>>) -> Input<String> {
    Input {
        queues: vec![queue("a", 16_000, 8_000), queue("b", 0, 8_000)],
        nodes: vec![Resources::from([("cpu", 0), ("pods", 100)]); 2],
        in_flight: Resources::new(),
        gangs,
        starved: vec![],
    }
}

fn evicted(verdict: &ReclaimVerdict<String>) -> Vec<(String, Vec<String>, bool)> {
    match verdict {
        ReclaimVerdict::Reclaim(e) => e
            .iter()
            .map(|e| (e.gang.clone(), e.pods.clone(), e.whole))
            .collect(),
        other => panic!("no reclaim: {other:?}"),
    }
}

fn yielded(verdict: &ReclaimVerdict<String>) -> Vec<(String, Vec<String>, bool)> {
    match verdict {
        ReclaimVerdict::Yield(e) => e
            .iter()
            .map(|e| (e.gang.clone(), e.pods.clone(), e.whole))
            .collect(),
        other => panic!("no elastic yield: {other:?}"),
    }
}

fn gpus(n: i64) -> Resources {
    Resources::from([("nvidia.com/gpu", n), ("pods", 1)])
}

/// The example: one queue, two nodes of 5 GPUs, gang `a` (minMember 5, ten
/// members of one GPU, created one second apart) holds all ten; `b` needs five.
fn ten_gpus_held_by_an_elastic_gang() -> Input<String> {
    let members = (0..10)
        .map(|i| Member {
            uid: format!("a-{i}"),
            node: i / 5,
            requests: gpus(1),
            created: 10 + i as i64,
        })
        .collect();
    let mut queue = queue("q", 0, 0);
    queue.allocated = Resources::from([("nvidia.com/gpu", 10), ("pods", 10)]);
    queue.deserved = queue.allocated.clone();
    Input {
        queues: vec![queue],
        nodes: vec![Resources::from([("nvidia.com/gpu", 0), ("pods", 100)]); 2],
        in_flight: Resources::new(),
        gangs: vec![Gang {
            key: "a".into(),
            queue: 0,
            min_member: 5,
            priority: 0,
            created: 10,
            members,
            instances: None,
        }],
        starved: vec![Starved {
            key: "b".into(),
            queue: 0,
            need: vec![gpus(1); 5],
            requests: Resources::from([("nvidia.com/gpu", 5), ("pods", 5)]),
            priority: 0,
            capped: false,
            domains: None,
            instances: vec![],
        }],
    }
}

#[test]
fn an_elastic_gang_yields_its_five_newest_extras_to_a_gang_of_its_own_queue_that_needs_five() {
    let out = plan(&ten_gpus_held_by_an_elastic_gang());
    assert_eq!(
        yielded(&out[0].1),
        vec![(
            "a".into(),
            ["a-5", "a-6", "a-7", "a-8", "a-9"]
                .map(String::from)
                .to_vec(),
            false
        )],
        "the newest five go, the gang keeps its minimum of five"
    );
}

#[test]
fn an_elastic_gang_yields_only_as_many_extras_as_the_waiting_gang_needs() {
    let mut input = ten_gpus_held_by_an_elastic_gang();
    input.starved[0].need = vec![gpus(1); 2];
    input.starved[0].requests = Resources::from([("nvidia.com/gpu", 2), ("pods", 2)]);
    assert_eq!(
        yielded(&plan(&input)[0].1),
        vec![("a".into(), vec!["a-8".into(), "a-9".into()], false)]
    );
}

#[test]
fn a_gang_of_sub_groups_yields_whole_instances_beyond_its_minimum_never_part_of_one() {
    // `a` is five instances of two members (its minimum: the oldest two, a-0 to a-3).
    let mut input = ten_gpus_held_by_an_elastic_gang();
    input.gangs[0].min_member = 4;
    input.gangs[0].instances = Some(vec![vec![8, 9], vec![6, 7], vec![4, 5]]);
    input.starved[0].need = vec![gpus(1); 3];
    input.starved[0].requests = Resources::from([("nvidia.com/gpu", 3), ("pods", 3)]);
    let yielded = yielded(&plan(&input)[0].1);
    let mut pods: Vec<String> = yielded.into_iter().flat_map(|(_, pods, _)| pods).collect();
    pods.sort();
    assert_eq!(
        pods,
        ["a-6", "a-7", "a-8", "a-9"].map(String::from),
        "three GPUs needed: the two youngest instances whole"
    );
}

#[test]
fn a_gang_of_another_queue_takes_whole_instances_beyond_the_minimum_first_and_the_minimum_stays() {
    // Queue a borrows 8 CPUs: its gang `svc`, four instances of two members of 2 CPUs, the
    // minimum two of them (svc-0 to svc-3), the youngest instance svc-6 and svc-7.
    let mut svc = gang("svc", 4, 2_000, &[0, 0, 0, 0, 1, 1, 1, 1], 0, 1);
    svc.instances = Some(vec![vec![6, 7], vec![4, 5]]);
    let mut input = borrowed(vec![svc]);
    input.starved = vec![starved("b-gang", 1, 1, 2_000)];
    let verdict = &plan(&input)[0].1;
    let taken = match verdict {
        ReclaimVerdict::Yield(e) | ReclaimVerdict::Reclaim(e) => e,
        other => panic!("nothing taken: {other:?}"),
    };
    let pods: Vec<&str> = taken
        .iter()
        .flat_map(|e| &e.pods)
        .map(String::as_str)
        .collect();
    assert_eq!(
        pods,
        ["svc-6", "svc-7"],
        "2 CPUs, one member's room: the youngest instance goes whole, and the minimum stays"
    );
    assert!(taken.iter().all(|e| !e.whole));
}

#[test]
fn an_elastic_gang_yields_its_extras_to_a_gang_of_another_queue_even_at_its_deserved_share() {
    let mut input = ten_gpus_held_by_an_elastic_gang();
    // b's queue deserves nothing: reclaim would not take a GPU for it.
    input.queues.push(queue("other", 0, 0));
    input.starved[0].queue = 1;
    let out = plan(&input);
    assert_eq!(yielded(&out[0].1)[0].1.len(), 5);
    // A queue's guarantee still holds against other queues: guaranteed 8 GPUs, a keeps 8,
    // and two extras do not make room for five.
    input.queues[0].guarantee = Resources::from([("nvidia.com/gpu", 8)]);
    let out = plan(&input);
    assert!(
        matches!(&out[0].1, ReclaimVerdict::No(why) if why.contains("every elastic member that may yield")),
        "{out:?}"
    );
    // So does a queue that is not reclaimable.
    input.queues[0].guarantee = Resources::new();
    input.queues[0].reclaimable = false;
    assert!(matches!(plan(&input)[0].1, ReclaimVerdict::No(_)));
    // Its own queue's gangs yield whatever the queue says about others.
    input.starved[0].queue = 0;
    assert_eq!(yielded(&plan(&input)[0].1)[0].1.len(), 5);
}

#[test]
fn no_extra_is_evicted_for_a_gang_that_would_still_not_fit() {
    let mut input = ten_gpus_held_by_an_elastic_gang();
    // One member of 6 GPUs: no node of 5 GPUs holds it, however many extras go.
    input.starved[0].need = vec![gpus(6)];
    input.starved[0].requests = Resources::from([("nvidia.com/gpu", 6), ("pods", 1)]);
    let out = plan(&input);
    assert!(matches!(out[0].1, ReclaimVerdict::No(_)), "{out:?}");
    // Nor for six members of one GPU: five extras free five GPUs.
    input.starved[0].need = vec![gpus(1); 6];
    input.starved[0].requests = Resources::from([("nvidia.com/gpu", 6), ("pods", 6)]);
    let out = plan(&input);
    assert!(matches!(out[0].1, ReclaimVerdict::No(_)), "{out:?}");
}

#[test]
fn the_elastic_yield_never_takes_a_gang_below_its_minimum() {
    let mut input = ten_gpus_held_by_an_elastic_gang();
    // a: 7 of minMember 5 hold node 0 and two GPUs of node 1; `rigid` (minMember 3) the rest.
    input.gangs[0].members.truncate(7);
    input.gangs.push(Gang {
        key: "rigid".into(),
        queue: 0,
        min_member: 3,
        priority: 0,
        created: 0,
        members: (0..3)
            .map(|i| Member {
                uid: format!("rigid-{i}"),
                node: 1,
                requests: gpus(1),
                created: 0,
            })
            .collect(),
        instances: None,
    });
    let out = plan(&input);
    assert!(
        matches!(&out[0].1, ReclaimVerdict::No(why) if why.contains("every elastic member that may yield")),
        "two extras do not make room for five, and no minimum is touched: {out:?}"
    );
}

#[test]
fn elastic_extras_yield_before_any_whole_gang_of_lower_priority_is_preempted() {
    let mut input = ten_gpus_held_by_an_elastic_gang();
    // `a`, of priority 9, holds node 0 and one extra on node 1 (a-5); `low`, of priority
    // 0, three GPUs of node 1, which has one free. `b`, of priority 5, needs two.
    input.gangs[0].priority = 9;
    input.gangs[0].members.truncate(6);
    input.gangs.push(Gang {
        key: "low".into(),
        queue: 0,
        min_member: 3,
        priority: 0,
        created: 0,
        members: (0..3)
            .map(|i| Member {
                uid: format!("low-{i}"),
                node: 1,
                requests: gpus(1),
                created: 0,
            })
            .collect(),
        instances: None,
    });
    input.nodes[1] = Resources::from([("nvidia.com/gpu", 1), ("pods", 100)]);
    input.starved[0].priority = 5;
    input.starved[0].need = vec![gpus(1); 2];
    input.starved[0].requests = Resources::from([("nvidia.com/gpu", 2), ("pods", 2)]);
    assert_eq!(
        yielded(&plan(&input)[0].1),
        vec![("a".into(), vec!["a-5".into()], false)],
        "a's extra, though of higher priority than b, goes before the whole lower-priority gang"
    );
    // Without that extra, the lower-priority gang is preempted whole.
    input.gangs[0].members.truncate(5);
    input.nodes[1] = Resources::from([("nvidia.com/gpu", 2), ("pods", 100)]);
    input.starved[0].need = vec![gpus(1); 3];
    input.starved[0].requests = Resources::from([("nvidia.com/gpu", 3), ("pods", 3)]);
    assert_eq!(preempted(&plan(&input)[0].1)[0].0, "low");
}

/// Two nodes of 8 CPUs full of queue `a`'s gangs, which is at its deserved share (16 CPUs);
/// queue `b` holds nothing and deserves nothing.
fn full_queue(gangs: Vec<Gang<String>>) -> Input<String> {
    Input {
        queues: vec![queue("a", 16_000, 16_000), queue("b", 0, 0)],
        ..borrowed(gangs)
    }
}

fn preempted(verdict: &ReclaimVerdict<String>) -> Vec<(String, Vec<String>, bool)> {
    match verdict {
        ReclaimVerdict::Preempt(e) => e
            .iter()
            .map(|e| (e.gang.clone(), e.pods.clone(), e.whole))
            .collect(),
        other => panic!("no preemption: {other:?}"),
    }
}

#[test]
fn a_group_preempts_the_lowest_priority_then_youngest_gang_of_its_own_queue() {
    let mut input = full_queue(vec![
        gang("old", 2, 2_000, &[0, 0], 0, 1),
        gang("young", 2, 2_000, &[0, 0], 0, 5),
        gang("peer", 2, 2_000, &[1, 1], 5, 9),
        gang("low", 2, 2_000, &[1, 1], 1, 3),
    ]);
    input.starved = vec![Starved {
        priority: 5,
        ..starved("urgent", 0, 2, 2_000)
    }];
    let out = plan(&input);
    assert_eq!(
        preempted(&out[0].1),
        vec![(
            "young".into(),
            vec!["young-0".into(), "young-1".into()],
            true
        )],
        "priority 0 before 1, the youngest first; never a gang of its own priority"
    );
}

#[test]
fn a_group_waiting_for_its_queues_capability_preempts_for_it_not_for_room() {
    let mut a = queue("a", 4_000, 4_000);
    a.capability = Capability::from([("cpu", 4_000)]);
    let mut input = Input {
        queues: vec![a, queue("b", 0, 12_000)],
        nodes: vec![Resources::from([("cpu", 8_000), ("pods", 100)]); 2],
        ..borrowed(vec![gang("low", 2, 2_000, &[0, 0], 0, 1)])
    };
    input.starved = vec![Starved {
        priority: 5,
        capped: true,
        domains: None,
        instances: vec![],
        ..starved("urgent", 0, 2, 2_000)
    }];
    let out = plan(&input);
    assert_eq!(
        preempted(&out[0].1),
        vec![("low".into(), vec!["low-0".into(), "low-1".into()], true)],
        "room is free, its queue's capability is not"
    );
    // Without a lower-priority gang in its queue, nothing helps it, and reclaim says so.
    input.starved[0].priority = 0;
    let out = plan(&input);
    let ReclaimVerdict::No(why) = &out[0].1 else {
        panic!("{:?}", out[0].1)
    };
    assert!(why.contains("reached its capability"), "{why}");
}

#[test]
fn no_preemption_of_equal_priority_gangs_nor_of_other_queues() {
    let mut input = full_queue(vec![
        gang("same", 2, 2_000, &[0, 0], 5, 1),
        Gang {
            queue: 1,
            ..gang("elsewhere", 2, 2_000, &[1, 1], 0, 1)
        },
    ]);
    input.starved = vec![Starved {
        priority: 5,
        ..starved("urgent", 0, 2, 2_000)
    }];
    let out = plan(&input);
    let ReclaimVerdict::No(why) = &out[0].1 else {
        panic!("{:?}", out[0].1)
    };
    assert!(
        why.contains("would hold more than its deserved share"),
        "{why}"
    );
}

#[test]
fn preemption_evicts_nothing_when_all_lower_priority_gangs_would_not_make_room() {
    let mut input = full_queue(vec![
        gang("low", 1, 2_000, &[0], 0, 1),
        gang("high", 2, 6_000, &[0, 1], 9, 1),
    ]);
    input.starved = vec![Starved {
        priority: 5,
        ..starved("urgent", 0, 1, 8_000)
    }];
    let out = plan(&input);
    let ReclaimVerdict::No(why) = &out[0].1 else {
        panic!("{:?}", out[0].1)
    };
    assert!(
        why.ends_with(
            "evicting every gang of lower priority in its queue would still not make room for it"
        ),
        "{why}"
    );
}

#[test]
fn the_lowest_priority_then_youngest_whole_gang_that_makes_room_is_evicted() {
    let mut input = borrowed(vec![
        gang("old", 2, 2_000, &[0, 0], 0, 1),
        gang("young", 2, 2_000, &[0, 0], 0, 5),
        gang("important", 2, 2_000, &[1, 1], 10, 9),
        gang("other", 2, 2_000, &[1, 1], 0, 3),
    ]);
    input.starved = vec![starved("b1", 1, 2, 2_000)];
    let out = plan(&input);
    assert_eq!(
        evicted(&out[0].1),
        vec![(
            "young".into(),
            vec!["young-0".into(), "young-1".into()],
            true
        )]
    );
}

#[test]
fn elastic_extras_go_before_any_whole_gang() {
    let mut input = borrowed(vec![
        gang("young", 2, 2_000, &[0, 0], 0, 5),
        gang("elastic", 2, 2_000, &[1, 1, 1, 1], 0, 1),
        gang("old", 2, 2_000, &[0, 0], 0, 0),
    ]);
    input.starved = vec![starved("b1", 1, 1, 4_000)];
    let out = plan(&input);
    // The two youngest extras of `elastic` free 4 CPUs on node 1; the gang keeps minMember.
    assert_eq!(
        yielded(&out[0].1),
        vec![(
            "elastic".into(),
            vec!["elastic-2".into(), "elastic-3".into()],
            false
        )]
    );
}

#[test]
fn a_victim_queue_is_not_taken_below_its_deserved_share_nor_its_guarantee() {
    let mut input = borrowed(vec![
        gang("a1", 2, 2_000, &[0, 0], 0, 1),
        gang("a2", 2, 2_000, &[0, 0], 0, 2),
        gang("a3", 2, 2_000, &[1, 1], 0, 3),
        gang("a4", 2, 2_000, &[1, 1], 0, 4),
    ]);
    input.starved = vec![starved("b1", 1, 2, 2_000)];
    // a holds 16: taking a gang of 4 leaves 12.
    input.queues[0].deserved = Resources::from([("cpu", 12_000)]);
    assert_eq!(evicted(&plan(&input)[0].1)[0].0, "a4");
    input.queues[0].deserved = Resources::from([("cpu", 14_000)]);
    assert!(
        matches!(plan(&input)[0].1, ReclaimVerdict::No(_)),
        "deserved"
    );

    input.queues[0].deserved = Resources::new();
    input.queues[0].guarantee = Resources::from([("cpu", 12_000)]);
    assert_eq!(evicted(&plan(&input)[0].1)[0].0, "a4");
    input.queues[0].guarantee = Resources::from([("cpu", 14_000)]);
    assert!(
        matches!(plan(&input)[0].1, ReclaimVerdict::No(_)),
        "guarantee"
    );
}

#[test]
fn one_group_of_a_queue_is_searched_for_victims_per_pass() {
    let mut input = borrowed(vec![
        gang("a1", 2, 2_000, &[0, 0], 0, 1),
        gang("a2", 2, 2_000, &[1, 1], 0, 2),
    ]);
    input.starved = vec![starved("b1", 1, 2, 2_000), starved("b2", 1, 2, 2_000)];
    let out = plan(&input);
    assert_eq!(evicted(&out[0].1)[0].0, "a2");
    assert!(
        matches!(&out[1].1, ReclaimVerdict::No(why) if why.contains("one group of queue b per pass")),
        "{out:?}"
    );
}

#[test]
fn a_queue_at_its_deserved_share_does_not_reclaim() {
    let mut input = borrowed(vec![gang("a1", 2, 4_000, &[0, 1], 0, 1)]);
    input.queues[1].allocated = Resources::from([("cpu", 8_000)]);
    input.starved = vec![starved("b1", 1, 1, 1_000)];
    let out = plan(&input);
    assert!(
        matches!(&out[0].1, ReclaimVerdict::No(why) if why.contains("more than its deserved share of cpu")),
        "{out:?}"
    );
}

#[test]
fn a_queue_marked_not_reclaimable_keeps_what_it_borrowed() {
    let mut input = borrowed(vec![gang("a1", 2, 4_000, &[0, 1], 0, 1)]);
    input.queues[0].reclaimable = false;
    input.starved = vec![starved("b1", 1, 1, 1_000)];
    assert!(matches!(plan(&input)[0].1, ReclaimVerdict::No(_)));
}

#[test]
fn nothing_is_evicted_when_it_would_not_make_the_group_fit() {
    // 8 CPUs for one member: no node frees that much without taking a below its share.
    let mut input = borrowed(vec![
        gang("a1", 2, 4_000, &[0, 1], 0, 1),
        gang("a2", 2, 4_000, &[0, 1], 0, 2),
    ]);
    input.starved = vec![starved("b1", 1, 1, 8_000)];
    assert!(
        matches!(plan(&input)[0].1, ReclaimVerdict::No(_)),
        "{:?}",
        plan(&input)
    );
}

#[test]
fn victims_not_needed_in_the_end_are_put_back() {
    // The youngest gang (node 0, 2 CPUs) does not make room for 6 CPUs on one node; the
    // next (node 1, 6 CPUs) does alone, so the first is put back.
    let mut input = borrowed(vec![
        gang("small", 1, 2_000, &[0], 0, 9),
        gang("big", 2, 3_000, &[1, 1], 0, 5),
        gang("rest", 1, 6_000, &[0], 0, 0),
        gang("fill", 1, 2_000, &[1], 0, 0),
    ]);
    input.starved = vec![starved("b1", 1, 1, 6_000)];
    assert_eq!(evicted(&plan(&input)[0].1)[0].0, "big");
    assert_eq!(evicted(&plan(&input)[0].1).len(), 1);
}

#[test]
fn a_group_that_fits_once_evicted_pods_are_gone_needs_nothing_more_and_books_its_room() {
    let mut input = borrowed(vec![gang("a1", 2, 2_000, &[0, 0], 0, 1)]);
    input.nodes[1] = Resources::from([("cpu", 4_000), ("pods", 100)]);
    input.queues[0].allocated = Resources::from([("cpu", 12_000)]);
    input.starved = vec![starved("b1", 1, 2, 2_000), starved("b2", 1, 2, 2_000)];
    let out = plan(&input);
    assert_eq!(out[0].1, ReclaimVerdict::Fits);
    assert_eq!(evicted(&out[1].1)[0].0, "a1");
}

mod properties {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// Per queue: (weight, guarantee, reclaimable), the cluster shared by weight; per gang: (queue, minMember, priority,
    /// created, members as (node, cpu), the size of its instances beyond minMember when it is a
    /// gang of sub-groups, else 0); per starved group: (queue, pods, cpu each, priority);
    /// nodes' capacity in CPUs.
    type Scenario = (
        Vec<(i64, i64, bool)>,
        Vec<(usize, u32, i32, i64, Vec<(usize, i64)>, usize)>,
        Vec<(usize, usize, i64, i32)>,
        Vec<i64>,
    );

    fn scenario() -> impl Strategy<Value = Scenario> {
        (
            prop::collection::vec((1i64..4, 0i64..6, prop::bool::weighted(0.8)), 2..4),
            prop::collection::vec(
                (
                    0usize..4,
                    1u32..4,
                    0i32..3,
                    0i64..5,
                    prop::collection::vec((0usize..4, 1i64..4), 1..5),
                    0usize..3,
                ),
                2..12,
            ),
            prop::collection::vec((0usize..4, 1usize..4, 1i64..5, 0i32..4), 1..4),
            prop::collection::vec(4i64..10, 1..4),
        )
    }

    /// Builds a consistent input: gangs on nodes with room, each queue's allocation the sum
    /// of its gangs.
    fn build((queues, gangs, starved, nodes): Scenario) -> Input<usize> {
        let n = nodes.len();
        let q = queues.len();
        let capacity: i64 = nodes.iter().sum::<i64>() * 1_000;
        let weights: i64 = queues.iter().map(|(w, _, _)| w).sum();
        let mut free: Vec<Resources> = nodes.iter().map(|&c| super::cpu(c * 1_000)).collect();
        for f in &mut free {
            f.set("pods", 100);
        }
        let mut input = Input {
            queues: queues
                .iter()
                .enumerate()
                .map(|(i, &(weight, guarantee, reclaimable))| ReclaimQueue {
                    name: format!("q{i}"),
                    allocated: Resources::new(),
                    deserved: Resources::from([("cpu", capacity * weight / weights)]),
                    guarantee: Resources::from([("cpu", guarantee * 1_000)]),
                    reclaimable,
                    capability: Capability::unbounded(),
                })
                .collect(),
            nodes: vec![],
            in_flight: Resources::new(),
            gangs: vec![],
            starved: vec![],
        };
        for (g, (queue, min, priority, created, members, instance)) in gangs.into_iter().enumerate()
        {
            let queue = queue % q;
            let mut placed = Vec::new();
            for (i, (node, c)) in members.into_iter().enumerate() {
                let node = node % n;
                let requests = super::cpu(c * 1_000);
                if requests.fits_in(&free[node]) {
                    free[node].sub(&requests);
                    input.queues[queue].allocated.add(&requests);
                    placed.push(Member {
                        uid: format!("g{g}-{i}"),
                        node,
                        requests,
                        created: created + i as i64 % 2,
                    });
                }
            }
            let instances = (instance > 0 && placed.len() >= min as usize).then(|| {
                // Whole instances beyond the minimum only; a last one in part is not placed.
                let whole = (placed.len() - min as usize) / instance * instance + min as usize;
                for m in placed.drain(whole..) {
                    free[m.node].add(&m.requests);
                    input.queues[queue].allocated.sub(&m.requests);
                }
                let extras: Vec<usize> = (min as usize..whole).collect();
                extras
                    .chunks(instance)
                    .rev()
                    .map(<[usize]>::to_vec)
                    .collect::<Vec<_>>()
            });
            if placed.len() >= min as usize {
                input.gangs.push(Gang {
                    key: g,
                    queue,
                    min_member: min,
                    priority,
                    created,
                    members: placed,
                    instances,
                });
            } else {
                for m in placed {
                    free[m.node].add(&m.requests);
                    input.queues[queue].allocated.sub(&m.requests);
                }
            }
        }
        input.nodes = free;
        input.starved = starved
            .into_iter()
            .enumerate()
            .map(|(i, (queue, pods, c, priority))| {
                let s = super::starved("", queue % q, pods, c * 1_000);
                Starved {
                    key: 100 + i,
                    queue: s.queue,
                    need: s.need,
                    requests: s.requests,
                    priority,
                    capped: false,
                    domains: None,
                    instances: vec![],
                }
            })
            .collect();
        input
    }

    /// A gang of sub-groups' instances beyond its minimum as its members' UIDs.
    fn instance_uids(gang: &Gang<usize>) -> Option<Vec<Vec<String>>> {
        let uid = |m: &usize| gang.members[*m].uid.clone();
        let instances = gang.instances.as_ref()?;
        Some(
            instances
                .iter()
                .map(|i| i.iter().map(uid).collect())
                .collect(),
        )
    }

    /// The evictions of reclaim verdicts, or with `every` of every verdict (priority
    /// preemption and the elastic yield too).
    fn evictions(out: &[(usize, ReclaimVerdict<usize>)], every: bool) -> Vec<&Eviction<usize>> {
        out.iter()
            .flat_map(|(_, v)| match v {
                ReclaimVerdict::Reclaim(e) => e.iter().collect(),
                ReclaimVerdict::Preempt(e) | ReclaimVerdict::Yield(e) if every => {
                    e.iter().collect()
                }
                _ => vec![],
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        #[test]
        fn reclaim_keeps_gangs_whole_spares_guarantees_and_unreclaimable_queues(s in scenario()) {
            let input = build(s);
            let out = plan(&input);
            let mut after: Vec<Resources> = input.queues.iter().map(|q| q.allocated.clone()).collect();
            for gang in &input.gangs {
                let gone = |preemption| -> Vec<&Member> {
                    evictions(&out, preemption)
                        .iter()
                        .filter(|e| e.gang == gang.key)
                        .flat_map(|e| e.pods.iter())
                        .map(|uid| gang.members.iter().find(|m| &m.uid == uid).expect("a member of the gang"))
                        .collect()
                };
                // Whole gangs across every verdict: a preemption may take a gang's extras
                // and a later reclaim the rest.
                let taken = gone(true);
                let left = gang.members.len() - taken.len();
                prop_assert!(left == 0 || left >= gang.min_member as usize,
                    "gang {} left with {left} of minMember {}", gang.key, gang.min_member);
                // A gang of sub-groups loses whole instances beyond its minimum, or everything.
                if let (Some(instances), true) = (&gang.instances, left > 0) {
                    let uids: Vec<&str> = taken.iter().map(|m| m.uid.as_str()).collect();
                    for instance in instances {
                        let gone = instance.iter().filter(|&&i| uids.contains(&gang.members[i].uid.as_str())).count();
                        prop_assert!(gone == 0 || gone == instance.len(),
                            "gang {} lost {gone} of an instance of {}", gang.key, instance.len());
                    }
                }
                // Reclaim alone answers to other queues' guarantees and shares; priority
                // preemption moves room inside one queue.
                let gone = gone(false);
                if !gone.is_empty() {
                    prop_assert!(input.queues[gang.queue].reclaimable);
                }
                for m in gone {
                    after[gang.queue].sub(&m.requests);
                }
            }
            for (v, queue) in input.queues.iter().enumerate() {
                if after[v] != queue.allocated {
                    prop_assert!(after[v].get("cpu") >= queue.guarantee.get("cpu"),
                        "queue {v} taken below its guarantee");
                    prop_assert!(after[v].get("cpu") >= queue.deserved.get("cpu"),
                        "queue {v} taken below its deserved share");
                }
            }
        }

        #[test]
        fn a_victim_queue_cannot_reclaim_back_from_its_reclaimer(s in scenario(), back in (1usize..4, 1i64..5)) {
            let input = build(s);
            let out = plan(&input);
            // The world after: every victim gone, every group served admitted.
            let mut next = input.clone();
            next.starved.clear();
            let mut pairs = Vec::new();
            for ((_, verdict), starved) in out.iter().zip(&input.starved) {
                match verdict {
                    ReclaimVerdict::No(_) => continue,
                    ReclaimVerdict::Fits => {}
                    ReclaimVerdict::Reclaim(taken)
                    | ReclaimVerdict::Preempt(taken)
                    | ReclaimVerdict::Yield(taken) => {
                        for e in taken {
                            if matches!(verdict, ReclaimVerdict::Reclaim(_)) {
                                pairs.push((e.queue, starved.queue));
                            }
                            let gang = next.gangs.iter_mut().find(|g| g.key == e.gang).unwrap();
                            let instances = instance_uids(gang);
                            for uid in &e.pods {
                                let at = gang.members.iter().position(|m| &m.uid == uid).unwrap();
                                let m = gang.members.remove(at);
                                next.nodes[m.node].add(&m.requests);
                                next.queues[gang.queue].allocated.sub(&m.requests);
                            }
                            gang.instances = instances.map(|is| {
                                is.iter()
                                    .filter_map(|i| {
                                        i.iter()
                                            .map(|u| gang.members.iter().position(|m| &m.uid == u))
                                            .collect()
                                    })
                                    .collect()
                            });
                        }
                    }
                }
                prop_assert!(place(&mut next.nodes, &starved.need).is_ok(), "served but does not fit");
                next.queues[starved.queue].allocated.add(&starved.requests);
            }
            next.gangs.retain(|g| !g.members.is_empty());
            for (victim, reclaimer) in pairs {
                // A reclaim never takes its queue above its deserved share, but a later
                // group of that queue may fit in free room (room another queue's
                // preemption left, say) and borrow: what is borrowed may be reclaimed.
                let reclaimer_queue = &next.queues[reclaimer];
                if reclaimer_queue.allocated.get("cpu") > reclaimer_queue.deserved.get("cpu") {
                    continue;
                }
                let s = super::starved("", victim, back.0, back.1 * 1_000);
                next.starved = vec![Starved { key: 999, queue: victim, need: s.need, requests: s.requests, priority: 0, capped: false, domains: None, instances: vec![] }];
                for e in evictions(&plan(&next), false) {
                    prop_assert_ne!(e.queue, reclaimer, "queue {} reclaims back from {}", victim, reclaimer);
                }
            }
        }

        #[test]
        fn the_elastic_yield_takes_only_extras_and_keeps_other_queues_at_their_guarantee(s in scenario()) {
            let input = build(s);
            let out = plan(&input);
            // Per queue: what other queues' groups took from it, by any rule.
            let mut taken_by_others: Vec<Resources> = vec![Resources::new(); input.queues.len()];
            for ((_, verdict), starved) in out.iter().zip(&input.starved) {
                let (ReclaimVerdict::Yield(taken) | ReclaimVerdict::Reclaim(taken)) = verdict else { continue };
                for e in taken {
                    let gang = input.gangs.iter().find(|g| g.key == e.gang).unwrap();
                    if matches!(verdict, ReclaimVerdict::Yield(_)) {
                        prop_assert!(!e.whole, "the yield took gang {} whole", gang.key);
                        prop_assert!(gang.members.len() - e.pods.len() >= gang.min_member as usize);
                        if gang.queue != starved.queue {
                            prop_assert!(input.queues[gang.queue].reclaimable);
                        }
                    }
                    if gang.queue == starved.queue {
                        continue;
                    }
                    for m in gang.members.iter().filter(|m| e.pods.contains(&m.uid)) {
                        taken_by_others[gang.queue].add(&m.requests);
                    }
                }
            }
            for (v, queue) in input.queues.iter().enumerate() {
                if taken_by_others[v].get("cpu") > 0 {
                    let after = queue.allocated.minus(&taken_by_others[v]);
                    prop_assert!(after.get("cpu") >= queue.guarantee.get("cpu"),
                        "queue {v} taken below its guarantee");
                }
            }
        }

        #[test]
        fn reclaim_is_deterministic_and_ignores_the_order_of_gangs(s in scenario()) {
            let input = build(s);
            let mut reversed = input.clone();
            reversed.gangs.reverse();
            prop_assert_eq!(plan(&input), plan(&input.clone()));
            prop_assert_eq!(plan(&input), plan(&reversed));
        }

        #[test]
        fn a_plan_evicts_nothing_when_no_starved_group_may_reclaim_or_preempt(s in scenario()) {
            let input = build(s);
            let may = input.starved.iter().any(|g| may_reclaim(&input.queues[g.queue], &g.need, &g.requests));
            // What `crate::admit::reclaim` checks before building the input.
            let lowest = input.gangs.iter().map(|g| g.priority).min().unwrap_or(i32::MAX);
            let may_preempt = input.starved.iter().any(|g| g.priority > lowest);
            let elastic = input.gangs.iter().any(|g| g.members.len() > g.min_member as usize);
            if !may && !may_preempt && !elastic {
                let out = plan(&input);
                prop_assert!(out.iter().all(|(_, v)| matches!(v, ReclaimVerdict::Fits | ReclaimVerdict::No(_))), "{:?}", out);
            }
        }

        #[test]
        fn every_victim_is_needed(s in scenario()) {
            let input = build(s);
            let out = plan(&input);
            // Only the first starved group sees the input's world unchanged.
            let Some((_, ReclaimVerdict::Reclaim(evictions) | ReclaimVerdict::Yield(evictions))) = out.first() else { return Ok(()) };
            let first = &input.starved[0];
            for skip in 0..evictions.len() {
                let mut nodes = input.nodes.clone();
                let mut guarantees = Resources::new();
                let mut allocated: Vec<Resources> = input.queues.iter().map(|q| q.allocated.clone()).collect();
                for (_, e) in evictions.iter().enumerate().filter(|(i, _)| *i != skip) {
                    let gang = input.gangs.iter().find(|g| g.key == e.gang).unwrap();
                    for m in gang.members.iter().filter(|m| e.pods.contains(&m.uid)) {
                        nodes[m.node].add(&m.requests);
                        allocated[gang.queue].sub(&m.requests);
                    }
                }
                for (v, q) in input.queues.iter().enumerate() {
                    if v != first.queue {
                        guarantees.add(&q.guarantee.minus(&allocated[v]).positive());
                    }
                }
                let mut total = Resources::new();
                for n in &nodes {
                    total.add(&n.positive());
                }
                let mut sum = Resources::new();
                for p in &first.need {
                    sum.add(p);
                }
                let fits = sum.fits_in(&total.minus(&guarantees)) && place(&mut nodes, &first.need).is_ok();
                prop_assert!(!fits, "eviction {skip} of {evictions:?} was not needed");
            }
        }

        #[test]
        fn preemption_takes_whole_gangs_of_lower_priority_in_the_groups_own_queue(s in scenario()) {
            let input = build(s);
            let out = plan(&input);
            let mut gone: BTreeMap<usize, usize> = BTreeMap::new();
            for ((_, verdict), starved) in out.iter().zip(&input.starved) {
                let (ReclaimVerdict::Preempt(taken) | ReclaimVerdict::Reclaim(taken) | ReclaimVerdict::Yield(taken)) = verdict else { continue };
                prop_assert!(!taken.is_empty());
                for e in taken {
                    *gone.entry(e.gang).or_default() += e.pods.len();
                    if !matches!(verdict, ReclaimVerdict::Preempt(_)) {
                        continue;
                    }
                    let gang = input.gangs.iter().find(|g| g.key == e.gang).unwrap();
                    prop_assert_eq!(gang.queue, starved.queue, "a victim of another queue");
                    prop_assert!(gang.priority < starved.priority,
                        "victim {} of priority {} for a group of priority {}", gang.key, gang.priority, starved.priority);
                }
            }
            for (key, gone) in gone {
                let gang = input.gangs.iter().find(|g| g.key == key).unwrap();
                let left = gang.members.len() - gone;
                prop_assert!(left == 0 || left >= gang.min_member as usize,
                    "gang {key} left with {left} of minMember {}", gang.min_member);
            }
        }
    }
}
