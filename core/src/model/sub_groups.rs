//! Sub-groups of a gang (a PodGroup's `subGroups`): its members split into instances by their
//! labels, each instance needed whole, and how many whole instances of each sub-group the gang
//! needs to start. A disaggregated inference service is one gang of prefill and decode
//! instances; a multi-slice job one gang of slices. Pure: the spec and the members' labels
//! decide, and admission (`crate::admit::plan`) chooses which instances make the minimum.

use std::collections::BTreeMap;

/// One sub-group of a gang: the members its selector matches, in instances of `size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubGroup {
    pub name: String,
    /// Members in each instance: an instance is whole with this many.
    pub size: u32,
    /// Whole instances the gang needs to start.
    pub min_count: u32,
    /// Labels (equality) a member carries to be in this sub-group; empty: every member.
    pub selector: BTreeMap<String, String>,
    /// Members of the sub-group with equal values of these labels are one instance.
    pub match_label_keys: Vec<String>,
    /// The topology level each instance keeps to (a node label): the members of one instance
    /// run in one domain of it, each instance in a domain of its own choosing.
    pub topology_key: Option<String>,
}

impl SubGroup {
    /// Whether a member with `labels` is in this sub-group, and the values of its instance.
    pub fn instance_of<'l>(&self, labels: &'l BTreeMap<String, String>) -> Option<Vec<&'l str>> {
        let selected = self
            .selector
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|l| l == v));
        if !selected {
            return None;
        }
        self.match_label_keys
            .iter()
            .map(|k| labels.get(k).map(String::as_str))
            .collect()
    }
}

/// The members (by index into what [`instances`] was given) of one instance of the sub-group
/// `sub_group` (its index in the spec), named by `values` of its `matchLabelKeys`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance<'l> {
    pub sub_group: usize,
    pub values: Vec<&'l str>,
    pub members: Vec<usize>,
}

/// The instances of `sub_groups` among members of `labels`, ordered by sub-group then values;
/// a member goes to the first sub-group that selects it. The indexes of the members no
/// sub-group takes (it matches no selector, or lacks a label its sub-group splits by) come
/// second.
pub fn instances<'l>(
    sub_groups: &[SubGroup],
    labels: impl IntoIterator<Item = &'l BTreeMap<String, String>>,
) -> (Vec<Instance<'l>>, Vec<usize>) {
    let mut by_key: BTreeMap<(usize, Vec<&'l str>), Vec<usize>> = BTreeMap::new();
    let mut strays = Vec::new();
    for (i, labels) in labels.into_iter().enumerate() {
        let found = sub_groups
            .iter()
            .enumerate()
            .find_map(|(s, g)| g.instance_of(labels).map(|values| (s, values)));
        match found {
            Some(key) => by_key.entry(key).or_default().push(i),
            None => strays.push(i),
        }
    }
    let instances = by_key
        .into_iter()
        .map(|((sub_group, values), members)| Instance {
            sub_group,
            values,
            members,
        })
        .collect();
    (instances, strays)
}

/// The members a gang of `sub_groups` needs for its minimum: per sub-group, `minCount` whole
/// instances, counting first those `started` says started, then the whole ones (`size`
/// members or more) in order. Each chosen instance's first `size` members are taken.
/// `Err(Short)` names the first sub-group without enough whole instances.
pub fn minimum(
    sub_groups: &[SubGroup],
    instances: &[Instance<'_>],
    started: &dyn Fn(&Instance<'_>) -> bool,
) -> Result<Vec<usize>, Short> {
    let mut chosen = Vec::new();
    for (s, g) in sub_groups.iter().enumerate() {
        let of_group = instances.iter().filter(|i| i.sub_group == s);
        let begun = of_group.clone().filter(|i| started(i)).count();
        let mut lacking = (g.min_count as usize).saturating_sub(begun);
        let whole = of_group
            .clone()
            .filter(|i| !started(i) && i.members.len() >= g.size as usize);
        for instance in whole {
            if lacking == 0 {
                break;
            }
            chosen.extend_from_slice(&instance.members[..g.size as usize]);
            lacking -= 1;
        }
        if lacking > 0 {
            let partial = of_group
                .filter(|i| !started(i) && i.members.len() < g.size as usize)
                .map(|i| (i.values.join("/"), i.members.len()));
            return Err(Short {
                sub_group: g.name.clone(),
                whole: g.min_count as usize - lacking,
                min_count: g.min_count,
                size: g.size,
                partial: Partial::of(partial),
            });
        }
    }
    Ok(chosen)
}

/// A sub-group with fewer whole instances (started, or with `size` members) than its
/// `minCount`, and which of its instances are not whole yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Short {
    pub sub_group: String,
    pub whole: usize,
    pub min_count: u32,
    pub size: u32,
    pub partial: Partial,
}

/// The instances of a sub-group that have some members but not all: the first
/// [`Partial::NAMED`] by their label values (joined by `/`) with their members, and how many
/// more there are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partial {
    pub named: Vec<(String, usize)>,
    pub more: usize,
}

impl Partial {
    /// Instances a reason names; the others are counted.
    pub const NAMED: usize = 3;

    fn of(instances: impl Iterator<Item = (String, usize)>) -> Partial {
        let mut partial = Partial::default();
        for instance in instances {
            if partial.named.len() < Self::NAMED {
                partial.named.push(instance);
            } else {
                partial.more += 1;
            }
        }
        partial
    }
}

impl std::fmt::Display for Short {
    /// `sub-group prefill has 1 whole instances (2 members each) of the 2 its minCount needs
    /// (instance p1 has 1 member)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Short {
            sub_group,
            whole,
            min_count,
            size,
            partial,
        } = self;
        write!(
            f,
            "sub-group {sub_group} has {whole} whole instances ({size} members each) of the {min_count} its minCount needs"
        )?;
        if !partial.named.is_empty() {
            write!(f, " ({partial})")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Partial {
    /// `instance p1 has 1 member, instance p3 has 0...`, or nothing when none.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (values, members)) in self.named.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let s = if *members == 1 { "" } else { "s" };
            write!(f, "{sep}instance {values} has {members} member{s}")?;
        }
        if self.more > 0 {
            write!(f, " and {} more instances are short", self.more)?;
        }
        Ok(())
    }
}

