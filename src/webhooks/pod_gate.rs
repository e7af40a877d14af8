//! The two parts of the pod webhook's mutation (`super::pods`) that decide how a pod of a group
//! or queue reaches the scheduler: its admission gate, or its admission on arrival, and its
//! marker resources.
//!
//! The scheduling gate `scheduling.gangplank.dev/admission`, unless already there,
//! `--gate-pods=false`, or the pod's gang is admitted on arrival (then the annotation
//! `scheduling.gangplank.dev/admitted` records the admission, which the bind verb asks of
//! a managed pod without the gate; a gated pod loses any such annotation it came with): while nothing waits for
//! admission, the first member of a gang whose `minMember` copies fit in the room the last
//! pass left admits the gang, and it and its later members, `minMember` in all and none
//! larger than the first, are created ungated
//! ([`gangplank_core::admit::on_arrival`]; `--admit-on-arrival`; a member created before its
//! PodGroup reached the cache is gated, and admission releases it, as is a member that
//! names resource claims, whose devices only the cache counts; only the replica that
//! leads admits on arrival, a follower gates every pod, [`super::LeaderArrivals`]); so are, under the same flag,
//! the members of a group admitted with room kept for members still to come while that
//! admission holds (ahead of its members, a Volcano PodGroup's or a batch Job's, or on its
//! `minResources`, [`gangplank_core::model::owed`]): the first `minMember`, and then
//! those the room `minResources` still owe holds (members it let in that the watch does
//! not show yet count, so pods created at once cannot all pass).
//!
//! Each marker, `scheduling.gangplank.dev/managed` (the scheduler's binding extender) and
//! `scheduling.gangplank.dev/placement` (its placing extender; DESIGN "Which pods reach
//! Gangplank"), at zero units in the requests and limits of the first container, unless
//! already there (an extended resource needs equal request and limit, so a lone request or
//! limit is completed with the same amount). The scheduler picks an extender by the name
//! alone, and its fit check skips a zero request before any per-node work, where a non-zero
//! extended resource costs it a check of the name on every node. A member of a gang
//! admitted on arrival gets only `managed`, unless `--place-arrivals` or its priority is
//! above zero: the scheduler places it alone and Gangplank holds its bind until quorum.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::core::admission::AdmissionRequest;
use serde_json::json;

use super::Webhooks;
use super::patch::Patcher;
use crate::api::labels;
use crate::cache::convert;
use crate::metrics;
use gangplank_core::model::GroupKey;

/// Gates the pod (of `group`, if any) at the admission gate, unless it carries it already or is
/// admitted on arrival
/// (not for a dry run, which must change nothing, nor for a pod no scheduler serves); whether it
/// was admitted on arrival, which the patch records.
pub(super) fn gate(
    w: &Webhooks,
    request: &AdmissionRequest<Pod>,
    group: Option<&str>,
    served: bool,
    patch: &mut Patcher,
) -> bool {
    let pod = request.object.as_ref().expect("checked when decoded");
    let spec = pod.spec.as_ref();
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let gated = spec
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.name == labels::ADMISSION_GATE));
    // A dry run must change nothing, and admission on arrival takes room.
    let arrived = !gated
        && !request.dry_run
        && served
        && admitted_on_arrival(w, namespace, &request.name, group, spec);
    let record = ["metadata", "annotations", labels::ADMITTED_ANNOTATION];
    if arrived {
        ::metrics::counter!(metrics::ADMISSION_ARRIVED_PODS_TOTAL).increment(1);
        patch.set(&record, json!(crate::clock::rfc3339_now()));
    } else {
        // Written by anyone else, the record would let the pod bind once its gate is gone.
        patch.remove(&record);
        if !gated {
            patch.push(
                &["spec", "schedulingGates"],
                json!({"name": labels::ADMISSION_GATE}),
            );
        }
    }
    arrived
}

/// Gives the pod's first container the marker resources (requests and limits, when it does
/// not ask for them itself): the managed one always, the placement one unless admitted on
/// arrival without needing the placing extender.
pub(super) fn mark(w: &Webhooks, spec: Option<&PodSpec>, arrived: bool, patch: &mut Patcher) {
    if let Some(container) = spec.and_then(|s| s.containers.first()) {
        let resources = container.resources.as_ref();
        // A pod of positive priority may preempt, and its victims must be vetted by
        // Gangplank's preempt verb, which only the placing extender serves.
        let may_preempt = spec.and_then(|s| s.priority).is_some_and(|p| p > 0);
        let markers: &[&str] = if arrived && !may_preempt && !w.settings().place_arrivals {
            &[labels::MANAGED_RESOURCE]
        } else {
            &[labels::MANAGED_RESOURCE, labels::PLACEMENT_RESOURCE]
        };
        for &name in markers {
            let amount =
                |list: Option<&BTreeMap<String, Quantity>>| Some(list?.get(name)?.0.clone());
            let request = amount(resources.and_then(|r| r.requests.as_ref()));
            let limit = amount(resources.and_then(|r| r.limits.as_ref()));
            let value = request
                .clone()
                .or(limit.clone())
                .unwrap_or_else(|| "0".into());
            let marker = |list| ["spec", "containers", "0", "resources", list, name];
            if request.is_none() {
                patch.set(&marker("requests"), json!(value));
            }
            if limit.is_none() {
                patch.set(&marker("limits"), json!(value));
            }
        }
    }
}

/// Whether the pod's gang, `group`, is admitted on arrival, so the pod is created without the
/// gate.
fn admitted_on_arrival(
    w: &Webhooks,
    namespace: &str,
    name: &str,
    group: Option<&str>,
    spec: Option<&PodSpec>,
) -> bool {
    let (Some(arrivals), Some(group), Some(spec)) = (w.arrivals(), group, spec) else {
        return false;
    };
    // Its devices come from claims the webhook does not read: it waits for a pass, which
    // counts them.
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return false;
    }
    let Ok(requests) = convert::pod_requests(spec) else {
        return false;
    };
    arrivals.admit_on_arrival(
        &GroupKey::new(namespace, group),
        name,
        &convert::on_node(requests),
    )
}
