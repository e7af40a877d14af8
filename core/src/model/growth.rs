//! Growth of an autoscaled cluster: the settings that say the cluster can grow ([`Growth`]),
//! the stand-in pods that ask a node autoscaler for a gang's room, and the record of a growth
//! that timed out ([`GrowthFailed`]).
//!
//! An autoscaler provisions for pods the scheduler finds unschedulable, never for gated ones,
//! so a gang Gangplank keeps at the gate would never make the cluster grow. With growth on, the
//! admission pass asks for a gang's room with stand-in pods in Gangplank's own namespace, one
//! per member, sized like it; the state indexes them by the group they stand in for
//! ([`super::State::stand_ins`]), and the pass counts the room of bound ones as that group's.
//! Why stand-ins and not ungated members: `docs/decisions/growth.md`.

use std::sync::Arc;

use super::objects::{GroupKey, Pod, Resources};

/// How Gangplank grows the cluster; `None` in the state: it cannot grow (the default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Growth {
    /// Gangplank's own namespace, where its stand-in pods live: the only namespace whose pods
    /// the state believes to be stand-ins (tenants cannot create pods there).
    pub namespace: Arc<str>,
    /// How long a gang's stand-ins may stay unplaced before its growth is given up (seconds);
    /// also how long it then waits before asking again.
    pub timeout_secs: i64,
    /// How many gangs may grow at once (taken in the pass's fair-share order).
    pub at_once: usize,
}

/// A growth asked for: since when, and why its stand-ins could not be made, if they could not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrowthAsked {
    /// When the pass first asked for it (Unix seconds): its timeout counts from here, made
    /// stand-ins or not.
    pub since: i64,
    /// What the API server last said when a stand-in was refused.
    pub refused: Option<String>,
}

/// A growth given up: the gang's stand-ins were still unplaced after the timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrowthFailed {
    /// When it was given up (Unix seconds).
    pub at: i64,
    /// What the autoscaler last said about a stand-in (its `FailedScheduling` Event), if
    /// anything.
    pub message: Option<String>,
}

/// The name of the `n`th stand-in of the gang `group`: the same in every pass and after a
/// restart, so asking twice creates nothing twice. A hash of the key (FNV-1a, 64 bits) keeps it
/// short and valid whatever the group's name.
pub fn stand_in_name(group: &GroupKey, n: usize) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in group
        .namespace
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(group.name.bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("gangplank-stand-in-{hash:016x}-{n}")
}

/// The node and requests of each of `stand_ins` placed on a node and not finished: the room
/// they hold.
pub fn placed_stand_ins<'a>(
    stand_ins: impl Iterator<Item = &'a Arc<Pod>>,
) -> impl Iterator<Item = (&'a str, &'a Resources)> {
    stand_ins
        .filter(|p| !p.phase.is_terminal())
        .filter_map(|p| Some((p.node_name.as_deref()?, &p.requests)))
}
