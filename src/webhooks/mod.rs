//! The admission webhooks: `POST /webhooks/{mutate,validate}/<resource>`, AdmissionReview v1.
//!
//! Why they exist: the extender only sees pods the scheduler sends it, and only pods that
//! carry the marker resource are sent (DESIGN "Which pods reach Gangplank"). The mutating
//! webhook is what puts the marker, the scheduling gate and normalised labels on every pod of
//! a group or queue, gives Jobs' pod templates their group and the pod templates of workloads
//! ([`workloads`]) their queue, and defaults PodGroups' queue.
//! The validating webhooks (and the queue check of the mutating pod webhook) turn mistakes that
//! would otherwise surface as a gang that never starts (a queue that does not exist, a gang
//! size larger than the Job's parallelism) into a refusal at `kubectl apply` time, with a
//! message that names the field and what it accepts.
//!
//! Shape, after linkerd's policy controller: one route per resource and direction, each a
//! thin adapter that decodes the typed AdmissionReview ([`review`]), calls a rule in the
//! resource's file ([`pods`], [`batch_v1_jobs`], [`workloads`], [`pod_groups`], [`queues`],
//! [`batch_jobs`]) and encodes its
//! [`Verdict`]. Every decision is answered with HTTP 200 and the verdict in the body; only a
//! body that is not an AdmissionReview gets HTTP 400. The rules read the cluster through the
//! [`lookup`] traits and never call the API server, so a webhook call costs microseconds and
//! cannot hang on the API server that is waiting for it.
//!
//! One wrinkle of reading from watch caches: a user who applies a Queue and a PodGroup naming
//! it in one `kubectl apply` may reach the webhook before the Queue's watch event reaches
//! Gangplank. So a "does not exist" denial ([`DenialReason::NotFound`]) is re-checked for up to
//! [`Settings::lookup_grace`] before it is sent.
//!
//! The routes are served on their own HTTPS port (`--webhook-addr`, `server.rs`), with the
//! extender's certificate and reload but no client certificate asked for, over HTTP/1.1 only,
//! each review read and decided in its turn ([`turns`]). The registrations
//! that point the API server here are in the top-level `webhooks/` directory; their selectors
//! decide which objects ever reach these routes, and their comments explain the failure
//! policies.

pub mod batch_jobs;
pub mod batch_v1_jobs;
mod checks;
mod decode;
pub mod patch;
mod pod_gate;
pub mod pod_groups;
pub mod pods;
pub mod queues;
pub mod review;
pub mod turns;
pub mod workloads;

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use axum::{Extension, Json};
use gangplank_core::model::{GroupKey, Resources};
use kube::core::admission::AdmissionRequest;
use tower_http::trace::TraceLayer;

// The lookups live with the stores that serve them (`crate::cache::lookup`).
pub use crate::api::labels::label_key_problem;
pub use crate::api::labels::name_problem;
pub use crate::cache::lookup::{self, ClusterLookup, StaticLookup};
pub use checks::{queue_field, topology_levels_problem};
pub use decode::Review;
pub use review::{Denial, DenialReason, Outcome, Verdict};

use crate::metrics;

/// Path prefix of every webhook route.
pub const PREFIX: &str = "/webhooks";

/// Largest AdmissionReview accepted; a larger one is refused with HTTP 413 before it is read
/// whole. The API server sends the object (and the old object on update): a pod with a large
/// spec and managedFields is tens of kilobytes; 4 MiB holds an object near etcd's 1.5 MiB
/// limit, twice, with room for its JSON being larger than its stored form. How many are read
/// at once is bounded too ([`turns`]).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How long a "does not exist" answer is re-checked by default (see the module docs).
pub const DEFAULT_LOOKUP_GRACE: Duration = Duration::from_secs(1);

