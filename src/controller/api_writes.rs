//! The controller's API writes: PodGroups created, statuses patched (server-side apply or a
//! UID-tested JSON patch, see [`StatusPatch`]), Events published, [`WRITE_CONCURRENCY`] at a
//! time, each counted by outcome; PodGroups resized (an Event each says how it went); and the
//! `default` Queue made at start-up. When a status is
//! written at all is [`super::writes`]' call; what a pass writes is [`super::pass`]'.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    CREATE_RETRY_AFTER, Controller, Creation, Error, FIELD_MANAGER, Relabel, Resize, StatusWrite,
    WRITE_CONCURRENCY,
};
use super::{queues, status};
use crate::api::volcano::{VolcanoPodGroup, VolcanoPodGroupStatus};
use crate::api::{PodGroup, PodGroupStatus, Queue, QueueStatus, labels};
use crate::events::{self, Event};
use crate::metrics;

/// Whether the creation of the PodGroup `key`, planned at `now`, is due: not attempted within
/// [`CREATE_RETRY_AFTER`]. A creation planned again while it waits keeps the time of its first
/// attempt, so a PodGroup that is gone again (its owner replaced within that time: a
/// LeaderWorkerSet replica rolled) is made again once it has passed. Forgets attempts older.
fn attempt_due(attempted: &mut HashMap<String, Instant>, key: String, now: Instant) -> bool {
    attempted.retain(|_, at| now.duration_since(*at) < CREATE_RETRY_AFTER);
    match attempted.entry(key) {
        Entry::Occupied(_) => false,
        Entry::Vacant(entry) => {
            entry.insert(now);
            true
        }
    }
}

