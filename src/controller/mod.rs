//! The controller: PodGroups for Jobs, for scheduler-plugins' and Volcano's PodGroups, for
//! workloads of known kinds and for pods that ask for one, PodGroup, Queue and Volcano PodGroup
//! status, Events, and the `default` Queue.
//!
//! Why a loop over snapshots rather than a reconciler per object: every status here is a
//! function of many objects at once (a PodGroup's counts come from its pods, a Queue's from
//! every group and pod in it), and the cluster cache already holds them all. So each pass reads
//! the cache once ([`observe`]), reads the controller's own stores of Jobs, PodGroups and
//! Queues ([`crate::cache::stores`]), reads the workloads whose pods wait for a group
//! ([`workloads`]), decides everything with pure functions ([`jobs`], [`foreign_groups`],
//! [`workloads`], [`orphans`], [`status`], [`queues`]) and then writes only what differs. What admission decided (each
//! waiting group's reason, each queue's shares) is the admission loop's latest published
//! outcome ([`crate::admission_loop::published`]), not computed again here.
//!
//! A pass runs when the cache or a store changes, at most every [`MIN_PASS_INTERVAL`], at
//! least every [`MAX_PASS_INTERVAL`], and when a deferred write falls due. Writes are:
//! - batched: one pass writes every status that differs, [`WRITE_CONCURRENCY`] at a time;
//! - conflict-safe: statuses go to the status subresource with no resourceVersion
//!   precondition, so they cannot fight a spec edit. A PodGroup's status, which Gangplank
//!   alone writes, is replaced whole by a JSON patch that first tests the object's UID
//!   (cheaper for the API server than an apply); a Queue's is server-side applied (field
//!   manager `gangplank`, forced), so Gangplank owns the fields it writes and nothing else
//!   (a Queue's `conditions` are left to others);
//! - throttled: at most one write per object per second, backing off after failures, and a
//!   status already written is not written again while the watch catches up ([`writes`]); a
//!   PodGroup status that changes only counts and messages waits five seconds after the last
//!   write, and any change of a PodGroup's status is written once it has stood for two
//!   seconds ([`writes::DEBOUNCE`]), as it is then: a gang admitted, bound and started within
//!   them is written once, Running, with one Event, and a new group is never written as
//!   Pending when its first pod arrives and is admitted within them;
//! - idempotent: PodGroups are created with a plain create (a 409 means someone was first)
//!   and the same creation is not retried within [`CREATE_RETRY_AFTER`].
//!
//! Events: on a PodGroup when its phase changes (reason = the new phase), on a Job or a
//! scheduler-plugins or Volcano PodGroup ([`foreign_groups`]) when its PodGroup is created or cannot be (reasons `PodGroupCreated`, `PodGroupConflict`,
//! `PodGroupCreateFailed`), on pods whose group has no PodGroup (`PodGroupMissing`), on a
//! waiting gang's PodGroup and unbound members (`WaitingForAdmission`, `WaitingForRoom`, see
//! [`waits`]), and on waiting pods of a queue in no group (`WaitingForAdmission`), all through
//! the rate limiter in [`events`].
//!
//! The controller acts only once the cache and its stores have listed everything (a partial
//! list would make it create PodGroups that exist and report empty queues). It runs only in
//! the replica that leads, as the admission loop does ([`crate::leader`]).

pub mod foreign_groups;
pub mod jobs;
pub mod observe;
pub mod orphans;
pub mod queues;
pub mod status;
pub mod waits;
pub mod workloads;
pub mod writes;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::admission_loop::published::{Outcome, Published};
use crate::api::volcano::{VolcanoPodGroup, VolcanoPodGroupStatus};
use crate::api::{self, PodGroup, PodGroupPhase, PodGroupStatus, Queue, QueueStatus, labels};
use crate::cache::Cache;
use crate::cache::stores::Stores;
use crate::events::{self, Event, Limiter, Publisher};
use crate::health::Heartbeat;
use crate::metrics;
use crate::webhooks::lookup::NamespaceLookup;
use foreign_groups::Foreign;
use gangplank_core::admit::plan;
use gangplank_core::model::{self, GroupKey};
use observe::Observation;
use queues::GroupCounts;
use status::{Finisher, Inputs};
use waits::Wait;
use writes::{Verdict, Writes};

