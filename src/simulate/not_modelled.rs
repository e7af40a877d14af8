//! What recorded pods ask that a replay does not model, counted by kind: the replay places
//! such a pod as if it had not asked it, and says so beside its fidelity. A replay applies the
//! rest of a pod's placement constraints (`nodeSelector`, required node affinity,
//! tolerations: [`crate::cache::constraints::constraints_of`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Pod};
use serde::Serialize;

/// What `pod` asks that the replay does not model, in words.
fn asks(pod: &Pod) -> Vec<&'static str> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let affinity = spec.affinity.as_ref();
    let asks = [
        ("pod affinity", affinity.is_some_and(has_pod_affinity)),
        (
            "pod anti-affinity",
            affinity.is_some_and(has_pod_anti_affinity),
        ),
        (
            "preferred node affinity",
            affinity.is_some_and(prefers_nodes),
        ),
        (
            "topology spread constraints",
            spec.topology_spread_constraints
                .as_ref()
                .is_some_and(|c| !c.is_empty()),
        ),
        (
            "DRA resource claims",
            spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()),
        ),
    ];
    asks.into_iter()
        .filter_map(|(kind, asked)| asked.then_some(kind))
        .collect()
}

/// Per kind of ask (in words), how many recorded pods a replay runs asked it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct NotModelled(BTreeMap<&'static str, usize>);

impl NotModelled {
    /// Counts what `pod` asks that the replay does not model; returns those kinds.
    pub fn count(&mut self, pod: &Pod) -> Vec<&'static str> {
        let asked = asks(pod);
        for kind in &asked {
            *self.0.entry(kind).or_default() += 1;
        }
        asked
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// One line for the text output, empty when nothing is counted.
    pub fn text(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let counted: Vec<String> = self
            .0
            .iter()
            .map(|(kind, pods)| match pods {
                1 => format!("{kind} (1 pod)"),
                n => format!("{kind} ({n} pods)"),
            })
            .collect();
        format!(
            "Not modelled, so replayed as if not asked: {}.\n",
            counted.join(", ")
        )
    }
}

fn has_pod_affinity(a: &Affinity) -> bool {
    a.pod_affinity.as_ref().is_some_and(|p| {
        any_terms(
            &p.required_during_scheduling_ignored_during_execution,
            &p.preferred_during_scheduling_ignored_during_execution,
        )
    })
}

fn has_pod_anti_affinity(a: &Affinity) -> bool {
    a.pod_anti_affinity.as_ref().is_some_and(|p| {
        any_terms(
            &p.required_during_scheduling_ignored_during_execution,
            &p.preferred_during_scheduling_ignored_during_execution,
        )
    })
}

/// Whether either list of terms has one.
fn any_terms<R, P>(required: &Option<Vec<R>>, preferred: &Option<Vec<P>>) -> bool {
    required.as_ref().is_some_and(|t| !t.is_empty())
        || preferred.as_ref().is_some_and(|t| !t.is_empty())
}

fn prefers_nodes(a: &Affinity) -> bool {
    a.node_affinity.as_ref().is_some_and(|n| {
        n.preferred_during_scheduling_ignored_during_execution
            .as_ref()
            .is_some_and(|t| !t.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "p" }, "spec": spec }))
            .expect("a pod")
    }

    #[test]
    fn pods_asking_for_what_a_replay_does_not_model_are_counted_by_kind() {
        let mut counted = NotModelled::default();
        counted.count(&pod(serde_json::json!({
            "containers": [],
            "affinity": { "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [
                { "topologyKey": "kubernetes.io/hostname" }
            ] } },
            "topologySpreadConstraints": [
                { "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule" }
            ]
        })));
        counted.count(&pod(serde_json::json!({
            "containers": [],
            "affinity": { "podAntiAffinity": { "preferredDuringSchedulingIgnoredDuringExecution": [
                { "weight": 1, "podAffinityTerm": { "topologyKey": "zone" } }
            ] } }
        })));
        assert_eq!(
            counted.text(),
            "Not modelled, so replayed as if not asked: pod anti-affinity (2 pods), topology \
             spread constraints (1 pod).\n"
        );
    }

    #[test]
    fn what_a_replay_applies_is_not_counted() {
        let mut counted = NotModelled::default();
        counted.count(&pod(serde_json::json!({
            "containers": [],
            "nodeSelector": { "gpu": "a100" },
            "tolerations": [{ "key": "gpu", "operator": "Exists" }],
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchExpressions": [
                    { "key": "zone", "operator": "In", "values": ["a"] }
                ] }]
            } } }
        })));
        assert!(counted.is_empty(), "{counted:?}");
    }
}
