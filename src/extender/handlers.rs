//! The four verb handlers: decode, decide, encode. Decisions come from [`crate::gang`] and
//! [`crate::policy`]; pods in no group are answered from their labels alone, without touching
//! the cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult,
    ExtenderPreemptionArgs, ExtenderPreemptionResult, FailedNodesMap, HostPriority,
    HostPriorityList, MIN_EXTENDER_PRIORITY, MetaPod, MetaVictims, Victims,
};
use super::{BindRequest, Error, Extender, Outcome, Verb, Wire, bad_request};
use crate::api::labels;
use crate::cache::{GroupKey, convert};
use crate::gang::claims;
use crate::policy::{self, constraints::Constraints, placement, preemption};
use k8s_openapi::api::core::v1::Pod;

/// `POST /scheduler/filter`.
pub async fn filter(
    State(extender): State<Arc<Extender>>,
    Wire(args): Wire<ExtenderArgs>,
) -> Response {
    let candidates = match candidate_names(&args, Verb::Filter) {
        Ok(names) => names,
        Err(e) => return bad_request(e),
    };
    if !in_a_group(&args.pod) {
        return answer(
            FilterVerdict::pass_all().into_result(candidates, args),
            Outcome::Ok,
        );
    }
    let decided = gang_member(&args.pod, Verb::Filter).and_then(|(pod, constraints)| {
        let settings = extender.settings;
        extender
            .cache
            .update(|s| {
                let verdict = claims::filter(
                    s,
                    &pod,
                    &constraints,
                    &candidates,
                    &settings,
                    std::time::Instant::now(),
                );
                ::metrics::gauge!(crate::metrics::GANG_CLAIMS).set(s.claims.len() as f64);
                verdict
            })
            .map_err(|e| gang_error(Verb::Filter, &pod, e))
    });
    match decided {
        Ok(verdict) => answer(
            FilterVerdict {
                failed: verdict.failed,
                unresolvable: verdict.unresolvable,
            }
            .into_result(candidates, args),
            Outcome::Ok,
        ),
        Err(e) => answer(
            ExtenderFilterResult {
                error: e.to_string(),
                ..Default::default()
            },
            Outcome::Error,
        ),
    }
}

/// `POST /scheduler/prioritize`: a bare array of `{"Host","Score"}`. Errors are ignored by the
/// scheduler, so a pod that cannot be judged gets neutral scores.
pub async fn prioritize(
    State(extender): State<Arc<Extender>>,
    Wire(args): Wire<ExtenderArgs>,
) -> Response {
    let candidates = match candidate_names(&args, Verb::Prioritize) {
        Ok(names) => names,
        Err(e) => return bad_request(e),
    };
    let member = in_a_group(&args.pod)
        .then(|| gang_member(&args.pod, Verb::Prioritize).ok())
        .flatten();
    let scores: HostPriorityList = match member {
        None => candidates
            .into_iter()
            .map(|host| HostPriority {
                host,
                score: MIN_EXTENDER_PRIORITY,
            })
            .collect(),
        Some((pod, _)) => extender.cache.read(|s| {
            let key = GroupKey::of(&pod);
            let claim = key.as_ref().and_then(|k| s.claims.get(k));
            candidates
                .into_iter()
                .map(|host| {
                    let score = score_node(s, claim, &pod, &host, extender.settings.strategy);
                    HostPriority { host, score }
                })
                .collect()
        }),
    };
    answer(scores, Outcome::Ok)
}

/// A gang member's score on `host`: the maximum where its own gang's claim holds a slot for
/// it, else the placement strategy's score over what the node has in use, reserved and
/// claimed by other gangs.
fn score_node(
    s: &crate::cache::State,
    claim: Option<&crate::cache::Claim>,
    pod: &crate::cache::Pod,
    host: &str,
    strategy: placement::Strategy,
) -> i64 {
    if claim.is_some_and(|c| {
        c.slots
            .iter()
            .any(|slot| slot.node == host && pod.requests.fits_in(&slot.requests))
    }) {
        return placement::CLAIMED_NODE_SCORE;
    }
    let Some(node) = s.nodes.get(host) else {
        return MIN_EXTENDER_PRIORITY;
    };
    let mut taken = s.used_on(host).plus(s.reserved_on(host));
    taken.add(s.claimed_on(host));
    if let Some(c) = claim {
        taken.sub(&c.on(host));
    }
    placement::score(strategy, &node.allocatable, &taken, &pod.requests)
}

/// Whether the pod names a gang (its own label or an alias): everything else passes through.
fn in_a_group(pod: &Pod) -> bool {
    labels::pod_group_of(
        pod.metadata.labels.as_ref(),
        pod.metadata.annotations.as_ref(),
    )
    .is_some()
}

/// The pod as the cache models it, and its placement constraints.
fn gang_member(pod: &Pod, verb: Verb) -> Result<(crate::cache::Pod, Constraints), Error> {
    let model = convert::pod(pod).map_err(|e| Error::Decode {
        verb,
        why: e.to_string(),
    })?;
    Ok((model, policy::convert::constraints_of(pod)))
}

