//! Topology in the free room: the domains of a level among the schedulable nodes (made once
//! per pass and level), the choices a gang with a topology has, and placing a gang inside one
//! domain ([`Room::place_in_domain`]).

use std::rc::Rc;

use super::{InDomain, Labelled, Partition, Room, labelled};
use crate::admit::why::{DomainTried, LevelTried};
use crate::model::Resources;
use crate::model::topology::{self, Domain};
use crate::policy::fit::{first_fit, size};

impl<'s> Room<'s> {
    /// The domains of the level `keys` among schedulable nodes (see [`topology::domains`]),
    /// each with its nodes and their allocatable in all; made once per pass and level.
    fn level(&mut self, keys: &[&'s str]) -> Rc<Partition<'s>> {
        let (labels, allocatable) = (&self.labels, &self.allocatable);
        let partition = self.levels.entry(keys.to_vec()).or_insert_with(|| {
            let domains = topology::domains(labels.iter().copied(), keys, &[]);
            Rc::new(
                domains
                    .into_iter()
                    .map(|(domain, nodes)| {
                        let mut sum = Resources::new();
                        nodes.iter().for_each(|&at| sum.add(allocatable[at]));
                        (domain, (nodes, sum))
                    })
                    .collect(),
            )
        });
        Rc::clone(partition)
    }

    /// Where a group may go: with `within`, each domain of that level agreeing with its
    /// pinned values, as (label, value) pairs, with its nodes; without, every node.
    pub(super) fn choices(
        &mut self,
        within: Option<InDomain<'_, 's>>,
    ) -> Vec<(Option<Labelled<'s>>, Vec<usize>)> {
        match within {
            None => vec![(None, (0..self.nodes.len()).collect())],
            Some((keys, pinned)) => self
                .level(keys)
                .iter()
                .filter(|(d, _)| topology::agrees(keys, d, pinned))
                .map(|(d, (nodes, _))| (Some(labelled(keys, d)), nodes.clone()))
                .collect(),
        }
    }

    /// Whether some domain of the level `keys` (agreeing with `pinned`) could hold every pod
    /// of `need` with nothing else running on its nodes. If none could: `None` when no node
    /// has the level's labels (or only other values than `pinned`), else a member that found
    /// no node left in the domain that held the most. A gang that fails this never fits one
    /// domain, and must neither head the line nor ask reclaim for room.
    pub fn domain_could_hold(
        &mut self,
        need: &[&Resources],
        keys: &[&'s str],
        pinned: &[(&str, &str)],
    ) -> Result<(), Option<Resources>> {
        let sum = need.iter().fold(Resources::new(), |mut sum, pod| {
            sum.add(pod);
            sum
        });
        let mut closest: Option<(usize, Resources)> = None;
        let level = self.level(keys);
        for (domain, (nodes, allocatable)) in level.iter() {
            if !topology::agrees(keys, domain, pinned) {
                continue;
            }
            let empty: Vec<Resources> = if sum.fits_in(allocatable) {
                nodes
                    .iter()
                    .map(|&at| self.allocatable[at].clone())
                    .collect()
            } else {
                Vec::new()
            };
            match first_fit(&empty, need.iter().copied()) {
                Ok(_) => return Ok(()),
                Err((placed, pod)) => {
                    if closest.as_ref().is_none_or(|(n, _)| placed > *n) {
                        closest = Some((placed, pod.clone()));
                    }
                }
            }
        }
        Err(closest.map(|(_, pod)| pod))
    }

    /// Places every pod of `need` like [`Room::place`], but all in one domain of the level
    /// `keys` (agreeing with `pinned`): the one that fits it tightest (least room left over,
    /// GPUs first), so that roomier domains stay free for larger gangs. Returns that domain as
    /// (label, value) pairs; or, changing nothing, the domains tried and what the closest
    /// lacked.
    pub fn place_in_domain(
        &mut self,
        need: &[&Resources],
        keys: &[&'s str],
        pinned: &[(&str, &str)],
    ) -> Result<Labelled<'s>, LevelTried> {
        type Fit<'l, 'p, 's> = (
            &'l Domain<'s>,
            &'l [usize],
            Vec<(usize, &'p Resources)>,
            Resources,
        );
        let level = self.level(keys);
        let mut best: Option<Fit<'_, '_, 's>> = None;
        let mut closest: Vec<DomainTried> = Vec::new();
        let mut tried = 0;
        for (domain, (nodes, _)) in level.iter() {
            if !topology::agrees(keys, domain, pinned) {
                continue;
            }
            tried += 1;
            let mut free: Vec<Resources> = nodes.iter().map(|&at| self.nodes[at].clone()).collect();
            let placed = first_fit(&free, need.iter().copied());
            let placed = match placed {
                Ok(placed) => placed,
                Err((placed, pod)) => {
                    if closest.len() < LevelTried::SHOWN
                        || closest.last().is_some_and(|d| placed > d.placed)
                    {
                        closest.push(DomainTried {
                            domain: topology::describe(keys, domain),
                            placed,
                            of: need.len(),
                            member: pod.clone(),
                        });
                        closest.sort_by_key(|d| std::cmp::Reverse(d.placed));
                        closest.truncate(LevelTried::SHOWN);
                    }
                    continue;
                }
            };
            for &(at, pod) in &placed {
                free[at].sub(pod);
            }
            let left = free.iter().fold(Resources::new(), |mut left, f| {
                left.add(&f.at_least_zero());
                left
            });
            if best
                .as_ref()
                .is_none_or(|(_, _, _, l)| size(&left) < size(l))
            {
                best = Some((domain, nodes, placed, left));
            }
        }
        let Some((domain, nodes, placed, _)) = best else {
            return Err(LevelTried {
                key: keys.last().copied().unwrap_or_default().to_owned(),
                domains: tried,
                closest,
            });
        };
        for (at, pod) in placed {
            self.nodes[nodes[at]].sub(pod);
        }
        for pod in need {
            self.total.sub(pod);
        }
        self.changed();
        Ok(labelled(keys, domain))
    }

    /// Places one instance's members like [`Room::place_in_domain`] in a domain of the level
    /// `keys` agreeing with `pinned`, or like [`Room::place`] without a level: its domain
    /// (`None` without a level), or, changing nothing, why not.
    pub fn place_instance(
        &mut self,
        need: &[&Resources],
        keys: &[&'s str],
        pinned: &[(&str, &str)],
    ) -> Result<Option<Labelled<'s>>, InstanceMisfit> {
        if keys.is_empty() {
            return self
                .place(need)
                .map(|()| None)
                .map_err(InstanceMisfit::NoNode);
        }
        self.place_in_domain(need, keys, pinned)
            .map(Some)
            .map_err(InstanceMisfit::NoDomain)
    }

    /// Places instances one after another, each like [`Room::place_instance`]: all of them,
    /// with their domains, or, changing nothing, the index of the first that found no room
    /// and why.
    pub fn place_instances(
        &mut self,
        instances: &[InstanceNeed<'_, '_, 's>],
    ) -> Result<Vec<Option<Labelled<'s>>>, (usize, InstanceMisfit)> {
        let before = (self.nodes.clone(), self.total.clone());
        let mut domains = Vec::with_capacity(instances.len());
        for (at, (need, keys, pinned)) in instances.iter().enumerate() {
            match self.place_instance(need, keys, pinned) {
                Ok(domain) => domains.push(domain),
                Err(misfit) => {
                    (self.nodes, self.total) = before;
                    // Room grew back: every shape may look at every node again.
                    self.cursors.iter_mut().for_each(|(_, cursor)| *cursor = 0);
                    self.changed();
                    return Err((at, misfit));
                }
            }
        }
        Ok(domains)
    }
}

/// One instance for [`Room::place_instances`]: its members' requests, the label keys of the
/// level it keeps to (empty: none), and the values its placed members pin.
pub(in crate::admit) type InstanceNeed<'n, 'r, 's> =
    (Vec<&'r Resources>, &'n [&'s str], &'n [(&'s str, &'s str)]);

/// Why an instance found no room: no node for a member (no level), or no domain of its level.
#[derive(Debug)]
pub(in crate::admit) enum InstanceMisfit {
    NoNode(Resources),
    NoDomain(LevelTried),
}
