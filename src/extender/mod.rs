//! The kube-scheduler HTTP extender: `POST /scheduler/{filter,prioritize,preempt,bind}`.
//!
//! Why it exists: it is how Gangplank takes part in the stock scheduler's decisions without
//! replacing it (see `docs/DESIGN.md`). This module is a thin adapter: it decodes the wire
//! format ([`wire`], exactly what a stock kube-scheduler sends), asks for a decision, and
//! encodes the answer. Requests never panic on bad input: a body that is not the expected JSON
//! gets HTTP 400 with the decoder's reason, and a request that decodes but cannot be served
//! gets HTTP 200 with the reason in the `Error` field, as the protocol wants.
//!
//! Pods in no group pass straight through, decided from their labels alone: filter keeps every
//! candidate, prioritize answers no score (`[]`, as if no extender were asked), bind binds at
//! once. For gang members, filter goes through the gang's claim ([`gangplank_core::claims`]),
//! prioritize prefers the nodes of the gang's claim and then packs (or spreads, `--placement`),
//! and bind holds the call until quorum ([`permit`]). Preempt accepts only victim lists that
//! policy allows.
//!
//! Also here: per-verb metrics ([`crate::metrics`]) and the `--capture-dir` switch that saves
//! every request body for golden fixtures ([`capture`]).

pub mod binder;
pub mod capture;
pub mod encode;
pub mod expiry;
pub mod handlers;
mod json_scan;
mod node_names;
pub mod permit;
mod split;
pub mod wire;

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::trace::TraceLayer;

pub use binder::{BindRequest, Binder, KubeBinder};
pub use capture::Capture;
pub use permit::Permits;

use crate::cache::{Cache, LedgerWriter};
use crate::metrics;
use gangplank_core::claims::Settings;

/// Path prefix of every verb; the scheduler's `urlPrefix` ends with it.
pub const PREFIX: &str = "/scheduler";

/// Largest request body accepted; a larger one is refused with HTTP 413 before it is read
/// whole. Filter bodies with full `Nodes` (not `nodeCacheCapable`) carry every candidate node,
/// status and images included: a stock scheduler at 5,000 nodes finds at most 500 feasible
/// nodes per pod with its default sampling, 15 MB at 30 KiB a node. The shipped configuration
/// sends names, about 20 bytes a node.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Filter, prioritize and preempt calls decided at once; more wait their turn. The scheduler
/// makes these calls one scheduling cycle at a time, so only a flood reaches the limit, and
/// it bounds the memory the bodies in flight take (with [`MAX_BODY_BYTES`]). Binds are not
/// limited: a gang's held binds must all be in flight at once to reach quorum.
pub const MAX_CONCURRENT_DECISIONS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to decode {verb} request: {why}")]
    Decode { verb: Verb, why: String },
    #[error("failed to bind pod: {field} is empty")]
    MissingField { field: &'static str },
    #[error("failed to bind pod {namespace}/{name} to node {node}: {why}")]
    Bind {
        namespace: String,
        name: String,
        node: String,
        why: String,
    },
    #[error("failed to bind pod: the held bind call was dropped (Gangplank is shutting down)")]
    Dropped,
    #[error("failed to {verb} pod {pod}: {why}")]
    Gang {
        verb: Verb,
        pod: String,
        why: String,
    },
    #[error("failed to capture {verb} request in {path}: {why}")]
    Capture {
        verb: Verb,
        path: std::path::PathBuf,
        why: std::io::Error,
    },
}

/// The four extender verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Filter,
    Prioritize,
    Preempt,
    Bind,
}

