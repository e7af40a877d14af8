//! Amounts of resources, fast enough to compare against thousands of nodes per call.
//!
//! Why not a map: the extender checks one pod against every candidate node (5,000 in the
//! design's target) within a millisecond, so a fit check must cost nanoseconds. Resource names
//! are interned process-wide into small integer ids (the well-known ones fixed, others appended
//! the first time they are seen), and amounts are a dense vector indexed by id. A missing entry
//! is zero.
//!
//! The table holds at most [`MAX_NAMES`] names, so that names made up by whoever may create
//! pods can neither grow it without bound nor make every amount vector long: names seen after
//! it is full all share [`ResourceId::OTHER`], whose amounts add up (a warning is logged once).
//! Real clusters use a handful of names (CPU, memory, a few device plugins).
//!
//! Names only requested ([`ResourceId::requested`]: by pods and PodGroups, which any tenant
//! writes) take a slot only while the table holds fewer than [`MAX_REQUESTED_NAMES`]; the
//! rest of the table is kept for names that nodes advertise and Queues bound
//! ([`ResourceId::of`]), which cluster administrators write. So made-up names in pods cannot
//! push a real resource into `(other resources)`: the names a fit or a cap depends on keep
//! their own slot. A zero amount takes no slot (a missing entry is zero).
//!
//! Units: CPU in millicores, everything else in bytes or whole units (see [`super::quantity`]).

use std::fmt;
use std::sync::{OnceLock, PoisonError, RwLock};

use smallvec::SmallVec;

/// An interned resource name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId(u16);

impl ResourceId {
    pub const CPU: ResourceId = ResourceId(0);
    pub const MEMORY: ResourceId = ResourceId(1);
    pub const PODS: ResourceId = ResourceId(2);
    pub const EPHEMERAL_STORAGE: ResourceId = ResourceId(3);
    pub const GPU: ResourceId = ResourceId(4);
    pub const MANAGED: ResourceId = ResourceId(5);
    pub const PLACEMENT: ResourceId = ResourceId(6);
    /// Every name seen after the table held [`MAX_NAMES`]; named `(other resources)`, which
    /// no Kubernetes resource can be called.
    pub const OTHER: ResourceId = ResourceId(7);

    /// Whether this is one of Gangplank's marker resources: cluster-level, never on a node and
    /// never a share.
    pub fn is_marker(self) -> bool {
        self == ResourceId::MANAGED || self == ResourceId::PLACEMENT
    }

    /// The id of `name`, interning it on first sight: for names that nodes advertise and
    /// Queues name.
    pub fn of(name: &str) -> ResourceId {
        Self::intern(name, MAX_NAMES)
    }

    /// The id of `name` as a pod or a PodGroup asks for it: interned on first sight only while
    /// the table holds fewer than [`MAX_REQUESTED_NAMES`] names, else [`ResourceId::OTHER`]
    /// unless a node or a Queue named it already.
    pub fn requested(name: &str) -> ResourceId {
        Self::intern(name, MAX_REQUESTED_NAMES)
    }

    fn intern(name: &str, limit: usize) -> ResourceId {
        if let Some(i) = position(&WELL_KNOWN, name) {
            return ResourceId(i as u16);
        }
        let table = table();
        if let Some(i) = position(&table.read().unwrap_or_else(PoisonError::into_inner), name) {
            return ResourceId(i as u16);
        }
        let mut names = table.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = position(&names, name) {
            return ResourceId(i as u16);
        }
        if names.len() >= limit {
            if !OVERFLOWED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(
                    resource = name,
                    "{limit} distinct resource names seen: this one and every new one \
                     (of pods from {MAX_REQUESTED_NAMES} names on, of nodes and Queues from \
                     {MAX_NAMES}) are counted together as (other resources)"
                );
            }
            return ResourceId::OTHER;
        }
        // Leaked on purpose: at most `MAX_NAMES` short strings, for `&'static` names.
        names.push(Box::leak(name.to_owned().into_boxed_str()));
        ResourceId((names.len() - 1) as u16)
    }

    /// The id of `name` if it was ever interned (or [`ResourceId::OTHER`] for any name not
    /// interned once the table is full); `None` means nothing holds any of it.
    pub fn lookup(name: &str) -> Option<ResourceId> {
        // The well-known names have fixed ids: no lock on the hot path.
        if let Some(i) = position(&WELL_KNOWN, name) {
            return Some(ResourceId(i as u16));
        }
        let found = position(
            &table().read().unwrap_or_else(PoisonError::into_inner),
            name,
        );
        match found {
            Some(i) => Some(ResourceId(i as u16)),
            // Once the table is full, names it does not hold are counted as OTHER.
            None => OVERFLOWED
                .load(std::sync::atomic::Ordering::Relaxed)
                .then_some(ResourceId::OTHER),
        }
    }

    pub fn name(self) -> &'static str {
        // Filter messages name resources for thousands of nodes per call: the well-known ids
        // answer without taking the table's lock.
        match WELL_KNOWN.get(self.index()) {
            Some(name) => name,
            None => table().read().unwrap_or_else(PoisonError::into_inner)[self.index()],
        }
    }

    /// The id's position in a [`Resources`] vector, for per-call tables keyed by resource.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// How many distinct resource names are told apart, the well-known ones included.
