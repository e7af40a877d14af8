//! The admissions with room kept for members still to come ([`crate::model::owed`]: a group
//! admitted ahead of its members, or on its `minResources`) that the admission loop made, as
//! the loop itself remembers them until its snapshot shows them ([`Kept`]).
//!
//! The pass reads such an admission from the PodGroup's annotation (its
//! [`PodGroup::admitted_at`]), which a snapshot shows only once the watch has delivered the
//! loop's write. Until then the loop's record stands in for it in every pass
//! ([`crate::admit::groups::Groups::of`]): the room is counted as kept, however late the watch
//! is, so the room of groups admitted in a burst, pass after pass, never adds up past their
//! queue's capability. A record also says whether its annotation is written yet: a write that
//! failed is sent again at the next pass, while the room stays counted (the pass may already
//! have removed members' gates for that admission).
//!
//! A record ends ([`Kept::forget_shown`]) when the snapshot shows the annotation at the
//! record's time or later, when the PodGroup is gone, or when the admission lapses (its
//! schedule timeout has passed since it was made, as the annotation's would): what it holds
//! follows the groups that exist.
//!
//! One writer: the admission loop owns its `Kept`, as it owns its record of the gate removals
//! the watch has not shown yet; the pass only reads it.

use std::collections::BTreeMap;

use crate::model::{GroupKey, PodGroup, State};

/// The admission loop's record of the admissions with room kept that it made (see the module
/// docs), by group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    by_group: BTreeMap<GroupKey, Record>,
}

/// One admission with room kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    /// When the pass made it (Unix seconds): also the time its annotation records.
    at: i64,
    /// Its annotation was written.
    written: bool,
}

impl Kept {
    /// A record of nothing.
    pub const fn new() -> Kept {
        Kept {
            by_group: BTreeMap::new(),
        }
    }

    /// Records the admissions of the groups `made` at `now` (Unix seconds), as a pass's
    /// decision lists them ([`crate::admit::plan::Decision::admitted_with_room_kept`]); one
    /// already recorded keeps its time.
    pub fn note(&mut self, made: Vec<GroupKey>, now: i64) {
        for key in made {
            self.by_group.entry(key).or_insert(Record {
                at: now,
                written: false,
            });
        }
    }

    /// The recorded admissions whose annotation is not written yet, with their time: the new
    /// ones, and those whose write failed.
    pub fn unwritten(&self) -> Vec<(GroupKey, i64)> {
        self.by_group
            .iter()
            .filter(|(_, r)| !r.written)
            .map(|(key, r)| (key.clone(), r.at))
            .collect()
    }

    /// Records that the annotation of `key`'s admission is written.
    pub fn written(&mut self, key: &GroupKey) {
        if let Some(record) = self.by_group.get_mut(key) {
            record.written = true;
        }
    }

    /// Whether the loop's record of `spec`'s admission holds at `now` (Unix seconds): it made
    /// one, and the group's schedule timeout has not passed since.
    pub fn holds(&self, spec: &PodGroup, now: i64) -> bool {
        self.by_group
            .get(&spec.key)
            .is_some_and(|r| PodGroup::admission_holds(r.at, now, spec.schedule_timeout))
    }

    /// Forgets the records that `state` shows (the PodGroup's annotation at the record's time
    /// or later), whose PodGroup is gone, or that lapsed at `now` (Unix seconds).
    pub fn forget_shown(&mut self, state: &State, now: i64) {
        self.by_group.retain(|key, record| {
            let Some(spec) = state.group(key).and_then(|g| g.spec.as_deref()) else {
                return false;
            };
            let shown = spec.admitted_at.is_some_and(|at| at >= record.at);
            !shown && PodGroup::admission_holds(record.at, now, spec.schedule_timeout)
        });
    }

