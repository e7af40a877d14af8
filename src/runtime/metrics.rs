//! Prometheus metrics: names, help texts and the `/metrics` endpoint.
//!
//! Code records through the `metrics` facade; [`install`] puts a Prometheus recorder behind it
//! and [`router`] renders it on the metrics port. Every metric name is a constant here and every
//! metric is described in [`CATALOGUE`], the one source of `# HELP`, of the metric table of
//! `docs/metrics.md`, and of the check that the Grafana dashboard ([`crate::dashboard`]) charts every
//! metric with the labels it has.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

/// Counter: extender requests by `verb` and `outcome` (`ok`, `error`, `bad_request`).
pub const EXTENDER_REQUESTS_TOTAL: &str = "gangplank_extender_requests_total";
/// Histogram: extender request latency in seconds, by `verb`.
pub const EXTENDER_REQUEST_DURATION_SECONDS: &str = "gangplank_extender_request_duration_seconds";
/// Histogram: how long a filter, prioritize or preempt call waited for a decision slot, by `verb`.
pub const EXTENDER_DECISION_WAIT_SECONDS: &str = "gangplank_extender_decision_wait_seconds";
/// Gauge: connections open, by `server` (extender, webhooks, metrics).
pub const SERVER_CONNECTIONS: &str = "gangplank_server_connections";
pub const SERVER_HANDSHAKES: &str = "gangplank_server_handshakes";
pub const SERVER_CONNECTIONS_HELD_UNREAD: &str = "gangplank_server_connections_held_unread";
/// Counter: connections closed as they came because the server held its most, by `server` and
/// `stage` (`handshake`, `open`).
pub const SERVER_CONNECTIONS_REFUSED_TOTAL: &str = "gangplank_server_connections_refused_total";
/// Counter: connections closed, by `server` and `reason` ([`crate::runtime::connections::Ending`]).
pub const SERVER_CONNECTIONS_CLOSED_TOTAL: &str = "gangplank_server_connections_closed_total";
/// Counter: admission webhook requests by `webhook`, `operation` and `outcome` (`allowed`,
/// `denied`, `patched`, `error`).
pub const WEBHOOK_REQUESTS_TOTAL: &str = "gangplank_webhook_requests_total";
pub const WEBHOOK_TURNS_TAKEN: &str = "gangplank_webhook_turns_taken";
/// Histogram: admission webhook latency in seconds, by `webhook`.
pub const WEBHOOK_REQUEST_DURATION_SECONDS: &str = "gangplank_webhook_request_duration_seconds";
/// Gauge: nodes in the cluster cache.
pub const CACHE_NODES: &str = "gangplank_cache_nodes";
/// Gauge: pods in the cluster cache.
pub const CACHE_PODS: &str = "gangplank_cache_pods";
/// Gauge: gang members' bind calls held waiting for quorum.
pub const GANG_BINDS_HELD: &str = "gangplank_gang_binds_held";
/// Histogram: seconds from a gang's first held bind to quorum.
pub const GANG_BIND_WAIT_SECONDS: &str = "gangplank_gang_bind_wait_seconds";
/// Counter: gangs whose held binds timed out before quorum.
pub const GANG_TIMEOUTS_TOTAL: &str = "gangplank_gang_timeouts_total";
/// Counter: held bind calls whose caller went away before quorum.
pub const GANG_BINDS_ABANDONED_TOTAL: &str = "gangplank_gang_binds_abandoned_total";
/// Gauge: gangs holding a claim on capacity.
pub const GANG_CLAIMS: &str = "gangplank_gang_claims";
/// Counter: admission passes.
pub const ADMISSION_PASSES_TOTAL: &str = "gangplank_admission_passes_total";
/// Counter: pods whose admission gate the admission loop removed.
pub const ADMISSION_RELEASED_PODS_TOTAL: &str = "gangplank_admission_released_pods_total";
/// Counter: pods created without the admission gate, their gang admitted on arrival.
pub const ADMISSION_ARRIVED_PODS_TOTAL: &str = "gangplank_admission_arrived_pods_total";
/// Gauge: 1 while the last admission pass left room for admissions on arrival, else 0.
pub const ADMISSION_DOOR_OPEN: &str = "gangplank_admission_door_open";
/// Gauge: gangs the last admission pass grows the cluster for (stand-in pods asked).
pub const GROWTH_GANGS: &str = "gangplank_growth_gangs";
/// Counter: stand-in pods created to ask a node autoscaler for a gang's room.
pub const GROWTH_STAND_INS_CREATED_TOTAL: &str = "gangplank_growth_stand_ins_created_total";
/// Counter: growths given up (a gang's stand-ins still unplaced after --growth-timeout).
pub const GROWTH_TIMEOUTS_TOTAL: &str = "gangplank_growth_timeouts_total";
/// Gauge: groups with gated pods that the last admission pass left waiting.
pub const ADMISSION_WAITING_GROUPS: &str = "gangplank_admission_waiting_groups";
/// Counter: pods evicted to reclaim room for a queue below its deserved share, by the victim's
/// `queue` and `outcome`.
pub const RECLAIM_EVICTIONS_TOTAL: &str = "gangplank_reclaim_evictions_total";
/// Counter: pods evicted so that a group of higher priority in the same queue runs, by
/// `queue` and `outcome`.
pub const PREEMPTION_EVICTIONS_TOTAL: &str = "gangplank_preemption_evictions_total";
/// Counter: candidate nodes whose victim list the preempt verb refused, by `reason`.
pub const PREEMPT_REFUSED_NODES_TOTAL: &str = "gangplank_preempt_refused_nodes_total";
/// Gauge: PodGroups in the cluster cache.
pub const CACHE_POD_GROUPS: &str = "gangplank_cache_pod_groups";
/// Gauge: Queues in the cluster cache.
pub const CACHE_QUEUES: &str = "gangplank_cache_queues";
/// Gauge: Topologies in the cluster cache.
pub const CACHE_TOPOLOGIES: &str = "gangplank_cache_topologies";
/// Gauge: DRA objects in the cluster cache, by `kind` (deviceclasses, resourceslices,
/// resourceclaimtemplates, resourceclaims).
pub const CACHE_DRA_OBJECTS: &str = "gangplank_cache_dra_objects";
/// Gauge: 1 for a DeviceClass whose selectors cannot be evaluated (it counts no device), by
/// `class`; 0 once fixed.
pub const DRA_CLASS_ERRORS: &str = "gangplank_dra_class_errors";
/// Gauge: a queue's deserved share, by `queue` and `resource`.
pub const QUEUE_DESERVED: &str = "gangplank_queue_deserved";
/// Gauge: what a queue's admitted groups hold, by `queue` and `resource`.
pub const QUEUE_ALLOCATED: &str = "gangplank_queue_allocated";
/// Gauge: a queue's groups waiting for admission, by `queue`.
pub const QUEUE_WAITING_GROUPS: &str = "gangplank_queue_waiting_groups";
/// Gauge: batch Jobs by `queue` and `phase`, as the leader's batch Job controller sees them.
pub const BATCH_JOBS: &str = "gangplank_batch_jobs";
/// Gauge: always 1, labelled with the running `version`.
pub const BUILD_INFO: &str = "gangplank_build_info";
/// Gauge: 1 while this replica holds the leader Lease.
pub const LEADER: &str = "gangplank_leader";
/// Counter: writes the fence refused ([`crate::runtime::fence`]), by `reason` (`lapsed`, `not_leading`).
pub const FENCED_WRITES_TOTAL: &str = "gangplank_fenced_writes_total";
/// Counter: status writes by the controller, by `kind` (`podgroup`, `queue`) and `outcome`.
pub const CONTROLLER_STATUS_WRITES_TOTAL: &str = "gangplank_controller_status_writes_total";
/// Counter: PodGroups the controller created, by `source` and `outcome`.
pub const CONTROLLER_POD_GROUPS_CREATED_TOTAL: &str =
    "gangplank_controller_pod_groups_created_total";
