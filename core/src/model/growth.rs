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

use super::objects::GroupKey;

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
