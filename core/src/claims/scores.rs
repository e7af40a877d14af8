//! The prioritize verb's scores: how much the extender likes each candidate node for a pod.

use crate::model::{GroupKey, NodeSlot, Pod, State};
use crate::policy::placement;

use super::holding;

/// A pod's scores on `candidates`, in their order: the maximum where its own gang's claim
/// holds a slot for it, else the placement strategy's score over what the node has in use,
/// reserved and claimed by other gangs; `unknown` for a node the state has not seen. The
/// claim is read once per call, and each candidate costs one lookup.
pub fn scores<S: AsRef<str>>(
    s: &State,
    pod: &Pod,
    candidates: &[S],
    strategy: placement::Strategy,
    unknown: i64,
) -> Vec<i64> {
    let claim = GroupKey::of(pod).and_then(|k| s.ledger().claims().get(&k));
    let holding = claim
        .map(|c| holding(c, &pod.requests, true))
        .unwrap_or_default();
    let own = claim.map(|c| c.per_node()).unwrap_or_default();
    candidates
        .iter()
        .map(|host| {
            let host = host.as_ref();
            if holding.contains(host) {
                return placement::CLAIMED_NODE_SCORE;
            }
            match s.nodes().slot(host) {
                Some(
                    slot @ NodeSlot {
                        node: Some(node), ..
                    },
                ) => {
                    let mut taken = slot.used.plus(&slot.reserved);
                    taken.add(&slot.claimed);
                    if let Some(mine) = own.get(host) {
                        taken.sub(mine);
                    }
                    placement::score(strategy, &node.allocatable, &taken, &pod.requests)
                }
                _ => unknown,
            }
        })
        .collect()
}
