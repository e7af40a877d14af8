//! The controller: PodGroups for Jobs, for scheduler-plugins' and Volcano's PodGroups, for
//! workloads of known kinds and for pods that ask for one, PodGroup, Queue and Volcano PodGroup
//! status, Events, and the `default` Queue.
//!
//! Why a loop over snapshots rather than a reconciler per object: every status here is a
//! function of many objects at once (a PodGroup's counts come from its pods, a Queue's from
//! every group and pod in it), and the cluster cache already holds them all. So each pass reads
//! the cache once ([`observe`]), reads the controller's own stores of Jobs, PodGroups and
//! Queues ([`crate::cache::stores`]), reads the workloads whose pods wait for a group
//! ([`workloads`]), decides everything with pure functions ([`batch_v1_jobs`], [`foreign_groups`],
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
//! the rate limiter in [`crate::events`].
//!
//! One pass, phase by phase, is `pass.rs`; the calls that write to the API server (creations,
//! status patches, Events) are `api_writes.rs`; when a status is written at all is
//! [`writes`]. This file holds the loop that runs the passes and what they share.
//!
//! The controller acts only once the cache and its stores have listed everything (a partial
//! list would make it create PodGroups that exist and report empty queues). It runs only in
//! the replica that leads, as the admission loop does ([`crate::leader`]).

mod api_writes;
pub mod batch_v1_jobs;
mod composite_trees;
pub mod foreign_groups;
pub mod observe;
pub mod orphans;
mod pass;
pub mod queues;
pub mod status;
mod volcano_network_topology;
mod volcano_sub_groups;
pub mod waits;
pub mod workloads;
pub mod writes;

pub use api_writes::ensure_default_queue;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::api::DynamicObject;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::admission_loop::published::Published;
use crate::api::kueue::AdmissionCheckState;
use crate::api::volcano::VolcanoPodGroupStatus;
use crate::api::{PodGroup, PodGroupPhase, PodGroupStatus, QueueStatus};
use crate::cache::Cache;
use crate::cache::stores::Stores;
use crate::events::{Limiter, Publisher};
use crate::health::Heartbeat;
use crate::metrics;
use writes::Writes;

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

/// A gated pod to move into the gang of its tree of CompositePodGroups: the pod webhook, not
/// knowing the pod's Kubernetes PodGroup yet when the pod was created, named that PodGroup as
/// its group (`crate::webhooks::pods`).
struct Relabel {
    pod: observe::PodRef,
    labels: std::collections::BTreeMap<String, String>,
}

impl Relabel {
    fn into_tree(pod: &observe::PodRef, leaf: &str, tree: &crate::cache::lookup::TreeOf) -> Self {
        use crate::api::composite_pod_group::{LEAF_LABEL, PARENT_LABEL};
        Relabel {
            pod: pod.clone(),
            labels: [
                (crate::api::labels::POD_GROUP_LABEL, tree.root.as_str()),
                (PARENT_LABEL, tree.parent.as_str()),
                (LEAF_LABEL, leaf),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        }
    }
}

/// A `minMember` to set on the Gangplank PodGroup made for `regarding` (of the same name and
/// namespace), and the Event that says why.
struct Resize {
    min_member: i32,
    sub_group_policy: Option<Vec<crate::api::pod_group::SubGroupPolicy>>,
    regarding: ObjectReference,
    note: String,
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

/// What the controller keeps between passes; the task of [`run`] owns it.
struct Controller {
    client: Client,
    cache: Cache,
    stores: Arc<Stores>,
    publisher: Publisher,
    limiter: Limiter,
    pod_group_writes: Writes<PodGroupStatus>,
    queue_writes: Writes<QueueStatus>,
    volcano_writes: Writes<VolcanoPodGroupStatus>,
    /// Gangplank's check on Kueue Workloads, by Workload UID.
    kueue_writes: Writes<AdmissionCheckState>,
    /// Gangplank's Kueue AdmissionChecks marked `Active`, by UID.
    kueue_activations: Writes<bool>,
    /// PodGroups (`namespace/name`) whose creation was attempted recently.
    created: HashMap<String, Instant>,
    /// Workloads read for groups without a PodGroup, by `pass::workload_key`, with when
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
            kueue_writes: Writes::default(),
            kueue_activations: Writes::default(),
            created: HashMap::new(),
            workloads: HashMap::new(),
        }
    }
}
