//! A Volcano PodGroup's `networkTopology` in the Gangplank PodGroup made for it, read as the
//! levels of Gangplank's Topologies (`gangplank_core::model::hyper_node_tiers`: tier 1 is a
//! Topology's narrowest level above the node). Honoured on a PodGroup whose sub-groups
//! Gangplank mirrors (`super::volcano_sub_groups`), which waits for its members:
//! - a sub-group's, `hard`, becomes its `topologyKey`, so each instance keeps to one domain of
//!   its tier;
//! - else the PodGroup's: `hard` at tier N requires one domain of tier N and prefers tier 1;
//!   `soft` prefers tier 1 (then each wider level, then anywhere).
//!
//! Gangplank keeps instances in their domains or the whole gang in one, not both, and an
//! instance only by requirement: what it cannot honour is named in the note of the PodGroup's
//! Event ([`NotHonoured`]), never dropped silently. A flat Volcano PodGroup is admitted ahead of
//! its members, which would come with no domain, so its `networkTopology` is not honoured.

use std::collections::BTreeMap;

use gangplank_core::model::Topology;
use gangplank_core::model::hyper_node_tiers::{self, TierMissing};

use crate::api::pod_group::PodGroupSpec;
use crate::api::volcano::{VolcanoNetworkTopology, VolcanoPodGroupSpec};

/// What of a `networkTopology` Gangplank does not honour, and why; each says what would do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotHonoured {
    #[error("networkTopology of {at}: {why}")]
    Tier { at: String, why: TierMissing },
    #[error("networkTopology of {0} has mode {1:?}: use hard or soft")]
    Mode(String, String),
    #[error("networkTopology of {0} names its tier by number and by name: name it one way")]
    TierTwice(String),
    #[error(
        "networkTopology of {0} is soft: Gangplank keeps an instance in one domain only as a requirement (mode hard)"
    )]
    SoftInstance(String),
    #[error(
        "the PodGroup's networkTopology beside its sub-groups': Gangplank keeps each instance in its domain or the whole gang in one domain, not both; the sub-groups' are honoured"
    )]
    BesideSubGroups,
    #[error(
        "networkTopology (HyperNode tiers) is not honoured on a PodGroup without a subGroupPolicy Gangplank mirrors: give the gang a topologyKey on a Gangplank PodGroup instead"
    )]
    Flat,
}

/// Reads `asked`, at `at` (for the note), against `topologies`: the label of the tier it
/// requires (`hard`), or none (`soft`).
fn read<'t>(
    asked: &VolcanoNetworkTopology,
    at: &str,
    topologies: &'t BTreeMap<String, Topology>,
) -> Result<Option<&'t str>, NotHonoured> {
    let tier = |why| NotHonoured::Tier {
        at: at.to_owned(),
        why,
    };
    let hard = match asked.mode.as_deref() {
        None | Some("hard") => true,
        Some("soft") => false,
        Some(other) => return Err(NotHonoured::Mode(at.to_owned(), other.to_owned())),
    };
    if !hard {
        return Ok(None);
    }
    let label = match (
        asked.highest_tier_allowed,
        asked.highest_tier_name.as_deref(),
    ) {
        (Some(_), Some(_)) => return Err(NotHonoured::TierTwice(at.to_owned())),
        (_, Some(name)) => hyper_node_tiers::named_tier(topologies, name),
        (number, None) => {
            let number = u32::try_from(number.unwrap_or(1)).unwrap_or(0);
            hyper_node_tiers::tier_label(topologies, number)
        }
    };
    Ok(Some(label.map_err(tier)?))
}

/// Sets on `spec` (the mirror of `source`'s sub-groups, in their order) the levels `source`'s
/// `networkTopology` asks for; returns what it could not honour.
pub fn honour(
    source: &VolcanoPodGroupSpec,
    spec: &mut PodGroupSpec,
    topologies: &BTreeMap<String, Topology>,
) -> Vec<NotHonoured> {
    let mut not = Vec::new();
    for (volcano, mirrored) in source
        .sub_group_policy
        .iter()
        .zip(&mut spec.sub_group_policy)
    {
        let Some(asked) = &volcano.network_topology else {
            continue;
        };
        let at = format!("sub-group {:?}", mirrored.name);
        match read(asked, &at, topologies) {
            Ok(Some(label)) => mirrored.topology_key = Some(label.to_owned()),
            Ok(None) => not.push(NotHonoured::SoftInstance(at)),
            Err(why) => not.push(why),
        }
    }
    let Some(asked) = &source.network_topology else {
        return not;
    };
    if spec
        .sub_group_policy
        .iter()
        .any(|s| s.topology_key.is_some())
    {
        not.push(NotHonoured::BesideSubGroups);
        return not;
    }
    match read(asked, "the PodGroup", topologies) {
        Ok(required) => match (required, hyper_node_tiers::tier_label(topologies, 1)) {
            // Soft asks for tier 1 alone.
            (None, Err(why)) => not.push(NotHonoured::Tier {
                at: "the PodGroup".into(),
                why,
            }),
            (required, narrowest) => {
                spec.topology_key = required.map(str::to_owned);
                spec.preferred_topology_key = narrowest
                    .ok()
                    .filter(|n| Some(*n) != required)
                    .map(str::to_owned);
            }
        },
        Err(why) => not.push(why),
    }
    not
}

/// Whether `source` asks for a network topology anywhere.
pub fn asked(source: &VolcanoPodGroupSpec) -> bool {
    source.network_topology.is_some()
        || source
            .sub_group_policy
            .iter()
            .any(|p| p.network_topology.is_some())
}

