//! Devices of Dynamic Resource Allocation (`resource.k8s.io/v1`) as countable resources: one
//! per DeviceClass, named as upstream names a class's implicit extended resource
//! (`deviceclass.resource.kubernetes.io/<class>`, KEP-5004), so fit, queue usage, capability,
//! guarantee and deserved share count devices like any other resource (docs/dra.md).
//!
//! - A node's allocatable gains, per class, the devices of the ResourceSlices published for it
//!   (`spec.nodeName`) that every selector of the class selects. The selectors are CEL,
//!   evaluated with the `cel` crate on `device.driver`, `device.attributes[domain][name]` and
//!   `device.allowMultipleAllocations`; a class with an expression that does not compile, or
//!   that fails or gives no bool on a device, counts no device there and is logged
//!   ([`Index::problems`], the metric `gangplank_dra_class_errors`, and [`note`]: the wait
//!   message of the groups that ask for it). Slices for many nodes
//!   (`nodeSelector`, `allNodes`, per-device node selection) are not counted: one device would
//!   count on every node that reaches it.
//!   Devices that draw on shared counters (partitions) count no more than the counters let
//!   be allocated at once ([`at_once`]).
//!   A class with an `extendedResourceName` counts its devices under that name as well, on
//!   the nodes that do not advertise it themselves (a device plugin's, which the scheduler
//!   then uses).
//! - A pod's requests gain, per class, the devices its claims ask for: through
//!   `resourceClaimTemplateName` the template's requests, through `resourceClaimName` the
//!   claim's, counted once, in the first pod by name of those in the namespace that name it.
//!   A pod whose template or claim is not known yet asks for one [`UNRESOLVED`], which no node
//!   has, so it is never admitted as if it asked for nothing.
//!
//! [`Index`] is owned by the one [`super::Mirror`] task, its only writer: the watches of the
//! four kinds send [`Object`]s; the mirror takes them into the index before it takes the
//! model's write lock ([`Index::take`]: the CEL evaluations, each device once per class, happen
//! there), then re-applies the nodes and pods whose counts they changed to the [`State`] under
//! the lock ([`Index::carry`]: sums per node, no CEL).
//!
//! The conversions are in [`devices`] (classes, slices, selection, partitions) and [`claims`]
//! (what claims, templates and pods ask for); this module holds the [`Index`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gangplank_core::model::{Node, Pod, Resources, State};

use super::Watched;

mod claims;
mod devices;

pub use claims::{Asks, ClaimRef, asks, claims_of};
pub use devices::{Class, Slice, class, slice};
use devices::{Draws, SetKey, at_once, select};

/// How upstream names the extended resource of a DeviceClass without `extendedResourceName`.
pub const CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// What a pod asks for, one per claim or template not known yet: no node has it.
pub const UNRESOLVED: &str = "resource.gangplank.dev/unresolved-claims";

/// The most devices a claim can be allocated (upstream's `AllocationResultsMaxSize`): a
/// request's count is bounded by it where it enters, so no count overflows.
pub const MAX_DEVICES_PER_CLAIM: i64 = 32;

/// The resource a DeviceClass's devices are counted as.
pub fn class_resource(class: &str) -> String {
    format!("{CLASS_RESOURCE_PREFIX}{class}")
}

/// A watch event of one of the DRA kinds, converted. Templates and claims are keyed
/// `namespace/name`.
#[derive(Debug, Clone)]
pub enum Object {
    Class(String, Class),
    ClassGone(String),
    Slice(String, Slice),
    SliceGone(String),
    Template(String, Asks),
    TemplateGone(String),
    Claim(String, Asks),
    ClaimGone(String),
}

impl Object {
    pub fn kind(&self) -> Watched {
        match self {
            Object::Class(..) | Object::ClassGone(_) => Watched::DeviceClasses,
            Object::Slice(..) | Object::SliceGone(_) => Watched::ResourceSlices,
            Object::Template(..) | Object::TemplateGone(_) => Watched::ResourceClaimTemplates,
            Object::Claim(..) | Object::ClaimGone(_) => Watched::ResourceClaims,
        }
    }
}

/// What a DRA object changed, for [`Index::carry`] to bring into the model.
#[derive(Debug)]
pub enum Effect {
    Nothing,
    /// The devices counted on these nodes may have changed.
    Nodes(Vec<String>),
    /// A class changed: the devices counted on every node may have.
    AllNodes,
    /// What these pods (UIDs) ask for may have changed.
    Pods(Vec<String>),
}

