//! Node feasibility: may this pod run on this node at all, and if not, why.
//!
//! Why it exists: planning a gang (the admission loop's "does the whole gang fit now", the
//! extender's claim accounting) must know which nodes each member may land on, over the whole
//! cluster and not only over the sample of nodes the scheduler sends. The scheduler's own filters
//! still decide the real placement; this module mirrors those of them that depend only on the
//! pod spec and the node object, so that a plan never counts a node the scheduler will refuse:
//! - NodeUnschedulable: a cordoned node takes only pods that tolerate
//!   `node.kubernetes.io/unschedulable:NoSchedule` (DaemonSet pods do);
//! - TaintToleration: every `NoSchedule` and `NoExecute` taint must be tolerated;
//!   `PreferNoSchedule` only lowers the scheduler's score and never blocks here;
//! - NodeAffinity: `nodeSelector` (every pair must match a label exactly) and required node
//!   affinity (`nodeSelectorTerms` ORed; inside a term `matchExpressions` and `matchFields`
//!   ANDed).
//!
//! Matching follows upstream exactly, corner cases included (component-helpers'
//! `Toleration.ToleratesTaint` and `nodeaffinity`): an empty toleration key matches every key,
//! a missing operator means `Equal`, an empty effect matches every effect, `Lt`/`Gt`
//! tolerations compare the taint's integer value with theirs (`TaintTolerationComparisonOperators`);
//! a term with neither expressions nor fields matches no node, an invalid term (which the API
//! server rejects, so only objects that slipped past an older validation have them) matches no
//! node, `NotIn` and `DoesNotExist` match nodes without the label, `Gt`/`Lt` need the label to
//! hold an integer, and `matchFields` knows only `metadata.name`.
//!
//! Not mirrored: resources (see [`super::placement`]), host ports, volumes, inter-pod affinity
//! and topology spread. They depend on other pods and stay the scheduler's to check.
//!
//! Cost: a plan evaluates this for every member against every node. The common case (a pod with
//! no selector, no affinity and no tolerations on an untainted, schedulable node) is a handful
//! of branches with no allocation; an [`Infeasible`] borrows from its inputs and formats its
//! words only when displayed, so rejecting thousands of nodes is cheap too. Values that need
//! parsing (`Gt`/`Lt` thresholds) are parsed once, when the constraints are built.

use std::fmt;

use crate::model::{Node, Taint, TaintEffect};

/// The taint key the scheduler checks a cordoned node against (`spec.unschedulable`).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// The node field `matchFields` may name; the only one the scheduler supports.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// A pod's placement constraints that depend only on its spec and the node: see the module docs.
/// Built from an API object by `gangplank::cache::constraints::constraints_of`; the default
/// (nothing set) allows every schedulable, untainted node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Constraints {
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// `spec.nodeSelector` as (key, value) pairs, sorted by key.
    pub node_selector: Vec<(String, String)>,
    /// The terms of `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`,
    /// ORed; `None` when unset (any node), `Some(empty)` when set with no terms (no node).
    pub required_node_affinity: Option<Vec<NodeSelectorTerm>>,
}

impl Constraints {
    /// True when nothing but cordons and untolerated taints can make a node infeasible.
    pub fn is_unconstrained(&self) -> bool {
        self.node_selector.is_empty() && self.required_node_affinity.is_none()
    }

    /// Whether one of the pod's tolerations tolerates `taint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        let value = taint.value.as_deref().unwrap_or("");
        self.tolerations
            .iter()
            .any(|t| t.tolerates_parts(&taint.key, value, &taint.effect))
    }

    /// Whether the pod may land on a cordoned node, as the scheduler's NodeUnschedulable plugin
    /// decides it: by tolerating `node.kubernetes.io/unschedulable:NoSchedule`.
    pub fn tolerates_cordon(&self) -> bool {
        self.tolerations
            .iter()
            .any(|t| t.tolerates_parts(UNSCHEDULABLE_TAINT_KEY, "", &TaintEffect::NoSchedule))
    }
}

/// One entry of `spec.tolerations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    /// The taint key it applies to; `None` (empty in the API) matches every key.
    pub key: Option<String>,
    pub operator: TolerationOperator,
    /// The taint effect it applies to; `None` (empty in the API) matches every effect.
    pub effect: Option<TaintEffect>,
}

