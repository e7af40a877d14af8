//! Queues: validation of the Queue resource, and the "may this namespace put work in this
//! queue" check that pods, Jobs and PodGroups share ([`check_open`]).
//!
//! Rules for a Queue (CREATE and UPDATE unless said otherwise):
//! - `spec.weight` at least 1 (the CRD schema says so too; the webhook repeats it so the rule
//!   holds even where the schema was edited).
//! - `spec.guarantee` at most `spec.capability`, per resource listed in both; a resource not
//!   in `capability` is not capped.
//! - `spec.guarantee` (on CREATE, or when it changes) at most what the cluster's nodes that take
//!   new pods hold, per resource: a guarantee is room held back from every other queue, and
//!   one larger than the cluster would hold all of it. (When nodes leave later and the
//!   guarantees no longer fit, admission scales them down together, see
//!   `gangplank_core::policy::fair_share::fitted_guarantees`.)
//! - `spec.parent` (when set, on CREATE or when it changes) names an existing queue other
//!   than itself, and following parents from there never comes back to this queue.
//! - Closing (UPDATE Open → Closed) is refused while PodGroups of the queue are admitted
//!   (Inqueue, Running, or Unknown), and DELETE while any unfinished PodGroup names it (an
//!   admitted one loses its queue; a waiting one could never be admitted). The denial names
//!   the groups. How many there are comes from Gangplank's PodGroup view and from the Queue's
//!   own `status.admitted`/`status.running` counts, whichever is larger, so a group the view
//!   has not seen yet still counts.
//! - DELETE is refused while other queues name it as their `spec.parent` (they would be left
//!   with a parent that does not exist).
//!
//! The `default` queue is created by Gangplank at start-up; until that has happened, a
//! reference to it counts as a reference to an open queue rather than a missing one.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::{Selector, SelectorExt};

use super::Webhooks;
use super::lookup::{ClusterLookup, Lookup, NotSynced, PodGroupView, QueueLookup};
use super::review::{Denial, FieldErrors, Verdict};
use crate::api::{Queue, QueueState, labels};
use gangplank_core::model::quantity::{self, Scale};
use gangplank_core::model::resources::human;

/// Longest chain of parents followed when looking for a cycle. Deeper hierarchies are refused
/// as if they were cycles: no fair-share tree needs a hundred levels.
pub const MAX_DEPTH: usize = 100;

/// Names listed in a denial before "and N more".
const LISTED_GROUPS: usize = 5;

/// `POST /webhooks/validate/queues`.
pub fn validate(w: &Webhooks, request: &AdmissionRequest<Queue>) -> Result<Verdict, Denial> {
    let lookup = w.lookup();
    match request.operation {
        Operation::Create | Operation::Update => {
            let queue = request.object.as_ref().expect("checked when decoded");
            let old = request.old_object.as_ref();
            let name = queue.metadata.name.as_deref().unwrap_or(&request.name);
            check_spec(queue)?;
            if old.is_none_or(|o| o.spec.guarantee != queue.spec.guarantee) {
                check_guarantee_fits(lookup, queue)?;
            }
            let parent = queue.spec.parent.as_deref().filter(|p| !p.is_empty());
            let old_parent = old.and_then(|o| o.spec.parent.as_deref().filter(|p| !p.is_empty()));
            if let Some(parent) = parent
                && (old.is_none() || old_parent != Some(parent))
            {
                check_parent(lookup, name, parent)?;
            }
            let closing = queue.spec.state == QueueState::Closed
                && old.is_some_and(|o| o.spec.state == QueueState::Open);
            if closing {
                let holders = Holders::of(lookup, name, old.unwrap_or(queue))?;
                if holders.admitted_count > 0 {
                    return Err(Denial::forbidden(format!(
                        "spec.state: cannot close queue {name:?} while it holds {}; wait until they finish, then close it",
                        holders.describe_admitted()
                    )));
                }
            }
            Ok(Verdict::allow())
        }
        Operation::Delete => {
            let queue = request.old_object.as_ref().expect("checked when decoded");
            let name = queue.metadata.name.as_deref().unwrap_or(&request.name);
            let children = lookup.children(name).map_err(unavailable)?;
            if !children.is_empty() {
                return Err(Denial::forbidden(format!(
                    "queue {name:?} cannot be deleted while queues name it as their spec.parent: {}; give them another parent or none first, then delete it",
                    children.join(", ")
                )));
            }
            let holders = Holders::of(lookup, name, queue)?;
            if holders.admitted_count > 0 || !holders.waiting.is_empty() {
                return Err(Denial::forbidden(format!(
                    "queue {name:?} cannot be deleted while PodGroups use it: {}; wait until they finish, or move waiting groups to another queue (spec.queue), then delete it",
                    holders.describe_all()
                )));
            }
            Ok(Verdict::allow())
        }
        Operation::Connect => Ok(Verdict::allow()),
    }
}