/// A pod that names claims: what it names and what the index last added to its requests.
#[derive(Debug)]
struct Claiming {
    namespace: String,
    name: String,
    refs: Vec<ClaimRef>,
    added: Resources,
}

/// A template or claim, as the pods that name it are indexed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum TemplateOrClaim {
    Template(String),
    Claim(String),
}

/// The DRA objects the model's counts come from (see the module docs); written only by the
/// [`super::Mirror`].
#[derive(Debug, Default)]
pub struct Index {
    classes: BTreeMap<String, Class>,
    slices: HashMap<String, Slice>,
    /// Per slice, the devices (their places in the slice) each class selects (none: not
    /// listed).
    selected: HashMap<String, BTreeMap<String, Vec<usize>>>,
    /// The counter sets of partitionable devices, by driver, pool and set name.
    counter_sets: HashMap<SetKey, BTreeMap<String, i64>>,
    /// Node name to the slices published for it.
    slices_on: HashMap<String, BTreeSet<String>>,
    templates: HashMap<String, Asks>,
    claims: HashMap<String, Asks>,
    /// By pod UID, the pods that name claims.
    pods: HashMap<String, Claiming>,
    /// The pods (name, UID) that name each template or claim.
    users: HashMap<TemplateOrClaim, BTreeSet<(String, String)>>,
    /// Per node, the devices last added to its allocatable.
    counted: HashMap<String, Resources>,
    /// Per class, why it counts no device where it should (the last error seen).
    problems: BTreeMap<String, String>,
}

impl Index {
    /// The classes that cannot be evaluated, and why.
    pub fn problems(&self) -> &BTreeMap<String, String> {
        &self.problems
    }

    /// Adds the devices counted on `node` to its allocatable, for a node the watch sends.
    pub fn count_on(&mut self, node: &mut Node) {
        let devices = self.devices_on(&node.name, &node.allocatable);
        node.allocatable.add(&devices);
        self.counted.remove(&node.name);
        if !devices.is_empty() {
            self.counted.insert(node.name.clone(), devices);
        }
    }

    /// Adds to `pod`'s requests the devices its claims ask for, and indexes it by them; returns
    /// the UIDs of other pods whose counts this changes (a claim it now counts in their
    /// stead), to [`Index::refresh_pods`] once `pod` is applied.
    pub fn claiming(&mut self, pod: &mut Pod, refs: Vec<ClaimRef>) -> Vec<String> {
        if refs.is_empty() {
            return Vec::new();
        }
        if let Some(known) = self.pods.get(&pod.uid) {
            // A pod's claims never change: what it asks was kept current as they changed.
            pod.requests.add(&known.added);
            return Vec::new();
        }
        let mut others = Vec::new();
        for named in named(&pod.namespace, &refs) {
            let users = self.users.entry(named.clone()).or_default();
            let first = users.first().map(|(_, uid)| uid.clone());
            users.insert((pod.name.clone(), pod.uid.clone()));
            if matches!(named, TemplateOrClaim::Claim(_))
                && let Some(first) = first
                && users.first().is_some_and(|(_, uid)| *uid == pod.uid)
            {
                others.push(first);
            }
        }
        let mut claiming = Claiming {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            refs,
            added: Resources::new(),
        };
        claiming.added = self.asked(&claiming, &pod.uid);
        pod.requests.add(&claiming.added);
        self.pods.insert(pod.uid.clone(), claiming);
        others
    }

    /// Forgets a pod that is gone; returns the UIDs of pods that now count a claim it counted.
    pub fn pod_gone(&mut self, uid: &str) -> Vec<String> {
        let Some(gone) = self.pods.remove(uid) else {
            return Vec::new();
        };
        let mut heirs = Vec::new();
        for named in named(&gone.namespace, &gone.refs) {
            let Some(users) = self.users.get_mut(&named) else {
                continue;
            };
            let was_first = users.first().is_some_and(|(_, u)| u == uid);
            users.remove(&(gone.name.clone(), uid.to_owned()));
            if let Some((_, heir)) = users.first().filter(|_| was_first) {
                heirs.push(heir.clone());
            }
            if users.is_empty() {
                self.users.remove(&named);
            }
        }
        heirs
    }

    /// Forgets the pods the model no longer holds (after a list deleted some).
    pub fn retain_pods(&mut self, state: &State) -> Vec<String> {
        let gone: Vec<String> = self
            .pods
            .keys()
            .filter(|uid| !state.pods().contains_key(*uid))
            .cloned()
            .collect();
        gone.iter().flat_map(|uid| self.pod_gone(uid)).collect()
    }