pub const MAX_NAMES: usize = 256;

/// How full the table may be for a name that is only requested to take a slot: half of it,
/// the other half kept for the names of nodes and Queues.
pub const MAX_REQUESTED_NAMES: usize = MAX_NAMES / 2;

const WELL_KNOWN: [&str; 8] = [
    "cpu",
    "memory",
    "pods",
    "ephemeral-storage",
    "nvidia.com/gpu",
    crate::model::names::MANAGED_RESOURCE,
    crate::model::names::PLACEMENT_RESOURCE,
    "(other resources)",
];

/// Whether a name was ever refused a place in the full table (warned about once).
static OVERFLOWED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn table() -> &'static RwLock<Vec<&'static str>> {
    static TABLE: OnceLock<RwLock<Vec<&'static str>>> = OnceLock::new();
    TABLE.get_or_init(|| RwLock::new(WELL_KNOWN.to_vec()))
}

fn position(names: &[&'static str], name: &str) -> Option<usize> {
    names.iter().position(|n| *n == name)
}

/// Amounts per resource; missing resources are zero. Amounts may go negative in arithmetic
/// (an overcommitted node), never in what the API reports.
#[derive(Clone, Default)]
pub struct Resources(SmallVec<[i64; 8]>);

impl Resources {
    pub fn new() -> Self {
        Self::default()
    }

    /// The amount of `resource`, zero when absent.
    pub fn get(&self, resource: &str) -> i64 {
        ResourceId::lookup(resource).map_or(0, |id| self.amount(id))
    }

    #[inline]
    pub fn amount(&self, id: ResourceId) -> i64 {
        self.0.get(id.index()).copied().unwrap_or(0)
    }

    /// Sets the amount of `resource`; for a name counted as [`ResourceId::OTHER`], adds it.
    /// For amounts that nodes and Queues give ([`ResourceId::of`]). Setting zero interns
    /// nothing.
    pub fn set(&mut self, resource: &str, amount: i64) {
        self.set_with(resource, amount, ResourceId::of);
    }

    /// [`Resources::set`] for what a pod or a PodGroup requests ([`ResourceId::requested`]).
    pub fn set_requested(&mut self, resource: &str, amount: i64) {
        self.set_with(resource, amount, ResourceId::requested);
    }

    fn set_with(&mut self, resource: &str, amount: i64, intern: fn(&str) -> ResourceId) {
        let id = match amount {
            0 => ResourceId::lookup(resource),
            _ => Some(intern(resource)),
        };
        if let Some(id) = id {
            self.set_id(id, amount);
        }
    }

    fn set_id(&mut self, id: ResourceId, amount: i64) {
        match id {
            ResourceId::OTHER => {
                let sum = self.amount(ResourceId::OTHER).saturating_add(amount);
                self.set_amount(ResourceId::OTHER, sum);
            }
            id => self.set_amount(id, amount),
        }
    }

    pub fn set_amount(&mut self, id: ResourceId, amount: i64) {
        if self.0.len() <= id.index() {
            if amount == 0 {
                return;
            }
            self.0.resize(id.index() + 1, 0);
        }
        self.0[id.index()] = amount;
    }

    /// Adds `other`, resource by resource (saturating).
    pub fn add(&mut self, other: &Resources) {
        self.widen(other.0.len());
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = mine.saturating_add(*theirs);
        }
    }

    /// Subtracts `other`, resource by resource (saturating; may go below zero).
    pub fn sub(&mut self, other: &Resources) {
        self.widen(other.0.len());
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = mine.saturating_sub(*theirs);
        }
    }

    /// `self` with every amount below zero raised to zero.
    pub fn at_least_zero(&self) -> Resources {
        let mut out = self.clone();
        out.clamp_at_zero();
        out
    }

    /// Raises every amount below zero to zero.
    pub fn clamp_at_zero(&mut self) {
        for amount in &mut self.0 {
            *amount = (*amount).max(0);
        }
    }

    /// `self + other` as a new value.
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.add(other);
        out
    }

    /// `self - other` as a new value.
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.sub(other);
        out
    }

    /// One `parts`-th of `self`, resource by resource, rounded up (`self` when `parts` is 0).
    pub fn part(&self, parts: u32) -> Resources {
        let parts = i64::from(parts.max(1));
        let up = |a: i64| {
            if a > 0 {
                (a - 1) / parts + 1
            } else {
                a / parts
            }
        };
        Resources(self.0.iter().map(|&a| up(a)).collect())
    }

    /// Keeps, resource by resource, the larger of `self` and `other`.
    pub fn max_with(&mut self, other: &Resources) {
        self.widen(other.0.len());
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Resource by resource, the smaller of `self` and `other` (a missing entry is zero).
    pub fn min_of(&self, other: &Resources) -> Resources {
        let len = self.0.len().max(other.0.len());
        let at = |r: &Resources, i: usize| r.0.get(i).copied().unwrap_or(0);
        Resources((0..len).map(|i| at(self, i).min(at(other, i))).collect())
    }

    /// Every positive amount of `self` is available in `available`.
    #[inline]
    pub fn fits_in(&self, available: &Resources) -> bool {
        self.0
            .iter()
            .enumerate()
            .all(|(i, &need)| need <= 0 || need <= available.0.get(i).copied().unwrap_or(0))
    }

    /// `self` fits in `available` after `taken` is removed from it, without allocating.
    #[inline]
    pub fn fits_in_after(&self, available: &Resources, taken: &Resources) -> bool {
        self.0.iter().enumerate().all(|(i, &need)| {
            need <= 0
                || need
                    <= available.0.get(i).copied().unwrap_or(0)
                        - taken.0.get(i).copied().unwrap_or(0)
        })
    }

    /// `self` fits in `available` plus `extra`, without allocating: what a pod could take on a
    /// node if room held by others (`extra`) were given back.
    #[inline]
    pub fn fits_in_with(&self, available: &Resources, extra: &Resources) -> bool {
        let (have, extra) = (&available.0[..], &extra.0[..]);
        self.0.iter().enumerate().all(|(i, &need)| {
            need <= 0
                || need
                    <= have
                        .get(i)
                        .copied()
                        .unwrap_or(0)
                        .saturating_add(extra.get(i).copied().unwrap_or(0))
        })
    }

    /// The resources of which `self` needs more than `available` holds, with the shortfall.
    pub fn shortfall(&self, available: &Resources) -> Vec<(&'static str, i64)> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(i, &need)| {
                let have = available.0.get(i).copied().unwrap_or(0);
                (need > 0 && need > have).then(|| (ResourceId(i as u16).name(), need - have))
            })
            .collect()
    }

    /// The positive amounts of `self` (a negative amount, room overcommitted, counts as none).
    pub fn positive(&self) -> Resources {
        Resources(self.0.iter().map(|&a| a.max(0)).collect())
    }

    /// Sets `self` to `want.minus(have).positive()` without allocating.
    pub fn set_lack(&mut self, want: &Resources, have: &Resources) {
        self.0.clear();
        self.0.extend(
            want.0
                .iter()
                .enumerate()
                .map(|(i, &w)| w.saturating_sub(have.0.get(i).copied().unwrap_or(0)).max(0)),
        );
    }

    /// Adds `other`'s positive amounts: `self.add(&other.positive())` without allocating.
    pub fn add_positive(&mut self, other: &Resources) {
        self.widen(other.0.len());
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = mine.saturating_add((*theirs).max(0));
        }
    }

    /// Subtracts `other`'s positive amounts: `self.sub(&other.positive())` without allocating.
    pub fn sub_positive(&mut self, other: &Resources) {
        self.widen(other.0.len());
        for (mine, theirs) in self.0.iter_mut().zip(&other.0) {
            *mine = mine.saturating_sub((*theirs).max(0));
        }
    }

    /// No resource has a non-zero amount.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&a| a == 0)
    }

    /// Every non-zero amount, by name, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        self.ids().map(|(id, a)| (id.name(), a))
    }

    /// Every non-zero amount, by id.
    pub fn ids(&self) -> impl Iterator<Item = (ResourceId, i64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, a)| **a != 0)
            .map(|(i, a)| (ResourceId(i as u16), *a))
    }

    fn widen(&mut self, len: usize) {
        if self.0.len() < len {
            self.0.resize(len, 0);
        }
    }
}

