//! One pass of the controller, its phases in the order they run: the PodGroups to create (for
//! Jobs, for other schedulers' PodGroups, for workloads, whose objects it reads first, and for
//! pods that ask for one), the statuses that differ from what is stored (PodGroups, Queues,
//! Volcano PodGroups, Gangplank's checks on Kueue Workloads: `kueue_checks`), the write memory settled against what the watch shows, and the Events
//! within their budgets. It decides with the pure functions of the sibling modules and leaves
//! the writes to the API to `api_writes`. The task of [`super::run`] owns the `Controller` and
//! runs one pass at a time, so the controller's memory between passes has that one writer.

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tokio::time::Instant;

use super::waits::Wait;
use super::writes::WriteDue;
use super::{Controller, StatusWrite};
use super::{observe, waits};
use crate::admission_loop::published::PassOutcome;
use crate::api::kueue::AdmissionCheckState;
use crate::api::volcano::VolcanoPodGroupStatus;
use crate::api::{PodGroupStatus, QueueStatus};
use crate::events::{self, Event};
use crate::metrics;
use gangplank_core::model::GroupKey;

mod creations;
mod kueue_checks;
mod statuses;

use statuses::{owned_queue_status, whole_seconds};

impl Controller {
    /// One pass, with the admission loop's latest `outcome`; returns when a write it deferred
    /// falls due.
    pub(super) async fn pass(&mut self, outcome: &PassOutcome) -> Option<Instant> {
        let started = Instant::now();
        let observation = observe::observe(&self.cache.snapshot(), crate::clock::unix_now());
        let decision = &outcome.decision;
        let dra_problems = self.cache.dra_problems();
        let admission_waits: HashMap<GroupKey, (&'static str, String)> = decision
            .waiting
            .iter()
            .map(|w| {
                let mut why = match outcome.reclaim_waiting.get(&w.group) {
                    Some(note) => format!("{}; {note}", w.why),
                    None => w.why.to_string(),
                };
                if let Some(note) = crate::cache::dra::note(&why, &dra_problems) {
                    why = format!("{why}; {note}");
                }
                (w.group.clone(), (w.why.reason().as_str(), why))
            })
            .collect();
        let now = Instant::now();
        let wall = whole_seconds(Timestamp::now());

        let mut wanted = Vec::new();
        let mut resizes = Vec::new();
        let (mut creations, mut sourced) = self.job_pod_groups(&mut resizes, &mut wanted);
        creations.extend(self.foreign_pod_groups(&mut sourced, &mut resizes, &mut wanted));
        self.read_workloads(&observation, now).await;
        let mut relabels = Vec::new();
        let orphans = self.orphan_pod_groups(&observation, &sourced, (&mut wanted, &mut relabels));
        let mut transitions = self
            .create(creations.into_iter().chain(orphans).collect(), now)
            .await;
        self.relabel(relabels).await;
        transitions.extend(self.resize(resizes).await);

        let mut due = None;
        let mut waits = Vec::new();
        let mut mirrored = HashMap::new();
        let (pod_group_writes, counts) = self.pod_group_statuses(
            &observation,
            &admission_waits,
            &wall,
            now,
            &mut due,
            (&mut waits, &mut mirrored),
        );
        let queue_writes = self.queue_statuses(
            &observation,
            &decision.queues,
            &counts,
            (now, &wall),
            &mut due,
        );
        let volcano_writes = self.volcano_statuses(&mirrored, now, &mut due);
        let kueue_writes = self.kueue_checks(&mirrored, now, &mut due);
        transitions.extend(self.write_pod_group_statuses(pod_group_writes, now).await);
        self.write_queue_statuses(queue_writes, now).await;
        self.write_volcano_statuses(volcano_writes, now).await;
        self.write_kueue_checks(kueue_writes, now).await;
        self.activate_kueue_checks(now).await;
        self.settle(now);

        let mut events = self.limiter.admit(transitions, usize::MAX, now);
        events.extend(self.limiter.admit(wanted, events::BUDGET_PER_PASS, now));
        let budget = events::BUDGET_PER_PASS.saturating_sub(events.len());
        events.extend(self.wait_events(waits, budget, now));
        let lone: Vec<Event> = decision
            .waiting
            .iter()
            .filter_map(|w| {
                let pod = w.pod.as_ref()?;
                let (_, why) = admission_waits.get(&w.group)?;
                let pod = observe::PodRef {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                };
                Some(waits::lone_event(&pod, why.clone()))
            })
            .collect();
        events.extend(self.limiter.admit(lone, waits::MEMBER_EVENTS_PER_PASS, now));
        self.publish(events).await;
        ::metrics::histogram!(metrics::CONTROLLER_PASS_DURATION_SECONDS)
            .record(started.elapsed().as_secs_f64());
        due
    }

    /// Lets the write memory forget what the watch shows and objects that are gone.
    fn settle(&mut self, now: Instant) {
        let groups = self.stores.pod_groups.state();
        let by_uid: HashMap<String, Option<&PodGroupStatus>> = groups
            .iter()
            .filter_map(|g| Some((g.uid()?, g.status.as_ref())))
            .collect();
        self.pod_group_writes
            .settle(now, |uid| by_uid.get(uid).copied());
        let queues = self.stores.queues.state();
        let statuses: HashMap<String, Option<QueueStatus>> = queues
            .iter()
            .filter_map(|q| Some((q.uid()?, owned_queue_status(q))))
            .collect();
        self.queue_writes
            .settle(now, |uid| statuses.get(uid).map(Option::as_ref));
        let sources = self.stores.volcano_pod_groups.state();
        let statuses: HashMap<String, Option<&VolcanoPodGroupStatus>> = sources
            .iter()
            .filter_map(|g| Some((g.uid()?, g.status.as_ref())))
            .collect();
        self.volcano_writes
            .settle(now, |uid| statuses.get(uid).copied());
        let ours = self.stores.kueue_checks_of_ours();
        let workloads = self.stores.kueue_workloads.state();
        let checks: HashMap<String, Option<&AdmissionCheckState>> = workloads
            .iter()
            .filter_map(|w| Some((w.uid()?, w.our_check(&|name| ours.contains(name)))))
            .collect();
        self.kueue_writes
            .settle(now, |uid| checks.get(uid).copied());
    }

    /// Events on waiting groups within `budget`, then on the unbound members of those emitted
    /// (see [`waits`]).
    fn wait_events(&mut self, waits: Vec<Wait>, budget: usize, now: Instant) -> Vec<Event> {
        let (mut events, mut emitted) = (Vec::new(), Vec::new());
        for wait in waits {
            if events.len() == budget {
                break;
            }
            if let [event] = &self.limiter.admit(vec![wait.event.clone()], 1, now)[..] {
                events.push(event.clone());
                emitted.push(wait);
            }
        }
        if emitted.is_empty() {
            return events;
        }
        let members: Vec<Event> = self.cache.read(|s| {
            emitted
                .iter()
                .flat_map(|w| waits::member_events(w, &observe::unbound_members(s, &w.group)))
                .collect()
        });
        events.extend(
            self.limiter
                .admit(members, waits::MEMBER_EVENTS_PER_PASS, now),
        );
        events
    }
}

/// The write `make` builds when `decision` says to write now; otherwise none, and when the
/// decision waits, `due` notes when to look again (the earliest of those noted).
fn due_write<S>(
    decision: WriteDue,
    due: &mut Option<Instant>,
    make: impl FnOnce() -> StatusWrite<S>,
) -> Option<StatusWrite<S>> {
    match decision {
        WriteDue::InSync => None,
        WriteDue::Wait(at) => {
            *due = Some(due.map_or(at, |d| d.min(at)));
            None
        }
        WriteDue::Write => Some(make()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn times_are_compared_in_whole_seconds_as_the_api_stores_them() {
        let now = Timestamp::from_nanosecond(1_700_000_000_123_456_789).unwrap();
        let stored: Time =
            serde_json::from_value(serde_json::to_value(whole_seconds(now)).unwrap()).unwrap();
        assert_eq!(stored, whole_seconds(now));
        assert_eq!(whole_seconds(now).0.as_second(), 1_700_000_000);
    }
}
