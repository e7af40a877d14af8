//! Gangs with a topology (a required `topologyKey`, a `preferredTopologyKey`, the levels of a
//! Topology): whole in one domain, or waiting saying why.

use std::collections::BTreeMap;

use super::*;
use crate::model::Topology;

/// Nodes `a1`, `a2` in zone `a` and `b1`, `b2` in zone `b`, of 8 CPUs each, with `used`
/// CPUs taken on each by running pods in no group.
fn zones(used: [i64; 4]) -> State {
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    for ((name, zone), used) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")]
        .into_iter()
        .zip(used)
    {
        s.apply_node(node(name, 8_000));
        let labels = [("zone".to_owned(), zone.to_owned())].into();
        let n = s.nodes().get(name).unwrap().as_ref().clone();
        s.apply_node(Node { labels, ..n });
        if used > 0 {
            running(&mut s, &format!("on-{name}"), None, name, used, NOW - 10);
        }
    }
    s
}

fn with_topology(s: &mut State, name: &str, key: &str) {
    let group = GroupKey::new("ns", name);
    let spec = s.groups()[&group].spec.as_deref().unwrap().clone();
    s.apply_pod_group(PodGroup {
        topology_key: Some(key.into()),
        ..spec
    });
}

#[test]
fn a_gang_with_a_topology_key_goes_whole_into_the_tightest_domain_that_fits_it() {
    // Zone a has 4 + 8 CPUs free, zone b 6 + 6: three members of 4 CPUs fit only in a.
    let mut s = zones([4_000, 0, 2_000, 2_000]);
    gang(&mut s, "g", "q", 3, 4_000, NOW - 60);
    with_topology(&mut s, "g", "zone");
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["g"]);
    for pod in &d.admit[0].pods {
        assert_eq!(
            pod.node_selector,
            Some([("zone".to_owned(), "a".to_owned())].into()),
            "{pod:?}"
        );
    }
    // Two members fit in both zones: the one with less room left over is chosen.
    let mut s = zones([0, 0, 2_000, 2_000]);
    gang(&mut s, "g", "q", 2, 4_000, NOW - 60);
    with_topology(&mut s, "g", "zone");
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(
        d.admit[0].pods[0].node_selector,
        Some([("zone".to_owned(), "b".to_owned())].into())
    );
    // Without a topology key, nothing is added.
    let mut s = zones([0, 0, 0, 0]);
    gang(&mut s, "g", "q", 2, 4_000, NOW - 60);
    assert_eq!(
        decide_at(&s, &|_| false, NOW).admit[0].pods[0].node_selector,
        None
    );
}

#[test]
fn a_gang_split_over_domains_waits_and_says_why() {
    // 6 + 6 CPUs free in zone a, 4 + 4 in zone b: three members of 4 CPUs fit the
    // cluster, not one zone.
    let mut s = zones([2_000, 2_000, 4_000, 4_000]);
    gang(&mut s, "g", "q", 3, 4_000, NOW - 60);
    with_topology(&mut s, "g", "zone");
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(reason(&d, "g"), Reason::Reserved);
    assert!(
        why(&d, "g").contains("no single domain has room for every member; 2 domains of zone tried: zone=a holds 2 of 3 members (then one requesting cpu: 4, pods: 1 finds no node)"),
        "{}",
        why(&d, "g")
    );
    let mut s = zones([0, 0, 0, 0]);
    gang(&mut s, "g", "q", 1, 1_000, NOW - 60);
    with_topology(&mut s, "g", "rack");
    let d = decide_at(&s, &|_| false, NOW);
    assert!(
        why(&d, "g").contains("no schedulable node has the label rack"),
        "{}",
        why(&d, "g")
    );
}

#[test]
fn a_gang_whose_topology_key_no_node_has_waits_without_holding_room_for_itself() {
    // The whole cluster (4 x 8 CPUs) would be its reservation; nothing can ever place it.
    let mut s = zones([0, 0, 0, 0]);
    gang(&mut s, "nowhere", "q", 4, 8_000, NOW - 60);
    with_topology(&mut s, "nowhere", "rack");
    gang(&mut s, "later", "q", 2, 4_000, NOW - 30);
    let d = decide_at(&s, &|_| false, NOW);
    assert!(
        why(&d, "nowhere").contains("no schedulable node has the label rack"),
        "{}",
        why(&d, "nowhere")
    );
    assert_eq!(d.hold, None, "no reservation for a gang no node can take");
    assert_eq!(admitted(&d), vec!["later"]);
}

