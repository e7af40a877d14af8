//! Events on the groups an admission pass lent room reserved for the head of the line
//! (backfill): `Backfilled` on each such PodGroup, naming the head and the group's expected
//! runtime, so that `kubectl describe`, `gangplank why` and `gangplank report` show why a
//! younger, smaller group started before the head.
//!
//! The admission loop owns the one [`Limiter`] here: a group lent room in two passes (its
//! release failed the first time) gets one Event.

use tokio::time::Instant;

use gangplank_core::admit::plan::Decision;
use gangplank_core::model::State;

use crate::events::{Event, Limiter, pod_group_reference};

/// The reason of the Event on a group admitted into the head's reservation.
pub const BACKFILLED: &str = "Backfilled";

/// The `Backfilled` Events of `decision` not emitted before, from the `state` it was made on.
pub fn events(
    state: &State,
    decision: &Decision,
    limiter: &mut Limiter,
    now: Instant,
) -> Vec<Event> {
    let Some(head) = decision.hold.as_ref().map(|h| &h.group) else {
        return Vec::new();
    };
    let wanted = decision
        .lent
        .iter()
        .map(|group| {
            let runtime = state
                .groups()
                .get(group)
                .and_then(|g| g.spec.as_ref())
                .and_then(|s| s.expected_runtime)
                .map_or_else(String::new, |r| format!(" of {} s", r.as_secs()));
            Event {
                regarding: pod_group_reference(group),
                warning: false,
                reason: BACKFILLED.to_owned(),
                action: "Admit",
                note: format!(
                    "admitted into room reserved for {head}, which heads the line: its expected runtime{runtime} ends before the room {head} lacks is expected to free"
                ),
            }
        })
        .collect();
    limiter.admit(wanted, usize::MAX, now)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use gangplank_core::admit::plan::Hold;
    use gangplank_core::model::{GroupKey, PodGroup};

    use super::*;

    fn decision(lent: &[&str]) -> Decision {
        Decision {
            hold: Some(Hold {
                group: GroupKey::new("prod", "train-xl"),
                overdue: false,
                nodes: Vec::new(),
                lacking: Vec::new(),
                seen: Vec::new(),
            }),
            lent: lent.iter().map(|n| GroupKey::new("prod", *n)).collect(),
            ..Decision::default()
        }
    }

    fn state_with(name: &str, runtime: u64) -> State {
        let mut state = State::default();
        let key = GroupKey::new("prod", name);
        let mut spec = PodGroup::new(key.clone(), 1, "production");
        spec.expected_runtime = Some(Duration::from_secs(runtime));
        state.apply_pod_group(spec);
        state
    }

    #[test]
    fn a_group_lent_reserved_room_gets_one_event_naming_the_head_and_its_runtime() {
        let state = state_with("eval", 15);
        let mut limiter = Limiter::default();
        let now = Instant::now();
        let events = events(&state, &decision(&["eval"]), &mut limiter, now);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, BACKFILLED);
        assert_eq!(events[0].regarding.name.as_deref(), Some("eval"));
        assert!(events[0].note.contains("reserved for prod/train-xl"));
        assert!(events[0].note.contains("runtime of 15 s"));
        let again = super::events(&state, &decision(&["eval"]), &mut limiter, now);
        assert!(again.is_empty(), "the same backfill is told once");
    }

    #[test]
    fn a_pass_that_lent_nothing_emits_nothing() {
        let state = state_with("eval", 15);
        let events = events(
            &state,
            &decision(&[]),
            &mut Limiter::default(),
            Instant::now(),
        );
        assert!(events.is_empty());
    }
}