/// Shortest time between two passes, however often things change.
pub const MIN_PASS_INTERVAL: Duration = Duration::from_millis(500);
/// Longest time between two passes when nothing changes.
pub const MAX_PASS_INTERVAL: Duration = Duration::from_secs(30);
/// How long a PodGroup creation is not retried (the watch shows a success well before).
pub const CREATE_RETRY_AFTER: Duration = Duration::from_secs(10);
/// API writes in flight at once during a pass.
pub const WRITE_CONCURRENCY: usize = 8;
/// Field manager of the controller's writes, as `managedFields` names them.
pub const FIELD_MANAGER: &str = "gangplank";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to create PodGroup {group}: {why}")]
    CreatePodGroup { group: String, why: kube::Error },
    #[error("failed to write the status of {kind} {name}: {why}")]
    WriteStatus {
        kind: &'static str,
        name: String,
        why: kube::Error,
    },
    #[error("failed to create the default Queue: {0}")]
    DefaultQueue(kube::Error),
}

/// Kinds whose status the controller writes, as metric labels.
const KINDS: [&str; 3] = ["podgroup", "queue", "volcano-podgroup"];

/// Exports the controller's series at zero from start-up.
pub fn register_metrics() {
    for kind in KINDS {
        for outcome in ["ok", "error"] {
            ::metrics::counter!(metrics::CONTROLLER_STATUS_WRITES_TOTAL, "kind" => kind, "outcome" => outcome)
                .absolute(0);
        }
    }
    for source in [
        "job",
        "scheduler-plugins",
        "volcano",
        "workload-api",
        "workload",
        "pods",
    ] {
        for outcome in ["ok", "exists", "error"] {
            ::metrics::counter!(metrics::CONTROLLER_POD_GROUPS_CREATED_TOTAL, "source" => source, "outcome" => outcome)
                .absolute(0);
        }
    }
    for outcome in ["ok", "error"] {
        ::metrics::counter!(metrics::CONTROLLER_EVENTS_TOTAL, "outcome" => outcome).absolute(0);
    }
    let _ = ::metrics::histogram!(metrics::CONTROLLER_PASS_DURATION_SECONDS);
}

/// Runs the controller until `shutdown`; `stores` must be running ([`Stores::run`]), and the
/// admission loop publishing in `published` (the controller waits for its first pass, see
/// [`crate::admission_loop::published`]); it beats `heartbeat` each time it wakes
/// (`crate::health`).
pub async fn run(
    client: Client,
    cache: Cache,
    stores: Arc<Stores>,
    published: Published,
    heartbeat: Arc<Heartbeat>,
    shutdown: CancellationToken,
) {
    tokio::spawn(ensure_default_queue(client.clone(), shutdown.clone()));
    let mut controller = Controller::new(client, cache.clone(), stores.clone());
    let mut cache_changes = cache.subscribe();
    let mut outcomes = published.subscribe();
    let mut due: Option<Instant> = None;
    loop {
        let wake = due
            .unwrap_or_else(|| Instant::now() + MAX_PASS_INTERVAL)
            .min(Instant::now() + MAX_PASS_INTERVAL);
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = cache_changes.changed() => {}
            _ = stores.changed() => {}
            _ = outcomes.changed() => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
        heartbeat.beat();
        if !cache.is_ready() || !stores.is_synced() {
            continue;
        }
        let Some(outcome) = published.latest() else {
            continue;
        };
        due = controller.pass(&outcome).await;
        tokio::time::sleep(MIN_PASS_INTERVAL).await;
    }
}