/// How a toleration compares its value with a taint's, with the value it compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TolerationOperator {
    /// Any value.
    Exists,
    /// Exactly this value (a taint without a value has the empty value). The API's default.
    Equal(String),
    /// The taint's value is an integer less than this one.
    Lt(i64),
    /// The taint's value is an integer greater than this one.
    Gt(i64),
    /// An operator this version does not know, or `Lt`/`Gt` with a value that is not an
    /// integer: tolerates nothing, as in the scheduler. The text says what was wrong.
    Invalid(String),
}

impl Toleration {
    /// Whether this toleration tolerates `taint` (upstream `ToleratesTaint`).
    pub fn tolerates(&self, taint: &Taint) -> bool {
        self.tolerates_parts(
            &taint.key,
            taint.value.as_deref().unwrap_or(""),
            &taint.effect,
        )
    }

    fn tolerates_parts(&self, key: &str, value: &str, effect: &TaintEffect) -> bool {
        if self.effect.as_ref().is_some_and(|e| e != effect) {
            return false;
        }
        if self.key.as_deref().is_some_and(|k| k != key) {
            return false;
        }
        match &self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal(v) => v == value,
            TolerationOperator::Lt(v) => decimal_integer(value).is_some_and(|t| t < *v),
            TolerationOperator::Gt(v) => decimal_integer(value).is_some_and(|t| t > *v),
            TolerationOperator::Invalid(_) => false,
        }
    }
}

/// Parses an integer the way upstream's `Lt`/`Gt` tolerations accept it (`IsDecimalInteger`
/// then `ParseInt`): `0`, or an optional `-` and digits without leading zeros.
pub fn decimal_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = match digits.as_bytes() {
        [b'0'] => digits.len() == s.len(),
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if canonical { s.parse().ok() } else { None }
}

/// One term of required node affinity: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    /// `matchExpressions`, on node labels.
    pub match_expressions: Vec<LabelRequirement>,
    /// `matchFields`, on node fields.
    pub match_fields: Vec<FieldRequirement>,
    /// Why the term is invalid, when it is. The scheduler never matches an invalid term.
    pub invalid: Option<String>,
}

impl NodeSelectorTerm {
    /// Whether the node satisfies this term.
    pub fn matches(&self, node: &Node) -> bool {
        matches!(self.first_unmet(node), Unmet::Nothing)
    }

    /// The first reason this term does not match `node`, for messages.
    fn first_unmet(&self, node: &Node) -> Unmet<'_> {
        if let Some(why) = &self.invalid {
            return Unmet::Invalid(why);
        }
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return Unmet::Empty;
        }
        if let Some(r) = self.match_expressions.iter().find(|r| !r.matches(node)) {
            return Unmet::Label(r);
        }
        if let Some(r) = self.match_fields.iter().find(|r| !r.matches(node)) {
            return Unmet::Field(r);
        }
        Unmet::Nothing
    }
}

enum Unmet<'a> {
    Nothing,
    Invalid(&'a str),
    Empty,
    Label(&'a LabelRequirement),
    Field(&'a FieldRequirement),
}

/// A `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: LabelOperator,
}

/// The operators of `matchExpressions`, each with the values it needs, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelOperator {
    /// The label is present with one of these values.
    In(Vec<String>),
    /// The label is absent or has none of these values.
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    /// The label is present and holds an integer greater than this one.
    Gt(i64),
    /// The label is present and holds an integer less than this one.
    Lt(i64),
}