#[test]
fn members_of_a_gang_already_running_in_a_domain_join_it() {
    // The elastic gang's first member runs in zone b; zone a has more room.
    let mut s = zones([0, 0, 4_000, 4_000]);
    s.apply_pod_group(pod_group("g", 1, "q"));
    with_topology(&mut s, "g", "zone");
    running(&mut s, "g-0", Some("g"), "b1", 2_000, NOW - 30);
    s.apply_pod(Pod {
        requests: Resources::from([("cpu", 2_000), ("pods", 1)]),
        ..pod("g-1")
            .in_group("g")
            .in_queue("q")
            .gated()
            .created(NOW - 20)
    });
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(
        d.admit[0].pods[0].node_selector,
        Some([("zone".to_owned(), "b".to_owned())].into())
    );
}

#[test]
fn a_gang_no_domain_could_ever_hold_waits_saying_so_holds_nothing_and_blocks_no_one() {
    // Each zone has 16 CPUs in all; six members of 4 CPUs need 24 in one zone. A later gang
    // of four such members fits zone a whole.
    let mut s = zones([0, 0, 4_000, 0]);
    gang(&mut s, "wide", "q", 6, 4_000, NOW - 60);
    with_topology(&mut s, "wide", "zone");
    gang(&mut s, "fits", "q", 4, 4_000, NOW - 30);
    with_topology(&mut s, "fits", "zone");
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(reason(&d, "wide"), Reason::NoDomainFits);
    assert!(
        why(&d, "wide").contains(
            "no single domain of zone could hold every member even with nothing else running"
        ),
        "{}",
        why(&d, "wide")
    );
    assert_eq!(d.hold, None, "no reservation for a gang no domain can hold");
    assert!(
        d.short_of_room.is_empty(),
        "reclaim frees nothing for it: {:?}",
        d.short_of_room
    );
    assert_eq!(admitted(&d), vec!["fits"]);
}

#[test]
fn the_head_of_the_line_reserves_inside_one_domain_that_could_hold_it_whole() {
    // Two members of 8 CPUs, each zone could hold them empty but none has them free: a1 and
    // b2 have 4 CPUs free, a2 and b1 have 6. The nodes with the most free are a2 and b1, in
    // two zones; the reservation keeps to one zone.
    let mut s = zones([4_000, 2_000, 2_000, 4_000]);
    gang(&mut s, "head", "q", 2, 8_000, NOW - 60);
    with_topology(&mut s, "head", "zone");
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(reason(&d, "head"), Reason::Reserved);
    let hold = d.hold.expect("the head holds room");
    let zones: Vec<char> = hold
        .nodes
        .iter()
        .map(|(node, _)| node.chars().next().unwrap())
        .collect();
    assert_eq!(zones.len(), 2, "{hold:?}");
    assert_eq!(
        zones[0], zones[1],
        "a reservation split over zones: {hold:?}"
    );
}

/// A Topology `dc` of levels block and rack: block `b1` has racks `r1` (n1, n2) and `r2`
/// (n3, n4), block `b2` has rack `r1` (n5, n6; a rack is named by its block too), all of 8
/// CPUs, with `used` CPUs taken on each.
fn racks(used: [i64; 6]) -> State {
    let mut s = State::default();
    s.apply_queue(Queue::new("q"));
    s.apply_topology(Topology {
        name: "dc".into(),
        levels: vec!["block".into(), "rack".into()],
    });
    let layout = [
        ("n1", "b1", "r1"),
        ("n2", "b1", "r1"),
        ("n3", "b1", "r2"),
        ("n4", "b1", "r2"),
        ("n5", "b2", "r1"),
        ("n6", "b2", "r1"),
    ];
    for ((name, block, rack), used) in layout.into_iter().zip(used) {
        s.apply_node(node(name, 8_000));
        let labels = [
            ("block".to_owned(), block.to_owned()),
            ("rack".to_owned(), rack.to_owned()),
        ]
        .into();
        let n = s.nodes().get(name).unwrap().as_ref().clone();
        s.apply_node(Node { labels, ..n });
        if used > 0 {
            running(&mut s, &format!("on-{name}"), None, name, used, NOW - 10);
        }
    }
    s
}

fn with_levels(s: &mut State, name: &str, required: Option<&str>, preferred: Option<&str>) {
    let group = GroupKey::new("ns", name);
    let spec = s.groups()[&group].spec.as_deref().unwrap().clone();
    s.apply_pod_group(PodGroup {
        topology_key: required.map(str::to_owned),
        preferred_topology_key: preferred.map(str::to_owned),
        ..spec
    });
}

