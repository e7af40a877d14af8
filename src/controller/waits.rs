//! Events that say why a gang waits, on its PodGroup and on each of its unbound member pods,
//! and why a pod of a queue in no group waits, on the pod.
//!
//! Why pods too: a user who runs `kubectl describe pod` on a pending member of a gang expects
//! to read why it is pending, as for any pod the scheduler cannot place. A gang held back by
//! Gangplank never reaches the scheduler (its members keep their scheduling gate), so the
//! scheduler writes no `FailedScheduling` Event; without these the pod would show nothing.
//!
//! The Events follow the PodGroup's status, so both always say the same thing: a group whose
//! `Admitted` condition is False (for any reason but `Admitting`, a pass away, and `NoMembers`,
//! no pod to tell) gets `WaitingForAdmission`, and one whose
//! `Scheduled` condition is `WaitingForRoom` (the extender refused to claim room for the gang)
//! gets `WaitingForRoom`, each with the condition's message as its note.
//!
//! Budget: the PodGroup Events go through the controller's per-pass budget like every Event
//! about a waiting object. Only for those emitted are the members' Events built (reading the
//! cache a second time, for just those groups), at most [`MEMBER_EVENTS_PER_PASS`] a pass. Their
//! repeats are suppressed by the same limiter, so a member misses an Event only when a pass
//! runs out of budget, and gets the next one when the group's message changes.

use k8s_openapi::api::core::v1::ObjectReference;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::api::PodGroupStatus;
use gangplank_core::model::GroupKey;

use super::observe::PodRef;
use super::status::{ADMITTED, ADMITTING, NO_MEMBERS, SCHEDULED};
use crate::events::Event;

/// Reason of the Events on a group (and its pods) that the admission loop holds back.
pub const WAITING_FOR_ADMISSION: &str = "WaitingForAdmission";
/// Reason of the Events on a group (and its pods) admitted but refused room by the extender:
/// the reason of its `Scheduled` condition too.
pub use super::status::WAITING_FOR_ROOM;
/// Most Events on member pods in one controller pass.
pub const MEMBER_EVENTS_PER_PASS: usize = 200;

/// Why one group waits, as its status says it.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub group: GroupKey,
    pub event: Event,
}

/// The wait `status` describes for the PodGroup `regarding`, if it describes one.
pub fn wait(group: GroupKey, regarding: ObjectReference, status: &PodGroupStatus) -> Option<Wait> {
    let find = |type_: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "False")
    };
    let held = |c: &&Condition| !matches!(c.reason.as_str(), ADMITTING | NO_MEMBERS);
    let (reason, condition): (&str, &Condition) = if let Some(c) = find(ADMITTED).filter(held) {
        (WAITING_FOR_ADMISSION, c)
    } else {
        (
            WAITING_FOR_ROOM,
            find(SCHEDULED).filter(|c| c.reason == WAITING_FOR_ROOM)?,
        )
    };
    Some(Wait {
        group,
        event: Event {
            regarding,
            warning: reason == WAITING_FOR_ROOM,
            reason: reason.to_owned(),
            action: "Schedule",
            note: condition.message.clone(),
        },
    })
}

/// The Event on a pod of a queue in no group that admission holds back: `why` is its waiting
/// reason, as a PodGroup's `Admitted` condition would say it.
pub fn lone_event(pod: &PodRef, why: String) -> Event {
    Event {
        regarding: pod.reference(),
        warning: false,
        reason: WAITING_FOR_ADMISSION.to_owned(),
        action: "Schedule",
        note: why,
    }
}

/// The same Event on each of `members`, its note naming the gang.
pub fn member_events(wait: &Wait, members: &[PodRef]) -> Vec<Event> {
    let note = format!("gang {}: {}", wait.group, wait.event.note);
    members
        .iter()
        .map(|pod| Event {
            regarding: pod.reference(),
            note: note.clone(),
            ..wait.event.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodGroupPhase;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn status(conditions: Vec<Condition>) -> PodGroupStatus {
        PodGroupStatus {
            phase: PodGroupPhase::Pending,
            conditions,
            ..PodGroupStatus::default()
        }
    }

    fn key() -> GroupKey {
        GroupKey::new("ml", "big")
    }

    #[test]
    fn a_group_held_at_admission_and_its_pods_say_why() {
        let s = status(vec![
            condition(
                ADMITTED,
                "False",
                "Waiting",
                "does not fit now: cpu 128 needed",
            ),
            condition(SCHEDULED, "False", "NotAdmitted", "waiting for admission"),
        ]);
        let wait = wait(key(), ObjectReference::default(), &s).unwrap();
        assert_eq!(wait.event.reason, WAITING_FOR_ADMISSION);
        assert_eq!(wait.event.note, "does not fit now: cpu 128 needed");
        assert!(!wait.event.warning);

        let pods = [PodRef {
            namespace: "ml".into(),
            name: "big-0".into(),
            uid: "u0".into(),
        }];
        let events = member_events(&wait, &pods);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].regarding.name.as_deref(), Some("big-0"));
        assert_eq!(events[0].regarding.kind.as_deref(), Some("Pod"));
        assert_eq!(
            events[0].note,
            "gang ml/big: does not fit now: cpu 128 needed"
        );
        assert_eq!(events[0].reason, WAITING_FOR_ADMISSION);
    }

    #[test]
    fn a_group_refused_room_by_the_extender_gets_a_warning() {
        let s = status(vec![
            condition(ADMITTED, "True", "Released", "8 released"),
            condition(SCHEDULED, "False", WAITING_FOR_ROOM, "0/8 members placed"),
        ]);
        let wait = wait(key(), ObjectReference::default(), &s).unwrap();
        assert_eq!(wait.event.reason, WAITING_FOR_ROOM);
        assert!(wait.event.warning);
    }

    #[test]
    fn a_group_that_is_not_held_back_gets_no_event() {
        for conditions in [
            vec![
                condition(ADMITTED, "False", "NoMembers", "no member pods yet"),
                condition(SCHEDULED, "False", "NotAdmitted", "waiting"),
            ],
            vec![
                condition(ADMITTED, "True", "Released", "8 released"),
                condition(SCHEDULED, "False", "Placing", "3 of 8 bound"),
            ],
            vec![
                condition(ADMITTED, "True", "Released", "8 released"),
                condition(SCHEDULED, "True", "Quorum", "8 bound"),
            ],
        ] {
            assert_eq!(
                wait(key(), ObjectReference::default(), &status(conditions)),
                None
            );
        }
    }
}