/// The checks of a new Queue that need no live cluster: its spec alone, and its parent among
/// `queues` (which exists, unless it is `default`, and makes no cycle). What
/// `gangplank simulate` applies to the Queues of a configuration.
pub fn check_without_cluster(queue: &Queue, queues: &dyn QueueLookup) -> Result<(), Denial> {
    check_spec(queue)?;
    let name = queue.metadata.name.as_deref().unwrap_or_default();
    if let Some(parent) = queue.spec.parent.as_deref().filter(|p| !p.is_empty()) {
        check_parent(queues, name, parent)?;
    }
    Ok(())
}

/// The rules on the spec alone.
fn check_spec(queue: &Queue) -> Result<(), Denial> {
    let spec = &queue.spec;
    let mut errors = FieldErrors::new();
    if spec.weight < 1 {
        errors.add(
            "spec.weight",
            format!("must be at least 1, got {}", spec.weight),
        );
    }
    for (resource, guarantee) in &spec.guarantee {
        let Some(capability) = spec.capability.get(resource) else {
            continue;
        };
        // Milli-units for every resource, so fractions of any resource compare exactly.
        match (
            quantity::parse(&guarantee.0, Scale::Milli),
            quantity::parse(&capability.0, Scale::Milli),
        ) {
            (Ok(g), Ok(c)) if g > c => errors.add(
                format!("spec.guarantee[{resource}]"),
                format!(
                    "must not exceed spec.capability[{resource}] ({}), got {}",
                    capability.0, guarantee.0
                ),
            ),
            (Ok(_), Ok(_)) => {}
            (Err(e), _) => errors.add(format!("spec.guarantee[{resource}]"), e),
            (_, Err(e)) => errors.add(format!("spec.capability[{resource}]"), e),
        }
    }
    errors.seconds("spec.maxWaitSeconds", spec.max_wait_seconds);
    if spec.parent.as_deref() == queue.metadata.name.as_deref() && spec.parent.is_some() {
        errors.add("spec.parent", "a queue cannot be its own parent");
    }
    if let Some(selector) = &spec.namespace_selector
        && let Err(e) = Selector::try_from(selector.clone())
    {
        errors.add(
            "spec.namespaceSelector",
            format!("{e}; write a label selector as for kubectl get -l (operators In, NotIn, Exists, DoesNotExist)"),
        );
    }
    errors.into_result()
}

/// Every resource of the guarantee fits in what the nodes that take new pods hold.
fn check_guarantee_fits(lookup: &dyn super::ClusterLookup, queue: &Queue) -> Result<(), Denial> {
    let Ok(guarantee) = crate::cache::convert::resources(&queue.spec.guarantee) else {
        // A bad quantity: the schema refuses it before the webhook is asked.
        return Ok(());
    };
    let capacity = lookup.schedulable_capacity().map_err(unavailable)?;
    let mut errors = FieldErrors::new();
    // By the names the Queue gives: a name the full resource-name table counts as
    // `(other resources)` is not one of them.
    for (resource, quantity) in &queue.spec.guarantee {
        let amount = guarantee.get(resource);
        let available = capacity.get(resource);
        if amount > available {
            errors.add(
                format!("spec.guarantee[{resource}]"),
                format!(
                    "must not exceed what the cluster's schedulable nodes hold ({}), got {}; a guarantee is room no other queue may use",
                    human(resource, available),
                    quantity.0
                ),
            );
        }
    }
    errors.into_result()
}

