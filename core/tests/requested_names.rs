//! Names that pods make up cannot take the resource-name table from the names of nodes and
//! Queues. In a process of its own, since filling the table is seen by everything else in the
//! process.

use gangplank_core::model::resources::{MAX_NAMES, MAX_REQUESTED_NAMES};
use gangplank_core::model::{ResourceId, Resources};

#[test]
fn a_pod_of_a_thousand_made_up_resources_changes_nothing_for_the_resources_nodes_have() {
    let mut pod = Resources::new();
    for i in 0..1_000 {
        pod.set_requested(&format!("example.com/zero-{i}"), 0);
    }
    assert_eq!(
        ResourceId::lookup("example.com/zero-0"),
        None,
        "a zero amount takes no slot"
    );
    for i in 0..1_000 {
        pod.set_requested(&format!("example.com/made-up-{i}"), 1);
    }
    let told_apart = (0..1_000)
        .map(|i| ResourceId::lookup(&format!("example.com/made-up-{i}")).unwrap())
        .filter(|id| *id != ResourceId::OTHER)
        .count();
    assert_eq!(
        told_apart,
        MAX_REQUESTED_NAMES - 8,
        "only up to half the table"
    );
    assert_eq!(pod.amount(ResourceId::OTHER), 1_000 - told_apart as i64);

    // A device plugin's resource, advertised by a node afterwards, still gets a slot of its
    // own, and a pod asking for it now is counted against it, not with the made-up names.
    let mut node = Resources::new();
    node.set("vendor.example/fpga", 4);
    let fpga = ResourceId::of("vendor.example/fpga");
    assert_ne!(fpga, ResourceId::OTHER);
    let mut member = Resources::new();
    member.set_requested("vendor.example/fpga", 2);
    assert_eq!(member.amount(fpga), 2);
    assert!(member.fits_in(&node));
    assert!(!pod.fits_in(&node), "the made-up requests fit nowhere");

    // Nodes and Queues may fill the rest of the table.
    for i in 0..(MAX_NAMES - MAX_REQUESTED_NAMES - 1) {
        assert_ne!(
            ResourceId::of(&format!("nodes.example/r-{i}")),
            ResourceId::OTHER
        );
    }
}
