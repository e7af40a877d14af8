//! The field checks several webhooks share: a name a PodGroup or a Queue can have, a label
//! key, a preferred topology level that goes with the required one, and the field that named
//! an object's queue (for a denial that says which to change).

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

/// Why `key` cannot be a label key (an optional DNS subdomain prefix of at most 253
/// characters and `/`, then a name of at most 63 letters, digits, `-`, `_` or `.`, starting and
/// ending with a letter or digit), or `None` when it can.
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| alphanumeric(c) || matches!(c, '-' | '_' | '.'))
        && name.starts_with(alphanumeric)
        && name.ends_with(alphanumeric);
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.')
                .all(|part| crate::api::labels::name_problem(part).is_none() && !part.contains('.'))
    });
    (!(name_ok && prefix_ok)).then(|| {
        format!(
            "must be a label key: an optional DNS subdomain and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (like topology.kubernetes.io/zone), got {key:?}"
        )
    })
}