/// `parent` exists and following parents from it never reaches `name`.
fn check_parent(lookup: &dyn QueueLookup, name: &str, parent: &str) -> Result<(), Denial> {
    let mut chain = vec![name.to_owned(), parent.to_owned()];
    let mut current = parent.to_owned();
    loop {
        let Some(queue) = lookup.queue(&current).map_err(unavailable)? else {
            if current == parent {
                if parent == labels::DEFAULT_QUEUE {
                    return Ok(());
                }
                return Err(Denial::not_found(
                    "spec.parent",
                    format!(
                        "queue {parent:?} does not exist; name an existing queue (kubectl get queues) or leave spec.parent unset for a top-level queue"
                    ),
                ));
            }
            // A dangling parent further up: not this queue's problem.
            return Ok(());
        };
        let Some(next) = queue.parent else {
            return Ok(());
        };
        let seen = chain.contains(&next);
        chain.push(next.clone());
        if next == name {
            return Err(Denial::invalid(
                "spec.parent",
                format!(
                    "{parent:?} would make a cycle of parents: {}; name a queue that is not below {name:?}",
                    chain.join(" → ")
                ),
            ));
        }
        if seen || chain.len() > MAX_DEPTH {
            return Err(Denial::invalid(
                "spec.parent",
                format!(
                    "the parents of {parent:?} do not end in a top-level queue ({} …); name a queue whose parents do",
                    chain[1..].join(" → ")
                ),
            ));
        }
        current = next;
    }
}

/// The PodGroups that keep a queue from being closed or deleted.
struct Holders {
    admitted: Vec<PodGroupView>,
    waiting: Vec<PodGroupView>,
    /// At least `admitted.len()`; more when the queue's status counts more than Gangplank
    /// has seen.
    admitted_count: usize,
}

impl Holders {
    fn of(lookup: &dyn super::ClusterLookup, name: &str, queue: &Queue) -> Result<Self, Denial> {
        let groups = lookup.unfinished_pod_groups_in(name).map_err(unavailable)?;
        let (admitted, waiting): (Vec<_>, Vec<_>) =
            groups.into_iter().partition(PodGroupView::is_admitted);
        let status = queue.status.clone().unwrap_or_default();
        let counted = usize::try_from(status.admitted.max(0) + status.running.max(0)).unwrap_or(0);
        Ok(Holders {
            admitted_count: admitted.len().max(counted),
            admitted,
            waiting,
        })
    }

    /// "2 admitted PodGroups (ml/a, ml/b)".
    fn describe_admitted(&self) -> String {
        let noun = if self.admitted_count == 1 {
            "PodGroup"
        } else {
            "PodGroups"
        };
        format!(
            "{} admitted {noun}{}",
            self.admitted_count,
            list(&self.admitted)
        )
    }

    fn describe_all(&self) -> String {
        let mut parts = Vec::new();
        if self.admitted_count > 0 {
            parts.push(self.describe_admitted());
        }
        if !self.waiting.is_empty() {
            parts.push(format!(
                "{} waiting{}",
                self.waiting.len(),
                list(&self.waiting)
            ));
        }
        parts.join(" and ")
    }
}

/// " (ns/a, ns/b, … and 3 more)", or "" for none.
fn list(groups: &[PodGroupView]) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let names: BTreeSet<String> = groups
        .iter()
        .map(|g| format!("{}/{}", g.namespace, g.name))
        .collect();
    let shown: Vec<&str> = names
        .iter()
        .take(LISTED_GROUPS)
        .map(String::as_str)
        .collect();
    let more = names.len().saturating_sub(LISTED_GROUPS);
    if more > 0 {
        format!(" ({} and {more} more)", shown.join(", "))
    } else {
        format!(" ({})", shown.join(", "))
    }
}