/// Counter: Events the controller emitted, by `outcome`.
pub const CONTROLLER_EVENTS_TOTAL: &str = "gangplank_controller_events_total";
/// Histogram: seconds one controller pass takes, writes included.
pub const CONTROLLER_PASS_DURATION_SECONDS: &str = "gangplank_controller_pass_duration_seconds";

/// Histogram buckets: 50 µs (a pass-through filter) to 120 s (a bind held for gang quorum).
pub const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// How often histograms are compacted; the exporter leaves that to its caller.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to install metrics recorder: {0}")]
    Install(#[from] metrics_exporter_prometheus::BuildError),
}

/// Builds the Prometheus recorder with our buckets (not installed).
pub fn builder() -> Result<PrometheusBuilder, Error> {
    // Every histogram is in seconds (see `describe`), so one matcher covers them all.
    Ok(PrometheusBuilder::new().set_buckets_for_metric(
        Matcher::Suffix("_seconds".to_owned()),
        LATENCY_BUCKETS_SECONDS,
    )?)
}

/// Installs the recorder process-wide, describes every metric and sets `build_info`.
pub fn install() -> Result<PrometheusHandle, Error> {
    let handle = builder()?.install_recorder()?;
    describe();
    metrics::gauge!(BUILD_INFO, "version" => super::build::VERSION, "commit" => super::build::COMMIT)
        .set(1.0);
    metrics::gauge!(CACHE_NODES).set(0.0);
    metrics::gauge!(CACHE_PODS).set(0.0);
    metrics::gauge!(CACHE_POD_GROUPS).set(0.0);
    metrics::gauge!(CACHE_QUEUES).set(0.0);
    metrics::gauge!(CACHE_TOPOLOGIES).set(0.0);
    metrics::gauge!(LEADER).set(0.0);
    metrics::gauge!(GANG_BINDS_HELD).set(0.0);
    metrics::gauge!(GANG_CLAIMS).set(0.0);
    metrics::counter!(ADMISSION_PASSES_TOTAL).absolute(0);
    metrics::counter!(ADMISSION_RELEASED_PODS_TOTAL).absolute(0);
    metrics::gauge!(ADMISSION_WAITING_GROUPS).set(0.0);
    metrics::counter!(ADMISSION_ARRIVED_PODS_TOTAL).absolute(0);
    metrics::gauge!(ADMISSION_DOOR_OPEN).set(0.0);
    metrics::gauge!(GROWTH_GANGS).set(0.0);
    metrics::counter!(GROWTH_STAND_INS_CREATED_TOTAL).absolute(0);
    metrics::counter!(GROWTH_TIMEOUTS_TOTAL).absolute(0);
    metrics::counter!(GANG_TIMEOUTS_TOTAL).absolute(0);
    metrics::counter!(GANG_BINDS_ABANDONED_TOTAL).absolute(0);
    let _ = metrics::histogram!(GANG_BIND_WAIT_SECONDS);
    Ok(handle)
}

