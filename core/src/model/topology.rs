//! Topologies: the levels of a cluster's network, as node label keys from widest to narrowest
//! (zone, block, rack, host), and the levels a gang may be placed at ([`Levels`]), from its
//! PodGroup's required level (`topologyKey`) and preferred level (`preferredTopologyKey`).
//!
//! A domain of a level is a set of nodes sharing the values of that level's label and of every
//! wider level of its Topology (a rack is named by its zone, block and rack), so a narrower
//! domain always lies inside one domain of each wider level. A level no Topology lists is a
//! level of its own: its label alone names its domains.

use std::collections::BTreeMap;

/// A Topology as admission sees it: its name and its levels' node label keys, widest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub name: String,
    pub levels: Vec<String>,
}

impl Topology {
    /// The index of the level whose label is `key` (0: the widest).
    fn level(&self, key: &str) -> Option<usize> {
        self.levels.iter().position(|l| l == key)
    }

    /// The label keys that name a domain of level `at`: its own and every wider level's.
    fn named_by(&self, at: usize) -> Vec<&str> {
        self.levels[..=at].iter().map(String::as_str).collect()
    }
}

/// Where a gang may go: its levels, narrowest first, each named by the label keys whose values
/// name its domains (widest first); the gang goes whole into one domain of the first level
/// where one has room. With `required`, never outside one domain of the last level; without,
/// anywhere when no level has room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Levels<'s> {
    pub tiers: Vec<Vec<&'s str>>,
    pub required: bool,
}

impl<'s> Levels<'s> {
    /// The levels of a gang whose PodGroup requires `required` and prefers `preferred`
    /// (`None` when it names neither). When a Topology lists both (the preferred at or below
    /// the required), or the one named, its levels in between are tried too, and below the
    /// required one, or below its top without one; a preferred level wider than the required
    /// one is not used (the PodGroup webhook refuses it when it can tell).
    pub fn of(
        required: Option<&'s str>,
        preferred: Option<&'s str>,
        topologies: &'s BTreeMap<String, Topology>,
    ) -> Option<Levels<'s>> {
        let preferred = match (required, preferred) {
            (Some(r), Some(p)) if wider_in(p, r, topologies).is_some() => None,
            _ => preferred,
        };
        let narrowest = preferred.or(required)?;
        let listed = topologies.values().find_map(|t| {
            let low = t.level(narrowest)?;
            let high = match required {
                Some(r) => t.level(r)?,
                None => 0,
            };
            (high <= low).then_some((t, high, low))
        });
        let tiers = match listed {
            Some((t, high, low)) => (high..=low).rev().map(|i| t.named_by(i)).collect(),
            None => {
                // The required level as a Topology that lists it names it, else by itself.
                let chain = |key: &'s str| -> Vec<&'s str> {
                    topologies
                        .values()
                        .find_map(|t| Some(t.named_by(t.level(key)?)))
                        .unwrap_or_else(|| vec![key])
                };
                match (required, preferred) {
                    (Some(r), Some(p)) if p != r => {
                        let wide = chain(r);
                        let mut narrow = wide.clone();
                        narrow.push(p);
                        vec![narrow, wide]
                    }
                    (Some(r), _) => vec![chain(r)],
                    (None, Some(p)) => vec![vec![p]],
                    (None, None) => return None,
                }
            }
        };
        Some(Levels {
            tiers,
            required: required.is_some(),
        })
    }

    /// The label keys of the widest level tried: the required one's, with one.
    pub fn widest(&self) -> &[&'s str] {
        self.tiers.last().map_or(&[], Vec::as_slice)
    }
}

/// A Topology that lists `preferred` as a wider level than `required`, if any: such a
/// preferred level is not used.
pub fn wider_in<'t>(
    preferred: &str,
    required: &str,
    topologies: &'t BTreeMap<String, Topology>,
) -> Option<&'t Topology> {
    topologies.values().find(|t| {
        t.level(preferred)
            .zip(t.level(required))
            .is_some_and(|(p, r)| p < r)
    })
}

/// A domain: the values of a level's label keys, widest first.
pub type Domain<'l> = Vec<&'l str>;

/// The domains of the level named by `keys` among nodes of `labels` (by index), in value
/// order, each with the indexes of its nodes; only those that agree with `pinned` (label,
/// value) on the keys they share. Nodes without every key are in none.
pub fn domains<'l>(
    labels: impl IntoIterator<Item = &'l BTreeMap<String, String>>,
    keys: &[&str],
    pinned: &[(&str, &str)],
) -> BTreeMap<Domain<'l>, Vec<usize>> {
    let mut out: BTreeMap<Domain<'l>, Vec<usize>> = BTreeMap::new();
    for (at, labels) in labels.into_iter().enumerate() {
        let Some(values) = keys
            .iter()
            .map(|k| labels.get(*k).map(String::as_str))
            .collect::<Option<Domain<'l>>>()
        else {
            continue;
        };
        if agrees(keys, &values, pinned) {
            out.entry(values).or_default().push(at);
        }
    }
    out
}

