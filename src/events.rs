//! Events on Jobs, pods and PodGroups, rate-limited: written by the controller and by the
//! admission loop (its evictions and its backfills).
//!
//! The same Event (same object, reason and message) is emitted at most once per
//! [`REPEAT_AFTER`] (so a flapping group does not repeat itself either), and at most
//! [`BUDGET_PER_PASS`] Events about waiting objects per controller pass, so a thousand-pod gang
//! waiting for its PodGroup does not flood the API server: Events over the budget are simply
//! emitted on a later pass. Events on phase transitions are not budgeted (they follow status
//! writes, which are throttled per object) since a later pass would not repeat them.
//!
//! Events are written with the `events.k8s.io/v1` API (what `kubectl events` and `kubectl
//! describe` show), as new objects each time: the limiter already keeps repeats rare, and a
//! new object shows the current message, where a patched series would keep the first one.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use tokio::time::Instant;

/// An Event the API server did not take.
#[derive(Debug, thiserror::Error)]
#[error("failed to emit Event {reason} on {object}: {why}")]
pub struct Error {
    pub reason: String,
    pub object: String,
    pub why: kube::Error,
}

/// The same Event on the same object is not emitted again within this time.
pub const REPEAT_AFTER: Duration = Duration::from_secs(5 * 60);
/// Most Events emitted in one controller pass.
pub const BUDGET_PER_PASS: usize = 50;
/// `reportingController` of Gangplank's Events.
pub const REPORTING_CONTROLLER: &str = "scheduling.gangplank.dev/controller";
/// The API's limit on an Event's note, in bytes.
const NOTE_LIMIT: usize = 1024;

/// One Event to emit.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub regarding: ObjectReference,
    pub warning: bool,
    /// CamelCase, what happened (`Running`, `PodGroupMissing`).
    pub reason: String,
    /// CamelCase, what the controller did or was doing (`CreatePodGroup`, `UpdateStatus`).
    pub action: &'static str,
    pub note: String,
}

impl Event {
    fn key(&self) -> (String, String, String) {
        let object =
            self.regarding.uid.clone().unwrap_or_else(|| {
                format!("{:?}/{:?}", self.regarding.namespace, self.regarding.name)
            });
        (object, self.reason.clone(), self.note.clone())
    }
}

/// A pod as an Event's `regarding`.
pub fn pod_reference(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        uid: Some(uid.to_owned()),
        ..ObjectReference::default()
    }
}

/// A Gangplank PodGroup, by its key, as an Event's `regarding`.
pub fn pod_group_reference(group: &gangplank_core::model::GroupKey) -> ObjectReference {
    ObjectReference {
        api_version: Some(crate::api::PodGroup::api_version(&()).into_owned()),
        kind: Some(crate::api::PodGroup::kind(&()).into_owned()),
        namespace: Some(group.namespace.to_string()),
        name: Some(group.name.to_string()),
        ..ObjectReference::default()
    }
}

/// Decides which Events may be emitted now (see the module docs).
#[derive(Debug, Default)]
pub struct Limiter {
    last: HashMap<(String, String, String), Instant>,
}

impl Limiter {
    /// The Events of `wanted` to emit now, at most `budget` of them, recording them as
    /// emitted.
    pub fn admit(&mut self, wanted: Vec<Event>, budget: usize, now: Instant) -> Vec<Event> {
        self.last
            .retain(|_, at| now.duration_since(*at) < REPEAT_AFTER);
        let mut out = Vec::new();
        for event in wanted {
            if out.len() == budget {
                break;
            }
            let key = event.key();
            if self.last.contains_key(&key) {
                continue;
            }
            self.last.insert(key, now);
            out.push(event);
        }
        out
    }
}

/// A reference to `object` for an Event's `regarding`.
pub fn reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    object.object_ref(&())
}

/// Writes Events to the API.
#[derive(Clone)]
pub struct Publisher {
    client: Client,
    instance: String,
}

impl Publisher {
    pub fn new(client: Client) -> Self {
        let instance = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .ok()
            .filter(|s| !s.is_empty() && s.len() <= 128)
            .unwrap_or_else(|| "gangplank".to_owned());
        Publisher { client, instance }
    }

    pub async fn publish(&self, event: &Event) -> Result<(), Error> {
        let namespace = event
            .regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        api.create(
            &PostParams::default(),
            &self.to_k8s(event, &namespace, Timestamp::now()),
        )
        .await
        .map(|_| ())
        .map_err(|why| Error {
            reason: event.reason.clone(),
            object: format!(
                "{}/{}",
                namespace,
                event.regarding.name.as_deref().unwrap_or_default()
            ),
            why,
        })
    }

    fn to_k8s(&self, event: &Event, namespace: &str, now: Timestamp) -> K8sEvent {
        let object = event.regarding.name.as_deref().unwrap_or("object");
        K8sEvent {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace.to_owned()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(if event.warning { "Warning" } else { "Normal" }.to_owned()),
            reason: Some(event.reason.clone()),
            action: Some(event.action.to_owned()),
            note: Some(truncate(&event.note, NOTE_LIMIT)),
            regarding: Some(event.regarding.clone()),
            reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        }
    }
}

/// `text` cut to at most `limit` bytes, on a character boundary.
fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(uid: &str, reason: &str, note: &str) -> Event {
        Event {
            regarding: ObjectReference {
                uid: Some(uid.into()),
                name: Some(uid.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            warning: true,
            reason: reason.into(),
            action: "Wait",
            note: note.into(),
        }
    }

    #[test]
    fn the_same_event_on_the_same_object_is_emitted_once_in_five_minutes() {
        let mut limiter = Limiter::default();
        let t0 = Instant::now();
        let wanted = || {
            vec![
                event("a", "PodGroupMissing", "create it"),
                event("b", "PodGroupMissing", "create it"),
            ]
        };
        assert_eq!(limiter.admit(wanted(), BUDGET_PER_PASS, t0).len(), 2);
        assert!(
            limiter
                .admit(wanted(), BUDGET_PER_PASS, t0 + Duration::from_secs(60))
                .is_empty()
        );
        assert_eq!(
            limiter
                .admit(
                    vec![event("a", "PodGroupMissing", "something new")],
                    BUDGET_PER_PASS,
                    t0
                )
                .len(),
            1,
            "a different message is a different event"
        );
        assert_eq!(
            limiter
                .admit(wanted(), BUDGET_PER_PASS, t0 + REPEAT_AFTER)
                .len(),
            2
        );
    }

    #[test]
    fn events_over_the_budget_wait_for_a_later_pass() {
        let mut limiter = Limiter::default();
        let t0 = Instant::now();
        let many: Vec<Event> = (0..BUDGET_PER_PASS + 10)
            .map(|i| event(&format!("p{i}"), "PodGroupMissing", "create it"))
            .collect();
        assert_eq!(
            limiter.admit(many.clone(), BUDGET_PER_PASS, t0).len(),
            BUDGET_PER_PASS
        );
        let rest = limiter.admit(many, BUDGET_PER_PASS, t0 + Duration::from_secs(1));
        assert_eq!(rest.len(), 10);
        assert_eq!(rest[0].regarding.name.as_deref(), Some("p50"));
    }

    #[test]
    fn a_long_note_is_cut_to_the_apis_limit_on_a_character_boundary() {
        let long = "é".repeat(600);
        let cut = truncate(&long, NOTE_LIMIT);
        assert!(cut.len() <= NOTE_LIMIT);
        assert!(cut.ends_with('…'));
        assert_eq!(truncate("short", NOTE_LIMIT), "short");
    }
}
