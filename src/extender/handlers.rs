//! The four verb handlers: decode, decide, encode. Decisions come from [`gangplank_core::claims`] and
//! [`gangplank_core::policy`]; pods in no group and no queue are answered from their labels alone,
//! without touching the cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::encode;
use super::wire::{
    ExtenderArgsRef, ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult,
    ExtenderPreemptionArgs, ExtenderPreemptionResult, FilterAnswer, HostScore,
    MIN_EXTENDER_PRIORITY, MetaPod, MetaVictims, Name, NodeList, NodeListNames, PodLabels, Victims,
};
use super::{BindRequest, Body, Error, Extender, Outcome, Verb, Wire, bad_request, decode_args};
use crate::api::labels;
use crate::cache::convert;
use gangplank_core::claims;
use gangplank_core::policy::{constraints::Constraints, placement, preemption};
use k8s_openapi::api::core::v1::Pod;
use serde_json::value::RawValue;

/// `POST /scheduler/filter`.
pub async fn filter(State(extender): State<Arc<Extender>>, Body(verb, body): Body) -> Response {
    let args = match decode_args(verb, &body) {
        Ok(args) => args,
        Err(e) => return bad_request(e),
    };
    let request = match Request::of(&args, verb) {
        Ok(request) => request,
        Err(e) => return bad_request(e),
    };
    if !request.in_a_group && !request.in_a_queue {
        return pass_through(&args, request);
    }
    let candidates = request.names();
    let decided = gang_member(&extender, &args, verb).and_then(|(pod, constraints)| {
        let settings = extender.settings;
        extender
            .ledger
            .claim(
                &pod,
                &constraints,
                &candidates,
                &settings,
                tokio::time::Instant::now().into_std(),
            )
            .map_err(|e| gang_error(verb, &pod, e))
    });
    let verdict = match decided {
        Ok(verdict) => verdict,
        Err(e) => {
            return answer(
                ExtenderFilterResult {
                    error: e.to_string(),
                    ..Default::default()
                },
                Outcome::Error,
            );
        }
    };
    if let Some(why) = verdict.retry_later() {
        return answer(
            ExtenderFilterResult {
                error: why,
                ..Default::default()
            },
            Outcome::Waits,
        );
    }
    // Full nodes came: the passing ones go back in full.
    let nodes = match args.nodes.map(|raw| full_nodes(raw, verb)).transpose() {
        Ok(nodes) => nodes.map(|list| keep_passing(list, &verdict)),
        Err(e) => return bad_request(e),
    };
    json_answer(
        encode::filter_answer(&FilterAnswer {
            nodes,
            node_names: encode::Names::List(verdict.passed.as_slice()),
            failed_nodes: &verdict.failed,
            failed_and_unresolvable_nodes: &verdict.unresolvable,
            error: "",
        }),
        Outcome::Ok,
    )
}

/// The filter answer for a pod in no group: every candidate passes, and the request's lists
/// go back as they came (`Nodes` and `NodeNames` byte for byte).
fn pass_through(args: &ExtenderArgsRef<'_>, request: Request<'_>) -> Response {
    let none: BTreeMap<&str, &str> = BTreeMap::new();
    let answer = |node_names| FilterAnswer {
        nodes: args.nodes,
        node_names,
        failed_nodes: &none,
        failed_and_unresolvable_nodes: &none,
        error: "",
    };
    let body = match &args.node_names {
        Some(names) => encode::filter_answer(&answer(encode::Names::Raw(names.raw))),
        None => encode::filter_answer(&answer(encode::Names::List(request.candidates.as_slice()))),
    };
    json_answer(body, Outcome::Ok)
}

/// `POST /scheduler/prioritize`: a bare array of `{"Host","Score"}`. A pod in no group, and one
/// that cannot be judged (the scheduler ignores prioritize errors), gets `[]`: no score on any
/// node, which the scheduler adds up exactly as if no extender were interested in the pod.
/// Zeros for every candidate would add the same nothing, but cost a third of a call over 5,000
/// names and make the scheduler draw random tie-breaks it does not draw without an extender.
pub async fn prioritize(State(extender): State<Arc<Extender>>, Body(verb, body): Body) -> Response {
    let args = match decode_args(verb, &body) {
        Ok(args) => args,
        Err(e) => return bad_request(e),
    };
    let request = match Request::of(&args, verb) {
        Ok(request) => request,
        Err(e) => return bad_request(e),
    };
    let member = request
        .in_a_group
        .then(|| gang_member(&extender, &args, verb).ok())
        .flatten();
    let body = match member {
        None => b"[]".to_vec(),
        Some((pod, _)) => {
            let candidates = request.names();
            let scores = extender
                .cache
                .read(|s| gang_scores(s, &pod, &candidates, extender.settings.strategy));
            encode::host_score_list(&scores)
        }
    };
    json_answer(Ok(body), Outcome::Ok)
}