impl LabelRequirement {
    pub fn matches(&self, node: &Node) -> bool {
        let label = node.labels.get(self.key.as_str()).map(String::as_str);
        match (&self.operator, label) {
            (LabelOperator::In(values), Some(v)) => values.iter().any(|x| x == v),
            (LabelOperator::In(_), None) => false,
            (LabelOperator::NotIn(values), Some(v)) => !values.iter().any(|x| x == v),
            (LabelOperator::NotIn(_), None) => true,
            (LabelOperator::Exists, found) => found.is_some(),
            (LabelOperator::DoesNotExist, found) => found.is_none(),
            (LabelOperator::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *n),
            (LabelOperator::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *n),
            (LabelOperator::Gt(_) | LabelOperator::Lt(_), None) => false,
        }
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        match &self.operator {
            LabelOperator::In(values) => write!(f, "{key} in ({})", values.join(", ")),
            LabelOperator::NotIn(values) => write!(f, "{key} not in ({})", values.join(", ")),
            LabelOperator::Exists => write!(f, "label {key} exists"),
            LabelOperator::DoesNotExist => write!(f, "label {key} does not exist"),
            LabelOperator::Gt(n) => write!(f, "{key} > {n}"),
            LabelOperator::Lt(n) => write!(f, "{key} < {n}"),
        }
    }
}

/// A `matchFields` entry: the scheduler accepts only `In` and `NotIn` with exactly one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field; only [`NODE_NAME_FIELD`] has a value, any other field reads as empty.
    pub field: String,
    /// `true` for `In`, `false` for `NotIn`.
    pub equal: bool,
    pub value: String,
}

impl FieldRequirement {
    pub fn matches(&self, node: &Node) -> bool {
        (field_of(node, &self.field) == self.value) == self.equal
    }
}

fn field_of<'a>(node: &'a Node, field: &str) -> &'a str {
    if field == NODE_NAME_FIELD {
        &node.name
    } else {
        ""
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let relation = if self.equal { "is" } else { "is not" };
        write!(f, "{} {relation} {}", self.field, self.value)
    }
}

/// Why a node is not feasible for a pod. Borrows from the node and the constraints, so that a
/// rejection costs nothing until it is displayed (`to_string()` for an owned message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Infeasible<'a> {
    #[error("node is cordoned")]
    Cordoned,
    #[error("taint {} not tolerated", TaintText(.0))]
    Taint(&'a Taint),
    #[error("node selector {key}={value} does not match ({})", LabelText(.key, *.node_value))]
    NodeSelector {
        key: &'a str,
        value: &'a str,
        /// The node's value for `key`, `None` when it has no such label.
        node_value: Option<&'a str>,
    },
    #[error("required node affinity does not match: {}", AffinityText(.node, .terms))]
    NodeAffinity {
        node: &'a Node,
        terms: &'a [NodeSelectorTerm],
    },
}

/// Whether `node` may take a pod with `constraints`, checked in order of cost: cordon, taints,
/// node selector, required node affinity. Returns the first reason it may not.
#[inline]
pub fn feasible<'a>(node: &'a Node, constraints: &'a Constraints) -> Result<(), Infeasible<'a>> {
    if node.unschedulable && !constraints.tolerates_cordon() {
        return Err(Infeasible::Cordoned);
    }
    for taint in &node.taints {
        if taint.effect.blocks_scheduling() && !constraints.tolerates(taint) {
            return Err(Infeasible::Taint(taint));
        }
    }
    if constraints.is_unconstrained() {
        return Ok(());
    }
    for (key, value) in &constraints.node_selector {
        let node_value = node.labels.get(key.as_str()).map(String::as_str);
        if node_value != Some(value.as_str()) {
            return Err(Infeasible::NodeSelector {
                key,
                value,
                node_value,
            });
        }
    }
    if let Some(terms) = &constraints.required_node_affinity
        && !terms.iter().any(|t| t.matches(node))
    {
        return Err(Infeasible::NodeAffinity { node, terms });
    }
    Ok(())
}

/// The name of a taint effect as the API spells it.
pub fn effect_name(effect: &TaintEffect) -> &str {
    match effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
        TaintEffect::Other(name) => name,
    }
}

/// A taint as kubectl prints it: `key=value:Effect`, or `key:Effect` without a value.
struct TaintText<'a>(&'a Taint);

impl fmt::Display for TaintText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, effect) = (&self.0.key, effect_name(&self.0.effect));
        match self.0.value.as_deref() {
            Some(v) if !v.is_empty() => write!(f, "{key}={v}:{effect}"),
            _ => write!(f, "{key}:{effect}"),
        }
    }
}

/// What a node has for a label: `node has zone=b` or `node has no label zone`.
struct LabelText<'a>(&'a str, Option<&'a str>);