/// How often it is re-checked meanwhile.
const LOOKUP_RETRY: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to decode {hook} AdmissionReview: {why}")]
    Decode { hook: Hook, why: String },
    #[error("failed to read {hook} AdmissionReview: {why}")]
    Read { hook: Hook, why: String },
    #[error(
        "failed to answer {hook} AdmissionReview: it waited {waited:?} for its turn behind other reviews (a flood of large or many reviews); the API server applies the webhook's failure policy"
    )]
    Busy { hook: Hook, waited: Duration },
}

/// The webhook routes, one per resource and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    MutatePods,
    MutateJobs,
    MutatePodGroups,
    MutateWorkloads,
    ValidateJobs,
    ValidatePodGroups,
    ValidateQueues,
    ValidateBatchJobs,
}

impl Hook {
    pub const ALL: [Hook; 8] = [
        Hook::MutatePods,
        Hook::MutateJobs,
        Hook::MutatePodGroups,
        Hook::MutateWorkloads,
        Hook::ValidateJobs,
        Hook::ValidatePodGroups,
        Hook::ValidateQueues,
        Hook::ValidateBatchJobs,
    ];

    /// The `webhook` metric label, also the route's last two path segments joined by `-`.
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::MutatePods => "mutate-pods",
            Hook::MutateJobs => "mutate-jobs",
            Hook::MutatePodGroups => "mutate-podgroups",
            Hook::MutateWorkloads => "mutate-workloads",
            Hook::ValidateJobs => "validate-jobs",
            Hook::ValidatePodGroups => "validate-podgroups",
            Hook::ValidateQueues => "validate-queues",
            Hook::ValidateBatchJobs => "validate-batchjobs",
        }
    }

    /// The route, as registered in `webhooks/*.yaml` (`clientConfig.service.path`).
    pub fn path(self) -> String {
        let (direction, resource) = self
            .as_str()
            .split_once('-')
            .expect("hook names are direction-resource");
        format!("{PREFIX}/{direction}/{resource}")
    }

    /// The operations the registrations send to this route (the metric series created at
    /// start-up).
    pub fn operations(self) -> &'static [&'static str] {
        match self {
            Hook::MutatePods | Hook::MutateJobs | Hook::MutateWorkloads => &["CREATE"],
            Hook::MutatePodGroups
            | Hook::ValidateJobs
            | Hook::ValidatePodGroups
            | Hook::ValidateBatchJobs => &["CREATE", "UPDATE"],
            Hook::ValidateQueues => &["CREATE", "UPDATE", "DELETE"],
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Switches of the webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Put the scheduling gate on new managed pods (`--gate-pods`).
    pub gate_pods: bool,
    /// Give members of a gang admitted on arrival the placing marker too (`--place-arrivals`).
    pub place_arrivals: bool,
    /// How long a "does not exist" denial is re-checked before it is sent.
    pub lookup_grace: Duration,
    /// The scheduler names served (`--scheduler-names`).
    pub schedulers: gangplank_core::model::Schedulers,
    /// How many reviews are read and decided at once ([`turns`]).
    pub limits: turns::Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            gate_pods: true,
            place_arrivals: false,
            lookup_grace: DEFAULT_LOOKUP_GRACE,
            schedulers: Default::default(),
            limits: Default::default(),
        }
    }
}

/// Admission on arrival ([`gangplank_core::admit::on_arrival`]), as the pod webhook asks for it.
pub trait Arrivals: Send + Sync {
    /// Whether a new member `name` of `group` asking `requests` (as they count against a
    /// node) is created without the admission gate.
    fn admit_on_arrival(&self, group: &GroupKey, name: &str, requests: &Resources) -> bool;
}

/// Admission on arrival as the leader's ledger decides it, while this replica may write as the
/// leader ([`crate::fence`]); every replica serves the webhooks, but only the leader's ledger
/// holds the door and counts the arrivals, so a follower (its fence closed) gates every pod and
/// two replicas' counts can never together let in more than one leader's would. A follower's
/// ledger is therefore never written here.
pub struct LeaderArrivals {
    ledger: crate::cache::LedgerWriter,
    fence: crate::fence::Fence,
}

