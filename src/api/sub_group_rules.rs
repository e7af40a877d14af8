//! The rules a PodGroup's `subGroupPolicy` keeps (a gang of sub-groups, each of whole
//! instances; `gangplank_core::model::sub_groups`), which the PodGroup webhook enforces and
//! the controller applies before it copies a Volcano PodGroup's policy: unique names, each sub-group selecting by
//! `labelSelector.matchLabels` alone and splitting by one to four valid label keys, and
//! `minMember` equal to the members its minimum counts, so that the extender's quorum is
//! exactly the whole instances admission releases; an instance-level `topologyKey` a valid
//! label key, and not beside the gang's own topology keys. No `minResources` beside it: the room kept
//! for members still to come has no labels to split by.

use std::collections::BTreeSet;

use gangplank_core::limits::MAX_MEMBERS;

use super::labels::label_key_problem;
use super::pod_group::{PodGroupSpec, SubGroupPolicy};

/// Every problem of `spec.subGroupPolicy`, each as `<field>: <what is wrong and what would
/// be accepted>`.
pub fn problems(spec: &PodGroupSpec) -> Vec<String> {
    let mut errors = Problems::default();
    check(spec, &mut errors);
    errors.0
}

/// Problems found, as the webhooks word a field's: `<field>: <problem>`.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, field: impl std::fmt::Display, problem: impl std::fmt::Display) {
        self.0.push(format!("{field}: {problem}"));
    }
}

fn check(spec: &PodGroupSpec, errors: &mut Problems) {
    let policies = &spec.sub_group_policy;
    if policies.is_empty() {
        return;
    }
    let limit = gangplank_core::limits::MAX_SUB_GROUPS;
    if policies.len() > limit as usize {
        errors.add(
            "spec.subGroupPolicy",
            format!(
                "must list at most {limit} sub-groups, got {}",
                policies.len()
            ),
        );
    }
    let mut names = BTreeSet::new();
    let mut minimum: i64 = 0;
    for (i, policy) in policies.iter().enumerate() {
        let field = format!("spec.subGroupPolicy[{i}]");
        if !names.insert(policy.name.as_str()) {
            errors.add(
                format!("{field}.name"),
                format!(
                    "{:?} names another sub-group too; names must be unique",
                    policy.name
                ),
            );
        }
        check_one(&field, policy, errors);
        let gang_level = [
            ("topologyKey", &spec.topology_key),
            ("preferredTopologyKey", &spec.preferred_topology_key),
        ]
        .into_iter()
        .find(|(_, key)| key.is_some());
        if let (Some(_), Some((gang_field, _))) = (&policy.topology_key, gang_level) {
            errors.add(
                format!("{field}.topologyKey"),
                format!(
                    "cannot be set with spec.{gang_field}: keep the instances' level or the whole gang's, not both"
                ),
            );
        }
        minimum = minimum.saturating_add(
            i64::from(policy.sub_group_size.max(0)) * i64::from(policy.min_sub_groups.max(0)),
        );
    }
    if minimum != i64::from(spec.min_member) {
        errors.add(
            "spec.minMember",
            format!(
                "must be {minimum}, the members of the gang's minimum (the sum of minSubGroups × subGroupSize of spec.subGroupPolicy), got {}",
                spec.min_member
            ),
        );
    }
    if !spec.min_resources.is_empty() {
        errors.add(
            "spec.minResources",
            "must be unset with spec.subGroupPolicy: the gang's minimum is its whole instances",
        );
    }
}