impl Controller {
    /// Creates PodGroups not attempted recently; returns the Events that say how it went.
    pub(super) async fn create(&mut self, creations: Vec<Creation>, now: Instant) -> Vec<Event> {
        let due: Vec<Creation> = creations
            .into_iter()
            .filter(|c| {
                let key = format!(
                    "{}/{}",
                    c.group.namespace().unwrap_or_default(),
                    c.group.name_any()
                );
                attempt_due(&mut self.created, key, now)
            })
            .collect();
        let client = &self.client;
        let results: Vec<(Creation, Result<(), Error>)> = futures::stream::iter(due)
            .map(|c| async move {
                let result = create_pod_group(client, &c.group).await;
                (c, result)
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        let mut events = Vec::new();
        for (c, result) in results {
            let group = format!(
                "{}/{}",
                c.group.namespace().unwrap_or_default(),
                c.group.name_any()
            );
            let outcome = match &result {
                Ok(()) => "ok",
                Err(Error::CreatePodGroup {
                    why: kube::Error::Api(status),
                    ..
                }) if status.is_already_exists() => "exists",
                Err(_) => "error",
            };
            ::metrics::counter!(metrics::CONTROLLER_POD_GROUPS_CREATED_TOTAL, "source" => c.source, "outcome" => outcome)
                .increment(1);
            match result {
                Ok(()) => {
                    tracing::info!(%group, source = c.source, "created PodGroup");
                    events.push(Event {
                        regarding: c.regarding,
                        warning: c.warning,
                        reason: "PodGroupCreated".to_owned(),
                        action: "CreatePodGroup",
                        note: format!(
                            "created PodGroup {group} ({}, queue {})",
                            c.note,
                            c.group.spec.queue_name()
                        ),
                    });
                }
                Err(_) if outcome == "exists" => {}
                Err(e) => {
                    tracing::warn!(error = %e, "controller");
                    events.push(Event {
                        regarding: c.regarding,
                        warning: true,
                        reason: "PodGroupCreateFailed".to_owned(),
                        action: "CreatePodGroup",
                        note: api_message(&e),
                    });
                }
            }
        }
        events
    }

    /// Writes the labels of each relabelled pod; the pod's UID in the patch makes the API
    /// server refuse it for a pod of that name made again since.
    pub(super) async fn relabel(&self, relabels: Vec<Relabel>) {
        let client = &self.client;
        futures::stream::iter(relabels)
            .for_each_concurrent(WRITE_CONCURRENCY, |r| async move {
                let pods: Api<k8s_openapi::api::core::v1::Pod> =
                    Api::namespaced(client.clone(), &r.pod.namespace);
                let patch = Patch::Merge(serde_json::json!({
                    "metadata": {"uid": r.pod.uid, "labels": r.labels}}));
                let params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                };
                if let Err(e) = pods.patch(&r.pod.name, &params, &patch).await {
                    tracing::warn!(pod = %format!("{}/{}", r.pod.namespace, r.pod.name), error = %e, "controller: move a pod into its tree's gang");
                }
            })
            .await;
    }

    /// Sets the `minMember` (and sub-groups, when given) of each resized PodGroup; returns the
    /// Events that say how it went.
    pub(super) async fn resize(&self, resizes: Vec<Resize>) -> Vec<Event> {
        let client = &self.client;
        futures::stream::iter(resizes)
            .map(|r| async move {
                let namespace = r.regarding.namespace.clone().unwrap_or_default();
                let name = r.regarding.name.clone().unwrap_or_default();
                let api: Api<PodGroup> = Api::namespaced(client.clone(), &namespace);
                let params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PatchParams::default()
                };
                let mut spec = serde_json::json!({"minMember": r.min_member});
                if let Some(policy) = &r.sub_group_policy {
                    spec["subGroupPolicy"] = serde_json::json!(policy);
                }
                let patch = Patch::Merge(serde_json::json!({ "spec": spec }));
                let result = api.patch(&name, &params, &patch).await;
                if let Err(e) = &result {
                    tracing::warn!(group = %format!("{namespace}/{name}"), error = %e, "controller: resize PodGroup");
                }
                Event {
                    regarding: r.regarding,
                    warning: result.is_err(),
                    reason: if result.is_ok() { "PodGroupResized" } else { "PodGroupResizeFailed" }
                        .to_owned(),
                    action: "ResizePodGroup",
                    note: match result {
                        Ok(_) => r.note,
                        Err(e) => format!("{}; failed: {}", r.note, api_message_of(&e)),
                    },
                }
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await
    }

    /// Writes PodGroup statuses; returns the transition Events of those written.
    pub(super) async fn write_pod_group_statuses(
        &mut self,
        writes: Vec<StatusWrite<PodGroupStatus>>,
        now: Instant,
    ) -> Vec<Event> {
        let client = &self.client;
        let results = write_statuses(writes, "podgroup", StatusPatch::Replace, |w| {
            Api::<PodGroup>::namespaced(client.clone(), w.namespace.as_deref().unwrap_or_default())
        })
        .await;
        let mut events = Vec::new();
        for (w, ok) in results {
            if ok
                && let Some((previous, min_member, regarding)) = &w.transition
                && let Some((warning, reason, note)) =
                    status::transition_event(*previous, &w.status, *min_member)
            {
                tracing::info!(group = %format!("{}/{}", w.namespace.as_deref().unwrap_or_default(), w.name), phase = reason, "PodGroup phase");
                events.push(Event {
                    regarding: regarding.clone(),
                    warning,
                    reason: reason.to_owned(),
                    action: "UpdateStatus",
                    note,
                });
            }
            self.pod_group_writes.record(&w.uid, w.status, ok, now);
        }
        events
    }

    pub(super) async fn write_queue_statuses(
        &mut self,
        writes: Vec<StatusWrite<QueueStatus>>,
        now: Instant,
    ) {
        let client = &self.client;
        let results = write_statuses(writes, "queue", StatusPatch::Apply, |_| {
            Api::<Queue>::all(client.clone())
        })
        .await;
        for (w, ok) in results {
            self.queue_writes.record(&w.uid, w.status, ok, now);
        }
    }

    /// Writes Volcano PodGroup statuses with a merge patch: to the status subresource where
    /// the CRD has one, else (Volcano's own CRD has none) to the object.
    pub(super) async fn write_volcano_statuses(
        &mut self,
        writes: Vec<StatusWrite<VolcanoPodGroupStatus>>,
        now: Instant,
    ) {
        let client = &self.client;
        let results: Vec<(StatusWrite<VolcanoPodGroupStatus>, bool)> = futures::stream::iter(writes)
            .map(|w| async move {
                let api: Api<VolcanoPodGroup> =
                    Api::namespaced(client.clone(), w.namespace.as_deref().unwrap_or_default());
                let body = Patch::Merge(serde_json::json!({"status": &w.status}));
                let params = PatchParams::default();
                let result = match api.patch_status(&w.name, &params, &body).await {
                    Err(kube::Error::Api(e)) if e.code == 404 => {
                        api.patch(&w.name, &params, &body).await
                    }
                    other => other,
                };
                let ok = match result {
                    Ok(_) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, group = %w.name, "controller: Volcano PodGroup status");
                        false
                    }
                };
                ::metrics::counter!(metrics::CONTROLLER_STATUS_WRITES_TOTAL, "kind" => "volcano-podgroup", "outcome" => if ok { "ok" } else { "error" })
                    .increment(1);
                (w, ok)
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for (w, ok) in results {
            self.volcano_writes.record(&w.uid, w.status, ok, now);
        }
    }

    pub(super) async fn publish(&self, events: Vec<Event>) {
        let publisher = &self.publisher;
        let results: Vec<Result<(), events::Error>> = futures::stream::iter(events)
            .map(|e| async move { publisher.publish(&e).await })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for result in results {
            let outcome = match result {
                Ok(()) => "ok",
                // The object's namespace is being deleted: nobody will read the Event.
                Err(events::Error {
                    why: kube::Error::Api(status),
                    ..
                }) if status.is_forbidden() && status.message.contains("being terminated") => {
                    "error"
                }
                Err(e) => {
                    tracing::warn!(error = %e, "controller");
                    "error"
                }
            };
            ::metrics::counter!(metrics::CONTROLLER_EVENTS_TOTAL, "outcome" => outcome)
                .increment(1);
        }
    }
}

/// How a status reaches the status subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatusPatch {
    /// Server-side apply, forced, as field manager `gangplank`: for a status others write
    /// parts of (a Queue's `conditions`).
    Apply,
    /// A JSON patch that tests the object's UID and replaces its whole status: for a status
    /// Gangplank alone writes (its PodGroups'). The API server spares the apply's parse and
    /// merge, and a recreated object of the same name is not written in its predecessor's place.
    Replace,
}

/// Writes every write's status, [`WRITE_CONCURRENCY`] at a time, through the API that
/// `api_for` gives for it, as `how` says; returns each write with whether it succeeded.
async fn write_statuses<K, S>(
    writes: Vec<StatusWrite<S>>,
    kind: &'static str,
    how: StatusPatch,
    api_for: impl Fn(&StatusWrite<S>) -> Api<K>,
) -> Vec<(StatusWrite<S>, bool)>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    S: serde::Serialize,
{
    let api_for = &api_for;
    futures::stream::iter(writes)
        .map(|w| async move {
            let ok = write_status(&api_for(&w), kind, how, &w).await;
            (w, ok)
        })
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await
}

/// Writes `w`'s status to the status subresource as `how` says; logs and counts the outcome.
async fn write_status<K, S>(
    api: &Api<K>,
    kind: &'static str,
    how: StatusPatch,
    w: &StatusWrite<S>,
) -> bool
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    S: serde::Serialize,
{
    let result = match how {
        StatusPatch::Apply => {
            let body = serde_json::json!({
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "status": &w.status,
            });
            let params = PatchParams::apply(FIELD_MANAGER).force();
            api.patch_status(&w.name, &params, &Patch::Apply(&body))
                .await
        }
        StatusPatch::Replace => {
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            };
            api.patch_status(
                &w.name,
                &params,
                &Patch::Json::<()>(replace_status(&w.uid, &w.status)),
            )
            .await
        }
    }
    .map_err(|why| Error::WriteStatus {
        kind,
        name: w.name.clone(),
        why,
    });
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => {
            tracing::warn!(error = %e, "controller");
            "error"
        }
    };
    ::metrics::counter!(metrics::CONTROLLER_STATUS_WRITES_TOTAL, "kind" => kind, "outcome" => outcome)
        .increment(1);
    result.is_ok()
}

