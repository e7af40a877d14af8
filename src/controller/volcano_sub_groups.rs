//! A Volcano PodGroup's `subGroupPolicy` (v1.14) in the Gangplank PodGroup made for it
//! (`super::foreign_groups`): each sub-group with the same name, size, selector and keys, when
//! Gangplank's rules take it (`crate::api::sub_group_rules`, which the PodGroup webhook applies
//! to the copy too). Volcano's own defaults and looser rules leave some policies without a
//! Gangplank meaning: a sub-group needing no whole instance (`minSubGroups` 0, Volcano's
//! default, which asks only for topology), and a `minMember` above what the sub-groups' minimums
//! count. Such a PodGroup gets a flat gang of its `minMember`, and the note of its Event says
//! why. `networkTopology` (HyperNode tiers) is never honoured, and the note says so too.

use crate::api::pod_group::{PodGroupSpec, SubGroupPolicy};
use crate::api::volcano::{VolcanoPodGroupSpec, VolcanoSubGroupPolicy};

/// Why a Volcano policy is not mirrored; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotMirrored {
    #[error(
        "sub-group {0:?} has minSubGroups 0 (Volcano's default), which Gangplank cannot hold whole; give it at least 1"
    )]
    NoMinimum(String),
    #[error(
        "minMember {min_member} is above the {sum} members the sub-groups' minimums count (minSubGroups × subGroupSize); make it at most {sum}"
    )]
    AboveTheSubGroups { min_member: i32, sum: i64 },
    #[error("{0}")]
    Refused(String),
}

/// What the Gangplank PodGroup makes of `source`'s sub-groups: `None` when it has none; the
/// gang's `minMember` and sub-groups when mirrored.
pub fn mirror(source: &VolcanoPodGroupSpec) -> Option<Result<PodGroupSpec, NotMirrored>> {
    if source.sub_group_policy.is_empty() {
        return None;
    }
    Some(mirrored(source))
}

fn mirrored(source: &VolcanoPodGroupSpec) -> Result<PodGroupSpec, NotMirrored> {
    let policy: Vec<SubGroupPolicy> = source
        .sub_group_policy
        .iter()
        .enumerate()
        .map(sub_group)
        .collect::<Result<_, _>>()?;
    let sum: i64 = policy
        .iter()
        .map(|p| i64::from(p.sub_group_size) * i64::from(p.min_sub_groups))
        .sum();
    let min_member = source.min_member.unwrap_or(0);
    if i64::from(min_member) > sum {
        return Err(NotMirrored::AboveTheSubGroups { min_member, sum });
    }
    let mut spec = PodGroupSpec::with_min_member(i32::try_from(sum).unwrap_or(i32::MAX));
    spec.sub_group_policy = policy;
    let problems = crate::api::sub_group_rules::problems(&spec);
    if !problems.is_empty() {
        return Err(NotMirrored::Refused(problems.join("; ")));
    }
    Ok(spec)
}

/// Sub-group `i` of a Volcano policy, with Volcano's defaults; named `subgroup-<i>` when
/// unnamed.
fn sub_group((i, volcano): (usize, &VolcanoSubGroupPolicy)) -> Result<SubGroupPolicy, NotMirrored> {
    let name = match volcano.name.as_str() {
        "" => format!("subgroup-{i}"),
        name => name.to_owned(),
    };
    let min_sub_groups = volcano.min_sub_groups.unwrap_or(0);
    if min_sub_groups < 1 {
        return Err(NotMirrored::NoMinimum(name));
    }
    Ok(SubGroupPolicy {
        name,
        sub_group_size: volcano.sub_group_size.unwrap_or(1),
        min_sub_groups,
        label_selector: volcano.label_selector.clone(),
        match_label_keys: volcano.match_label_keys.clone(),
        topology_key: None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;

    fn role(name: &str, size: i32, min: Option<i32>) -> VolcanoSubGroupPolicy {
        VolcanoSubGroupPolicy {
            name: name.into(),
            sub_group_size: Some(size),
            min_sub_groups: min,
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("role".into(), name.into())])),
                match_expressions: None,
            }),
            match_label_keys: vec!["instance".into()],
            network_topology: None,
        }
    }

    fn service(min_member: i32) -> VolcanoPodGroupSpec {
        VolcanoPodGroupSpec {
            min_member: Some(min_member),
            sub_group_policy: vec![
                role("prefill", 2, Some(2)),
                role("decode", 4, Some(1)),
                role("router", 1, Some(1)),
            ],
            ..VolcanoPodGroupSpec::default()
        }
    }

    #[test]
    fn a_policy_gangplank_takes_is_copied_with_min_member_its_minimum() {
        for min_member in [9, 5, 0] {
            let spec = mirror(&service(min_member)).unwrap().unwrap();
            assert_eq!(spec.min_member, 9, "Volcano's minMember {min_member}");
            let sizes = crate::testing::sub_group_sizes(&spec.sub_group_policy);
            assert_eq!(
                sizes,
                [("prefill", 2, 2), ("decode", 4, 1), ("router", 1, 1)]
            );
        }
        assert_eq!(mirror(&VolcanoPodGroupSpec::default()), None);
    }

    #[test]
    fn what_has_no_gangplank_meaning_is_refused_saying_what_to_change() {
        let mut topology_only = service(9);
        topology_only.sub_group_policy[1].min_sub_groups = None;
        assert_eq!(
            mirror(&topology_only).unwrap(),
            Err(NotMirrored::NoMinimum("decode".into()))
        );
        assert_eq!(
            mirror(&service(12)).unwrap(),
            Err(NotMirrored::AboveTheSubGroups {
                min_member: 12,
                sum: 9
            })
        );
        let mut unsplit = service(9);
        unsplit.sub_group_policy[0].match_label_keys.clear();
        let Err(NotMirrored::Refused(why)) = mirror(&unsplit).unwrap() else {
            panic!("expected the webhook's words");
        };
        assert!(
            why.contains("spec.subGroupPolicy[0].matchLabelKeys"),
            "{why}"
        );
    }

    #[test]
    fn an_unnamed_sub_group_is_named_by_its_place() {
        let mut unnamed = service(9);
        unnamed.sub_group_policy[2].name.clear();
        let spec = mirror(&unnamed).unwrap().unwrap();
        assert_eq!(spec.sub_group_policy[2].name, "subgroup-2");
    }
}