impl Verb {
    pub const ALL: [Verb; 4] = [Verb::Filter, Verb::Prioritize, Verb::Preempt, Verb::Bind];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Filter => "filter",
            Verb::Prioritize => "prioritize",
            Verb::Preempt => "preempt",
            Verb::Bind => "bind",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the handlers share.
pub struct Extender {
    cache: Cache,
    ledger: LedgerWriter,
    settings: Settings,
    permits: Arc<Permits>,
    capture: Option<Capture>,
}

/// How long a bind waits for Gangplank's pod watch to show a pod the scheduler already placed,
/// released from Gangplank's gate.
pub const POD_WATCH_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

impl Extender {
    /// Waits, at most [`POD_WATCH_GRACE`], until the cache holds pod `uid` without Gangplank's
    /// gate: the scheduler's own watch may show a new pod, or a pod the admission loop has just
    /// released, before Gangplank's does, and a bind refused for that costs the pod a retry
    /// after the scheduler's backoff. Bind refuses a pod still gated after that
    /// ([`gangplank_core::claims::Error::NotAdmitted`]).
    pub async fn pod_seen(&self, uid: &str) {
        let mut changes = self.cache.subscribe();
        let deadline = tokio::time::Instant::now() + POD_WATCH_GRACE;
        let released = |s: &gangplank_core::model::State| {
            s.pods().get(uid).is_some_and(|p| !p.awaits_admission())
        };
        while !self.cache.read(released) {
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return,
            }
        }
    }

    /// An extender deciding from `cache` and binding through `binder`.
    pub fn new(cache: Cache, binder: Arc<dyn Binder>, settings: Settings) -> Self {
        Self {
            permits: Arc::new(Permits::new(cache.ledger(), binder, settings)),
            ledger: cache.ledger(),
            cache,
            settings,
            capture: None,
        }
    }

    /// The held bind calls, for shutdown and tests.
    pub fn permits(&self) -> Arc<Permits> {
        self.permits.clone()
    }

    /// Saves every request body through `capture`.
    pub fn with_capture(mut self, capture: Capture) -> Self {
        self.capture = Some(capture);
        self
    }
}

/// The extender's routes under [`PREFIX`], traced, with per-verb metrics.
pub fn router(extender: Arc<Extender>) -> Router {
    let verb = |verb: Verb, route: MethodRouter<Arc<Extender>>| {
        (
            format!("{PREFIX}/{verb}"),
            route.layer(middleware::from_fn_with_state(verb, observe)),
        )
    };
    let deciding = Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_DECISIONS));
    let limited = |route: MethodRouter<Arc<Extender>>| {
        route
            .layer::<_, Infallible>(middleware::from_fn(waited))
            .layer(GlobalConcurrencyLimitLayer::with_semaphore(
                deciding.clone(),
            ))
    };
    let routes = [
        verb(Verb::Filter, limited(post(handlers::filter))),
        verb(Verb::Prioritize, limited(post(handlers::prioritize))),
        verb(Verb::Preempt, limited(post(handlers::preempt))),
        verb(Verb::Bind, post(handlers::bind)),
    ];
    routes
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            router.route(&path, route)
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(extender)
}

/// How a request ended, for `gangplank_extender_requests_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Answered with a non-empty `Error`, or failed on our side.
    Error,
    /// A filter answered with an `Error` that asks the scheduler to try the pod again: no node
    /// has room Gangplank does not hold ([`gangplank_core::claims::FilterVerdict::retry_later`]).
    Waits,
    /// HTTP 4xx: the body was not the expected JSON (or did not arrive in time).
    BadRequest,
    /// HTTP 413: the body was larger than [`MAX_BODY_BYTES`].
    TooLarge,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Waits => "waits",
            Outcome::BadRequest => "bad_request",
            Outcome::TooLarge => "too_large",
        }
    }
}

/// Creates every `verb` x `outcome` series at zero, so dashboards, alerts and the generated
/// metric table see them before the first request.
pub fn register_metrics() {
    for verb in Verb::ALL {
        for outcome in [
            Outcome::Ok,
            Outcome::Error,
            Outcome::Waits,
            Outcome::BadRequest,
            Outcome::TooLarge,
        ] {
            ::metrics::counter!(
                metrics::EXTENDER_REQUESTS_TOTAL,
                "verb" => verb.as_str(),
                "outcome" => outcome.as_str()
            )
            .absolute(0);
        }
        // Registering is enough for the exporter to render empty buckets.
        let _ = ::metrics::histogram!(metrics::EXTENDER_REQUEST_DURATION_SECONDS, "verb" => verb.as_str());
        if verb != Verb::Bind {
            let _ = ::metrics::histogram!(metrics::EXTENDER_DECISION_WAIT_SECONDS, "verb" => verb.as_str());
        }
    }
}

