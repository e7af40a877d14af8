//! Gangs of sub-groups at the bind verb, as a property: whatever the gang's shape and the order
//! in which the scheduler's bind calls come, no member is let go before the gang has quorum,
//! none while its instance is not placed whole, and every member once all are placed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use proptest::prelude::*;

use super::testing::{SETTINGS, cluster, group, member};
use super::{Release, reserve};
use crate::model::State;
use crate::model::sub_groups::SubGroup;
use crate::testing::PodBuilder;

/// Per sub-group: members of an instance, instances needed, instances there.
type Shape = Vec<(u32, u32, u32)>;

/// A member's UID and its instance: (sub-group, instance).
type MemberAt = (String, (usize, u32));

fn shapes() -> impl Strategy<Value = Shape> {
    prop::collection::vec(
        (1u32..=3, 1u32..=2, 0u32..=2).prop_map(|(size, min, more)| (size, min, min + more)),
        1..=3,
    )
}

/// The gang `g` of `shape` on room for all of it; each member's UID and instance, in order.
fn gang(shape: &Shape) -> (State, Vec<MemberAt>) {
    let mut s = cluster(4, 64);
    let min_member = shape.iter().map(|(size, min, _)| size * min).sum();
    let key = group(&mut s, "g", min_member);
    let mut spec = s.groups()[&key].spec.as_deref().unwrap().clone();
    spec.sub_groups = (0..shape.len())
        .map(|r| SubGroup {
            name: format!("r{r}"),
            size: shape[r].0,
            min_count: shape[r].1,
            selector: BTreeMap::from([("role".into(), format!("r{r}"))]),
            match_label_keys: vec!["instance".into()],
            topology_key: None,
        })
        .collect();
    s.apply_pod_group(spec);
    let mut members = Vec::new();
    for (r, &(size, _, instances)) in shape.iter().enumerate() {
        for i in 0..instances {
            for _ in 0..size {
                let pod = member(&mut s, "g", members.len(), 1)
                    .labeled("role", &format!("r{r}"))
                    .labeled("instance", &i.to_string());
                members.push((pod.uid.clone(), (r, i)));
                s.apply_pod(pod);
            }
        }
    }
    (s, members)
}

proptest! {
    #[test]
    fn binds_let_go_whole_instances_only_after_quorum_and_all_in_the_end(
        shape in shapes(),
        order_seed in any::<u64>(),
    ) {
        let (mut s, members) = gang(&shape);
        let min_member: usize = shape.iter().map(|(size, min, _)| (size * min) as usize).sum();
        let mut order: Vec<usize> = (0..members.len()).collect();
        let mut seed = order_seed;
        for i in (1..order.len()).rev() {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (seed >> 33) as usize % (i + 1));
        }
        let instance_of: BTreeMap<&str, (usize, u32)> =
            members.iter().map(|(uid, at)| (uid.as_str(), *at)).collect();
        let now = Instant::now();
        let (mut placed, mut released) = (BTreeSet::new(), BTreeSet::new());
        for &m in &order {
            let uid = members[m].0.as_str();
            let (_, release) = reserve(&mut s, uid, &format!("ns/{uid}"), "n0", &SETTINGS, now)
                .unwrap()
                .unwrap();
            placed.insert(uid.to_owned());
            match release {
                Release::Hold => {}
                Release::Gang => released.extend(placed.iter().cloned()),
                Release::Members(uids) => released.extend(uids),
            }
            if placed.len() < min_member {
                prop_assert!(released.is_empty(), "let go before quorum: {released:?}");
            }
            for uid in &released {
                let (r, i) = instance_of[uid.as_str()];
                let whole = members
                    .iter()
                    .filter(|(_, at)| *at == (r, i))
                    .all(|(u, _)| placed.contains(u));
                prop_assert!(whole, "{uid} let go while instance {i} of r{r} is partly placed");
            }
        }
        prop_assert_eq!(released, placed, "every member let go once all are placed");
    }
}
