//! Gangs whose members differ in shape: a head of 32 CPUs and workers of 32 CPUs and 256 MiB
//! (KubeRay's workers carry an init container with memory), on four nodes of 32 CPUs. The
//! filter steers each member to a slot of its shape, and the bind gives up that slot.

use std::time::Instant;

use super::testing::{SETTINGS, group};
use super::{Settings, filter, reserve};
use crate::model::{Pod, Resources, State};
use crate::policy::constraints::Constraints;
use crate::testing::{PodBuilder, node_of, pod};

/// The gang `g` of a head (`m0`) and three workers on four empty nodes, and the settings.
fn gang() -> (State, Vec<Pod>, Settings) {
    let mut s = State::default();
    for i in 0..4 {
        s.apply_node(node_of(
            format!("n{i}"),
            Resources::from([("cpu", 32_000), ("memory", 1 << 40), ("pods", 110)]),
        ));
    }
    group(&mut s, "g", 4);
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            let memory = if i == 0 { 0 } else { 256 << 20 };
            pod(format!("m{i}"))
                .in_group("g")
                .requests(Resources::from([
                    ("cpu", 32_000),
                    ("memory", memory),
                    ("pods", 1),
                ]))
                .marked()
        })
        .collect();
    for p in &pods {
        s.apply_pod(p.clone());
    }
    (s, pods, SETTINGS)
}

/// The scheduler's part: each member in `order` is filtered over the nodes no earlier
/// member was assumed on, and goes to the first that passes; its bind (the reservation)
/// comes at once or after every member was filtered. Panics, naming the reasons, when a
/// member finds no node.
fn place(order: &[usize], bind_at_once: bool) {
    let (mut s, pods, settings) = gang();
    let now = Instant::now();
    let mut taken: Vec<String> = Vec::new();
    let mut to_bind = Vec::new();
    let bind = |s: &mut State, i: usize, node: &str| {
        reserve(s, &pods[i].uid, &format!("ns/m{i}"), node, &settings, now).unwrap();
    };
    for &i in order {
        let free: Vec<String> = (0..4)
            .map(|n| format!("n{n}"))
            .filter(|n| !taken.contains(n))
            .collect();
        let v = filter(
            &mut s,
            &pods[i],
            &Constraints::default(),
            &free,
            &settings,
            now,
        )
        .unwrap();
        let failed: Vec<_> = v.failed.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let node = v
            .passed
            .first()
            .unwrap_or_else(|| panic!("order {order:?} at {i}: no node; {failed:?}"))
            .to_string();
        taken.push(node.clone());
        if bind_at_once {
            bind(&mut s, i, &node);
        } else {
            to_bind.push((i, node));
        }
    }
    for (i, node) in to_bind {
        bind(&mut s, i, &node);
    }
}

#[test]
fn a_member_whose_tightest_slot_is_on_no_candidate_takes_a_bigger_slot() {
    let (mut s, pods, settings) = gang();
    let now = Instant::now();
    let every = ["n0", "n1", "n2", "n3"];
    // A worker plans the claim: three worker-shaped slots, then the head's on n3.
    let v = filter(
        &mut s,
        &pods[1],
        &Constraints::default(),
        &every,
        &settings,
        now,
    )
    .unwrap();
    assert!(!v.passed.is_empty());
    let head = |candidates: &[&'static str], s: &mut State| {
        filter(
            s,
            &pods[0],
            &Constraints::default(),
            candidates,
            &settings,
            now,
        )
        .unwrap()
        .passed
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
    };
    assert_eq!(
        head(&every, &mut s),
        ["n3"],
        "the head is steered to its own slot"
    );
    assert_eq!(head(&["n0", "n1"], &mut s), ["n0", "n1"]);
}

#[test]
fn every_member_finds_a_node_whatever_the_order_and_whenever_the_binds_come() {
    for bind_at_once in [true, false] {
        for order in [
            [0, 1, 2, 3],
            [1, 0, 2, 3],
            [1, 2, 0, 3],
            [1, 2, 3, 0],
            [3, 2, 1, 0],
        ] {
            place(&order, bind_at_once);
        }
    }
}

#[test]
fn a_claim_counts_the_members_admission_released_before_bigger_ones_it_holds_at_the_gate() {
    // A gang of two released members of 2 CPUs (its minimum) and two of 20 still at the gate
    // (an instance beyond a gang of sub-groups' minimum), on one node of 8 CPUs.
    let mut s = State::default();
    s.apply_node(node_of(
        "n0",
        Resources::from([("cpu", 8_000), ("pods", 110)]),
    ));
    group(&mut s, "g", 2);
    let member = |i: usize, cpu: i64| {
        pod(format!("m{i}"))
            .in_group("g")
            .requests(Resources::from([("cpu", cpu * 1_000), ("pods", 1)]))
            .marked()
    };
    let released = member(0, 2);
    s.apply_pod(released.clone());
    s.apply_pod(member(1, 2));
    for i in 2..4 {
        s.apply_pod(member(i, 20).gated());
    }
    let verdict = filter(
        &mut s,
        &released,
        &Constraints::default(),
        &["n0"],
        &SETTINGS,
        Instant::now(),
    )
    .unwrap();
    assert_eq!(verdict.passed, ["n0"], "{:?}", verdict.failed);
}