/// Whether the domain `values` of the level `keys` agrees with `pinned` (label, value) on the
/// keys they share.
pub fn agrees(keys: &[&str], values: &[&str], pinned: &[(&str, &str)]) -> bool {
    pinned.iter().all(|(k, v)| {
        keys.iter()
            .position(|key| key == k)
            .is_none_or(|i| values[i] == *v)
    })
}

/// `key=value` pairs of a domain of the level `keys`, joined by commas: how reasons name it.
pub fn describe(keys: &[&str], domain: &[&str]) -> String {
    keys.iter()
        .zip(domain)
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The most levels a Topology may have (Kueue's bound too).
pub const MAX_LEVELS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn datacenter() -> BTreeMap<String, Topology> {
        let levels = ["zone", "block", "rack", "host"].map(String::from).to_vec();
        BTreeMap::from([(
            "dc".to_owned(),
            Topology {
                name: "dc".into(),
                levels,
            },
        )])
    }

    #[test]
    fn a_rack_is_named_by_its_zone_too_and_nodes_without_a_level_are_in_no_domain() {
        let node = |zone: &str, rack: Option<&str>| {
            let mut l = BTreeMap::from([("zone".to_owned(), zone.to_owned())]);
            if let Some(rack) = rack {
                l.insert("rack".into(), rack.into());
            }
            l
        };
        let labels = [
            node("a", Some("r1")),
            node("b", Some("r1")),
            node("a", Some("r1")),
            node("a", None),
        ];
        let racks = domains(&labels, &["zone", "rack"], &[]);
        assert_eq!(
            racks.into_iter().collect::<Vec<_>>(),
            vec![(vec!["a", "r1"], vec![0, 2]), (vec!["b", "r1"], vec![1])]
        );
        let pinned = domains(&labels, &["zone", "rack"], &[("zone", "b")]);
        assert_eq!(pinned.keys().collect::<Vec<_>>(), vec![&vec!["b", "r1"]]);
        assert_eq!(describe(&["zone", "rack"], &["a", "r1"]), "zone=a,rack=r1");
    }

    #[test]
    fn a_gang_preferring_a_rack_and_requiring_a_zone_tries_rack_then_block_then_zone() {
        let t = datacenter();
        let levels = Levels::of(Some("zone"), Some("rack"), &t).unwrap();
        assert_eq!(
            levels.tiers,
            vec![
                vec!["zone", "block", "rack"],
                vec!["zone", "block"],
                vec!["zone"]
            ]
        );
        assert!(levels.required);
        assert_eq!(levels.widest(), ["zone"]);
    }

    #[test]
    fn a_gang_only_preferring_a_block_tries_block_and_zone_then_anywhere() {
        let t = datacenter();
        let levels = Levels::of(None, Some("block"), &t).unwrap();
        assert_eq!(levels.tiers, vec![vec!["zone", "block"], vec!["zone"]]);
        assert!(!levels.required);
    }

    #[test]
    fn a_required_level_alone_is_named_by_every_level_above_it() {
        let t = datacenter();
        let levels = Levels::of(Some("rack"), None, &t).unwrap();
        assert_eq!(levels.tiers, vec![vec!["zone", "block", "rack"]]);
    }

    #[test]
    fn levels_no_topology_lists_are_levels_of_their_own_the_preferred_inside_the_required() {
        let none = BTreeMap::new();
        let levels = Levels::of(Some("zone"), Some("rack"), &none).unwrap();
        assert_eq!(levels.tiers, vec![vec!["zone", "rack"], vec!["zone"]]);
        assert_eq!(
            Levels::of(Some("zone"), None, &none).unwrap().tiers,
            vec![vec!["zone"]]
        );
        assert_eq!(Levels::of(None, None, &none), None);
    }

    #[test]
    fn a_preferred_level_no_topology_lists_goes_inside_the_required_level_as_its_topology_names_it()
    {
        let t = datacenter();
        let levels = Levels::of(Some("block"), Some("gpu-island"), &t).unwrap();
        assert_eq!(
            levels.tiers,
            vec![vec!["zone", "block", "gpu-island"], vec!["zone", "block"]]
        );
    }

    #[test]
    fn a_preferred_level_wider_than_the_required_one_is_not_used() {
        let t = datacenter();
        let levels = Levels::of(Some("rack"), Some("zone"), &t).unwrap();
        assert_eq!(levels.tiers, vec![vec!["zone", "block", "rack"]]);
    }
}
