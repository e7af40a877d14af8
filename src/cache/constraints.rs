//! Builds a pod's [`Constraints`] from its API object (k8s-openapi).
//!
//! Kept apart from [`super::constraints`] so that the policy code never sees API types, the way
//! the cache keeps its model and its conversions apart. Conversion never fails: what the API
//! server would have rejected (an unknown operator, `In` without values, `Gt` with a value that
//! is not an integer) becomes a toleration or a term that matches nothing, which is what the
//! scheduler does with it, and the reason is kept for the message a user sees.

use k8s_openapi::api::core::v1 as core;

use gangplank_core::model::TaintEffect;
use gangplank_core::policy::constraints::{
    Constraints, FieldRequirement, LabelOperator, LabelRequirement, NodeSelectorTerm, Toleration,
    TolerationOperator, decimal_integer,
};

/// The constraints of a pod; a pod without a spec has none.
pub fn constraints_of(pod: &core::Pod) -> Constraints {
    pod.spec
        .as_ref()
        .map(constraints_of_spec)
        .unwrap_or_default()
}

/// The constraints of a pod spec (also usable on a pod template's spec).
pub fn constraints_of_spec(spec: &core::PodSpec) -> Constraints {
    Constraints {
        tolerations: spec.tolerations.iter().flatten().map(toleration).collect(),
        // A BTreeMap iterates in key order, so the pairs come out sorted.
        node_selector: spec
            .node_selector
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        required_node_affinity: spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|selector| selector.node_selector_terms.iter().map(term).collect()),
    }
}

/// Converts one toleration (the API's empty key, operator and effect mean "any key", `Equal` and
/// "any effect").
pub fn toleration(t: &core::Toleration) -> Toleration {
    let value = t.value.as_deref().unwrap_or("");
    let operator = match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => TolerationOperator::Equal(value.to_owned()),
        "Exists" => TolerationOperator::Exists,
        op @ ("Lt" | "Gt") => match decimal_integer(value) {
            Some(n) if op == "Lt" => TolerationOperator::Lt(n),
            Some(n) => TolerationOperator::Gt(n),
            None => TolerationOperator::Invalid(format!(
                "operator {op} needs an integer value, not {value:?}"
            )),
        },
        other => TolerationOperator::Invalid(format!("operator {other:?} is not supported")),
    };
    Toleration {
        key: t.key.clone().filter(|k| !k.is_empty()),
        operator,
        effect: t.effect.as_deref().filter(|e| !e.is_empty()).map(effect),
    }
}

fn effect(name: &str) -> TaintEffect {
    match name {
        "NoSchedule" => TaintEffect::NoSchedule,
        "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
        "NoExecute" => TaintEffect::NoExecute,
        other => TaintEffect::Other(other.to_owned()),
    }
}

/// Converts one node selector term, validating it as the scheduler's parser does.
pub fn term(t: &core::NodeSelectorTerm) -> NodeSelectorTerm {
    let mut out = NodeSelectorTerm::default();
    let mut problems = Vec::new();
    for (i, r) in t.match_expressions.iter().flatten().enumerate() {
        match label_requirement(r) {
            Ok(req) => out.match_expressions.push(req),
            Err(why) => problems.push(format!("matchExpressions[{i}] on {}: {why}", r.key)),
        }
    }
    for (i, r) in t.match_fields.iter().flatten().enumerate() {
        match field_requirement(r) {
            Ok(req) => out.match_fields.push(req),
            Err(why) => problems.push(format!("matchFields[{i}] on {}: {why}", r.key)),
        }
    }
    if !problems.is_empty() {
        out.invalid = Some(problems.join("; "));
    }
    out
}

fn label_requirement(r: &core::NodeSelectorRequirement) -> Result<LabelRequirement, String> {
    let values = r.values.as_deref().unwrap_or_default();
    let some_values = || {
        if values.is_empty() {
            Err(format!("operator {} needs at least one value", r.operator))
        } else {
            Ok(values.to_vec())
        }
    };
    let no_values = || {
        if values.is_empty() {
            Ok(())
        } else {
            Err(format!("operator {} takes no values", r.operator))
        }
    };
    // Go's strconv.ParseInt, as the scheduler uses for Gt and Lt: sign and leading zeros allowed.
    let integer = || match values {
        [v] => v
            .parse::<i64>()
            .map_err(|_| format!("operator {} needs an integer, not {v:?}", r.operator)),
        _ => Err(format!("operator {} needs exactly one value", r.operator)),
    };
    let operator = match r.operator.as_str() {
        "In" => LabelOperator::In(some_values()?),
        "NotIn" => LabelOperator::NotIn(some_values()?),
        "Exists" => no_values().map(|()| LabelOperator::Exists)?,
        "DoesNotExist" => no_values().map(|()| LabelOperator::DoesNotExist)?,
        "Gt" => LabelOperator::Gt(integer()?),
        "Lt" => LabelOperator::Lt(integer()?),
        other => return Err(format!("operator {other:?} is not supported")),
    };
    Ok(LabelRequirement {
        key: r.key.clone(),
        operator,
    })
}

