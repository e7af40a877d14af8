//! Gangs with a topologyKey: whole in one domain, or waiting saying why.

use super::*;

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
        why(&d, "g").contains("no single domain of zone has room for every member (a member requesting cpu: 4, pods: 1 finds no node in any)"),
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