/// What kind of series a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

impl MetricKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// One metric's documentation: the single source for `# HELP`, the metric table of
/// `docs/metrics.md` and the Grafana dashboard check.
#[derive(Debug, Clone, Copy)]
pub struct Doc {
    pub name: &'static str,
    pub kind: MetricKind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

/// Every metric Gangplank exports.
pub const CATALOGUE: &[Doc] = &[
    Doc {
        name: EXTENDER_REQUESTS_TOTAL,
        kind: MetricKind::Counter,
        labels: &["verb", "outcome"],
        help: "Scheduler extender requests, by verb (filter, prioritize, preempt, bind) and outcome (ok; error: answered with a non-empty Error; waits: a filter answered with an Error that has the scheduler try the pod again after its backoff, as no node has room Gangplank does not hold for other gangs; bad_request: HTTP 400 for a body that is not the expected JSON or did not arrive within 30 s; too_large: HTTP 413 for a body over 16 MiB).",
    },
    Doc {
        name: EXTENDER_DECISION_WAIT_SECONDS,
        kind: MetricKind::Histogram,
        labels: &["verb"],
        help: "Time a filter, prioritize or preempt call waited for one of the 8 calls decided at once before its body was read; above a millisecond only when more than 8 arrive together (a flood).",
    },
    Doc {
        name: EXTENDER_REQUEST_DURATION_SECONDS,
        kind: MetricKind::Histogram,
        labels: &["verb"],
        help: "Time to answer a scheduler extender request, by verb, including a held bind.",
    },
    Doc {
        name: SERVER_CONNECTIONS,
        kind: MetricKind::Gauge,
        labels: &["server"],
        help: "Connections open after their TLS handshake, by server (extender, webhooks: at most 1024 each; metrics: at most 64).",
    },
    Doc {
        name: SERVER_HANDSHAKES,
        kind: MetricKind::Gauge,
        labels: &["server"],
        help: "Connections in their TLS handshake, by server (at most 128 each; at 128, a new connection sheds the one that has come least far, the oldest first, whatever its address; it is refused only while every holder has not been read yet).",
    },
    Doc {
        name: SERVER_CONNECTIONS_HELD_UNREAD,
        kind: MetricKind::Gauge,
        labels: &["server"],
        help: "Connections refused a place, or that gave theirs up, held open and unread until the 10 s handshake deadline before they are closed, by server (each server's share of the file descriptor limit, at most 16384; beyond, closed at once): a flood's, which would otherwise reconnect at once.",
    },
    Doc {
        name: SERVER_CONNECTIONS_REFUSED_TOTAL,
        kind: MetricKind::Counter,
        labels: &["server"],
        help: "Connections refused a place, by server: every place (128 in the handshake; 1024 open, 64 on the metrics port) held by a connection that must keep it: one not read yet, or one with a request in flight. Held unread, then closed (held_unread).",
    },
    Doc {
        name: SERVER_CONNECTIONS_CLOSED_TOTAL,
        kind: MetricKind::Counter,
        labels: &["server", "reason"],
        help: "Connections closed after they were accepted, by server and reason: client (the client closed it), server_between_requests (Gangplank closed it with no request arriving: no request in flight for the 30 s idle deadline, after answering a body that missed its deadline, or at shutdown), server_mid_request (Gangplank closed it while a request arrived: headers trickled past the idle deadline), handshake_timeout (no TLS handshake within 10 s), handshake_failed (no client certificate, one the client CA did not sign, or not TLS), wrong_client (a client certificate the CA signed for another name than --extender-client-name), shed_in_handshake (a new connection took its handshake place: it had come least far of the 128), shed_open (a new connection took its open place: it had no request in flight and had come least far of the open ones).",
    },
    Doc {
        name: WEBHOOK_REQUESTS_TOTAL,
        kind: MetricKind::Counter,
        labels: &["webhook", "operation", "outcome"],
        help: "Admission webhook requests, by webhook (mutate-pods, mutate-jobs, mutate-podgroups, mutate-workloads, validate-jobs, validate-podgroups, validate-queues, validate-batchjobs), operation (CREATE, UPDATE, DELETE; unknown for a body that is not an AdmissionReview) and outcome (allowed: admitted unchanged; patched: admitted with a patch; denied: refused by a rule; error: a body that is not an AdmissionReview, or Gangplank could not decide yet).",
    },
    Doc {
        name: WEBHOOK_TURNS_TAKEN,
        kind: MetricKind::Gauge,
        labels: &["lane"],
        help: "AdmissionReviews being decided, by lane (small: at most 64 KiB, 32 at once, read before they take a turn; large: 4 at once, read while they hold it). A lane at its bound makes further reviews wait, at most 10 s.",
    },
    Doc {
        name: WEBHOOK_REQUEST_DURATION_SECONDS,
        kind: MetricKind::Histogram,
        labels: &["webhook"],
        help: "Time to answer an admission webhook request, by webhook, including the short wait for a just-created Queue or PodGroup to be seen.",
    },
    Doc {
        name: GANG_BINDS_HELD,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Bind calls of gang members held open until their gang reaches quorum (minMember placed).",
    },
    Doc {
        name: GANG_BIND_WAIT_SECONDS,
        kind: MetricKind::Histogram,
        labels: &[],
        help: "Seconds from a gang's first held bind call to quorum, when all its held members are bound together.",
    },
    Doc {
        name: GANG_TIMEOUTS_TOTAL,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Gangs whose held bind calls timed out before quorum; their members were released for the scheduler to retry.",
    },
    Doc {
        name: GANG_BINDS_ABANDONED_TOTAL,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Held bind calls whose caller (the scheduler) went away before quorum, for example a restarted scheduler: their reservations were released, and they count toward no quorum.",
    },
    Doc {
        name: GANG_CLAIMS,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Gangs currently holding a claim on capacity while their members are being placed.",
    },
    Doc {
        name: ADMISSION_PASSES_TOTAL,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Admission passes: after each change of Gangplank's cache (watch events and its own claims; at most ten a second) while the last pass left groups waiting, admitted some or evicts; otherwise only after a new or gated pod or a change of a node, PodGroup or Queue; and at least every five seconds.",
    },
    Doc {
        name: ADMISSION_RELEASED_PODS_TOTAL,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Pods released by the admission loop: Gangplank's scheduling gate removed, so the scheduler sees them.",
    },
    Doc {
        name: ADMISSION_ARRIVED_PODS_TOTAL,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Pods the mutating webhook created without the admission gate because their gang was admitted on arrival (--admit-on-arrival): no gate removal later.",
    },
    Doc {
        name: ADMISSION_DOOR_OPEN,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "1 while the last admission pass left nothing waiting but for members, so that (with --admit-on-arrival) a new gang that fits the room it left is admitted at its first pod; 0 while some group waits for room, quota or its share.",
    },
    Doc {
        name: GROWTH_GANGS,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Gangs the last admission pass grows the cluster for (with --node-autoscaling): their stand-in pods ask the node autoscaler for their room.",
    },
    Doc {
        name: GROWTH_STAND_INS_CREATED_TOTAL,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Stand-in pods created in Gangplank's namespace, one per member of a gang that waits for the cluster to grow.",
    },
    Doc {
        name: GROWTH_TIMEOUTS_TOTAL,
        kind: MetricKind::Counter,
        labels: &[],
        help: "Growths given up: a gang's stand-in pods were still unplaced after --growth-timeout (the gang then waits with reason GrowthFailed and holds no room).",
    },
    Doc {
        name: ADMISSION_WAITING_GROUPS,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Groups with gated pods, and gated pods of a queue in no group, that the last admission pass left waiting (for room, for their queue's share, PodGroup missing, fewer than minMember pods, ...).",
    },
    Doc {
        name: RECLAIM_EVICTIONS_TOTAL,
        kind: MetricKind::Counter,
        labels: &["queue", "outcome"],
        help: "Eviction requests (policy/v1 Eviction, so PodDisruptionBudgets apply) for pods of gangs that reclaim took back from a queue above its deserved share, by the victim's queue and outcome (ok: evicted; refused: a PodDisruptionBudget said not now (HTTP 429), the gang is left alone or, if members were already evicted, finished on a later pass; error: any other failure). A pod is requested at most once while its eviction is in flight.",
    },
    Doc {
        name: PREEMPTION_EVICTIONS_TOTAL,
        kind: MetricKind::Counter,
        labels: &["queue", "outcome"],
        help: "Eviction requests (policy/v1 Eviction) for pods of running gangs of lower priority, whole gangs, that a waiting group of higher priority in the same queue needs the room of (priority preemption inside a queue), by queue and outcome (as for gangplank_reclaim_evictions_total).",
    },
    Doc {
        name: PREEMPT_REFUSED_NODES_TOTAL,
        kind: MetricKind::Counter,
        labels: &["reason"],
        help: "Candidate nodes whose victim list the preempt verb refused, by reason (priority_not_lower, breaks_gang, own_gang, unknown_victim, unknown_gang, counts_disagree, no_victims).",
    },
    Doc {
        name: CACHE_NODES,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Nodes in Gangplank's cluster cache.",
    },
    Doc {
        name: CACHE_PODS,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Pods in Gangplank's cluster cache, in every phase.",
    },
    Doc {
        name: CACHE_POD_GROUPS,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "PodGroups in Gangplank's cluster cache.",
    },
    Doc {
        name: CACHE_DRA_OBJECTS,
        kind: MetricKind::Gauge,
        labels: &["kind"],
        help: "DRA objects (DeviceClasses, ResourceSlices, ResourceClaimTemplates, ResourceClaims) in Gangplank's cluster cache, by kind.",
    },
    Doc {
        name: DRA_CLASS_ERRORS,
        kind: MetricKind::Gauge,
        labels: &["class"],
        help: "1 for a DeviceClass whose CEL selectors Gangplank cannot evaluate, so it counts none of its devices (the log says why); 0 once fixed.",
    },
    Doc {
        name: CACHE_QUEUES,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Queues in Gangplank's cluster cache.",
    },
    Doc {
        name: CACHE_TOPOLOGIES,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "Topologies in Gangplank's cluster cache.",
    },
    Doc {
        name: QUEUE_DESERVED,
        kind: MetricKind::Gauge,
        labels: &["queue", "resource"],
        help: "A queue's deserved share at the last admission pass (weighted water-filling of the schedulable nodes' allocatable), in the resource's unit (CPU in cores, memory in bytes). The per-queue series are rendered from that pass: a deleted queue's series end with it.",
    },
    Doc {
        name: QUEUE_ALLOCATED,
        kind: MetricKind::Gauge,
        labels: &["queue", "resource"],
        help: "What a queue's admitted groups hold at the last admission pass (bound, reserved, or released and on their way to quorum), in the resource's unit.",
    },
    Doc {
        name: QUEUE_WAITING_GROUPS,
        kind: MetricKind::Gauge,
        labels: &["queue"],
        help: "A queue's groups (and queue-only pods) that the last admission pass left waiting.",
    },
    Doc {
        name: BATCH_JOBS,
        kind: MetricKind::Gauge,
        labels: &["queue", "phase"],
        help: "Batch Jobs (batch.gangplank.dev) by queue and phase (Pending, Running, Restarting, Completing, Completed, Aborting, Aborted, Terminating, Terminated, Failed), counted every 5 s by the batch Job controller of the replica that leads; other replicas export none. A deleted Job's series end with it.",
    },
    Doc {
        name: CONTROLLER_STATUS_WRITES_TOTAL,
        kind: MetricKind::Counter,
        labels: &["kind", "outcome"],
        help: "PodGroup and Queue status writes by the controller (to the status subresource: a PodGroup's replaced whole by a JSON patch, a Queue's server-side applied), by kind (podgroup, queue) and outcome (ok, error). Only statuses that differ are written, at most once a second per object; a PodGroup status that changes only counts and messages (same phase and conditions) at most once every five seconds; any change of a PodGroup's status once it has stood for two seconds, as it is then (a gang admitted, bound and started within them is written once).",
    },
    Doc {
        name: CONTROLLER_POD_GROUPS_CREATED_TOTAL,
        kind: MetricKind::Counter,
        labels: &["source", "outcome"],
        help: "PodGroups the controller created, by source (job: for a Job that names a queue; scheduler-plugins: for a scheduling.x-k8s.io PodGroup; volcano: for a scheduling.volcano.sh PodGroup; workload-api: for a scheduling.k8s.io PodGroup; workload: for a Kubeflow job, MPIJob, RayCluster or JobSet whose operator has no gang flag; pods: for pods that name a missing group and carry the min-member annotation) and outcome (ok; exists: someone created it first; error).",
    },
    Doc {
        name: CONTROLLER_EVENTS_TOTAL,
        kind: MetricKind::Counter,
        labels: &["outcome"],
        help: "Events the controller emitted on PodGroups, Jobs and pods (phase transitions, PodGroup created or missing, why a gang waits), by outcome (ok, error).",
    },
    Doc {
        name: CONTROLLER_PASS_DURATION_SECONDS,
        kind: MetricKind::Histogram,
        labels: &[],
        help: "Time one controller pass takes: reading the cache, deciding, and writing statuses, PodGroups and Events.",
    },
    Doc {
        name: BUILD_INFO,
        kind: MetricKind::Gauge,
        labels: &["version", "commit"],
        help: "Always 1; the labels tell which Gangplank build is running: its version and the commit it was built from (also on the metrics port's /version).",
    },
    Doc {
        name: LEADER,
        kind: MetricKind::Gauge,
        labels: &[],
        help: "1 while this replica holds the leader Lease and runs the admission loop, the controller and the extender; 0 while it follows.",
    },
    Doc {
        name: FENCED_WRITES_TOTAL,
        kind: MetricKind::Counter,
        labels: &["reason"],
        help: "Writes to the API server not made because this replica may no longer write as the leader, by reason: lapsed (its Lease was not renewed within two thirds of its duration, so another replica may soon take over) or not_leading (it lost or gave up the Lease). A pass, reconcile or bind that began while leading makes these.",
    },
];

/// Registers the help text of every metric in [`CATALOGUE`] with the current recorder.
pub fn describe() {
    for doc in CATALOGUE {
        match doc.kind {
            MetricKind::Counter => metrics::describe_counter!(doc.name, doc.help),
            MetricKind::Gauge => metrics::describe_gauge!(doc.name, doc.help),
            MetricKind::Histogram => {
                metrics::describe_histogram!(doc.name, metrics::Unit::Seconds, doc.help)
            }
        }
    }
}

/// The metric table of `docs/metrics.md`, rendered from [`CATALOGUE`].
pub fn markdown_table() -> String {
    let mut out = String::from("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for doc in CATALOGUE {
        let labels = doc
            .labels
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ");
        out += &format!(
            "| `{}` | {} | {} | {} |\n",
            doc.name,
            doc.kind.as_str(),
            labels,
            doc.help
        );
    }
    out
}

/// `GET /metrics` in the Prometheus text format.
/// Series rendered at scrape time from state Gangplank keeps anyway, after the recorder's:
/// see [`FROM_STATE`].
pub type Extra = Arc<dyn Fn(&mut String) + Send + Sync>;

/// The metrics written by an [`Extra`] rather than through the `metrics` facade. Decision:
/// per-queue gauges are a view of the latest admission pass, and the batch Jobs a view of the
/// batch Job controller's last count, rendered on each scrape, because the facade cannot remove
/// a series: a deleted queue's gauges would stay on `/metrics` (and in the dashboard's queue
/// list) for the life of the process.
pub const FROM_STATE: [&str; 4] = [
    QUEUE_DESERVED,
    QUEUE_ALLOCATED,
    QUEUE_WAITING_GROUPS,
    BATCH_JOBS,
];

pub fn router(handle: PrometheusHandle, extra: Extra) -> Router {
    Router::new()
        .route("/metrics", get(render))
        .with_state((handle, extra))
}

async fn render(State((handle, extra)): State<(PrometheusHandle, Extra)>) -> impl IntoResponse {
    let mut text = handle.render();
    extra(&mut text);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
}

/// Writes one gauge family of [`CATALOGUE`] in the text format, as the recorder writes its
/// own: `# HELP`, `# TYPE`, one line per series (label values escaped), a blank line. Nothing
/// at all for no series.
pub fn write_gauges<'a>(
    out: &mut String,
    name: &str,
    series: impl IntoIterator<Item = (&'a [(&'a str, &'a str)], f64)>,
) {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return;
    }
    let help = CATALOGUE
        .iter()
        .find(|d| d.name == name)
        .map_or("", |d| d.help);
    out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
    for (labels, value) in series {
        out.push_str(name);
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            out.push_str(&format!("{{{}}}", pairs.join(",")));
        }
        out.push_str(&format!(" {value}\n"));
    }
    out.push('\n');
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Compacts histograms periodically until shutdown.
pub async fn run_upkeep(handle: PrometheusHandle, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => handle.run_upkeep(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_rendered_with_its_help_text() {
        let recorder = builder().unwrap().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            describe();
            for doc in CATALOGUE {
                let labels: Vec<metrics::Label> = doc
                    .labels
                    .iter()
                    .map(|l| metrics::Label::new(*l, "x"))
                    .collect();
                if FROM_STATE.contains(&doc.name) {
                    continue;
                }
                match doc.kind {
                    MetricKind::Counter => metrics::counter!(doc.name, labels).increment(1),
                    MetricKind::Gauge => metrics::gauge!(doc.name, labels).set(1.0),
                    MetricKind::Histogram => metrics::histogram!(doc.name, labels).record(0.1),
                }
            }
            metrics::counter!(EXTENDER_REQUESTS_TOTAL, "verb" => "filter", "outcome" => "ok")
                .increment(1);
            metrics::histogram!(EXTENDER_REQUEST_DURATION_SECONDS, "verb" => "filter")
                .record(0.000_07);
        });
        let mut text = handle.render();
        for name in FROM_STATE {
            write_gauges(&mut text, name, [(&[("queue", "q")][..], 1.0)]);
        }
        for doc in CATALOGUE {
            let name = doc.name;
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no help in\n{text}"
            );
            assert!(
                text.contains(&format!("# TYPE {name} {}", doc.kind.as_str())),
                "{name} is not a {} in\n{text}",
                doc.kind.as_str()
            );
        }
        assert!(text.contains(
            "gangplank_extender_request_duration_seconds_bucket{verb=\"filter\",le=\"0.0001\"} 1"
        ), "{text}");
        assert!(
            text.contains("gangplank_extender_requests_total{verb=\"filter\",outcome=\"ok\"} 1")
        );
    }

    #[test]
    fn gauges_written_from_state_look_like_the_recorders_and_escape_label_values() {
        let mut text = String::new();
        write_gauges(&mut text, QUEUE_WAITING_GROUPS, []);
        assert_eq!(text, "", "no series, no family");
        write_gauges(
            &mut text,
            QUEUE_DESERVED,
            [
                (&[("queue", "a"), ("resource", "cpu")][..], 1.5),
                (&[("queue", "odd\"q\\\n"), ("resource", "memory")][..], 2.0),
            ],
        );
        let help = CATALOGUE
            .iter()
            .find(|d| d.name == QUEUE_DESERVED)
            .unwrap()
            .help;
        assert_eq!(
            text,
            format!(
                "# HELP {QUEUE_DESERVED} {help}\n# TYPE {QUEUE_DESERVED} gauge\n\
                 {QUEUE_DESERVED}{{queue=\"a\",resource=\"cpu\"}} 1.5\n\
                 {QUEUE_DESERVED}{{queue=\"odd\\\"q\\\\\\n\",resource=\"memory\"}} 2\n\n"
            )
        );
    }
}
