//! What pods of a template request, summed in the cache's scale (millicores of CPU, whole
//! units of the rest) and written back as a resource list: the `minResources` of the PodGroups
//! the batch Job controller and the controller (for a Kueue Workload) make from pod templates.

use std::collections::BTreeMap;

use gangplank_core::model::quantity::{self, Scale};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::ResourceList;

/// Adds what `count` pods of `template` request to `sums` ([`template_requests`]).
pub fn add_requests(sums: &mut BTreeMap<String, i64>, template: &PodTemplateSpec, count: i32) {
    for (resource, amount) in template_requests(template) {
        let sum = sums.entry(resource).or_default();
        *sum = sum.saturating_add(amount.saturating_mul(i64::from(count.max(0))));
    }
}

/// Amounts in the cache's scale ([`template_requests`]) as a resource list.
pub fn resource_list(sums: BTreeMap<String, i64>) -> ResourceList {
    sums.into_iter()
        .map(|(r, amount)| {
            let q = quantity_of(&r, amount);
            (r, q)
        })
        .collect()
}

/// What one pod of `template` requests, per resource, in the cache's scale (millicores of CPU,
/// whole units of the rest): the sum of its containers,
/// or its largest init container where that is more, as the scheduler counts).
fn template_requests(template: &PodTemplateSpec) -> BTreeMap<String, i64> {
    let Some(spec) = template.spec.as_ref() else {
        return BTreeMap::new();
    };
    let mut sum: BTreeMap<String, i64> = BTreeMap::new();
    for container in &spec.containers {
        for (resource, amount) in requests_of(container) {
            *sum.entry(resource).or_default() += amount;
        }
    }
    for container in spec.init_containers.iter().flatten() {
        for (resource, amount) in requests_of(container) {
            let entry = sum.entry(resource).or_default();
            *entry = (*entry).max(amount);
        }
    }
    sum
}

fn requests_of(container: &k8s_openapi::api::core::v1::Container) -> Vec<(String, i64)> {
    let Some(resources) = container.resources.as_ref() else {
        return Vec::new();
    };
    let requests = resources.requests.as_ref().or(resources.limits.as_ref());
    requests
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| {
            quantity::parse(&q.0, Scale::for_resource(name))
                .ok()
                .map(|m| (name.clone(), m))
        })
        .collect()
}

/// `amount` of `resource` in the cache's scale, as a quantity.
fn quantity_of(resource: &str, amount: i64) -> Quantity {
    Quantity(match Scale::for_resource(resource) {
        Scale::Milli if amount % 1000 != 0 => format!("{amount}m"),
        Scale::Milli => (amount / 1000).to_string(),
        Scale::Units => amount.to_string(),
    })
}
