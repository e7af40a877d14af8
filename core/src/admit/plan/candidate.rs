//! What the pass tries, one at a time: a [`Candidate`] (a group with gated members, or a pod of
//! a queue in no group), found by [`super::collect`] and driven by [`super::pass`]; what it
//! needs for quorum, its key for the tie-breaks, and where its topology lets it go ([`Where`]).

use super::decision::PodRef;
use crate::admit::why::Why;
use crate::model::{GroupKey, Levels, Member, Resources};

/// A group (or a queue-only pod) with gated members, found by [`super::collect`].
pub(super) struct Candidate<'s> {
    pub(super) queue: &'s str,
    /// Its queue's index in name order ([`super::share`] sets it); `usize::MAX` while unknown or
    /// when the queue does not exist.
    pub(super) slot: usize,
    pub(super) group: Option<&'s GroupKey>,
    pub(super) namespace: &'s str,
    /// The group's name, or the queue-only pod's.
    pub(super) name: &'s str,
    /// Its gated members; the first `missing` of them are what it needs for quorum.
    pub(super) gated: Vec<&'s Member>,
    pub(super) missing: usize,
    /// For the instances beyond the minimum of a gang of sub-groups: how many of `gated`, in
    /// order, make each whole instance (released whole or not at all). Empty: each member on
    /// its own.
    pub(super) instances: Vec<usize>,
    /// For a gang of sub-groups some of whose sub-groups name a `topologyKey`: its gated
    /// members, in order, as instances that each keep to one domain; empty otherwise.
    pub(super) instance_levels: Vec<InstanceLevel<'s>>,
    /// A tree the scheduler places whole, released but its minimum not placed yet: its gated
    /// members (made since) are released at once, within the queue's capability and not
    /// weighed against the room, as those released with the minimum were; held at the gate
    /// they would stop the scheduler from placing any of the tree.
    pub(super) follows_release: bool,
    /// What releasing every gated member adds to the queue.
    pub(super) requests: Resources,
    pub(super) priority: i32,
    /// Creation time of its oldest gated member, in Unix seconds (0 when unknown).
    pub(super) created: i64,
    /// Its place in line among its queue's groups: `created`, or for a gang short of quorum
    /// whose other members were released, its oldest member's creation.
    pub(super) in_line_since: i64,
    /// The PodGroup's own `maxWaitSeconds`.
    pub(super) max_wait: Option<i64>,
    /// The PodGroup's `expectedRuntimeSeconds`.
    pub(super) expected_runtime: Option<i64>,
    /// The levels its PodGroup's `topologyKey` and `preferredTopologyKey` allow, and the
    /// domain of the required level a member already runs in or names in its `nodeSelector`.
    pub(super) topology: Option<Where<'s>>,
    /// Why it cannot be considered at all (no PodGroup, too few members).
    pub(super) blocked: Option<Why>,
}

/// The next `members` of a candidate's gated members: one instance of `sub_group`, whose
/// members keep to one domain of the level named by `keys` (widest first; empty: any node),
/// agreeing with the values `pinned` of the instance's members already placed.
#[derive(Debug, Clone)]
pub(super) struct InstanceLevel<'s> {
    pub(super) sub_group: &'s str,
    pub(super) members: usize,
    pub(super) keys: Vec<&'s str>,
    pub(super) pinned: Vec<(&'s str, &'s str)>,
}

/// A candidate's identity for the pass's tie-breaks: namespace, name, whether it is a
/// queue-only pod, and its index in [`super::collect::Book::candidates`] (which never decides: the rest is
/// unique).
pub(super) type Key<'s> = (&'s str, &'s str, bool, usize);

impl<'s> Candidate<'s> {
    pub(super) fn key(&self, i: usize) -> Key<'s> {
        (self.namespace, self.name, self.group.is_none(), i)
    }

    /// The requests of each gated member the gang needs placed to reach quorum.
    pub(super) fn need(&self) -> impl Iterator<Item = &'s Resources> + '_ {
        self.gated[..self.missing].iter().map(|m| &m.requests)
    }

    /// The sum of [`Candidate::need`].
    pub(super) fn needed(&self) -> Resources {
        let mut needed = Resources::new();
        self.need().for_each(|pod| needed.add(pod));
        needed
    }

    /// Its group's key, or its pod's as a group of one.
    pub(super) fn group_key(&self) -> GroupKey {
        match (self.group, self.gated.first()) {
            (Some(group), _) => group.clone(),
            (None, Some(member)) => GroupKey::lone(&member.pod),
            (None, None) => GroupKey::new(self.namespace, self.name),
        }
    }

    /// The pod of a queue in no group.
    pub(super) fn lone_pod(&self) -> Option<PodRef> {
        match (self.group, self.gated.first()) {
            (None, Some(member)) => Some(PodRef::of(&member.pod)),
            _ => None,
        }
    }
}

/// Where a gang with a topology may go: its [`Levels`], and the values of its required level's
/// keys that a member already runs in or names in its `nodeSelector` (it must join them).
#[derive(Debug, Clone)]
pub(super) struct Where<'s> {
    pub(super) levels: Levels<'s>,
    pub(super) pinned: Vec<(&'s str, &'s str)>,
}

impl Where<'_> {
    /// The pinned domain as reasons name it, if any.
    pub(super) fn pinned(&self) -> Option<String> {
        described(&self.pinned)
    }
}

/// A pinned domain's (label, value) pairs as reasons name it; `None` when empty.
pub(super) fn described(pinned: &[(&str, &str)]) -> Option<String> {
    (!pinned.is_empty()).then(|| {
        let (keys, values): (Vec<&str>, Vec<&str>) = pinned.iter().copied().unzip();
        crate::model::topology::describe(&keys, &values)
    })
}

/// A duration in whole seconds, saturating (a PodGroup's `maxWaitSeconds`, its expected runtime).
pub(super) fn seconds(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}
