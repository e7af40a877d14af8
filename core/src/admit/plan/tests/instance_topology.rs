//! Gangs of sub-groups whose instances each keep to one domain (a sub-group's `topologyKey`):
//! every instance whole in one rack, instances free to share a rack or not, and a gang whose
//! instances fit the cluster but not a rack each waits, saying which sub-group; at the head of
//! the line it reserves for each instance inside one rack, and it never backfills a
//! reservation.

use std::collections::BTreeMap;

use super::*;
use crate::model::sub_groups::SubGroup;

/// Nodes `a1`, `a2` in rack `a` and `b1`, `b2` in rack `b`, of 8 CPUs each, with `used` CPUs
/// taken on each by running pods in no group.
fn racks(used: [i64; 4]) -> State {
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    for ((name, rack), used) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")]
        .into_iter()
        .zip(used)
    {
        let labels = [("rack".to_owned(), rack.to_owned())].into();
        s.apply_node(Node {
            labels,
            ..node(name, 8_000)
        });
        if used > 0 {
            running(&mut s, &format!("on-{name}"), None, name, used, NOW - 10);
        }
    }
    s
}

/// The job `train` in queue `q`: at least `min` of its `slices` slices of two members of
/// `cpu` millicores, each slice within one rack.
fn slices(s: &mut State, slices: usize, min: u32, cpu: i64) {
    s.apply_pod_group(PodGroup {
        sub_groups: vec![SubGroup {
            name: "slice".into(),
            size: 2,
            min_count: min,
            selector: BTreeMap::new(),
            match_label_keys: vec!["slice".into()],
            topology_key: Some("rack".into()),
        }],
        ..pod_group("train", 2 * min, "q")
    });
    for i in 0..slices {
        for m in 0..2 {
            s.apply_pod(
                pod(format!("train-{i}-{m}"))
                    .in_group("train")
                    .in_queue("q")
                    .gated()
                    .cpu(cpu)
                    .labeled("slice", &i.to_string()),
            );
        }
    }
}

/// The rack each released member of a slice was given, by slice.
fn racks_of_slices(d: &Decision) -> BTreeMap<String, Vec<String>> {
    let mut by_slice: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in d.admit.iter().flat_map(|a| &a.pods) {
        let slice = pod.name.split('-').nth(1).unwrap().to_owned();
        let rack = pod.node_selector.as_ref().and_then(|s| s.get("rack"));
        by_slice
            .entry(slice)
            .or_default()
            .push(rack.cloned().unwrap_or_else(|| "anywhere".into()));
    }
    by_slice
}

#[test]
fn each_instance_of_the_minimum_goes_whole_into_one_rack_of_its_own_choosing() {
    // 4 CPUs free on every node: a slice of two 4-CPU members fits either rack, not more.
    let mut s = racks([4_000; 4]);
    slices(&mut s, 2, 2, 4_000);
    let d = decide_now(&s);
    assert_eq!(admitted(&d), ["train"]);
    let by_slice = racks_of_slices(&d);
    let mut placed: Vec<&str> = by_slice
        .values()
        .map(|racks| {
            assert!(racks[0] == racks[1], "a slice split: {by_slice:?}");
            racks[0].as_str()
        })
        .collect();
    placed.sort_unstable();
    assert_eq!(placed, ["a", "b"], "one slice in each rack: {by_slice:?}");
}

#[test]
fn instances_that_fit_the_cluster_but_not_a_rack_each_wait_naming_their_sub_group() {
    // 4 CPUs free on a1 and on b1 only: the two members of a slice fit the cluster, one in
    // each rack, but no rack holds both.
    let mut s = racks([4_000, 8_000, 4_000, 8_000]);
    slices(&mut s, 1, 1, 4_000);
    let d = decide_now(&s);
    assert!(d.admit.is_empty(), "{:?}", d.admit);
    assert!(
        why(&d, "train").contains(
            "each instance of sub-group slice runs within one domain; no domain has room for all of an instance; 2 domains of rack tried"
        ),
        "{}",
        why(&d, "train")
    );

    // Without the level, the same slice is released, its members on both racks.
    let mut s = racks([4_000, 8_000, 4_000, 8_000]);
    slices(&mut s, 1, 1, 4_000);
    let mut spec = s.groups()[&GroupKey::new("ns", "train")]
        .spec
        .as_deref()
        .unwrap()
        .clone();
    spec.sub_groups[0].topology_key = None;
    s.apply_pod_group(spec);
    assert_eq!(admitted(&decide_now(&s)), ["train"]);
}

