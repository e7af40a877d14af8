//! One pass of the controller, its phases in the order they run: the PodGroups to create (for
//! Jobs, for other schedulers' PodGroups, for workloads, whose objects it reads first, and for
//! pods that ask for one), the statuses that differ from what is stored (PodGroups, Queues,
//! Volcano PodGroups), the write memory settled against what the watch shows, and the Events
//! within their budgets. It decides with the pure functions of the sibling modules and leaves
//! the writes to the API to `api_writes`. The task of [`super::run`] owns the `Controller` and
//! runs one pass at a time, so the controller's memory between passes has that one writer.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::api_writes::api_message_of;
use super::foreign_groups::Foreign;
use super::observe::Observation;
use super::queues::GroupCounts;
use super::status::{Finisher, Inputs};
use super::waits::Wait;
use super::writes::WriteDue;
use super::{CREATE_RETRY_AFTER, Controller, Creation, Resize, StatusWrite, WRITE_CONCURRENCY};
use super::{batch_v1_jobs, foreign_groups, observe, orphans, queues, status, waits, workloads};
use crate::admission_loop::published::PassOutcome;
use crate::api::volcano::VolcanoPodGroupStatus;
use crate::api::{self, PodGroup, PodGroupStatus, Queue, QueueStatus, labels};
use crate::events::{self, Event};
use crate::metrics;
use crate::webhooks::lookup::NamespaceLookup;
use gangplank_core::admit::plan;
use gangplank_core::model::{self, GroupKey};

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
        let orphans = self.orphan_pod_groups(&observation, &sourced, &mut wanted);
        let mut transitions = self
            .create(creations.into_iter().chain(orphans).collect(), now)
            .await;
        transitions.extend(self.resize(resizes).await);

        let mut due = None;
        let mut waits = Vec::new();
        let mut volcano_desired = HashMap::new();
        let (pod_group_writes, counts) = self.pod_group_statuses(
            &observation,
            &admission_waits,
            &wall,
            now,
            &mut due,
            (&mut waits, &mut volcano_desired),
        );
        let queue_writes = self.queue_statuses(
            &observation,
            &decision.queues,
            &counts,
            (now, &wall),
            &mut due,
        );
        let volcano_writes = self.volcano_statuses(&volcano_desired, now, &mut due);
        transitions.extend(self.write_pod_group_statuses(pod_group_writes, now).await);
        self.write_queue_statuses(queue_writes, now).await;
        self.write_volcano_statuses(volcano_writes, now).await;
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

    /// PodGroups to create for Jobs, Conflict events, and the groups that Jobs account for.
    fn job_pod_groups(
        &self,
        resizes: &mut Vec<Resize>,
        wanted: &mut Vec<Event>,
    ) -> (Vec<Creation>, HashSet<GroupKey>) {
        let mut creations = Vec::new();
        let mut groups = HashSet::new();
        for job in self.stores.jobs.state() {
            let (Some(name), Some(namespace)) = (batch_v1_jobs::gang_name(&job), job.namespace())
            else {
                continue;
            };
            groups.insert(GroupKey::new(namespace.clone(), name));
            let existing = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(name).within(&namespace));
            let plan = batch_v1_jobs::plan(&job, existing.as_deref());
            carry_out(
                plan,
                "job",
                events::reference(job.as_ref()),
                (&mut creations, resizes),
                wanted,
            );
        }
        (creations, groups)
    }

    /// PodGroups to create or resize for the other schedulers' PodGroups, and Conflict
    /// events; adds the groups they account for to `sourced`.
    fn foreign_pod_groups(
        &self,
        sourced: &mut HashSet<GroupKey>,
        resizes: &mut Vec<Resize>,
        wanted: &mut Vec<Event>,
    ) -> Vec<Creation> {
        let mut creations = Vec::new();
        let scheduler_plugins = self.stores.scheduler_plugins_pod_groups.state();
        let volcano = self.stores.volcano_pod_groups.state();
        let upstream = self.stores.upstream_pod_groups.state();
        let upstream_v1alpha2 = self.stores.upstream_v1alpha2_pod_groups.state();
        let sources = dialect_sources(&scheduler_plugins, "scheduler-plugins")
            .chain(dialect_sources(&volcano, "volcano"))
            .chain(dialect_sources(&upstream, "workload-api"))
            .chain(dialect_sources(&upstream_v1alpha2, "workload-api"));
        for (source, regarding, dialect) in sources {
            let (Some(namespace), Some(name)) = (&source.meta.namespace, &source.meta.name) else {
                continue;
            };
            let job = |namespace: &str, name: &str| {
                self.stores
                    .jobs
                    .get(&ObjectRef::<Job>::new(name).within(namespace))
            };
            if foreign_groups::left_to_its_job(&source, job) {
                continue;
            }
            sourced.insert(GroupKey::new(namespace.as_str(), name.as_str()));
            let existing = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(name).within(namespace));
            let namespace_queue = self.stores.namespace_queue(namespace).ok().flatten();
            let plan =
                foreign_groups::plan(source, existing.as_deref(), namespace_queue.as_deref());
            carry_out(plan, dialect, regarding, (&mut creations, resizes), wanted);
        }
        creations
    }

    /// Reads the workloads that control pods of groups without a PodGroup (see [`workloads`]),
    /// unless read within [`CREATE_RETRY_AFTER`].
    async fn read_workloads(&mut self, observation: &Observation, now: Instant) {
        self.workloads
            .retain(|_, (at, _)| now.duration_since(*at) < CREATE_RETRY_AFTER);
        let wanted: Vec<(String, Arc<model::Workload>)> = observation
            .groups
            .iter()
            .filter(|(_, view)| !view.has_pod_group)
            .filter_map(|(key, view)| {
                let workload = view.asked.as_ref()?.workload.clone()?;
                Some((key.namespace.to_string(), workload))
            })
            .filter(|(namespace, w)| !self.workloads.contains_key(&workload_key(namespace, w)))
            .collect();
        let client = &self.client;
        let read: Vec<(String, Result<Arc<DynamicObject>, String>)> = futures::stream::iter(wanted)
            .map(|(namespace, w)| async move {
                let (group, version) = w.api_version.split_once('/').unwrap_or(("", ""));
                let plural =
                    api::workloads::kind_of(&w.api_version, &w.kind).map_or("", |k| k.plural);
                let resource = ApiResource {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    api_version: w.api_version.clone(),
                    kind: w.kind.clone(),
                    plural: plural.to_owned(),
                };
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &namespace, &resource);
                let object = api
                    .get(&w.name)
                    .await
                    .map(Arc::new)
                    .map_err(|e| api_message_of(&e));
                (workload_key(&namespace, &w), object)
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        for (key, object) in read {
            self.workloads.insert(key, (now, object));
        }
    }

    /// PodGroups to create for pods that ask for one, and PodGroupMissing events.
    fn orphan_pod_groups(
        &self,
        observation: &Observation,
        job_groups: &HashSet<GroupKey>,
        wanted: &mut Vec<Event>,
    ) -> Vec<Creation> {
        let mut creations = Vec::new();
        let mut keys: Vec<&GroupKey> = observation
            .groups
            .iter()
            .filter(|(key, view)| !view.has_pod_group && !job_groups.contains(key))
            .map(|(key, _)| key)
            .collect();
        keys.sort();
        for key in keys {
            let Some(asked) = &observation.groups[key].asked else {
                continue;
            };
            let in_store = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
                .is_some();
            if in_store {
                continue; // the cache's own watch lags behind
            }
            let namespace_queue = self.stores.namespace_queue(&key.namespace).ok().flatten();
            let (plan, source, note) = match &asked.workload {
                Some(workload) => {
                    let read = self.workloads.get(&workload_key(&key.namespace, workload));
                    let Some((_, object)) = read else {
                        continue; // not read yet
                    };
                    let object = object.as_deref().map_err(String::as_str);
                    let plan =
                        workloads::plan(key, asked, workload, object, namespace_queue.as_deref());
                    let note = format!("sized from {} {}", workload.kind, workload.name);
                    (plan, "workload", note)
                }
                None => {
                    let plan = orphans::plan(key, asked, namespace_queue.as_deref());
                    let note = format!(
                        "minMember {} from the annotation {} on the group's pods",
                        asked.min_member.unwrap_or(1),
                        labels::MIN_MEMBER_ANNOTATION
                    );
                    (plan, "pods", note)
                }
            };
            match plan {
                Some(orphans::Plan::Create(group)) => creations.push(Creation {
                    note: format!("minMember {}, {note}", group.spec.min_member),
                    group: *group,
                    source,
                    regarding: asked.waiting[0].reference(),
                    warning: false,
                }),
                Some(orphans::Plan::Missing { pods, message }) => {
                    wanted.extend(pods.iter().map(|pod| Event {
                        regarding: pod.reference(),
                        warning: true,
                        reason: orphans::POD_GROUP_MISSING.to_owned(),
                        action: "WaitForPodGroup",
                        note: message.clone(),
                    }));
                }
                None => {}
            }
        }
        creations
    }

    /// The PodGroup statuses to write, and every group's phase counted per queue; adds the
    /// waiting groups to `waits`, and the desired status of the groups Volcano PodGroups
    /// control to `volcano`.
    fn pod_group_statuses(
        &mut self,
        observation: &Observation,
        admission_waits: &HashMap<GroupKey, (&'static str, String)>,
        wall: &Time,
        now: Instant,
        due: &mut Option<Instant>,
        (waits, volcano): (&mut Vec<Wait>, &mut HashMap<GroupKey, PodGroupStatus>),
    ) -> (
        Vec<StatusWrite<PodGroupStatus>>,
        HashMap<String, GroupCounts>,
    ) {
        let mut out = Vec::new();
        let mut counts: HashMap<String, GroupCounts> = HashMap::new();
        for group in self.stores.pod_groups.state() {
            let (Some(namespace), Some(uid)) = (group.namespace(), group.uid()) else {
                continue;
            };
            let name = group.name_any();
            let key = GroupKey::new(namespace.clone(), name.clone());
            let view = observation.groups.get(&key);
            let finisher = self.finisher(&group, &namespace);
            let min_member = group.spec.min_member.max(1).unsigned_abs();
            let inputs = Inputs {
                min_member,
                members: view.map(|v| v.members).unwrap_or_default(),
                finisher: &finisher,
                admission_wait: admission_waits
                    .get(&key)
                    .map(|(reason, why)| (*reason, why.as_str())),
                placement_wait: view.and_then(|v| v.wait_reason.as_deref()),
                ahead: status::ahead(&group, wall.0.as_second()),
                kept: view.and_then(|v| v.kept.as_ref()),
            };
            let stored = group.status.as_ref();
            let previous = self.pod_group_writes.previous(&uid, stored);
            let desired = status::pod_group_status(&inputs, previous, wall);
            let previous_phase = previous.map(|p| p.phase).unwrap_or_default();
            waits.extend(waits::wait(
                key.clone(),
                events::reference(group.as_ref()),
                &desired,
            ));
            counts
                .entry(group.spec.queue_name().to_owned())
                .or_default()
                .add(desired.phase);
            if api::volcano::controls(&group) {
                volcano.insert(key.clone(), desired.clone());
            }
            match self.pod_group_writes.decide(&uid, stored, &desired, now) {
                WriteDue::InSync => {}
                WriteDue::Wait(at) => *due = Some(due.map_or(at, |d| d.min(at))),
                WriteDue::Write => out.push(StatusWrite {
                    uid,
                    namespace: Some(namespace),
                    name,
                    status: desired,
                    transition: Some((
                        previous_phase,
                        min_member,
                        events::reference(group.as_ref()),
                    )),
                }),
            }
        }
        (out, counts)
    }

    /// Who finishes `group`: its controlling Job, when the store has that Job.
    fn finisher(&self, group: &PodGroup, namespace: &str) -> Finisher {
        let Some(owner) = batch_v1_jobs::controller_job(group) else {
            return Finisher::Members;
        };
        match self
            .stores
            .jobs
            .get(&ObjectRef::<Job>::new(&owner.name).within(namespace))
        {
            Some(job) if job.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
                Finisher::Job(batch_v1_jobs::state(&job))
            }
            // The Job is gone and the garbage collector will delete the group: judge by pods.
            _ => Finisher::Members,
        }
    }

    fn queue_statuses(
        &mut self,
        observation: &Observation,
        shares: &BTreeMap<String, plan::QueueReport>,
        counts: &HashMap<String, GroupCounts>,
        (now, wall): (Instant, &Time),
        due: &mut Option<Instant>,
    ) -> Vec<StatusWrite<QueueStatus>> {
        let mut out = Vec::new();
        for queue in self.stores.queues.state() {
            let Some(uid) = queue.uid() else { continue };
            let name = queue.name_any();
            let usage = observation.queues.get(&name).cloned().unwrap_or_default();
            let desired = queues::queue_status(
                &queue,
                &usage,
                shares.get(&name),
                counts.get(&name).copied().unwrap_or_default(),
                wall,
            );
            let stored = owned_queue_status(&queue);
            match self
                .queue_writes
                .decide(&uid, stored.as_ref(), &desired, now)
            {
                WriteDue::InSync => {}
                WriteDue::Wait(at) => *due = Some(due.map_or(at, |d| d.min(at))),
                WriteDue::Write => out.push(StatusWrite {
                    uid,
                    namespace: None,
                    name,
                    status: desired,
                    transition: None,
                }),
            }
        }
        out
    }

    /// The Volcano PodGroup statuses to write: each says what the Gangplank PodGroup made for
    /// it says (`desired`, by key, for the groups Volcano PodGroups control).
    fn volcano_statuses(
        &mut self,
        desired: &HashMap<GroupKey, PodGroupStatus>,
        now: Instant,
        due: &mut Option<Instant>,
    ) -> Vec<StatusWrite<VolcanoPodGroupStatus>> {
        let mut out = Vec::new();
        for source in self.stores.volcano_pod_groups.state() {
            let (Some(namespace), Some(uid)) = (source.namespace(), source.uid()) else {
                continue;
            };
            let name = source.name_any();
            let Some(group) = desired.get(&GroupKey::new(namespace.as_str(), name.as_str())) else {
                continue;
            };
            let status = foreign_groups::volcano_status(group);
            match self
                .volcano_writes
                .decide(&uid, source.status.as_ref(), &status, now)
            {
                WriteDue::InSync => {}
                WriteDue::Wait(at) => *due = Some(due.map_or(at, |d| d.min(at))),
                WriteDue::Write => out.push(StatusWrite {
                    uid,
                    namespace: Some(namespace),
                    name,
                    status,
                    transition: None,
                }),
            }
        }
        out
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

/// Queues what `plan` (for a workload that gets a PodGroup: a Job, a scheduler-plugins
/// PodGroup) asks: the creation, labelled `source` for the metric, the resize, or the Conflict
/// event on `regarding`.
fn carry_out(
    plan: Option<batch_v1_jobs::Plan>,
    source: &'static str,
    regarding: ObjectReference,
    (creations, resizes): (&mut Vec<Creation>, &mut Vec<Resize>),
    wanted: &mut Vec<Event>,
) {
    match plan {
        Some(batch_v1_jobs::Plan::Create {
            group,
            note,
            warning,
        }) => creations.push(Creation {
            group: *group,
            source,
            regarding,
            note,
            warning,
        }),
        Some(batch_v1_jobs::Plan::Resize { min_member, note }) => resizes.push(Resize {
            min_member,
            regarding,
            note,
        }),
        Some(batch_v1_jobs::Plan::Conflict { message }) => wanted.push(Event {
            regarding,
            warning: true,
            reason: "PodGroupConflict".to_owned(),
            action: "CreatePodGroup",
            note: message,
        }),
        None => {}
    }
}

/// The part of a Queue's status the controller writes (everything but `conditions`).
fn owned_queue_status(queue: &Queue) -> Option<QueueStatus> {
    queue.status.clone().map(|mut s| {
        s.conditions.clear();
        s
    })
}

/// `now` without its fraction of a second: the API stores times in whole seconds, and a
/// status compared with what was stored must not differ by nanoseconds.
fn whole_seconds(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Where [`Controller::read_workloads`] keeps a workload read for a group of `namespace`: by
/// kind and name, since a workload known only by its labels has no UID.
fn workload_key(namespace: &str, workload: &model::Workload) -> String {
    format!("{namespace}/{}/{}", workload.kind, workload.name)
}

/// Each of `objects`, another scheduler's PodGroups of one `dialect`, as the controller reads
/// it, with the reference its Events are about.
fn dialect_sources<'a, K>(
    objects: &'a [Arc<K>],
    dialect: &'static str,
) -> impl Iterator<Item = (Foreign<'a>, ObjectReference, &'static str)> + 'a
where
    K: kube::Resource<DynamicType = ()> + 'a,
    Foreign<'a>: From<&'a K>,
{
    objects.iter().map(move |s| {
        (
            Foreign::from(s.as_ref()),
            events::reference(s.as_ref()),
            dialect,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_compared_in_whole_seconds_as_the_api_stores_them() {
        let now = Timestamp::from_nanosecond(1_700_000_000_123_456_789).unwrap();
        let stored: Time =
            serde_json::from_value(serde_json::to_value(whole_seconds(now)).unwrap()).unwrap();
        assert_eq!(stored, whole_seconds(now));
        assert_eq!(whole_seconds(now).0.as_second(), 1_700_000_000);
    }
}
