//! What a node has: DeviceClasses with their CEL selectors compiled, ResourceSlices with their
//! devices as CEL sees them and what they draw from shared counters, which devices a class
//! selects ([`select`]) and how many partitions can be allocated at once ([`at_once`]).
//! Conversions and pure functions; the counts are kept by [`super::Index`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use gangplank_core::model::quantity::{self, Scale};
use k8s_openapi::api::resource::v1 as resource;

/// A DeviceClass: its selectors compiled, or why they cannot be.
#[derive(Clone)]
pub struct Class {
    pub(super) selectors: Result<Arc<[cel::Program]>, String>,
    /// `spec.extendedResourceName`: the name pods may also ask for its devices by.
    pub(super) extended: Option<String>,
}

impl fmt::Debug for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.selectors {
            Ok(s) => write!(f, "Class({} selectors)", s.len()),
            Err(why) => write!(f, "Class(error: {why})"),
        }
    }
}

/// Converts a DeviceClass, compiling its CEL selectors.
pub fn class(class: &resource::DeviceClass) -> Class {
    let selectors = class
        .spec
        .iter()
        .flat_map(|spec| spec.selectors.iter().flatten())
        .map(|s| match &s.cel {
            Some(c) => cel::Program::compile(&c.expression)
                .map_err(|e| format!("selector {:?} does not compile: {e}", c.expression)),
            None => Err("a selector without `cel` (a kind Gangplank does not know)".to_owned()),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Arc::from);
    let extended = class
        .spec
        .as_ref()
        .and_then(|s| s.extended_resource_name.clone())
        .filter(|n| !n.is_empty());
    Class {
        selectors,
        extended,
    }
}

/// A ResourceSlice: the node it is published for (`None`: for many nodes, not counted), its
/// devices as CEL sees them and what each draws from shared counters, and the counter sets it
/// publishes (a slice has devices or counter sets, not both).
#[derive(Debug, Clone)]
pub struct Slice {
    pub(super) node: Option<String>,
    /// The pool its counter sets are named in: driver and pool name.
    pub(super) pool: (String, String),
    pub(super) devices: Arc<[cel::Value]>,
    /// Per device, the first counter set it draws from and how much of each counter.
    pub(super) consumes: Arc<[Option<Consumption>]>,
    /// Counter set name to the amount of each counter.
    pub(super) counter_sets: Vec<(String, BTreeMap<String, i64>)>,
}

/// What a device draws from a counter set: the set's name and the amount of each counter
/// (milli-units).
pub(super) type Consumption = (String, Vec<(String, i64)>);

/// A counter set's key: driver, pool and set name.
pub(super) type SetKey = (String, String, String);

/// How much of each counter of a set a device draws (milli-units).
pub(super) type Draws = [(String, i64)];

/// Converts a ResourceSlice. The number of devices is bounded by the API (128 per slice), and
/// so are counter sets (8) and counters (32 a set).
pub fn slice(slice: &resource::ResourceSlice) -> Slice {
    let spec = &slice.spec;
    let node = spec
        .node_name
        .clone()
        .filter(|_| spec.per_device_node_selection != Some(true));
    let devices = spec.devices.iter().flatten();
    let consumes = devices
        .clone()
        .map(|d| {
            let first = d.consumes_counters.as_ref()?.first()?;
            Some((first.counter_set.clone(), amounts(&first.counters)))
        })
        .collect();
    let counter_sets = spec
        .shared_counters
        .iter()
        .flatten()
        .map(|set| {
            (
                set.name.clone(),
                amounts(&set.counters).into_iter().collect(),
            )
        })
        .collect();
    Slice {
        node,
        pool: (spec.driver.clone(), spec.pool.name.clone()),
        devices: devices.map(|d| device(&spec.driver, d)).collect(),
        consumes,
        counter_sets,
    }
}

/// Counters in milli-units; one whose quantity does not parse (or does not fit) is left out,
/// so it bounds nothing.
fn amounts(counters: &BTreeMap<String, resource::Counter>) -> Vec<(String, i64)> {
    counters
        .iter()
        .filter_map(|(name, c)| {
            let amount = quantity::parse(&c.value.0, Scale::Milli).ok()?;
            Some((name.clone(), amount))
        })
        .collect()
}

/// The CEL `device` variable of one device: `driver`, `attributes` by domain (a name without a
/// domain is in the driver's), `allowMultipleAllocations`.
fn device(driver: &str, d: &resource::Device) -> cel::Value {
    let mut domains: HashMap<String, HashMap<String, cel::Value>> = HashMap::new();
    for (name, value) in d.attributes.iter().flatten() {
        let (domain, id) = name.split_once('/').unwrap_or((driver, name.as_str()));
        let value = match value {
            resource::DeviceAttribute { bool: Some(b), .. } => cel::Value::Bool(*b),
            resource::DeviceAttribute { int: Some(i), .. } => cel::Value::Int(*i),
            resource::DeviceAttribute {
                string: Some(s), ..
            }
            | resource::DeviceAttribute {
                version: Some(s), ..
            } => cel::Value::from(s.as_str()),
            _ => continue,
        };
        domains
            .entry(domain.to_owned())
            .or_default()
            .insert(id.to_owned(), value);
    }
    let mut fields: HashMap<String, cel::Value> = HashMap::new();
    fields.insert("driver".into(), cel::Value::from(driver));
    fields.insert("attributes".into(), cel::Value::from(domains));
    fields.insert(
        "allowMultipleAllocations".into(),
        cel::Value::Bool(d.allow_multiple_allocations == Some(true)),
    );
    cel::Value::from(fields)
}

/// The places in `devices` of those every selector of `class` selects; an error at the first
/// device a selector cannot be evaluated on.
pub(super) fn select(class: &Class, devices: &[cel::Value]) -> Result<Vec<usize>, String> {
    let selectors = class.selectors.as_ref().map_err(Clone::clone)?;
    let root = cel::Context::default();
    let mut picked = Vec::new();
    'devices: for (i, device) in devices.iter().enumerate() {
        let mut context = root.new_inner_scope();
        context.add_variable_from_value("device", device.clone());
        for selector in selectors.iter() {
            match selector.execute(&context) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => continue 'devices,
                Ok(other) => return Err(format!("a selector gave {other:?}, not a bool")),
                Err(e) => return Err(format!("a selector failed: {e}")),
            }
        }
        picked.push(i);
    }
    Ok(picked)
}

/// At most how many of `devices`, which draw from one counter set holding `available`, can be
/// allocated at once: for each counter every one of them draws from, what the set holds over
/// the least any of them draws (each allocated device draws at least that); the least over
/// such counters, and never more than there are devices. An upper bound: devices that draw
/// more, or from a second set, may fit fewer.
pub(super) fn at_once(available: &BTreeMap<String, i64>, devices: &[&Draws]) -> usize {
    let mut most = devices.len();
    for (counter, held) in available {
        let drawn: Option<Vec<i64>> = devices
            .iter()
            .map(|d| {
                d.iter()
                    .find(|(c, _)| c == counter)
                    .map(|(_, n)| *n)
                    .filter(|n| *n > 0)
            })
            .collect();
        if let Some(least) = drawn.and_then(|d| d.into_iter().min()) {
            let fit = usize::try_from(*held.max(&0) / least).unwrap_or(usize::MAX);
            most = most.min(fit);
        }
    }
    most
}