    /// Takes a DRA object into the index, evaluating the selectors it concerns: the mirror
    /// calls it before it takes the model's write lock, so no filter or bind waits for CEL.
    /// What it changed is carried into the model by [`Index::carry`].
    pub fn take(&mut self, object: Object) -> Effect {
        match object {
            Object::Class(name, class) => {
                self.clear_problem(&name);
                if let Err(why) = &class.selectors {
                    self.report(name.clone(), why.clone());
                }
                let mut problems = Vec::new();
                for (slice, selected) in &mut self.selected {
                    let devices = self.slices.get(slice).map(|s| &s.devices[..]);
                    match select(&class, devices.unwrap_or_default()) {
                        Ok(picked) if picked.is_empty() => selected.remove(&name),
                        Ok(picked) => selected.insert(name.clone(), picked),
                        Err(why) => {
                            problems.push(why);
                            selected.remove(&name)
                        }
                    };
                }
                for why in problems {
                    self.report(name.clone(), why);
                }
                self.classes.insert(name, class);
                Effect::AllNodes
            }
            Object::ClassGone(name) => {
                self.clear_problem(&name);
                for selected in self.selected.values_mut() {
                    selected.remove(&name);
                }
                match self.classes.remove(&name) {
                    Some(_) => Effect::AllNodes,
                    None => Effect::Nothing,
                }
            }
            Object::Slice(name, slice) => {
                let counters_changed =
                    self.withdraw_counters(&name) | !slice.counter_sets.is_empty();
                for (set, counters) in &slice.counter_sets {
                    let (driver, pool) = slice.pool.clone();
                    self.counter_sets
                        .insert((driver, pool, set.clone()), counters.clone());
                }
                let mut nodes: Vec<String> = self.unpublish(&name).into_iter().collect();
                if let Some(node) = &slice.node {
                    self.slices_on
                        .entry(node.clone())
                        .or_default()
                        .insert(name.clone());
                    nodes.push(node.clone());
                }
                let mut selected = BTreeMap::new();
                let mut problems = Vec::new();
                for (class_name, class) in &self.classes {
                    match select(class, &slice.devices) {
                        Ok(picked) if picked.is_empty() => {}
                        Ok(picked) => {
                            selected.insert(class_name.clone(), picked);
                        }
                        Err(why) => problems.push((class_name.clone(), why)),
                    }
                }
                for (class, why) in problems {
                    self.report(class, why);
                }
                self.selected.insert(name.clone(), selected);
                self.slices.insert(name, slice);
                match counters_changed {
                    true => Effect::AllNodes,
                    false => Effect::Nodes(nodes),
                }
            }
            Object::SliceGone(name) => {
                let counters_changed = self.withdraw_counters(&name);
                let node = self.unpublish(&name);
                self.slices.remove(&name);
                self.selected.remove(&name);
                match counters_changed {
                    true => Effect::AllNodes,
                    false => Effect::Nodes(node.into_iter().collect()),
                }
            }
            Object::Template(key, asks) => {
                if self.templates.get(&key) == Some(&asks) {
                    return Effect::Nothing;
                }
                self.templates.insert(key.clone(), asks);
                Effect::Pods(self.users_of(&TemplateOrClaim::Template(key)))
            }
            Object::Claim(key, asks) => {
                if self.claims.get(&key) == Some(&asks) {
                    return Effect::Nothing;
                }
                self.claims.insert(key.clone(), asks);
                Effect::Pods(self.users_of(&TemplateOrClaim::Claim(key)))
            }
            // A pod already counted keeps its count: its claim outlives the template, and a
            // claim in use is not deleted before its pods.
            Object::TemplateGone(key) => {
                self.templates.remove(&key);
                Effect::Nothing
            }
            Object::ClaimGone(key) => {
                self.claims.remove(&key);
                Effect::Nothing
            }
        }
    }

    /// Carries what [`Index::take`] changed into the model: re-applies the nodes and pods whose
    /// counts changed (sums, no CEL); whether the model changed.
    pub fn carry(&mut self, effect: Effect, state: &mut State) -> bool {
        match effect {
            Effect::Nothing => false,
            Effect::Nodes(nodes) => nodes
                .iter()
                .fold(false, |any, n| self.refresh_node(n, state) | any),
            Effect::AllNodes => self.refresh_all_nodes(state),
            Effect::Pods(uids) => self.refresh_pods(&uids, state),
        }
    }

