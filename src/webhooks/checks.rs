//! The field checks several webhooks share: a preferred topology level that goes with the
//! required one, and the field that named an object's queue (for a denial that says which to
//! change). A label key's rule is the API's (`crate::api::labels::label_key_problem`).

use super::lookup;
use super::pods;

/// The field of an object's metadata that named its queue ([`crate::api::labels::queue_of`]).
pub fn queue_field(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let (labels, annotations) = (meta.labels.as_ref(), meta.annotations.as_ref());
    let queue = crate::api::labels::queue_of(labels, annotations).unwrap_or_default();
    pods::queue_source(queue, labels, annotations).field()
}

/// Why the `preferred` topology level cannot go with the `required` one: a Topology lists it
/// wider. `None` when it can, or when the Topologies are not listed yet (the admission pass
/// does not use such a level anyway, `gangplank_core::model::Levels::of`).
pub fn topology_levels_problem(
    lookup: &dyn lookup::TopologyLookup,
    required: Option<&str>,
    preferred: Option<&str>,
) -> Option<String> {
    let (required, preferred) = (required?, preferred?);
    let topologies = lookup.topologies().ok()?;
    let topology = gangplank_core::model::topology::wider_in(preferred, required, &topologies)?;
    Some(format!(
        "must be at or below the required level {required}, but Topology {} lists {preferred} above it (levels, widest first: {}); choose a narrower preferred level or a wider required one",
        topology.name,
        topology.levels.join(", ")
    ))
}
