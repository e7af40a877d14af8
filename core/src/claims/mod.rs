//! Gang claims: capacity a gang holds while the scheduler places its members one at a time.
//!
//! The first time a member of a gang without quorum is filtered, the gang *claims* room for
//! every member it still needs, and only if all of them fit in what is free minus what other
//! gangs have claimed. A claim is a list of slots, one per member still to place, each on a
//! node (planned greedily, biggest member first, best fit for binpack or emptiest node for
//! spread). It is capacity, not a promise of nodes: the scheduler samples candidate nodes on
//! large clusters, so a member may land anywhere it fits without eating other gangs' claims,
//! and the claim gives up one slot when it does (`take_slot`). Two gangs that each need 60% of
//! the cluster can therefore never both hold half of it: the second one cannot claim until the
//! first one's capacity is released, and its members are filtered out meanwhile.
//!
//! A claim ends when the gang reaches quorum (its members are reserved or bound), when it
//! expires (no member filtered or reserved within the gang's schedule timeout: [`expire`], which
//! the filter calls on its way and the extender's timer calls in a quiet cluster), or when its
//! PodGroup is deleted.
//!
//! Everything here is pure: it reads and writes a [`State`] and takes the time as an argument
//! (the adapters pass tokio's clock), so tests drive it step by step.
//!
//! One part a file: [`filter()`] judges the candidate nodes and takes a claim (`filter.rs`),
//! planning its slots on the nodes (`slots.rs`); [`reserve`] and [`release`] keep the books
//! of binds and give up a slot for each member placed (`binds.rs`); [`scores()`] are the
//! prioritize verb's (`scores.rs`); [`expire`] ends the
//! claims past their deadline (`expiry.rs`). This file holds what they share: the verdict,
//! the errors and the settings.
//!
//! The only caller that writes through these functions is the `gangplank` crate's ledger
//! handle (`cache::ledger`), under the cache's write lock.

mod binds;
mod expiry;
mod filter;
#[cfg(test)]
mod mixed_shapes;
mod scores;
mod slots;
#[cfg(test)]
mod sub_group_binds;
#[cfg(test)]
mod testing;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::model::{GroupKey, Pod, PodGroup, State};
use crate::policy::placement::Strategy;

pub use binds::{Release, placed_members, quorum_count, release, reserve};
pub use expiry::{any_expired, expire};
pub use filter::{filter, holding};
pub use scores::scores;

/// How the verdict on one filter call is phrased to the scheduler. Borrows the candidates'
/// names: a call over thousands of nodes copies none of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FilterVerdict<'a> {
    /// In the candidates' order.
    pub passed: Vec<&'a str>,
    /// Nodes where preemption could help.
    pub failed: BTreeMap<&'a str, FailReason>,
    /// Nodes where nothing the scheduler can do helps.
    pub unresolvable: BTreeMap<&'a str, FailReason>,
    /// The pod's gang has stand-ins ([`crate::model::growth`]): its members get their room by
    /// the scheduler's preemption of them, which follows only a refusal node by node.
    pub preempts_stand_ins: bool,
}

impl<'a> FilterVerdict<'a> {
    fn all_fail<S: AsRef<str>>(candidates: &'a [S], why: &str, unresolvable: bool) -> Self {
        let why = FailReason::from(why);
        // `collect` sorts and bulk-loads the map: cheaper than one insert per node.
        let failed = candidates
            .iter()
            .map(|n| (n.as_ref(), why.clone()))
            .collect();
        if unresolvable {
            FilterVerdict {
                unresolvable: failed,
                ..FilterVerdict::default()
            }
        } else {
            FilterVerdict {
                failed,
                ..FilterVerdict::default()
            }
        }
    }
}

/// Distinct reasons [`FilterVerdict::retry_later`] names; the rest are counted.
const REASONS_NAMED: usize = 3;