/// Whether new work of `namespace` may be put in queue `name`, named by `field`: the queue
/// exists (or is the `default` queue), is Open, and its `namespaceSelector` selects the
/// namespace.
pub fn check_open(
    lookup: &dyn ClusterLookup,
    name: &str,
    namespace: &str,
    field: &str,
) -> Result<(), Denial> {
    let queue = match lookup.queue(name).map_err(unavailable)? {
        None if name == labels::DEFAULT_QUEUE => return Ok(()),
        None => {
            return Err(Denial::not_found(
                field,
                format!(
                    "queue {name:?} does not exist; name an existing queue (kubectl get queues)"
                ),
            ));
        }
        Some(queue) => queue,
    };
    if queue.state == QueueState::Closed {
        return Err(Denial::forbidden(format!(
            "{field}: queue {name:?} is Closed and admits no new work; name an Open queue, or reopen it (spec.state: Open)"
        )));
    }
    let Some(selector) = &queue.namespaces else {
        return Ok(());
    };
    let namespace_labels = lookup
        .namespace_labels(namespace)
        .map_err(unavailable)?
        .unwrap_or_default();
    if namespace_selected(selector, &namespace_labels) {
        return Ok(());
    }
    Err(Denial::forbidden(format!(
        "{field}: queue {name:?} admits work only from namespaces matching its spec.namespaceSelector ({}), and namespace {namespace:?} does not match; name a queue open to this namespace (kubectl gangplank queues shows each queue's namespaces), or ask the cluster admin to let this namespace use {name:?}",
        crate::api::queue::namespaces_rule(Some(selector))
    )))
}

/// Whether a queue's `namespaceSelector` selects a namespace with these labels. A selector
/// that does not parse (the Queue webhook refuses those) selects nothing.
pub fn namespace_selected(
    selector: &LabelSelector,
    namespace_labels: &BTreeMap<String, String>,
) -> bool {
    Selector::try_from(selector.clone()).is_ok_and(|s| s.matches(namespace_labels))
}

/// A lookup that could not answer, as the denial the client sees.
pub fn unavailable(e: NotSynced) -> Denial {
    Denial::unavailable(e.to_string())
}