/// The JSON patch of [`StatusPatch::Replace`]: the object must still be the one of `uid`, and
/// its status becomes `status` whole (`add` replaces a member that exists).
fn replace_status(uid: &str, status: &impl serde::Serialize) -> json_patch::Patch {
    let ops = serde_json::json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/status", "value": status},
    ]);
    serde_json::from_value(ops).expect("a well-formed JSON patch")
}

async fn create_pod_group(client: &Client, group: &PodGroup) -> Result<(), Error> {
    let namespace = group.namespace().unwrap_or_default();
    let api: Api<PodGroup> = Api::namespaced(client.clone(), &namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    api.create(&params, group)
        .await
        .map(|_| ())
        .map_err(|why| Error::CreatePodGroup {
            group: format!("{namespace}/{}", group.name_any()),
            why,
        })
}

/// What the API server said, for an Event a user reads.
fn api_message(error: &Error) -> String {
    match error {
        Error::CreatePodGroup { group, why } => {
            format!("failed to create PodGroup {group}: {}", api_message_of(why))
        }
        other => other.to_string(),
    }
}

/// What the API server said about a read, for an Event a user reads.
pub(super) fn api_message_of(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// Creates the `default` Queue when it is missing, retrying with back-off until it exists (the
/// Queue webhook refuses writes until its own lookups have synced) or `shutdown`.
pub async fn ensure_default_queue(client: Client, shutdown: CancellationToken) {
    let api: Api<Queue> = Api::all(client);
    let mut delay = Duration::from_secs(1);
    loop {
        match create_default_queue(&api).await {
            Ok(true) => {
                tracing::info!(queue = labels::DEFAULT_QUEUE, "created the default Queue");
                return;
            }
            Ok(false) => return,
            Err(e) => tracing::warn!(error = %e, retry_in = ?delay, "controller"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(30));
    }
}

/// Creates the default Queue unless it exists; `Ok(true)` when this call created it.
async fn create_default_queue(api: &Api<Queue>) -> Result<bool, Error> {
    if api
        .get_opt(labels::DEFAULT_QUEUE)
        .await
        .map_err(Error::DefaultQueue)?
        .is_some()
    {
        return Ok(false);
    }
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, &queues::default_queue()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(false),
        Err(e) => Err(Error::DefaultQueue(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodGroupPhase;

    #[test]
    fn a_creation_planned_on_every_pass_is_retried_once_its_first_attempt_is_old_enough() {
        let mut attempted = HashMap::new();
        let start = Instant::now();
        let key = || "ml/replica".to_owned();
        assert!(
            attempt_due(&mut attempted, key(), start),
            "the first attempt"
        );
        let mut now = start;
        while now < start + CREATE_RETRY_AFTER {
            assert!(!attempt_due(&mut attempted, key(), now), "again at {now:?}");
            now += Duration::from_millis(500);
        }
        assert!(
            attempt_due(&mut attempted, key(), now),
            "planned every half second, it is attempted again after {CREATE_RETRY_AFTER:?}"
        );
        assert!(attempt_due(&mut attempted, "ml/other".to_owned(), now));
    }

    #[test]
    fn a_replaced_status_drops_what_the_new_one_lacks_and_spares_a_recreated_object() {
        let stored = serde_json::json!({
            "metadata": {"name": "g", "uid": "u1"},
            "spec": {"minMember": 2},
            "status": {"phase": "Pending", "conditions": [{"type": "Admitted"}],
                       "lastTransitionTime": "2026-11-27T00:00:00Z"},
        });
        let status = PodGroupStatus {
            phase: PodGroupPhase::Running,
            running: 2,
            ..PodGroupStatus::default()
        };
        let mut written = stored.clone();
        json_patch::patch(&mut written, &replace_status("u1", &status)).unwrap();
        assert_eq!(written["spec"], stored["spec"]);
        assert_eq!(written["status"], serde_json::to_value(&status).unwrap());
        assert!(written["status"].get("conditions").is_none());
        assert!(written["status"].get("lastTransitionTime").is_none());

        let mut recreated = stored.clone();
        assert!(json_patch::patch(&mut recreated, &replace_status("u0", &status)).is_err());
        assert_eq!(recreated, stored);

        let mut without_status = stored.clone();
        without_status.as_object_mut().unwrap().remove("status");
        json_patch::patch(&mut without_status, &replace_status("u1", &status)).unwrap();
        assert_eq!(
            without_status["status"],
            serde_json::to_value(&status).unwrap()
        );
    }
}