fn field_requirement(r: &core::NodeSelectorRequirement) -> Result<FieldRequirement, String> {
    let equal = match r.operator.as_str() {
        "In" => true,
        "NotIn" => false,
        other => {
            return Err(format!(
                "operator {other:?} is not supported for fields (only In and NotIn)"
            ));
        }
    };
    match r.values.as_deref().unwrap_or_default() {
        [value] => Ok(FieldRequirement {
            field: r.key.clone(),
            equal,
            value: value.clone(),
        }),
        _ => Err(format!("operator {} needs exactly one value", r.operator)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, Pod, PodSpec,
    };

    use super::*;

    fn tol(key: &str, operator: Option<&str>, value: &str, effect: &str) -> core::Toleration {
        core::Toleration {
            key: Some(key.into()).filter(|k: &String| !k.is_empty()),
            operator: operator.map(str::to_owned),
            value: Some(value.into()).filter(|v: &String| !v.is_empty()),
            effect: Some(effect.into()).filter(|e: &String| !e.is_empty()),
            toleration_seconds: None,
        }
    }

    fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn spec_with_terms(terms: Vec<core::NodeSelectorTerm>) -> PodSpec {
        PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pod_without_spec_or_constraints_is_unconstrained() {
        assert_eq!(constraints_of(&Pod::default()), Constraints::default());
        let pod = Pod {
            spec: Some(PodSpec::default()),
            ..Default::default()
        };
        assert_eq!(constraints_of(&pod), Constraints::default());
    }

    #[test]
    fn missing_operator_means_equal_and_empty_fields_mean_any() {
        let t = toleration(&tol("gpu", None, "true", ""));
        assert_eq!(
            t,
            Toleration {
                key: Some("gpu".into()),
                operator: TolerationOperator::Equal("true".into()),
                effect: None,
            }
        );
        let t = toleration(&tol("", Some("Exists"), "", "NoExecute"));
        assert_eq!(t.key, None);
        assert_eq!(t.operator, TolerationOperator::Exists);
        assert_eq!(t.effect, Some(TaintEffect::NoExecute));
    }

    #[test]
    fn comparison_tolerations_parse_their_value_once() {
        assert_eq!(
            toleration(&tol("sla", Some("Gt"), "950", "")).operator,
            TolerationOperator::Gt(950)
        );
        assert_eq!(
            toleration(&tol("sla", Some("Lt"), "-3", "")).operator,
            TolerationOperator::Lt(-3)
        );
        assert_eq!(
            toleration(&tol("sla", Some("Gt"), "high", "")).operator,
            TolerationOperator::Invalid("operator Gt needs an integer value, not \"high\"".into())
        );
        assert!(matches!(
            toleration(&tol("sla", Some("Near"), "1", "")).operator,
            TolerationOperator::Invalid(_)
        ));
    }

    #[test]
    fn node_selector_is_kept_sorted() {
        let spec = PodSpec {
            node_selector: Some(BTreeMap::from([
                ("zone".to_string(), "a".to_string()),
                ("disk".to_string(), "ssd".to_string()),
            ])),
            ..Default::default()
        };
        assert_eq!(
            constraints_of_spec(&spec).node_selector,
            vec![
                ("disk".to_string(), "ssd".to_string()),
                ("zone".to_string(), "a".to_string())
            ]
        );
    }

    #[test]
    fn affinity_operators_and_fields_are_converted() {
        let spec = spec_with_terms(vec![core::NodeSelectorTerm {
            match_expressions: Some(vec![
                req("zone", "In", &["a", "b"]),
                req("zone", "NotIn", &["c"]),
                req("gpu", "Exists", &[]),
                req("spot", "DoesNotExist", &[]),
                req("cores", "Gt", &["+8"]),
                req("cores", "Lt", &["064"]),
            ]),
            match_fields: Some(vec![req("metadata.name", "NotIn", &["n9"])]),
        }]);
        let terms = constraints_of_spec(&spec).required_node_affinity.unwrap();
        let ops: Vec<_> = terms[0]
            .match_expressions
            .iter()
            .map(|r| r.operator.clone())
            .collect();
        assert_eq!(
            ops,
            vec![
                LabelOperator::In(vec!["a".into(), "b".into()]),
                LabelOperator::NotIn(vec!["c".into()]),
                LabelOperator::Exists,
                LabelOperator::DoesNotExist,
                LabelOperator::Gt(8),
                LabelOperator::Lt(64),
            ]
        );
        assert_eq!(
            terms[0].match_fields,
            vec![FieldRequirement {
                field: "metadata.name".into(),
                equal: false,
                value: "n9".into(),
            }]
        );
        assert_eq!(terms[0].invalid, None);
    }

    #[test]
    fn invalid_requirements_make_their_term_invalid_with_the_reason() {
        let cases = [
            (req("zone", "In", &[]), "needs at least one value"),
            (req("zone", "Exists", &["a"]), "takes no values"),
            (req("cores", "Gt", &["1", "2"]), "needs exactly one value"),
            (req("cores", "Lt", &["many"]), "needs an integer"),
            (req("zone", "Near", &["a"]), "is not supported"),
        ];
        for (requirement, expected) in cases {
            let t = term(&core::NodeSelectorTerm {
                match_expressions: Some(vec![requirement]),
                match_fields: None,
            });
            let why = t.invalid.expect("term should be invalid");
            assert!(why.contains(expected), "{why}");
        }
        let t = term(&core::NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![req("metadata.name", "Exists", &[])]),
        });
        assert!(t.invalid.unwrap().contains("only In and NotIn"));
    }

    #[test]
    fn affinity_without_terms_is_kept_as_matching_nothing() {
        let c = constraints_of_spec(&spec_with_terms(vec![]));
        assert_eq!(c.required_node_affinity, Some(vec![]));
    }

    #[test]
    fn preferred_affinity_alone_constrains_nothing() {
        let spec = PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity::default()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(constraints_of_spec(&spec), Constraints::default());
    }
}