impl PartialEq for Resources {
    fn eq(&self, other: &Self) -> bool {
        let len = self.0.len().max(other.0.len());
        (0..len)
            .all(|i| self.0.get(i).copied().unwrap_or(0) == other.0.get(i).copied().unwrap_or(0))
    }
}

impl Eq for Resources {}

impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Human-readable, as in messages to users: `cpu: 4, memory: 16Gi, nvidia.com/gpu: 2`.
impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, amount) in self.iter() {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{name}: {}", human(name, amount))?;
        }
        if first {
            f.write_str("nothing")?;
        }
        Ok(())
    }
}

/// Writes each resource `needed` lacks of `available` as `cpu 64 needed, 32 free`, comma
/// separated: how a gang that does not fit says what it lacks.
pub fn write_shortfall(
    f: &mut fmt::Formatter<'_>,
    needed: &Resources,
    available: &Resources,
) -> fmt::Result {
    for (i, (name, _)) in needed.shortfall(available).iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        write!(
            f,
            "{sep}{name} {} needed, {} free",
            human(name, needed.get(name)),
            human(name, available.get(name))
        )?;
    }
    Ok(())
}

/// An amount in the units a user would write in a manifest.
pub fn human(resource: &str, amount: i64) -> String {
    if resource == "cpu" {
        return if amount % 1000 == 0 {
            format!("{}", amount / 1000)
        } else {
            format!("{amount}m")
        };
    }
    if resource == "memory" || resource == "ephemeral-storage" || resource.starts_with("hugepages-")
    {
        for (unit, size) in [
            ("Ti", 1i64 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ] {
            if amount != 0 && amount % size == 0 {
                return format!("{}{unit}", amount / size);
            }
        }
    }
    amount.to_string()
}

impl<const N: usize> From<[(&str, i64); N]> for Resources {
    fn from(entries: [(&str, i64); N]) -> Self {
        let mut out = Resources::new();
        for (name, amount) in entries {
            out.set(name, amount);
        }
        out
    }
}

/// Hard upper bounds per resource. Unlike [`Resources`], where a missing resource is zero, a
/// resource that is not listed here is **not bounded**: `nvidia.com/gpu: 0` forbids GPUs, no
/// entry allows any number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capability(Vec<(ResourceId, i64)>);

impl Capability {
    /// No bound on any resource.
    pub fn unbounded() -> Self {
        Self::default()
    }

    pub fn set(&mut self, resource: &str, amount: i64) {
        self.set_limit(ResourceId::of(resource), amount);
    }

    pub fn set_limit(&mut self, id: ResourceId, amount: i64) {
        match self.0.binary_search_by_key(&id, |(i, _)| *i) {
            Ok(at) => self.0[at].1 = amount,
            Err(at) => self.0.insert(at, (id, amount)),
        }
    }

    /// The bound on `id`, `None` when it is not bounded.
    pub fn limit(&self, id: ResourceId) -> Option<i64> {
        self.0
            .binary_search_by_key(&id, |(i, _)| *i)
            .ok()
            .map(|at| self.0[at].1)
    }

    pub fn is_unbounded(&self) -> bool {
        self.0.is_empty()
    }

    /// Every bound, by id.
    pub fn iter(&self) -> impl Iterator<Item = (ResourceId, i64)> + '_ {
        self.0.iter().copied()
    }
}