fn gang_error(verb: Verb, pod: &crate::cache::Pod, e: claims::Error) -> Error {
    Error::Gang {
        verb,
        pod: format!("{}/{}", pod.namespace, pod.name),
        why: e.to_string(),
    }
}

/// `POST /scheduler/preempt`: the scheduler's victims, answered in the Meta form.
/// Keeps the nodes whose victim list policy allows as a whole ([`policy::preemption`]).
pub async fn preempt(
    State(extender): State<Arc<Extender>>,
    Wire(args): Wire<ExtenderPreemptionArgs>,
) -> Response {
    // Only what preemption policy reads; the scheduler's copy of the pod may lack a UID.
    let meta = &args.pod.metadata;
    let preemptor = crate::cache::Pod {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        priority: args.pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
        pod_group: labels::pod_group_of(meta.labels.as_ref(), meta.annotations.as_ref())
            .map(str::to_owned),
        ..Default::default()
    };
    let mut victims = match proposed_victims(args) {
        Ok(victims) => victims,
        Err(e) => return bad_request(e),
    };
    let dropped: Vec<(String, preemption::Rejection)> = extender.cache.read(|s| {
        let resolved: Vec<(&str, Vec<preemption::Victim<'_>>)> = victims
            .iter()
            .map(|(node, v)| {
                let list = v
                    .pods
                    .iter()
                    .map(|p| match s.pods.get(&p.uid) {
                        Some(pod) => preemption::Victim::Known(pod),
                        None => preemption::Victim::Unknown { uid: &p.uid },
                    })
                    .collect();
                (node.as_str(), list)
            })
            .collect();
        let review = preemption::review(
            &preemption::Preemptor::of(&preemptor),
            resolved.iter().map(|(n, v)| (*n, v.as_slice())),
            |gang| {
                let key = gang.key();
                let spec = s.group(&key)?.spec.as_ref()?;
                Some(preemption::GangStatus {
                    min_member: spec.min_member,
                    placed: claims::placed_members(s, &key, "") as u32,
                })
            },
        );
        review
            .dropped
            .into_iter()
            .map(|(node, why)| (node.to_owned(), why))
            .collect()
    });
    for (node, why) in dropped {
        tracing::info!(
            preemptor = %format!("{}/{}", preemptor.namespace, preemptor.name),
            %node,
            reason = why.label(),
            "refused the scheduler's victims: {why}"
        );
        ::metrics::counter!(crate::metrics::PREEMPT_REFUSED_NODES_TOTAL, "reason" => why.label())
            .increment(1);
        victims.remove(&node);
    }
    answer(
        ExtenderPreemptionResult {
            node_name_to_meta_victims: victims,
        },
        Outcome::Ok,
    )
}

/// `POST /scheduler/bind`: `{"Error":""}` once the Binding exists, else the reason.
pub async fn bind(
    State(extender): State<Arc<Extender>>,
    Wire(args): Wire<ExtenderBindingArgs>,
) -> Response {
    let result = match bind_request(args) {
        Ok(request) => extender.permits.bind(request).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => answer(ExtenderBindingResult::default(), Outcome::Ok),
        Err(e) => {
            tracing::warn!(error = %e, "bind failed");
            answer(
                ExtenderBindingResult {
                    error: e.to_string(),
                },
                Outcome::Error,
            )
        }
    }
}

/// Which candidate nodes fail, and why. Nodes in neither map pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterVerdict {
    /// Failed, but preemption may help.
    pub failed: FailedNodesMap,
    /// Failed, and preemption would not help.
    pub unresolvable: FailedNodesMap,
}

impl FilterVerdict {
    /// Every candidate passes: the decision for this stage.
    pub fn pass_all() -> Self {
        Self::default()
    }

    fn passes(&self, node: &str) -> bool {
        !self.failed.contains_key(node) && !self.unresolvable.contains_key(node)
    }

    /// The filter answer: `NodeNames` lists the passing candidates (in the scheduler's order)
    /// and, when the request came with full `Nodes`, `Nodes` lists them too; otherwise `Nodes`
    /// is null. A node in both maps is reported as unresolvable only, as the scheduler would
    /// read it.
    pub fn into_result(self, candidates: Vec<String>, args: ExtenderArgs) -> ExtenderFilterResult {
        let nodes = args.nodes.map(|mut list| {
            list.items.retain(|node| {
                node.metadata
                    .name
                    .as_deref()
                    .is_some_and(|name| self.passes(name))
            });
            list
        });
        let node_names = candidates
            .into_iter()
            .filter(|name| self.passes(name))
            .collect();
        let mut failed = self.failed;
        failed.retain(|name, _| !self.unresolvable.contains_key(name));
        ExtenderFilterResult {
            nodes,
            node_names: Some(node_names),
            failed_nodes: failed,
            failed_and_unresolvable_nodes: self.unresolvable,
            error: String::new(),
        }
    }
}