#[test]
fn an_instance_beyond_the_minimum_goes_whole_into_one_rack_or_waits() {
    // Rack a is free (16 CPUs), rack b has 4 + 4: the minimum slice of two 8-CPU members
    // takes rack a; a second slice fits nowhere whole (rack b's 8 CPUs are on two nodes).
    let mut s = racks([0, 0, 4_000, 4_000]);
    slices(&mut s, 2, 1, 8_000);
    let d = decide_now(&s);
    let by_slice = racks_of_slices(&d);
    assert_eq!(by_slice.len(), 1, "{by_slice:?}");
    assert_eq!(by_slice.values().next().unwrap(), &["a", "a"]);
    release(&mut s, &d);
    let first = by_slice.keys().next().unwrap();
    for (m, node) in ["a1", "a2"].into_iter().enumerate() {
        let pod = s.pods()[&format!("train-{first}-{m}")].as_ref().clone();
        s.apply_pod(pod.running_on(node));
    }
    assert!(
        decide_now(&s).admit.is_empty(),
        "the second slice would be split over rack b's two nodes"
    );

    // Once rack b frees, the second slice goes whole into it.
    s.delete_pod("on-b1");
    s.delete_pod("on-b2");
    let d = decide_now(&s);
    let by_slice = racks_of_slices(&d);
    assert_eq!(
        by_slice.values().collect::<Vec<_>>(),
        [&["b", "b"]],
        "{by_slice:?}"
    );
}

#[test]
fn the_head_reserves_for_each_instance_inside_one_rack() {
    // Racks a (a1-a3) and b (b1-b3) of 8-CPU nodes; free: a1 5, b1 5, b2 5, b3 1, the rest 0.
    // Two slices of two 6-CPU members fit nowhere now: the gang heads the line. The nodes
    // with the most free (a1, b1, b2, b3) would split a slice over both racks; each slice is
    // held inside one: b1 and b2, then a1 and a2.
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    for (name, used) in [
        ("a1", 3_000),
        ("a2", 8_000),
        ("a3", 8_000),
        ("b1", 3_000),
        ("b2", 3_000),
        ("b3", 7_000),
    ] {
        let labels = [("rack".to_owned(), name[..1].to_owned())].into();
        s.apply_node(Node {
            labels,
            ..node(name, 8_000)
        });
        running(&mut s, &format!("on-{name}"), None, name, used, NOW - 10);
    }
    slices(&mut s, 2, 2, 6_000);
    let d = decide_now(&s);
    assert_eq!(reason(&d, "train"), Reason::Reserved);
    assert_eq!(held_nodes(&d), ["a1", "a2", "b1", "b2"]);
}

#[test]
fn a_gang_whose_instances_keep_to_a_rack_does_not_backfill_the_reservation() {
    // Rack a holds n1 and n2; big reserves n2's 4 free CPUs until busy ends in 50 s. A slice
    // of two 2-CPU members, done in 30 s, would fit there, but a reservation is no place to
    // keep an instance to its rack: it waits behind.
    let mut s = super::backfill::big_waits_behind_busy();
    expect_runtime(&mut s, "busy", 100);
    for name in ["n1", "n2"] {
        let labels = [("rack".to_owned(), "a".to_owned())].into();
        s.apply_node(Node {
            labels,
            ..node(name, 8_000)
        });
    }
    s.apply_pod_group(PodGroup {
        sub_groups: vec![SubGroup {
            name: "slice".into(),
            size: 2,
            min_count: 1,
            selector: BTreeMap::new(),
            match_label_keys: vec!["slice".into()],
            topology_key: Some("rack".into()),
        }],
        ..pod_group("train", 2, "q")
    });
    for m in 0..2 {
        let member = pod(format!("train-0-{m}")).in_group("train").in_queue("q");
        s.apply_pod(
            member
                .gated()
                .cpu(2_000)
                .labeled("slice", "0")
                .created(NOW - 100),
        );
    }
    expect_runtime(&mut s, "train", 30);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), Vec::<String>::new());
    assert_eq!(reason(&d, "train"), Reason::BehindReservation);
}