/// A gang member's scores on `candidates`, in their order ([`claims::scores`]), as the wire
/// writes them.
pub fn gang_scores<'a, S: AsRef<str>>(
    s: &gangplank_core::model::State,
    pod: &gangplank_core::model::Pod,
    candidates: &'a [S],
    strategy: placement::Strategy,
) -> Vec<HostScore<'a>> {
    claims::scores(s, pod, candidates, strategy, MIN_EXTENDER_PRIORITY)
        .into_iter()
        .zip(candidates)
        .map(|(score, host)| HostScore {
            host: host.as_ref(),
            score,
        })
        .collect()
}

/// A filter or prioritize request, read as far as deciding needs.
struct Request<'a> {
    candidates: Candidates<'a>,
    /// Whether the pod names a gang (its own label or an alias).
    in_a_group: bool,
    /// Whether the pod names a queue (label or alias): one in no group is kept out of room
    /// gangs claimed at filter. A pod in neither passes through.
    in_a_queue: bool,
}

/// The candidate node names: `NodeNames` (`nodeCacheCapable: true`) or the names in `Nodes`.
enum Candidates<'a> {
    Names(&'a [Name<'a>]),
    FromNodes(Vec<Name<'a>>),
}

impl<'a> Request<'a> {
    fn of(args: &'a ExtenderArgsRef<'a>, verb: Verb) -> Result<Request<'a>, Error> {
        let candidates = if let Some(names) = &args.node_names {
            Candidates::Names(&names.names)
        } else if let Some(raw) = args.nodes {
            let list: NodeListNames =
                serde_json::from_str(raw.get()).map_err(|e| Error::Decode {
                    verb,
                    why: format!("Nodes: {e}"),
                })?;
            Candidates::FromNodes(
                list.items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .collect(),
            )
        } else {
            return Err(Error::Decode {
                verb,
                why: "Nodes and NodeNames are both null; one of them must list the candidate nodes"
                    .into(),
            });
        };
        let pod: PodLabels = serde_json::from_str(args.pod.get()).map_err(|e| Error::Decode {
            verb,
            why: format!("Pod: {e}"),
        })?;
        let meta = pod.metadata.unwrap_or_default();
        let (labels, annotations) = (meta.labels.as_ref(), meta.annotations.as_ref());
        Ok(Request {
            candidates,
            in_a_group: labels::pod_group_of(labels, annotations).is_some(),
            in_a_queue: labels::queue_of(labels, annotations).is_some(),
        })
    }

    fn names(&self) -> Vec<&str> {
        self.candidates
            .as_slice()
            .iter()
            .map(AsRef::as_ref)
            .collect()
    }
}

impl<'a> Candidates<'a> {
    fn as_slice(&self) -> &[Name<'a>] {
        match self {
            Candidates::Names(names) => names,
            Candidates::FromNodes(names) => names,
        }
    }
}

/// The nodes of `list` that the verdict does not fail.
fn keep_passing(mut list: NodeList, verdict: &claims::FilterVerdict<'_>) -> NodeList {
    list.items.retain(|node| {
        node.metadata.name.as_deref().is_some_and(|name| {
            !verdict.failed.contains_key(name) && !verdict.unresolvable.contains_key(name)
        })
    });
    list
}

fn full_nodes(raw: &RawValue, verb: Verb) -> Result<NodeList, Error> {
    serde_json::from_str(raw.get()).map_err(|e| Error::Decode {
        verb,
        why: format!("Nodes: {e}"),
    })
}