/// The candidate node names: `NodeNames` (`nodeCacheCapable: true`) or the names in `Nodes`.
fn candidate_names(args: &ExtenderArgs, verb: Verb) -> Result<Vec<String>, Error> {
    if let Some(names) = &args.node_names {
        return Ok(names.clone());
    }
    if let Some(list) = &args.nodes {
        return Ok(list
            .items
            .iter()
            .filter_map(|node| node.metadata.name.clone())
            .collect());
    }
    Err(Error::Decode {
        verb,
        why: "Nodes and NodeNames are both null; one of them must list the candidate nodes".into(),
    })
}

/// The scheduler's proposed victims, by UID. Full pods (`nodeCacheCapable: false`) are reduced
/// to their UIDs; null nodes and null pods are dropped (a nil victim list would crash the
/// scheduler if answered back).
fn proposed_victims(args: ExtenderPreemptionArgs) -> Result<BTreeMap<String, MetaVictims>, Error> {
    if let Some(meta) = args.node_name_to_meta_victims {
        return Ok(meta
            .into_iter()
            .filter_map(|(node, victims)| Some((node, victims?)))
            .collect());
    }
    let mut out = BTreeMap::new();
    for (node, victims) in args.node_name_to_victims.unwrap_or_default() {
        let Some(victims) = victims else { continue };
        out.insert(node.clone(), meta_victims(&node, victims)?);
    }
    Ok(out)
}

fn meta_victims(node: &str, victims: Victims) -> Result<MetaVictims, Error> {
    let mut pods = Vec::with_capacity(victims.pods.len());
    for pod in victims.pods.into_iter().flatten() {
        let Some(uid) = pod.metadata.uid else {
            return Err(Error::Decode {
                verb: Verb::Preempt,
                why: format!(
                    "victim pod {}/{} on node {node} has no metadata.uid",
                    pod.metadata.namespace.unwrap_or_default(),
                    pod.metadata.name.unwrap_or_default()
                ),
            });
        };
        pods.push(MetaPod { uid });
    }
    Ok(MetaVictims {
        pods,
        num_pdb_violations: victims.num_pdb_violations,
    })
}

fn bind_request(args: ExtenderBindingArgs) -> Result<BindRequest, Error> {
    for (field, value) in [
        ("PodName", &args.pod_name),
        ("PodNamespace", &args.pod_namespace),
        ("Node", &args.node),
    ] {
        if value.is_empty() {
            return Err(Error::MissingField { field });
        }
    }
    Ok(BindRequest {
        namespace: args.pod_namespace,
        name: args.pod_name,
        uid: args.pod_uid,
        node: args.node,
    })
}

/// HTTP 200 with a JSON body, tagged with its outcome for the metrics.
fn answer<T: Serialize>(body: T, outcome: Outcome) -> Response {
    let mut response = Json(body).into_response();
    response.extensions_mut().insert(outcome);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: serde_json::Value) -> ExtenderArgs {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_verdict_keeps_only_passing_nodes_in_both_lists() {
        let args = args(json!({
            "Pod": {},
            "Nodes": {"metadata": {}, "items": [
                {"metadata": {"name": "n1"}},
                {"metadata": {"name": "n2"}},
                {"metadata": {"name": "n3"}}
            ]},
            "NodeNames": null
        }));
        let candidates = candidate_names(&args, Verb::Filter).unwrap();
        let verdict = FilterVerdict {
            failed: [
                ("n2".to_string(), "gang does not fit".to_string()),
                ("n3".to_string(), "also".to_string()),
            ]
            .into(),
            unresolvable: [("n3".to_string(), "claimed by another gang".to_string())].into(),
        };
        let result = verdict.into_result(candidates, args);
        assert_eq!(result.node_names, Some(vec!["n1".to_string()]));
        let kept: Vec<_> = result
            .nodes
            .unwrap()
            .items
            .into_iter()
            .map(|n| n.metadata.name.unwrap())
            .collect();
        assert_eq!(kept, vec!["n1".to_string()]);
        assert_eq!(result.failed_nodes.keys().collect::<Vec<_>>(), vec!["n2"]);
        assert_eq!(
            result
                .failed_and_unresolvable_nodes
                .keys()
                .collect::<Vec<_>>(),
            vec!["n3"]
        );
    }

    #[test]
    fn names_win_when_both_node_forms_are_sent() {
        let args = args(json!({
            "Pod": {},
            "Nodes": {"items": [{"metadata": {"name": "x"}}]},
            "NodeNames": ["a", "b"]
        }));
        assert_eq!(
            candidate_names(&args, Verb::Filter).unwrap(),
            vec!["a", "b"]
        );
    }

    #[test]
    fn a_bind_request_names_the_first_empty_field() {
        let err = bind_request(ExtenderBindingArgs {
            pod_name: "p".into(),
            pod_namespace: "ns".into(),
            pod_uid: String::new(),
            node: String::new(),
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "failed to bind pod: Node is empty");
    }
}