fn selector(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

#[test]
fn a_gang_preferring_a_rack_goes_into_one_rack_named_with_its_block() {
    // Rack b1/r1 is half used; b1/r2 and b2/r1 are empty: two members of 8 CPUs fit a rack.
    let mut s = racks([4_000, 4_000, 0, 0, 0, 0]);
    gang(&mut s, "g", "q", 2, 8_000, NOW - 60);
    with_levels(&mut s, "g", Some("block"), Some("rack"));
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["g"]);
    for pod in &d.admit[0].pods {
        assert_eq!(
            pod.node_selector,
            selector(&[("block", "b1"), ("rack", "r2")]),
            "the first of the racks that fit it as tightly"
        );
    }
}

#[test]
fn a_gang_no_rack_can_hold_goes_whole_into_one_block_of_its_required_level() {
    // Three members of 8 CPUs: no rack has three nodes; block b1 has four.
    let mut s = racks([0; 6]);
    gang(&mut s, "g", "q", 3, 8_000, NOW - 60);
    with_levels(&mut s, "g", Some("block"), Some("rack"));
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["g"]);
    assert_eq!(
        d.admit[0].pods[0].node_selector,
        selector(&[("block", "b1")])
    );
}

#[test]
fn a_gang_that_fits_only_across_blocks_waits_naming_the_racks_and_blocks_it_tried() {
    // Block b1 has two nodes free, b2 two: four members of 8 CPUs fit the cluster, no block.
    let mut s = racks([8_000, 8_000, 0, 0, 0, 0]);
    gang(&mut s, "g", "q", 4, 8_000, NOW - 60);
    with_levels(&mut s, "g", Some("block"), Some("rack"));
    let d = decide_at(&s, &|_| false, NOW);
    assert!(admitted(&d).is_empty());
    let why = why(&d, "g");
    assert!(
        why.contains("3 domains of rack tried: block=b1,rack=r2 holds 2 of 4 members"),
        "{why}"
    );
    assert!(
        why.contains("2 domains of block tried: block=b1 holds 2 of 4 members"),
        "{why}"
    );
    let hold = d.hold.expect("the head holds room inside block b1");
    assert!(
        hold.nodes
            .iter()
            .all(|(n, _)| ["n1", "n2", "n3", "n4"].contains(&n.as_str())),
        "{hold:?}"
    );
    assert_eq!(
        d.short_of_room[0].within,
        Some(Within {
            keys: vec!["block".to_owned()],
            pinned: vec![]
        }),
        "reclaim makes room inside one block"
    );
}

#[test]
fn a_gang_only_preferring_a_rack_runs_across_the_cluster_when_no_rack_or_block_fits() {
    let mut s = racks([0; 6]);
    gang(&mut s, "g", "q", 5, 8_000, NOW - 60);
    with_levels(&mut s, "g", None, Some("rack"));
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(admitted(&d), vec!["g"]);
    assert_eq!(d.admit[0].pods[0].node_selector, None);
}

#[test]
fn a_short_gang_backfills_the_heads_reservation_inside_one_domain_of_its_required_level() {
    // The head (four members of 8 CPUs in one block) reserves block b1, each node half used
    // by a gang ending in an hour; b2 is full. A gang of two 4-CPU members, ending in ten
    // minutes, fits only in that reservation.
    let mut s = racks([0, 0, 0, 0, 8_000, 8_000]);
    for n in ["n1", "n2", "n3", "n4"] {
        let busy = format!("busy-{n}");
        s.apply_pod_group(pod_group(&busy, 1, "q"));
        running(
            &mut s,
            &format!("{busy}-0"),
            Some(&busy),
            n,
            4_000,
            NOW - 10,
        );
        expect_runtime(&mut s, &busy, 3_610);
    }
    gang(&mut s, "head", "q", 4, 8_000, NOW - 60);
    with_levels(&mut s, "head", Some("block"), None);
    gang(&mut s, "short", "q", 2, 4_000, NOW - 30);
    with_levels(&mut s, "short", Some("block"), None);
    expect_runtime(&mut s, "short", 600);
    let d = decide_at(&s, &|_| false, NOW);
    assert_eq!(reason(&d, "head"), Reason::Reserved);
    assert_eq!(admitted(&d), vec!["short"]);
    assert_eq!(
        d.admit[0].pods[0].node_selector,
        selector(&[("block", "b1")])
    );
}
