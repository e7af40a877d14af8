//! When to write an object's status: only when it differs, at most once per
//! [`MIN_WRITE_INTERVAL`] per object, backing off after failures, and never twice the same
//! status while the watch has not caught up with the first write. A kind made with
//! [`Writes::coalescing`] writes a minor change (for a PodGroup: counts and messages, the same
//! phase and conditions) at most once per [`MINOR_WRITE_INTERVAL`], so a gang whose members
//! are created, bound and started one after the other costs a write per phase, not per member.
//! A kind made [`Writes::debounced`] also holds every change back until it has stood for
//! [`DEBOUNCE`] since the object's status first differed from what was written (later changes
//! do not push that back): a gang admitted, bound and started within it costs one write and
//! one transition, not one per step.
//!
//! Gangplank is the only writer of these statuses, so what it wrote last is the truth until the
//! watch shows it: [`Writes::previous`] returns it in preference to the (possibly stale)
//! stored status, so that phase transitions are judged against what was really written and
//! an Event is never emitted twice for one transition. After a restart nothing is remembered
//! and the stored status is the previous one.
//!
//! Objects are keyed by UID, so a PodGroup deleted and recreated under the same name starts
//! afresh.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// Shortest time between two status writes of one object.
pub const MIN_WRITE_INTERVAL: Duration = Duration::from_secs(1);
/// Shortest time between a write of one object and a write of a minor change after it.
pub const MINOR_WRITE_INTERVAL: Duration = Duration::from_secs(5);
/// Longest back-off after failed writes of one object.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long a change of a debounced kind waits, from when the object's status first differed.
pub const DEBOUNCE: Duration = Duration::from_secs(2);
/// How long a written status is trusted to show up in the watch before it is written again.
pub const WATCH_LAG: Duration = Duration::from_secs(10);

/// Whether to write one object's status now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteDue {
    Write,
    /// The stored (or just written) status is the desired one.
    InSync,
    /// Differs, but the object was written too recently: write at this instant.
    Wait(Instant),
}

#[derive(Debug, Clone)]
struct Entry<S> {
    /// The last status written successfully, and when.
    written: Option<(S, Instant)>,
    last_attempt: Option<Instant>,
    failures: u32,
    /// Since when the desired status has differed from the written one (debounced kinds only).
    differs_since: Option<Instant>,
}

impl<S> Default for Entry<S> {
    fn default() -> Self {
        Entry {
            written: None,
            last_attempt: None,
            failures: 0,
            differs_since: None,
        }
    }
}

/// Whether going from the first status to the second is a minor change.
pub type Minor<S> = fn(&S, &S) -> bool;

/// Status writes of one kind, by object UID.
#[derive(Debug, Clone)]
pub struct Writes<S> {
    entries: HashMap<String, Entry<S>>,
    minor: Option<Minor<S>>,
    debounce: Option<Duration>,
}

impl<S> Default for Writes<S> {
    fn default() -> Self {
        Writes {
            entries: HashMap::new(),
            minor: None,
            debounce: None,
        }
    }
}

impl<S> Writes<S> {
    /// Writes that hold back a `minor` change for [`MINOR_WRITE_INTERVAL`] after the last.
    pub fn coalescing(minor: Minor<S>) -> Self {
        Writes {
            minor: Some(minor),
            ..Writes::default()
        }
    }

    /// The same writes, each change held back until it has stood for `debounce` (see the
    /// module docs).
    pub fn debounced(self, debounce: Duration) -> Self {
        Writes {
            debounce: Some(debounce),
            ..self
        }
    }
}

impl<S: PartialEq + Clone> Writes<S> {
    /// The object's status as last written by us, else as stored.
    pub fn previous<'a>(&'a self, uid: &str, stored: Option<&'a S>) -> Option<&'a S> {
        self.entries
            .get(uid)
            .and_then(|e| e.written.as_ref())
            .map(|(s, _)| s)
            .or(stored)
    }

