//! One group as the model holds it ([`Group`]): its PodGroup's spec, the pods that name it with
//! what an admission pass reads of each ([`Member`]), and the placeholders for the room its
//! `minResources` keep ([`super::owed`]). Written only by the mirror's writes of
//! [`super::State`] (`apply_pod`, `apply_pod_group` and their deletes).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::objects::{Pod, PodGroup, PodPhase, Resources};
use super::owed;

/// A pod of a group (or a queue-only pod), with what an admission pass reads of every such pod
/// copied beside it.
///
/// Why copies: a pass over 10,000 waiting groups visits some 58,000 pods, and reading those
/// fields from each pod, wherever it lies in memory (and its gates from yet another
/// allocation), was half the pass. The copies are made once, when the pod is applied, and a
/// pod never changes in place (an update replaces its `Arc` and its `Member`), so they cannot
/// drift from the pod.
#[derive(Debug, Clone)]
pub struct Member {
    pub pod: Arc<Pod>,
    /// It has not finished (Succeeded or Failed).
    pub live: bool,
    /// `spec.nodeName` is set.
    pub bound: bool,
    /// Gangplank's admission gate is still on it ([`Pod::awaits_admission`]).
    pub gated: bool,
    pub priority: i32,
    pub created: i64,
    pub requests: Resources,
}

impl Member {
    /// It came as far as a group's `minResources` count it: live, or Succeeded (it used its
    /// part); a failed member's replacement asks for its part again ([`super::owed`]).
    pub fn came(&self) -> bool {
        self.live || self.pod.phase == PodPhase::Succeeded
    }

    pub fn of(pod: Arc<Pod>) -> Member {
        Member {
            live: !pod.phase.is_terminal(),
            bound: pod.node_name.is_some(),
            gated: pod.awaits_admission(),
            priority: pod.priority,
            created: pod.created,
            requests: pod.requests.clone(),
            pod,
        }
    }
}

/// Members and spec of one pod group.
#[derive(Debug, Clone, Default)]
pub struct Group {
    /// `None` while pods name a group whose PodGroup does not exist (yet).
    pub spec: Option<Arc<PodGroup>>,
    /// The pods that name the group, by UID: the same `Arc`s as [`super::State::pods`].
    pub members: BTreeMap<String, Member>,
    /// Placeholders for the room its `minResources` keep for members still to come
    /// ([`super::owed`]): the first `owed` of them ([`Group::owed`]). Remade when the spec or a
    /// member changes, unless only fewer of the same are owed (a gang's members coming one by
    /// one each take a placeholder's place, without making the others again).
    pub(super) placeholders: Arc<[Member]>,
    owed: usize,
    /// How many members came (live or Succeeded, [`Member::came`]), and their requests in all.
    came: u32,
    came_requests: Resources,
}

impl Group {
    /// The placeholders for the room its `minResources` still keep for members to come
    /// ([`super::owed`]); empty for most groups.
    pub fn owed(&self) -> &[Member] {
        &self.placeholders[..self.owed]
    }

    /// How many members came (live or Succeeded, [`Member::came`]), and what they ask in all.
    pub fn came(&self) -> (u32, &Resources) {
        (self.came, &self.came_requests)
    }

    /// Its admission keeps room for members still to come at `now` (Unix seconds): it owes
    /// some ([`Group::owed`]) and the admission that made the placeholders holds.
    pub fn keeps_room_at(&self, now: i64) -> bool {
        self.owed > 0
            && self
                .spec
                .as_deref()
                .is_some_and(|s| s.admission_holds_at(now))
    }

    pub(super) fn insert(&mut self, uid: String, member: Member) {
        if member.came() {
            self.came += 1;
            self.came_requests.add(&member.requests);
        }
        self.members.insert(uid, member);
    }

    pub(super) fn remove(&mut self, uid: &str) {
        if let Some(member) = self.members.remove(uid)
            && member.came()
        {
            self.came -= 1;
            self.came_requests.sub(&member.requests);
        }
    }

    /// Makes [`Group::owed`] what its spec and members owe now.
    pub(super) fn refresh_owed(&mut self) {
        let pieces = self.spec.as_deref().and_then(|spec| {
            owed::pieces(spec, self.came, &self.came_requests, || {
                self.members
                    .values()
                    .filter(|m| m.came())
                    .max_by(|a, b| (a.created, &a.pod.uid).cmp(&(b.created, &b.pod.uid)))
                    .map(|m| m.requests.clone())
            })
        });
        let Some(pieces) = pieces else {
            if !self.placeholders.is_empty() {
                self.placeholders = Arc::from([]);
            }
            self.owed = 0;
            return;
        };
        let count = pieces.count as usize;
        let same = self.placeholders.len() >= count
            && self
                .placeholders
                .first()
                .is_some_and(|p| p.requests == pieces.piece);
        if !same && let Some(spec) = self.spec.as_deref() {
            self.placeholders = (0..pieces.count)
                .map(|i| Member::of(Arc::new(Pod::placeholder(spec, i, &pieces.piece))))
                .collect();
        }
        self.owed = count;
    }
}
