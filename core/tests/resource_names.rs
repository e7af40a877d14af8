//! The resource-name table is bounded. In a process of its own, since filling the table is
//! seen by everything else in the process.

use gangplank_core::model::resources::MAX_NAMES;
use gangplank_core::model::{ResourceId, Resources};

#[test]
fn names_beyond_the_bound_share_one_entry_and_their_amounts_add_up() {
    let names: Vec<String> = (0..MAX_NAMES + 100)
        .map(|i| format!("example.com/made-up-{i}"))
        .collect();
    let ids: Vec<ResourceId> = names.iter().map(|n| ResourceId::of(n)).collect();
    assert!(ids.iter().all(|id| id.index() < MAX_NAMES), "{ids:?}");
    let told_apart = ids.iter().filter(|id| **id != ResourceId::OTHER).count();
    assert_eq!(
        told_apart,
        MAX_NAMES - 8,
        "the eight well-known names come first"
    );
    assert_eq!(ResourceId::of(&names[0]), ids[0], "a name keeps its id");
    assert_eq!(ResourceId::OTHER.name(), "(other resources)");

    let mut pod = Resources::new();
    pod.set("cpu", 1_000);
    pod.set(&names[MAX_NAMES], 2);
    pod.set(&names[MAX_NAMES + 1], 3);
    assert_eq!(pod.amount(ResourceId::OTHER), 5);
    assert_eq!(pod.amount(ResourceId::CPU), 1_000);
    assert_eq!(
        pod.get(&names[MAX_NAMES + 50]),
        5,
        "every late name reads the shared entry"
    );
}