    /// Whether to write `desired` for the object `uid` now, its status being `stored`; for a
    /// debounced kind, also notes since when the object has differed.
    pub fn decide(&mut self, uid: &str, stored: Option<&S>, desired: &S, now: Instant) -> WriteDue {
        let in_sync = stored == Some(desired)
            || self.entries.get(uid).is_some_and(|entry| {
                entry.written.as_ref().is_some_and(|(written, at)| {
                    written == desired && now.duration_since(*at) < WATCH_LAG
                })
            });
        if in_sync {
            if let Some(entry) = self.entries.get_mut(uid) {
                entry.differs_since = None;
            }
            return WriteDue::InSync;
        }
        let settled_at = match self.debounce {
            Some(debounce) => {
                let entry = self.entries.entry(uid.to_owned()).or_default();
                Some(*entry.differs_since.get_or_insert(now) + debounce)
            }
            None => None,
        };
        let Some(entry) = self.entries.get(uid) else {
            return WriteDue::Write;
        };
        let previous = entry.written.as_ref().map(|(s, _)| s).or(stored);
        let minor = self
            .minor
            .zip(previous)
            .is_some_and(|(minor, previous)| minor(previous, desired));
        let throttled_until = entry
            .last_attempt
            .map(|last| last + interval(entry.failures, minor));
        match throttled_until.into_iter().chain(settled_at).max() {
            Some(at) if now < at => WriteDue::Wait(at),
            _ => WriteDue::Write,
        }
    }

    /// Records a write attempt of `desired` and whether it succeeded.
    pub fn record(&mut self, uid: &str, desired: S, ok: bool, now: Instant) {
        let entry = self.entries.entry(uid.to_owned()).or_default();
        entry.last_attempt = Some(now);
        if ok {
            entry.failures = 0;
            entry.written = Some((desired, now));
            entry.differs_since = None;
        } else {
            entry.failures = entry.failures.saturating_add(1);
        }
    }