impl LeaderArrivals {
    pub fn new(ledger: crate::cache::LedgerWriter, fence: crate::fence::Fence) -> Self {
        LeaderArrivals { ledger, fence }
    }
}

impl Arrivals for LeaderArrivals {
    fn admit_on_arrival(&self, group: &GroupKey, name: &str, requests: &Resources) -> bool {
        self.fence.is_open()
            && self.ledger.admit_on_arrival(
                group,
                name,
                requests,
                tokio::time::Instant::now().into_std(),
            )
    }
}

/// What the handlers share: the cluster lookups, admission on arrival, and the settings.
pub struct Webhooks {
    lookup: Arc<dyn ClusterLookup>,
    arrivals: Option<Arc<dyn Arrivals>>,
    settings: Settings,
}

impl Webhooks {
    pub fn new(lookup: Arc<dyn ClusterLookup>, settings: Settings) -> Self {
        Self {
            lookup,
            arrivals: None,
            settings,
        }
    }

    /// Lets gangs be admitted on arrival (without it, every new managed pod is gated).
    pub fn with_arrivals(mut self, arrivals: Arc<dyn Arrivals>) -> Self {
        self.arrivals = Some(arrivals);
        self
    }

    pub fn lookup(&self) -> &dyn ClusterLookup {
        self.lookup.as_ref()
    }