impl<const N: usize> From<[(&str, i64); N]> for Capability {
    fn from(entries: [(&str, i64); N]) -> Self {
        let mut out = Capability::unbounded();
        for (name, amount) in entries {
            out.set(name, amount);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_resources_are_zero_and_trailing_zeros_do_not_matter() {
        let mut a = Resources::from([("cpu", 1000)]);
        assert_eq!(a.get("memory"), 0);
        assert_eq!(a.get("never-seen.example.com/thing"), 0);
        let b = a.clone();
        a.set("example.com/widget", 0);
        a.set("nvidia.com/gpu", 0);
        assert_eq!(a, b);
    }

    #[test]
    fn a_part_is_rounded_up_so_the_parts_cover_the_whole() {
        let whole = Resources::from([("cpu", 10_000), ("memory", 7)]);
        assert_eq!(
            whole.part(3),
            Resources::from([("cpu", 3334), ("memory", 3)])
        );
        assert_eq!(whole.part(0), whole);
    }

    #[test]
    fn a_request_fits_only_when_every_resource_it_names_is_available() {
        let node = Resources::from([("cpu", 4000), ("memory", 8 << 30)]);
        assert!(Resources::from([("cpu", 4000)]).fits_in(&node));
        assert!(!Resources::from([("cpu", 4001)]).fits_in(&node));
        assert!(!Resources::from([("nvidia.com/gpu", 1)]).fits_in(&node));
        assert!(Resources::new().fits_in(&Resources::new()));
        let taken = Resources::from([("cpu", 1000)]);
        assert!(Resources::from([("cpu", 3000)]).fits_in_after(&node, &taken));
        assert!(!Resources::from([("cpu", 3001)]).fits_in_after(&node, &taken));
        let held = Resources::from([("cpu", 500), ("nvidia.com/gpu", 1)]);
        assert!(Resources::from([("cpu", 4500), ("nvidia.com/gpu", 1)]).fits_in_with(&node, &held));
        assert!(!Resources::from([("cpu", 4501)]).fits_in_with(&node, &held));
        assert!(!Resources::from([("nvidia.com/gpu", 2)]).fits_in_with(&node, &held));
    }

    #[test]
    fn arithmetic_is_per_resource_and_may_go_negative() {
        let mut a = Resources::from([("cpu", 1000), ("memory", 10)]);
        a.sub(&Resources::from([("cpu", 1500), ("nvidia.com/gpu", 1)]));
        assert_eq!(a.get("cpu"), -500);
        assert_eq!(a.get("nvidia.com/gpu"), -1);
        a.add(&Resources::from([("cpu", 500), ("nvidia.com/gpu", 1)]));
        assert_eq!(a, Resources::from([("memory", 10)]));
    }

    #[test]
    fn adding_or_subtracting_the_positive_part_ignores_overcommitted_amounts() {
        let room = Resources::from([("cpu", -500), ("memory", 2048)]);
        let mut total = Resources::from([("cpu", 1000)]);
        total.add_positive(&room);
        assert_eq!(total, Resources::from([("cpu", 1000), ("memory", 2048)]));
        total.sub_positive(&room);
        assert_eq!(total.amount(ResourceId::CPU), 1000);
        assert_eq!(total.amount(ResourceId::of("memory")), 0);
        let want = Resources::from([("cpu", 2000), ("memory", 1024)]);
        let have = Resources::from([("cpu", 500), ("memory", 4096), ("nvidia.com/gpu", 1)]);
        total.set_lack(&want, &have);
        assert_eq!(total, want.minus(&have).positive());
    }

    #[test]
    fn shortfall_names_what_is_missing_and_by_how_much() {
        let need = Resources::from([("cpu", 3000), ("nvidia.com/gpu", 4)]);
        let have = Resources::from([("cpu", 4000), ("nvidia.com/gpu", 1)]);
        assert_eq!(need.shortfall(&have), vec![("nvidia.com/gpu", 3)]);
    }

    #[test]
    fn display_uses_the_units_of_a_manifest() {
        let r = Resources::from([("cpu", 1500), ("memory", 16 << 30), ("nvidia.com/gpu", 2)]);
        assert_eq!(r.to_string(), "cpu: 1500m, memory: 16Gi, nvidia.com/gpu: 2");
        assert_eq!(Resources::new().to_string(), "nothing");
    }

    #[test]
    fn well_known_names_keep_their_fixed_ids_without_the_table() {
        for (i, name) in WELL_KNOWN.iter().enumerate() {
            let id = ResourceId(i as u16);
            assert_eq!(table().read().unwrap()[i], *name);
            assert_eq!(
                (ResourceId::of(name), ResourceId::lookup(name)),
                (id, Some(id))
            );
            assert_eq!(id.name(), *name);
        }
    }

    #[test]
    fn interning_gives_one_id_per_name() {
        let a = ResourceId::of("example.com/foo");
        assert_eq!(ResourceId::of("example.com/foo"), a);
        assert_eq!(a.name(), "example.com/foo");
        assert_eq!(ResourceId::of("cpu"), ResourceId::CPU);
        assert_eq!(ResourceId::of("nvidia.com/gpu"), ResourceId::GPU);
    }
}