impl FilterVerdict<'_> {
    /// Why no node passed, when none did and some failed for room Gangplank holds rather than
    /// for good (and the pod needs no preemption of its stand-ins): the text of the `Error` that has the scheduler try the pod again after its
    /// backoff (`docs/PROTOCOL.md`, "When a pod the extender refused is tried again"). Each
    /// distinct reason once, with how many of the nodes offered fail for it.
    pub fn retry_later(&self) -> Option<String> {
        if !self.passed.is_empty() || self.failed.is_empty() || self.preempts_stand_ins {
            return None;
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for why in self.failed.values() {
            *counts.entry(why).or_default() += 1;
        }
        let mut reasons: Vec<(&str, usize)> = counts.into_iter().collect();
        reasons.sort_by_key(|&(_, nodes)| std::cmp::Reverse(nodes));
        let mut text: Vec<String> = reasons
            .iter()
            .take(REASONS_NAMED)
            .map(|(why, nodes)| format!("{nodes} {}: {why}", plural(*nodes)))
            .collect();
        if reasons.len() > REASONS_NAMED {
            text.push(format!("{} other reasons", reasons.len() - REASONS_NAMED));
        }
        if !self.unresolvable.is_empty() {
            let nodes = self.unresolvable.len();
            text.push(format!("{nodes} {} it can never use", plural(nodes)));
        }
        Some(format!(
            "no node for this pod in the room Gangplank leaves free ({}); the scheduler tries it again after its backoff",
            text.join("; ")
        ))
    }
}

fn plural(nodes: usize) -> &'static str {
    if nodes == 1 { "node" } else { "nodes" }
}

/// Why a node fails, shared by every node that fails for the same reason (a refused gang
/// fails thousands of nodes with one message).
#[derive(Clone, PartialEq, Eq)]
pub struct FailReason(Arc<str>);

impl From<&str> for FailReason {
    fn from(why: &str) -> Self {
        FailReason(why.into())
    }
}

impl std::ops::Deref for FailReason {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for FailReason {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl std::fmt::Debug for FailReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for FailReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for FailReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// Why a filter or reservation cannot be answered at all (an extender `Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "pod {pod} names pod group {group}, which does not exist: create the PodGroup (minMember is the gang size) or remove the pod-group label"
    )]
    NoPodGroup { pod: String, group: GroupKey },
    #[error(
        "pod {pod} is not in Gangplank's cache yet (the pod watch lags behind the scheduler); the scheduler will retry"
    )]
    UnknownPod { pod: String },
    #[error(
        "pod {pod} does not carry the marker resource scheduling.gangplank.dev/managed, so Gangplank does not bind it: only pods of a group or queue, marked by Gangplank's mutating webhook, are bound here (with the every-pod scheduler configuration, start Gangplank with --bind-unmarked-pods=true)"
    )]
    NotManaged { pod: String },
    #[error("pod {pod} is already bound to node {node}")]
    AlreadyBound { pod: String, node: String },
    #[error(
        "pod {pod} still carries Gangplank's admission gate: its queue has not admitted it, so Gangplank does not bind it"
    )]
    NotAdmitted { pod: String },
    #[error(
        "pod {pod} has lost Gangplank's admission gate but carries no annotation scheduling.gangplank.dev/admitted: someone other than Gangplank removed the gate, so its queue has not admitted it and Gangplank does not bind it; delete the pod and create it again to wait in its queue"
    )]
    GateRemovedByOther { pod: String },
    #[error(
        "pod {pod} carries the marker resource scheduling.gangplank.dev/managed but names no group or queue, so Gangplank's webhook did not put it there: Gangplank binds only pods of a group or queue; remove the marker from the pod's spec, or give it a queue"
    )]
    MarkedOutsideAnyQueue { pod: String },
    #[error(
        "pod {pod}'s spec.nodeSelector does not match node {node}'s labels ({label}), so Gangplank does not bind it there"
    )]
    NodeNotSelected {
        pod: String,
        node: String,
        label: String,
    },
    #[error("UID {uid} is the UID of pod {owner}, not of pod {pod}")]
    NotThisPod {
        pod: String,
        uid: String,
        owner: String,
    },
}