/// The request's pod as the cache models it, and its placement constraints. A pod that names
/// resource claims asks for what the cache counted for it (its devices, from templates and
/// claims the request does not carry); one the cache has not seen yet asks for an
/// unresolved claim, as in the cache, so it fits no node.
fn gang_member(
    extender: &Extender,
    args: &ExtenderArgsRef<'_>,
    verb: Verb,
) -> Result<(gangplank_core::model::Pod, Constraints), Error> {
    let decode = |why: String| Error::Decode { verb, why };
    let pod: Pod = serde_json::from_str(args.pod.get()).map_err(|e| decode(format!("Pod: {e}")))?;
    let mut model = convert::pod(&pod).map_err(|e| decode(e.to_string()))?;
    if pod
        .spec
        .as_ref()
        .is_some_and(|s| s.resource_claims.as_ref().is_some_and(|c| !c.is_empty()))
    {
        let counted = extender
            .cache
            .read(|s| s.pods().get(&model.uid).map(|p| p.requests.clone()));
        model.requests = counted.unwrap_or_else(|| {
            let mut requests = model.requests.clone();
            requests.set_requested(crate::cache::dra::UNRESOLVED, 1);
            requests
        });
    }
    Ok((model, crate::cache::constraints::constraints_of(&pod)))
}

fn gang_error(verb: Verb, pod: &gangplank_core::model::Pod, e: claims::Error) -> Error {
    Error::Gang {
        verb,
        pod: format!("{}/{}", pod.namespace, pod.name),
        why: e.to_string(),
    }
}

/// `POST /scheduler/preempt`: the scheduler's victims, answered in the Meta form.
/// Keeps the nodes whose victim list policy allows as a whole ([`gangplank_core::policy::preemption`]).
pub async fn preempt(
    State(extender): State<Arc<Extender>>,
    Wire(args): Wire<ExtenderPreemptionArgs>,
) -> Response {
    // Only what preemption policy reads; the scheduler's copy of the pod may lack a UID.
    let meta = &args.pod.metadata;
    let preemptor = gangplank_core::model::Pod {
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
                    .map(|p| match s.pods().get(&p.uid) {
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
        Ok(request) => {
            tracing::debug!(pod = %format!("{}/{}", request.namespace, request.name), node = %request.node, "bind");
            extender.pod_seen(&request.uid).await;
            extender.permits.bind(request).await
        }
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
    json_answer(serde_json::to_vec(&body), outcome)
}

/// HTTP 200 with JSON already written, tagged with its outcome; a body that could not be
/// written is an HTTP 500 that says why, as axum's `Json` answers it.
fn json_answer(body: serde_json::Result<Vec<u8>>, outcome: Outcome) -> Response {
    let mut response = match body {
        Ok(bytes) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("could not write the answer: {e}"),
            )
                .into_response();
        }
    };
    response.extensions_mut().insert(outcome);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use gangplank_core::claims::{FailReason, FilterVerdict};
    use serde_json::json;

    #[test]
    fn full_nodes_keep_only_the_passing_ones() {
        let list: NodeList = serde_json::from_value(json!({"metadata": {}, "items": [
            {"metadata": {"name": "n1"}},
            {"metadata": {"name": "n2"}},
            {"metadata": {"name": "n3"}}
        ]}))
        .unwrap();
        let verdict = FilterVerdict {
            passed: vec!["n1"],
            failed: [("n2", FailReason::from("gang does not fit"))].into(),
            unresolvable: [("n3", FailReason::from("claimed by another gang"))].into(),
            preempts_stand_ins: false,
        };
        let kept: Vec<_> = keep_passing(list, &verdict)
            .items
            .into_iter()
            .map(|n| n.metadata.name.unwrap())
            .collect();
        assert_eq!(kept, vec!["n1".to_string()]);
    }

    #[test]
    fn names_win_when_both_node_forms_are_sent() {
        let body = json!({
            "Pod": {},
            "Nodes": {"items": [{"metadata": {"name": "x"}}]},
            "NodeNames": ["a", "b"]
        })
        .to_string();
        let args: ExtenderArgsRef = serde_json::from_str(&body).unwrap();
        let request = Request::of(&args, Verb::Filter).unwrap();
        assert_eq!(request.names(), ["a", "b"]);
        assert!(!request.in_a_group);
    }

    #[test]
    fn full_nodes_give_their_names_and_an_alias_label_makes_a_gang_member() {
        let body = json!({
            "Pod": {"metadata": {"annotations": {(labels::VOLCANO_GROUP_NAME_ANNOTATION): "g"}}},
            "Nodes": {"items": [{"metadata": {"name": "x"}}, {"metadata": {}}]},
            "NodeNames": null
        })
        .to_string();
        let args: ExtenderArgsRef = serde_json::from_str(&body).unwrap();
        let request = Request::of(&args, Verb::Filter).unwrap();
        assert_eq!(request.names(), ["x"]);
        assert!(request.in_a_group);
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