/// Records the problems of one sub-group, `field` naming it.
fn check_one(field: &str, policy: &SubGroupPolicy, errors: &mut Problems) {
    for (name, value) in [
        ("subGroupSize", policy.sub_group_size),
        ("minSubGroups", policy.min_sub_groups),
    ] {
        if !(1..=i64::from(MAX_MEMBERS)).contains(&i64::from(value)) {
            errors.add(
                format!("{field}.{name}"),
                format!("must be from 1 to {MAX_MEMBERS}, got {value}"),
            );
        }
    }
    if policy.name.is_empty() {
        errors.add(format!("{field}.name"), "must not be empty");
    }
    let keys = &policy.match_label_keys;
    if keys.is_empty() || keys.len() > 4 {
        errors.add(
            format!("{field}.matchLabelKeys"),
            format!(
                "must list from 1 to 4 label keys whose values tell instances apart, got {}",
                keys.len()
            ),
        );
    }
    for (k, key) in keys.iter().enumerate() {
        if let Some(problem) = label_key_problem(key) {
            errors.add(format!("{field}.matchLabelKeys[{k}]"), problem);
        }
    }
    if let Some(problem) = policy.topology_key.as_deref().and_then(label_key_problem) {
        errors.add(format!("{field}.topologyKey"), problem);
    }
    let Some(selector) = &policy.label_selector else {
        return;
    };
    if selector
        .match_expressions
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        errors.add(
            format!("{field}.labelSelector.matchExpressions"),
            "is not supported: select the sub-group's members with matchLabels",
        );
    }
    for key in selector.match_labels.iter().flat_map(|m| m.keys()) {
        if let Some(problem) = label_key_problem(key) {
            errors.add(format!("{field}.labelSelector.matchLabels[{key}]"), problem);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

    use super::*;

    fn policy(name: &str, size: i32, min: i32) -> SubGroupPolicy {
        SubGroupPolicy {
            name: name.into(),
            sub_group_size: size,
            min_sub_groups: min,
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("role".into(), name.into())])),
                match_expressions: None,
            }),
            match_label_keys: vec!["instance".into()],
            topology_key: None,
        }
    }

    fn problems(spec: &PodGroupSpec) -> String {
        super::problems(spec).join("; ")
    }

    fn service(min_member: i32) -> PodGroupSpec {
        PodGroupSpec {
            sub_group_policy: vec![
                policy("prefill", 2, 2),
                policy("decode", 4, 1),
                policy("router", 1, 1),
            ],
            ..PodGroupSpec::with_min_member(min_member)
        }
    }

    #[test]
    fn a_service_whose_min_member_is_its_minimum_is_accepted() {
        assert_eq!(problems(&service(9)), "");
    }

    #[test]
    fn a_min_member_other_than_the_minimum_is_refused_naming_the_sum() {
        let message = problems(&service(8));
        assert!(
            message.contains("spec.minMember: must be 9, the members of the gang's minimum"),
            "{message}"
        );
    }

    #[test]
    fn duplicate_names_expressions_bad_keys_and_sizes_are_each_named() {
        let mut spec = service(9);
        spec.sub_group_policy[1].name = "prefill".into();
        spec.sub_group_policy[2].label_selector = Some(LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "role".into(),
                operator: "Exists".into(),
                values: None,
            }]),
        });
        spec.sub_group_policy[0].match_label_keys = vec!["not a key!".into()];
        spec.sub_group_policy[0].sub_group_size = 0;
        let message = problems(&spec);
        for field in [
            "spec.subGroupPolicy[1].name",
            "spec.subGroupPolicy[2].labelSelector.matchExpressions",
            "spec.subGroupPolicy[0].matchLabelKeys[0]",
            "spec.subGroupPolicy[0].subGroupSize",
        ] {
            assert!(message.contains(field), "{field} not named in {message}");
        }
    }

    #[test]
    fn an_instance_level_is_a_label_key_and_not_beside_the_gang_s_own_level() {
        let mut spec = service(9);
        spec.sub_group_policy[0].topology_key = Some("example.com/rack".into());
        assert_eq!(problems(&spec), "");
        spec.sub_group_policy[1].topology_key = Some("not a key!".into());
        spec.preferred_topology_key = Some("topology.kubernetes.io/zone".into());
        let message = problems(&spec);
        assert!(
            message.contains("spec.subGroupPolicy[1].topologyKey: ")
                && message.contains(
                    "spec.subGroupPolicy[0].topologyKey: cannot be set with spec.preferredTopologyKey"
                ),
            "{message}"
        );
    }

    #[test]
    fn min_resources_beside_sub_groups_is_refused() {
        let mut spec = service(9);
        spec.min_resources.insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("4".into()),
        );
        assert!(problems(&spec).contains("spec.minResources"));
    }
}