    /// Recounts the pods `uids` and re-applies those whose requests change.
    pub fn refresh_pods(&mut self, uids: &[String], state: &mut State) -> bool {
        let mut changed = false;
        for uid in uids {
            let Some(claiming) = self.pods.get(uid) else {
                continue;
            };
            let now = self.asked(claiming, uid);
            if now == claiming.added {
                continue;
            }
            if let Some(pod) = state.pods().get(uid) {
                let mut pod = Pod::clone(pod);
                pod.requests.sub(&claiming.added);
                pod.requests.add(&now);
                changed |= state.apply_pod(pod);
            }
            if let Some(claiming) = self.pods.get_mut(uid) {
                claiming.added = now;
            }
        }
        changed
    }

    /// The keys of `kind` the index holds, as its list names them.
    pub fn keys(&self, kind: Watched) -> Vec<String> {
        match kind {
            Watched::DeviceClasses => self.classes.keys().cloned().collect(),
            Watched::ResourceSlices => self.slices.keys().cloned().collect(),
            Watched::ResourceClaimTemplates => self.templates.keys().cloned().collect(),
            Watched::ResourceClaims => self.claims.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// The object of `kind` named `key` is gone.
    pub fn gone(kind: Watched, key: String) -> Option<Object> {
        match kind {
            Watched::DeviceClasses => Some(Object::ClassGone(key)),
            Watched::ResourceSlices => Some(Object::SliceGone(key)),
            Watched::ResourceClaimTemplates => Some(Object::TemplateGone(key)),
            Watched::ResourceClaims => Some(Object::ClaimGone(key)),
            _ => None,
        }
    }

    /// How many objects of `kind` the index holds.
    pub fn count(&self, kind: Watched) -> usize {
        match kind {
            Watched::DeviceClasses => self.classes.len(),
            Watched::ResourceSlices => self.slices.len(),
            Watched::ResourceClaimTemplates => self.templates.len(),
            Watched::ResourceClaims => self.claims.len(),
            _ => 0,
        }
    }

    fn users_of(&self, named: &TemplateOrClaim) -> Vec<String> {
        self.users
            .get(named)
            .map(|users| users.iter().map(|(_, uid)| uid.clone()).collect())
            .unwrap_or_default()
    }

    /// Forgets the counter sets the slice `name` published; whether it published any.
    fn withdraw_counters(&mut self, name: &str) -> bool {
        let Some(slice) = self.slices.get(name) else {
            return false;
        };
        for (set, _) in &slice.counter_sets {
            let (driver, pool) = slice.pool.clone();
            self.counter_sets.remove(&(driver, pool, set.clone()));
        }
        !slice.counter_sets.is_empty()
    }

    /// Takes the slice `name` off the node it was published for; that node.
    fn unpublish(&mut self, name: &str) -> Option<String> {
        let node = self.slices.get(name)?.node.clone()?;
        if let Some(on) = self.slices_on.get_mut(&node) {
            on.remove(name);
            if on.is_empty() {
                self.slices_on.remove(&node);
            }
        }
        Some(node)
    }

    /// What the pod's claims ask for now.
    fn asked(&self, claiming: &Claiming, uid: &str) -> Resources {
        let mut out = Resources::new();
        let mut unresolved = 0;
        for named in named(&claiming.namespace, &claiming.refs) {
            let asks = match &named {
                TemplateOrClaim::Template(key) => self.templates.get(key),
                TemplateOrClaim::Claim(key) => {
                    let counts_here = self
                        .users
                        .get(&named)
                        .and_then(BTreeSet::first)
                        .is_none_or(|(_, first)| first == uid);
                    if !counts_here {
                        continue;
                    }
                    self.claims.get(key)
                }
            };
            match asks {
                Some(asks) => {
                    for (resource, count) in &asks.0 {
                        let sum = out.get(resource).saturating_add(*count);
                        out.set_requested(resource, sum);
                    }
                }
                None => unresolved += 1,
            }
        }
        if unresolved > 0 {
            out.set_requested(UNRESOLVED, unresolved);
        }
        out
    }

    fn refresh_all_nodes(&mut self, state: &mut State) -> bool {
        let nodes: Vec<String> = self.slices_on.keys().cloned().collect();
        let mut changed = nodes
            .iter()
            .fold(false, |any, n| self.refresh_node(n, state) | any);
        // Nodes whose devices a removed class no longer counts.
        let stale: Vec<String> = self
            .counted
            .keys()
            .filter(|n| !self.slices_on.contains_key(*n))
            .cloned()
            .collect();
        for node in stale {
            changed |= self.refresh_node(&node, state);
        }
        changed
    }

    /// Recounts the devices on `node` and re-applies it if they changed.
    fn refresh_node(&mut self, node: &str, state: &mut State) -> bool {
        let before = self.counted.remove(node).unwrap_or_default();
        let held = state.nodes().get(node).map(|n| Node::clone(n));
        // What the node has of itself, without the devices counted on it.
        let base = held
            .as_ref()
            .map(|n| n.allocatable.minus(&before))
            .unwrap_or_default();
        let now = self.devices_on(node, &base);
        if !now.is_empty() {
            self.counted.insert(node.to_owned(), now.clone());
        }
        let Some(mut held) = held.filter(|_| now != before) else {
            return false;
        };
        held.allocatable = base.plus(&now);
        state.apply_node(held)
    }

    /// The devices per class of the slices published for `node`, under each class's implicit
    /// name, and under its `extendedResourceName` too where the node's own allocatable
    /// (`base`) does not have that name (a device plugin's: the scheduler then uses that).
    fn devices_on(&self, node: &str, base: &Resources) -> Resources {
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        // Per class and counter set, what each selected device that draws on it draws.
        let mut drawing: BTreeMap<(&str, SetKey), Vec<&Draws>> = BTreeMap::new();
        let slices = self
            .slices_on
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|name| Some((self.slices.get(name)?, self.selected.get(name)?)));
        for (slice, selected) in slices {
            for (class, picked) in selected {
                for &i in picked {
                    match slice.consumes.get(i).and_then(Option::as_ref) {
                        Some((set, amounts)) => {
                            let (driver, pool) = slice.pool.clone();
                            let key = (driver, pool, set.clone());
                            drawing.entry((class, key)).or_default().push(amounts);
                        }
                        None => *counts.entry(class).or_default() += 1,
                    }
                }
            }
        }
        for ((class, key), devices) in drawing {
            let at_once = self
                .counter_sets
                .get(&key)
                .map_or(devices.len(), |available| at_once(available, &devices));
            *counts.entry(class).or_default() += at_once as i64;
        }
        let mut out = Resources::new();
        for (class, count) in counts {
            out.set(&class_resource(class), count);
            let extended = self.classes.get(class).and_then(|c| c.extended.as_deref());
            if let Some(name) = extended.filter(|name| base.get(name) == 0) {
                out.set(name, out.get(name) + count);
            }
        }
        out
    }

    fn clear_problem(&mut self, class: &str) {
        if self.problems.remove(class).is_some() {
            ::metrics::gauge!(crate::metrics::DRA_CLASS_ERRORS, "class" => class.to_owned())
                .set(0.0);
        }
    }

    fn report(&mut self, class: String, why: String) {
        if self.problems.get(&class) != Some(&why) {
            tracing::warn!(
                class,
                error = why,
                "DeviceClass selects no device: fix its selectors"
            );
            ::metrics::gauge!(crate::metrics::DRA_CLASS_ERRORS, "class" => class.clone()).set(1.0);
            self.problems.insert(class, why);
        }
    }
}

/// What a group's wait message `why` should add about the DeviceClasses it names that count
/// no device (`problems`, [`Index::problems`]): `None` when it names none of them.
pub fn note(why: &str, problems: &BTreeMap<String, String>) -> Option<String> {
    let notes: Vec<String> = problems
        .iter()
        .filter(|(class, _)| why.contains(&class_resource(class)))
        .map(|(class, problem)| {
            format!("DeviceClass {class} counts no device as Gangplank reads it: {problem}")
        })
        .collect();
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// The templates and claims `refs` name, keyed in `namespace`.
fn named(namespace: &str, refs: &[ClaimRef]) -> Vec<TemplateOrClaim> {
    refs.iter()
        .map(|r| match r {
            ClaimRef::Template(name) => TemplateOrClaim::Template(format!("{namespace}/{name}")),
            ClaimRef::Claim(name) => TemplateOrClaim::Claim(format!("{namespace}/{name}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::resource::v1 as resource;

    use super::*;
    use crate::cache::{Cache, Change, Mirror};
    use serde_json::json;

    const GPU: &str = "deviceclass.resource.kubernetes.io/gpu";

    fn device_class(name: &str, expression: &str) -> Change {
        let class: resource::DeviceClass = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}
        }))
        .unwrap();
        Change::Dra(Object::Class(name.into(), super::class(&class)))
    }

    fn resource_slice(name: &str, node: Option<&str>, models: &[&str]) -> Change {
        let devices: Vec<_> = models
            .iter()
            .enumerate()
            .map(|(i, model)| {
                json!({"name": format!("gpu-{i}"), "attributes": {"model": {"string": model}}})
            })
            .collect();
        let mut spec = json!({
            "driver": "gpu.example.com",
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices
        });
        match node {
            Some(node) => spec["nodeName"] = json!(node),
            None => spec["allNodes"] = json!(true),
        }
        let slice: resource::ResourceSlice =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        Change::Dra(Object::Slice(name.into(), super::slice(&slice)))
    }

    fn claim_spec(requests: serde_json::Value) -> resource::ResourceClaimSpec {
        serde_json::from_value(json!({"devices": {"requests": requests}})).unwrap()
    }

    fn template(key: &str, class: &str, count: i64) -> Change {
        let spec = claim_spec(
            json!([{"name": "r", "exactly": {"deviceClassName": class, "count": count}}]),
        );
        Change::Dra(Object::Template(key.into(), asks(Some(&spec))))
    }

    fn claim(key: &str, class: &str, count: i64) -> Change {
        let spec = claim_spec(
            json!([{"name": "r", "exactly": {"deviceClassName": class, "count": count}}]),
        );
        Change::Dra(Object::Claim(key.into(), asks(Some(&spec))))
    }

    fn node(name: &str) -> Change {
        let mut node = Node {
            name: name.into(),
            ..Default::default()
        };
        node.allocatable.set("cpu", 4000);
        Change::Node(node)
    }

    fn pod(uid: &str, name: &str, refs: Vec<ClaimRef>) -> Change {
        let mut pod = Pod {
            uid: uid.into(),
            namespace: "ns".into(),
            name: name.into(),
            ..Default::default()
        };
        pod.requests.set("cpu", 1000);
        Change::Pod(pod, refs)
    }

    fn devices(cache: &Cache, node: &str, resource: &str) -> i64 {
        cache.read(|s| {
            s.nodes()
                .get(node)
                .map_or(0, |n| n.allocatable.get(resource))
        })
    }

    fn asked(cache: &Cache, uid: &str, resource: &str) -> i64 {
        cache.read(|s| s.pods().get(uid).map_or(-1, |p| p.requests.get(resource)))
    }

    fn mirror_with(changes: Vec<Change>) -> (Cache, Mirror) {
        let (cache, mut mirror) = Cache::new();
        mirror.apply_all(changes);
        (cache, mirror)
    }

    #[test]
    fn a_node_counts_the_devices_of_its_slices_that_each_class_selects() {
        let (cache, mut mirror) = mirror_with(vec![
            node("n1"),
            node("n2"),
            resource_slice("s1", Some("n1"), &["a100", "a100", "h100"]),
            device_class("gpu", "device.driver == \"gpu.example.com\""),
            device_class(
                "h100",
                "device.attributes[\"gpu.example.com\"].model == \"h100\"",
            ),
        ]);
        assert_eq!(devices(&cache, "n1", GPU), 3);
        assert_eq!(devices(&cache, "n1", &class_resource("h100")), 1);
        assert_eq!(devices(&cache, "n1", "cpu"), 4000, "the rest is kept");
        assert_eq!(devices(&cache, "n2", GPU), 0);

        mirror.apply(node("n1"));
        assert_eq!(
            devices(&cache, "n1", GPU),
            3,
            "a node update keeps its devices"
        );
        mirror.apply(resource_slice("s1", Some("n2"), &["a100"]));
        assert_eq!(devices(&cache, "n1", GPU), 0, "the slice moved away");
        assert_eq!(devices(&cache, "n2", GPU), 1);
        mirror.apply(Change::Dra(Object::ClassGone("gpu".into())));
        assert_eq!(devices(&cache, "n2", GPU), 0, "no class, no count");
    }

    #[test]
    fn a_class_whose_selector_cannot_be_evaluated_counts_no_device_and_says_why() {
        let (cache, mut mirror) = mirror_with(vec![
            node("n1"),
            resource_slice("s1", Some("n1"), &["a100"]),
            device_class("gpu", "device.attributes[\"gpu.example.com\"].memory > 1"),
            device_class("broken", "device.driver =="),
        ]);
        assert_eq!(devices(&cache, "n1", GPU), 0);
        let problems = mirror.dra().problems();
        assert!(problems["gpu"].contains("failed"), "{problems:?}");
        assert!(
            problems["broken"].contains("does not compile"),
            "{problems:?}"
        );
        assert_eq!(
            *cache.dra_problems(),
            *problems,
            "published for the controller"
        );

        let why = format!("does not fit now: {GPU} 4 needed, 0 free");
        let told = note(&why, &cache.dra_problems()).unwrap();
        assert!(
            told.starts_with("DeviceClass gpu counts no device as Gangplank reads it: "),
            "{told}"
        );
        assert!(!told.contains("broken"), "{told}");
        assert_eq!(note("cpu 4 needed, 0 free", &cache.dra_problems()), None);

        mirror.apply(device_class("gpu", "device.driver == \"gpu.example.com\""));
        assert_eq!(devices(&cache, "n1", GPU), 1, "fixed");
        assert!(!cache.dra_problems().contains_key("gpu"));
    }

    #[test]
    fn a_relist_drops_the_slices_it_did_not_name_but_not_one_published_after_it() {
        let (cache, mut mirror) = mirror_with(vec![
            node("n1"),
            node("n2"),
            device_class("gpu", "device.driver == \"gpu.example.com\""),
            resource_slice("old", Some("n1"), &["a100", "a100"]),
        ]);
        assert_eq!(devices(&cache, "n1", GPU), 2);
        mirror.apply_all(vec![
            Change::Listed(Watched::ResourceSlices, Some(["kept".to_owned()].into())),
            resource_slice("new", Some("n2"), &["a100"]),
        ]);
        assert_eq!(devices(&cache, "n1", GPU), 0, "the list did not name it");
        assert_eq!(devices(&cache, "n2", GPU), 1, "published after the list");
        assert!(cache.is_synced(Watched::ResourceSlices));
    }

    #[test]
    fn a_class_with_an_extended_resource_name_counts_under_it_where_no_device_plugin_does() {
        let class: resource::DeviceClass = serde_json::from_value(json!({
            "metadata": {"name": "gpu"},
            "spec": {
                "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
                "extendedResourceName": "example.com/gpu"
            }
        }))
        .unwrap();
        let mut plugin = Node {
            name: "n2".into(),
            ..Default::default()
        };
        plugin.allocatable.set("example.com/gpu", 4);
        let (cache, mut mirror) = mirror_with(vec![
            node("n1"),
            Change::Node(plugin.clone()),
            Change::Dra(Object::Class("gpu".into(), super::class(&class))),
            resource_slice("s1", Some("n1"), &["a100", "a100"]),
            resource_slice("s2", Some("n2"), &["a100"]),
        ]);
        assert_eq!(devices(&cache, "n1", GPU), 2);
        assert_eq!(devices(&cache, "n1", "example.com/gpu"), 2);
        assert_eq!(devices(&cache, "n2", GPU), 1);
        assert_eq!(
            devices(&cache, "n2", "example.com/gpu"),
            4,
            "the device plugin's count, which the scheduler uses there"
        );
        mirror.apply(Change::Node(plugin));
        assert_eq!(
            devices(&cache, "n2", "example.com/gpu"),
            4,
            "after a node update too"
        );
        assert_eq!(devices(&cache, "n2", GPU), 1);
    }

    #[test]
    fn partitions_of_one_gpu_count_no_more_than_its_counters_let_be_allocated_at_once() {
        let partition = |name: &str, profile: &str, memory: &str, slices: i64| {
            json!({"name": name, "attributes": {"profile": {"string": profile}},
                "consumesCounters": [{"counterSet": "gpu-0",
                    "counters": {"memory": {"value": memory}, "slices": {"value": slices.to_string()}}}]})
        };
        let mut partitions = vec![partition("whole", "whole", "80Gi", 7)];
        partitions.extend((0..7).map(|i| partition(&format!("1g-{i}"), "1g", "10Gi", 1)));
        partitions.extend((0..2).map(|i| partition(&format!("3g-{i}"), "3g", "40Gi", 3)));
        let slice = |name: &str, spec: serde_json::Value| -> Change {
            let mut spec = spec;
            spec["driver"] = json!("gpu.example.com");
            spec["pool"] = json!({"name": "n1", "generation": 1, "resourceSliceCount": 2});
            let slice: resource::ResourceSlice =
                serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
            Change::Dra(Object::Slice(name.into(), super::slice(&slice)))
        };
        let profile =
            |p: &str| format!("device.attributes[\"gpu.example.com\"].profile == \"{p}\"");
        let (cache, mut mirror) = mirror_with(vec![
            node("n1"),
            device_class("gpu", "device.driver == \"gpu.example.com\""),
            device_class("whole", &profile("whole")),
            device_class("3g", &profile("3g")),
            slice("devices", json!({"nodeName": "n1", "devices": partitions})),
        ]);
        assert_eq!(
            devices(&cache, "n1", GPU),
            10,
            "the counters are not known yet: every device"
        );

        mirror.apply(slice(
            "counters",
            json!({"sharedCounters": [{"name": "gpu-0",
                "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "7"}}}]}),
        ));
        assert_eq!(devices(&cache, "n1", GPU), 7, "seven 1g partitions at most");
        assert_eq!(devices(&cache, "n1", &class_resource("whole")), 1);
        assert_eq!(devices(&cache, "n1", &class_resource("3g")), 2);

        mirror.apply(Change::Dra(Object::SliceGone("counters".into())));
        assert_eq!(devices(&cache, "n1", GPU), 10);
    }

    #[test]
    fn a_counter_bounds_only_devices_that_all_draw_from_it() {
        let available = BTreeMap::from([("memory".to_owned(), 80), ("slices".to_owned(), 7)]);
        let memory = vec![("memory".to_owned(), 40)];
        let slices = vec![("slices".to_owned(), 1)];
        let both = vec![("memory".to_owned(), 40), ("slices".to_owned(), 1)];
        assert_eq!(at_once(&available, &[&memory, &memory, &memory]), 2);
        assert_eq!(
            at_once(&available, &[&memory, &slices, &slices, &slices]),
            4,
            "neither counter is drawn by all four"
        );
        assert_eq!(at_once(&available, &[&both, &both, &both]), 2);
    }

    #[test]
    fn slices_for_many_nodes_are_not_counted_on_any() {
        let (cache, _mirror) = mirror_with(vec![
            node("n1"),
            device_class("gpu", "device.driver == \"gpu.example.com\""),
            resource_slice("shared", None, &["a100", "a100"]),
        ]);
        assert_eq!(devices(&cache, "n1", GPU), 0);
    }

    #[test]
    fn a_pod_asks_for_an_unresolved_claim_until_its_template_is_known() {
        let (cache, mut mirror) =
            mirror_with(vec![pod("u1", "p1", vec![ClaimRef::Template("t".into())])]);
        assert_eq!(asked(&cache, "u1", UNRESOLVED), 1);
        assert_eq!(asked(&cache, "u1", GPU), 0);
        mirror.apply(template("ns/t", "gpu", 4));
        assert_eq!(asked(&cache, "u1", UNRESOLVED), 0);
        assert_eq!(asked(&cache, "u1", GPU), 4);
        assert_eq!(asked(&cache, "u1", "cpu"), 1000);
        mirror.apply(pod("u1", "p1", vec![ClaimRef::Template("t".into())]));
        assert_eq!(
            asked(&cache, "u1", GPU),
            4,
            "a pod update keeps its devices"
        );
        mirror.apply(Change::Dra(Object::TemplateGone("ns/t".into())));
        mirror.apply(pod("u1", "p1", vec![ClaimRef::Template("t".into())]));
        assert_eq!(
            asked(&cache, "u1", GPU),
            4,
            "nor does its template's deletion"
        );
    }

    #[test]
    fn a_claim_shared_by_pods_counts_once_in_the_first_by_name_then_in_the_next() {
        let shared = || vec![ClaimRef::Claim("c".into())];
        let (cache, mut mirror) = mirror_with(vec![
            claim("ns/c", "gpu", 2),
            pod("u-b", "b", shared()),
            pod("u-a", "a", shared()),
            pod("u-c", "c", shared()),
        ]);
        assert_eq!(asked(&cache, "u-a", GPU), 2);
        assert_eq!(asked(&cache, "u-b", GPU), 0, "a took it over from b");
        assert_eq!(asked(&cache, "u-c", GPU), 0);
        mirror.delete_pod("u-a");
        assert_eq!(asked(&cache, "u-b", GPU), 2);
        assert_eq!(asked(&cache, "u-c", GPU), 0);
    }

    #[test]
    fn counts_are_bounded_where_they_enter_and_admin_access_asks_for_no_device() {
        let spec = claim_spec(json!([
            {"name": "huge", "exactly": {"deviceClassName": "gpu", "count": i64::MAX}},
            {"name": "also", "exactly": {"deviceClassName": "gpu", "count": i64::MAX}},
            {"name": "all", "exactly": {"deviceClassName": "nic", "allocationMode": "All"}},
            {"name": "admin", "exactly": {"deviceClassName": "mon", "adminAccess": true}},
            {"name": "either", "firstAvailable": [
                {"name": "big", "deviceClassName": "h100", "count": 2},
                {"name": "small", "deviceClassName": "a100", "count": 4}
            ]}
        ]));
        assert_eq!(
            asks(Some(&spec)).0,
            vec![
                (GPU.to_owned(), 2 * MAX_DEVICES_PER_CLAIM),
                (class_resource("nic"), 1),
                (class_resource("h100"), 2),
            ]
        );
    }
}