/// Queues what `plan` (for a workload that gets a PodGroup: a Job, a scheduler-plugins
/// PodGroup) asks: the creation, labelled `source` for the metric, or the Conflict event on
/// `regarding`.
fn carry_out(
    plan: Option<jobs::Plan>,
    source: &'static str,
    regarding: ObjectReference,
    creations: &mut Vec<Creation>,
    wanted: &mut Vec<Event>,
) {
    match plan {
        Some(jobs::Plan::Create {
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
        Some(jobs::Plan::Conflict { message }) => wanted.push(Event {
            regarding,
            warning: true,
            reason: "PodGroupConflict".to_owned(),
            action: "CreatePodGroup",
            note: message,
        }),
        None => {}
    }
}

/// A PodGroup to create, and whom to tell.
struct Creation {
    group: PodGroup,
    /// `job` or `pods`, the metric label.
    source: &'static str,
    /// The Job, or the oldest waiting pod.
    regarding: ObjectReference,
    note: String,
    warning: bool,
}

/// A status to write.
struct StatusWrite<S> {
    uid: String,
    namespace: Option<String>,
    name: String,
    status: S,
    /// For PodGroups: the phase before, the gang size, and the Event's subject.
    transition: Option<(PodGroupPhase, u32, ObjectReference)>,
}

struct Controller {
    client: Client,
    cache: Cache,
    stores: Arc<Stores>,
    publisher: Publisher,
    limiter: Limiter,
    pod_group_writes: Writes<PodGroupStatus>,
    queue_writes: Writes<QueueStatus>,
    volcano_writes: Writes<VolcanoPodGroupStatus>,
    /// PodGroups (`namespace/name`) whose creation was attempted recently.
    created: HashMap<String, Instant>,
    /// Workloads read for groups without a PodGroup, by [`workload_key`], with when
    /// ([`workloads`]).
    workloads: HashMap<String, (Instant, Result<Arc<DynamicObject>, String>)>,
}

impl Controller {
    fn new(client: Client, cache: Cache, stores: Arc<Stores>) -> Self {
        Controller {
            publisher: Publisher::new(client.clone()),
            client,
            cache,
            stores,
            limiter: Limiter::default(),
            pod_group_writes: Writes::coalescing(status::minor_change).debounced(writes::DEBOUNCE),
            queue_writes: Writes::default(),
            volcano_writes: Writes::default(),
            created: HashMap::new(),
            workloads: HashMap::new(),
        }
    }

    /// One pass, with the admission loop's latest `outcome`; returns when a write it deferred
    /// falls due.
    async fn pass(&mut self, outcome: &Outcome) -> Option<Instant> {
        let started = Instant::now();
        let observation = observe::observe(&self.cache.snapshot());
        let decision = &outcome.decision;
        let admission_waits: HashMap<GroupKey, (&'static str, String)> = decision
            .waiting
            .iter()
            .map(|w| {
                let why = match outcome.reclaim_waiting.get(&w.group) {
                    Some(note) => format!("{}; {note}", w.why),
                    None => w.why.to_string(),
                };
                (w.group.clone(), (w.why.reason().as_str(), why))
            })
            .collect();
        let now = Instant::now();
        let wall = whole_seconds(Timestamp::now());

        let mut wanted = Vec::new();
        let (mut creations, mut sourced) = self.job_pod_groups(&mut wanted);
        creations.extend(self.foreign_pod_groups(&mut sourced, &mut wanted));
        self.read_workloads(&observation, now).await;
        let orphans = self.orphan_pod_groups(&observation, &sourced, &mut wanted);
        let mut transitions = self
            .create(creations.into_iter().chain(orphans).collect(), now)
            .await;

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

    /// PodGroups to create for Jobs, Conflict events, and the groups that Jobs account for.
    fn job_pod_groups(&self, wanted: &mut Vec<Event>) -> (Vec<Creation>, HashSet<GroupKey>) {
        let mut creations = Vec::new();
        let mut groups = HashSet::new();
        for job in self.stores.jobs.state() {
            let (Some(name), Some(namespace)) = (jobs::gang_name(&job), job.namespace()) else {
                continue;
            };
            groups.insert(GroupKey::new(namespace.clone(), name));
            let existing = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(name).within(&namespace));
            let plan = jobs::plan(&job, existing.as_deref());
            carry_out(
                plan,
                "job",
                events::reference(job.as_ref()),
                &mut creations,
                wanted,
            );
        }
        (creations, groups)
    }

    /// PodGroups to create for the other schedulers' PodGroups, and Conflict
    /// events; adds the groups they account for to `sourced`.
    fn foreign_pod_groups(
        &self,
        sourced: &mut HashSet<GroupKey>,
        wanted: &mut Vec<Event>,
    ) -> Vec<Creation> {
        let mut creations = Vec::new();
        let scheduler_plugins = self.stores.scheduler_plugins_pod_groups.state();
        let volcano = self.stores.volcano_pod_groups.state();
        let upstream = self.stores.upstream_pod_groups.state();
        let sources = (scheduler_plugins.iter())
            .map(|s| {
                (
                    Foreign::from(s.as_ref()),
                    events::reference(s.as_ref()),
                    "scheduler-plugins",
                )
            })
            .chain(volcano.iter().map(|s| {
                (
                    Foreign::from(s.as_ref()),
                    events::reference(s.as_ref()),
                    "volcano",
                )
            }))
            .chain(upstream.iter().map(|s| {
                (
                    Foreign::from(s.as_ref()),
                    events::reference(s.as_ref()),
                    "workload-api",
                )
            }));
        for (source, regarding, dialect) in sources {
            let (Some(namespace), Some(name)) = (&source.meta.namespace, &source.meta.name) else {
                continue;
            };
            sourced.insert(GroupKey::new(namespace.as_str(), name.as_str()));
            let existing = self
                .stores
                .pod_groups
                .get(&ObjectRef::new(name).within(namespace));
            let namespace_queue = self.stores.namespace_queue(namespace).ok().flatten();
            let plan =
                foreign_groups::plan(source, existing.as_deref(), namespace_queue.as_deref());
            carry_out(plan, dialect, regarding, &mut creations, wanted);
        }
        creations
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
                Verdict::InSync => {}
                Verdict::Wait(at) => *due = Some(due.map_or(at, |d| d.min(at))),
                Verdict::Write => out.push(StatusWrite {
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

    /// Writes Volcano PodGroup statuses with a merge patch: to the status subresource where
    /// the CRD has one, else (Volcano's own CRD has none) to the object.
    async fn write_volcano_statuses(
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

    /// Creates PodGroups not attempted recently; returns the Events that say how it went.
    async fn create(&mut self, creations: Vec<Creation>, now: Instant) -> Vec<Event> {
        self.created
            .retain(|_, at| now.duration_since(*at) < CREATE_RETRY_AFTER);
        let due: Vec<Creation> = creations
            .into_iter()
            .filter(|c| {
                let key = format!(
                    "{}/{}",
                    c.group.namespace().unwrap_or_default(),
                    c.group.name_any()
                );
                self.created.insert(key, now).is_none()
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
                ahead: ahead(&group, wall.0.as_second()),
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
                Verdict::InSync => {}
                Verdict::Wait(at) => *due = Some(due.map_or(at, |d| d.min(at))),
                Verdict::Write => out.push(StatusWrite {
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
        let Some(owner) = jobs::controller_job(group) else {
            return Finisher::Members;
        };
        match self
            .stores
            .jobs
            .get(&ObjectRef::<Job>::new(&owner.name).within(namespace))
        {
            Some(job) if job.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
                Finisher::Job(jobs::state(&job))
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
                Verdict::InSync => {}
                Verdict::Wait(at) => *due = Some(due.map_or(at, |d| d.min(at))),
                Verdict::Write => out.push(StatusWrite {
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

    /// Writes PodGroup statuses; returns the transition Events of those written.
    async fn write_pod_group_statuses(
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

    async fn write_queue_statuses(&mut self, writes: Vec<StatusWrite<QueueStatus>>, now: Instant) {
        let client = &self.client;
        let results = write_statuses(writes, "queue", StatusPatch::Apply, |_| {
            Api::<Queue>::all(client.clone())
        })
        .await;
        for (w, ok) in results {
            self.queue_writes.record(&w.uid, w.status, ok, now);
        }
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

    async fn publish(&self, events: Vec<Event>) {
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

/// Where `group` stands when admitted ahead of its members, at `now` (Unix seconds).
pub(crate) fn ahead(group: &PodGroup, now: i64) -> Option<status::Ahead> {
    if !group.admitted_ahead_of_members() {
        return None;
    }
    let at = api::volcano::admitted_ahead_at(group)?;
    let timeout = group.spec.schedule_timeout();
    Some(if model::Ahead::admission_holds(at, now, timeout) {
        status::Ahead::Holds
    } else {
        status::Ahead::Lapsed(timeout.as_secs())
    })
}

/// The part of a Queue's status the controller writes (everything but `conditions`).
fn owned_queue_status(queue: &Queue) -> Option<QueueStatus> {
    queue.status.clone().map(|mut s| {
        s.conditions.clear();
        s
    })
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
fn api_message_of(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// `now` without its fraction of a second: the API stores times in whole seconds, and a
/// status compared with what was stored must not differ by nanoseconds.
fn whole_seconds(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
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

/// Where [`Controller::read_workloads`] keeps a workload read for a group of `namespace`: by
/// kind and name, since a workload known only by its labels has no UID.
fn workload_key(namespace: &str, workload: &model::Workload) -> String {
    format!("{namespace}/{}/{}", workload.kind, workload.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use observe::PodRef;

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

    #[test]
    fn times_are_compared_in_whole_seconds_as_the_api_stores_them() {
        let now = Timestamp::from_nanosecond(1_700_000_000_123_456_789).unwrap();
        let stored: Time =
            serde_json::from_value(serde_json::to_value(whole_seconds(now)).unwrap()).unwrap();
        assert_eq!(stored, whole_seconds(now));
        assert_eq!(whole_seconds(now).0.as_second(), 1_700_000_000);
    }

    #[test]
    fn a_pod_reference_names_a_core_v1_pod() {
        let reference = PodRef {
            namespace: "ml".into(),
            name: "w-0".into(),
            uid: "u".into(),
        }
        .reference();
        assert_eq!(reference.api_version.as_deref(), Some("v1"));
        assert_eq!(reference.kind.as_deref(), Some("Pod"));
        assert_eq!(reference.uid.as_deref(), Some("u"));
    }
}
