//! Reclaim for groups kept to topology domains: room made inside one domain of a group's
//! required level, and inside one for each instance of a gang whose instances keep to one.

use super::*;

#[test]
fn a_group_required_in_one_domain_is_given_room_inside_one_not_split_over_two() {
    // One node per domain; four gangs of one 4-CPU member, two on each node, youngest w.
    let gangs = vec![
        gang("x", 1, 4_000, &[0], 0, 1),
        gang("y", 1, 4_000, &[1], 0, 2),
        gang("z", 1, 4_000, &[0], 0, 3),
        gang("w", 1, 4_000, &[1], 0, 4),
    ];
    let mut input = borrowed(gangs);
    input.queues[0].deserved = Resources::from([("cpu", 4_000)]);
    input.starved = vec![starved("b-gang", 1, 2, 4_000)];
    let anywhere: Vec<String> = evicted(&plan(&input)[0].1)
        .into_iter()
        .map(|(g, _, _)| g)
        .collect();
    assert_eq!(
        anywhere,
        vec!["w", "z"],
        "the two youngest, one on each node"
    );
    input.starved[0].domains = Some(vec![vec![0], vec![1]]);
    let mut inside: Vec<String> = evicted(&plan(&input)[0].1)
        .into_iter()
        .map(|(g, _, _)| g)
        .collect();
    inside.sort();
    assert_eq!(inside, vec!["w", "y"], "both gangs of node 1, and no more");
}

#[test]
fn an_instance_kept_to_one_domain_is_given_room_inside_one_not_split_over_two() {
    // Zones {0, 1} and {2, 3}, four nodes of 8 CPUs, each full with a gang of queue a; the
    // youngest two are on nodes 3 and 1, one in each zone.
    let gangs = vec![
        gang("on-0", 1, 8_000, &[0], 0, 1),
        gang("on-2", 1, 8_000, &[2], 0, 2),
        gang("on-1", 1, 8_000, &[1], 0, 3),
        gang("on-3", 1, 8_000, &[3], 0, 4),
    ];
    let mut input = Input {
        queues: vec![queue("a", 32_000, 8_000), queue("b", 0, 24_000)],
        nodes: vec![Resources::from([("cpu", 0), ("pods", 100)]); 4],
        in_flight: Resources::new(),
        gangs,
        starved: vec![starved("slice", 1, 2, 6_000)],
    };
    let victims = |input: &Input<String>| {
        let mut gangs: Vec<String> = evicted(&plan(input)[0].1)
            .into_iter()
            .map(|(g, _, _)| g)
            .collect();
        gangs.sort();
        gangs
    };
    assert_eq!(victims(&input), vec!["on-1", "on-3"], "the two youngest");
    input.starved[0].instances = vec![InstanceDomains {
        members: 2,
        domains: Some(vec![vec![0, 1], vec![2, 3]]),
    }];
    assert_eq!(
        victims(&input),
        vec!["on-2", "on-3"],
        "the two gangs of one zone, the younger zone's"
    );
}