    /// How many admissions it records.
    pub fn len(&self) -> usize {
        self.by_group.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_group.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admit::plan::Decision;
    use crate::testing::{PodBuilder, cluster, decide_at, node, pod, pod_group};

    const NOW: i64 = 1_700_000_000;

    /// A Spark application's PodGroup `name` (`minMember` 1, `minResources` 5 CPUs) and its
    /// driver of 1 CPU, gated, in `s`; returns the pass at `NOW` that admits it.
    fn spark(s: &mut State, name: &str) -> Decision {
        s.apply_pod_group(PodGroup {
            min_resources: crate::model::Resources::from([("cpu", 5_000)]),
            ..pod_group(name, 1, "q")
        });
        s.apply_pod(
            pod(format!("{name}-driver"))
                .in_group(name)
                .in_queue("q")
                .gated(),
        );
        decide_at(s, &|_| false, NOW)
    }

    fn admitted_at(s: &mut State, name: &str, at: i64) {
        let key = GroupKey::new("ns", name);
        let spec = s.groups()[&key].spec.as_deref().unwrap().clone();
        s.apply_pod_group(PodGroup {
            admitted_at: Some(at),
            ..spec
        });
    }

    #[test]
    fn a_record_holds_until_the_snapshot_shows_the_annotation_at_its_time_or_later() {
        let mut s = cluster();
        let mut kept = Kept::new();
        kept.note(spark(&mut s, "a").admitted_with_room_kept(), NOW);
        let spec = s.groups()[&GroupKey::new("ns", "a")]
            .spec
            .as_deref()
            .unwrap()
            .clone();
        assert!(kept.holds(&spec, NOW + 1));
        kept.forget_shown(&s, NOW + 1);
        assert_eq!(kept.len(), 1, "the annotation is not shown yet");
        admitted_at(&mut s, "a", NOW - 100);
        kept.forget_shown(&s, NOW + 1);
        assert_eq!(
            kept.len(),
            1,
            "an earlier admission's annotation is not this one's"
        );
        admitted_at(&mut s, "a", NOW);
        kept.forget_shown(&s, NOW + 1);
        assert!(
            kept.is_empty(),
            "shown: the annotation holds the room from now on"
        );
    }

    #[test]
    fn a_record_ends_with_its_pod_group_or_once_its_schedule_timeout_passed() {
        let mut s = cluster();
        s.apply_node(node("n1", 64_000));
        let mut kept = Kept::new();
        kept.note(spark(&mut s, "a").admitted_with_room_kept(), NOW);
        kept.note(spark(&mut s, "b").admitted_with_room_kept(), NOW);
        assert_eq!(kept.len(), 2);
        s.delete_pod_group(&GroupKey::new("ns", "a"));
        kept.forget_shown(&s, NOW + 60);
        assert_eq!(
            kept.unwritten(),
            [(GroupKey::new("ns", "b"), NOW)],
            "a is gone"
        );
        let b = s.groups()[&GroupKey::new("ns", "b")]
            .spec
            .as_deref()
            .unwrap()
            .clone();
        assert!(kept.holds(&b, NOW + 60), "the timeout is 60 s");
        assert!(!kept.holds(&b, NOW + 61));
        kept.forget_shown(&s, NOW + 61);
        assert!(kept.is_empty(), "lapsed, as its annotation would have");
    }

    #[test]
    fn a_record_keeps_its_time_and_stays_unwritten_until_its_write_succeeds() {
        let mut s = cluster();
        let made = spark(&mut s, "a").admitted_with_room_kept();
        let key = GroupKey::new("ns", "a");
        assert_eq!(made, std::slice::from_ref(&key));
        let mut kept = Kept::new();
        kept.note(made.clone(), NOW);
        kept.note(made, NOW + 5);
        assert_eq!(
            kept.unwritten(),
            [(key.clone(), NOW)],
            "sent again, at its time"
        );
        kept.written(&key);
        assert!(kept.unwritten().is_empty());
        assert_eq!(kept.len(), 1, "written, not shown yet: it still holds");
    }
}