    /// Forgets objects that are gone, and what the watch already shows (`stored(uid)` is the
    /// stored status of a live object, `None` for a deleted one). Entries still throttling a
    /// recent attempt (a minor change's interval included) or debouncing a change are kept.
    pub fn settle<'a>(&mut self, now: Instant, stored: impl Fn(&str) -> Option<Option<&'a S>>)
    where
        S: 'a,
    {
        let minor = self.minor.is_some();
        self.entries.retain(|uid, entry| {
            let Some(current) = stored(uid) else {
                return false;
            };
            if entry
                .written
                .as_ref()
                .is_some_and(|(w, _)| current == Some(w))
            {
                entry.written = None;
            }
            entry.written.is_some()
                || entry.differs_since.is_some()
                || entry
                    .last_attempt
                    .is_some_and(|last| now < last + interval(entry.failures, minor))
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Time to wait after an attempt that followed `failures` failures in a row, before writing a
/// change (at least [`MINOR_WRITE_INTERVAL`] for a `minor` one).
fn interval(failures: u32, minor: bool) -> Duration {
    let after_failures = MIN_WRITE_INTERVAL
        .saturating_mul(1 << failures.min(6))
        .min(MAX_BACKOFF);
    if minor {
        after_failures.max(MINOR_WRITE_INTERVAL)
    } else {
        after_failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn an_object_whose_status_is_already_right_is_not_written() {
        let mut writes = Writes::<u32>::default();
        let now = Instant::now();
        assert_eq!(writes.decide("a", Some(&1), &1, now), WriteDue::InSync);
        assert_eq!(writes.decide("a", Some(&1), &2, now), WriteDue::Write);
        assert_eq!(writes.decide("a", None, &2, now), WriteDue::Write);
    }

    #[test]
    fn an_object_is_written_at_most_once_a_second() {
        let mut writes = Writes::<u32>::default();
        let t0 = Instant::now();
        writes.record("a", 2, true, t0);
        assert_eq!(
            writes.decide("a", Some(&2), &3, t0 + Duration::from_millis(300)),
            WriteDue::Wait(t0 + secs(1))
        );
        assert_eq!(
            writes.decide("a", Some(&2), &3, t0 + secs(1)),
            WriteDue::Write
        );
    }

    #[test]
    fn a_minor_change_waits_five_seconds_after_the_last_write_and_a_major_one_a_second() {
        // Tens are the phase: a change within the same ten is minor.
        let mut writes = Writes::<u32>::coalescing(|from, to| from / 10 == to / 10);
        let t0 = Instant::now();
        writes.record("a", 11, true, t0);
        writes.settle(t0 + secs(1), |_| Some(Some(&11)));
        assert_eq!(
            writes.decide("a", Some(&11), &12, t0 + secs(1)),
            WriteDue::Wait(t0 + MINOR_WRITE_INTERVAL),
            "the watch shows the last write, and the change is still held back"
        );
        assert_eq!(
            writes.decide("a", Some(&11), &21, t0 + secs(1)),
            WriteDue::Write
        );
        assert_eq!(
            writes.decide("a", Some(&11), &12, t0 + MINOR_WRITE_INTERVAL),
            WriteDue::Write
        );
        writes.settle(t0 + MINOR_WRITE_INTERVAL, |_| Some(Some(&11)));
        assert!(writes.is_empty(), "nothing left to hold back");
    }

    #[test]
    fn a_written_status_is_not_rewritten_while_the_watch_catches_up() {
        let mut writes = Writes::<u32>::default();
        let t0 = Instant::now();
        writes.record("a", 2, true, t0);
        assert_eq!(writes.previous("a", Some(&1)), Some(&2));
        assert_eq!(
            writes.decide("a", Some(&1), &2, t0 + secs(5)),
            WriteDue::InSync
        );
        assert_eq!(
            writes.decide("a", Some(&1), &2, t0 + secs(11)),
            WriteDue::Write,
            "a write the watch never showed is assumed lost"
        );
    }

    #[test]
    fn failed_writes_back_off_up_to_a_minute() {
        let mut writes = Writes::<u32>::default();
        let mut now = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..8 {
            writes.record("a", 2, false, now);
            let WriteDue::Wait(at) = writes.decide("a", Some(&1), &2, now) else {
                panic!("a failed write must be retried later");
            };
            waits.push(at.duration_since(now).as_secs());
            now = at;
        }
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60, 60]);
        writes.record("a", 2, true, now);
        assert_eq!(
            writes.decide("a", Some(&2), &3, now + secs(1)),
            WriteDue::Write,
            "a success resets the back-off"
        );
    }

    #[test]
    fn a_debounced_change_is_written_once_it_has_stood_and_only_its_latest_state() {
        // Tens are the phase, as above: 10 -> 20 -> 30 are two major changes in a row.
        let mut writes =
            Writes::<u32>::coalescing(|from, to| from / 10 == to / 10).debounced(DEBOUNCE);
        let t0 = Instant::now();
        assert_eq!(
            writes.decide("a", None, &10, t0),
            WriteDue::Wait(t0 + DEBOUNCE),
            "a new object's first status waits too"
        );
        assert_eq!(
            writes.decide("a", None, &20, t0 + secs(1)),
            WriteDue::Wait(t0 + DEBOUNCE),
            "a further change does not push the write back"
        );
        writes.settle(t0 + secs(1), |_| Some(None));
        assert_eq!(writes.len(), 1, "a change still standing is remembered");
        assert_eq!(
            writes.decide("a", None, &30, t0 + DEBOUNCE),
            WriteDue::Write
        );
        writes.record("a", 30, true, t0 + DEBOUNCE);
        let t1 = t0 + secs(10);
        assert_eq!(writes.decide("a", Some(&30), &30, t1), WriteDue::InSync);
        assert_eq!(
            writes.decide("a", Some(&30), &40, t1),
            WriteDue::Wait(t1 + DEBOUNCE),
            "the next change waits from when it appeared"
        );
        assert_eq!(
            writes.decide("a", Some(&30), &30, t1 + secs(1)),
            WriteDue::InSync,
            "a change undone before it was written is never written"
        );
        assert_eq!(
            writes.decide("a", Some(&30), &40, t1 + secs(2)),
            WriteDue::Wait(t1 + secs(2) + DEBOUNCE)
        );
        writes.settle(t1 + secs(3), |_| None);
        assert!(
            writes.is_empty(),
            "a deleted object is forgotten, pending change and all"
        );
    }

    #[test]
    fn settling_forgets_deleted_objects_and_writes_the_watch_shows() {
        let mut writes = Writes::<u32>::default();
        let t0 = Instant::now();
        writes.record("shown", 2, true, t0);
        writes.record("lagging", 2, true, t0);
        writes.record("deleted", 2, true, t0);
        let later = t0 + secs(5);
        writes.settle(later, |uid| match uid {
            "shown" => Some(Some(&2)),
            "lagging" => Some(Some(&1)),
            _ => None,
        });
        assert_eq!(writes.len(), 1);
        assert_eq!(writes.previous("lagging", Some(&1)), Some(&2));
        assert_eq!(writes.previous("shown", Some(&2)), Some(&2));
    }
}