/// The members the minimum of `sub_groups` counts: the sum of `minCount × size`.
pub fn minimum_members(sub_groups: &[SubGroup]) -> u64 {
    sub_groups
        .iter()
        .map(|g| u64::from(g.min_count) * u64::from(g.size))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub_group(name: &str, size: u32, min_count: u32) -> SubGroup {
        SubGroup {
            name: name.into(),
            size,
            min_count,
            selector: BTreeMap::from([("role".into(), name.into())]),
            match_label_keys: vec!["instance".into()],
            topology_key: None,
        }
    }

    fn member(role: &str, instance: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("role".into(), role.into()),
            ("instance".into(), instance.into()),
        ])
    }

    fn service() -> Vec<SubGroup> {
        vec![sub_group("prefill", 2, 2), sub_group("decode", 2, 1)]
    }

    #[test]
    fn members_split_into_instances_by_sub_group_and_label_values() {
        let labels = [
            member("decode", "d0"),
            member("prefill", "p1"),
            member("prefill", "p0"),
            member("prefill", "p1"),
            BTreeMap::from([("role".into(), "router".into())]),
            BTreeMap::from([("role".into(), "prefill".into())]),
        ];
        let (instances, strays) = instances(&service(), &labels);
        let shown: Vec<(usize, Vec<&str>, Vec<usize>)> = instances
            .into_iter()
            .map(|i| (i.sub_group, i.values, i.members))
            .collect();
        assert_eq!(
            shown,
            vec![
                (0, vec!["p0"], vec![2]),
                (0, vec!["p1"], vec![1, 3]),
                (1, vec!["d0"], vec![0]),
            ]
        );
        assert_eq!(strays, vec![4, 5], "no sub-group, no instance label");
    }

    #[test]
    fn the_minimum_takes_whole_instances_only_and_counts_those_started() {
        let labels = [
            member("prefill", "p0"),
            member("prefill", "p1"),
            member("prefill", "p1"),
            member("prefill", "p2"),
            member("prefill", "p2"),
            member("decode", "d0"),
            member("decode", "d0"),
        ];
        let (instances, _) = instances(&service(), &labels);
        let chosen = minimum(&service(), &instances, &|_| false).unwrap();
        assert_eq!(chosen, vec![1, 2, 3, 4, 5, 6], "p0 has one member of two");
        let p1_started = |i: &Instance| i.values == ["p1"];
        let chosen = minimum(&service(), &instances, &p1_started).unwrap();
        assert_eq!(chosen, vec![3, 4, 5, 6], "p1 counts, started");
    }

    #[test]
    fn a_sub_group_short_of_whole_instances_is_named() {
        let labels = [
            member("prefill", "p0"),
            member("prefill", "p0"),
            member("prefill", "p1"),
            member("decode", "d0"),
            member("decode", "d0"),
        ];
        let (instances, _) = instances(&service(), &labels);
        let short = minimum(&service(), &instances, &|_| false).unwrap_err();
        assert_eq!(
            short,
            Short {
                sub_group: "prefill".into(),
                whole: 1,
                min_count: 2,
                size: 2,
                partial: Partial {
                    named: vec![("p1".into(), 1)],
                    more: 0
                },
            }
        );
        assert_eq!(
            short.to_string(),
            "sub-group prefill has 1 whole instances (2 members each) of the 2 its minCount needs (instance p1 has 1 member)"
        );
    }

    #[test]
    fn a_reason_names_the_first_short_instances_and_counts_the_rest() {
        let partial = Partial::of((0..5).map(|i| (format!("p{i}"), i + 1)));
        assert_eq!(
            partial.to_string(),
            "instance p0 has 1 member, instance p1 has 2 members, instance p2 has 3 members and 2 more instances are short"
        );
    }
}