/// Shorthand for rules that look up and map "not synced" in one go.
pub fn looked_up<T>(result: Lookup<T>) -> Result<T, Denial> {
    result.map_err(unavailable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodGroupPhase;
    use crate::webhooks::lookup::{QueueView, StaticLookup};

    fn queue_view(name: &str, parent: Option<&str>) -> QueueView {
        QueueView {
            name: name.into(),
            state: QueueState::Open,
            parent: parent.map(Into::into),
            namespaces: None,
        }
    }

    fn group(name: &str, phase: PodGroupPhase) -> PodGroupView {
        PodGroupView {
            namespace: "ml".into(),
            name: name.into(),
            queue: "research".into(),
            phase,
        }
    }

    #[test]
    fn a_parent_chain_back_to_the_queue_is_a_cycle_spelled_out() {
        let lookup = StaticLookup {
            queues: vec![queue_view("b", Some("c")), queue_view("c", Some("a"))],
            ..Default::default()
        };
        let denial = check_parent(&lookup, "a", "b").unwrap_err();
        assert_eq!(
            denial.message,
            "spec.parent: \"b\" would make a cycle of parents: a → b → c → a; name a queue that is not below \"a\""
        );
    }

    #[test]
    fn a_chain_ending_in_a_top_level_queue_is_accepted() {
        let lookup = StaticLookup {
            queues: vec![queue_view("b", Some("c")), queue_view("c", None)],
            ..Default::default()
        };
        assert_eq!(check_parent(&lookup, "a", "b"), Ok(()));
    }

    #[test]
    fn a_cycle_above_the_parent_that_does_not_include_the_queue_is_refused() {
        let lookup = StaticLookup {
            queues: vec![queue_view("b", Some("c")), queue_view("c", Some("b"))],
            ..Default::default()
        };
        let denial = check_parent(&lookup, "a", "b").unwrap_err();
        assert_eq!(
            denial.message,
            "spec.parent: the parents of \"b\" do not end in a top-level queue (b → c → b …); name a queue whose parents do"
        );
    }

    #[test]
    fn the_default_queue_may_be_a_parent_before_it_is_created() {
        assert_eq!(
            check_parent(&StaticLookup::default(), "a", "default"),
            Ok(())
        );
    }

    #[test]
    fn a_long_list_of_groups_is_cut_after_five() {
        let groups: Vec<PodGroupView> = (0..7)
            .map(|i| group(&format!("g{i}"), PodGroupPhase::Running))
            .collect();
        assert_eq!(
            list(&groups),
            " (ml/g0, ml/g1, ml/g2, ml/g3, ml/g4 and 2 more)"
        );
    }

    #[test]
    fn status_counts_raise_the_number_of_holders_beyond_what_was_seen() {
        let lookup = StaticLookup {
            pod_groups: vec![group("a", PodGroupPhase::Running)],
            ..Default::default()
        };
        let queue: Queue = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
            "metadata": {"name": "research"}, "spec": {},
            "status": {"admitted": 1, "running": 2}
        }))
        .unwrap();
        let holders = Holders::of(&lookup, "research", &queue).unwrap();
        assert_eq!(holders.describe_admitted(), "3 admitted PodGroups (ml/a)");
    }

    fn team_queue(selector: serde_json::Value) -> StaticLookup {
        StaticLookup {
            queues: vec![QueueView {
                namespaces: Some(serde_json::from_value(selector).unwrap()),
                ..queue_view("team-a", None)
            }],
            labelled: vec![
                (
                    "a-train".into(),
                    BTreeMap::from([("team".into(), "a".into())]),
                ),
                (
                    "b-train".into(),
                    BTreeMap::from([("team".into(), "b".into())]),
                ),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_queue_with_a_namespace_selector_takes_work_only_from_the_namespaces_it_selects() {
        let lookup = team_queue(serde_json::json!({"matchLabels": {"team": "a"}}));
        assert_eq!(
            check_open(&lookup, "team-a", "a-train", "spec.queue"),
            Ok(())
        );
        let denial = check_open(&lookup, "team-a", "b-train", "spec.queue").unwrap_err();
        assert_eq!(
            denial.message,
            "spec.queue: queue \"team-a\" admits work only from namespaces matching its spec.namespaceSelector (team=a), and namespace \"b-train\" does not match; name a queue open to this namespace (kubectl gangplank queues shows each queue's namespaces), or ask the cluster admin to let this namespace use \"team-a\""
        );
    }

    #[test]
    fn a_namespace_selector_can_name_namespaces_by_their_name_label() {
        let lookup = team_queue(serde_json::json!({"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["b-train"]}
        ]}));
        assert_eq!(
            check_open(&lookup, "team-a", "b-train", "spec.queue"),
            Ok(())
        );
        assert!(check_open(&lookup, "team-a", "a-train", "spec.queue").is_err());
    }

    #[test]
    fn an_empty_namespace_selector_or_none_takes_work_from_every_namespace() {
        let lookup = team_queue(serde_json::json!({}));
        assert_eq!(
            check_open(&lookup, "team-a", "b-train", "spec.queue"),
            Ok(())
        );
        let open = StaticLookup {
            queues: vec![queue_view("team-a", None)],
            ..Default::default()
        };
        assert_eq!(check_open(&open, "team-a", "b-train", "spec.queue"), Ok(()));
    }

    #[test]
    fn a_namespace_the_lookup_has_not_seen_matches_only_a_selector_that_needs_no_label() {
        let lookup = team_queue(serde_json::json!({"matchLabels": {"team": "a"}}));
        assert!(check_open(&lookup, "team-a", "unseen", "spec.queue").is_err());
        let none_of_b = team_queue(serde_json::json!({"matchExpressions": [
            {"key": "team", "operator": "NotIn", "values": ["b"]}
        ]}));
        assert_eq!(
            check_open(&none_of_b, "team-a", "unseen", "spec.queue"),
            Ok(())
        );
    }

    #[test]
    fn a_queue_whose_namespace_selector_does_not_parse_is_refused_naming_the_field() {
        let queue: Queue = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.gangplank.dev/v1alpha1", "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {"namespaceSelector": {"matchExpressions": [
                {"key": "team", "operator": "In"}
            ]}}
        }))
        .unwrap();
        let denial = check_spec(&queue).unwrap_err();
        assert!(
            denial.message.contains("spec.namespaceSelector"),
            "{}",
            denial.message
        );
    }
}
