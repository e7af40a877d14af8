//! What a pod asks for: the devices per class a claim or template requests ([`asks`], each
//! count bounded where it enters) and the claims a pod names ([`claims_of`]).

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;

use super::{MAX_DEVICES_PER_CLAIM, class_resource};

/// What a claim or a template asks for: devices per class, each request's count bounded by
/// [`MAX_DEVICES_PER_CLAIM`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asks(pub(super) Vec<(String, i64)>);

/// What a claim's spec asks for (see the module docs and docs/dra.md for each mode):
/// `ExactCount` asks for `count` (default 1), `All` for one device (at least one; how many
/// depends on the node), `firstAvailable` for its first choice; a request with `adminAccess`
/// takes no device from anyone and asks for none.
pub fn asks(spec: Option<&resource::ResourceClaimSpec>) -> Asks {
    let mut asks: Vec<(String, i64)> = Vec::new();
    let requests = spec
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_deref())
        .unwrap_or_default();
    for request in requests {
        let wanted = match (&request.exactly, request.first_available.as_deref()) {
            (Some(exact), _) if exact.admin_access == Some(true) => continue,
            (Some(exact), _) => Some((
                &exact.device_class_name,
                exact.allocation_mode.as_deref(),
                exact.count,
            )),
            (None, Some([first, ..])) => Some((
                &first.device_class_name,
                first.allocation_mode.as_deref(),
                first.count,
            )),
            _ => None,
        };
        let Some((class, mode, count)) = wanted else {
            continue;
        };
        let count = match mode {
            Some("All") => 1,
            _ => count.unwrap_or(1).clamp(1, MAX_DEVICES_PER_CLAIM),
        };
        let resource = class_resource(class);
        match asks.iter_mut().find(|(r, _)| *r == resource) {
            Some((_, n)) => *n = n.saturating_add(count),
            None => asks.push((resource, count)),
        }
    }
    Asks(asks)
}

/// How a pod names one of its claims (`spec.resourceClaims[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRef {
    Template(String),
    Claim(String),
}

/// The claims a pod names; empty for most pods.
pub fn claims_of(spec: &core::PodSpec) -> Vec<ClaimRef> {
    spec.resource_claims
        .iter()
        .flatten()
        .filter_map(
            |c| match (&c.resource_claim_name, &c.resource_claim_template_name) {
                (Some(name), _) => Some(ClaimRef::Claim(name.clone())),
                (None, Some(template)) => Some(ClaimRef::Template(template.clone())),
                (None, None) => None,
            },
        )
        .collect()
}
