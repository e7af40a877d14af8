//! Volcano's HyperNode tiers read as the levels of Gangplank's Topologies, the way Volcano's
//! own label discovery builds HyperNodes from node labels: a Topology's levels, widest first,
//! may end with [`HOSTNAME`], the node itself, which is no tier; the narrowest other level is
//! tier 1, the one above it tier 2, and so on. In that discovery's list form a tier's name is
//! its node label. A Volcano PodGroup's `networkTopology` is honoured through these.

use std::collections::BTreeMap;

use super::Topology;

/// The label of the node itself, which Volcano's discovery lists last and makes no tier of.
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// Why a tier names no level; each says what would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TierMissing {
    #[error(
        "tier 0 is no level: tiers count from 1, a Topology's narrowest level above {HOSTNAME}"
    )]
    Zero,
    #[error(
        "no Topology has a tier {tier} (tier 1 is a Topology's narrowest level above {HOSTNAME}; the deepest has {deepest}): create a Topology whose levels are the tiers"
    )]
    NoTier { tier: u32, deepest: usize },
    #[error("the Topologies disagree on tier {tier}: {labels}; name the tier by its label instead")]
    Disagree { tier: u32, labels: String },
    #[error("no Topology lists a level {0:?} (a tier's name is its node label)")]
    NoLevel(String),
}

/// The tiers of `topology`, tier 1 first: its levels without a last [`HOSTNAME`], narrowest
/// first.
fn tiers(topology: &Topology) -> impl Iterator<Item = &str> {
    let levels = match topology.levels.split_last() {
        Some((last, above)) if last == HOSTNAME => above,
        _ => &topology.levels[..],
    };
    levels.iter().rev().map(String::as_str)
}

/// The node label of tier `tier` in `topologies`: the Topologies that have that tier must
/// agree on it.
pub fn tier_label(topologies: &BTreeMap<String, Topology>, tier: u32) -> Result<&str, TierMissing> {
    let at = usize::try_from(tier)
        .ok()
        .and_then(|t| t.checked_sub(1))
        .ok_or(TierMissing::Zero)?;
    let mut labels: Vec<&str> = topologies
        .values()
        .filter_map(|t| tiers(t).nth(at))
        .collect();
    labels.sort_unstable();
    labels.dedup();
    match labels[..] {
        [label] => Ok(label),
        [] => Err(TierMissing::NoTier {
            tier,
            deepest: topologies
                .values()
                .map(|t| tiers(t).count())
                .max()
                .unwrap_or(0),
        }),
        _ => Err(TierMissing::Disagree {
            tier,
            labels: labels.join(", "),
        }),
    }
}

/// The level of the tier named `name`: its label, when a Topology lists it above
/// [`HOSTNAME`].
pub fn named_tier<'t>(
    topologies: &'t BTreeMap<String, Topology>,
    name: &str,
) -> Result<&'t str, TierMissing> {
    topologies
        .values()
        .find_map(|t| tiers(t).find(|label| *label == name))
        .ok_or_else(|| TierMissing::NoLevel(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topologies(each: &[&[&str]]) -> BTreeMap<String, Topology> {
        each.iter()
            .enumerate()
            .map(|(i, levels)| {
                let name = format!("t{i}");
                let levels = levels.iter().map(|l| (*l).to_owned()).collect();
                (name.clone(), Topology { name, levels })
            })
            .collect()
    }

    #[test]
    fn tier_one_is_the_narrowest_level_above_the_node_and_tiers_count_upwards() {
        let dc = topologies(&[&["zone", "block", "rack", HOSTNAME]]);
        assert_eq!(tier_label(&dc, 1), Ok("rack"));
        assert_eq!(tier_label(&dc, 3), Ok("zone"));
        assert_eq!(
            tier_label(&dc, 4),
            Err(TierMissing::NoTier {
                tier: 4,
                deepest: 3
            })
        );
        assert_eq!(tier_label(&dc, 0), Err(TierMissing::Zero));
        let no_host = topologies(&[&["zone", "rack"]]);
        assert_eq!(tier_label(&no_host, 1), Ok("rack"));
        assert_eq!(named_tier(&dc, "block"), Ok("block"));
        assert_eq!(
            named_tier(&dc, HOSTNAME),
            Err(TierMissing::NoLevel(HOSTNAME.into()))
        );
    }

    #[test]
    fn topologies_must_agree_on_a_tier_those_too_shallow_for_it_have_no_say() {
        let two = topologies(&[&["zone", "rack", HOSTNAME], &["zone", "rack", "slot"]]);
        assert_eq!(
            tier_label(&two, 2),
            Err(TierMissing::Disagree {
                tier: 2,
                labels: "rack, zone".into()
            })
        );
        let shallow = topologies(&[&["zone", "rack", HOSTNAME], &["rack"]]);
        assert_eq!(tier_label(&shallow, 2), Ok("zone"));
        assert_eq!(tier_label(&shallow, 1), Ok("rack"));
    }
}