#[cfg(test)]
mod tests {
    use gangplank_core::model::hyper_node_tiers::HOSTNAME;
    use serde_json::json;

    use super::*;
    use crate::api::pod_group::SubGroupPolicy;

    fn datacenter() -> BTreeMap<String, Topology> {
        let levels = ["zone", "rack", HOSTNAME].map(String::from).to_vec();
        BTreeMap::from([(
            "dc".to_owned(),
            Topology {
                name: "dc".into(),
                levels,
            },
        )])
    }

    /// A Volcano spec of slices of 4 (at least 2), with `group`'s and `slice`'s
    /// `networkTopology`, and the Gangplank spec that mirrors its sub-groups.
    fn slices(
        group: serde_json::Value,
        slice: serde_json::Value,
    ) -> (VolcanoPodGroupSpec, PodGroupSpec) {
        let source: VolcanoPodGroupSpec = serde_json::from_value(json!({
            "minMember": 8, "networkTopology": group,
            "subGroupPolicy": [{"name": "slice", "subGroupSize": 4, "minSubGroups": 2,
                "matchLabelKeys": ["slice"], "networkTopology": slice}]
        }))
        .unwrap();
        let mut spec = PodGroupSpec::with_min_member(8);
        spec.sub_group_policy = vec![SubGroupPolicy {
            name: "slice".into(),
            sub_group_size: 4,
            min_sub_groups: 2,
            label_selector: None,
            match_label_keys: vec!["slice".into()],
            topology_key: None,
        }];
        (source, spec)
    }

    fn levels(spec: &PodGroupSpec) -> (Option<&str>, Option<&str>, Option<&str>) {
        (
            spec.topology_key.as_deref(),
            spec.preferred_topology_key.as_deref(),
            spec.sub_group_policy[0].topology_key.as_deref(),
        )
    }

    #[test]
    fn a_hard_tier_on_a_sub_group_keeps_each_instance_in_one_domain_of_that_tier() {
        for (tier, label) in [(1, "rack"), (2, "zone")] {
            let (source, mut spec) = slices(
                json!(null),
                json!({"mode": "hard", "highestTierAllowed": tier}),
            );
            assert_eq!(honour(&source, &mut spec, &datacenter()), vec![]);
            assert_eq!(levels(&spec), (None, None, Some(label)));
        }
        let (source, mut spec) = slices(json!(null), json!({"highestTierName": "zone"}));
        assert_eq!(honour(&source, &mut spec, &datacenter()), vec![]);
        assert_eq!(levels(&spec), (None, None, Some("zone")), "hard by default");
    }

    #[test]
    fn the_pod_group_s_tier_holds_the_whole_gang_hard_required_soft_preferred() {
        let (source, mut spec) = slices(json!({"highestTierAllowed": 2}), json!(null));
        assert_eq!(honour(&source, &mut spec, &datacenter()), vec![]);
        assert_eq!(levels(&spec), (Some("zone"), Some("rack"), None));
        let (source, mut spec) = slices(json!({"mode": "soft"}), json!(null));
        assert_eq!(honour(&source, &mut spec, &datacenter()), vec![]);
        assert_eq!(levels(&spec), (None, Some("rack"), None));
        let mut two = datacenter();
        let other = ["zone", "rack", "slot"].map(String::from).to_vec();
        two.insert(
            "other".into(),
            Topology {
                name: "other".into(),
                levels: other,
            },
        );
        let (source, mut spec) = slices(json!({"mode": "soft"}), json!(null));
        assert_eq!(
            honour(&source, &mut spec, &two),
            vec![NotHonoured::Tier {
                at: "the PodGroup".into(),
                why: TierMissing::Disagree {
                    tier: 1,
                    labels: "rack, slot".into()
                }
            }],
            "tier 1 is the rack of one Topology and the slot of the other"
        );
        assert_eq!(levels(&spec), (None, None, None));
    }

    #[test]
    fn what_gangplank_cannot_hold_is_named_and_leaves_no_level() {
        let hard = json!({"mode": "hard", "highestTierAllowed": 1});
        let (source, mut spec) = slices(hard.clone(), hard.clone());
        assert_eq!(
            honour(&source, &mut spec, &datacenter()),
            vec![NotHonoured::BesideSubGroups]
        );
        assert_eq!(levels(&spec), (None, None, Some("rack")));

        let (source, mut spec) = slices(json!(null), json!({"mode": "soft"}));
        let not = honour(&source, &mut spec, &datacenter());
        assert_eq!(
            not,
            vec![NotHonoured::SoftInstance("sub-group \"slice\"".into())]
        );
        assert_eq!(levels(&spec), (None, None, None));

        let (source, mut spec) = slices(hard, json!(null));
        let not = honour(&source, &mut spec, &BTreeMap::new());
        assert_eq!(levels(&spec), (None, None, None));
        assert_eq!(
            not[0].to_string(),
            "networkTopology of the PodGroup: no Topology has a tier 1 (tier 1 is a Topology's \
             narrowest level above kubernetes.io/hostname; the deepest has 0): create a Topology \
             whose levels are the tiers"
        );

        let both = json!({"highestTierAllowed": 1, "highestTierName": "rack"});
        let (source, mut spec) = slices(json!({"mode": "strict"}), both);
        assert_eq!(
            honour(&source, &mut spec, &datacenter()),
            vec![
                NotHonoured::TierTwice("sub-group \"slice\"".into()),
                NotHonoured::Mode("the PodGroup".into(), "strict".into())
            ]
        );
    }
}