    pub fn arrivals(&self) -> Option<&dyn Arrivals> {
        self.arrivals.as_deref()
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// The webhook routes under [`PREFIX`], traced, with per-route metrics, each review in its
/// turn ([`turns`]).
pub fn router(webhooks: Arc<Webhooks>) -> Router {
    let turns = turns::Turns::new(webhooks.settings.limits);
    let route = |hook: Hook, method: MethodRouter<Arc<Webhooks>>| {
        let method: MethodRouter<Arc<Webhooks>> = method
            .layer::<_, Infallible>(middleware::from_fn_with_state(
                (turns.clone(), hook),
                turns::take_turn,
            ))
            .layer::<_, Infallible>(middleware::from_fn_with_state(hook, observe))
            .layer(Extension(hook));
        (hook.path(), method)
    };
    [
        route(Hook::MutatePods, post(mutate_pods)),
        route(Hook::MutateJobs, post(mutate_jobs)),
        route(Hook::MutatePodGroups, post(mutate_pod_groups)),
        route(Hook::MutateWorkloads, post(mutate_workloads)),
        route(Hook::ValidateJobs, post(validate_jobs)),
        route(Hook::ValidatePodGroups, post(validate_pod_groups)),
        route(Hook::ValidateQueues, post(validate_queues)),
        route(Hook::ValidateBatchJobs, post(validate_batch_jobs)),
    ]
    .into_iter()
    .fold(Router::new(), |router, (path, method)| {
        router.route(&path, method)
    })
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
    .layer(TraceLayer::new_for_http())
    .with_state(webhooks)
}

async fn mutate_pods(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<k8s_openapi::api::core::v1::Pod>,
) -> Response {
    decide(&w, &r, pods::mutate).await
}

async fn mutate_jobs(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<k8s_openapi::api::batch::v1::Job>,
) -> Response {
    decide(&w, &r, batch_v1_jobs::mutate).await
}

async fn mutate_workloads(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<kube::api::DynamicObject>,
) -> Response {
    decide(&w, &r, workloads::mutate).await
}

async fn validate_jobs(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<k8s_openapi::api::batch::v1::Job>,
) -> Response {
    decide(&w, &r, batch_v1_jobs::validate).await
}

async fn mutate_pod_groups(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<crate::api::PodGroup>,
) -> Response {
    decide(&w, &r, pod_groups::mutate).await
}

async fn validate_pod_groups(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<crate::api::PodGroup>,
) -> Response {
    decide(&w, &r, pod_groups::validate).await
}

async fn validate_queues(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<crate::api::Queue>,
) -> Response {
    decide(&w, &r, queues::validate).await
}

async fn validate_batch_jobs(
    State(w): State<Arc<Webhooks>>,
    Review(r): Review<crate::api::batch_job::BatchJob>,
) -> Response {
    decide(&w, &r, batch_jobs::validate).await
}

/// A rule: the verdict on one request, or the denial that ends it early.
type Rule<K> = fn(&Webhooks, &AdmissionRequest<K>) -> Result<Verdict, Denial>;

/// Runs `rule`, re-checking a "does not exist" denial for up to the lookup grace, and answers.
async fn decide<K: kube::Resource>(
    webhooks: &Webhooks,
    request: &AdmissionRequest<K>,
    rule: Rule<K>,
) -> Response {
    // Tokio's clock, so that tests with a paused clock do not wait for real.
    let deadline = tokio::time::Instant::now() + webhooks.settings.lookup_grace;
    let verdict = loop {
        let verdict = Verdict::from(rule(webhooks, request));
        let not_found = matches!(&verdict, Verdict::Deny(d) if d.reason == DenialReason::NotFound);
        if !not_found || tokio::time::Instant::now() + LOOKUP_RETRY > deadline {
            break verdict;
        }
        tokio::time::sleep(LOOKUP_RETRY).await;
    };
    if let Verdict::Deny(denial) = &verdict {
        tracing::info!(
            uid = %request.uid,
            namespace = request.namespace.as_deref().unwrap_or_default(),
            name = %request.name,
            reason = denial.reason.as_str(),
            message = %denial.message,
            "denied"
        );
    }
    let mut response = Json(review::response(request, &verdict)).into_response();
    response.extensions_mut().insert(Observed {
        operation: review::operation_str(&request.operation),
        outcome: verdict.outcome(),
    });
    response
}

/// What a handler tells the metrics layer about the request it answered.
#[derive(Debug, Clone, Copy)]
struct Observed {
    operation: &'static str,
    outcome: Outcome,
}

/// Creates every `webhook` x `operation` x `outcome` series at zero, so dashboards, alerts
/// and the generated metric table see them before the first request.
pub fn register_metrics() {
    for hook in Hook::ALL {
        for operation in hook.operations() {
            for outcome in Outcome::ALL {
                ::metrics::counter!(
                    metrics::WEBHOOK_REQUESTS_TOTAL,
                    "webhook" => hook.as_str(),
                    "operation" => *operation,
                    "outcome" => outcome.as_str()
                )
                .absolute(0);
            }
        }
        let _ = ::metrics::histogram!(metrics::WEBHOOK_REQUEST_DURATION_SECONDS, "webhook" => hook.as_str());
    }
}

/// Records the route's count and latency.
async fn observe(State(hook): State<Hook>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let response = next.run(request).await;
    let observed = response
        .extensions()
        .get::<Observed>()
        .copied()
        .unwrap_or(Observed {
            // The body did not say: it was not an AdmissionReview.
            operation: "unknown",
            outcome: Outcome::Error,
        });
    ::metrics::counter!(
        metrics::WEBHOOK_REQUESTS_TOTAL,
        "webhook" => hook.as_str(),
        "operation" => observed.operation,
        "outcome" => observed.outcome.as_str()
    )
    .increment(1);
    ::metrics::histogram!(metrics::WEBHOOK_REQUEST_DURATION_SECONDS, "webhook" => hook.as_str())
        .record(started.elapsed().as_secs_f64());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_follower_gates_every_member_of_a_group_admitted_ahead_and_counts_nothing() {
        use gangplank_core::model::PodGroup;
        let (cache, mut mirror) = crate::cache::Cache::new();
        let key = GroupKey::new("ns", "vc");
        mirror.apply_pod_group(PodGroup {
            min_resources: Resources::from([("cpu", 2_000)]),
            ahead: true,
            admitted_at: Some(crate::clock::unix_now()),
            ..PodGroup::new(key.clone(), 2, "q")
        });
        let fence = crate::fence::Fence::closed();
        let arrivals = LeaderArrivals::new(cache.ledger(), fence.clone());
        let cpu = Resources::from([("cpu", 1_000)]);
        // Two replicas serve the webhook: while this one follows, its members are gated, so
        // the leader's count alone lets minMember in.
        for i in 0..4 {
            assert!(!arrivals.admit_on_arrival(&key, &format!("vc-{i}"), &cpu));
        }
        assert!(
            cache.read(|s| s.ledger().ahead_arrivals().is_empty()),
            "a follower's ledger is not written"
        );
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(10));
        let passed: Vec<bool> = (4..8)
            .map(|i| arrivals.admit_on_arrival(&key, &format!("vc-{i}"), &cpu))
            .collect();
        assert_eq!(passed, [true, true, false, false]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_former_leader_gates_every_pod_once_its_fence_closes_whatever_its_ledger_holds() {
        use gangplank_core::model::PodGroup;
        let (cache, mut mirror) = crate::cache::Cache::new();
        let key = GroupKey::new("ns", "vc");
        mirror.apply_pod_group(PodGroup {
            min_resources: Resources::from([("cpu", 8_000)]),
            ahead: true,
            admitted_at: Some(crate::clock::unix_now()),
            ..PodGroup::new(key.clone(), 8, "q")
        });
        let fence = crate::fence::Fence::closed();
        let arrivals = LeaderArrivals::new(cache.ledger(), fence.clone());
        let cpu = Resources::from([("cpu", 1_000)]);
        let counted = || cache.read(|s| s.ledger().ahead_arrivals().get(&key).map_or(0, Vec::len));
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(10));
        assert!(
            arrivals.admit_on_arrival(&key, "vc-0", &cpu),
            "the leader lets one in"
        );

        // It stops leading (the Lease lost or given up): its ledger would let seven more in,
        // but it gates every pod and counts none.
        fence.close();
        assert!(!arrivals.admit_on_arrival(&key, "vc-1", &cpu));
        assert_eq!(counted(), 1, "a former leader's ledger is not written");

        // Leading again, then its renewals stop: the fence closes at its deadline by itself.
        fence.open_until(tokio::time::Instant::now() + Duration::from_secs(10));
        assert!(arrivals.admit_on_arrival(&key, "vc-2", &cpu));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!arrivals.admit_on_arrival(&key, "vc-3", &cpu));
        assert_eq!(counted(), 2);
    }

    #[test]
    fn label_keys_have_an_optional_dns_prefix_and_a_short_name() {
        for good in [
            "zone",
            "topology.kubernetes.io/zone",
            "example.com/rack_1",
            "Rack.A",
        ] {
            assert_eq!(label_key_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "/zone",
            "a/b/c",
            "Example.com/zone",
            "zone-",
            "x".repeat(64).as_str(),
        ] {
            assert!(label_key_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn each_hook_has_its_own_path_under_the_prefix() {
        let paths: Vec<String> = Hook::ALL.iter().map(|h| h.path()).collect();
        assert_eq!(
            paths,
            [
                "/webhooks/mutate/pods",
                "/webhooks/mutate/jobs",
                "/webhooks/mutate/podgroups",
                "/webhooks/mutate/workloads",
                "/webhooks/validate/jobs",
                "/webhooks/validate/podgroups",
                "/webhooks/validate/queues",
                "/webhooks/validate/batchjobs",
            ]
        );
    }

    #[test]
    fn names_must_be_lowercase_dns_labels_that_fit_a_label_value() {
        for good in ["a", "train-1", "team.a", "x".repeat(63).as_str()] {
            assert_eq!(name_problem(good), None, "{good}");
        }
        for bad in ["", "Train", "a_b", "-a", "a.", "x".repeat(64).as_str()] {
            assert!(name_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(
            name_problem("My_Group").unwrap(),
            "must be at most 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit, got \"My_Group\""
        );
    }
}