/// Settings of claim planning.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub strategy: Strategy,
    /// Upper bound on how long a claim and held binds last, whatever the PodGroup asks: must
    /// stay below the scheduler's `httpTimeout`.
    pub max_hold: Duration,
    /// Bind pods that do not carry the marker resource (`--bind-unmarked-pods`).
    pub bind_unmarked: bool,
    /// Hold the binds of a gang the scheduler places whole itself
    /// ([`PodGroup::placed_whole_by_scheduler`]) until quorum, like any other gang
    /// (`--hold-workload-api-gang-binds`).
    pub hold_scheduler_gangs: bool,
    /// Managed pods are created behind Gangplank's gate (`--gate-pods`): a managed pod that has
    /// lost its gate is bound only if it carries Gangplank's record that it admitted it
    /// ([`crate::model::Pod::admission_recorded`]).
    pub gated_admission: bool,
}

impl Settings {
    /// How long `group` may go with no member placed before its claim and held binds end.
    pub fn timeout(&self, group: &PodGroup) -> Duration {
        group.schedule_timeout.min(self.max_hold)
    }

    /// Whether the bind verb holds `group`'s members until quorum: every gang but one the
    /// scheduler places whole itself, unless told to hold those too.
    pub fn holds_binds_of(&self, group: &PodGroup) -> bool {
        !group.placed_whole_by_scheduler || self.hold_scheduler_gangs
    }
}

/// `pod`, of a group or queue, has lost Gangplank's gate without Gangplank's record that it
/// admitted it: someone else removed the gate (`settings.gated_admission` only).
fn gate_removed_by_other(pod: &Pod, settings: &Settings) -> bool {
    settings.gated_admission
        && (pod.pod_group.is_some() || pod.queue.is_some())
        && !pod.awaits_admission()
        && !pod.admission_recorded
}

/// The spec of the PodGroup `key` that `pod` names, or the error that says to create it.
fn spec(state: &State, pod: &Pod, key: &GroupKey) -> Result<PodGroup, Error> {
    state
        .group(key)
        .and_then(|g| g.spec.as_deref())
        .cloned()
        .ok_or_else(|| Error::NoPodGroup {
            pod: format!("{}/{}", pod.namespace, pod.name),
            group: key.clone(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict<'a>(passed: &[&'a str], failed: &[(&'a str, &str)]) -> FilterVerdict<'a> {
        FilterVerdict {
            passed: passed.to_vec(),
            failed: failed
                .iter()
                .map(|&(node, why)| (node, FailReason::from(why)))
                .collect(),
            unresolvable: BTreeMap::new(),
            preempts_stand_ins: false,
        }
    }

    #[test]
    fn a_pod_refused_on_every_node_for_room_held_is_asked_to_come_back_with_each_reason_once() {
        let claimed = "room is claimed by other gangs";
        let v = verdict(
            &[],
            &[("n1", claimed), ("n2", "insufficient cpu"), ("n3", claimed)],
        );
        assert_eq!(
            v.retry_later().unwrap(),
            "no node for this pod in the room Gangplank leaves free (2 nodes: room is claimed by other gangs; 1 node: insufficient cpu); the scheduler tries it again after its backoff"
        );
    }

    #[test]
    fn a_pod_with_a_node_left_none_it_could_ever_use_or_stand_ins_to_preempt_is_answered_node_by_node()
     {
        let claimed = "room is claimed by other gangs";
        assert_eq!(verdict(&["n2"], &[("n1", claimed)]).retry_later(), None);
        let never = FilterVerdict::all_fail(&["n1", "n2"], "larger than any node", true);
        assert_eq!(never.retry_later(), None);
        let growing = FilterVerdict {
            preempts_stand_ins: true,
            ..verdict(&[], &[("n1", claimed)])
        };
        assert_eq!(growing.retry_later(), None, "it waits for preemption");
    }

    #[test]
    fn the_reasons_named_are_the_commonest_and_the_rest_are_counted() {
        let v = verdict(
            &[],
            &[
                ("a", "r1"),
                ("b", "r1"),
                ("c", "r2"),
                ("d", "r3"),
                ("e", "r4"),
                ("f", "r5"),
            ],
        );
        let text = v.retry_later().unwrap();
        assert!(
            text.contains("(2 nodes: r1; 1 node: r2; 1 node: r3; 2 other reasons)"),
            "{text}"
        );
    }
}