impl fmt::Display for LabelText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(v) => write!(f, "node has {}={v}", self.0),
            None => write!(f, "node has no label {}", self.0),
        }
    }
}

/// For each term, the first requirement the node fails and what the node has instead.
struct AffinityText<'a>(&'a Node, &'a [NodeSelectorTerm]);

impl fmt::Display for AffinityText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (node, terms) = (self.0, self.1);
        match terms.len() {
            0 => return f.write_str("it has no terms, so no node matches"),
            1 => {}
            n => write!(f, "none of its {n} terms matches: ")?,
        }
        for (i, term) in terms.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            if terms.len() > 1 {
                write!(f, "term {}: ", i + 1)?;
            }
            match term.first_unmet(node) {
                Unmet::Nothing => f.write_str("matches")?,
                Unmet::Invalid(why) => write!(f, "invalid ({why}), matches no node")?,
                Unmet::Empty => f.write_str("empty, matches no node")?,
                Unmet::Label(r) => {
                    let label = node.labels.get(r.key.as_str()).map(String::as_str);
                    write!(f, "{r} ({})", LabelText(&r.key, label))?
                }
                Unmet::Field(r) => write!(f, "{r} ({} is {})", r.field, field_of(node, &r.field))?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::Resources;

    fn node(labels: &[(&str, &str)], taints: Vec<Taint>) -> Node {
        Node {
            name: "n1".into(),
            allocatable: Resources::new(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints,
            unschedulable: false,
            not_ready: false,
        }
    }

    fn taint(key: &str, value: Option<&str>, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(str::to_owned),
            effect,
        }
    }

    fn toleration(
        key: Option<&str>,
        operator: TolerationOperator,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: key.map(str::to_owned),
            operator,
            effect,
        }
    }

    fn equal(v: &str) -> TolerationOperator {
        TolerationOperator::Equal(v.into())
    }

    fn tolerating(tolerations: Vec<Toleration>) -> Constraints {
        Constraints {
            tolerations,
            ..Default::default()
        }
    }

    fn selecting(pairs: &[(&str, &str)]) -> Constraints {
        Constraints {
            node_selector: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn expr(key: &str, operator: LabelOperator) -> LabelRequirement {
        LabelRequirement {
            key: key.into(),
            operator,
        }
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    fn term(exprs: Vec<LabelRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: exprs,
            ..Default::default()
        }
    }

    fn with_affinity(terms: Vec<NodeSelectorTerm>) -> Constraints {
        Constraints {
            required_node_affinity: Some(terms),
            ..Default::default()
        }
    }

    fn why(node: &Node, c: &Constraints) -> String {
        feasible(node, c).unwrap_err().to_string()
    }

    #[test]
    fn unconstrained_pod_fits_a_plain_node() {
        assert_eq!(
            feasible(&node(&[], vec![]), &Constraints::default()),
            Ok(())
        );
    }

    #[test]
    fn cordoned_node_is_refused_with_a_plain_reason() {
        let mut n = node(&[], vec![]);
        n.unschedulable = true;
        assert_eq!(why(&n, &Constraints::default()), "node is cordoned");
    }

    #[test]
    fn cordoned_node_takes_a_pod_tolerating_the_unschedulable_taint() {
        let mut n = node(&[], vec![]);
        n.unschedulable = true;
        let daemon = tolerating(vec![toleration(
            Some(UNSCHEDULABLE_TAINT_KEY),
            TolerationOperator::Exists,
            Some(TaintEffect::NoSchedule),
        )]);
        assert_eq!(feasible(&n, &daemon), Ok(()));
        let wrong_effect = tolerating(vec![toleration(
            Some(UNSCHEDULABLE_TAINT_KEY),
            TolerationOperator::Exists,
            Some(TaintEffect::NoExecute),
        )]);
        assert_eq!(feasible(&n, &wrong_effect), Err(Infeasible::Cordoned));
    }

    #[test]
    fn untolerated_no_schedule_taint_is_named_like_kubectl_prints_it() {
        let n = node(
            &[],
            vec![taint("gpu", Some("true"), TaintEffect::NoSchedule)],
        );
        assert_eq!(
            why(&n, &Constraints::default()),
            "taint gpu=true:NoSchedule not tolerated"
        );
        let n = node(&[], vec![taint("dedicated", None, TaintEffect::NoExecute)]);
        assert_eq!(
            why(&n, &Constraints::default()),
            "taint dedicated:NoExecute not tolerated"
        );
    }

    #[test]
    fn prefer_no_schedule_and_unknown_effects_never_block() {
        let n = node(
            &[],
            vec![
                taint("spot", Some("true"), TaintEffect::PreferNoSchedule),
                taint("odd", None, TaintEffect::Other("Whatever".into())),
            ],
        );
        assert_eq!(feasible(&n, &Constraints::default()), Ok(()));
    }

    #[test]
    fn equal_toleration_needs_the_same_key_value_and_effect() {
        let t = taint("gpu", Some("true"), TaintEffect::NoSchedule);
        let ok = toleration(Some("gpu"), equal("true"), Some(TaintEffect::NoSchedule));
        assert!(ok.tolerates(&t));
        let wrong_value = toleration(Some("gpu"), equal("false"), None);
        assert!(!wrong_value.tolerates(&t));
        let wrong_key = toleration(Some("tpu"), equal("true"), None);
        assert!(!wrong_key.tolerates(&t));
        let wrong_effect = toleration(Some("gpu"), equal("true"), Some(TaintEffect::NoExecute));
        assert!(!wrong_effect.tolerates(&t));
    }

    #[test]
    fn equal_toleration_with_empty_value_matches_a_taint_without_value() {
        let t = taint("dedicated", None, TaintEffect::NoSchedule);
        assert!(toleration(Some("dedicated"), equal(""), None).tolerates(&t));
        assert!(!toleration(Some("dedicated"), equal("x"), None).tolerates(&t));
    }

    #[test]
    fn exists_toleration_matches_every_value_of_its_key() {
        let tol = toleration(Some("gpu"), TolerationOperator::Exists, None);
        assert!(tol.tolerates(&taint("gpu", Some("a"), TaintEffect::NoSchedule)));
        assert!(tol.tolerates(&taint("gpu", None, TaintEffect::NoExecute)));
        assert!(!tol.tolerates(&taint("tpu", None, TaintEffect::NoExecute)));
    }

    #[test]
    fn empty_key_exists_toleration_tolerates_everything() {
        let tol = toleration(None, TolerationOperator::Exists, None);
        assert!(tol.tolerates(&taint("a", Some("b"), TaintEffect::NoSchedule)));
        assert!(tol.tolerates(&taint("c", None, TaintEffect::NoExecute)));
        let mut n = node(&[], vec![taint("x", None, TaintEffect::NoSchedule)]);
        n.unschedulable = true;
        assert_eq!(feasible(&n, &tolerating(vec![tol])), Ok(()));
    }

    #[test]
    fn empty_key_equal_toleration_matches_any_key_with_that_value() {
        // Validation forbids it, but upstream's matcher accepts it: mirror the matcher.
        let tol = toleration(None, equal("v"), None);
        assert!(tol.tolerates(&taint("anything", Some("v"), TaintEffect::NoSchedule)));
        assert!(!tol.tolerates(&taint("anything", Some("w"), TaintEffect::NoSchedule)));
    }

    #[test]
    fn comparison_tolerations_compare_the_taint_value_with_theirs() {
        let sla = |v: &str| taint("sla", Some(v), TaintEffect::NoSchedule);
        let gt = toleration(Some("sla"), TolerationOperator::Gt(900), None);
        assert!(gt.tolerates(&sla("950")));
        assert!(!gt.tolerates(&sla("900")));
        assert!(!gt.tolerates(&sla("high")));
        assert!(
            !gt.tolerates(&sla("0950")),
            "leading zeros are not integers"
        );
        let lt = toleration(Some("sla"), TolerationOperator::Lt(900), None);
        assert!(lt.tolerates(&sla("-5")));
        assert!(!lt.tolerates(&sla("900")));
        assert!(!lt.tolerates(&taint("sla", None, TaintEffect::NoSchedule)));
    }

    #[test]
    fn invalid_toleration_tolerates_nothing() {
        let tol = toleration(None, TolerationOperator::Invalid("bad".into()), None);
        assert!(!tol.tolerates(&taint("a", None, TaintEffect::NoSchedule)));
    }

    #[test]
    fn decimal_integers_are_canonical() {
        assert_eq!(decimal_integer("0"), Some(0));
        assert_eq!(decimal_integer("-12"), Some(-12));
        assert_eq!(decimal_integer("950"), Some(950));
        for bad in [
            "",
            "-",
            "-0",
            "+1",
            "01",
            "1.5",
            "1e3",
            " 1",
            "99999999999999999999",
        ] {
            assert_eq!(decimal_integer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn first_untolerated_taint_is_reported_when_several_block() {
        let n = node(
            &[],
            vec![
                taint("a", None, TaintEffect::NoSchedule),
                taint("b", Some("1"), TaintEffect::NoExecute),
            ],
        );
        let c = tolerating(vec![toleration(
            Some("a"),
            TolerationOperator::Exists,
            None,
        )]);
        assert_eq!(why(&n, &c), "taint b=1:NoExecute not tolerated");
    }

    #[test]
    fn node_selector_needs_every_pair_to_match_exactly() {
        let n = node(&[("zone", "a"), ("disk", "ssd")], vec![]);
        assert_eq!(feasible(&n, &selecting(&[("zone", "a")])), Ok(()));
        assert_eq!(
            feasible(&n, &selecting(&[("disk", "ssd"), ("zone", "a")])),
            Ok(())
        );
        assert_eq!(
            why(&n, &selecting(&[("zone", "b")])),
            "node selector zone=b does not match (node has zone=a)"
        );
        assert_eq!(
            why(&n, &selecting(&[("gpu", "true")])),
            "node selector gpu=true does not match (node has no label gpu)"
        );
    }

    #[test]
    fn label_operators_follow_upstream_semantics() {
        let n = node(&[("zone", "a"), ("cores", "16"), ("name", "x")], vec![]);
        let cases = [
            (expr("zone", LabelOperator::In(strings(&["a", "b"]))), true),
            (expr("zone", LabelOperator::In(strings(&["b"]))), false),
            (expr("rack", LabelOperator::In(strings(&["a"]))), false),
            (expr("zone", LabelOperator::NotIn(strings(&["b"]))), true),
            (expr("zone", LabelOperator::NotIn(strings(&["a"]))), false),
            (expr("rack", LabelOperator::NotIn(strings(&["a"]))), true),
            (expr("zone", LabelOperator::Exists), true),
            (expr("rack", LabelOperator::Exists), false),
            (expr("rack", LabelOperator::DoesNotExist), true),
            (expr("zone", LabelOperator::DoesNotExist), false),
            (expr("cores", LabelOperator::Gt(8)), true),
            (expr("cores", LabelOperator::Gt(16)), false),
            (expr("cores", LabelOperator::Lt(32)), true),
            (expr("cores", LabelOperator::Lt(16)), false),
            (expr("name", LabelOperator::Gt(0)), false),
            (expr("rack", LabelOperator::Lt(100)), false),
        ];
        for (requirement, expected) in cases {
            assert_eq!(requirement.matches(&n), expected, "{requirement}");
        }
    }

    #[test]
    fn affinity_terms_are_ored_and_their_expressions_anded() {
        let n = node(&[("zone", "a"), ("disk", "ssd")], vec![]);
        let zone_a = expr("zone", LabelOperator::In(strings(&["a"])));
        let zone_b = expr("zone", LabelOperator::In(strings(&["b"])));
        let hdd = expr("disk", LabelOperator::In(strings(&["hdd"])));
        let c = with_affinity(vec![term(vec![zone_b.clone()]), term(vec![zone_a.clone()])]);
        assert_eq!(feasible(&n, &c), Ok(()));
        let c = with_affinity(vec![term(vec![zone_a, hdd])]);
        assert_eq!(
            why(&n, &c),
            "required node affinity does not match: disk in (hdd) (node has disk=ssd)"
        );
    }

    #[test]
    fn affinity_message_explains_every_term() {
        let n = node(&[("zone", "a")], vec![]);
        let c = with_affinity(vec![
            term(vec![expr("zone", LabelOperator::In(strings(&["b", "c"])))]),
            term(vec![expr("gpu", LabelOperator::Exists)]),
            NodeSelectorTerm::default(),
        ]);
        assert_eq!(
            why(&n, &c),
            "required node affinity does not match: none of its 3 terms matches: \
             term 1: zone in (b, c) (node has zone=a); \
             term 2: label gpu exists (node has no label gpu); \
             term 3: empty, matches no node"
        );
    }

    #[test]
    fn empty_and_invalid_terms_match_no_node() {
        let n = node(&[("zone", "a")], vec![]);
        assert!(!NodeSelectorTerm::default().matches(&n));
        let invalid = NodeSelectorTerm {
            match_expressions: vec![expr("zone", LabelOperator::Exists)],
            invalid: Some("operator Near is not supported".into()),
            ..Default::default()
        };
        assert!(!invalid.matches(&n));
        assert_eq!(
            why(&n, &with_affinity(vec![invalid])),
            "required node affinity does not match: \
             invalid (operator Near is not supported), matches no node"
        );
        assert_eq!(
            why(&n, &with_affinity(vec![])),
            "required node affinity does not match: it has no terms, so no node matches"
        );
    }

    #[test]
    fn match_fields_compare_the_node_name() {
        let n = node(&[], vec![]);
        let field = |field: &str, equal: bool, value: &str| NodeSelectorTerm {
            match_fields: vec![FieldRequirement {
                field: field.into(),
                equal,
                value: value.into(),
            }],
            ..Default::default()
        };
        assert!(field(NODE_NAME_FIELD, true, "n1").matches(&n));
        assert!(!field(NODE_NAME_FIELD, true, "n2").matches(&n));
        assert!(field(NODE_NAME_FIELD, false, "n2").matches(&n));
        assert!(!field("spec.unknown", true, "n1").matches(&n));
        assert!(field("spec.unknown", false, "n1").matches(&n));
        assert_eq!(
            why(&n, &with_affinity(vec![field(NODE_NAME_FIELD, true, "n2")])),
            "required node affinity does not match: \
             metadata.name is n2 (metadata.name is n1)"
        );
    }

    #[test]
    fn a_term_needs_both_its_expressions_and_its_fields() {
        let n = node(&[("zone", "a")], vec![]);
        let t = NodeSelectorTerm {
            match_expressions: vec![expr("zone", LabelOperator::Exists)],
            match_fields: vec![FieldRequirement {
                field: NODE_NAME_FIELD.into(),
                equal: true,
                value: "n2".into(),
            }],
            invalid: None,
        };
        assert!(!t.matches(&n));
    }

    #[test]
    fn cordon_is_reported_before_taints_and_selectors() {
        let mut n = node(&[], vec![taint("a", None, TaintEffect::NoSchedule)]);
        n.unschedulable = true;
        assert_eq!(why(&n, &selecting(&[("zone", "a")])), "node is cordoned");
    }

    #[test]
    fn rejection_borrows_and_can_be_kept_as_a_string() {
        let n = node(&[], vec![taint("gpu", Some("1"), TaintEffect::NoSchedule)]);
        let c = Constraints::default();
        let owned: String = match feasible(&n, &c) {
            Err(e) => e.to_string(),
            Ok(()) => unreachable!(),
        };
        drop(n);
        assert_eq!(owned, "taint gpu=1:NoSchedule not tolerated");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        static KEYS: [&str; 4] = ["zone", "gpu", "disk", "cores"];
        static VALUES: [&str; 4] = ["a", "b", "1", "16"];

        fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
            prop::collection::btree_map(
                prop::sample::select(&KEYS[..]).prop_map(str::to_owned),
                prop::sample::select(&VALUES[..]).prop_map(str::to_owned),
                0..4,
            )
        }

        fn effect() -> impl Strategy<Value = TaintEffect> {
            prop_oneof![
                Just(TaintEffect::NoSchedule),
                Just(TaintEffect::PreferNoSchedule),
                Just(TaintEffect::NoExecute),
            ]
        }

        fn taints() -> impl Strategy<Value = Vec<Taint>> {
            let one = (
                prop::sample::select(&KEYS[..]),
                prop::option::of(prop::sample::select(&VALUES[..])),
                effect(),
            )
                .prop_map(|(k, v, e)| taint(k, v, e));
            prop::collection::vec(one, 0..3)
        }

        fn a_node() -> impl Strategy<Value = Node> {
            (labels(), taints(), any::<bool>()).prop_map(|(labels, taints, cordoned)| Node {
                name: "n1".into(),
                allocatable: Resources::new(),
                labels,
                taints,
                unschedulable: cordoned,
                not_ready: false,
            })
        }

        fn tolerations() -> impl Strategy<Value = Vec<Toleration>> {
            let operator = prop_oneof![
                Just(TolerationOperator::Exists),
                prop::sample::select(&VALUES[..]).prop_map(|v| TolerationOperator::Equal(v.into())),
                (0i64..20).prop_map(TolerationOperator::Gt),
            ];
            let one = (
                prop::option::of(prop::sample::select(&KEYS[..])),
                operator,
                prop::option::of(effect()),
            )
                .prop_map(|(k, operator, effect)| toleration(k, operator, effect));
            prop::collection::vec(one, 0..3)
        }

        fn values() -> impl Strategy<Value = Vec<String>> {
            prop::collection::vec(
                prop::sample::select(&VALUES[..]).prop_map(str::to_owned),
                1..3,
            )
        }

        proptest! {
            #[test]
            fn not_in_is_the_complement_of_in(n in a_node(), key in prop::sample::select(&KEYS[..]), vals in values()) {
                let is_in = expr(key, LabelOperator::In(vals.clone())).matches(&n);
                let not_in = expr(key, LabelOperator::NotIn(vals)).matches(&n);
                prop_assert_ne!(is_in, not_in);
            }

            #[test]
            fn does_not_exist_is_the_complement_of_exists(n in a_node(), key in prop::sample::select(&KEYS[..])) {
                prop_assert_ne!(
                    expr(key, LabelOperator::Exists).matches(&n),
                    expr(key, LabelOperator::DoesNotExist).matches(&n)
                );
            }

            #[test]
            fn a_pod_tolerating_everything_and_selecting_the_nodes_own_labels_fits(n in a_node(), take in 0usize..4) {
                let c = Constraints {
                    tolerations: vec![toleration(None, TolerationOperator::Exists, None)],
                    node_selector: n.labels.iter().take(take).map(|(k, v)| (k.clone(), v.clone())).collect(),
                    required_node_affinity: None,
                };
                prop_assert_eq!(feasible(&n, &c), Ok(()));
            }

            #[test]
            fn more_tolerations_never_make_a_node_infeasible(n in a_node(), base in tolerations(), extra in tolerations()) {
                let fewer = tolerating(base.clone());
                let more = tolerating(base.into_iter().chain(extra).collect());
                if feasible(&n, &fewer).is_ok() {
                    prop_assert_eq!(feasible(&n, &more), Ok(()));
                }
            }

            #[test]
            fn a_node_without_blocking_taints_or_cordon_fits_an_unconstrained_pod(n in a_node()) {
                let blocked = n.unschedulable || n.taints.iter().any(|t| t.effect.blocks_scheduling());
                prop_assert_eq!(feasible(&n, &Constraints::default()).is_ok(), !blocked);
            }

            #[test]
            fn node_selector_and_an_equivalent_affinity_term_agree(n in a_node(), pairs in labels()) {
                let by_selector = Constraints {
                    node_selector: pairs.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                    ..Default::default()
                };
                let exprs: Vec<_> = pairs.iter().map(|(k, v)| expr(k, LabelOperator::In(vec![v.clone()]))).collect();
                let n = Node { taints: vec![], unschedulable: false, ..n };
                let by_affinity = with_affinity(vec![term(exprs.clone())]);
                // An empty term matches nothing while an empty selector matches everything.
                prop_assume!(!exprs.is_empty());
                prop_assert_eq!(feasible(&n, &by_selector).is_ok(), feasible(&n, &by_affinity).is_ok());
            }
        }
    }
}