/// When a request reached the extender, before it waited for a decision slot.
#[derive(Debug, Clone, Copy)]
struct Arrived(Instant);

/// Records how long a filter, prioritize or preempt call waited for one of the
/// [`MAX_CONCURRENT_DECISIONS`] slots.
async fn waited(request: Request, next: Next) -> Response {
    let extensions = request.extensions();
    if let (Some(Arrived(at)), Some(verb)) = (extensions.get(), extensions.get::<Verb>()) {
        ::metrics::histogram!(metrics::EXTENDER_DECISION_WAIT_SECONDS, "verb" => verb.as_str())
            .record(at.elapsed().as_secs_f64());
    }
    next.run(request).await
}

/// Records the verb's count and latency; tells handlers their verb through an extension.
async fn observe(State(verb): State<Verb>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    request.extensions_mut().insert(verb);
    request.extensions_mut().insert(Arrived(started));
    let response = next.run(request).await;
    let outcome = match response.extensions().get::<Outcome>() {
        Some(outcome) => *outcome,
        None if response.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => Outcome::TooLarge,
        None if response.status().is_client_error() => Outcome::BadRequest,
        None if response.status().is_success() => Outcome::Ok,
        None => Outcome::Error,
    };
    ::metrics::counter!(
        metrics::EXTENDER_REQUESTS_TOTAL,
        "verb" => verb.as_str(),
        "outcome" => outcome.as_str()
    )
    .increment(1);
    ::metrics::histogram!(metrics::EXTENDER_REQUEST_DURATION_SECONDS, "verb" => verb.as_str())
        .record(started.elapsed().as_secs_f64());
    response
}

/// A JSON request body, decoded whatever its content type (the scheduler sends
/// `application/json`, but nothing is gained by refusing a mislabelled body). A body that
/// does not decode is rejected with HTTP 400 and the decoder's reason.
pub struct Wire<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Arc<Extender>> for Wire<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &Arc<Extender>) -> Result<Self, Response> {
        let Body(verb, body) = Body::from_request(request, state).await?;
        decode(verb, &body).map(Wire).map_err(bad_request)
    }
}

/// A request body and its verb, read whole, for handlers that decode it borrowed
/// ([`decode`]). When capture is on, the raw body is saved first.
pub struct Body(pub Verb, pub Bytes);

impl FromRequest<Arc<Extender>> for Body {
    type Rejection = Response;

    async fn from_request(request: Request, state: &Arc<Extender>) -> Result<Self, Response> {
        let verb = request
            .extensions()
            .get::<Verb>()
            .copied()
            .unwrap_or(Verb::Filter);
        let body = Bytes::from_request(request, state).await.map_err(|e| {
            let status = e.status();
            let why = e.body_text();
            (status, format!("failed to read {verb} request: {why}\n")).into_response()
        })?;
        if let Some(capture) = &state.capture
            && let Err(e) = capture.save(verb, body.clone()).await
        {
            tracing::warn!(error = %e, "capture");
        }
        Ok(Body(verb, body))
    }
}

/// Decodes a `verb` request body; the error carries the decoder's reason (for HTTP 400).
pub fn decode<'a, T: Deserialize<'a>>(verb: Verb, body: &'a [u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Decode {
        verb,
        why: e.to_string(),
    })
}

/// A filter or prioritize request: split by a plain scan when it can (`split`), else decoded
/// by serde (with serde's error).
pub fn decode_args(verb: Verb, body: &[u8]) -> Result<wire::ExtenderArgsRef<'_>, Error> {
    match split::args(body) {
        Some(args) => Ok(args),
        None => decode(verb, body),
    }
}

/// HTTP 400 with the error as plain text.
pub fn bad_request(error: Error) -> Response {
    tracing::debug!(error = %error, "bad extender request");
    (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response()
}
