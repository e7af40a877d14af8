//! Instances that each keep to a domain: a gang of sub-groups whose sub-group names a
//! `topologyKey` ([`crate::model::sub_groups::SubGroup::topology_key`]) has each of its
//! instances placed in one domain of that level, each in a domain of its own choosing (two
//! slices in two racks, or both in one). The pass places them here, all of the minimum or
//! none, and each instance beyond it whole; the report gives each member its instance's domain.

use super::candidate::{Candidate, InstanceLevel, Where, described};
use super::pass::Pass;
use crate::admit::free_room::{InDomain, InstanceMisfit, InstanceNeed, Labelled};
use crate::admit::why::Why;
use crate::model::Resources;

impl<'s> Pass<'s> {
    /// Places every instance of candidate `i`'s minimum, each in a domain of its level,
    /// recording the domains; else why the first that found none waits.
    #[expect(
        clippy::result_large_err,
        reason = "as for Pass::consider: the refusal's reason is kept"
    )]
    pub(super) fn fit_instances(&mut self, i: usize, c: &Candidate<'s>) -> Result<(), Why> {
        let needs = instance_needs(c);
        match self.room.place_instances(&needs) {
            Ok(domains) => {
                self.instance_domains.insert(i, domains);
                Ok(())
            }
            Err((at, misfit)) => Err(misfit_why(&c.instance_levels[at], misfit)),
        }
    }

    /// Places one instance beyond a gang's minimum, in a domain of its `level` if it has one.
    pub(super) fn place_instance(
        &mut self,
        need: &[&Resources],
        level: Option<&InstanceLevel<'s>>,
    ) -> Result<Option<Labelled<'s>>, InstanceMisfit> {
        let (keys, pinned) = level.map_or((&[][..], &[][..]), |l| (&l.keys[..], &l.pinned[..]));
        self.room.place_instance(need, keys, pinned)
    }

    /// What the head's reservation holds room for, in parts each kept to one domain of its level
    /// (`None`: anywhere): each instance of `c`'s minimum when its instances keep to domains, else
    /// its whole need inside one domain of `required`, its required level.
    pub(super) fn reserved_parts<'c>(
        c: &'c Candidate<'s>,
        required: Option<&'c Where<'s>>,
    ) -> Vec<(Vec<&'s Resources>, Option<InDomain<'c, 's>>)> {
        if c.instance_levels.is_empty() {
            let within = required.map(|w| (w.levels.widest(), w.pinned.as_slice()));
            return vec![(c.need().collect(), within)];
        }
        instance_needs(c)
            .into_iter()
            .map(|(need, keys, pinned)| (need, (!keys.is_empty()).then_some((keys, pinned))))
            .collect()
    }

    /// Why candidate `c` never fits: an instance of its minimum that no domain of its level
    /// could hold with nothing else running there. Such a gang must not head the line.
    pub(super) fn an_instance_never_fits(&mut self, c: &Candidate<'s>) -> Option<Why> {
        if c.missing == 0 {
            return None;
        }
        let needs = instance_needs(c);
        for (level, (need, keys, pinned)) in c.instance_levels.iter().zip(needs) {
            if keys.is_empty() {
                continue;
            }
            if let Err(member) = self.room.domain_could_hold(&need, keys, pinned) {
                return Some(Why::NoDomain {
                    key: keys.join(" and "),
                    pinned: described(&level.pinned),
                    member,
                });
            }
        }
        None
    }
}

/// Each instance of `c`'s gated members, in order: its members' requests, its level's keys
/// and its pinned values.
fn instance_needs<'c, 's>(c: &'c Candidate<'s>) -> Vec<InstanceNeed<'c, 's, 's>> {
    let mut at = 0;
    c.instance_levels
        .iter()
        .map(|level| {
            let end = (at + level.members).min(c.gated.len());
            let need = c.gated[at..end].iter().map(|m| &m.requests).collect();
            at = end;
            (need, &level.keys[..], &level.pinned[..])
        })
        .collect()
}

fn misfit_why(level: &InstanceLevel<'_>, misfit: InstanceMisfit) -> Why {
    match misfit {
        InstanceMisfit::NoNode(member) => Why::NoNode { member },
        InstanceMisfit::NoDomain(tried) => Why::NoInstanceDomainRoom {
            sub_group: level.sub_group.to_owned(),
            tried,
            pinned: described(&level.pinned),
        },
    }
}

/// The domain of each of `c`'s released members, in order (`None`: any node), given the
/// domains placed for its instances.
pub(super) fn member_domains<'a, 's>(
    c: &Candidate<'s>,
    domains: &'a [Option<Labelled<'s>>],
) -> Vec<Option<&'a Labelled<'s>>> {
    c.instance_levels
        .iter()
        .zip(domains)
        .flat_map(|(level, domain)| std::iter::repeat_n(domain.as_ref(), level.members))
        .collect()
}
